"""A command's whole process tree, measured from outside: wall time, the CPU seconds of every
process in it, the sum of each process's peak RSS, and how many processes it ran.

Used by ``bench/peers.py``, where one system is an MPI job (mpiexec and its ranks) and another
starts a dozen daemons and workers (Ray), so measuring only the command's own process would
miss most of the cost.

- **CPU seconds**, two ways, both lower bounds of the truth; the larger is reported.
  *Reaped*: the kernel's accounting of reaped children (``getrusage(RUSAGE_CHILDREN)``
  before and after): a process's CPU time is added to its parent's children total when the
  parent waits for it, and so up the tree to this process. This process makes itself a *child
  subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so a descendant whose parent exits first is
  re-parented here instead of to init, and is reaped here, its CPU time counted. That is exact
  for a tree whose every process waits for its children (mpiexec and its ranks), but a parent
  that ignores SIGCHLD lets the kernel reap its children without adding their time anywhere:
  Ray's raylet does, and its workers are where Ray's training runs. *Sampled*: every
  process's own user + system time read from ``/proc/<pid>/stat`` at each sample, the last
  value seen per process, summed: it misses what a process used in its last interval (or a
  process that lived less than one), whoever reaps it.
- **Memory** is sampled every ``interval`` seconds: for every descendant, its ``VmHWM``, the
  peak RSS the kernel keeps for the process (so a peak between two samples is not lost), and
  ``VmRSS``. The summed peak is the sum over processes of each one's own peak; it counts a
  page shared by several processes (libraries, shared memory) once per process, as summing
  ``ps`` would. Kept too, from the samples: the largest sum of ``VmRSS`` at one moment, and
  the largest sum of ``Pss`` (``/proc/<pid>/smaps_rollup``: each shared page divided among
  the processes that map it), what the tree occupied at its fullest, each page once.
- **Processes left behind**: whatever of the tree is still alive when the command exits is
  recorded by name, then terminated (SIGTERM, then SIGKILL) and reaped, so the next
  measurement starts clean and the CPU time they used is counted.

Linux only (``/proc``). A process that lives less than one interval may be missed by the
memory samples (never by the CPU seconds).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class ProcessInfo:
    """One line of ``/proc/<pid>/stat``: what identifies a process and its parent."""

    pid: int
    name: str
    ppid: int
    start_ticks: int
    """Start time in clock ticks since boot: (pid, start_ticks) names one process even when
    the pid is reused."""
    cpu_ticks: int = 0
    """User and system time of the process itself (all its threads), in clock ticks."""


@dataclass(frozen=True)
class ProcessPeak:
    pid: int
    name: str
    peak_rss_kb: int


@dataclass(frozen=True)
class TreeUsage:
    """What one command cost, its whole process tree included."""

    wall_s: float
    cpu_s: float
    """The larger of ``cpu_reaped_s`` and ``cpu_sampled_s``."""
    peak_rss_mb: float
    """Sum over the tree's processes of each one's peak RSS (VmHWM), in MB (10^6 bytes)."""
    concurrent_rss_mb: float
    """The largest sum of the tree's current RSS seen in one sample, in MB."""
    concurrent_pss_mb: float
    """The largest sum of the tree's current PSS seen in one sample, in MB."""
    processes: int
    returncode: int
    left_behind: tuple[str, ...] = ()
    """Names of the processes still alive when the command exited (then killed and reaped)."""
    peaks: tuple[ProcessPeak, ...] = field(default=(), repr=False)
    """Every process seen, largest peak first."""
    cpu_reaped_s: float = 0.0
    """CPU seconds that reached this process through reaped children (RUSAGE_CHILDREN)."""
    cpu_sampled_s: float = 0.0
    """CPU seconds of every process seen, each at its last sample."""

    def to_dict(self) -> dict:
        return {
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "cpu_reaped_s": self.cpu_reaped_s,
            "cpu_sampled_s": self.cpu_sampled_s,
            "peak_rss_mb": self.peak_rss_mb,
            "concurrent_rss_mb": self.concurrent_rss_mb,
            "concurrent_pss_mb": self.concurrent_pss_mb,
            "processes": self.processes,
            "returncode": self.returncode,
            "left_behind": list(self.left_behind),
            "peaks": [{"pid": p.pid, "name": p.name, "peak_rss_kb": p.peak_rss_kb} for p in self.peaks],
        }


