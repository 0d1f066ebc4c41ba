"""The one adapter into Stable-Baselines3: build a PPO member, apply hyperparameters so they
take effect, score it, and move its weights and optimizer state in and out of one flat buffer.

SB3 freezes some hyperparameters at construction: the learning rate lives in
``lr_schedule`` (the optimizer is reset from it at every ``train()``), ``gamma`` and
``gae_lambda`` are copied into the rollout buffer (``gamma`` is also used to bootstrap
truncated episodes), and ``clip_range`` is a schedule. :func:`apply_hparams` is the only
place that writes them. The counts and limits a search space may add (``n_epochs``,
``batch_size`` / ``n_minibatches``, ``max_grad_norm``, ``target_kl``) are plain attributes that
``train()`` reads at every call (SB3's and evo's microbatched one alike), so writing them there
takes effect at the next update.

What to re-check when SB3 changes: ``lr_schedule`` and ``update_learning_rate``, the rollout
buffer's ``gamma`` / ``gae_lambda``, ``clip_range`` as a schedule, and that ``train()`` still
reads ``n_epochs``, ``batch_size``, ``max_grad_norm`` and ``target_kl`` from the model.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import HParam, Logger, TensorBoardOutputFormat
from stable_baselines3.common.utils import (
    ConstantSchedule,
    FloatSchedule,
    update_learning_rate,
)
from torch import nn

from evo.config import AgentSettings, Config
from evo.core.result import MemberResult, Scores
from evo.core.schedule import hparams_at
from evo.core.space import EXPLORED, hparam_names, typed
from evo.sb3 import envstate
from evo.sb3.envs import make_env
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
from evo.sb3.ppo import PPO

logger = logging.getLogger(__name__)

SCORE_WINDOW = 10
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}


def member_seed(seed: int, member: int, stream: int = 0) -> int:
    """A 31-bit seed for ``member`` derived from the run's seed (independent streams)."""
    return int(np.random.SeedSequence([seed, member, stream]).generate_state(1)[0] % (2**31 - 1))


def net_arch(layers: list[int] | dict[str, list[int]]) -> list[int] | dict[str, list[int]]:
    """The YAML's ``net_arch`` as SB3 2.x takes it: a list of layer sizes shared by the policy
    and value networks, or ``dict(pi=[...], vf=[...])`` for separate ones."""
    if isinstance(layers, dict):
        return {"pi": list(layers["pi"]), "vf": list(layers["vf"])}
    return list(layers)


def policy_arguments(agent: AgentSettings, channels_last: bool = False) -> tuple[str, dict]:
    """SB3 policy name and policy_kwargs for our policy names."""
    kwargs: dict = {}
    options = dict(agent.policy_kwargs)
    if "net_arch" in options:
        kwargs["net_arch"] = net_arch(options["net_arch"])
    if "activation_fn" in options:
        kwargs["activation_fn"] = ACTIVATIONS[options["activation_fn"]]
    for name in ("ortho_init", "log_std_init"):
        if name in options:
            kwargs[name] = options[name]
    if agent.policy == "mlp":
        return "MlpPolicy", kwargs
    kwargs["features_extractor_class"] = EXTRACTORS[agent.policy]
    kwargs["features_extractor_kwargs"] = {
        "features_dim": options.get("features_dim", 256 if agent.policy == "impala" else 512),
        "channels_last": channels_last,
    }
    return "CnnPolicy", kwargs


class ResumableTensorBoard(TensorBoardOutputFormat):
    """SB3's TensorBoard writer, with ``purge_step`` so that a resumed run hides the events a
    crashed run wrote after its last checkpoint (no step shows twice)."""

    def __init__(self, folder: str, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=folder, purge_step=purge_step)
        self._is_closed = False


class StopCallback(BaseCallback):
    """Stops ``learn()`` at the next env step once ``should_stop()`` is true."""

    def __init__(self, should_stop):
        super().__init__()
        self.should_stop = should_stop

    def _on_step(self) -> bool:
        return not self.should_stop()


class ScheduleCallback(BaseCallback):
    """Follows a replayed hyperparameter schedule: before each rollout, the member takes the
    schedule's hyperparameters for its current env-step count (so a change lands on the first
    rollout boundary at or after the schedule's env_steps)."""

    def __init__(self, member: Member, schedule):
        super().__init__()
        self.member = member
        self.schedule = list(schedule)

    def _on_rollout_start(self) -> None:
        wanted = hparams_at(self.schedule, int(self.model.num_timesteps))
        if any(self.member.hparams.get(name) != value for name, value in wanted.items()):
            self.member.set_hparams(wanted)

    def _on_step(self) -> bool:
        return True


