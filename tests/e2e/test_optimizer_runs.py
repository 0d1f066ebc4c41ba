"""EagerAdam in real runs: a whole evo run under mpiexec (train, score, exchange, checkpoint,
resume) never imports torch._dynamo."""

from tests.support import mpiexec

WATCH = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('torch._dynamo imported:', 'torch._dynamo' in sys.modules, flush=True))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def test_an_evo_run_and_its_resume_never_import_dynamo(tmp_path, tiny_hyperparams):
    """Every rank of a real run (PPO updates, scoring, the exchange, checkpoints, TensorBoard)
    and of its resume (optimizer state loaded from the checkpoint) ends without torch._dynamo."""
    run_dir = tmp_path / "run"
    common = ["-c", WATCH, "pbt_rl_truct.py", "--num-agents", "4", "--agent-training-steps", "512"]
    common += ["--hyperparams", str(tiny_hyperparams), "--run-dir", str(run_dir)]
    for extra in (["--total-generations", "2"], ["--total-generations", "3", "--resume"]):
        result = mpiexec(2, [*common, *extra])
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.count("torch._dynamo imported: False") == 2, result.stdout[-3000:]
    assert "resumed from" in result.stdout
