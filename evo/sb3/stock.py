"""What SB3 without evo sees of a member: a stock SB3 model of its algorithm and architecture holding
its state (SB3's own policy classes, torch's Adam), its statistics in a stock ``VecNormalize``, its
settings as rl-baselines3-zoo's ``config.yml`` holds them; and a member played as SB3's
``evaluate_policy`` plays an agent (evo-export and evo-evaluate, evo/tools/export.py and evo/tools/evaluate.py).

A zip that SB3 saves from an evo member names evo's classes (PPO's policy
``evo.sb3.policies.MixedPrecisionPolicy`` with ``precision`` among its kwargs, the optimizers
``evo.sb3.optimizer.EagerAdam``, the channels-last NatureCNN), which SB3 cannot load where evo is not
installed. :func:`stock_model` builds SB3's own model instead and copies the member's state into it:
the state_dicts the algorithm names in ``_get_torch_save_params`` (policy and optimizers) and its
tensors (SAC's ``log_ent_coef``). What to re-check when SB3 changes: ``_get_torch_save_params``,
``set_parameters``, ``VecNormalize``'s constructor and ``save``.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import torch
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.save_util import recursive_getattr
from stable_baselines3.common.torch_layers import NatureCNN
from stable_baselines3.common.vec_env import VecNormalize

from evo.config.agent import ATARI_WRAPPER
from evo.config.envnames import is_atari, sticky_actions
from evo.core.envparams import attribute, is_env_param
from evo.sb3.learner import constructor_parameters, episode_infos
from evo.sb3.normalize import freeze_into, frozen
from evo.sb3.optimizer import stock_optimizer
from evo.sb3.policies import ImpalaCNN, NatureCNNChannelsLast
from evo.sb3.set_env_params import EXPORTED_AS

ENV_PARAMS_WRAPPER = f"{EXPORTED_AS}.SetEnvParams"
"""The env_wrapper that sets a member's env parameters on the env zoo's enjoy builds (:func:`zoo_config` names
it; evo-export writes evo/sb3/set_env_params.py into the export as its module)."""

ACTIVATION_NAMES = {"tanh": "nn.Tanh", "relu": "nn.ReLU", "elu": "nn.ELU", "leaky_relu": "nn.LeakyReLU"}
"""evo's activation names as zoo's YAML writes the classes (``activation_fn=nn.ReLU``)."""


class NotExportable(ValueError):
    """A member whose network SB3 has no class for (the IMPALA CNN) and no stand-in was given for."""


def stock_policy(member, impala: type | None = None) -> tuple[str, dict[str, Any]]:
    """SB3's policy name and policy_kwargs for ``member``'s architecture, in SB3's own classes; an IMPALA
    member's extractor as ``impala``, a copy of evo/sb3/impala.py's class imported under the name the export
    gives it (evo.tools.export.standalone_impala)."""

    kwargs = dict(member.policy_kwargs())
    kwargs.pop("precision", None)
    if "optimizer_class" in kwargs:
        kwargs["optimizer_class"] = stock_optimizer(kwargs["optimizer_class"])
    if kwargs.get("optimizer_class") is torch.optim.Adam and "optimizer_kwargs" not in kwargs:
        del kwargs["optimizer_class"]  # SB3's default: torch's Adam (PPO: with eps=1e-5, as evo's)
    extractor = kwargs.get("features_extractor_class")
    if extractor is ImpalaCNN and impala is None:
        raise NotExportable("the IMPALA CNN is evo's own network class: give the export's copy of it")
    if extractor in (ImpalaCNN, NatureCNNChannelsLast):
        kwargs["features_extractor_class"] = NatureCNN if extractor is NatureCNNChannelsLast else impala
        kwargs["features_extractor_kwargs"] = {
            k: v for k, v in kwargs.get("features_extractor_kwargs", {}).items() if k != "channels_last"
        }
    return member.policy_name(), kwargs


def stock_arguments(member, algorithm: type) -> dict[str, Any]:
    """The member's settings that ``algorithm``'s constructor takes, as the member trains with them
    (its hyperparameters over the YAML's)."""

    accepted = constructor_parameters(algorithm)
    values = {**member.agent.settings, **member.hparams}
    arguments = {name: value for name, value in values.items() if name in accepted and name in member.spec.by_name}
    model = member.model
    for name in member.held_arguments:  # as the model holds them
        if name in accepted and hasattr(model, name):
            arguments[name] = copy.deepcopy(getattr(model, name))
    return arguments


def stock_class(algorithm: type) -> type:
    """The SB3 or sb3-contrib class ``algorithm`` is (evo's own subclasses stand in for it)."""
    return next(
        cls for cls in algorithm.__mro__ if cls.__module__.split(".")[0] in ("stable_baselines3", "sb3_contrib")
    )


ZOO_NAMES = {"RecurrentPPO": "ppo_lstm"}
"""rl_zoo3's ``--algo`` names that are not the class's name in lower case (rl_zoo3.utils.ALGOS)."""


def zoo_algo(algo: str) -> str:
    """rl_zoo3's name of learner ``algo``'s algorithm: a built-in learner's own name, and a learner of your own
    (``module:Class``) by the SB3 or sb3-contrib class it trains (docs/examples' TRPO is zoo's ``trpo``), so that
    the export's folder and zoo's enjoy name it as zoo does."""
    if ":" not in algo:
        return algo
    from evo.sb3.learner import learner_class

    name = stock_class(learner_class(algo).algorithm).__name__
    return ZOO_NAMES.get(name, name.lower())


def stock_algorithm(member) -> type:
    """The SB3 or sb3-contrib class that ``member``'s model is."""
    return stock_class(type(member.model))


def stock_model(member, impala: type | None = None):
    """A stock SB3 (or sb3-contrib) model of ``member``'s algorithm and architecture, holding its state
    (an IMPALA member's extractor: ``impala``, as :func:`stock_policy`)."""

    algorithm = stock_algorithm(member)
    policy, policy_kwargs = stock_policy(member, impala)
    model = algorithm(
        policy,
        member.model.env,
        policy_kwargs=policy_kwargs,
        seed=member.model.seed,
        device="cpu",
        verbose=0,
        **stock_arguments(member, algorithm),
    )
    model.set_parameters(member.model.get_parameters(), exact_match=True, device="cpu")
    _, variables = member.model._get_torch_save_params()
    for name in variables:  # tensors that are not in a state_dict (SAC's log_ent_coef)
        recursive_getattr(model, name).data.copy_(recursive_getattr(member.model, name).data)
    model.num_timesteps = member.model.num_timesteps
    model._n_updates = member.model._n_updates
    for name in ("exploration_rate", "_n_calls"):  # DQN's and QR-DQN's ε where training left it, their step count
        if hasattr(member.model, name):
            setattr(model, name, getattr(member.model, name))
    return model


def save_normalization(member, path: Path) -> None:
    """The member's statistics in a stock VecNormalize, saved as SB3's ``VecNormalize.save`` does."""

    source = member.normalizer
    stock = VecNormalize(
        source.venv,
        training=False,
        norm_obs=source.norm_obs,
        norm_reward=source.norm_reward,
        clip_obs=source.clip_obs,
        clip_reward=source.clip_reward,
        gamma=source.gamma,
        epsilon=source.epsilon,
        norm_obs_keys=source.norm_obs_keys,
    )
    stock.obs_rms = copy.deepcopy(source.obs_rms)
    stock.ret_rms = copy.deepcopy(source.ret_rms)
    stock.save(str(path))


def zoo_config(member) -> OrderedDict:
    """The member's settings as rl-baselines3-zoo's ``config.yml`` holds them: its YAML entry, keys
    sorted, values as zoo's YAML writes them (``policy_kwargs`` and ``normalize`` as Python text). Its env
    parameters (the values of its ``env.<attribute>`` hyperparameters) as the last ``env_wrapper``,
    :data:`ENV_PARAMS_WRAPPER` with ``attrs``, which sets them on the env enjoy builds."""

    agent = member.agent
    algorithm = stock_algorithm(member)
    values = {
        name: value
        for name, value in stock_arguments(member, algorithm).items()
        if name not in ("action_noise",) and not callable(value)
    }
    for name in member.zoo_names:
        if name in member.hparams or name in agent.settings:
            values[name] = {**agent.settings, **member.hparams}[name]
    _, policy_kwargs = stock_policy(member, ImpalaCNN)  # the names written are not the extractor's
    policy_text = ", ".join(
        f"{name}={ACTIVATION_NAMES.get(agent.policy_kwargs.get('activation_fn'), value)}"
        if name == "activation_fn"
        else f"{name}={value!r}"
        for name, value in policy_kwargs.items()
        if name in ("net_arch", "activation_fn", *member.spec.policy_kwargs)
    )
    values.update(
        policy=member.policy_name(),
        n_envs=agent.n_envs,
        n_timesteps=int(member.env_steps),
        normalize=(
            f"{{'norm_obs': {agent.normalize['norm_obs']}, 'norm_reward': {agent.normalize['norm_reward']}}}"
            if member.normalizer is not None
            else False
        ),
    )
    if policy_text:
        values["policy_kwargs"] = f"dict({policy_text})"
    if member.setup.env.env_kwargs:
        values["env_kwargs"] = dict(member.setup.env.env_kwargs)
    values.update(atari_entries(member.setup.env.env_id, dict(member.setup.env.env_kwargs)))
    if agent.frame_stack:
        values["frame_stack"] = agent.frame_stack
    if agent.env_wrapper:  # as zoo writes it: enjoy wraps the env the same way
        values["env_wrapper"] = [{path: dict(kwargs)} if kwargs else path for path, kwargs in agent.env_wrapper]
    env_params = {attribute(name): _plain(value) for name, value in member.hparams.items() if is_env_param(name)}
    if env_params:  # after the run's own wrappers: the attributes are set where set_env_param sets them in evo
        values["env_wrapper"] = [*values.get("env_wrapper", []), {ENV_PARAMS_WRAPPER: {"attrs": env_params}}]
    return OrderedDict((name, _plain(values[name])) for name in sorted(values))


def atari_entries(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """For an Atari game, the ``env_wrapper`` and ``env_kwargs`` zoo builds evo's env with: its AtariWrapper,
    with the sticky actions evo draws there rather than in the emulator (evo.config.envnames.sticky_actions);
    nothing for other envs."""
    if not is_atari(env_id):
        return {}
    kwargs, sticky = sticky_actions(env_id, env_kwargs)
    wrapper = {ATARI_WRAPPER: {"action_repeat_probability": sticky}} if sticky else ATARI_WRAPPER
    return {"env_wrapper": [wrapper], "env_kwargs": kwargs}


def _plain(value: Any) -> Any:
    """A value YAML writes without a Python tag (numpy scalars as numbers)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        return value.item()
    return value


def play(member, env, episodes: int, deterministic: bool = True, seed: int = 0) -> list[float]:
    """``member``'s returns on ``episodes`` episodes of ``env`` (raw rewards; with observation
    normalisation, the member's statistics frozen on a wrapper of ``env``). ``deterministic``: the
    policy's most likely action (argmax, or the Gaussian's mean); else actions sampled from it, as
    DrAC's test.py plays Procgen, from torch's generator seeded with ``seed`` (the same draws for every
    member played with the same seed)."""
    return play_recorded(member, env, episodes, deterministic=deterministic, seed=seed)[0]


def play_recorded(
    member,
    env,
    episodes: int,
    info_keys: tuple[str, ...] = (),
    deterministic: bool = True,
    seed: int = 0,
    on_step: Callable[[], Any] | None = None,
) -> tuple[list[float], dict[str, list[float]]]:
    """As :func:`play`, and each of ``info_keys`` at the end of each episode that reported it (``env``
    made with those keys, evo.sb3.envs.make_env). The member's env parameters are set on ``env`` first.
    ``on_step``, if given, is called at every env step the episodes count (the final pick's watchdog and
    env-step count: evo.runner.final)."""
    from evo.sb3.envs import set_env_param

    for name, value in member.hparams.items():
        if is_env_param(name):
            set_env_param(env, attribute(name), value)
    normalize = member.agent.normalize
    if member.normalizer is not None and normalize["norm_obs"]:
        env = frozen(env, normalize)
        freeze_into(member.normalizer, env)
    if not deterministic:
        torch.manual_seed(seed)
    infos, collect = episode_infos(info_keys, on_step)
    returns, _ = evaluate_policy(
        member.model,
        env,
        n_eval_episodes=episodes,
        deterministic=deterministic,
        return_episode_rewards=True,
        warn=False,
        callback=collect,
    )
    return [float(r) for r in returns], infos


class _Actions:
    """What SB3's ``evaluate_policy`` asks of a model, for a policy that ignores what it sees."""

    def __init__(self, act, envs: int):
        self.act, self.envs = act, envs

    def predict(self, observation, state=None, episode_start=None, deterministic=False):
        return self.act(self.envs), None


def play_actions(act, env, episodes: int) -> list[float]:
    """The returns of a policy that ignores its observations (``act(n_envs)`` gives the next action of
    every env: a uniform-random or a constant policy, the floors of a study) on ``episodes`` episodes of
    ``env``, counted as :func:`play` counts them, so that both play the same episodes."""
    returns, _ = evaluate_policy(
        _Actions(act, env.num_envs), env, n_eval_episodes=episodes, return_episode_rewards=True, warn=False
    )
    return [float(r) for r in returns]