def parse_stat(text: str) -> ProcessInfo:
    """``/proc/<pid>/stat``. The name sits in parentheses and may itself hold spaces and
    parentheses, so the fields are read after the last ')'."""
    head, _, tail = text.rpartition(")")
    pid, _, name = head.partition(" (")
    fields = tail.split()
    # after the name: state(0) ppid(1) ... utime(11) stime(12) ... starttime(19), fields 3.. of proc(5)
    return ProcessInfo(
        pid=int(pid),
        name=name,
        ppid=int(fields[1]),
        start_ticks=int(fields[19]),
        cpu_ticks=int(fields[11]) + int(fields[12]),
    )


def parse_status_kb(text: str, key: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmHWM``, ``VmRSS``); 0 when absent (a
    kernel thread, a zombie)."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def descendants(root: int, parents: Mapping[int, int]) -> list[int]:
    """Every pid below ``root`` in the tree that ``parents`` (pid -> parent pid) describes,
    parents before their children; ``root`` itself excluded."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, queue = [], list(sorted(children.get(root, [])))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(sorted(children.get(pid, [])))
    return found


def read_processes(proc: Path = Path("/proc")) -> dict[int, ProcessInfo]:
    """Every process of the system, by pid (those that end while being read are skipped)."""
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            info = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
        found[info.pid] = info
    return found


def read_rss_kb(pid: int) -> tuple[int, int]:
    """(VmHWM, VmRSS) of ``pid`` in kB, (0, 0) if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    return parse_status_kb(status, "VmHWM"), parse_status_kb(status, "VmRSS")


def read_pss_kb(pid: int) -> int:
    """The proportional set size of ``pid`` in kB, 0 if it is gone or the kernel has no
    ``smaps_rollup``."""
    try:
        return parse_status_kb(Path(f"/proc/{pid}/smaps_rollup").read_text(), "Pss")
    except OSError:
        return 0


