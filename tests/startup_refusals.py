"""The bad inputs the entry scripts refuse at start-up (exit 2, one message, nothing written), and evo.main's
start-up run for each of them on two simulated ranks in one fresh process.

What a rank does at start-up (evo/main.py's ``startup``): rank 0 parses and validates the command line,
takes the run directory's lock and finds a --resume's checkpoint, and broadcasts the outcome; every other
rank only checks its own GPUs for ``--device`` (a gather), takes rank 0's outcome from the broadcasts, and
exits with rank 0's status. So a refusal is rank 0's work, and another rank's part is to receive it: a
communicator that answers rank 0's broadcasts as MPI would (:class:`SimulatedRank`) runs both sides here, with
no MPI job.

Run as a script under tests/without.py (torch and SB3 unimportable, as the e2e bad-input test runs the
entry script)::

    python tests/without.py torch,stable_baselines3 tests/startup_refusals.py TMP_DIR

it builds :func:`bad_inputs` in TMP_DIR, runs ``evo.main.main`` for each on simulated rank 0 and then rank 1,
then a good input on rank 0 (which must fail at its first import of torch), and prints one JSON line: each
case's exit status and stderr per rank, whether TMP_DIR/never-created exists and TMP_DIR's digest after it
(:func:`tree_digest`), the digest before the first, and the good input's outcome."""

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

import yaml

PROG = "pbt_rl_truct.py"
NEVER_CREATED = "never-created"
"""The --run-dir a case gets when it names none: no refusal may create it."""


def bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    """(argv, the one message its refusal must say) for every bad input, with the files they name made in
    ``tmp_path`` (``tmp_path/existing`` must be made by the caller, holding a population.csv)."""
    broken = tmp_path / "broken.yml"
    broken.write_text("CartPole-v1: {n_steps: [64\n")
    unknown = tmp_path / "unknown.yml"
    unknown.write_text("CartPole-v1:\n  n_step: 64\n")
    wrong_type = tmp_path / "type.yml"
    wrong_type.write_text("CartPole-v1:\n  n_epochs: ten\n")
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("x")
    no_checkpoint = tmp_path / "no-checkpoint"
    no_checkpoint.mkdir()
    from evo.config import parse_config

    saved = parse_config(["--run-dir", str(no_checkpoint)], world_size=2, check_run_dir=False)
    (no_checkpoint / "config.yaml").write_text(yaml.safe_dump(saved.to_dict()))
    existing = tmp_path / "existing"
    twice = tmp_path / "twice.yml"
    twice.write_text("CartPole-v1:\n  gamma: 0.9\n  gamma: 0.95\n")
    empty = tmp_path / "empty.yml"
    empty.write_text("# nothing yet\n")
    return [
        (["--env-id", "CartPol-v1"], "Did you mean 'CartPole-v1'"),
        (["--hyperparams", "max_grad_norm:-0.5"], "max_grad_norm (--hyperparams) is -0.5; it must be > 0"),
        (["--hyperparams", "ent_coef:.nan"], "ent_coef (--hyperparams) is nan (not a number); it must be >= 0"),
        (
            ["--hyperparams", "policy_kwargs:{net_arch: [1000000, 1000000]}"],
            "memory: each member needs at least 32.0 TB",
        ),
        (["--conf-file", str(twice)], "'gamma' is given twice in one mapping (lines 2 and 3)"),
        (["--conf-file", str(empty)], "is empty: it holds no settings"),
        (["--num-agents", "3"], "--num-agents 3 is not a multiple of the 2 MPI ranks"),
        (["--agent-training-steps", "0"], "--agent-training-steps 0: must be a positive whole number"),
        (["--total-generations", "-2"], "--total-generations -2: must be a positive whole number"),
        (["--truncation-fraction", "0.6"], "--truncation-fraction 0.6: must be in (0, 0.5]"),
        (["--learning-rate-range", "1e-3", "1e-4"], "the range is reversed"),
        (["--gamma-range", "0.99", "0.99"], "the range is empty"),
        (["--hyperparams", str(broken)], "invalid YAML"),
        (["--hyperparams", str(unknown)], "unknown key 'n_step'; did you mean 'n_steps'?"),
        (["--hyperparams", str(wrong_type)], "n_epochs must be int, got 'ten'"),
        (["--hyperparams", str(tmp_path / "missing.yml")], "cannot read the file"),
        (["--run-dir", str(existing)], "already exists; evo will not overwrite a run"),
        (["--run-dir", str(not_a_dir / "run")], "is not a writable directory"),
        (["--run-dir", str(no_checkpoint), "--resume"], "--resume: no complete checkpoint"),
        (["--run-dir", str(existing), "--resume"], "is not an evo run directory"),
        # issue 38: --objective and env parameters
        (["--objective", "retrun"], "'retrun' is not an objective; did you mean 'return'?"),
        (["--objective", "return,info:energy:lowest"], "the direction 'lowest' of info:energy is not 'max' or 'min'"),
        (
            [
                "--env-id",
                "evo.examples.shaped:ShapedCorridor-v0",
                "--objective",
                "return,info:success",
                "--explore",
                "pb2",
            ],
            "several objectives rank members by Pareto fronts, and pb2 its GP models how one score changes",
        ),
        (
            ["--objective", "info:is_success"],
            "with 'is_success' in its info as a finite number; the keys they reported: no key",
        ),
        (["--hyperparams", "search_space:{env.gravityy: {low: 9, high: 10}}"], "has no attribute 'gravityy'"),
        (
            ["--env-id", "bigfish", "--hyperparams", "search_space:{env.x: {low: 0.1, high: 1.0}}"],
            "Procgen games take no env parameters",
        ),
    ]


