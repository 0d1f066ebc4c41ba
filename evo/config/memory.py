"""Whether a rank's members fit in the machine's memory: an estimate at start-up, from the declared sizes.

Pure apart from reading ``/proc/meminfo``: nothing is built. Each learner estimates what one member holds
(its ``LearnerSpec.memory``: the networks it trains and keeps, its buffers as SB3 allocates them) from its
settings, the largest networks its settings and search space can give, and the env's shapes
(:func:`evo.config.envnames.env_shape`). The estimate is a lower bound (no activations, no CNN layers, no
Python objects), so a size is refused only when even that much cannot be allocated: a run that would fail
at its first allocation, or minutes in, stops before training with the estimate and the fix instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evo.config.agent import AgentSettings
from evo.core.kinds import Kind
from evo.learners.spec import EnvShape

MEMINFO = Path("/proc/meminfo")
UNITS = ("bytes", "kB", "MB", "GB", "TB", "PB", "EB")


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
    agent: AgentSettings, shape: EnvShape | None, members_per_rank: int, available: int | None
) -> list[str]:
    """A problem if the members one rank holds cannot fit in ``available`` bytes, with the estimate
    and the fix; none where the memory or the env's shapes are unknown, or the learner estimates nothing."""
    spec = agent.spec
    if available is None or shape is None or spec.memory is None:
        return []
    inputs = shape.observation_dims if agent.policy == "mlp" else int(agent.policy_kwargs.get("features_dim", 0))
    parts = spec.memory(agent.settings, largest_net_arch(agent), inputs, agent.n_envs, shape)
    member = sum(part.bytes for part in parts)
    if member * members_per_rank <= available:
        return []
    parts = sorted(parts, key=lambda part: part.bytes, reverse=True)
    fixes = [parts[0].fix, *(part.fix for part in parts[1:] if part.bytes * members_per_rank > available)]
    estimate = "; ".join(f"{part.what}: {size(part.bytes)}" for part in parts)
    need = f"each member needs at least {size(member)} ({estimate})"
    if members_per_rank > 1:
        need += f", and {members_per_rank} members per rank need at least {size(member * members_per_rank)}"
        fixes.append("more ranks for the same --num-agents (fewer members per rank)")
    return [
        f"memory: {need}; this machine has {size(available)} available (MemAvailable, /proc/meminfo): use "
        f"{' or '.join(fixes)}"
    ]
