"""A run's members played again on fresh episodes, cached beside the run; and a study's floors.

A population's "best" is the member with the highest selection score, and that score is the
maximum of a few noisy ones: reporting it overstates the member. A study reports instead what
``evo-evaluate`` (evo/tools/evaluate.py) measures: every member of a kept checkpoint (the last one
with the kept best when the run has one), played on ``episodes`` fresh episodes of envs seeded with
:func:`evo.tools.saved.evaluation_seed` of the run's seed, spread over up to 8 envs; for Procgen on
a range of levels disjoint from the training and selection levels. Runs of the same seed get the
same episodes, so the methods of a seed are compared on the same ones. Actions are sampled for
Procgen (as DrAC's test.py plays it) and deterministic elsewhere, unless the study says otherwise.

The returns are cached in the run directory, ``reevaluation.json`` for the last checkpoint and
``reevaluation-gen<G>.json`` for generation G's: {"how": {...}, "members": {member: [return, ...]},
"best_ever": {"member": M, "generation": G, "returns": [...], "digest": D} or null, "digests": {member:
D}}, and for a run with an objective of its own (``--objective info:<key>``) "objectives": {member: {key:
[value at each episode's end, ...]}}. A digest is the sha256 of the member's flat state
(evo.rundir.checkpoint.member_digest): two members with equal digests are the same weights, which equal
returns on every episode do not prove. A cache made another way (other episodes, envs, levels, actions or
checkpoint) is made again. A cache without ``actions`` was made with deterministic actions (before the
option existed); one without digests (before issue 55) is read as it is, its members' weights unknown.

The **floors** of an env and seed: a uniform-random policy, and (for a discrete action space) every
constant action, played on the same episodes as the members; the report shows the random policy and
the best constant action. Any env of a discrete or box action space has them (a box: the random policy
only); another space (MultiDiscrete, a Dict) has none, and the report says so (:class:`NoFloors`). A
Procgen agent that scores what "always fire" scores has learnt nothing the floor does not have. Cached
in the study's folder, ``floors/<env>-seed<k>.json``.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

from evo.config.zoo import recorded_wrappers
from evo.core.names import file_name
from evo.rundir.checkpoint import atomic_write, member_digest
from evo.rundir.jsontext import dumps, number

RESULT = "reevaluation.json"
TOOL = "evo-evaluate"
ENVS = 8
"""Envs the episodes are spread over (``evo-evaluate --envs``): one env plays Procgen's episodes one
step at a time, eight times slower."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FreshReturns:
    """A checkpoint's fresh returns: each member's, and the kept best's (if kept and asked for)."""

    members: dict[int, list[float]]
    best_ever: list[float] | None = None
    best_ever_member: int | None = None
    best_ever_generation: int | None = None
    how: dict = field(default_factory=dict)
    objectives: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    """Each member's info keys of the run's objective at its episodes' ends (empty: the run selected on returns)."""
    digests: dict[int, str] = field(default_factory=dict)
    """Each member's weights digest (evo.rundir.checkpoint.member_digest; empty: a cache made before they were
    recorded)."""
    best_ever_digest: str | None = None

    def mean(self, member: int) -> float:
        return float(np.mean(self.members[member])) if self.members.get(member) else math.nan


def cache_path(run_dir: Path, generation: int | None = None) -> Path:
    """Where a checkpoint's fresh returns are cached (``generation`` None: the last checkpoint's)."""
    return Path(run_dir) / (RESULT if generation is None else f"reevaluation-gen{generation:06d}.json")


def how_made(
    seed: int, episodes: int, levels: tuple[int, int] | None, deterministic: bool, generation: int | None
) -> dict:
    """What a cache records of how its returns were made (the keys of the first studies' caches, and
    ``actions`` and ``generation`` only where they differ from those studies')."""
    how = {"tool": TOOL, "episodes": episodes, "envs": min(episodes, ENVS), "seed": seed,
           "levels": list(levels) if levels else None}  # fmt: skip
    if not deterministic:
        how["actions"] = "sampled"
    if generation is not None:
        how["generation"] = generation
    return how


