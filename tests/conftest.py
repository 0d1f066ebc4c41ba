"""The test tiers, one folder each, each setting its marker (pyproject.toml lists them):
``unit/`` (no MPI job; mirrors evo/), ``mpi/`` (real MPI processes), ``e2e/`` (entry scripts
under mpiexec, the package built and installed), ``slurm/`` (a private SLURM), ``multinode/``
(two hosts in network namespaces). Shared helpers live in tests/support.py."""

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.support import write_hyperparams

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "mpi", "e2e", "slurm", "multinode")
DURATIONS = TESTS.parent / os.environ.get("EVO_TEST_DURATIONS", "test-durations.txt")
"""Where every session writes its slowest tests (git ignores it; scripts/test-tiers.sh names one per session and
gathers them into test-durations.txt)."""
_durations: dict[str, float] = {}
_documented: set[str] = set()
"""The tests whose function has a docstring (a test over LONG_S seconds says there why it takes them)."""
LONG_S = 20

# Open MPI's libfabric BTL finds no fabric here and sleeps a second as it closes, in every
# MPI_Init (README, MPI notes); the suite starts MPI a few hundred times. A user's own setting wins.
os.environ.setdefault("OMPI_MCA_btl", "^ofi")
# A rank waiting for a message yields the processor instead of spinning on it: the suite's MPI jobs
# are oversubscribed on 2 cores and share them with the tests that wait on them.
os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")

# Every mpiexec (PRRTE) makes its session directory <base>/ompi.<its pid> and refuses to start
# ("The PMIx server's listener thread failed to start", exit 213) if one of that name already
# holds its rendezvous file. A killed mpiexec leaves its directory behind, and pids wrap (at
# 32768 here) within one `make test`, so the suite's mpiexecs, the SLURM jobs' and the two
# hosts' make theirs in a directory of this session's own: nothing left in /tmp by an earlier
# job can stop them. Removed at the end of the session.
# (The rank tests' inner sessions, already under an mpiexec, start none.)
INNER_SESSION = "OMPI_COMM_WORLD_RANK" in os.environ
if not INNER_SESSION and "PRTE_MCA_prte_tmpdir_base" not in os.environ:
    os.environ["PRTE_MCA_prte_tmpdir_base"] = tempfile.mkdtemp(prefix="evo-tests-mpi-")


def pytest_collection_modifyitems(config, items):
    """Each test takes the marker of its tier's folder; a test outside every tier folder is an error."""
    for item in items:
        parts = Path(item.path).resolve().relative_to(TESTS).parts
        tier = parts[0] if len(parts) > 1 else None
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in a tier folder ({', '.join(TIERS)})")
        item.add_marker(tier)
        if getattr(getattr(item, "function", None), "__doc__", None):
            _documented.add(item.nodeid)
    if config.getoption("share"):
        longest_files_first(items)


FILE_SECONDS = TESTS / "file-seconds.txt"
"""Each test file's seconds in the last measured `make test` (`make file-seconds` writes it): the order in which
sharing sessions take files, longest first. A file not listed goes last."""
_claimed: dict[str, bool] = {}


def file_seconds() -> dict[str, float]:
    """tests/file-seconds.txt's seconds by file (the path from the checkout's root), empty without it."""
    if not FILE_SECONDS.is_file():
        return {}
    rows = (line.split() for line in FILE_SECONDS.read_text().splitlines() if line and not line.startswith("#"))
    return {path: float(seconds.rstrip("s")) for seconds, path in rows}


def longest_files_first(items) -> None:
    """``items`` reordered in place: whole files, the longest first by tests/file-seconds.txt (then by path), each
    file's tests in their own order."""
    seconds = file_seconds()
    first_seen = {}
    for index, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::")[0], index)
    items.sort(key=lambda item: (-seconds.get(path := item.nodeid.split("::")[0], 0.0), first_seen[path]))


def pytest_addoption(parser):
    parser.addoption(
        "--share",
        metavar="DIR",
        help="a directory that two or more sessions of the same tests share (scripts/test-tiers.sh): each takes the "
        "longest files first (tests/file-seconds.txt) and runs a file only if it claims it first (a file in DIR), so "
        "the sessions draw files from one queue and each file runs once, in one session, with its module fixtures",
    )


