"""Observation and reward normalisation (SB3's ``VecNormalize``) as part of a member.

VecNormalize's running statistics are part of the agent: the network was trained on inputs
scaled by the observation statistics and on rewards scaled by the return statistics, so they
travel with the weights at every exploit and are written into every checkpoint. They move as a
second flat buffer per member, float64 like VecNormalize's own arrays (rounding them through the
float32 weight buffer would break bit equality): for each ``RunningMeanStd`` (the observations',
one per normalised key of a Dict space, then the returns'), its mean, its var, then its count.

What stays with the member's envs, like the envs' own state: the per-env discounted return
``returns`` (the return of the episode running in *this* member's env, which the exploit does
not replace; a resumed member starts fresh episodes, where VecNormalize zeroes it anyway), and
the last raw observation and reward.

RunningMeanStd replaces its arrays at every update, so the model cannot use views of the
buffer as it does for the weights: :func:`pack_statistics` copies them out before a send and
:func:`load_statistics` copies them in after a receive (a few hundred bytes).

SB3 internals used here, to re-check when SB3 changes: ``RunningMeanStd.mean/var/count``,
``VecNormalize.obs_rms/ret_rms/gamma/old_obs/norm_obs_keys``, ``model._last_obs``.
"""

from __future__ import annotations

import copy

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

CLIP_OBS = 10.0
"""rl-baselines3-zoo's (and SB3's) default bound of a normalised observation."""


def normalized(env: VecEnv, normalize: dict[str, bool], gamma: float) -> VecNormalize:
    """``env`` wrapped for training as rl-baselines3-zoo does: statistics updated as it steps,
    the return statistics discounted with the member's ``gamma``."""
    return VecNormalize(
        env,
        training=True,
        norm_obs=normalize["norm_obs"],
        norm_reward=normalize["norm_reward"],
        clip_obs=CLIP_OBS,
        gamma=gamma,
    )


def frozen(env: VecEnv, normalize: dict[str, bool]) -> VecNormalize:
    """``env`` wrapped for evaluation: observations normalised with statistics that
    :func:`freeze_into` copies from the training env, never updated; raw rewards (scores are
    returns on the env's own scale)."""
    return VecNormalize(env, training=False, norm_obs=normalize["norm_obs"], norm_reward=False, clip_obs=CLIP_OBS)


def statistics(normalizer: VecNormalize) -> list[RunningMeanStd]:
    """The running statistics in the flat buffer's order: observations (none without
    ``norm_obs``; one per normalised key of a Dict space), then returns."""
    found = []
    if normalizer.norm_obs:
        obs_rms = normalizer.obs_rms
        found += [obs_rms[key] for key in normalizer.norm_obs_keys] if isinstance(obs_rms, dict) else [obs_rms]
    return [*found, normalizer.ret_rms]


def statistics_size(normalizer: VecNormalize) -> int:
    """float64 values in the flat buffer: mean, var and count of each statistic."""
    return sum(2 * rms.mean.size + 1 for rms in statistics(normalizer))


def pack_statistics(normalizer: VecNormalize, out: np.ndarray) -> np.ndarray:
    """Copy the running statistics into ``out`` (float64, :func:`statistics_size` long)."""
    _check(out, normalizer)
    offset = 0
    for rms in statistics(normalizer):
        size = rms.mean.size
        out[offset : offset + size] = rms.mean.reshape(-1)
        out[offset + size : offset + 2 * size] = rms.var.reshape(-1)
        out[offset + 2 * size] = rms.count
        offset += 2 * size + 1
    return out


def load_statistics(normalizer: VecNormalize, stats: np.ndarray) -> None:
    """Make ``stats`` (from :func:`pack_statistics`) the running statistics, bit for bit."""
    _check(stats, normalizer)
    offset = 0
    for rms in statistics(normalizer):
        size, shape = rms.mean.size, rms.mean.shape
        rms.mean = stats[offset : offset + size].reshape(shape).copy()
        rms.var = stats[offset + size : offset + 2 * size].reshape(shape).copy()
        rms.count = float(stats[offset + 2 * size])
        offset += 2 * size + 1


def _check(buffer: np.ndarray, normalizer: VecNormalize) -> None:
    size = statistics_size(normalizer)
    if buffer.dtype != np.float64 or buffer.size != size:
        raise ValueError(f"normalisation buffer holds {buffer.size} {buffer.dtype}, the env needs {size} float64")


def renormalize_last_obs(model, normalizer: VecNormalize) -> None:
    """After new statistics arrived: the observation the next action is chosen from, scaled by
    them (it was scaled by the statistics it replaced)."""
    if model._last_obs is not None and normalizer.norm_obs and hasattr(normalizer, "old_obs"):
        model._last_obs = normalizer.normalize_obs(normalizer.get_original_obs())


def freeze_into(normalizer: VecNormalize, evaluation: VecNormalize) -> None:
    """Give the evaluation env a copy of the training env's observation statistics as they
    are now (a copy: nothing evaluation does can reach the member's own)."""
    if normalizer.norm_obs:
        evaluation.obs_rms = copy.deepcopy(normalizer.obs_rms)


def follow_gamma(model) -> None:
    """The return statistics discount with the gamma PPO uses (PBT changes it)."""
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        normalizer.gamma = float(model.gamma)
