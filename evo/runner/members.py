"""A run's members, built in one place for every mode: :class:`MemberFactory`.

A member is new (its initial hyperparameters, :class:`InitialHparams`), restored from a checkpoint
(a generation's, or an asynchronous run's own), rebuilt in the place of one that failed, moved
whole to another rank (asynchronous runs), or a BG-PBT stage's student. Nothing here names an
algorithm: members are built through the learner interface (evo/learners/interface.py) by the SB3
side of the run's learner (evo/sb3/<algo>.py). The env seeds of each case are streams of
evo/core/streams.py.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from evo.config.source import SourceRef
from evo.core.kinds import SearchSpace, sample_hparams
from evo.core.restart import Restart
from evo.core.streams import (
    INIT_STREAM,
    MOVED_ENVS,
    RESEEDED_RANK,
    RESTARTED_ENVS,
    RESUMED_ENVS,
    member_seed,
)
from evo.learners.interface import Learner
from evo.rundir.checkpoint import Checkpoint, dump_payload, load_payload, member_payload
from evo.rundir.records import tb_dir
from evo.sb3.learner import MemberSetup, build_member
from evo.sb3.rng import rng_state, set_rng_state

if TYPE_CHECKING:
    from evo.sb3.source import SourceAgent

logger = logging.getLogger("evo")


AROUND = 0.25
"""``--initial-hparams around-source``: how far a member's draw may lie from the source's value, as a share of the
search range in its kind's own coordinate (PB2's [0, 1]: log-spaced for a log range, by horizon for a discount)."""


@dataclass(frozen=True)
class InitialHparams:
    """Where members start: a draw from the search space (``"sample"``, each member its own stream),
    the YAML's values (``"defaults"``), the first entry of a replayed schedule, or ``--init-from``'s agent's
    values (``"source"``; ``"around-source"``: member 0 at them, every other member drawn within
    :data:`AROUND` of them)."""

    space: SearchSpace
    defaults: Mapping[str, Any]
    """The learner's settings for the env (the YAML's values)."""
    how: str = "sample"
    seed: int = 0
    schedule_start: Mapping[str, Any] | None = None
    """A replayed schedule's first hyperparameters (``--schedule``), or None."""
    network: frozenset[str] = frozenset()
    """The learner's architecture settings (``pi_layers`` ...): ``around-source`` draws none of them, as every
    member takes the source's weights, which only the source's network holds."""

    def of(self, member: int, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Member ``member``'s starting hyperparameters (``source``: the source agent's values, by name, for
        the source's ways; without them those take the YAML's, as a member restored right after does)."""
        if self.schedule_start is not None:
            return dict(self.schedule_start)
        if self.how in ("defaults", "source", "around-source"):
            start = {name: kind.coerce(self.defaults[name]) for name, kind in self.space.items()}
            if self.how == "defaults" or source is None:
                return start
            start.update({name: self.source_value(name, source) for name in self.space if name in source})
            if self.how == "source" or member == 0:
                return start
            rng = np.random.default_rng([self.seed, member, INIT_STREAM])
            return {
                name: start[name] if name in self.network else around(kind, start[name], rng)
                for name, kind in self.space.items()
            }
        return sample_hparams(self.space, np.random.default_rng([self.seed, member, INIT_STREAM]))

    def source_value(self, name: str, source: Mapping[str, Any]) -> Any:
        """The source's value of ``name`` within its search range (a value outside it at the nearest bound), or
        the YAML's where the source's is not one of the kind's values."""
        kind = self.space[name]
        try:
            value = kind.clip(kind.coerce(source[name]))
        except (TypeError, ValueError):
            value = None
        return value if value is not None and kind.contains(value) else kind.coerce(self.defaults[name])


def around(kind, centre: Any, rng: np.random.Generator) -> Any:
    """A draw of ``kind`` within :data:`AROUND` of ``centre`` in the kind's unit coordinate."""
    unit = float(np.clip(kind.to_unit(centre) + rng.uniform(-AROUND, AROUND), 0.0, 1.0))
    return kind.from_unit(unit)


