"""The Procgen AutoRL paper's set-up in a real run: ``--param-set autorl --explore pb2-mix`` on bigfish
under mpiexec -n 4, at a reduced budget (tiny rollouts, 3 generations then 4 on --resume). DrAC's
aug_type and aug_coef are explored: recorded in population.csv, the lineage, TensorBoard and the
plots, trained with by the recipient, and the bandit's history continues on resume."""

import json

import pytest
import yaml

from evo.rundir.history import load_run
from tests.e2e.runs import plots
from tests.support import TINY_PROCGEN, last_manifest, mpiexec, read_lineage, read_population, write_hyperparams

AUGMENTATIONS = ["crop", "random-conv", "grayscale", "flip", "rotate", "cutout", "cutout-color", "color-jitter"]
PAPER_SPACE = ["learning_rate", "ent_coef", "clip_range", "aug_coef", "aug_type"]


def autorl(run_dir, hyperparams, *extra):
    flags = ["--env-id", "bigfish", "--param-set", "autorl", "--explore", "pb2-mix", "--conf-file", str(hyperparams)]
    budget = ["--agent-training-steps", "64", "--total-generations", "3", "--tb-writer", "True"]
    result = mpiexec(4, ["pbt_rl_truct.py", *flags, *budget, "--run-dir", str(run_dir), "--seed", "4", *extra])
    assert result.returncode == 0, result.stderr[-4000:]
    return result


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("autorl")
    hyperparams = write_hyperparams(base, TINY_PROCGEN)
    run_dir = base / "run"
    autorl(run_dir, hyperparams)
    return run_dir, hyperparams


def test_the_papers_set_up_starts_and_passes_its_decisions(run):
    run_dir, _ = run
    config = (run_dir / "config.yaml").read_text()
    for line in ("num_levels: 200", "distribution_mode: easy", "score_window: 100", "explore: pb2-mix"):
        assert line in config
    rows = read_population(run_dir)
    assert len(rows) == 4 * 3
    assert list(rows[0])[6 : 6 + len(PAPER_SPACE)] == PAPER_SPACE
    for row in rows:
        assert row["aug_type"] in AUGMENTATIONS and 0.01 <= float(row["aug_coef"]) <= 0.5
    lineage = read_lineage(run_dir)
    assert [e["generation"] for e in lineage] == [1, 2, 3]  # a quarter of 4 members: one decision a generation
    for exploit in lineage:
        hows = {c.split(" : ")[0]: c for c in exploit["changes"]}
        assert set(hows) == set(PAPER_SPACE)
        if exploit["generation"] > 1:  # generation 1 warms up: no starting scores yet
            assert "(pb2-mix bandit)" in hows["aug_type"] and "(pb2)" in hows["aug_coef"]
        if exploit["generation"] < 3:  # the recipient trained the next generation with what it got
            row = next(
                r
                for r in rows
                if int(r["generation"]) == exploit["generation"] + 1 and int(r["member"]) == exploit["recipient"]
            )
            assert row["aug_type"] == exploit["new_hparams"]["aug_type"]
            assert float(row["aug_coef"]) == pytest.approx(exploit["new_hparams"]["aug_coef"])


def test_tensorboard_and_plots_show_the_augmentation(run, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = run
    history = load_run(run_dir)
    for member in range(4):
        events = EventAccumulator(str(run_dir / "tb" / f"member_{member}")).Reload()
        aug_types = [AUGMENTATIONS[int(e.value)] for e in events.Scalars("hparams/aug_type")]
        assert aug_types == [history.row(g, member).hparams["aug_type"] for g in (1, 2, 3)]
        assert len(events.Scalars("hparams/aug_coef")) == 3
    for png in plots(run_dir, tmp_path).values():
        assert png.stat().st_size > 10_000


def test_the_bandits_history_continues_on_resume(run):
    run_dir, hyperparams = run
    before = last_manifest(run_dir)["explorer"]
    assert before["name"] == "pb2-mix"
    result = mpiexec(4, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--total-generations", "4"])
    assert result.returncode == 0, result.stderr[-4000:]
    after = last_manifest(run_dir)["explorer"]
    assert after["name"] == "pb2-mix"
    observations = after["state"]["observations"]
    assert observations[: len(before["state"]["observations"])] == before["state"]["observations"]
    assert [t for t, _, _ in observations][-4:] == [4] * 4
    rows = read_population(run_dir)
    assert len(rows) == 16 and all(r["aug_type"] in AUGMENTATIONS for r in rows)
    assert any("(pb2-mix bandit)" in c for e in read_lineage(run_dir) if e["generation"] == 4 for c in e["changes"])


def test_the_studys_reevaluation_plays_every_member_on_fresh_levels(run):
    """experiments/reevaluate.py, the number the Procgen study reports: evo-evaluate's, each member of
    the last checkpoint and the kept best on episodes of levels the run never saw, actions sampled
    from the policy (Procgen's default, as DrAC's test.py), cached in the run dir."""
    from evo.tools.saved import evaluation_seed
    from tests.e2e.runs import python

    run_dir, _ = run
    levels = ("--start-level", "50000", "--num-levels", "1000")
    result = python("experiments/reevaluate.py", str(run_dir), "--episodes", "2", *levels)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = json.loads((run_dir / "reevaluation.json").read_text())
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["how"] == {
        "tool": "evo-evaluate", "episodes": 2, "envs": 2, "seed": evaluation_seed(config["seed"]),
        "levels": [50000, 1000], "actions": "sampled",
    }  # fmt: skip
    assert sorted(saved["members"]) == ["0", "1", "2", "3"]
    assert all(len(returns) == 2 and all(r >= 0 for r in returns) for returns in saved["members"].values())
    kept = saved["best_ever"]  # the run's highest selection score, its weights as scored
    scored = [row for row in read_population(run_dir) if row["score"] not in ("", "nan")]
    best = max(scored, key=lambda row: float(row["score"]))
    assert (kept["member"], kept["generation"]) == (int(best["member"]), int(best["generation"]))
    assert len(kept["returns"]) == 2
    assert [f"member {m}: mean" in result.stdout for m in range(4)] == [True] * 4
    again = python("experiments/reevaluate.py", str(run_dir), "--episodes", "2", *levels)
    assert again.stdout == result.stdout  # the same episodes, read back from the cache
