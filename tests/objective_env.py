"""An env whose return and objectives are set by its env parameters, so that a test knows who must copy
whom: ``--env-id tests.objective_env:Objectives-v0``.

Every step pays ``weight`` (so the return is ``length × weight``) and reports in info ``merit`` (1 −
``weight``: the objective disagrees with the return), ``cost`` and ``weight`` as they are at that step.
An episode lasts ``length`` steps (default 4), whatever the actions: a member's scores follow from its
env parameters alone, not from what it learned. Both are attributes the env reads at every step
(``env.weight``, ``env.cost`` in a search space); a test reads them back from the info of the steps
that followed a change.
"""

import gymnasium as gym
import numpy as np


class Objectives(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, length: int = 4, weight: float = 0.5, cost: float = 0.5, render_mode: str | None = None):
        self.render_mode = render_mode
        self.length = int(length)
        self.weight = float(weight)
        self.cost = float(cost)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.steps = 0

    def _info(self) -> dict:
        return {"merit": 1.0 - self.weight, "cost": self.cost, "weight": self.weight}

    def _observation(self) -> np.ndarray:
        return np.array([self.steps / self.length, 0.0], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self._observation(), self._info()

    def step(self, action):
        self.steps += 1
        return self._observation(), self.weight, self.steps >= self.length, False, self._info()


if "Objectives-v0" not in gym.envs.registry:
    gym.register("Objectives-v0", entry_point=Objectives)
