"""``precision: bf16`` in whole runs: CartPole's PBT reaches 500 in bfloat16, and a float32
bigfish run resumes in bfloat16 (the entry scripts under mpiexec)."""

import pytest
import torch
import yaml

from evo.config.precision import cpu_flags, native_bf16
from evo.rundir import checkpoint as ckpt
from evo.sb3.precision import torch_bf16_support
from tests.support import mpiexec, read_population

needs_bf16 = pytest.mark.skipif(
    not (native_bf16(cpu_flags()) and torch_bf16_support()[0]), reason="this processor has no native bfloat16"
)


# --- the same learning: whole runs ------------------------------------------------------------------


@needs_bf16
def test_cartpole_pbt_in_bf16_reaches_500(tmp_path):
    """CartPole's default PBT (2 members on 2 ranks, 4096 steps a generation, selecting on 10 evaluation
    episodes) in bfloat16 ends at 500, as the float32 run with this seed does, at the smallest budget where
    float32 does: 6 generations of seed 1 (on an AMD EPYC: float32 500 from generation 6 on, bfloat16 from
    generation 4). bfloat16 kept without float32 master weights (the body's weights rounded to bfloat16
    at every forward) ends this run at 470; it reached 500 only at generation 7 (9 for good), and at
    generation 12 of the seed this test used before (12 generations of seed 0), which could not tell."""
    run_dir = tmp_path / "run"
    flags = ["--env-id", "CartPole-v1", "--eval-episodes", "10", "--select-on", "test", "--seed", "1"]
    flags += ["--total-generations", "6", "--precision", "bf16", "--tb-writer", "False", "--run-dir", str(run_dir)]
    result = mpiexec(2, ["pbt_rl_truct.py", *flags], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["precision"] == "bf16"
    rows = read_population(run_dir)
    last = max(int(row["generation"]) for row in rows)
    assert last == 6
    assert max(float(row["score_test"]) for row in rows if int(row["generation"]) == last) == 500.0


@needs_bf16
def test_a_float32_bigfish_run_resumes_in_bf16(tmp_path):
    """Checkpoints hold float32 weights and Adam state in either precision: a bigfish run trained
    in float32 continues in bfloat16 from its checkpoint, and its checkpoint is float32 again."""
    hyperparams = tmp_path / "tiny.yml"
    hyperparams.write_text("procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n  n_epochs: 1\n")
    run_dir = tmp_path / "run"
    common = ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--tb-writer", "False"]
    first = mpiexec(
        2,
        [
            *common,
            "--env-id",
            "bigfish",
            "--hyperparams",
            str(hyperparams),
            "--total-generations",
            "1",
            "--agent-training-steps",
            "64",
        ],
    )
    assert first.returncode == 0, first.stderr[-3000:]
    saved = ckpt.load_payload(ckpt.generation_dir(run_dir, 1) / ckpt.member_filename(0))
    second = mpiexec(2, [*common, "--resume", "--precision", "bf16", "--total-generations", "2"])
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stdout
    assert "--resume --precision bf16" in (run_dir / "command.txt").read_text()
    resumed = ckpt.load_payload(ckpt.generation_dir(run_dir, 2) / ckpt.member_filename(0))
    assert resumed["state"].dtype == saved["state"].dtype == torch.float32
    assert resumed["state"].shape == saved["state"].shape
    assert resumed["num_timesteps"] == 128 and not torch.equal(resumed["state"], saved["state"])
