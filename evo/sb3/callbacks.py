"""What runs inside SB3's ``learn()`` for a member (the stop check, a replayed schedule, progress
lines, a distillation's weight α) and the member's TensorBoard logger."""

from __future__ import annotations

from pathlib import Path

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat

from evo.core.distill import distillation_weight
from evo.core.schedule import hparams_at
from evo.learners.interface import Exchangeable, UpdateMarks


class ResumableTensorBoard(TensorBoardOutputFormat):
    """SB3's TensorBoard writer, with ``purge_step`` so that a resumed run hides the events a
    crashed run wrote after its last checkpoint (no step shows twice)."""

    def __init__(self, folder: str, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=folder, purge_step=purge_step)
        self._is_closed = False


def member_logger(tb_dir: Path | None, purge_step: int | None = None) -> Logger:
    if tb_dir is None:
        return Logger(folder=None, output_formats=[])
    return Logger(folder=str(tb_dir), output_formats=[ResumableTensorBoard(str(tb_dir), purge_step)])


class StopCallback(BaseCallback):
    """Stops ``learn()`` at the next env step once ``should_stop()`` is true; a run's ``should_stop``
    (:class:`~evo.learners.interface.UpdateMarks`) is also told when an update begins (a rollout's end)
    and when env steps begin again (the next rollout's start), so that ``--step-timeout`` does not count
    the update."""

    def __init__(self, should_stop):
        super().__init__()
        self.should_stop = should_stop
        self.marks = should_stop if isinstance(should_stop, UpdateMarks) else None

    def _on_rollout_start(self) -> None:
        if self.marks is not None:
            self.marks.stepping()

    def _on_rollout_end(self) -> None:
        if self.marks is not None:
            self.marks.updating()

    def _on_step(self) -> bool:
        return not self.should_stop()


class NonFiniteReward(ValueError):
    """An env gave a NaN or infinite reward: every update after it would be NaN."""


class FiniteRewards(BaseCallback):
    """Fails a member at the env step that gives a NaN or infinite reward, naming it: left alone, the reward
    makes the next update's losses NaN, and the member fails later with an error about the policy's
    distribution ("invalid logits") that hides the cause."""

    def __init__(self, member_id: int):
        super().__init__()
        self.member_id = member_id

    def _on_step(self) -> bool:
        rewards = self.locals.get("rewards")
        if rewards is not None and not np.isfinite(rewards).all():
            bad = np.flatnonzero(~np.isfinite(rewards))
            raise NonFiniteReward(
                f"member {self.member_id}: its env {int(bad[0])} gave a reward of {rewards[bad[0]]} at env step "
                f"{self.num_timesteps}; a NaN or infinite reward makes every update NaN: check the env's reward "
                "(its --env-kwargs, a reward scale)"
            )
        return True


class ScheduleCallback(BaseCallback):
    """Follows a replayed hyperparameter schedule: when ``learn`` starts and before each rollout
    (an off-policy learner: each collection), the member takes the schedule's hyperparameters for
    its current env-step count (so a change lands on the first rollout boundary at or after the
    schedule's env_steps). At the start of ``learn``, because SB3's off-policy loop passes
    ``train_freq`` to a collection before the collection's ``on_rollout_start``: a change of
    ``train_freq`` made there would size only the collections after it."""

    def __init__(self, member: Exchangeable, schedule):
        super().__init__()
        self.member = member
        self.schedule = list(schedule)

    def _on_training_start(self) -> None:
        self._on_rollout_start()

    def _on_rollout_start(self) -> None:
        wanted = hparams_at(self.schedule, int(self.model.num_timesteps))
        if any(self.member.hparams.get(name) != value for name, value in wanted.items()):
            self.member.set_hparams(wanted)

    def _on_step(self) -> bool:
        return True


class ProgressCallback(BaseCallback):
    """Counts the member's env steps into a progress reporter (rank 0's members only):
    ``advance(n_envs)`` after every vectorised step, ``rollout_ended()`` before each update."""

    def __init__(self, reporter):
        super().__init__()
        self.reporter = reporter

    def _on_step(self) -> bool:
        self.reporter.advance(self.model.n_envs)
        return True

    def _on_rollout_end(self) -> None:
        self.reporter.rollout_ended()


class DistillationCallback(BaseCallback):
    """Sets the model's ``distill_coef`` (α) before each rollout, so before the update that follows
    it: ``distillation_weight`` of the env steps the member has collected since its distillation
    began at ``start`` (so the first update's α is 1, as in BG-PBT's code, which reads the schedule
    before counting the update's rollout)."""

    def __init__(self, start: int, total_steps: int):
        super().__init__()
        self.start = int(start)
        self.total_steps = int(total_steps)

    def _on_rollout_start(self) -> None:
        self.model.distill_coef = distillation_weight(int(self.model.num_timesteps) - self.start, self.total_steps)

    def _on_step(self) -> bool:
        return True


def training_callbacks(member: Exchangeable, should_stop, schedule=(), progress=None) -> CallbackList:
    """What runs inside ``learn`` for a member: the stop check, a replayed schedule if any,
    and the generation's progress report on rank 0 (``progress``: a reporter with ``advance``)."""
    callbacks: list[BaseCallback] = [StopCallback(should_stop), FiniteRewards(member.member_id)]
    if schedule:
        callbacks.append(ScheduleCallback(member, schedule))
    if progress is not None:
        callbacks.append(ProgressCallback(progress))
    return CallbackList(callbacks)