class ProgressCallback(BaseCallback):
    """Counts the member's env steps into a progress reporter (rank 0's members only):
    ``advance(n_envs)`` after every vectorised step, ``rollout_ended()`` before each update."""

    def __init__(self, reporter):
        super().__init__()
        self.reporter = reporter

    def _on_step(self) -> bool:
        self.reporter.advance(self.model.n_envs)
        return True

    def _on_rollout_end(self) -> None:
        self.reporter.rollout_ended()


def training_callbacks(member: Member, should_stop, schedule=(), progress=None) -> CallbackList:
    """What runs inside ``learn`` for a member: the stop check, a replayed schedule if any,
    and the generation's progress report on rank 0 (``progress``: a reporter with ``advance``)."""
    callbacks: list[BaseCallback] = [StopCallback(should_stop)]
    if schedule:
        callbacks.append(ScheduleCallback(member, schedule))
    if progress is not None:
        callbacks.append(ProgressCallback(progress))
    return CallbackList(callbacks)


def member_logger(tb_dir: Path | None, purge_step: int | None = None) -> Logger:
    if tb_dir is None:
        return Logger(folder=None, output_formats=[])
    return Logger(folder=str(tb_dir), output_formats=[ResumableTensorBoard(str(tb_dir), purge_step)])


def build_model(
    config: Config, member: int, hparams: dict[str, float], tb_dir: Path | None, env_seed: int | None = None
) -> PPO:
    """A fresh PPO agent for ``member`` with ``hparams`` in effect."""
    agent = config.agent
    seed = member_seed(config.seed, member)
    env = make_env(
        config.env_id,
        agent.n_envs,
        seed if env_seed is None else env_seed,
        config.distribution_mode,
        config.num_levels,
        config.start_level,
        env_kwargs=config.env_kwargs,
    )
    if agent.normalizes:
        env = normalized(env, agent.normalize, hparams["gamma"])
    policy, policy_kwargs = policy_arguments(agent, channels_last=config.cpu_tuning)
    model = PPO(
        policy,
        env,
        learning_rate=hparams["learning_rate"],
        n_steps=agent.n_steps,
        batch_size=agent.batch_size,
        microbatch_size=agent.microbatch_size,
        precision=config.precision,
        n_epochs=agent.n_epochs,
        gamma=hparams["gamma"],
        gae_lambda=hparams["gae_lambda"],
        clip_range=hparams["clip_range"],
        ent_coef=hparams["ent_coef"],
        vf_coef=hparams["vf_coef"],
        max_grad_norm=agent.max_grad_norm,
        target_kl=agent.target_kl,
        normalize_advantage=agent.normalize_advantage,
        use_sde=agent.use_sde,
        sde_sample_freq=agent.sde_sample_freq,
        policy_kwargs=policy_kwargs,
        stats_window_size=100,
        verbose=0,
        seed=seed,
        device="cpu",
    )
    model.set_logger(member_logger(tb_dir))
    init_optimizer_state(model.policy.optimizer)
    apply_hparams(model, hparams)
    return model


def apply_hparams(model: PPO, hparams: dict[str, float]) -> None:
    """Make ``hparams`` the values PPO uses from the next rollout and ``train()`` on (the six
    always; ``n_epochs``, ``batch_size`` or ``n_minibatches``, ``max_grad_norm`` and
    ``target_kl`` when given: n_minibatches splits the rollout into that many minibatches of
    ceil(rollout / n) samples; target_kl = inf is SB3's None, no early stop)."""
    learning_rate = float(hparams["learning_rate"])
    model.learning_rate = learning_rate
    model.lr_schedule = FloatSchedule(ConstantSchedule(learning_rate))
    update_learning_rate(model.policy.optimizer, learning_rate)
    model.clip_range = FloatSchedule(ConstantSchedule(float(hparams["clip_range"])))
    model.ent_coef = float(hparams["ent_coef"])
    model.vf_coef = float(hparams["vf_coef"])
    model.gamma = float(hparams["gamma"])
    model.gae_lambda = float(hparams["gae_lambda"])
    model.rollout_buffer.gamma = model.gamma
    model.rollout_buffer.gae_lambda = model.gae_lambda
    if "n_epochs" in hparams:
        model.n_epochs = typed("n_epochs", hparams["n_epochs"])
    if "batch_size" in hparams:
        model.batch_size = typed("batch_size", hparams["batch_size"])
    if "n_minibatches" in hparams:
        model.batch_size = math.ceil(_rollout_size(model) / typed("n_minibatches", hparams["n_minibatches"]))
    if "max_grad_norm" in hparams:
        model.max_grad_norm = float(hparams["max_grad_norm"])
    if "target_kl" in hparams:
        target_kl = float(hparams["target_kl"])
        model.target_kl = target_kl if math.isfinite(target_kl) else None
    follow_gamma(model)


