"""A short PBT run on 2 ranks sharing one GPU (marker ``gpu``; skipped where torch sees no CUDA device), and
its checkpoint resumed on the CPU: scripts/device-check.sh runs it on the device machine."""

import pytest
import torch

from evo.rundir import checkpoint as ckpt
from tests.support import budget, generations_recorded, mpiexec, write_hyperparams

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the device check runs it)"),
]


def test_two_ranks_share_the_gpu_and_the_run_resumes_on_the_cpu(tmp_path):
    run_dir = tmp_path / "run"
    flags = ["pbt_rl_truct.py", *budget(4, 2, 256), "--hyperparams", str(write_hyperparams(tmp_path))]
    flags += ["--run-dir", str(run_dir), "--tb-writer", "False"]
    first = mpiexec(2, [*flags, "--device", "cuda"], timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert generations_recorded(run_dir) == {1: [0, 1, 2, 3], 2: [0, 1, 2, 3]}
    resumed = mpiexec(
        2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume", "--total-generations", "3", "--device", "cpu"]
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert ckpt.latest(run_dir)[0].generation == 3
