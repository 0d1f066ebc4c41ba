"""How a learner declares its settings, once: :class:`Setting` and :class:`LearnerSpec`. Pure.

A learner's settings are what its YAML file may set for an env (rl-baselines3-zoo's
``hyperparams/<algo>.yml``): SB3's constructor arguments under SB3's names, and a few of evo's.
Each is declared once, with its type (a YAML value is coerced to it: PyYAML reads ``3e-4`` as a
string), its default (SB3's, unless the declaration says otherwise), a help line, its valid values
(its :class:`Domain`: an :class:`Interval`, a set of :class:`Values`, or either of several), and how
a new value reaches SB3 while a member trains (:class:`Reach`). The config layer derives from the
declarations the keys a YAML block may hold, their coercion, their checks (every value a run would
use and every search range's bounds within the domain), which may enter a search space and with
which kinds, and the message for a key of another algorithm; the SB3 layer applies a tuned value by
its reach. Nothing here imports SB3.
"""

from __future__ import annotations

import difflib
import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.core.envparams import env_params
from evo.core.kinds import Categorical, Choice, Continuous, Integer, Kind, OffOr


class Reach(enum.Enum):
    """How a new value of a setting reaches SB3 while a member trains (evo/sb3/learner.py
    implements the first four for every learner; CUSTOM is the learner's own code)."""

    ATTRIBUTE = "a plain attribute of the model that the update reads at every call"
    SCHEDULE = "SB3 keeps it as a schedule (a constant one is set)"
    LEARNING_RATE = "lr_schedule, and the learning rate of every optimizer the learner names"
    DISCOUNT = "the model's gamma, and every copy SB3 made of it (buffers, the return normaliser)"
    CUSTOM = "the learner's own code in its SB3 module"
    ARCHITECTURE = "a network's shape: the model is rebuilt to it; a recipient takes its donor's with its weights"
    CONSTRUCTION = "read once when the model is built: cannot be tuned while it trains"