def with_run_dir(argv: list[str], tmp_path: Path) -> list[str]:
    """``argv`` with ``tmp_path/never-created`` as its --run-dir unless it names one."""
    return argv if "--run-dir" in argv else [*argv, "--run-dir", str(tmp_path / NEVER_CREATED)]


def tree_digest(path) -> str:
    """The names and contents of every file below ``path``, hashed (to show that nothing was written;
    tests/support.py's, kept here because this script runs without the tests package on its path)."""
    digest = hashlib.sha256()
    for item in sorted(Path(path).rglob("*")):
        digest.update(str(item.relative_to(path)).encode())
        if item.is_file():
            digest.update(item.read_bytes())
    return digest.hexdigest()


class Aborted(BaseException):
    """What MPI_Abort does to a simulated rank: it ends there."""


class SimulatedRank:
    """The communicator of one rank of a two-rank job, as start-up uses it: rank 0's broadcasts are noted
    in ``sent``; another rank's are answered, in order, from rank 0's ``sent``."""

    def __init__(self, rank: int, sent: list | None = None, size: int = 2):
        self.rank, self.size = rank, size
        self.sent = [] if sent is None else sent
        self.received = 0

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def bcast(self, value, root: int = 0):
        if self.rank == root:
            self.sent.append(value)
            return value
        value = self.sent[self.received]
        self.received += 1
        return value

    def gather(self, value, root: int = 0):
        return [value, *([[]] * (self.size - 1))] if self.rank == root else None

    def Abort(self, status: int = 1):  # noqa: N802
        raise Aborted(status)


def run_rank(comm: SimulatedRank, argv: list[str]) -> tuple[int, str]:
    """``evo.main.main`` as pbt_rl_truct.py runs it, on ``comm``: (its exit status, what it wrote to stderr)."""
    import evo.main
    from evo.mpi import exchange

    world, exchange.world = exchange.world, lambda: comm
    stderr, stdout = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            try:
                status = evo.main.main("truncation", "p2p", argv, prog=PROG)
            except SystemExit as stop:
                status = stop.code
            except Aborted as aborted:
                status = aborted.args[0]
    finally:
        exchange.world = world
    return status, stderr.getvalue()


def refuse_each(tmp_path: Path) -> dict:
    """Every bad input on simulated ranks 0 and 1, then a good one on rank 0 (see the module docstring)."""
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "population.csv").write_text("generation,member\n1,0\n")
    cases = bad_inputs(tmp_path)
    before = tree_digest(tmp_path)
    results = []
    for argv, message in cases:
        argv = with_run_dir(argv, tmp_path)
        root = SimulatedRank(0)
        statuses, stderrs = zip(*(run_rank(comm, argv) for comm in (root, SimulatedRank(1, root.sent))), strict=True)
        results.append(
            {
                "argv": argv,
                "message": message,
                "statuses": list(statuses),
                "stderrs": list(stderrs),
                "never_created": (tmp_path / NEVER_CREATED).exists(),
                "digest": tree_digest(tmp_path),
            }
        )
    tiny = tmp_path / "tiny.yml"
    tiny.write_text("CartPole-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n")
    good = ["--num-agents", "2", "--total-generations", "1", "--agent-training-steps", "128"]
    status, stderr = run_rank(SimulatedRank(0), [*good, "--hyperparams", str(tiny), "--run-dir", str(tmp_path / "run")])
    return {"before": before, "cases": results, "good": {"status": status, "stderr": stderr}}


if __name__ == "__main__":
    print(json.dumps(refuse_each(Path(sys.argv[1]))))
