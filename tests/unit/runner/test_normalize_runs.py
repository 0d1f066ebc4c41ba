"""Observation/reward normalisation in a whole run in one process (tests/support.py:run_in_process): the
statistics move with the weights at an exploit, are checkpointed with each member, and carry on after
--resume. Moved down from the e2e tier, where it ran under ``mpiexec -n 2``: what it checks is the run's
records and checkpoints. (The statistics crossing ranks bit for bit on both transports:
tests/mpi/ranks/test_normalize.py; a member's statistics through a checkpoint: tests/unit/sb3/test_normalize.py.)"""

import pytest

from evo.rundir import checkpoint as ckpt
from tests.support import read_lineage, run_in_process

TINY_PENDULUM = ["--env-id", "Pendulum-v1", "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1"]
NORMALIZED = [*TINY_PENDULUM, "normalize:true"]


def test_a_normalised_run_exploits_and_resumes_with_its_statistics(tmp_path):
    """4 normalised Pendulum members: a checkpoint holds each recipient with its donor's statistics;
    --resume carries every member's statistics on."""
    run_dir = tmp_path / "run"
    budget = ["--agent-training-steps", "256", "--run-dir", str(run_dir), "--tb-writer", "False"]
    flags = [*NORMALIZED, "--num-agents", "4", "--total-generations", "2", "--eval-episodes", "1", "--seed", "5"]
    assert run_in_process([*flags, *budget]) == 0
    lineage = read_lineage(run_dir)
    assert [exploit["generation"] for exploit in lineage] == [1, 2]

    def saved(generation):
        directory = ckpt.generation_dir(run_dir, generation)
        return {m: ckpt.load_payload(directory / ckpt.member_filename(m))["normalization"].numpy() for m in range(4)}

    at_two = saved(2)
    last = lineage[-1]  # the checkpoint is taken after generation 2's exchange
    assert at_two[last["recipient"]].tobytes() == at_two[last["donor"]].tobytes()
    assert len({tuple(stats.tolist()) for stats in at_two.values()}) == 3
    obs_count = 2 * 3  # the observation count's place: after Pendulum's mean (3) and var (3)
    # SB3's epsilon, 2 env resets, 2 generations x 256 env steps
    assert all(stats[obs_count] == pytest.approx(1e-4 + 2 + 512, abs=1e-9) for stats in at_two.values())

    assert run_in_process(["--resume", "--total-generations", "3", "--run-dir", str(run_dir)]) == 0
    assert "# resumed from generation 2" in (run_dir / "command.txt").read_text()
    at_three = saved(3)
    (exploit,) = [e for e in read_lineage(run_dir) if e["generation"] == 3]
    for member, stats in at_three.items():
        source = exploit["donor"] if member == exploit["recipient"] else member
        # trained on from the restored statistics and envs (episodes continue, no reset): 256 more steps
        assert stats[obs_count] == pytest.approx(at_two[source][obs_count] + 256, abs=1e-9), member
