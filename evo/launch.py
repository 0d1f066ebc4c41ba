"""``python -m evo.launch -n N SCRIPT [ARGS...]``: mpiexec with evo's start-up checks.

Open MPI refuses two common set-ups before Python starts, with messages that do not say
what to do in evo's terms: running as root without the two OMPI_ALLOW_RUN_AS_ROOT
variables, and more ranks than cores without ``--oversubscribe``. This launcher checks
both, says what to set or add (exit status 2), and otherwise runs
``mpiexec -n N [--oversubscribe] python SCRIPT ARGS``, passing on its exit status and the stop
signals it gets (SIGTERM, SIGUSR1, SIGINT). When evo refuses the input (exit status 2), Open MPI
follows the refusal with a banner of its own ("prterun detected that one or more processes
exited with non-zero status ..."), which looks like a broken install; Open MPI can silence it only
by also reporting the job's status as 0, so the launcher leaves that one banner out of its
output instead, and passes everything else through as it comes. Killed outright (SIGKILL, the OOM
killer), it takes the job with it: on Linux mpiexec gets SIGTERM when the launcher dies.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT_VARIABLES = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
USAGE = "usage: python -m evo.launch -n RANKS [--oversubscribe] SCRIPT [SCRIPT ARGS...]"


def launch_problems(
    ranks: int, oversubscribe: bool, env: Mapping[str, str], uid: int, cores: int, open_mpi: bool
) -> list[str]:
    """Why ``mpiexec -n ranks`` would be refused here, each with the fix (pure)."""
    found = []
    if ranks < 1:
        found.append(f"-n {ranks}: give at least one rank")
    if open_mpi and uid == 0 and not all(env.get(name) for name in ROOT_VARIABLES):
        found.append(
            "you are root, and Open MPI refuses to start as root unless told to: set both variables, "
            f"e.g. `export {ROOT_VARIABLES[0]}=1 {ROOT_VARIABLES[1]}=1` (or run as a normal user)"
        )
    if ranks > cores and not oversubscribe and "SLURM_JOB_ID" not in env:
        found.append(
            f"-n {ranks} asks for more ranks than the {cores} cores here: add --oversubscribe (each rank then "
            f"gets part of a core), or use -n {cores} with --num-agents {ranks} to keep a population of {ranks}"
        )
    return found


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, as SLURM and taskset set it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def find_mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def is_open_mpi(mpiexec: str) -> bool:
    try:
        version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Open MPI" in version or "prterun" in version or "OpenRTE" in version


def parse(argv: Sequence[str]) -> tuple[int, bool, list[str]]:
    ranks, oversubscribe, rest = 1, False, list(argv)
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in ("-n", "-np", "--np") and rest:
            try:
                ranks = int(rest.pop(0))
            except ValueError:
                raise SystemExit(f"evo.launch: {flag} needs a whole number\n{USAGE}") from None
        elif flag == "--oversubscribe":
            oversubscribe = True
        elif flag in ("-h", "--help"):
            print(__doc__ + "\n" + USAGE)
            raise SystemExit(0)
        else:
            raise SystemExit(f"evo.launch: unknown option {flag}\n{USAGE}")
    if not rest:
        raise SystemExit(f"evo.launch: no script given\n{USAGE}")
    return ranks, oversubscribe, rest


def main(argv: Sequence[str] | None = None) -> int:
    ranks, oversubscribe, rest = parse(sys.argv[1:] if argv is None else argv)
    mpiexec = find_mpiexec()
    if mpiexec is None:
        print("evo.launch: error: no mpiexec found; `make install` puts one in .venv/bin", file=sys.stderr)
        return 2
    problems = launch_problems(ranks, oversubscribe, os.environ, os.getuid(), available_cores(), is_open_mpi(mpiexec))
    if problems:
        print("evo.launch: error: " + "\n  - ".join(["cannot start MPI:", *problems]), file=sys.stderr)
        return 2
    command = [mpiexec, "-n", str(ranks), *(["--oversubscribe"] if oversubscribe else []), sys.executable, *rest]
    return run_quietly(command)


EXIT_BAD_INPUT = 2
RULE = "-" * 74
"""The line Open MPI draws above and below its messages."""
NONZERO_BANNER = "detected that one or more processes exited with non-zero status"
PMIX_ERROR = "PMIX ERROR: PMIX_ERR_UNREACH"
"""A line PMIx may print when every rank of a refused job exits at once."""


PR_SET_PDEATHSIG = 1


def stops_with(parent: int) -> Callable[[], None] | None:
    """What a child of ``parent`` (mpiexec) runs before it starts, on Linux: ask the kernel for SIGTERM
    when ``parent`` dies, however it dies (mpiexec passes SIGTERM to its ranks, which stop as on
    Ctrl-C), so no job trains on as an orphan; if ``parent`` died before the request, stop at once."""
    if not sys.platform.startswith("linux"):
        return None

    def request() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return request


def run_quietly(command: Sequence[str]) -> int:
    """Run ``command`` (mpiexec), its stdout as it is and its stderr line by line, forwarding the stop
    signals to it; Open MPI's banner about a non-zero exit (and PMIx's unreachable-peer line) are held
    back, and left out if the job's status is evo's refusal of its input (2). Returns the job's status."""
    job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, bufsize=1, preexec_fn=stops_with(os.getpid()))
    forwarded = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
    previous = {signum: signal.signal(signum, lambda signum, frame: job.send_signal(signum)) for signum in forwarded}
    banner: list[str] = []  # Open MPI's non-zero-exit banner and PMIx's line, held back
    block: list[str] = []  # an Open MPI message being read, from its first rule
    try:
        for line in job.stderr:
            if PMIX_ERROR in line:  # the ranks' exit seen by PMIx: noise after a refusal, wherever it falls (under
                banner.append(line)  # load it can come between the banner's opening rule and its first line)
            elif block:
                block.append(line)
                if len(block) == 2 and NONZERO_BANNER not in line:  # another message: let it through
                    sys.stderr.writelines(block)
                    block = []
                elif len(block) > 2 and line.rstrip("\n") == RULE:  # the banner's closing rule
                    banner, block = banner + block, []
            elif line.rstrip("\n") == RULE:
                block = [line]
            else:
                sys.stderr.write(line)
        status = job.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    sys.stderr.writelines(block)  # a message cut short
    if status != EXIT_BAD_INPUT:
        sys.stderr.writelines(banner)
    sys.stderr.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