def _rollout_size(model: PPO) -> int:
    return int(model.n_steps * model.n_envs)


def effective_hparams(model: PPO, names: Iterable[str] = EXPLORED) -> dict[str, float]:
    """The values PPO will actually use, read from where SB3 reads them: the six, or ``names``
    (n_minibatches: how many minibatches ``train()`` cuts the rollout into; target_kl: inf
    when there is no early stop)."""
    progress = model._current_progress_remaining
    extra = {
        "n_epochs": lambda: int(model.n_epochs),
        "batch_size": lambda: int(model.batch_size),
        "n_minibatches": lambda: math.ceil(_rollout_size(model) / model.batch_size),
        "max_grad_norm": lambda: float(model.max_grad_norm),
        "target_kl": lambda: math.inf if model.target_kl is None else float(model.target_kl),
    }
    found = {
        "learning_rate": float(model.lr_schedule(progress)),
        "ent_coef": float(model.ent_coef),
        "clip_range": float(model.clip_range(progress)),
        "gamma": float(model.rollout_buffer.gamma),
        "gae_lambda": float(model.rollout_buffer.gae_lambda),
        "vf_coef": float(model.vf_coef),
    }
    return {name: found[name] if name in found else extra[name]() for name in names}


# ---------------------------------------------------------------------------------------
# Flat state: policy weights + Adam state in one contiguous float32 buffer


def init_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Create Adam's state now, exactly as its first step would (zeros, step 0), so that
    every member has the same flat layout from the start."""
    if not isinstance(optimizer, torch.optim.Adam):
        raise TypeError(f"evo moves Adam state; got {type(optimizer).__name__}")
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state[param]
            if not state:
                state["step"] = torch.tensor(0.0, dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)


def _state_slots(model: PPO) -> list[tuple[torch.Tensor, object]]:
    """Every tensor that defines a member's learner, in a fixed order, each with a function
    that puts another tensor in its place: policy parameters and buffers (each once: SB3's
    state_dict lists a shared extractor three times), then Adam's step, exp_avg and
    exp_avg_sq per parameter."""
    policy = model.policy
    optimizer = policy.optimizer
    params = list(policy.parameters())
    trained = [param for group in optimizer.param_groups for param in group["params"]]
    if len(trained) != len(params) or any(a is not b for a, b in zip(trained, params, strict=False)):
        raise TypeError("evo needs the policy's optimizer to hold every policy parameter, in module order")
    slots: list[tuple[torch.Tensor, object]] = []
    for param in params:
        slots.append((param, lambda view, param=param: setattr(param, "data", view)))
    _BUFFER_HOLDERS.pop(policy, None)
    for module, name in _buffer_holders(policy):
        slots.append(
            (module._buffers[name], lambda view, module=module, name=name: module._buffers.__setitem__(name, view))
        )
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state[param]
            for key in ("step", "exp_avg", "exp_avg_sq"):
                slots.append((state[key], lambda view, state=state, key=key: state.__setitem__(key, view)))
    for tensor, _ in slots:
        if tensor.dtype != torch.float32:
            raise TypeError(f"evo's flat buffer holds float32 tensors; found {tensor.dtype}")
    return slots


def _buffer_holders(policy: nn.Module) -> list[tuple[nn.Module, str]]:
    """(module, name) of each registered buffer, each tensor once, in module order (cached:
    the module tree does not change after construction)."""
    holders = _BUFFER_HOLDERS.get(policy)
    if holders is None:
        holders, seen = [], set()
        for module in policy.modules():
            for name, buffer in module._buffers.items():
                if buffer is not None and id(buffer) not in seen:
                    seen.add(id(buffer))
                    holders.append((module, name))
        _BUFFER_HOLDERS[policy] = holders
    return holders


_BUFFER_HOLDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# policy -> (address of its flat buffer, address of each state tensor in it), set by bind_flat
_BOUND_ADDRESSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def state_tensors(model: PPO) -> list[torch.Tensor]:
    """The tensors of :func:`_state_slots`, in the same order. A light walk, as it runs on
    every exchange: the parameters come from the optimizer's groups, which
    :func:`_state_slots` checks hold exactly the policy's parameters in the same order."""
    policy = model.policy
    optimizer = policy.optimizer
    params = [param for group in optimizer.param_groups for param in group["params"]]
    tensors = list(params)
    tensors += [module._buffers[name] for module, name in _buffer_holders(policy)]
    state = optimizer.state
    for param in params:
        entry = state[param]
        tensors += (entry["step"], entry["exp_avg"], entry["exp_avg_sq"])
    return tensors


