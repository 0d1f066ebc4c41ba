"""The IMPALA CNN of the Procgen paper (Espeholt et al. 2018; Cobbe et al. 2020) as an SB3 features extractor.

This module imports torch, gymnasium and Stable-Baselines3 only, never evo: evo-export writes a copy of it
beside an exported IMPALA member's zip (``<env>_impala.py``, the zip's env name as a Python name), whose
``policy_kwargs`` name that copy's :class:`ImpalaCNN`, so that SB3's ``PPO.load`` opens the zip where evo is
not installed, with the export folder on ``sys.path`` (evo/tools/export.py). evo's own members use this
module's class through evo.sb3.policies.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv0(torch.relu(x))
        out = self.conv1(torch.relu(out))
        return x + out


class ConvSequence(nn.Module):
    """conv 3x3 -> max-pool 3x3 stride 2 -> two residual blocks."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.res0 = ResidualBlock(out_channels)
        self.res1 = ResidualBlock(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res1(self.res0(self.pool(self.conv(x))))


class ImpalaCNN(BaseFeaturesExtractor):
    """IMPALA CNN: conv sequences of 16, 32, 32 channels, then ReLU and a dense layer.

    Expects channel-first images (SB3 transposes HWC observations and scales them to [0, 1]).
    With ``channels_last`` the convolutions get NHWC-ordered tensors, which oneDNN runs much
    faster on CPU; the values computed are the same up to float rounding.
    """

    def __init__(
        self, observation_space: gym.spaces.Box, features_dim: int = 256, depths=(16, 32, 32), channels_last=False
    ):
        super().__init__(observation_space, features_dim)
        self.channels_last = channels_last
        channels, height, width = observation_space.shape
        sequences = []
        for depth in depths:
            sequences.append(ConvSequence(channels, depth))
            channels, height, width = depth, (height + 1) // 2, (width + 1) // 2
        self.cnn = nn.Sequential(*sequences, nn.Flatten(), nn.ReLU())
        self.linear = nn.Sequential(nn.Linear(channels * height * width, features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            observations = observations.contiguous(memory_format=torch.channels_last)
        return self.linear(self.cnn(observations))
