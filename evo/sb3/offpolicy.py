"""What SB3's off-policy learners (SAC, TD3) share on the SB3 side: the replay buffer as plain
arrays, in checkpoints and (with ``--exploit-buffer copy``) at an exploit, and ``train_freq``.

**The replay buffer at an exploit.** A recipient takes its donor's networks, target networks,
optimizers and the algorithm's own tensors (the flat state of evo/sb3/flat.py). Its replay
buffer stays its own by default (``--exploit-buffer own``): its transitions are still valid
off-policy data for the copied networks. With ``--exploit-buffer copy`` the donor's filled part of
the buffer travels too, as buffers of the exploit state (``replay.<array>``, and
``replay.position``: the write position and whether it is full), received straight into the
recipient's own arrays.

**In checkpoints** the filled part of each array is saved as a tensor (observations,
next_observations, actions, rewards, dones, timeouts) with the position and the full flag, so a
checkpoint stays loadable with ``weights_only=True`` (SB3's pickled ``save_replay_buffer`` is not
used) and a resumed member continues with the buffer it had. ``--no-checkpoint-buffers`` leaves
it out; the resumed member then refills its buffer, as the log says.

SB3 2.9 details, to re-check when SB3 changes: ``train_freq`` becomes a ``TrainFreq`` at set-up
and is read from the model at every ``learn()``; ``ReplayBuffer``'s arrays are
``(buffer_size, n_envs, ...)`` with ``pos`` and ``full``; SB3's ``NStepReplayBuffer`` keeps its own
``gamma`` (the discount's reach updates it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.type_aliases import TrainFreq, TrainFrequencyUnit

from evo.learners.interface import Layout, Payload, buffers_for
from evo.sb3 import envstate
from evo.sb3.learner import SB3Learner

REPLAY_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
REPLAY, POSITION = "replay.", "replay.position"


def set_train_freq(learner: SB3Learner, value: int) -> None:
    """Collect ``value`` env steps (per env) between updates (SB3 converted the YAML's value to a
    TrainFreq when it built the model, and reads that object at every ``learn()``)."""
    learner.model.train_freq = TrainFreq(int(value), TrainFrequencyUnit.STEP)


def replay_arrays(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    """The filled part of each of the replay buffer's arrays (views, no copy)."""
    filled = buffer.buffer_size if buffer.full else buffer.pos
    return {name: getattr(buffer, name)[:filled] for name in REPLAY_ARRAYS}


def fill_replay(buffer: ReplayBuffer, arrays: Mapping[str, np.ndarray], position: int, full: bool) -> None:
    """Make ``arrays`` (a filled part, from :func:`replay_arrays`) the replay buffer's content."""
    filled = len(arrays["rewards"])
    if filled > buffer.buffer_size:
        raise ValueError(f"{filled} transitions per env do not fit a replay buffer of {buffer.buffer_size}")
    for name in REPLAY_ARRAYS:
        target = getattr(buffer, name)
        if arrays[name].shape[1:] != target.shape[1:]:
            raise ValueError(f"replay {name}: shape {arrays[name].shape[1:]} given, the buffer's is {target.shape[1:]}")
        if not np.shares_memory(target[:filled], arrays[name]):
            target[:filled] = arrays[name]
    buffer.pos, buffer.full = int(position), bool(full)


class OffPolicyLearner(SB3Learner):
    """A member of an off-policy learner: the generic member plus its replay buffer."""

    custom = {"train_freq": set_train_freq}
    readers = {"train_freq": lambda learner: int(learner.model.train_freq.frequency)}

    @property
    def replay_buffer(self) -> ReplayBuffer:
        return self.model.replay_buffer

    # --- the exploit state: with --exploit-buffer copy, the donor's transitions too -------------

    def exploit_state(self) -> dict[str, np.ndarray]:
        state = super().exploit_state()
        if self.setup.exploit_buffer == "copy":
            buffer = self.replay_buffer
            state.update({REPLAY + name: array for name, array in replay_arrays(buffer).items()})
            state[POSITION] = np.array([buffer.pos, int(buffer.full)], dtype=np.int64)
        return state

    def receive_buffers(self, layout: Layout) -> Payload:
        """The member's own weights and statistics; for a donor's transitions, views of the first
        rows of its own replay arrays (received in place: no copy)."""
        own = self.own_buffers()
        for name, dtype, shape in layout:
            if name.startswith(REPLAY) and name != POSITION:
                array = getattr(self.replay_buffer, name[len(REPLAY) :], None)
                if array is not None and array.dtype.str == dtype and shape[0] <= len(array):
                    own[name] = array[: shape[0]]
        return buffers_for(layout, own)

    def load(self, state: Payload, hparams: Mapping[str, Any]) -> None:
        super().load(state, hparams)
        if POSITION in state:
            arrays = {name: state[REPLAY + name] for name in REPLAY_ARRAYS}
            position, full = (int(v) for v in state[POSITION])
            fill_replay(self.replay_buffer, arrays, position, bool(full))

    def update_once_refilled(self) -> None:
        """Skip the updates until the replay buffer holds a batch (SB3 would sample a batch of many
        from the few transitions of an emptied buffer); then SB3's own ``train`` again."""
        model = self.model
        train = model.train

        def train_once_refilled(gradient_steps: int, batch_size: int = 256) -> None:
            if self.replay_buffer.size() < model.batch_size:
                return
            del model.train  # SB3's method from now on
            train(gradient_steps=gradient_steps, batch_size=batch_size)

        model.train = train_once_refilled

    def continue_counts(self, env_steps: int, scores) -> None:
        """Rebuilt with an empty replay buffer: it updates again once the buffer holds a batch."""
        super().continue_counts(env_steps, scores)
        self.update_once_refilled()

    # --- the whole member -------------------------------------------------------------------------

    def member_state(self, replay: bool = True) -> dict[str, Any]:
        state = super().member_state(replay)
        buffer = self.replay_buffer
        # before learning_starts SB3 acts by sampling the action space, from the space's own generator
        state["action_space_rng"] = envstate.to_plain(self.model.action_space.np_random)
        state["replay"] = (
            {
                "arrays": {name: torch.from_numpy(array.copy()) for name, array in replay_arrays(buffer).items()},
                "position": int(buffer.pos),
                "full": bool(buffer.full),
            }
            if replay
            else None
        )
        return state

    def restore(self, payload: Mapping[str, Any]) -> str | None:
        notes = [note for note in [super().restore(payload)] if note]
        saved_rng = payload.get("action_space_rng")
        if saved_rng is not None:
            envstate.from_plain(saved_rng, self.model.action_space.np_random)
        saved = payload.get("replay")
        if saved is None:
            self.update_once_refilled()
            notes.append(
                "its replay buffer was left out of the checkpoint (--no-checkpoint-buffers): it starts empty, and the "
                "member acts with its policy and resumes its updates once the buffer holds a batch of new transitions"
            )
        else:
            arrays = {name: tensor.numpy() for name, tensor in saved["arrays"].items()}
            fill_replay(self.replay_buffer, arrays, saved["position"], saved["full"])
        return "; ".join(notes) or None
