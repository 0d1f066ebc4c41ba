"""The learner interface: what the generation loop, the exchange and the checkpoints ask of a
member, whatever trains it. Pure: typing and numpy only.

Three payloads leave a member:

- its **exploit state** (:meth:`Exchangeable.exploit_state`): what a recipient takes from its
  donor at an exploit, as named flat numpy buffers (``weights``: every network, every optimizer's
  state and the algorithm's own tensors, float32; ``normalization``: VecNormalize's statistics,
  float64; with ``--exploit-buffer copy``, the replay buffer's arrays). The buffers *are* the
  member's state (the model's tensors are views of ``weights``), so MPI sends from them and
  receives into them with no copy. Members may differ in size: a recipient is asked for buffers
  of the donor's :data:`Layout` (:meth:`Exchangeable.receive_buffers`) and gets its own when the
  layouts match.
- the **whole member** (:meth:`Learner.member_state`): the exploit state plus its replay buffer,
  its envs, counters, episode statistics and scores, as plain data and tensors: what moving a
  member to another rank carries, and what a checkpoint holds;
- its **checkpoint payload**: the whole member (its replay buffer left out on request) under the
  run's id and generation (evo.rundir.checkpoint.member_payload makes it and stores it).

The SB3 learners (evo/sb3/learner.py) and the toy's workers (evo/toy.py) implement it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evo.core.result import Scores, Standing

Layout = tuple[tuple[str, str, tuple[int, ...]], ...]
"""A payload's shape: (name, dtype, shape) of each buffer, in order."""
Payload = Mapping[str, np.ndarray]


def layout_of(payload: Payload) -> Layout:
    """The :data:`Layout` of ``payload``."""
    return tuple((name, array.dtype.str, tuple(array.shape)) for name, array in payload.items())


def buffers_for(layout: Layout, own: Payload) -> dict[str, np.ndarray]:
    """Buffers of ``layout``: ``own``'s where name, dtype and shape match (received into in place),
    new ones elsewhere."""
    found = {}
    for name, dtype, shape in layout:
        mine = own.get(name)
        if mine is not None and mine.dtype.str == dtype and tuple(mine.shape) == tuple(shape):
            found[name] = mine
        else:
            found[name] = np.empty(shape, dtype=np.dtype(dtype))
    return found


@runtime_checkable
class Exchangeable(Protocol):
    """What the exchange needs of a member (evo.mpi.exchange): an RL learner or a toy worker."""

    member_id: int
    hparams: dict[str, Any]

    @property
    def env_steps(self) -> int: ...

    def exploit_state(self) -> Payload:
        """The state a recipient copies, packed and ready to send (views: no copy)."""
        ...

    def receive_buffers(self, layout: Layout) -> Payload:
        """Buffers to receive a donor's exploit state of ``layout`` into."""
        ...

    def load(self, state: Payload, hparams: Mapping[str, Any]) -> None:
        """Become a copy of the donor whose exploit state is ``state``, then take ``hparams``."""
        ...

    def set_hparams(self, hparams: Mapping[str, Any]) -> None:
        """Take ``hparams`` from the next update on (an explore without a copy)."""
        ...


@runtime_checkable
class UpdateMarks(Protocol):
    """What the ``should_stop`` a run passes to :meth:`Learner.train` also has (evo.runner.watchdog's
    Heartbeat): the learner calls ``updating()`` when its update begins (after a rollout) and
    ``stepping()`` when its env steps begin again, so that the run's ``--step-timeout`` times env steps
    only, not updates (evo.sb3.callbacks does it for SB3's algorithms). A learner that does not call them
    has its updates timed as if they were env steps."""

    def updating(self) -> None: ...

    def stepping(self) -> None: ...


class TrainingHooks(Protocol):
    """What runs while a member trains: the stop check, a replayed schedule, the progress report."""

    should_stop: Callable[[], bool]
    schedule: Sequence[tuple[int, Mapping[str, Any]]]
    progress: Any


@runtime_checkable
class Learner(Exchangeable, Protocol):
    """One member of the population, held by one rank: what the run engine (evo.runner) asks of it."""

    scores: list[float]
    """Its score at the end of each generation so far."""

    def train(
        self,
        steps: int,
        should_stop: Callable[[], bool],
        schedule: Sequence[tuple[int, Mapping[str, Any]]] = (),
        progress: Any = None,
    ) -> None:
        """Train for ``steps`` env steps (rounded up to the learner's units), checking
        ``should_stop`` every env step (and calling its :class:`UpdateMarks`, if it has them), following
        a replayed ``schedule`` if given and reporting env steps to ``progress`` (a
        :class:`evo.core.progress.ProgressReporter`) if given."""
        ...

    def evaluate(self, on_step: Callable[[], object] | None = None) -> Scores:
        """Its scores now: training episodes, evaluation episodes, and the one selection uses. ``on_step``,
        if given, is called at every env step of the evaluation episodes (what it returns needs no
        action): the run's watchdog times the steps by it, and a stop request ends the episodes by
        raising from it."""
        ...

    def carry(self, standing: Standing) -> None:
        """What the weights it now holds had earned (its donor's at an exploit: the training score, the
        objectives with it and the outcomes behind it, evo.core.result.Standing): its standing until it
        finishes an episode of its own."""
        ...

    def member_state(self, replay: bool = True) -> dict[str, Any]:
        """The whole member as plain data and tensors (``replay``: with its replay buffer)."""
        ...

    def restore(self, state: Mapping[str, Any]) -> str | None:
        """Become the member ``state`` holds; returns a note for the log (its envs could not be
        restored, its replay buffer was not saved ...) or None."""
        ...

    def continue_counts(self, env_steps: int, scores: Sequence[float]) -> None:
        """A rebuilt member taking the place of one that failed: its env-step counter continues from
        ``env_steps`` (where the failed generation began) and it keeps the earlier ``scores``."""
        ...

    def log_generation(self, result: Any, exploited: bool) -> None:
        """Its TensorBoard row of a generation."""
        ...

    def log_final(self, result: Any) -> None:
        """Its TensorBoard row at the run's end (the final score against its hyperparameters)."""
        ...

    def set_tensorboard(self, tb_dir: Any, purge_step: int | None = None) -> None:
        """Write its TensorBoard rows to ``tb_dir`` from now on (None: none), dropping rows from ``purge_step``
        on (a restored, restarted or moved member continues its folder)."""
        ...

    def close(self) -> None: ...


def learner_methods() -> tuple[str, ...]:
    """The methods and properties a run calls on a member (:class:`Learner`'s and :class:`Exchangeable`'s), by
    name: what a learner of your own must have (``--algo package.module:ClassName`` is refused without them)."""
    names: list[str] = []
    for protocol in (Exchangeable, Learner):
        names += [
            name
            for name, value in vars(protocol).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property)) and name not in names
        ]
    return tuple(names)


@runtime_checkable
class Distiller(Learner, Protocol):
    """A learner that can be distilled from a teacher (BG-PBT's stages, evo/runner/stages.py): a learner
    whose spec says ``distils``."""

    def start_distillation(
        self,
        teacher_state: np.ndarray,
        teacher_hparams: Mapping[str, Any],
        total_steps: int,
        teacher_normalization: np.ndarray | None = None,
    ) -> None:
        """From the next update on, learn from the teacher whose flat weights are ``teacher_state`` (of
        the architecture ``teacher_hparams`` give) as well as from its own rollouts, for ``total_steps``
        env steps; ``teacher_normalization``: the teacher's statistics, which it takes (if the run
        normalises)."""
        ...