def bind_flat(model: PPO, flat: np.ndarray | None = None) -> np.ndarray:
    """Move every state tensor into one contiguous float32 buffer and make the model use
    views of it, so the buffer *is* the member's weights and optimizer state: MPI sends
    from it and receives into it with no packing or unpacking copy."""
    slots = _state_slots(model)
    total = sum(tensor.numel() for tensor, _ in slots)
    if flat is None:
        flat = np.empty(total, dtype=np.float32)
    elif flat.size != total or flat.dtype != np.float32:
        raise ValueError(f"flat buffer holds {flat.size} {flat.dtype}, the model needs {total} float32")
    base = torch.from_numpy(flat)
    offset = 0
    with torch.no_grad():
        for tensor, put in slots:
            size = tensor.numel()
            view = base[offset : offset + size].view(tensor.shape)
            if view.data_ptr() != tensor.data_ptr():
                view.copy_(tensor)
                put(view)
            offset += size
    addresses = [flat.ctypes.data + 4 * start for start in np.cumsum([0] + [t.numel() for t, _ in slots[:-1]])]
    _BOUND_ADDRESSES[model.policy] = (flat.ctypes.data, [int(a) for a in addresses])
    return flat


def is_bound(model: PPO, flat: np.ndarray) -> bool:
    """Whether every state tensor is still the view of ``flat`` that bind_flat made."""
    tensors = state_tensors(model)
    cached = _BOUND_ADDRESSES.get(model.policy)
    if cached is not None and cached[0] == flat.ctypes.data:  # what bind_flat made, checked fast
        return len(tensors) == len(cached[1]) and all(
            t.data_ptr() == a for t, a in zip(tensors, cached[1], strict=False)
        )
    address = flat.ctypes.data
    for tensor in tensors:
        if tensor.data_ptr() != address or not tensor.is_contiguous():
            return False
        address += tensor.numel() * 4
    return address == flat.ctypes.data + flat.nbytes


def flat_size(model: PPO) -> int:
    return sum(t.numel() for t in state_tensors(model))


def pack(model: PPO, out: np.ndarray) -> np.ndarray:
    """Copy the member's weights and optimizer state into ``out`` (float32, flat)."""
    target = torch.from_numpy(out)
    offset = 0
    with torch.no_grad():
        for tensor in state_tensors(model):
            size = tensor.numel()
            target[offset : offset + size].view(tensor.shape).copy_(tensor)
            offset += size
    if offset != out.size:
        raise ValueError(f"flat buffer holds {out.size} floats, the model {offset}")
    return out


def unpack(model: PPO, buffer: np.ndarray) -> None:
    """Overwrite the member's weights and optimizer state from ``buffer``."""
    source = torch.from_numpy(np.ascontiguousarray(buffer, dtype=np.float32))
    offset = 0
    with torch.no_grad():
        for tensor in state_tensors(model):
            size = tensor.numel()
            tensor.copy_(source[offset : offset + size].view(tensor.shape))
            offset += size
    if offset != source.numel():
        raise ValueError(f"flat buffer holds {source.numel()} floats, the model {offset}")


# ---------------------------------------------------------------------------------------
# A member of the population


