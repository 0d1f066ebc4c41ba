"""PB2 explore in real runs: every selection mode under mpiexec, the lineage, and --resume."""

import pytest
import yaml

from evo.core.kinds import kind_from_spec
from tests.support import PPO_SIX, last_manifest, mpiexec, read_lineage, read_population


def pb2_run(run_dir, script, hyperparams, generations, *extra):
    flags = ["--num-agents", "4", "--agent-training-steps", "256", "--hyperparams", str(hyperparams)]
    result = mpiexec(
        2,
        [script, *flags, "--total-generations", str(generations), "--run-dir", str(run_dir), "--seed", "2", *extra],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def pb2_history(run_dir):
    """PB2's state in the last checkpoint's manifest (the explorer's state, under its name)."""
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == "pb2"
    return explorer["state"]


@pytest.mark.parametrize(
    "script, recipients", [("pbt_rl_wta.py", 3), ("pbt_rl_truct.py", 1), ("pbt_rl_truct_collective.py", 1)]
)
def test_pb2_explores_in_every_selection_mode(tmp_path, tiny_hyperparams, script, recipients):
    run_dir = tmp_path / "run"
    result = pb2_run(run_dir, script, tiny_hyperparams, 3, "--explore", "pb2")
    assert "(pb2 explore)" in result.stdout
    space = {
        name: kind_from_spec(spec)
        for name, spec in yaml.safe_load((run_dir / "config.yaml").read_text())["agent"]["search_space"].items()
    }
    lineage = read_lineage(run_dir)
    assert len(lineage) == 3 * recipients
    rows = read_population(run_dir)
    for exploit in lineage:
        # generation 1 has no measured starting scores: PB2 warms up with perturb/resample
        marker = "(pb2 warm-up: " if exploit["generation"] == 1 else "(pb2) "
        assert len(exploit["changes"]) == len(PPO_SIX) and all(marker in c for c in exploit["changes"])
        for name, value in exploit["new_hparams"].items():
            assert space[name].low <= value <= space[name].high, (name, value)
        if exploit["generation"] < 3:  # the recipient trains with what PB2 chose
            row = next(
                r
                for r in rows
                if int(r["generation"]) == exploit["generation"] + 1 and int(r["member"]) == exploit["recipient"]
            )
            assert {k: float(row[k]) for k in PPO_SIX} == pytest.approx(exploit["new_hparams"])
    if recipients > 1:  # one batch: the picks of one generation differ from each other
        later = [tuple(e["new_hparams"].values()) for e in lineage if e["generation"] == 3]
        assert len(set(later)) == recipients
    # PB2's history is in the checkpoint: a change in score per member for generations 2 and 3
    history = pb2_history(run_dir)
    assert [t for t, _, _ in history["observations"]] == [2] * 4 + [3] * 4
    scores = {(int(r["generation"]), int(r["member"])): float(r["score"]) for r in rows}
    donors = {(e["generation"], e["recipient"]): e["donor"] for e in lineage}
    for member in range(4):  # the baseline each member starts generation 4 from: its donor's score
        source = donors.get((3, member), member)
        assert history["baselines"][str(member)] == pytest.approx(scores[(3, source)])


def test_pb2_history_survives_resume(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    pb2_run(run_dir, "pbt_rl_truct.py", tiny_hyperparams, 2, "--explore", "pb2")
    before = pb2_history(run_dir)["observations"]
    assert len(before) == 4
    result = pb2_run(run_dir, "pbt_rl_truct.py", tiny_hyperparams, 4, "--resume")  # no --explore: kept
    assert "(pb2 explore)" in result.stdout
    after = pb2_history(run_dir)["observations"]
    assert after[:4] == before and [t for t, _, _ in after[4:]] == [3] * 4 + [4] * 4
    assert all("(pb2) " in c for e in read_lineage(run_dir) if e["generation"] > 2 for c in e["changes"])
