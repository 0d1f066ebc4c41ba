"""The Procgen AutoRL paper's set-up in a whole run in one process (tests/support.py:run_in_process):
``--param-set autorl --explore pb2-mix`` on bigfish, 4 members at a reduced budget (tiny rollouts, 3
generations then 4 on --resume). DrAC's aug_type and aug_coef are explored: recorded in population.csv, the
lineage, TensorBoard and the plots, trained with by the recipient, and the bandit's history continues on
resume; the study's re-evaluation plays every member on fresh levels. Moved down from the e2e tier, where it
ran under mpiexec -n 4: what it checks is the set-up's, the explorer's, the records' and the tools', not MPI's."""

import json

import pytest
import yaml

from evo.rundir.history import load_run
from tests.in_process import logged, plots
from tests.support import TINY_PROCGEN, last_manifest, read_lineage, read_population, write_hyperparams

AUGMENTATIONS = ["crop", "random-conv", "grayscale", "flip", "rotate", "cutout", "cutout-color", "color-jitter"]
PAPER_SPACE = ["learning_rate", "ent_coef", "clip_range", "aug_coef", "aug_type"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The paper's set-up, 4 members, 3 generations of 64 env steps, TensorBoard on: its run directory."""
    base = tmp_path_factory.mktemp("autorl")
    hyperparams = write_hyperparams(base, TINY_PROCGEN)
    run_dir = base / "run"
    flags = ["--env-id", "bigfish", "--param-set", "autorl", "--explore", "pb2-mix", "--conf-file", str(hyperparams)]
    budget = ["--num-agents", "4", "--agent-training-steps", "64", "--total-generations", "3", "--tb-writer", "True"]
    status, log = logged([*flags, *budget, "--run-dir", str(run_dir), "--seed", "4"])
    assert status == 0, log[-3000:]
    return run_dir


def test_the_papers_set_up_starts_and_passes_its_decisions(run):
    config = (run / "config.yaml").read_text()
    for line in ("num_levels: 200", "distribution_mode: easy", "score_window: 100", "explore: pb2-mix"):
        assert line in config
    rows = read_population(run)
    assert len(rows) == 4 * 3
    assert list(rows[0])[6 : 6 + len(PAPER_SPACE)] == PAPER_SPACE
    for row in rows:
        assert row["aug_type"] in AUGMENTATIONS and 0.01 <= float(row["aug_coef"]) <= 0.5
    lineage = read_lineage(run)
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

    history = load_run(run)
    for member in range(4):
        events = EventAccumulator(str(run / "tb" / f"member_{member}")).Reload()
        aug_types = [AUGMENTATIONS[int(e.value)] for e in events.Scalars("hparams/aug_type")]
        assert aug_types == [history.row(g, member).hparams["aug_type"] for g in (1, 2, 3)]
        assert len(events.Scalars("hparams/aug_coef")) == 3
    for png in plots(run, tmp_path).values():
        assert png.stat().st_size > 10_000


def test_the_bandits_history_continues_on_resume(run):
    before = last_manifest(run)["explorer"]
    assert before["name"] == "pb2-mix"
    status, log = logged(["--run-dir", str(run), "--resume", "--total-generations", "4"])
    assert status == 0, log[-3000:]
    after = last_manifest(run)["explorer"]
    assert after["name"] == "pb2-mix"
    observations = after["state"]["observations"]
    assert observations[: len(before["state"]["observations"])] == before["state"]["observations"]
    assert [t for t, _, _ in observations][-4:] == [4] * 4
    rows = read_population(run)
    assert len(rows) == 16 and all(r["aug_type"] in AUGMENTATIONS for r in rows)
    assert any("(pb2-mix bandit)" in c for e in read_lineage(run) if e["generation"] == 4 for c in e["changes"])


def test_the_studys_reevaluation_plays_every_member_on_fresh_levels(run, capsys):
    """experiments/reevaluate.py (its main, in this process), the number the Procgen study reports:
    evo-evaluate's, each member of the last checkpoint and the kept best on episodes of levels the run never
    saw, actions sampled from the policy (Procgen's default, as DrAC's test.py), cached in the run dir."""
    from evo.tools.saved import evaluation_seed
    from experiments.reevaluate import main as reevaluate

    levels = ["--start-level", "50000", "--num-levels", "1000"]
    assert reevaluate([str(run), "--episodes", "2", *levels]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((run / "reevaluation.json").read_text())
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["how"] == {
        "tool": "evo-evaluate", "episodes": 2, "envs": 2, "seed": evaluation_seed(config["seed"]),
        "levels": [50000, 1000], "actions": "sampled",
    }  # fmt: skip
    assert sorted(saved["members"]) == ["0", "1", "2", "3"]
    assert all(len(returns) == 2 and all(r >= 0 for r in returns) for returns in saved["members"].values())
    kept = saved["best_ever"]  # the run's highest selection score, its weights as scored
    scored = [row for row in read_population(run) if row["score"] not in ("", "nan")]
    best = max(scored, key=lambda row: float(row["score"]))
    assert (kept["member"], kept["generation"]) == (int(best["member"]), int(best["generation"]))
    assert len(kept["returns"]) == 2
    assert [f"member {m}: mean" in printed for m in range(4)] == [True] * 4
    assert reevaluate([str(run), "--episodes", "2", *levels]) == 0
    assert capsys.readouterr().out == printed  # the same episodes, read back from the cache
