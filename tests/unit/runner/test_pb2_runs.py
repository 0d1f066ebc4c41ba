"""PB2 and casmo (BG-PBT's trust-region BO) explore in whole PPO runs in one process
(tests/support.py:run_in_process): PB2 under the rule and transport of each of the three scripts, its
lineage, its history in the checkpoint and through --resume; casmo's trust region and its state through
--resume. Moved down from the e2e tier, where they ran under mpiexec: what they check is the explorers', the
driver's and the records', not MPI's."""

import json

import pytest
import yaml

from evo.core.explorers.casmo import LENGTH_INIT, TrustRegion
from evo.core.kinds import kind_from_spec
from tests.in_process import logged
from tests.support import PPO_SIX, last_manifest, read_lineage, read_population, write_hyperparams

SCRIPTS = {
    "pbt_rl_wta.py": ("wta", "collective"),
    "pbt_rl_truct.py": ("truncation", "p2p"),
    "pbt_rl_truct_collective.py": ("truncation", "collective"),
}
"""Each script's selection rule and transport (evo.main)."""


def pb2_run(run_dir, script, hyperparams, generations, *extra) -> str:
    """``script``'s run in this process: 4 members of 256 env steps, seed 2. Returns its log."""
    flags = ["--num-agents", "4", "--agent-training-steps", "256", "--hyperparams", str(hyperparams)]
    argv = [*flags, "--total-generations", str(generations), "--run-dir", str(run_dir), "--seed", "2", *extra]
    status, log = logged([*argv, "--tb-writer", "False"], *SCRIPTS[script])
    assert status == 0, log[-3000:]
    return log


def resume(run_dir, script, generations) -> str:
    status, log = logged(
        ["--run-dir", str(run_dir), "--resume", "--total-generations", str(generations)], *SCRIPTS[script]
    )
    assert status == 0, log[-3000:]
    return log


def explorer_state(run_dir, name):
    """The explorer's state in the last checkpoint's manifest, under its name."""
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == name
    return explorer["state"]


def search_space(run_dir) -> dict:
    return {
        name: kind_from_spec(spec)
        for name, spec in yaml.safe_load((run_dir / "config.yaml").read_text())["agent"]["search_space"].items()
    }


@pytest.fixture(scope="module")
def pb2_runs(tmp_path_factory):
    """``pb2_runs(script)``: the run of 3 generations with --explore pb2 under ``script``'s rule, made once
    (its run directory and log)."""
    root = tmp_path_factory.mktemp("pb2")
    hyperparams = write_hyperparams(root)
    made = {}

    def made_for(script):
        if script not in made:
            run_dir = root / script.removesuffix(".py")
            made[script] = run_dir, pb2_run(run_dir, script, hyperparams, 3, "--explore", "pb2")
        return made[script]

    return made_for


@pytest.mark.parametrize(
    "script, recipients", [("pbt_rl_wta.py", 3), ("pbt_rl_truct.py", 1), ("pbt_rl_truct_collective.py", 1)]
)
def test_pb2_explores_in_every_selection_mode(pb2_runs, script, recipients):
    run_dir, log = pb2_runs(script)
    assert "(pb2 explore)" in log
    space = search_space(run_dir)
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
    history = explorer_state(run_dir, "pb2")
    assert [t for t, _, _ in history["observations"]] == [2] * 4 + [3] * 4
    scores = {(int(r["generation"]), int(r["member"])): float(r["score"]) for r in rows}
    donors = {(e["generation"], e["recipient"]): e["donor"] for e in lineage}
    for member in range(4):  # the baseline each member starts generation 4 from: its donor's score
        source = donors.get((3, member), member)
        assert history["baselines"][str(member)] == pytest.approx(scores[(3, source)])


def test_pb2_history_survives_resume(pb2_runs):
    """pbt_rl_truct.py's PB2 run, resumed without --explore (the run's own is kept) for a fourth generation."""
    run_dir, _ = pb2_runs("pbt_rl_truct.py")
    before = explorer_state(run_dir, "pb2")["observations"]
    assert len(before) == 8
    log = resume(run_dir, "pbt_rl_truct.py", 4)
    assert "(pb2 explore)" in log
    after = explorer_state(run_dir, "pb2")["observations"]
    assert after[:8] == before and [t for t, _, _ in after[8:]] == [4] * 4
    assert all("(pb2) " in c for e in read_lineage(run_dir) if e["generation"] > 1 for c in e["changes"])


def test_casmo_explores_in_its_trust_region_and_resumes(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    log = pb2_run(run_dir, "pbt_rl_truct.py", tiny_hyperparams, 2, "--explore", "casmo")
    assert "(casmo explore)" in log
    before = explorer_state(run_dir, "casmo")
    assert [t for t, _, _ in before["observations"]] == [2] * 4  # generation 1's changes are not measured
    assert before["region"]["length"] == LENGTH_INIT and len(before["proposed"]) == 1
    log = resume(run_dir, "pbt_rl_truct.py", 4)  # no --explore: kept
    assert "(casmo explore)" in log
    after = explorer_state(run_dir, "casmo")
    assert after["observations"][:4] == before["observations"]
    assert [t for t, _, _ in after["observations"][4:]] == [3] * 4 + [4] * 4
    space = search_space(run_dir)
    rows = {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)}
    lineage = read_lineage(run_dir)
    assert [e["generation"] for e in lineage] == [1, 2, 3, 4]  # one recipient a generation (4 members)
    for exploit in lineage:
        marker = "(casmo warm-up)" if exploit["generation"] == 1 else "(casmo)"
        assert all(marker in change for change in exploit["changes"]), exploit["changes"]
        donor = rows[(exploit["generation"], exploit["donor"])]
        for name, kind in space.items():  # inside the bounds and the box around the donor's values
            new = exploit["new_hparams"][name]
            assert kind.contains(new), (name, new)
            distance = abs(kind.to_unit(new) - kind.to_unit(kind.parse(donor[name])))
            assert distance <= LENGTH_INIT / 2 + 1e-6, (name, new, donor[name])
        if exploit["generation"] < 4:  # the recipient trains with what casmo chose
            row = rows[(exploit["generation"] + 1, exploit["recipient"])]
            assert {k: kind.parse(row[k]) for k, kind in space.items()} == pytest.approx(exploit["new_hparams"])
    # the region counted generations 3 and 4 (the first after the resume, from the checkpoint's
    # proposed member): a success when the member casmo proposed for the generation scored best
    expected = TrustRegion()
    for generation in (3, 4):
        proposed = next(e["recipient"] for e in lineage if e["generation"] == generation - 1)
        best = max(float(rows[(generation, m)]["score"]) for m in range(4))
        expected.record(float(rows[(generation, proposed)]["score"]) >= best)
        saved = json.loads((run_dir / "checkpoints" / f"gen_{generation:06d}" / "manifest.json").read_text())
        assert saved["explorer"]["state"]["region"] == vars(expected), generation
