"""A CartPole whose reward turns NaN after some steps, to test what a NaN reward does to a member:
``--env-id tests.nan_env:NanCartPole-v0 --env-kwargs nan_after:N``."""

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class NanCartPole(CartPoleEnv):
    def __init__(self, nan_after: int = 100, **kwargs):
        super().__init__(**kwargs)
        self.nan_after, self.steps = int(nan_after), 0

    def step(self, action):
        self.steps += 1
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, float("nan") if self.steps > self.nan_after else reward, terminated, truncated, info


gym.register("NanCartPole-v0", entry_point=NanCartPole, max_episode_steps=500)
