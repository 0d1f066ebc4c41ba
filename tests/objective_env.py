"""An env whose return and objectives are set by its env parameters, so that a test knows who must copy
whom: ``--env-id tests.objective_env:Objectives-v0``.

Every step pays ``weight`` (so the return is ``length × weight``) and reports in info ``merit`` (1 −
``weight``: the objective disagrees with the return), ``cost`` and ``weight`` as they are at that step.
An episode lasts ``length`` steps (default 4), whatever the actions: a member's scores follow from its
env parameters alone, not from what it learned. Both are attributes the env reads at every step
(``env.weight``, ``env.cost`` in a search space); a test reads them back from the info of the steps
that followed a change.

``odd_every`` N > 0 makes the 1st, (1 + N)th, (1 + 2N)th, ... episode of each copy of the env (every one
with 1) end with ``merit`` as ``odd`` says instead: ``missing`` (the default) leaves it out of info, a
number (``nan``, ``inf``, ``-inf``) puts that number there: an env that reports a key only in some
episodes, or not finite in some or all of them.
"""

import gymnasium as gym
import numpy as np


class Objectives(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        length: int = 4,
        weight: float = 0.5,
        cost: float = 0.5,
        odd_every: int = 0,
        odd: str = "missing",
        render_mode: str | None = None,
    ):
        self.render_mode = render_mode
        self.length = int(length)
        self.weight = float(weight)
        self.cost = float(cost)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.steps = 0
        self.odd_every, self.odd = int(odd_every), str(odd)
        self.episodes = 0

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
        ended = self.steps >= self.length
        info = self._info()
        if ended:
            self.episodes += 1
            if self.odd_every > 0 and (self.episodes - 1) % self.odd_every == 0:
                if self.odd == "missing":
                    del info["merit"]
                else:
                    info["merit"] = float(self.odd)
        return self._observation(), self.weight, ended, False, info


if "Objectives-v0" not in gym.envs.registry:
    gym.register("Objectives-v0", entry_point=Objectives)
