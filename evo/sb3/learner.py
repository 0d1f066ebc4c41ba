"""The generic part of every Stable-Baselines3 learner (SB3's ``BaseAlgorithm`` is its template):
building a member, hyperparameters reaching SB3, scoring, the exploit state and the whole member.

Each algorithm's module (evo/sb3/ppo.py, sac.py, td3.py) subclasses :class:`SB3Learner` with
what is its own: the SB3 class and how it is built, the code that makes its CUSTOM settings
reach the model, and what it adds to the member (a replay buffer).

**The state that moves at an exploit** is what the algorithm itself names as its state (SB3's
``_get_torch_save_params()``), bound into one flat float32 buffer that the model's tensors are
views of (evo/sb3/flat.py); VecNormalize's statistics travel beside it as a float64 buffer
(evo/sb3/normalize.py). The callbacks that run inside ``learn()`` are in evo/sb3/callbacks.py, the
process's random states in evo/sb3/rng.py.

**Hyperparameters reach SB3** through :meth:`SB3Learner.set_hparams`, by the reach each setting
declares (evo/learners/spec.py): a plain attribute the update reads at every call; a schedule
(SB3 turns some values into one); the learning rate, which SB3 keeps in ``lr_schedule`` and
copies into every optimizer at each ``train()``; the discount, of which SB3 keeps copies (the
rollout buffer's, the return normaliser's); or the learner's own code. Setting
``model.learning_rate = x`` alone does nothing; the tests prove each value reaches the next update.

What to re-check when SB3 changes: ``lr_schedule`` and
``update_learning_rate``, ``rollout_buffer.gamma``, schedules as ``FloatSchedule``, and the
learners' own lists in their modules.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import HParam
from stable_baselines3.common.save_util import recursive_getattr
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, update_learning_rate
from torch import nn

from evo.config.agent import AgentSettings
from evo.core.envparams import attribute, is_env_param
from evo.core.objective import DEFAULT, Objective, outcomes_of, scores_of, term_values
from evo.core.result import MemberResult, Scores, Standing
from evo.core.streams import eval_actions_seed, eval_env_seed, member_seed
from evo.learners import DEFAULT_ALGO, LearnerSpec, Reach
from evo.learners.interface import Layout, Payload, buffers_for
from evo.learners.spec import resolved_net_arch
from evo.sb3 import envstate
from evo.sb3.callbacks import member_logger, training_callbacks
from evo.sb3.envs import env_param, make_env, set_env_param
from evo.sb3.flat import bind_flat, bind_tensor, flat_size, init_optimizer_state, is_bound, optimizers_of, unpack
from evo.sb3.normalize import (
    follow_gamma,
    freeze_into,
    frozen,
    load_statistics,
    normalized,
    pack_statistics,
    renormalize_last_obs,
    statistics_size,
)
from evo.sb3.policies import EXTRACTORS
from evo.sb3.precision import require_bf16
from evo.sb3.rng import forked_rng

logger = logging.getLogger(__name__)

_SAID_REPLACED: set[type] = set()
"""The learner classes whose replaced state tensors this process has warned of (once each)."""

CARRIED = (
    "seed",
    "num_timesteps",
    "_episode_num",
    "_n_updates",
    "_last_obs",
    "_last_original_obs",
    "_last_episode_starts",
    "_current_progress_remaining",
    "ep_info_buffer",
    "ep_success_buffer",
    "replay_buffer",
    "action_noise",
)
"""What a rebuilt model (another architecture) keeps of the one it replaces: nothing of it depends on the networks."""
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}
WEIGHTS, NORMALIZATION = "weights", "normalization"


@dataclass(frozen=True)
class EnvSettings:
    """The env a member trains and is evaluated on (every rank builds the same)."""

    env_id: str
    env_kwargs: Mapping[str, Any]
    distribution_mode: str = "easy"
    num_levels: int = 0
    start_level: int = 0
    eval_num_levels: int = 0
    eval_start_level: int = 0


@dataclass(frozen=True)
class MemberSetup:
    """What building one member takes (evo.runner.session.member_factory makes it from the run's Config)."""

    member_id: int
    seed: int
    """The run's seed: the member's model, envs and evaluation derive theirs from it."""
    env: EnvSettings
    agent: AgentSettings
    precision: str = "fp32"
    channels_last: bool = False
    eval_episodes: int = 0
    eval_actions: str = "deterministic"
    """How the evaluation episodes pick actions (``--eval-actions``): the policy's argmax or mean, or sampled."""
    score_window: int = 10
    """The training score is the mean return of this many last training episodes."""
    select_on: str = "train"
    exploit_buffer: str = "own"
    tb_dir: Path | None = None
    env_seed: int | None = None
    """The training envs' seed, if not the member's (a resumed member gets fresh envs)."""
    objective: Objective = DEFAULT
    """What its score is (``--objective``): the return, or numbers the env reports in info."""
    device: str = "cpu"
    """Where the member's networks, optimizer state and update batches live (``--device``: the rank's)."""
    stage_state: bool = False
    """Keep the state in a flat tensor of its own and let it travel through a host copy, as a GPU member
    does, on the CPU too: a GPU member's path, run (and tested) where there is no GPU."""
    budget: int = 0
    """The env steps a member trains in all (generations x planned steps; 0: not known, for tools): what a
    learner's schedule over its whole training runs over (DQN's exploration)."""


def net_arch(layers: list[int] | dict[str, list[int]]) -> list[int] | dict[str, list[int]]:
    """The YAML's ``net_arch`` as SB3 2.x takes it: a list of layer sizes for every part, or a
    mapping of the learner's heads (PPO: pi, vf; SAC and TD3: pi, qf) to their own."""
    if isinstance(layers, dict):
        return {head: list(sizes) for head, sizes in layers.items()}
    return list(layers)


def common_policy_kwargs(agent: AgentSettings, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The policy_kwargs every learner takes as SB3 does (net_arch, activation_fn), and the learner's
    own keys as given (features_dim is the CNN policies' business). ``values``: the member's
    settings, whose architecture settings (``pi_layers`` ...), when given, make the ``net_arch``."""
    options = dict(agent.policy_kwargs)
    kwargs: dict[str, Any] = {}
    shaped = resolved_net_arch(agent.spec, values) if values is not None else None
    if shaped is not None:
        kwargs["net_arch"] = shaped
    elif "net_arch" in options:
        kwargs["net_arch"] = net_arch(options["net_arch"])
    if "activation_fn" in options:
        kwargs["activation_fn"] = ACTIVATIONS[options["activation_fn"]]
    for name in agent.spec.policy_kwargs:
        if name in options:
            kwargs[name] = options[name]
    return kwargs


def policy_arguments(
    agent: AgentSettings, channels_last: bool = False, architecture: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """SB3's policy name and policy_kwargs for our policy names: ``mlp``, or a CNN (``nature``, ``impala``: SB3's
    ``CnnPolicy`` with that features extractor, of ``features_dim`` features; ``channels_last``: NHWC tensors,
    oneDNN's fast layout on CPUs). ``architecture``: a member's ``pi_layers`` ... making the MLP's net_arch."""
    kwargs = common_policy_kwargs(agent, architecture)
    if agent.policy == "mlp":
        return "MlpPolicy", kwargs
    kwargs["features_extractor_class"] = EXTRACTORS[agent.policy]
    if agent.policy == "nature":  # SB3 gives its NatureCNN no hidden layers after the CNN (an `==` test that
        kwargs.setdefault("net_arch", [])  # evo's channels-last subclass fails): SB3's CnnPolicy, zoo's network
    kwargs["features_extractor_kwargs"] = {
        "features_dim": agent.policy_kwargs.get("features_dim", 256 if agent.policy == "impala" else 512),
        "channels_last": channels_last,
    }
    return "CnnPolicy", kwargs


# ---------------------------------------------------------------------------------------
# A member of the population


def constructor_parameters(cls: type) -> set[str]:
    """The keyword arguments ``cls(...)`` takes: its ``__init__``'s, and its bases' as long as an
    ``__init__`` passes ``**kwargs`` on."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(klass.__init__).parameters.values()
        names |= {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names


class SB3Learner:
    """One member trained by an SB3 algorithm, held by one rank (see the module docstring).

    ``buffer`` is its flat state (float32; the model's tensors are views of it); ``stats``, with
    observation/reward normalisation, its VecNormalize statistics (float64, refreshed by
    :meth:`exploit_state`); None without normalisation.

    On a GPU (``setup.device`` not the CPU) the model's tensors are views of ``flat``, a flat tensor on
    the device, and ``buffer`` is its copy in host memory (pinned where CUDA is), which is what travels:
    :meth:`pack` copies the device's state into it, :meth:`load` copies a received state to the device.
    The exchange, the checkpoints and the export read host memory only, whatever the device, so a GPU
    member and a CPU member copy each other exactly, and a checkpoint of either resumes on the other.
    """

    algorithm: ClassVar[type[BaseAlgorithm]]
    """The SB3 class (or evo's subclass of it)."""
    custom: ClassVar[Mapping[str, Callable[[SB3Learner, Any], None]]] = {}
    """How each setting the learner declares CUSTOM reaches the model: ``apply(learner, value)``."""
    readers: ClassVar[Mapping[str, Callable[[SB3Learner], Any]]] = {}
    """Where a CUSTOM setting's value is read back from (for the tests, and the HPARAMS tab)."""
    held_arguments: ClassVar[tuple[str, ...]] = ("batch_size", "action_noise")
    """Constructor arguments a stock SB3 model of the member (evo-export, evo/sb3/stock.py) takes as
    the model holds them rather than as the settings give them (a batch size derived from a
    minibatch count, an action noise object)."""
    zoo_names: ClassVar[tuple[str, ...]] = ()
    """Settings rl-baselines3-zoo's ``config.yml`` names although SB3's constructor does not take them."""
    built: ClassVar[tuple[str, ...]] = ()
    """Fixed settings the learner builds into the model itself (the policy's optimizer class, say) rather
    than passing them to SB3's constructor."""
    replaces_tensors: ClassVar[bool] = False
    """Whether the algorithm's update puts new tensors in place of its state's (``param.data = ...``:
    sb3-contrib's TRPO's line search does), so that the state is no longer the flat buffer's views after
    training: :meth:`pack` binds it again before each exploit, as for any learner, without a warning."""

    def __init__(self, setup: MemberSetup, hparams: Mapping[str, Any]):
        self.member_id = setup.member_id
        self.setup = setup
        self.agent = setup.agent
        self.spec: LearnerSpec = setup.agent.spec
        self.space = setup.agent.search_space
        self.eval_episodes = setup.eval_episodes
        self.eval_actions = setup.eval_actions
        self.score_window = setup.score_window
        self.select_on = setup.select_on
        self.objective = setup.objective
        self.scores: list[float] = []
        self.carried_score = float("nan")
        """The training score its weights had when they last changed hands (an exploit: the
        donor's at that moment); its training score while it has finished no episode since."""
        self.carried_objectives: tuple[float, ...] = ()
        """The objectives carried with it (``--objective``; the donor's on training episodes)."""
        self.carried_outcomes: tuple[float, ...] = ()
        """The outcomes carried with it (the donor's scored training episodes: evo.core.result.Scores.outcomes)."""
        self.eval_env = None
        self.hparams: dict[str, Any] = {}
        self.device = torch.device(setup.device)
        self.flat: torch.Tensor | None = None
        """The flat state on the device (a GPU member's); None on the CPU, where ``buffer`` is it."""
        if setup.precision == "bf16":
            require_bf16(self.device)
        values = {**self.agent.settings, **hparams}
        self.architecture = self.architecture_of(values)
        seed = member_seed(setup.seed, setup.member_id)
        env = make_env(
            setup.env.env_id,
            self.agent.n_envs,
            seed if setup.env_seed is None else setup.env_seed,
            setup.env.distribution_mode,
            setup.env.num_levels,
            setup.env.start_level,
            env_kwargs=dict(setup.env.env_kwargs),
            info_keys=self.objective.info_keys,
            frame_stack=self.agent.frame_stack,
            wrappers=self.agent.env_wrapper,
        )
        if self.agent.normalizes:
            env = normalized(env, self.agent.normalize, values["gamma"])
        self.model = self.build_model(env, values, seed)
        self.model.set_logger(member_logger(setup.tb_dir))
        for optimizer in optimizers_of(self.model):
            init_optimizer_state(optimizer)
        self.eval_env = self.make_eval_env()
        self.set_hparams(hparams)
        self.bind(self.model)
        normalizer = self.normalizer
        self.stats = None
        if normalizer is not None:
            self.stats = pack_statistics(normalizer, np.empty(statistics_size(normalizer), dtype=np.float64))

    # --- what each algorithm provides ---------------------------------------------------

    def build_model(self, env, values: Mapping[str, Any], seed: int) -> BaseAlgorithm:
        """The SB3 model on ``env``, built with ``values`` (every setting, the member's
        hyperparameters over the YAML's): the constructor's own arguments are passed as they are."""
        return self.algorithm(
            self.policy_name(),
            env,
            policy_kwargs=self.policy_kwargs(),
            verbose=0,
            seed=seed,
            device=self.device,
            **self.constructor_arguments(values),
        )

    def policy_name(self) -> str:
        return policy_arguments(self.agent)[0]

    def policy_kwargs(self) -> dict[str, Any]:
        """SB3's policy_kwargs of the member's networks (its architecture: :attr:`architecture`; a CNN's
        features extractor)."""
        return policy_arguments(self.agent, self.setup.channels_last, self.architecture)[1]

    def architecture_of(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The architecture settings among ``values`` (the member's settings), each as an int or None."""
        return {name: None if values.get(name) is None else int(values[name]) for name in self.spec.architecture}

    def rebuild(self, hparams: Mapping[str, Any], state: np.ndarray | None = None) -> None:
        """Become a member of the architecture ``hparams`` give: a new model of that shape on the same
        envs, with the same counters, current observations, episode statistics, logger and replay
        buffer (none of which depends on the networks). ``state`` (its flat size): the networks'
        and optimizers' state it takes as it is (received from a donor: no copy); without it, the
        new model's own initialisation."""
        old, values = self.model, {**self.agent.settings, **hparams}
        self.architecture = self.architecture_of(values)
        model = self.build_model(old.env, values, seed=None)  # None: no global reseed
        for name in CARRIED:
            if hasattr(old, name):
                setattr(model, name, getattr(old, name))
        model.set_logger(old.logger)
        for optimizer in optimizers_of(model):
            init_optimizer_state(optimizer)
        self.model = model
        self.bind(model, state)

    @property
    def staged(self) -> bool:
        """Whether the member's state lives on a device other than the host's memory (a GPU): it then travels
        through a host copy (see the class docstring)."""
        return self.device.type != "cpu" or self.setup.stage_state

    def bind(self, model: BaseAlgorithm, state: np.ndarray | None = None) -> None:
        """Bind ``model``'s state to the member's flat buffer (a new one, or ``state``, taken as it is): on
        the CPU the buffer itself; on a GPU a flat tensor there, and a host copy of it (pinned) to travel."""
        if not self.staged:
            self.buffer = bind_flat(model, state, keep=state is None)
            return
        for optimizer in optimizers_of(model):  # Adam's step counts live on the GPU with the rest: no sync
            for group in optimizer.param_groups:
                if "capturable" in group and self.device.type == "cuda":
                    group["capturable"] = True
        size = flat_size(model) if state is None else state.size
        host = torch.empty(size, dtype=torch.float32, pin_memory=torch.cuda.is_available())
        if state is None:
            self.flat = bind_tensor(model, torch.zeros(size, dtype=torch.float32, device=self.device))
        else:
            self.flat = bind_tensor(model, torch.from_numpy(state).to(self.device, copy=True), keep=False)
        self.buffer = host.numpy()
        host.copy_(self.flat)

    def constructor_arguments(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The settings the SB3 class takes as constructor arguments (evo's own ones are not)."""
        accepted = constructor_parameters(self.algorithm)
        return {name: value for name, value in values.items() if name in accepted and name in self.spec.by_name}

    def make_eval_env(self):
        """The evaluation env for an evaluation now (None without evaluation episodes): made anew from
        :func:`eval_env_seed` of the env steps trained, with the member's env parameters. Nothing of an
        earlier evaluation reaches it (an env's state cannot be checkpointed in general: MuJoCo's, Procgen's,
        an emulator's), so a resumed run evaluates exactly as the uninterrupted one."""
        if self.eval_episodes <= 0:
            return None
        env = self.setup.env
        eval_env = make_env(
            env.env_id,
            min(self.eval_episodes, 8),
            eval_env_seed(self.setup.seed, self.env_steps),
            env.distribution_mode,
            env.eval_num_levels,
            env.eval_start_level,
            env_kwargs=dict(env.env_kwargs),
            info_keys=self.objective.info_keys,
            frame_stack=self.agent.frame_stack,
            wrappers=self.agent.env_wrapper,
        )
        if self.agent.normalize["norm_obs"]:
            eval_env = frozen(eval_env, self.agent.normalize)
        self.set_env_params([eval_env])
        return eval_env

    # --- hyperparameters ------------------------------------------------------------------

    def set_hparams(self, hparams: Mapping[str, Any]) -> None:
        """Make ``hparams`` the values the model uses from the next update on, each by its reach; an env
        parameter (``env.<attribute>``) is set on every env at once (:meth:`set_env_params`)."""
        settings = self.spec.by_name
        self.hparams = {name: self._typed(name, hparams[name]) for name in self.spec.record_order(hparams)}
        for name, value in self.hparams.items():
            if is_env_param(name):
                continue
            reach = settings[name].reach
            if reach is Reach.ATTRIBUTE:
                setattr(self.model, name, value)
            elif reach is Reach.SCHEDULE:
                setattr(self.model, name, FloatSchedule(ConstantSchedule(float(value))))
            elif reach is Reach.LEARNING_RATE:
                self.model.learning_rate = float(value)
                self.model.lr_schedule = FloatSchedule(ConstantSchedule(float(value)))
                for optimizer in optimizers_of(self.model):
                    update_learning_rate(optimizer, float(value))
            elif reach is Reach.DISCOUNT:
                self.model.gamma = float(value)
                for holder in (getattr(self.model, "rollout_buffer", None), getattr(self.model, "replay_buffer", None)):
                    if holder is not None and hasattr(holder, "gamma"):
                        holder.gamma = float(value)
            elif reach is Reach.CUSTOM:
                self.custom[name](self, value)
            elif reach is Reach.ARCHITECTURE:
                if self.architecture[name] != value:
                    raise ValueError(
                        f"member {self.member_id}: {name} {value} is not its network's ({self.architecture[name]}); an "
                        "architecture changes with the weights (load, restore), never on its own"
                    )
            else:
                raise ValueError(f"{name} cannot change while {self.spec.title} trains ({settings[name].why_fixed})")
        follow_gamma(self.model)
        self.set_env_params()

    def set_env_params(self, venvs: Sequence | None = None) -> None:
        """Each env parameter of :attr:`hparams` on ``venvs`` (default: every one of the member's envs,
        training and evaluation), where the env reads it (evo.sb3.envs.set_env_param): its next step sees it."""
        for name, value in self.hparams.items():
            if is_env_param(name):
                for venv in venvs if venvs is not None else (self.model.env, self.eval_env):
                    if venv is not None:
                        set_env_param(venv, attribute(name), value)

    def _typed(self, name: str, value: Any) -> Any:
        if is_env_param(name):
            return self.space[name].coerce(value) if name in self.space else value
        setting = self.spec.by_name[name]
        if setting.may_be_off and (value is None or (isinstance(value, float) and np.isinf(value))):
            return None  # off (a format-1 checkpoint wrote it as inf)
        if name in self.space:
            return self.space[name].coerce(value)
        if setting.type is str:
            return str(value)  # a name (DrAC's augmentation) given outside the search space, by a schedule
        return int(round(float(value))) if setting.type is int else float(value)

    def effective_hparams(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """The values the model will actually use, read from where SB3 reads them."""
        names = self.spec.record_order(names if names is not None else self.hparams)
        model, found = self.model, {}
        progress = model._current_progress_remaining
        for name in names:
            if is_env_param(name):
                found[name] = env_param(self.model.env, attribute(name))
                continue
            reach = self.spec.by_name[name].reach
            if reach is Reach.LEARNING_RATE:
                found[name] = float(model.lr_schedule(progress))
            elif reach is Reach.SCHEDULE:
                found[name] = float(getattr(model, name)(progress))
            elif reach is Reach.DISCOUNT:
                holder = getattr(model, "rollout_buffer", None)
                found[name] = float(holder.gamma if holder is not None else model.gamma)
            elif reach is Reach.CUSTOM:
                found[name] = self.readers[name](self)
            elif reach is Reach.ARCHITECTURE:
                found[name] = self.architecture[name]
            else:
                found[name] = getattr(model, name)
        return found

    # --- training and scores --------------------------------------------------------------

    @property
    def normalizer(self):
        """The training envs' VecNormalize, or None."""
        return self.model.get_vec_normalize_env()

    @property
    def env_steps(self) -> int:
        return int(self.model.num_timesteps)

    def train(self, steps: int, should_stop=None, schedule=(), progress=None, callback=None) -> None:
        """Train for ``steps`` env steps (SB3 rounds up to whole rollouts or collections)."""
        if callback is None:
            callback = training_callbacks(self, should_stop or (lambda: False), schedule, progress)
        self.model.learn(total_timesteps=steps, reset_num_timesteps=False, callback=callback, progress_bar=False)

    def training_score(self) -> float:
        """Mean return of the last ``score_window`` training episodes finished since the weights
        last changed hands; with none, the score the weights carried over (see :attr:`score_train_stale`),
        NaN if they never had one."""
        episodes = list(self.model.ep_info_buffer or [])[-self.score_window :]
        returns = [info["r"] for info in episodes]
        return float(np.mean(returns)) if returns else self.carried_score

    @property
    def score_train_stale(self) -> bool:
        """Whether :meth:`training_score` is carried over rather than measured: no training
        episode finished since the weights last changed hands, so the weights are scored by
        the last score they had (when episodes are long against a generation, a recipient
        may finish none in the generation after its exploit; NaN would rank it last)."""
        return not self.model.ep_info_buffer and not np.isnan(self.carried_score)

    def carry(self, standing: Standing) -> None:
        """What the weights this member now holds had earned (a donor's at its exploit: evo.core.result.Standing):
        its training score until it finishes an episode; the objectives (``--objective``) and the outcomes behind
        the score with it, its objectives and outcomes until then when it selects on training episodes."""
        self.carried_score = float(standing.score_train)
        self.carried_objectives = tuple(float(value) for value in standing.objectives)
        self.carried_outcomes = tuple(float(value) for value in standing.outcomes)

    def test_score(self, on_step=None) -> float:
        """Mean return of ``eval_episodes`` episodes on the evaluation env (for Procgen, levels the
        member never trained on); NaN without evaluation. ``on_step``: as :meth:`evaluation` takes it."""
        return mean_return(self.evaluation(on_step)[0])

    def evaluation(self, on_step=None) -> tuple[list[float], dict[str, list[float]]]:
        """The returns of ``eval_episodes`` episodes on the evaluation env (none without evaluation),
        and each info key the objective reads at the ends of those that reported it (as the env gave
        it: :func:`evo.core.objective.term_values` averages the finite ones). Their actions: the policy's
        argmax or mean, or with ``--eval-actions sampled`` drawn from it by torch generators seeded from
        (run seed, member, env steps trained) and forked from the process's own, so that training draws
        the same numbers either way. ``on_step``, if given, is called at every step of the evaluation env
        (the run's watchdog: evo.runner.watchdog)."""
        infos, collect = episode_infos(self.objective.info_keys, on_step)
        if self.eval_episodes <= 0 or self.eval_env is None:
            return [], infos
        self.eval_env.close()
        self.eval_env = self.make_eval_env()
        if self.stats is not None:
            freeze_into(self.normalizer, self.eval_env)
        sampled = self.eval_actions == "sampled"
        seed = eval_actions_seed(self.setup.seed, self.member_id, self.env_steps) if sampled else None
        with forked_rng(seed, self.device):
            returns, _ = evaluate_policy(
                self.model,
                self.eval_env,
                n_eval_episodes=self.eval_episodes,
                deterministic=not sampled,
                return_episode_rewards=True,
                warn=False,
                callback=collect,
            )
        return list(returns), infos

    def training_objectives(self, train: float) -> tuple[list[float], dict[str, int]]:
        """Each objective term on the training score's episodes (``train``: their mean return): an info
        key's mean over the finite values of those that reported it, and per key how many were NaN or ±inf
        (:func:`evo.core.objective.term_values`); with none finished since the weights changed hands, the
        objectives carried with them (NaN if none were)."""
        episodes = list(self.model.ep_info_buffer or [])[-self.score_window :]
        if not episodes:
            carried = self.carried_objectives
            if len(carried) == len(self.objective.terms):
                values = [
                    train if term.key is None else value
                    for term, value in zip(self.objective.terms, carried, strict=True)
                ]
                return values, {}
            return [train if term.key is None else float("nan") for term in self.objective.terms], {}
        infos = {key: [info[key] for info in episodes if key in info] for key in self.objective.info_keys}
        return term_values(self.objective, train, infos)

    def reported_keys(self, venv) -> tuple[str, ...] | None:
        """The info keys ``venv``'s envs reported when their episodes ended (None: none ended yet, or the
        objective reads no info key)."""
        if not self.objective.info_keys or venv is None:
            return None
        if not sum(venv.get_attr("objective_episodes")):
            return None
        return tuple(sorted({key for keys in venv.get_attr("objective_keys_reported") for key in keys}))

    def evaluate(self, on_step=None) -> Scores:
        """Both scores, and ``score``: the one selection uses (``select_on``); with an objective of its
        own (``--objective``), the objective on those episodes (evo.core.objective). ``on_step``: called at
        every step of the evaluation episodes (evo.learners.interface.Learner.evaluate)."""
        train = self.training_score()
        returns, test_infos = self.evaluation(on_step)
        test = mean_return(returns)
        if self.select_on == "test":
            outcomes = outcomes_of(self.objective, returns, test_infos)
        else:
            outcomes = self.training_outcomes()
        if self.objective.default:
            return Scores(
                score=test if self.select_on == "test" else train,
                score_train=train,
                score_test=test,
                score_train_stale=self.score_train_stale,
                outcomes=outcomes,
            )
        if self.select_on == "test":
            values, nonfinite = term_values(self.objective, test, test_infos)
            keys = self.reported_keys(self.eval_env)
        else:
            values, nonfinite = self.training_objectives(train)
            keys = self.reported_keys(self.model.env)
        score, objectives = scores_of(self.objective, values)
        return Scores(
            score=score,
            score_train=train,
            score_test=test,
            score_train_stale=self.score_train_stale,
            objectives=objectives,
            info_keys=keys,
            nonfinite=nonfinite,
            outcomes=outcomes,
        )

    def training_outcomes(self) -> tuple[float, ...]:
        """The values behind the training score, one per episode it averages (evo.core.result.Scores.outcomes);
        with none finished since the weights changed hands, those carried with them."""
        episodes = list(self.model.ep_info_buffer or [])[-self.score_window :]
        if not episodes:
            return self.carried_outcomes
        infos = {key: [info[key] for info in episodes if key in info] for key in self.objective.info_keys}
        return outcomes_of(self.objective, [info["r"] for info in episodes], infos)

    def score(self) -> float:
        return self.evaluate().score

    # --- the exploit state ----------------------------------------------------------------

    def pack(self) -> np.ndarray:
        """The member's flat state, ready to send (no copy while the model's tensors are still
        views of the buffer; if anything replaced them, they are bound again first); with
        normalisation, ``stats`` is refreshed too."""
        flat = self.buffer if self.flat is None else self.flat
        if not is_bound(self.model, flat):
            if not self.replaces_tensors and type(self) not in _SAID_REPLACED:
                _SAID_REPLACED.add(type(self))
                logger.warning(
                    "member %d: %s's update put new tensors in place of the model's state (it assigns param.data); "
                    "evo binds them to the flat buffer again before each exploit, so what moves is right and costs "
                    "one copy of the state. Said once; a learner whose algorithm does this by design declares "
                    "replaces_tensors = True (evo.sb3.learner.SB3Learner)",
                    self.member_id,
                    type(self).__name__,
                )
            bind_tensor(self.model, torch.from_numpy(flat) if self.flat is None else flat)
        if self.flat is not None:  # the device's state to the host copy that travels
            torch.from_numpy(self.buffer).copy_(self.flat)
        if self.stats is not None:
            pack_statistics(self.normalizer, self.stats)
        return self.buffer

    def exploit_state(self) -> dict[str, np.ndarray]:
        """Networks, optimizers and the algorithm's tensors (``weights``, the model's own memory),
        and the normalisation statistics (``normalization``) if it normalises."""
        state = {WEIGHTS: self.pack()}
        if self.stats is not None:
            state[NORMALIZATION] = self.stats
        return state

    def own_buffers(self) -> dict[str, np.ndarray]:
        """The buffers a donor's state of the same layout is received into: the member's own."""
        own = {WEIGHTS: self.buffer}
        if self.stats is not None:
            own[NORMALIZATION] = self.stats
        return own

    def receive_buffers(self, layout: Layout) -> Payload:
        return buffers_for(layout, self.own_buffers())

    def load(self, state: Payload, hparams: Mapping[str, Any]) -> None:
        """Become a copy of a donor (its ``state``: weights and optimizer state, normalisation
        statistics), then take ``hparams``. Episode statistics are cleared, so the next score
        reflects the new weights only; until an episode finishes, the score is what
        :meth:`carry` gives (NaN without it)."""
        weights = state[WEIGHTS]
        rebuilt = self.architecture_of({**self.agent.settings, **hparams}) != self.architecture
        if rebuilt:
            self.rebuild(hparams, weights)  # the donor's architecture, its state adopted as received
        if weights.size != self.buffer.size:
            raise ValueError(
                f"member {self.member_id}: the donor's state holds {weights.size} floats, this model {self.buffer.size}"
            )
        if self.flat is not None and not rebuilt:  # a GPU member: the received state to the device
            self.flat.copy_(torch.from_numpy(np.ascontiguousarray(weights)))
        elif self.flat is None and (weights is not self.buffer or not is_bound(self.model, self.buffer)):
            unpack(self.model, weights)
        if self.stats is not None:
            stats = state.get(NORMALIZATION)
            if stats is not None and stats is not self.stats:
                np.copyto(self.stats, stats)
            load_statistics(self.normalizer, self.stats)
            renormalize_last_obs(self.model, self.normalizer)
        if self.model.ep_info_buffer is not None:
            self.model.ep_info_buffer.clear()
        self.carried_score = float("nan")
        self.carried_objectives = ()
        self.carried_outcomes = ()
        self.set_hparams(hparams)

    def start_from(self, source: Any) -> None:
        """Take ``source``'s weights, optimizer state, tensors and normalisation statistics (the agent
        ``--init-from`` names, an evo.sb3.source.SourceAgent checked to fit the run), keeping its own
        hyperparameters and its optimizers' settings: what the source's optimizers bring is their state (moments,
        step counts). A run's member (its flat state) is taken as a donor's is at an exploit."""
        if source.state is not None:
            self.load(source.state, self.hparams)
            return
        model = self.model
        settings = [
            [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]
            for optimizer in optimizers_of(model)
        ]
        model.set_parameters(source.params, exact_match=False, device=self.device)
        for optimizer, groups in zip(optimizers_of(model), settings, strict=True):
            for group, own in zip(optimizer.param_groups, groups, strict=True):
                group.update(own)
        for name, tensor in source.variables.items():
            recursive_getattr(model, name).data.copy_(tensor.to(self.device))
        normalizer, statistics = self.normalizer, source.normalization
        if normalizer is not None and statistics is not None:
            if statistics.norm_obs and normalizer.norm_obs:
                normalizer.obs_rms = copy.deepcopy(statistics.obs_rms)
            if statistics.norm_reward and normalizer.norm_reward:
                normalizer.ret_rms = copy.deepcopy(statistics.ret_rms)
            pack_statistics(normalizer, self.stats)
            renormalize_last_obs(model, normalizer)
        self.bind(model)  # the optimizers' loaded state tensors into the member's flat state again
        self.set_hparams(self.hparams)

    # --- the whole member -----------------------------------------------------------------

    def member_state(self, replay: bool = True) -> dict[str, Any]:
        """Everything needed to rebuild this member bit-exactly, as plain data and tensors."""
        buffered = list(self.model.ep_info_buffer or [])
        episodes = [[info["r"], info["l"], info.get("t", 0.0)] for info in buffered]
        objective = {}
        if not self.objective.default:  # what an objective of its own adds (a run of the return has none of it)
            objective["carried_objectives"] = list(self.carried_objectives)
            objective["episode_info"] = {
                key: [float(info.get(key, float("nan"))) for info in buffered] for key in self.objective.info_keys
            }
        return {
            "algo": self.spec.name,
            "member": self.member_id,
            "state": torch.from_numpy(self.pack().copy()),
            "hparams": {name: self.hparams[name] for name in self.hparams},
            "num_timesteps": int(self.model.num_timesteps),
            "episode_num": int(self.model._episode_num),
            "n_updates": int(self.model._n_updates),
            "episodes": torch.tensor(episodes, dtype=torch.float64).reshape(-1, 3),
            "scores": [float(score) for score in self.scores],
            "carried_score": float(self.carried_score),
            "carried_outcomes": list(self.carried_outcomes),
            "normalization": torch.from_numpy(self.stats.copy()) if self.stats is not None else None,
            "envs": envstate.capture(self.model),
            **objective,
        }

    def restore(self, payload: Mapping[str, Any]) -> str | None:
        """Become the member saved in ``payload`` (see :meth:`member_state`); returns a note for
        the log, or None."""
        if payload["member"] != self.member_id:
            raise ValueError(f"payload of member {payload['member']} given to member {self.member_id}")
        if payload.get("algo", DEFAULT_ALGO) != self.spec.name:
            raise ValueError(f"member {self.member_id}: the checkpoint holds a {payload.get('algo')} member")
        state = payload["state"].numpy()
        if self.architecture_of({**self.agent.settings, **payload["hparams"]}) != self.architecture:
            self.rebuild(payload["hparams"])
        if state.size != self.buffer.size:
            raise ValueError(
                f"member {self.member_id}: checkpoint holds {state.size} floats, this policy {self.buffer.size}; "
                "the policy architecture changed since the checkpoint was written"
            )
        unpack(self.model, state)
        self._restore_statistics(payload.get("normalization"))
        self.set_hparams(payload["hparams"])
        self.model.num_timesteps = int(payload["num_timesteps"])
        self.model._episode_num = int(payload["episode_num"])
        self.model._n_updates = int(payload["n_updates"])
        window = self.model._stats_window_size
        episodes = [{"r": float(r), "l": int(length), "t": float(t)} for r, length, t in payload["episodes"].tolist()]
        for key, values in (payload.get("episode_info") or {}).items():
            for episode, value in zip(episodes, values, strict=True):
                if value == value:  # NaN: the env did not report it then
                    episode[key] = float(value)
        self.model.ep_info_buffer = deque(episodes, maxlen=window)
        self.model.ep_success_buffer = deque(maxlen=window)
        self.scores = list(payload["scores"])
        self.carried_score = float(payload.get("carried_score", float("nan")))
        self.carried_objectives = tuple(payload.get("carried_objectives") or ())
        self.carried_outcomes = tuple(payload.get("carried_outcomes") or ())
        saved_envs = payload.get("envs")
        if saved_envs is not None and not envstate.restore(self.model, saved_envs):
            self.set_env_params()
            return "its envs differ from the checkpoint's; starting fresh episodes"
        self.set_env_params()  # the envs as saved hold the member's values; said again, whatever they hold
        return None

    def continue_counts(self, env_steps: int, scores: Sequence[float]) -> None:
        self.model.num_timesteps = int(env_steps)
        self.scores = list(scores)

    def _restore_statistics(self, saved: torch.Tensor | None) -> None:
        if (saved is None) != (self.stats is None):
            raise ValueError(
                f"member {self.member_id}: the checkpoint was written {'without' if saved is None else 'with'} "
                f"observation/reward normalisation, this run trains {'with' if saved is None else 'without'} it"
            )
        if saved is None:
            return
        if saved.numel() != self.stats.size or saved.dtype != torch.float64:
            raise ValueError(
                f"member {self.member_id}: checkpoint holds {saved.numel()} {saved.dtype} normalisation "
                f"statistics, this env needs {self.stats.size} float64"
            )
        np.copyto(self.stats, saved.numpy())
        load_statistics(self.normalizer, self.stats)

    # --- TensorBoard ------------------------------------------------------------------------

    def set_tensorboard(self, tb_dir: Path | None, purge_step: int | None = None) -> None:
        self.model.set_logger(member_logger(tb_dir, purge_step))

    def log_generation(self, result: MemberResult, exploited: bool) -> None:
        """The member's TensorBoard row of the generation: scores, exploited, hyperparameters."""
        record = self.model.logger.record
        record("pbt/score", result.score)
        for key in ("score_train", "score_test"):
            value = getattr(result, key)
            if value == value:  # not NaN
                record(f"pbt/{key}", value)
        for name, value in zip(self.objective.names if result.objectives else (), result.objectives, strict=True):
            if value == value:  # not NaN
                record(f"objective/{name}", value)
        record("pbt/exploited", int(exploited))
        for name, value in result.hparams.items():
            record(f"hparams/{name}", self.space[name].number(value) if name in self.space else value)
        self.model.logger.dump(result.env_steps)

    def log_final(self, result: MemberResult) -> None:
        """TensorBoard's HPARAMS tab: the final score vs the hyperparameters that reached it (named
        choices by their names; the scalars of :meth:`log_generation` show their index)."""
        shown = {
            name: self.space[name].number(value) if name in self.space and not isinstance(value, str) else value
            for name, value in result.hparams.items()
        }
        self.model.logger.record("hparams", HParam({"member": self.member_id, **shown}, {"pbt/score": result.score}))
        self.model.logger.dump(result.env_steps)

    def close(self) -> None:
        self.model.logger.close()
        self.model.env.close()
        if self.eval_env is not None:
            self.eval_env.close()


def mean_return(returns: Sequence[float]) -> float:
    """The mean of the evaluation episodes' ``returns`` as SB3's evaluate_policy takes it; NaN with none."""
    return float(np.mean(returns)) if len(returns) else float("nan")


def episode_infos(
    keys: Sequence[str], on_step: Callable[[], Any] | None = None
) -> tuple[dict[str, list[float]], Callable[[dict, Any], None] | None]:
    """Each of ``keys`` at the end of each episode that reported it, gathered by the callback returned with
    them for SB3's ``evaluate_policy``, which also calls ``on_step`` (if given) at each env step it counts;
    the callback is None where there is nothing to gather or call."""
    infos: dict[str, list[float]] = {key: [] for key in keys}

    def collect(found: dict, _) -> None:  # each env's step of an episode evaluate_policy counts
        if on_step is not None:
            on_step()
        episode = found["info"].get("episode") if found["done"] else None
        for key in infos if episode is not None else ():
            if key in episode:
                infos[key].append(float(episode[key]))

    return infos, collect if infos or on_step is not None else None


def learner_class(algo: str) -> type[SB3Learner]:
    """The SB3 side of learner ``algo``: the ``LEARNER`` of evo/sb3/<algo>.py, or a learner of your own's class."""
    import importlib

    if ":" in algo:
        from evo.learners import user_learner

        return user_learner(algo)[0]
    return importlib.import_module(f"evo.sb3.{algo}").LEARNER


def build_member(setup: MemberSetup, hparams: Mapping[str, Any]) -> SB3Learner:
    """A new member of ``setup``'s learner with ``hparams`` in effect."""
    return learner_class(setup.agent.algo)(setup, hparams)