class Domain(ABC):
    """The values a setting accepts, declared with it: what SB3 (or evo) can train with. A fixed value
    must be one of them, and so must every value a search range or its choices can give."""

    @abstractmethod
    def contains(self, value: Any) -> bool:
        """Whether ``value`` is valid (a number must be finite: NaN and infinities never are)."""

    @abstractmethod
    def holds(self, low: float, high: float) -> bool:
        """Whether every number from ``low`` to ``high`` is valid (a search range's draws)."""

    @property
    @abstractmethod
    def text(self) -> str:
        """For messages, after "must be": '> 0', 'in (0, 1]', ">= 1 or -1"."""

    @property
    def names(self) -> tuple[str, ...]:
        """The names it accepts (a suggestion for a misspelt one)."""
        return ()

    def __or__(self, other: Domain) -> Either:
        return Either((self, other))


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class Interval(Domain):
    """The finite numbers between ``low`` and ``high``, each end closed unless said open."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: Any) -> bool:
        if not _real(value) or not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def holds(self, low: float, high: float) -> bool:
        return self.contains(low) and self.contains(high)  # an interval holds what lies between its members

    @property
    def text(self) -> str:
        if math.isinf(self.low) and math.isinf(self.high):
            return "a finite number"
        if math.isinf(self.high):
            return f"{'>' if self.low_open else '>='} {_number_text(self.low)}"
        if math.isinf(self.low):
            return f"{'<' if self.high_open else '<='} {_number_text(self.high)}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{_number_text(self.low)}, {_number_text(self.high)}{right}"


def above(low: float) -> Interval:
    """The numbers > ``low`` (``above(0)``: positive)."""
    return Interval(low, low_open=True)


def at_least(low: float) -> Interval:
    """The numbers >= ``low`` (a count: ``at_least(1)``)."""
    return Interval(low)


@dataclass(frozen=True)
class Values(Domain):
    """A set of values: names (``'crop'``) or numbers with a meaning of their own (-1: "as many as collected")."""

    values: tuple[Any, ...]

    def contains(self, value: Any) -> bool:
        return any(value == known and type(value) is type(known) for known in self.values)

    def holds(self, low: float, high: float) -> bool:
        return low == high and self.contains(low)

    @property
    def text(self) -> str:
        shown = [repr(value) if isinstance(value, str) else _number_text(value) for value in self.values]
        return shown[0] if len(shown) == 1 else f"one of {', '.join(shown)}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(value for value in self.values if isinstance(value, str))


@dataclass(frozen=True)
class Named(Domain):
    """Names ``<prefix><number>`` with the number in ``number`` (SAC's ``auto_0.1``: learned, starting at 0.1)."""

    prefix: str
    number: Interval

    def contains(self, value: Any) -> bool:
        if not isinstance(value, str) or not value.startswith(self.prefix):
            return False
        try:
            return self.number.contains(float(value[len(self.prefix) :]))
        except ValueError:
            return False

    def holds(self, low: float, high: float) -> bool:
        return False

    @property
    def text(self) -> str:
        return f"'{self.prefix}<x>' with x {self.number.text}"


@dataclass(frozen=True)
class Either(Domain):
    """Valid in any one of ``parts`` (``at_least(1) | Values((-1,))``); a range must lie within one part."""

    parts: tuple[Domain, ...]

    def contains(self, value: Any) -> bool:
        return any(part.contains(value) for part in self.parts)

    def holds(self, low: float, high: float) -> bool:
        return any(part.holds(low, high) for part in self.parts)

    def __or__(self, other: Domain) -> Either:
        return Either((*self.parts, other))

    @property
    def text(self) -> str:
        texts = [part.text for part in self.parts]
        return " or ".join(texts) if len(texts) < 3 else f"{', '.join(texts[:-1])} or {texts[-1]}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for part in self.parts for name in part.names)


def _shown(value: Any) -> str:
    if _real(value) and math.isnan(value):
        return "nan (not a number)"
    if _real(value) and math.isinf(value):
        return f"{value} (not finite)"
    return repr(value) if isinstance(value, str) else str(value)


CNN_POLICIES = ("impala", "nature")
"""The policies that read images (the IMPALA CNN of the Procgen paper, the Nature DQN's CNN)."""
IMAGE_POLICIES = ("mlp", *CNN_POLICIES)
"""A learner's ``policies`` when it reads images as well as vectors (PPO, A2C, DQN, QR-DQN)."""

POSITIVE = above(0)
NON_NEGATIVE = at_least(0)
COUNT = at_least(1)
DISCOUNT = Interval(0, 1, low_open=True)
"""A discount factor γ: in (0, 1] (1: no discount)."""
FRACTION = Interval(0, 1)


@dataclass(frozen=True)
class Setting:
    """One setting of a learner (see the module docstring)."""

    name: str
    type: type | tuple[type, ...]
    """What a YAML value is coerced to; a tuple: any one of these types, taken as it is."""
    default: Any
    help: str
    reach: Reach = Reach.CONSTRUCTION
    why_fixed: str = ""
    """For a CONSTRUCTION setting: why it cannot be tuned (said when a search space names it)."""
    may_be_off: bool = False
    """None is a value, "off" (e.g. no KL early stop): a search space may list null last."""
    label: str = ""
    """Its axis label in the plots (default: the name)."""
    free_on_resume: bool = False
    """It changes how an update is computed, not what it computes: a run may resume with another value."""
    domain: Domain | None = None
    """Its valid values (SB3's, read from its docs and code); None only for a switch (a bool)."""

    def value_problem(self, value: Any, where: str = "") -> str | None:
        """Why ``value`` (from ``where``: '--hyperparams', 'ppo.yml[CartPole-v1]' ...) is not one of its
        valid values, with the range and the fix; None if it is one, or is None (off, or not given)."""
        if value is None or self.domain is None or self.domain.contains(value):
            return None
        close = difflib.get_close_matches(value, self.domain.names, n=1) if isinstance(value, str) else []
        if close:
            fix = f"; did you mean {close[0]!r}?"
        elif self.domain.contains(self.default):
            fix = f", e.g. to its default {_shown(self.default)}"
        else:
            fix = " (or null: off)" if self.may_be_off else ""
        source = f" ({where})" if where else ""
        return f"{self.name}{source} is {_shown(value)}; it must be {self._valid}: change it{fix}"

    @property
    def _valid(self) -> str:
        """Its domain for a message, with its help where the domain's names do not say what it is."""
        return self.domain.text if self.domain.names else f"{self.domain.text} ({self.help})"

    def range_problem(self, kind: Kind, where: str = "") -> str | None:
        """Why a search range or its choices (``kind``, from ``where``) can give a value outside the
        domain; None if every value it can give is valid. A kind with problems of its own is left to them."""
        if self.domain is None or kind.problems(self.name):
            return None
        subject = f"search_space.{self.name}{f' ({where})' if where else ''}"
        must = f"every value must be {self._valid}"
        if isinstance(kind, (Continuous, Integer)):
            if self.domain.holds(kind.low, kind.high):
                return None
            return f"{subject} is [{kind.low}, {kind.high}]; {must}: keep its bounds within that range"
        choices = list(getattr(kind, "choices", ()))
        outside = [_shown(choice) for choice in choices if choice is not None and not self.domain.contains(choice)]
        if not outside:
            return None
        return f"{subject} has the choices {choices}; {must}: drop {', '.join(outside)}"

    @property
    def tunable(self) -> bool:
        return self.reach is not Reach.CONSTRUCTION

    @property
    def architecture(self) -> bool:
        """Whether it shapes a network (a search space may hold it; explorers leave it as the donor's)."""
        return self.reach is Reach.ARCHITECTURE

    @property
    def whole(self) -> bool:
        """Whether it takes whole numbers (an integer range in a search space)."""
        return self.type is int

    @property
    def numeric(self) -> bool:
        return self.type in (int, float)


@dataclass(frozen=True)
class EnvShape:
    """What a learner must know of the env at start-up: its action space's class and shape, and its
    observations' shape and bytes per element (as SB3's replay buffer stores them: the space's dtype)."""

    action_space: str
    action_shape: tuple[int, ...] = ()
    observation_shape: tuple[int, ...] = ()
    observation_itemsize: int = 4
    unbatchable: tuple[str, ...] = ()
    """The parts of its observations SB3 cannot put in a batch, each as ``name (Space)`` (a Dict's Text field,
    say: MiniGrid's ``mission``); none for a space SB3 takes."""

    @property
    def action_dims(self) -> int:
        return math.prod(self.action_shape)

    @property
    def observation_dims(self) -> int:
        return math.prod(self.observation_shape)


FLOAT32 = 4
TRAINED = 4 * FLOAT32
"""Bytes per trained parameter: its weight, its gradient and Adam's two moments, float32 each."""


@dataclass(frozen=True)
class Footprint:
    """Part of a member's memory, estimated at start-up (at least this much: see ``LearnerSpec.memory``)."""

    what: str
    """What it is, for the message: 'replay buffer 1000000 x 40 bytes'."""
    bytes: int
    fix: str
    """How to make it smaller: 'a smaller buffer_size'."""


def mlp_parameters(inputs: int, hidden: Sequence[int], outputs: int) -> int:
    """The weights and biases of an MLP from ``inputs`` through the ``hidden`` layers to ``outputs``."""
    sizes = [inputs, *hidden, outputs]
    return sum((into + 1) * out for into, out in zip(sizes, sizes[1:], strict=False))


def networks_footprint(net_arch: Mapping[str, Sequence[int]], size: int) -> Footprint:
    """A member's networks of ``size`` bytes, named by their hidden layers."""
    heads = ", ".join(f"{head} {list(hidden)}" for head, hidden in net_arch.items())
    fixes = ", ".join(f"{head}_layers, {head}_width" for head in net_arch)
    return Footprint(
        f"networks {heads}",
        size,
        f"smaller networks (policy_kwargs net_arch, or {fixes} and their search ranges)",
    )


@dataclass(frozen=True)
class LearnerContext:
    """What a learner's own rules (:attr:`LearnerSpec.check`) and memory estimate (:attr:`LearnerSpec.memory`)
    read about a run, in one value: its settings as resolved (``check`` may complete them: a batch size from a
    count of minibatches), its search space, ``n_envs``, the env's shapes (None: the env could not be made; never
    None for ``memory``) and the policy's name as resolved ('mlp', 'impala'); for ``memory``, the largest networks
    the run may build (``net_arch``: each head's hidden layers) and the features they read (``inputs``: the
    observation's, or a CNN's output)."""

    settings: dict[str, Any]
    space: Mapping[str, Kind] = field(default_factory=dict)
    n_envs: int = 1
    shape: EnvShape | None = None
    policy: str = "mlp"
    net_arch: Mapping[str, Sequence[int]] = field(default_factory=dict)
    inputs: int = 0


@dataclass(frozen=True)
class LearnerSpec:
    """What a learner is, as the config layer needs to know it (its SB3 side: evo/sb3/<name>.py)."""

    name: str
    """``--algo``: 'ppo', 'sac', 'td3' (rl-baselines3-zoo's names)."""
    title: str
    settings: tuple[Setting, ...]
    action_spaces: tuple[str, ...]
    """gymnasium space classes it can act in ('Discrete', 'Box', ...)."""
    policies: tuple[str, ...] = ("mlp",)
    """Policy names the YAML's ``policy`` may give."""
    policy_kwargs: Mapping[str, type | tuple[type, ...]] = field(default_factory=dict)
    """The ``policy_kwargs`` keys it takes besides the common ones (net_arch, activation_fn, features_dim)."""
    default_net_arch: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: {"pi": (64, 64), "vf": (64, 64)})
    """SB3's hidden layers of its MLP policy when ``net_arch`` is not given, by head: the actor (``pi``) and
    the value (``vf``) or Q (``qf``) function. Its keys are the keys of a ``net_arch`` mapping, and
    each head's depth and width are settings (:func:`architecture_settings`), appended to ``settings``."""
    replay: bool = False
    """Whether it learns from a replay buffer (off-policy): --exploit-buffer and buffers in checkpoints."""
    distils: bool = False
    """Whether a student can be distilled from a teacher with its loss (BG-PBT's stages, --max-distillations:
    PPO's policy KL and value MSE); an off-policy learner would also need its critics and replay buffer."""
    precisions: tuple[str, ...] = ("fp32",)
    check: Callable[[LearnerContext, list[str]], None] | None = None
    """``check(context, problems)``: its own rules across settings, search ranges, the env and the policy
    (:class:`LearnerContext`; a batch within the rollout, say), each broken one added to ``problems``; it may set
    what its rules resolve in ``context.settings`` (a batch size from a count of minibatches)."""
    upgrade: Callable[[dict[str, Any]], None] | None = None
    """Completes the settings a run recorded before the learners were declared (config.yaml's
    ``agent`` of a PPO run of then) with what the learner resolves now."""
    exclusive: tuple[tuple[str, str], ...] = ()
    """Pairs of settings that say the same thing: a YAML layer that gives one drops the other."""
    steps: Callable[[Mapping[str, Any], int], int] | None = None
    """``steps(settings, n_envs)``: the env steps one unit of its training takes (a PPO rollout);
    a generation's budget is rounded up to whole units."""
    memory: Callable[[LearnerContext], list[Footprint]] | None = None
    """``memory(context)``: what one member holds, at least (:class:`Footprint`), for ``context.net_arch`` (each
    head's hidden layers) on ``context.inputs`` features (:class:`LearnerContext`): the networks it trains
    (:data:`TRAINED` bytes per parameter) and keeps (target networks: their weights), and its buffers as SB3
    allocates them. Checked at start-up against the memory a rank has, so that a size that cannot be allocated is
    refused before training."""

    notes: Callable[[Mapping[str, Any], int], list[str]] | None = None
    """``notes(settings, env_steps)``: what a run whose members each train ``env_steps`` env steps in all should
    hear before it starts, without refusing it (an off-policy member that would never start learning)."""
    hyperparams: str | None = None
    """Its YAML file of defaults and search spaces (rl-baselines3-zoo's layout) when it is not evo's
    ``evo/hyperparams/<name>.yml``: a learner of your own names the file beside its module."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", (*self.settings, *architecture_settings(self.net_arch_heads)))
        names = [setting.name for setting in self.settings]
        if len(set(names)) != len(names):
            raise TypeError(f"{self.title} declares a setting twice: {names}")

    @property
    def net_arch_heads(self) -> tuple[str, ...]:
        """The keys of a ``net_arch`` mapping: separate networks for the actor and the value or Q function."""
        return tuple(self.default_net_arch)

    @property
    def architecture(self) -> tuple[str, ...]:
        """The settings that shape its networks (``pi_layers``, ``pi_width``, ...)."""
        return tuple(setting.name for setting in self.settings if setting.architecture)

    @property
    def by_name(self) -> dict[str, Setting]:
        return {setting.name: setting for setting in self.settings}

    @property
    def tunable(self) -> tuple[str, ...]:
        """Its tunable settings in declaration order: the order of the records' columns."""
        return tuple(setting.name for setting in self.settings if setting.tunable)

    def defaults(self) -> dict[str, Any]:
        return {setting.name: setting.default for setting in self.settings}

    def record_order(self, names: Sequence[str]) -> tuple[str, ...]:
        """``names`` in the order their columns take in the records (declaration order), then the env
        parameters among them (``env.<attribute>``, evo.core.envparams), by name."""
        given = set(names)
        return tuple(name for name in self.tunable if name in given) + env_params(given)

    def unit_steps(self, settings: Mapping[str, Any], n_envs: int) -> int:
        """The env steps of one unit of training (default: one step of every env)."""
        return self.steps(settings, n_envs) if self.steps is not None else n_envs

    def planned_steps(self, budget: int, settings: Mapping[str, Any], n_envs: int) -> int:
        """The env steps a member trains for ``budget``: rounded up to whole units."""
        unit = max(self.unit_steps(settings, n_envs), 1)
        return -(-budget // unit) * unit


def setting(
    name: str,
    type: type | tuple[type, ...],
    default: Any,
    help: str,
    reach: Reach = Reach.CONSTRUCTION,
    *,
    why_fixed: str = "",
    may_be_off: bool = False,
    label: str = "",
    free_on_resume: bool = False,
    domain: Domain | None = None,
) -> Setting:
    return Setting(name, type, default, help, reach, why_fixed, may_be_off, label, free_on_resume, domain)


HEAD_TITLES = {"pi": "policy (actor)", "vf": "value function", "qf": "Q functions (critics)"}
ARCHITECTURE_LIMITS = {"layers": (1, 5), "width": (32, 256)}
"""BG-PBT's search space for each network (Wan et al. 2022): 1-5 hidden layers of 32-256 units."""


def architecture_settings(heads: Sequence[str]) -> tuple[Setting, ...]:
    """``<head>_layers`` and ``<head>_width`` for each head of ``net_arch``: the depth and the width
    of that MLP (every hidden layer equally wide, as BG-PBT searches them). None: as ``net_arch``
    (or SB3's default) gives it. Given (fixed, or in a search space), the head's hidden layers are
    ``[width] * layers``."""
    found = []
    for head in heads:
        title = HEAD_TITLES.get(head, head)
        found += [
            Setting(
                f"{head}_layers",
                int,
                None,
                f"hidden layers of the {title} network (None: as net_arch gives them)",
                Reach.ARCHITECTURE,
                label=f"{head} layers",
                domain=COUNT,
            ),
            Setting(
                f"{head}_width",
                int,
                None,
                f"units per hidden layer of the {title} network (None: as net_arch gives them)",
                Reach.ARCHITECTURE,
                label=f"{head} width",
                domain=COUNT,
            ),
        ]
    return tuple(found)


def resolved_net_arch(spec: LearnerSpec, values: Mapping[str, Any]) -> dict[str, list[int]] | None:
    """The ``net_arch`` mapping the architecture settings in ``values`` give (every head, resolved:
    see evo.config.agent), or None when they give none (``net_arch`` as the YAML says)."""
    if all(values.get(name) is None for name in spec.architecture):
        return None
    return {head: [int(values[f"{head}_width"])] * int(values[f"{head}_layers"]) for head in spec.net_arch_heads}


def check_ranges(space: Mapping[str, Kind], limits: Mapping[str, tuple], problems: list[str]) -> None:
    """Each named search range (its bounds, or its choices but off) within ``(low, high, rule)``: at
    least ``low``, or above it when ``low`` is 0 (a value that must be positive); at most ``high``.
    A range with problems of its own is left to them."""
    for name, (low, high, rule) in limits.items():
        kind = space.get(name)
        if kind is None or isinstance(kind, Categorical) or kind.problems(name):
            continue
        if isinstance(kind, (Choice, OffOr)):
            values = [c for c in kind.choices if c is not None]
        else:
            values = [kind.low, kind.high]
        strict = low == 0
        if not ((min(values) > low if strict else min(values) >= low) and max(values) <= high):
            problems.append(f"search_space.{name} is [{min(values)}, {max(values)}]; every value must be {rule}")