def _same(saved: dict, wanted: dict) -> bool:
    keys = ("tool", "episodes", "envs", "levels")
    return (
        all(saved.get(key) == wanted[key] for key in keys)
        and saved.get("actions", "deterministic") == wanted.get("actions", "deterministic")
        and saved.get("generation") == wanted.get("generation")
    )


def read_cache(path: Path, wanted: dict | None = None) -> FreshReturns | None:
    """The cached returns at ``path`` if they were made as ``wanted`` says (None: however they were made)."""
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
        how = saved.get("how", {})
        if wanted is not None and not _same(how, wanted):
            return None
        members = {int(m): r for m, r in saved["members"].items()}
        objectives = {
            int(m): {key: [number(v) for v in values] for key, values in o.items()}
            for m, o in (saved.get("objectives") or {}).items()
        }
        digests = {int(m): str(d) for m, d in (saved.get("digests") or {}).items()}
        kept = saved.get("best_ever")
        if kept is None:
            return FreshReturns(members, how=how, objectives=objectives, digests=digests)
        return FreshReturns(
            members, kept["returns"], kept["member"], kept["generation"], how, objectives, digests, kept.get("digest")
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # cut short, hand-edited, another file's
        logger.warning(
            "the re-evaluation cache %s is damaged (%s); its members are played again", path, type(error).__name__
        )
        return None


def reevaluate(
    run_dir: Path,
    episodes: int,
    levels: tuple[int, int] | None = None,
    deterministic: bool = True,
    generation: int | None = None,
) -> FreshReturns:
    """``evo-evaluate``'s returns of every member of the checkpoint (the last, with the kept best, or
    ``generation``'s), newly played."""
    from evo.tools.evaluate import evaluate_members, members_to_evaluate
    from evo.tools.saved import BEST_EVER, evaluation_seed, open_run

    run = open_run(run_dir)
    seed = evaluation_seed(run.config.seed)
    start, count = levels if levels is not None else (None, None)
    chosen = members_to_evaluate(run, None, generation)
    envs = min(episodes, ENVS)
    results = evaluate_members(run, chosen, episodes, seed, envs, start, count, deterministic)
    members, kept, objectives, digests = {}, None, {}, {}
    for result in results:
        if result.member.label.startswith(BEST_EVER):
            kept = result
        else:
            members[result.member.member] = result.returns
            if result.objectives:
                objectives[result.member.member] = result.objectives
            if (digest := member_digest(result.member.path)) is not None:
                digests[result.member.member] = digest
    how = how_made(seed, episodes, levels, deterministic, generation)
    if kept is None:
        return FreshReturns(members, how=how, objectives=objectives, digests=digests)
    return FreshReturns(
        members, kept.returns, kept.member.member, kept.member.generation, how, objectives, digests,
        member_digest(kept.member.path),
    )  # fmt: skip


def reevaluated(
    run_dir: Path,
    episodes: int,
    levels: tuple[int, int] | None = None,
    deterministic: bool = True,
    generation: int | None = None,
    seed: int | None = None,
) -> FreshReturns:
    """The cached fresh returns of the checkpoint if they were made the same way, else new ones (saved).
    ``seed``: the run's seed, to check a cache without opening the run (None: any seed's)."""
    path = cache_path(run_dir, generation)
    wanted = how_made(0 if seed is None else _evaluation_seed(seed), episodes, levels, deterministic, generation)
    cached = read_cache(path, wanted)
    if cached is not None and (seed is None or cached.how.get("seed") == wanted["seed"]):
        return cached
    fresh = reevaluate(Path(run_dir), episodes, levels, deterministic, generation)
    kept = None
    if fresh.best_ever is not None:
        kept = {"member": fresh.best_ever_member, "generation": fresh.best_ever_generation, "returns": fresh.best_ever}
        if fresh.best_ever_digest is not None:
            kept["digest"] = fresh.best_ever_digest
    record = {"how": fresh.how, "members": fresh.members, "best_ever": kept}
    if fresh.objectives:
        record["objectives"] = fresh.objectives
    if fresh.digests:
        record["digests"] = fresh.digests
    atomic_write(path, (dumps(record, indent=1) + "\n").encode())
    return fresh


def _evaluation_seed(seed: int) -> int:
    from evo.tools.saved import evaluation_seed

    return evaluation_seed(seed)


@dataclass(frozen=True)
class Floors:
    """An env's floors on one seed's fresh episodes: a uniform-random policy's returns and, for a discrete
    action space, each constant action's."""

    random: list[float]
    constant: dict[int, list[float]]
    how: dict = field(default_factory=dict)

    @property
    def best_constant(self) -> int | None:
        """The constant action with the highest mean return (ties: the lower action)."""
        if not self.constant:
            return None
        return max(sorted(self.constant), key=lambda action: float(np.mean(self.constant[action])))


def floors_path(out: Path, env_id: str, seed: int) -> Path:
    return Path(out) / "floors" / f"{file_name(env_id)}-seed{seed}.json"


def env_settings(run_dir: Path):
    """What the evaluation env takes of a run (its env, distribution mode, env kwargs, seed and frame stack),
    read from its config.yaml: the floors need no checkpoint."""
    from evo.tools.saved import SavedRun

    saved = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    recorded = saved.get("agent") or {}
    agent = SimpleNamespace(
        frame_stack=int(recorded.get("frame_stack") or 0),
        env_wrapper=recorded_wrappers(recorded.get("env_wrapper")),
    )
    config = SimpleNamespace(
        env_id=saved["env_id"], distribution_mode=saved.get("distribution_mode", "easy"),
        env_kwargs=saved.get("env_kwargs") or {}, seed=int(saved["seed"]), agent=agent,
    )  # fmt: skip
    return SavedRun(Path(run_dir), config, ())


def floors(run_dir: Path, episodes: int, levels: tuple[int, int] | None, path: Path) -> Floors:
    """The floors on the fresh episodes of ``run_dir``'s seed (any run of the env and seed: its env
    settings), cached at ``path``."""
    from evo.tools.saved import evaluation_seed

    run = env_settings(run_dir)
    seed = evaluation_seed(run.config.seed)
    how = how_made(seed, episodes, levels, True, None) | {"tool": "floors"}
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("how") == how:
            return Floors(saved["random"], {int(a): r for a, r in saved["constant"].items()}, how)
    found = play_floors(run, seed, episodes, levels)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"how": how, "random": found.random, "constant": found.constant}
    atomic_write(path, (dumps(record, indent=1) + "\n").encode())
    return Floors(found.random, found.constant, how)


