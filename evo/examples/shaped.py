"""A task whose shaped reward can be gamed: why ``--objective`` and env parameters matter (issue 38).

``ShapedCorridor-v0`` (``--env-id evo.examples.shaped:ShapedCorridor-v0``): an agent starts on tile 1 of a
corridor of ``length`` tiles (default 8) and moves left or right; reaching the last tile is the task
(reward 1, the episode ends), and an episode lasts at most ``max_steps`` steps (default 40). Tile 0 is
marked with a **shaped bonus**, a hint of the kind reward shaping adds: every step that ends on it pays
``bonus_weight`` (default 0.05). ``bonus_weight`` is an attribute the env reads at every step, so it
can be an env parameter of the search space (``env.bonus_weight``), changed while the env runs.

The catch: an agent that stays on the marked tile for the whole episode earns ``max_steps ×
bonus_weight`` (2.0 at 0.05), more than the task's 1 whenever ``bonus_weight > 1 / max_steps``. A
population selected on the shaped return therefore favours members with a large weight, who learn to
sit on the tile: PBT drives the weight up and the task is forgotten. The env reports the **true
objective** in ``info`` at every step, so at an episode's end: ``success`` (1 if the agent reached the
last tile), ``bonus`` (the shaped reward it collected) and ``task_return`` (the reward without the
bonus); ``--objective info:success`` selects on the task while every member still trains on its shaped
reward. docs/results.md gives the numbers of both runs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "ShapedCorridor-v0"


class ShapedCorridor(gym.Env):
    """See the module docstring. Observations: the tile, one-hot; actions: 0 left, 1 right."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(
        self, length: int = 8, max_steps: int = 40, bonus_weight: float = 0.05, render_mode: str | None = None
    ):
        if length < 3:
            raise ValueError(f"length {length}: the corridor needs at least 3 tiles (the bonus, the start, the goal)")
        self.length = int(length)
        self.max_steps = int(max_steps)
        self.bonus_weight = float(bonus_weight)
        """The shaped bonus per step on tile 0: an env parameter (read at every step)."""
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(self.length,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = render_mode
        self.position = 1
        self.steps = 0
        self.bonus = 0.0
        self.task_return = 0.0

    def _observation(self) -> np.ndarray:
        observation = np.zeros(self.length, dtype=np.float32)
        observation[self.position] = 1.0
        return observation

    def _info(self) -> dict[str, Any]:
        return {
            "success": float(self.position == self.length - 1),
            "bonus": self.bonus,
            "task_return": self.task_return,
            "bonus_weight": self.bonus_weight,
        }

    def render(self) -> np.ndarray:
        """The corridor as an RGB strip: the bonus tile yellow, the goal green, the agent blue."""
        tiles = np.full((self.length, 3), 230, dtype=np.uint8)
        tiles[0], tiles[-1], tiles[self.position] = (240, 200, 40), (60, 180, 75), (30, 90, 220)
        return np.repeat(np.repeat(tiles[None], 32, axis=0), 32, axis=1)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position, self.steps, self.bonus, self.task_return = 1, 0, 0.0, 0.0
        return self._observation(), self._info()

    def step(self, action):
        self.steps += 1
        self.position = int(np.clip(self.position + (1 if int(action) == 1 else -1), 0, self.length - 1))
        task = 1.0 if self.position == self.length - 1 else 0.0
        shaped = self.bonus_weight if self.position == 0 else 0.0
        self.task_return += task
        self.bonus += shaped
        terminated = task > 0
        truncated = not terminated and self.steps >= self.max_steps
        return self._observation(), task + shaped, terminated, truncated, self._info()


if ENV_ID not in gym.envs.registry:
    gym.register(ENV_ID, entry_point=ShapedCorridor)