@dataclass
class Member:
    """One PPO agent of the population, held by one rank.

    ``buffer`` is its weights and Adam state (float32, the model's tensors are views of it);
    ``stats``, with observation/reward normalisation, its VecNormalize statistics (float64,
    refreshed by :meth:`pack`); None without normalisation.
    """

    member_id: int
    model: PPO
    hparams: dict[str, float]
    eval_env: object | None = None
    eval_episodes: int = 0
    buffer: np.ndarray = field(default=None, repr=False)
    scores: list[float] = field(default_factory=list)
    """The member's score at the end of each generation so far."""
    select_on: str = "train"
    stats: np.ndarray | None = field(default=None, repr=False)
    carried_score: float = float("nan")
    """The training score its weights had when they last changed hands (an exploit: the
    donor's at that moment); its training score while it has finished no episode since."""

    def __post_init__(self) -> None:
        self.buffer = bind_flat(self.model, self.buffer)
        normalizer = self.normalizer
        if normalizer is not None:
            self.stats = pack_statistics(normalizer, np.empty(statistics_size(normalizer), dtype=np.float64))

    @property
    def normalizer(self):
        """The training envs' VecNormalize, or None."""
        return self.model.get_vec_normalize_env()

    @property
    def env_steps(self) -> int:
        return int(self.model.num_timesteps)

    def train(self, steps: int, callback=None) -> None:
        self.model.learn(total_timesteps=steps, reset_num_timesteps=False, callback=callback, progress_bar=False)

    def training_score(self) -> float:
        """Mean return of the last 10 training episodes finished since the weights last changed
        hands; with none, the score the weights carried over (see :attr:`score_train_stale`),
        NaN if they never had one."""
        episodes = list(self.model.ep_info_buffer or [])[-SCORE_WINDOW:]
        returns = [info["r"] for info in episodes]
        return float(np.mean(returns)) if returns else self.carried_score

    @property
    def score_train_stale(self) -> bool:
        """Whether :meth:`training_score` is carried over rather than measured: no training
        episode finished since the weights last changed hands, so the weights are scored by
        the last score they had (when episodes are long against a generation, a recipient
        may finish none in the generation after its exploit; NaN would rank it last)."""
        return not self.model.ep_info_buffer and not np.isnan(self.carried_score)

    def carry_score(self, score: float) -> None:
        """The training score the weights this member now holds had (a donor's at its
        exploit): the member's training score until it finishes an episode."""
        self.carried_score = float(score)

    def test_score(self) -> float:
        """Mean return of ``eval_episodes`` deterministic episodes on the evaluation env (for
        Procgen, levels the member never trained on); NaN without evaluation."""
        if self.eval_episodes > 0 and self.eval_env is not None:
            if self.stats is not None:
                freeze_into(self.normalizer, self.eval_env)
            mean, _ = evaluate_policy(
                self.model, self.eval_env, n_eval_episodes=self.eval_episodes, deterministic=True, warn=False
            )
            return float(mean)
        return float("nan")

    def evaluate(self) -> Scores:
        """Both scores, and ``score``: the one selection uses (``select_on``)."""
        train, test = self.training_score(), self.test_score()
        return Scores(
            score=test if self.select_on == "test" else train,
            score_train=train,
            score_test=test,
            score_train_stale=self.score_train_stale,
        )

    def score(self) -> float:
        return self.evaluate().score

    def pack(self) -> np.ndarray:
        """The member's flat state, ready to send (no copy while the model's tensors are still
        views of the buffer; if anything replaced them, they are bound again first); with
        normalisation, ``stats`` is refreshed too."""
        if not is_bound(self.model, self.buffer):
            logger.warning("member %d: state tensors were replaced; rebinding them to the flat buffer", self.member_id)
            bind_flat(self.model, self.buffer)
        if self.stats is not None:
            pack_statistics(self.normalizer, self.stats)
        return self.buffer

    def load(self, buffer: np.ndarray, hparams: dict[str, float], stats: np.ndarray | None = None) -> None:
        """Become a copy of a donor (weights + optimizer state, and normalisation statistics),
        then take ``hparams``. The donor's statistics are ``stats``, or, if None, what the
        exchange received into this member's ``stats``.

        Episode statistics are cleared, so the next score reflects the new weights only; until
        an episode finishes, the score is what :meth:`carry_score` gives (NaN without it).
        """
        if buffer is not self.buffer or not is_bound(self.model, self.buffer):
            unpack(self.model, buffer)
        if self.stats is not None:
            if stats is not None and stats is not self.stats:
                np.copyto(self.stats, stats)
            load_statistics(self.normalizer, self.stats)
            renormalize_last_obs(self.model, self.normalizer)
        if self.model.ep_info_buffer is not None:
            self.model.ep_info_buffer.clear()
        self.carried_score = float("nan")
        self.set_hparams(hparams)

    def set_hparams(self, hparams: dict[str, float]) -> None:
        self.hparams = {name: typed(name, hparams[name]) for name in hparam_names(hparams)}
        apply_hparams(self.model, self.hparams)

    def state_payload(self, run_id: str, generation: int, rng: dict) -> dict:
        """Everything needed to rebuild this member bit-exactly, as plain data and tensors."""
        episodes = [[info["r"], info["l"], info.get("t", 0.0)] for info in (self.model.ep_info_buffer or [])]
        return {
            "format": 1,
            "run_id": run_id,
            "generation": generation,
            "member": self.member_id,
            "state": torch.from_numpy(self.pack().copy()),
            "hparams": dict(self.hparams),
            "num_timesteps": int(self.model.num_timesteps),
            "episode_num": int(self.model._episode_num),
            "n_updates": int(self.model._n_updates),
            "episodes": torch.tensor(episodes, dtype=torch.float64).reshape(-1, 3),
            "scores": [float(score) for score in self.scores],
            "carried_score": float(self.carried_score),
            "rng": rng,
            "normalization": torch.from_numpy(self.stats.copy()) if self.stats is not None else None,
            "envs": envstate.capture(self.model),
        }

    def restore(self, payload: dict) -> None:
        """Become the member saved in ``payload`` (see :meth:`state_payload`)."""
        if payload["member"] != self.member_id:
            raise ValueError(f"payload of member {payload['member']} given to member {self.member_id}")
        state = payload["state"].numpy()
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
        self.model.ep_info_buffer = deque(
            ({"r": float(r), "l": int(length), "t": float(t)} for r, length, t in payload["episodes"].tolist()),
            maxlen=window,
        )
        self.model.ep_success_buffer = deque(maxlen=window)
        self.scores = list(payload["scores"])
        self.carried_score = float(payload.get("carried_score", float("nan")))
        saved_envs = payload.get("envs")
        if saved_envs is not None and not envstate.restore(self.model, saved_envs):
            logger.warning("member %d: its envs differ from the checkpoint's; starting fresh episodes", self.member_id)

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

    def close(self) -> None:
        self.model.env.close()
        if self.eval_env is not None:
            self.eval_env.close()


