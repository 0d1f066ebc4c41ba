"""Whether the members of a host's ranks fit in its memory: an estimate at start-up, from the declared sizes.

Pure apart from reading ``/proc/meminfo`` and the host's name (:func:`this_rank`): nothing is built. Each
learner estimates what one member holds (its ``LearnerSpec.memory``: the networks it trains and keeps, its
buffers as SB3 allocates them) from its settings, the largest networks its settings and search space can
give, and the env's shapes (:func:`evo.config.envnames.env_shape`). The estimate is a lower bound (no
activations, no CNN layers, no Python objects), so a size is refused only when even that much cannot be
allocated: a run that would fail at its first allocation, or minutes in, stops before training with the
estimate and the fix instead. Ranks on one host share its memory, so the members of all of them are summed
(:func:`crowded_hosts`): where each rank runs is gathered from every rank at start-up (evo/main.py).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evo.config.agent import AgentSettings
from evo.core.kinds import Kind
from evo.learners.spec import EnvShape, LearnerContext

MEMINFO = Path("/proc/meminfo")
UNITS = ("bytes", "kB", "MB", "GB", "TB", "PB", "EB")
HOSTS_NAMED = 4
"""The crowded hosts a refusal names (then how many more)."""


def available_memory(meminfo: Path = MEMINFO) -> int | None:
    """The bytes the kernel says can be allocated without swapping (``MemAvailable``), or None where it
    does not say (another OS, an old kernel): the check is then skipped."""
    try:
        text = meminfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "MemAvailable" and value.split():
            return int(value.split()[0]) * 1024  # in kB
    return None


@dataclass(frozen=True)
class RankHost:
    """Where one rank runs: its host's name and the bytes MemAvailable said there (None: unknown)."""

    host: str
    available: int | None


def this_rank(meminfo: Path = MEMINFO) -> RankHost:
    """This process's host and its available memory, as every rank reports them at start-up."""
    return RankHost(socket.gethostname(), available_memory(meminfo))


@dataclass(frozen=True)
class HostLoad:
    """The members the ranks on one host hold together, and the memory the host has for them."""

    host: str
    ranks: int
    members: int
    available: int | None


def host_loads(members_per_rank: int, ranks: Sequence[RankHost]) -> list[HostLoad]:
    """Each host's ranks and members (every rank holds ``members_per_rank``), in the order the hosts first
    appear; a host's available memory is the least its ranks read (None where none of them could)."""
    loads: dict[str, HostLoad] = {}
    for rank in ranks:
        load = loads.get(rank.host, HostLoad(rank.host, 0, 0, None))
        known = [value for value in (load.available, rank.available) if value is not None]
        loads[rank.host] = HostLoad(
            rank.host, load.ranks + 1, load.members + members_per_rank, min(known, default=None)
        )
    return list(loads.values())


def crowded_hosts(member_bytes: int, members_per_rank: int, ranks: Sequence[RankHost]) -> list[HostLoad]:
    """The hosts whose ranks' members together need more than the host's available memory (a host whose
    memory is unknown is not checked)."""
    return [
        load
        for load in host_loads(members_per_rank, ranks)
        if load.available is not None and member_bytes * load.members > load.available
    ]


def size(count: float) -> str:
    """Bytes as people read them, in powers of 1000: '17.2 GB'."""
    unit = 0
    while count >= 1000 and unit < len(UNITS) - 1:
        count, unit = count / 1000, unit + 1
    return f"{count:.1f} {UNITS[unit]}" if unit else f"{int(count)} bytes"


def largest_net_arch(agent: AgentSettings) -> dict[str, list[int]]:
    """Each network's hidden layers at the largest a member can have: the architecture settings' values,
    or their search ranges' largest draw (every layer equally wide); ``net_arch`` (or SB3's default)
    where they give none."""
    spec = agent.spec
    net_arch = agent.policy_kwargs.get("net_arch", spec.default_net_arch)
    found = {}
    for head in spec.net_arch_heads:
        hidden = list(net_arch[head] if isinstance(net_arch, Mapping) else net_arch)
        layers = _largest(agent.settings[f"{head}_layers"], agent.search_space.get(f"{head}_layers"))
        width = _largest(agent.settings[f"{head}_width"], agent.search_space.get(f"{head}_width"))
        if layers is not None or width is not None:
            widest = max(hidden, default=1)
            hidden = [width if width is not None else widest] * (layers if layers is not None else len(hidden))
        found[head] = hidden
    return found


def _largest(value: int | None, kind: Kind | None) -> int | None:
    if kind is None:
        return value
    choices = [choice for choice in getattr(kind, "choices", ()) if choice is not None]
    return int(max(choices) if choices else kind.high)


def memory_problems(
    agent: AgentSettings, shape: EnvShape | None, members_per_rank: int, ranks: Sequence[RankHost]
) -> list[str]:
    """A problem if the members of the ``ranks`` on some host cannot fit in that host's available memory,
    naming each such host with the sum, the memory it has and the fix; none where the memory or the env's
    shapes are unknown, or the learner estimates nothing."""
    spec = agent.spec
    if shape is None or spec.memory is None:
        return []
    inputs = shape.observation_dims if agent.policy == "mlp" else int(agent.policy_kwargs.get("features_dim", 0))
    context = LearnerContext(
        agent.settings, agent.search_space, agent.n_envs, shape, agent.policy, largest_net_arch(agent), inputs
    )
    parts = spec.memory(context)
    member = sum(part.bytes for part in parts)
    crowded = crowded_hosts(member, members_per_rank, ranks)
    if not crowded:
        return []
    parts = sorted(parts, key=lambda part: part.bytes, reverse=True)
    least = min(load.available or 0 for load in crowded)
    most = max(load.members for load in crowded)
    fixes = [parts[0].fix, *(part.fix for part in parts[1:] if part.bytes * most > least)]
    if most > 1:
        fixes.append("fewer members per host (a smaller --num-agents, or the same ranks spread over more hosts)")
    estimate = "; ".join(f"{part.what}: {size(part.bytes)}" for part in parts)
    hosts = "; ".join(_host_line(load, member) for load in crowded[:HOSTS_NAMED])
    if len(crowded) > HOSTS_NAMED:
        hosts += f"; and {len(crowded) - HOSTS_NAMED} more hosts"
    return [
        f"memory: each member needs at least {size(member)} ({estimate}); {hosts} (MemAvailable, /proc/meminfo): "
        f"use {' or '.join(fixes)}"
    ]


def _host_line(load: HostLoad, member: int) -> str:
    """'host h: 2 ranks x 18 members = 36 members need at least 43.2 GB, it has 21.0 GB available'."""
    members = f"{load.members} member{'s' if load.members > 1 else ''}"
    if load.members > 1:
        each = load.members // load.ranks
        members = (
            f"{load.ranks} rank{'s' if load.ranks > 1 else ''} x {each} member{'s' if each > 1 else ''} = {members}"
        )
    need = size(member * load.members)
    return f"host {load.host}: {members} need at least {need}, it has {size(load.available or 0)} available"