class TreeSampler:
    """Keeps, for every process ever seen below ``root``, the largest RSS it reached."""

    def __init__(self, root: int, exclude: Sequence[int] = ()):
        self.root = root
        self.exclude = set(exclude)
        self.names: dict[tuple[int, int], str] = {}
        self.peaks_kb: dict[tuple[int, int], int] = {}
        self.cpu_ticks: dict[tuple[int, int], int] = {}
        self.concurrent_kb = 0
        self.concurrent_pss_kb = 0

    def sample(self) -> list[ProcessInfo]:
        """Read the tree once; return its live processes (``exclude``'s subtrees left out)."""
        processes = read_processes()
        parents = {pid: info.ppid for pid, info in processes.items() if pid not in self.exclude}
        live, current, current_pss = [], 0, 0
        for pid in descendants(self.root, parents):
            info = processes[pid]
            peak, rss = read_rss_kb(pid)
            if peak == 0 and rss == 0:
                continue
            key = (pid, info.start_ticks)
            self.names[key] = info.name
            self.peaks_kb[key] = max(self.peaks_kb.get(key, 0), peak, rss)
            self.cpu_ticks[key] = max(self.cpu_ticks.get(key, 0), info.cpu_ticks)
            current += rss
            current_pss += read_pss_kb(pid)
            live.append(info)
        self.concurrent_kb = max(self.concurrent_kb, current)
        self.concurrent_pss_kb = max(self.concurrent_pss_kb, current_pss)
        return live

    def cpu_s(self) -> float:
        """The CPU seconds of every process seen, each at its last sample."""
        return sum(self.cpu_ticks.values()) / os.sysconf("SC_CLK_TCK")

    def peaks(self) -> tuple[ProcessPeak, ...]:
        rows = [ProcessPeak(pid, self.names[(pid, start)], kb) for (pid, start), kb in self.peaks_kb.items()]
        return tuple(sorted(rows, key=lambda row: (-row.peak_rss_kb, row.pid)))


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; False where Linux refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    command: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    interval: float = 0.2,
    timeout: float | None = None,
) -> TreeUsage:
    """Run ``command`` to its end and measure its process tree (see the module docstring).

    Its stdout and stderr go to ``log`` (or are discarded). Past ``timeout`` seconds the tree
    is killed and the usage so far returned with returncode -9.
    """
    become_subreaper()
    me = os.getpid()
    before = set(descendants(me, {pid: info.ppid for pid, info in read_processes().items()}))
    cpu_before = children_cpu_s()
    sampler = TreeSampler(me, exclude=before)
    output = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    start = time.perf_counter()
    try:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            returncode = _follow(process, sampler, interval, start, timeout)
            wall = time.perf_counter() - start
            left = sampler.sample()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
                left = sampler.sample()
            _end_tree(sampler)
    finally:
        if log:
            output.close()
    reaped, sampled = children_cpu_s() - cpu_before, sampler.cpu_s()
    return TreeUsage(
        wall_s=wall,
        cpu_s=max(reaped, sampled),
        peak_rss_mb=sum(sampler.peaks_kb.values()) * 1024 / 1e6,
        concurrent_rss_mb=sampler.concurrent_kb * 1024 / 1e6,
        concurrent_pss_mb=sampler.concurrent_pss_kb * 1024 / 1e6,
        processes=len(sampler.peaks_kb),
        returncode=returncode,
        left_behind=tuple(info.name for info in left),
        peaks=sampler.peaks(),
        cpu_reaped_s=reaped,
        cpu_sampled_s=sampled,
    )


def _follow(process: subprocess.Popen, sampler: TreeSampler, interval: float, start: float, timeout) -> int:
    """Sample until the command exits (or the timeout kills it); its return code."""
    while True:
        sampler.sample()
        try:
            return process.wait(timeout=interval)
        except subprocess.TimeoutExpired:
            if timeout is not None and time.perf_counter() - start > timeout:
                process.kill()
                process.wait()
                return -signal.SIGKILL


def _end_tree(sampler: TreeSampler, grace: float = 5.0) -> None:
    """Terminate and reap whatever is left of the tree: SIGTERM to each process once, SIGKILL
    to those still alive ``grace`` seconds later. Orphans come to this process (the
    subreaper) as their parents die, so this loops until nothing is left to reap."""
    deadline = time.monotonic() + grace
    terminated: set[tuple[int, int]] = set()
    killed: set[tuple[int, int]] = set()
    while True:
        _reap_children(sampler.root, sampler.exclude)
        live = sampler.sample()
        if not live:
            while _reap_children(sampler.root, sampler.exclude):  # zombies re-parented just now
                time.sleep(0.05)
            return
        overdue = time.monotonic() > deadline
        for info in live:
            key = (info.pid, info.start_ticks)
            wanted = None
            if key not in terminated:
                wanted, done = signal.SIGTERM, terminated
            elif overdue and key not in killed:
                wanted, done = signal.SIGKILL, killed
            if wanted is not None:
                done.add(key)
                try:
                    os.kill(info.pid, wanted)
                except ProcessLookupError:
                    pass
        if time.monotonic() > deadline + grace:  # not ours to reap (another parent holds them)
            return
        time.sleep(0.05)


def _reap_children(me: int, exclude: set[int]) -> list[int]:
    """Reap this process's finished children that belong to the tree; their pids."""
    reaped = []
    for pid, info in read_processes().items():
        if info.ppid != me or pid in exclude:
            continue
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if done:
            reaped.append(pid)
    return reaped
