"""What the end-to-end tests share: a run started in the background (and ended if the test leaves it
running), waiting for an event, the flags common to a test's runs, its TensorBoard scalars,
python -m entry points, the line of a member's weights back through its exploits, the kept best
checked against the records, and the evo-less virtualenv (.venv-zoo) playing an export (a tree's digest:
tests/support.py)."""

import collections
import os
import shlex
import string
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from evo.rundir import checkpoint as ckpt
from tests.support import ROOT, mpi_env, mpiexec_path, read_lineage, read_population


@contextmanager
def running(ranks: int, args: list[str], **popen):
    """``python ARGS`` on ``ranks`` ranks under mpiexec, in the background for the ``with`` block,
    its output piped (``popen``: other Popen arguments, such as stderr=subprocess.STDOUT); killed if
    it still runs after the block."""
    command = [mpiexec_path(), "-n", str(ranks), "--oversubscribe", sys.executable, *args]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    job = subprocess.Popen(command, cwd=ROOT, env=mpi_env(), text=True, **pipes)
    try:
        yield job
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


WAITING_RANK = """\
import os, signal, sys
from pathlib import Path
Path(sys.argv[1] + ".new").write_text(str(os.getpid()))
os.rename(sys.argv[1] + ".new", sys.argv[1])
signal.pause()
"""


def a_kill_takes_the_rank_with_it(launcher: list[str], folder: Path) -> None:
    """Start ``launcher``, which runs ``folder/rank.py folder/pid`` (a rank that writes its pid, then
    waits) under mpiexec; SIGKILL it once the rank is up, and assert that mpiexec and its rank stop."""
    (folder / "rank.py").write_text(WAITING_RANK)
    ours = ["pgrep", "-f", str(folder / "rank.py")]  # mpiexec and its rank
    launched = subprocess.Popen(launcher, cwd=folder, env=mpi_env() | {"PYTHONPATH": str(ROOT)})
    try:
        wait_for((folder / "pid").is_file, 120, "the rank to start")
        rank = int((folder / "pid").read_text())
        assert subprocess.run(ours, capture_output=True, text=True).stdout.split().count(str(rank)) == 1
        launched.kill()
        launched.wait()
        wait_for(lambda: not alive(rank), 60, f"rank {rank} to stop after its launcher was killed")
        wait_for(lambda: not subprocess.run(ours, capture_output=True).stdout, 60, "mpiexec to stop")
    finally:
        launched.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(folder / "rank.py")])


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie no one reaps has stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def common(run_dir, hyperparams, *extra) -> list[str]:
    """The flags of a test's CartPole runs: the tiny hyperparameters, the run directory, seed 5."""
    return ["--hyperparams", str(hyperparams), "--run-dir", str(run_dir), "--seed", "5", *extra]


def scalar_tags(event_dir):
    """A TensorBoard event directory's accumulator, loaded, and its scalars' tags."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(event_dir))
    accumulator.Reload()
    return accumulator, set(accumulator.Tags()["scalars"])


def python(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python ARGS`` in the repository, its output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=timeout
    )


PNG = b"\x89PNG\r\n\x1a\n"


def plots(run_dir, out: Path) -> dict[str, Path]:
    """``python -m evo.tools.plot`` on ``run_dir``: its three PNGs, written into ``out``."""
    result = python("-m", "evo.tools.plot", str(run_dir), "--out", str(out))
    assert result.returncode == 0, result.stderr
    written = {name: out / f"{name}.png" for name in ("scores", "hparams", "lineage")}
    for path in written.values():
        assert path.read_bytes()[:8] == PNG
    return written


def tunable(algo: str) -> dict[str, tuple[type, bool]]:
    """What load_schedule needs of a learner: each tunable setting's type and whether it may be off."""
    from evo.learners import learner_spec

    return {s.name: (s.type, s.may_be_off) for s in learner_spec(algo).settings if s.tunable}


def line_of(history, member) -> dict[int, int]:
    """Who trained ``member``'s weights in each generation ({generation: member}), walking back
    through its exploits."""
    owners, followed = {}, member
    for generation in reversed(history.generations):
        owners[generation] = followed
        if generation > 1 and history.row(generation - 1, followed).donor is not None:
            followed = history.row(generation - 1, followed).donor
    return owners