def claims(share: str, path: str) -> bool:
    """Whether this session runs the file ``path``: True for the first session sharing ``share`` to ask, once and
    for all."""
    if path not in _claimed:
        claim = Path(share) / path.replace("/", "__")
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            _claimed[path] = True
        except FileExistsError:
            _claimed[path] = False
    return _claimed[path]


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """With ``--share``, pytest's own loop over the files this session claims: a file is claimed when this
    session is ready for it (the one after the file it is running, when that one's last test starts, so that
    its fixtures are torn down for the next test as pytest tears them down), and a file another session claimed
    is neither run nor reported here."""
    share = session.config.getoption("share")
    if not share or INNER_SESSION:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
    if session.config.option.collectonly:
        return True
    files: dict[str, list] = {}
    for item in session.items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    queue = iter(files.items())

    def next_claimed():
        return next((tests for path, tests in queue if claims(share, path)), None)

    current = next_claimed()
    while current:
        upcoming = None
        for index, item in enumerate(current):
            if index + 1 < len(current):
                following = current[index + 1]
            else:  # the last test of the file: claim the next, whose first test decides what is torn down
                upcoming = next_claimed()
                following = upcoming[0] if upcoming else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        current = upcoming
    return True


def pytest_runtest_logreport(report):
    """Each test's time, set-up and tear-down included."""
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """The session's slowest tests and files, its total and its tiers' totals, into test-durations.txt."""
    if INNER_SESSION:  # the rank tests' inner sessions keep quiet
        return
    sessions = Path(os.environ["PRTE_MCA_prte_tmpdir_base"])
    if sessions.name.startswith("evo-tests-mpi-"):  # ours, not a user's own setting
        shutil.rmtree(sessions, ignore_errors=True)
    if not _durations:
        return
    tiers: dict[str, float] = {}
    for nodeid, seconds in _durations.items():
        tier = nodeid.split("/")[1] if nodeid.startswith("tests/") and nodeid.count("/") > 1 else "?"
        tiers[tier] = tiers.get(tier, 0.0) + seconds
    files: dict[str, float] = {}
    for nodeid, seconds in _durations.items():
        files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0.0) + seconds
    slowest = sorted(_durations.items(), key=lambda item: -item[1])[:60]
    lines = [
        f"# {time.strftime('%Y-%m-%d %H:%M:%S')}: {len(_durations)} tests, {sum(_durations.values()):.0f} s in tests "
        f"(exit status {int(exitstatus)}); by tier: "
        + ", ".join(f"{tier} {seconds:.0f} s" for tier, seconds in sorted(tiers.items())),
        *(f"{seconds:8.2f}s  {nodeid}" for nodeid, seconds in slowest),
        "# by file, every one:",
        *(f"{seconds:8.2f}s  {path}" for path, seconds in sorted(files.items(), key=lambda item: -item[1])),
        f"# over {LONG_S} s without a docstring that says why (docs/testing.md, the budget):",
        *(
            f"{seconds:8.2f}s  {nodeid}"
            for nodeid, seconds in slowest
            if seconds > LONG_S and nodeid not in _documented
        ),
    ]
    DURATIONS.write_text("\n".join(lines) + "\n")


@pytest.fixture
def tiny_hyperparams(tmp_path) -> Path:
    return write_hyperparams(tmp_path)


RUNS = TESTS.parent / "runs"
"""Where a run goes without --run-dir (runs/<exp-name>, relative to the working directory, which is
the checkout for the suite): no test may write there, since a user's own runs live in it."""


def _runs_here() -> set[str]:
    return set(os.listdir(RUNS)) if RUNS.is_dir() else set()


@pytest.fixture(autouse=True)
def no_run_in_the_checkout():
    """Fails the test that left a new run directory in the checkout's runs/ (give it --run-dir, or
    ``check_run_dir=False`` and no TensorBoard)."""
    before = _runs_here()
    yield
    new = sorted(_runs_here() - before)
    assert not new, f"the test wrote {', '.join(f'runs/{name}' for name in new)} in the checkout: give it a --run-dir"
