"""An env a policy played by its most likely action cannot score on: ``--env-id tests.alternate_env:Alternate-v0``.

It shows the same observation at every step and pays 1 when the action differs from the one before: a
policy that samples its actions earns about half a point a step, one played by its most likely action repeats
it and earns 0 (a MiniGrid agent that trained to 0.13-0.47 scored 0.0 under deterministic evaluation in the
same way). An episode lasts ``length`` steps (default 16). ``Pairs-v0`` is the same env acting with two
binary choices at once (a MultiDiscrete action space: no study floor can be played in it).
"""

import gymnasium as gym
import numpy as np


class Alternate(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, length: int = 16, render_mode: str | None = None):
        self.render_mode = render_mode
        self.length = int(length)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.steps, self.previous = 0, None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps, self.previous = 0, None
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.steps += 1
        reward = float(self.previous is not None and int(action) != self.previous)
        self.previous = int(action)
        return np.zeros(2, dtype=np.float32), reward, self.steps >= self.length, False, {}


class Pairs(Alternate):
    def __init__(self, length: int = 16, render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.action_space = gym.spaces.MultiDiscrete([2, 2])

    def step(self, action):
        return super().step(int(action[0]))


if "Alternate-v0" not in gym.envs.registry:
    gym.register("Alternate-v0", entry_point=Alternate)
    gym.register("Pairs-v0", entry_point=Pairs)