def best_of_records(run_dir) -> dict:
    """The row of population.csv with the highest selection score so far (the first such, in order
    of generation then member), as a kept best names it."""
    rows = [r for r in read_population(run_dir) if r["score"] != "nan"]
    top = max(float(r["score"]) for r in rows)
    row = min((r for r in rows if float(r["score"]) == top), key=lambda r: (int(r["generation"]), int(r["member"])))
    return {key: type_(row[key]) for key, type_ in (("member", int), ("generation", int), ("score", float))} | {
        "env_steps": int(row["env_steps"])
    }


def assert_best_kept(run_dir) -> ckpt.Checkpoint:
    """The last checkpoint's best.pt is the best of the records, with the weights it was scored with:
    those of its member's file at that generation (the best member is never a recipient in its own
    generation), not the member's later ones if it copied a donor since."""
    last = ckpt.latest(run_dir)[0]
    record = best_of_records(run_dir)
    assert {key: last.best[key] for key in ckpt.BEST_KEYS} == record
    best = ckpt.load_payload(last.best_path())
    assert best["best"] == record and best["member"] == record["member"] and best["generation"] == record["generation"]
    at_its_generation = ckpt.generation_dir(run_dir, record["generation"]) / ckpt.member_filename(record["member"])
    if at_its_generation.exists():
        assert torch.equal(best["state"], ckpt.load_payload(at_its_generation)["state"])
    member, generation = record["member"], record["generation"]
    copied_later = [e for e in read_lineage(run_dir) if e["recipient"] == member and e["generation"] > generation]
    if any(e["donor"] != e["recipient"] for e in copied_later):
        assert not torch.equal(best["state"], ckpt.load_payload(last.member_path(member))["state"])
    return last


ZOO_VENV = ROOT / ".venv-zoo"


def zoo_venv_python() -> Path:
    """The evo-less virtualenv's Python (SB3 and rl_zoo3, no evo), built or found cached by
    scripts/zoo-venv.sh (where compare.py's rl_zoo3 cross-check also looks for it)."""
    built = subprocess.run(
        ["bash", "scripts/zoo-venv.sh", str(ZOO_VENV), sys.executable], cwd=ROOT, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return ZOO_VENV / "bin" / "python"


def play(zoo_python: Path, printed: str, steps: int, cwd: Path, env: dict | None = None, timeout: float = 300) -> str:
    """Run the "play it" line evo-export ``printed`` as a user would (``python`` the evo-less virtualenv's, from
    ``cwd``; a ``PYTHONPATH=...:$PYTHONPATH`` before it set as a shell sets it), for ``steps`` steps without
    rendering; asserts it succeeds; returns what it printed."""
    (line,) = [line for line in printed.splitlines() if "play it" in line]
    command = shlex.split(line.split(": ", 1)[1])
    environment = {**os.environ, **(env or {})}
    while "=" in command[0]:  # NAME=VALUE before the command, $NAME in it as the shell expands it
        name, value = command.pop(0).split("=", 1)
        environment[name] = string.Template(value).substitute(collections.defaultdict(str, environment))
    assert command[:3] == ["python", "-m", "rl_zoo3.enjoy"], line
    result = subprocess.run(
        [str(zoo_python), *command[1:], "--no-render", "-n", str(steps)],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment,
    )  # fmt: skip
    assert result.returncode == 0, line + "\n" + result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def enjoy(zoo_python: Path, algo: str, env_id: str, folder: Path, steps: int, timeout: float = 300) -> str:
    """rl_zoo3's ``enjoy`` in the evo-less virtualenv on experiment 1 of ``folder`` (evo-export's
    ``--out``) for ``steps`` steps, from ``folder``'s parent; asserts it succeeds; returns what it printed."""
    result = subprocess.run(
        [str(zoo_python), "-m", "rl_zoo3.enjoy", "--algo", algo, "--env", env_id, "-f", str(folder)]
        + ["--exp-id", "1", "--no-render", "-n", str(steps)],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout
