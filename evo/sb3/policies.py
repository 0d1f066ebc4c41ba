"""Feature extractors: the IMPALA CNN of the Procgen paper (Espeholt et al. 2018; Cobbe et al. 2020), defined in
evo/sb3/impala.py, which imports nothing of evo (evo-export writes it beside an exported zip); and SB3's
actor-critic policies with a ``precision`` (bfloat16 autocast for the network's body)."""

from __future__ import annotations

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import gymnasium as gym
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import MlpExtractor, NatureCNN

from evo.sb3.impala import ImpalaCNN
from evo.sb3.optimizer import EagerAdam
from evo.sb3.precision import as_float32, autocast, body_dtype


class NatureCNNChannelsLast(NatureCNN):
    """SB3's NatureCNN, optionally fed channels-last tensors (same maths)."""

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 512, channels_last=False, **kwargs):
        super().__init__(observation_space, features_dim, **kwargs)
        self.channels_last = channels_last

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            observations = observations.contiguous(memory_format=torch.channels_last)
        return super().forward(observations)


class MixedPrecisionMlpExtractor(MlpExtractor):
    """SB3's MlpExtractor whose layers run under autocast to ``dtype`` (None: float32), returning float32."""

    def __init__(self, *args, dtype: torch.dtype | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.dtype = dtype

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        with autocast(self.dtype, features.device.type):
            latent = super().forward_actor(features)
        return latent.float()

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        with autocast(self.dtype, features.device.type):
            latent = super().forward_critic(features)
        return latent.float()


class MixedPrecisionPolicy(ActorCriticPolicy):
    """SB3's ActorCriticPolicy with ``precision``: 'bf16' runs the network's body (features
    extractor and MLP extractor) in bfloat16 autocast and everything after it in float32; the
    parameters stay float32 (evo/sb3/precision.py says which op runs in which dtype). 'fp32' is
    SB3's policy: no autocast, and the casts to float32 return their input.

    SB3's default optimizer, torch's Adam with eps=1e-5, becomes :class:`EagerAdam` with the
    same eps (the same arithmetic without importing torch._dynamo); another optimizer class is
    kept as given."""

    def __init__(
        self, *args, precision: str = "fp32", optimizer_class=torch.optim.Adam, optimizer_kwargs=None, **kwargs
    ):
        self.precision = precision
        self.body_dtype = body_dtype(precision)
        if optimizer_class is torch.optim.Adam:
            if optimizer_kwargs is None:
                optimizer_kwargs = {"eps": 1e-5}  # SB3's default for its Adam
            optimizer_class = EagerAdam
        super().__init__(*args, optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs, **kwargs)

    def _get_constructor_parameters(self) -> dict:
        return {**super()._get_constructor_parameters(), "precision": self.precision}

    def set_training_mode(self, mode: bool) -> None:
        """SB3's, without walking every module again when the policy is in ``mode`` already.
        SB3's ``predict()`` sets the mode at every call, so evaluation walked the module tree
        at every step of every episode: a fifth of CartPole's scoring time. The policy's own
        flag stands for all its modules, as SB3 only ever sets the mode of the whole policy."""
        if mode != self.training:
            super().set_training_mode(mode)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = MixedPrecisionMlpExtractor(
            self.features_dim,
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            device=self.device,
            dtype=self.body_dtype,
        )

    def extract_features(self, obs, features_extractor=None):
        with autocast(self.body_dtype, self.device.type):
            features = super().extract_features(obs, features_extractor)
        return as_float32(features)


class MixedPrecisionCnnPolicy(MixedPrecisionPolicy):
    """SB3's ActorCriticCnnPolicy (NatureCNN unless another extractor is given), with ``precision``."""

    def __init__(self, *args, features_extractor_class=NatureCNN, **kwargs):
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)


EXTRACTORS = {"impala": ImpalaCNN, "nature": NatureCNNChannelsLast}