def play_floors(run, seed: int, episodes: int, levels: tuple[int, int] | None) -> Floors:
    """Play the floors (uniform-random policy, then each constant action) on the run's fresh episodes."""
    from gymnasium import spaces

    from evo.core.streams import FLOOR_STREAM
    from evo.sb3.stock import play_actions
    from evo.tools.evaluate import evaluation_env

    start, count = levels if levels is not None else (None, None)
    envs = min(episodes, ENVS)

    def played(act) -> list[float]:
        env = evaluation_env(run, seed, envs, start, count)
        try:
            return play_actions(act, env, episodes)
        finally:
            env.close()

    probe = evaluation_env(run, seed, 1, start, count)
    space = probe.action_space
    probe.close()
    rng = np.random.default_rng(np.random.SeedSequence([seed, FLOOR_STREAM]))
    if isinstance(space, spaces.Discrete):
        random = played(lambda n: rng.integers(space.n, size=n))
        constant = {a: played(lambda n, a=a: np.full(n, a)) for a in range(int(space.n))}
        return Floors(random, constant)
    if isinstance(space, spaces.Box):
        low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
        return Floors(played(lambda n: rng.uniform(low, high, size=(n, *space.shape)).astype(space.dtype)), {})
    raise NoFloors(
        f"fresh.floors: {run.config.env_id}'s action space {space} is neither discrete nor a box, so no floor can "
        "be played; its report has none (fresh.floors: false leaves them out without this warning)"
    )


class NoFloors(ValueError):
    """An env whose action space no floor can be played in (neither discrete nor a box)."""
