"""An image task that needs no package beyond numpy and gymnasium, for the GPU benchmark and its device check
(the device machine has no Procgen, whose wheel wants numpy 1.x, nor ALE's ROMs): Catch, as in the
behaviour-suite and DeepMind's early DQN tests, drawn in 64 x 64 RGB like a Procgen frame.

    --env-id bench.image_env:Catch-v0 --hyperparams policy:impala

A ball falls from a random column of a 16-cell-wide board, one row a step; the agent moves a paddle on
the bottom row (left, stay, right) and gets +1 for a catch, -1 for a miss; an episode is 10 balls. Each
cell is 4 x 4 pixels of a 64 x 64 frame; the state is plain data (evo checkpoints it as it does the
classic-control tasks).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

CELLS, PIXELS, BALLS = 16, 4, 10


class Catch(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, render_mode: str | None = None):
        self.render_mode = render_mode
        side = CELLS * PIXELS
        self.observation_space = gym.spaces.Box(0, 255, (side, side, 3), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.ball = (0, 0)
        self.paddle = CELLS // 2
        self.balls = 0

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self.paddle, self.balls = CELLS // 2, 0
        self._drop()
        return self._frame(), {}

    def _drop(self) -> None:
        self.ball = (0, int(self.np_random.integers(CELLS)))

    def step(self, action):
        self.paddle = int(np.clip(self.paddle + int(action) - 1, 0, CELLS - 1))
        row, column = self.ball
        reward = 0.0
        if row + 1 == CELLS - 1:
            reward = 1.0 if column == self.paddle else -1.0
            self.balls += 1
            self._drop()
        else:
            self.ball = (row + 1, column)
        return self._frame(), reward, self.balls >= BALLS, False, {}

    def _frame(self) -> np.ndarray:
        frame = np.zeros(self.observation_space.shape, dtype=np.uint8)
        row, column = self.ball
        frame[row * PIXELS : (row + 1) * PIXELS, column * PIXELS : (column + 1) * PIXELS] = (255, 200, 0)
        bottom = (CELLS - 1) * PIXELS
        frame[bottom:, self.paddle * PIXELS : (self.paddle + 1) * PIXELS] = (0, 160, 255)
        return frame

    def render(self):
        return self._frame()


gym.register("Catch-v0", entry_point=Catch, max_episode_steps=BALLS * CELLS)