def log_final_hparams(members: Iterable[Member], results: Iterable[MemberResult]) -> None:
    """TensorBoard's HPARAMS tab: each member's final score vs the hyperparameters it reached
    it with (those of its last generation, before that generation's exploit)."""
    by_id = {result.member: result for result in results}
    for member in members:
        result = by_id[member.member_id]
        hparams = {"member": member.member_id, **result.hparams}
        member.model.logger.record("hparams", HParam(hparams, {"pbt/score": result.score}))
        member.model.logger.dump(result.env_steps)


def rng_state() -> dict:
    """This process's global RNG states (torch, numpy, random) as checkpointable data."""
    import random

    kind, keys, position, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_position": int(position),
        "numpy_has_gauss": int(has_gauss),
        "numpy_cached_gaussian": float(cached),
        "python": [int(v) for v in random.getstate()[1]],
    }


def set_rng_state(state: dict) -> None:
    import random

    torch.set_rng_state(state["torch"])
    keys = state["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(
        ("MT19937", keys, state["numpy_position"], state["numpy_has_gauss"], state["numpy_cached_gaussian"])
    )
    random.setstate((3, tuple(state["python"]), None))


def build_member(
    config: Config, member: int, hparams: dict[str, float], tb_dir: Path | None, env_seed: int | None = None
) -> Member:
    model = build_model(config, member, hparams, tb_dir, env_seed)
    eval_env = None
    if config.eval_episodes > 0:
        eval_env = make_env(
            config.env_id,
            min(config.eval_episodes, 8),
            member_seed(config.seed, member, stream=1),
            config.distribution_mode,
            config.eval_num_levels,
            config.eval_start_level,
            env_kwargs=config.env_kwargs,
        )
        if config.agent.normalize["norm_obs"]:
            eval_env = frozen(eval_env, config.agent.normalize)
    return Member(member, model, dict(hparams), eval_env, config.eval_episodes, select_on=config.select_on)
