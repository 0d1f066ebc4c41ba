"""A learner of your own under real MPI: docs/examples/trpo_learner.py (sb3-contrib's TRPO, outside evo, on every
rank's PYTHONPATH) trained by PBT under ``mpiexec -n 2`` (4 members, 2 generations, its members' state moved between
the ranks), exploited and explored as evo's own learners are, and resumed to a third generation (in this process:
the learner found again by its ``--algo`` text in the run's config.yaml); ``--algo`` naming a module that does not
import is refused before training: exit 2, once, on every rank, nothing written. A class that is no learner or
lacks what a run calls is refused with the same start-up (its messages: tests/unit/learners/test_own_learner.py)."""

from __future__ import annotations

import logging
import os

import pytest
import yaml

from tests.support import (
    ROOT,
    generations_recorded,
    mpiexec,
    read_lineage,
    read_population,
    run_in_process,
    tree_digest,
)

TRPO = "trpo_learner:TRPOLearner"
ON_PATH = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH")]))}
"""Every rank imports the example from docs/examples (its own folder, as a user's would be)."""
TINY = [
    *("--agent-training-steps", "256", "--num-agents", "4", "--seed", "3", "--hyperparams", "n_envs:2", "n_steps:64"),
    *("batch_size:64", "policy_kwargs:{net_arch: [32, 32]}"),
]


def test_a_learner_of_your_own_trains_exploits_explores_and_resumes_under_mpi(tmp_path, monkeypatch, caplog):
    run_dir = tmp_path / "run"
    argv = ["pbt_rl_truct.py", "--algo", TRPO, "--env-id", "CartPole-v1", *TINY, "--run-dir", str(run_dir)]
    result = mpiexec(2, [*argv, "--total-generations", "2"], env=ON_PATH)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    explored = ["learning_rate", "gamma", "gae_lambda", "target_kl", "n_critic_updates"]
    assert config["agent"]["algo"] == TRPO and list(config["agent"]["search_space"]) == explored
    rows = read_population(run_dir)
    assert list(rows[0])[6:11] == explored
    assert generations_recorded(run_dir) == {1: [0, 1, 2, 3], 2: [0, 1, 2, 3]}
    by_key = {(int(row["generation"]), int(row["member"])): row for row in rows}
    lineage = read_lineage(run_dir)
    assert [exploit["generation"] for exploit in lineage] == [1, 2]
    for exploit in lineage:  # a bottom member copied a top one and explored TRPO's values from the donor's
        generation, recipient, donor = exploit["generation"], exploit["recipient"], exploit["donor"]
        assert float(by_key[(generation, donor)]["score"]) >= float(by_key[(generation, recipient)]["score"])
        assert list(exploit["new_hparams"]) == explored and exploit["new_hparams"] != exploit["old_hparams"]
        if generation == 1:  # it trains generation 2 with them
            trained = by_key[(2, recipient)]
            assert float(trained["target_kl"]) == pytest.approx(exploit["new_hparams"]["target_kl"])
    assert "(perturb explore)" in result.stdout

    monkeypatch.syspath_prepend(str(ROOT / "docs" / "examples"))  # as ON_PATH gives every rank
    with caplog.at_level(logging.INFO, logger="evo"):
        assert run_in_process([*argv[1:], "--resume", "--total-generations", "3"]) == 0
    assert f"resumed from {run_dir / 'checkpoints' / 'gen_000002'} (generation 2)" in caplog.text
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3)}
    assert len(read_lineage(run_dir)) == 3


def test_an_algo_that_does_not_import_exits_2_on_every_rank_and_writes_nothing(tmp_path):
    algo, message = "my_missing_package.learners:TRPO", "module 'my_missing_package.learners' does not import"
    before = tree_digest(tmp_path)
    run_dir = tmp_path / "never-created"
    result = mpiexec(2, ["pbt_rl_truct.py", "--algo", algo, "--run-dir", str(run_dir)], timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.count(message) == 1, result.stderr
    assert result.stderr.count("error:") == 1 and "Traceback" not in result.stderr, result.stderr
    assert not run_dir.exists() and tree_digest(tmp_path) == before