@dataclass(frozen=True)
class MemberFactory:
    """How this run builds its members (made once, by the session, from the run's settings)."""

    setup: MemberSetup
    """What building a member takes (its ``member_id``, ``tb_dir`` and ``env_seed`` are each member's)."""
    initial: InitialHparams
    run_id: str
    run_dir: Path | None
    """Where members' TensorBoard folders are (``tb/member_<i>``); None: no event files."""
    tb_writer: bool = True
    world_size: int = 1
    """The run's ranks: a checkpoint of another world size restores no RNG states (:meth:`restore`)."""
    replay: bool = True
    """Whether a member's checkpoint file holds its replay buffer (``--no-checkpoint-buffers``: not)."""
    init_source: SourceRef | None = None
    """``--init-from``'s agent, which new members start from (read when the first is made); None: fresh weights."""

    @functools.cached_property
    def source(self) -> SourceAgent | None:
        """The agent :attr:`init_source` names, read once on this rank."""
        from evo.sb3.source import load_source

        return load_source(self.init_source) if self.init_source is not None else None

    def new(self, member: int, env_seed: int | None = None) -> Learner:
        """A new member ``member`` at the run's start: fresh weights and its initial hyperparameters, or, with
        ``--init-from``, the source's weights, optimizer state and statistics with the hyperparameters
        ``--initial-hparams`` gives it."""
        source = self.source
        if source is None:
            return self.make(member, env_seed=env_seed)
        learner = self.make(member, self.initial.of(member, source.hparams), env_seed=env_seed)
        learner.start_from(source)
        return learner

    # --- new members ------------------------------------------------------------------------------

    def tensorboard(self, member: int) -> Path | None:
        """Member ``member``'s TensorBoard folder, or None (no event files)."""
        return tb_dir(self.run_dir, member, self.tb_writer) if self.run_dir is not None else None

    def make(
        self,
        member: int,
        hparams: Mapping[str, Any] | None = None,
        env_seed: int | None = None,
        tensorboard: bool = True,
    ) -> Learner:
        """A new member ``member`` with ``hparams`` (default: its initial ones) in effect; its envs
        seeded by ``env_seed`` (default: its own stream); ``tensorboard=False`` writes no event files
        (a member whose TensorBoard continues elsewhere, tools, tests)."""
        setup = dataclasses.replace(
            self.setup,
            member_id=member,
            env_seed=env_seed,
            tb_dir=self.tensorboard(member) if tensorboard else None,
        )
        return build_member(setup, self.initial.of(member) if hparams is None else hparams)

    # --- from a synchronous run's checkpoint ------------------------------------------------------

    def build(self, ids: Iterable[int], rank: int, checkpoint: Checkpoint | None) -> dict[int, Learner]:
        """This rank's members by id, new or restored from ``checkpoint`` (each restored before the next
        is built, as the RNG states are part of the restore). A resumed member gets fresh envs, seeded
        by the generation it resumes at."""
        start = checkpoint.generation if checkpoint is not None else 0
        members = {}
        for member_id in ids:
            env_seed = member_seed(self.setup.seed, member_id, stream=RESUMED_ENVS + start) if start else None
            if checkpoint is None:
                member = self.new(member_id, env_seed=env_seed)
            else:
                member = self.make(member_id, env_seed=env_seed)
                self.restore(member, checkpoint, rank)
            members[member_id] = member
        return members

    def restore(self, member: Learner, checkpoint: Checkpoint, rank: int) -> None:
        """``member`` becomes its file in ``checkpoint`` (which must belong to this run); its TensorBoard
        continues after the checkpoint's step. The rank's RNG states come back too, unless the run moved
        to another number of ranks (a rank's states then mix several old ranks': reseeded instead)."""
        path = checkpoint.member_path(member.member_id)
        payload = load_payload(path)
        if payload["run_id"] != self.run_id or payload["generation"] != checkpoint.generation:
            raise RuntimeError(f"{path} does not belong to this checkpoint")
        note = member.restore(payload)
        if note:
            logger.warning("member %d: %s", member.member_id, note)
        member.set_tensorboard(self.tensorboard(member.member_id), member.env_steps + 1)
        if checkpoint.manifest["world_size"] == self.world_size:
            set_rng_state(payload["rng"])
        else:
            torch.manual_seed(member_seed(self.setup.seed, rank, stream=RESEEDED_RANK + checkpoint.generation))

    # --- a failed member, a moved one ------------------------------------------------------------

    def rebuild(self, failed: Learner, restart: Restart, env_steps: int) -> Learner:
        """A new member in the place of ``failed``: fresh weights and envs (seeded anew for each of its
        failures), the restart's hyperparameters, its env-step counter back at ``env_steps`` and its
        earlier scores; its TensorBoard continues after ``env_steps``."""
        env_seed = member_seed(self.setup.seed, failed.member_id, stream=RESTARTED_ENVS + restart.failures)
        member = self.make(failed.member_id, restart.new_hparams, env_seed=env_seed, tensorboard=False)
        member.continue_counts(env_steps, failed.scores)
        member.set_tensorboard(self.tensorboard(failed.member_id), env_steps + 1)
        try:
            failed.close()
        except Exception as error:  # its envs may be what broke
            logger.warning(
                "member %d: closing the failed member: %s: %s", failed.member_id, type(error).__name__, error
            )
        return member

    def moved(self, member_id: int, payload: Mapping[str, Any], env_seed: int | None = None) -> Learner:
        """Member ``member_id`` rebuilt from its whole state (a move to this rank, or an asynchronous
        run's checkpoint), its TensorBoard continuing after its env steps; ``env_seed`` seeds its envs
        (default: a move's, by its env steps: envs that are not plain data start anew, and must not
        start from the same seed at each move, or a member would play the same levels again)."""
        if env_seed is None:
            env_seed = member_seed(self.setup.seed, member_id, stream=MOVED_ENVS + int(payload["num_timesteps"]))
        member = self.make(member_id, payload["hparams"], env_seed=env_seed, tensorboard=False)
        note = member.restore(payload)
        if note:
            logger.warning("member %d: %s", member_id, note)
        member.set_tensorboard(self.tensorboard(member_id), member.env_steps + 1)
        return member

    def resumed(self, member_id: int, path: Path, interval: int) -> tuple[Learner, dict]:
        """Member ``member_id`` from its own checkpoint file (an asynchronous run's, of its ready point
        ``interval``), with fresh envs seeded by that interval and the rank's RNG states as saved;
        returns it and the file's payload."""
        payload = load_payload(path)
        member = self.moved(member_id, payload, member_seed(self.setup.seed, member_id, stream=RESUMED_ENVS + interval))
        set_rng_state(payload["rng"])
        return member, payload

    # --- checkpoint files ---------------------------------------------------------------------------

    def payload(self, member: Learner, generation: int) -> dict[str, Any]:
        """``member``'s checkpoint file at ``generation`` (an asynchronous run's: its interval) as plain
        data, with this rank's RNG states and its replay buffer as the run keeps it."""
        return member_payload(member, self.run_id, generation, rng_state(), self.replay)

    def files(self, members: Mapping[int, Learner], generation: int) -> dict[int, bytes]:
        """Every member's checkpoint file at the end of ``generation`` (one RNG capture for all)."""
        rng = rng_state()
        return {
            member_id: dump_payload(member_payload(member, self.run_id, generation, rng, self.replay))
            for member_id, member in members.items()
        }
