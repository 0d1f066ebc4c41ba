"""A learner's settings for a run (:class:`AgentSettings`) from the merged YAML settings and the flags. Pure."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.config.envnames import is_atari
from evo.config.zoo import recorded_wrappers
from evo.core.envparams import is_env_param
from evo.core.kinds import Kind, kind_from_entry, kind_from_spec
from evo.learners import DEFAULT_ALGO, LearnerSpec, learner_spec
from evo.learners.spec import CNN_POLICIES, EnvShape, LearnerContext, Setting

ATARI_WRAPPER = "stable_baselines3.common.atari_wrappers.AtariWrapper"
"""zoo's ``env_wrapper`` of its ``atari`` entries (evo.sb3.envs.atari_wrapper applies it to every Atari game)."""
POLICY_ALIASES = {"mlppolicy": "mlp", "cnnpolicy": "nature", "impalacnn": "impala"}


@dataclass(frozen=True)
class AgentSettings:
    """A learner's settings for one env, resolved from the YAML layers (config.yaml's ``agent``)."""

    algo: str
    policy: str
    n_envs: int
    settings: dict[str, Any]
    """Every setting the learner declares, resolved, under SB3's names."""
    policy_kwargs: dict[str, Any]
    search_space: dict[str, Kind]
    """The explored hyperparameters, in the learner's declaration order (the records' columns)."""
    normalize: dict[str, bool]
    """VecNormalize's ``norm_obs`` and ``norm_reward`` (zoo's ``normalize``); both false: none."""
    env_params: dict[str, Any] = field(default_factory=dict)
    """The env parameters of the search space (``env.<attribute>``, evo.core.envparams) with the value
    the env has when it is made (read at start-up): their defaults."""
    frame_stack: int = 0
    """Frames stacked into each observation (zoo's ``frame_stack``: SB3's VecFrameStack); 0: none."""
    env_wrapper: tuple[tuple[str, dict[str, Any]], ...] = ()
    """zoo's ``env_wrapper``: each wrapper's class path and keyword arguments, in the order they wrap every env
    of a member (evo.config.zoo)."""

    @property
    def spec(self) -> LearnerSpec:
        return learner_spec(self.algo)

    @property
    def defaults(self) -> dict[str, Any]:
        """Each explored hyperparameter's value when PBT does not sample it (the YAML's; an env
        parameter's: the env's own)."""
        values = {**self.settings, **self.env_params}
        return {name: values[name] for name in self.search_space}

    @property
    def explored_space(self) -> dict[str, Kind]:
        """The search space an explorer changes: the architecture's dimensions are left out, since a
        recipient takes its donor's architecture with its weights (BG-PBT's rule within a stage)."""
        spec = self.spec
        return {
            name: kind
            for name, kind in self.search_space.items()
            if is_env_param(name) or not spec.by_name[name].architecture
        }

    @property
    def normalizes(self) -> bool:
        """Whether the YAML asks for observation or reward normalisation."""
        return any(self.normalize.values())

    @property
    def unit_steps(self) -> int:
        """Env steps of one unit of training (a PPO rollout, an off-policy collection): a
        generation's budget is rounded up to whole units."""
        return self.spec.unit_steps(self.settings, self.n_envs)

    def to_dict(self) -> dict[str, Any]:
        """config.yaml's ``agent``: the settings flat beside the policy, env count and search space."""
        return {
            "algo": self.algo,
            "policy": self.policy,
            "n_envs": self.n_envs,
            **self.settings,
            "policy_kwargs": self.policy_kwargs,
            "normalize": self.normalize,
            "search_space": {name: kind.spec() for name, kind in self.search_space.items()},
            **({"env_params": dict(self.env_params)} if self.env_params else {}),
            **({"frame_stack": self.frame_stack} if self.frame_stack else {}),
            **(
                {"env_wrapper": [{path: dict(kwargs)} for path, kwargs in self.env_wrapper]} if self.env_wrapper else {}
            ),
        }

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> AgentSettings:
        """The settings config.yaml's ``agent`` holds (see :func:`recorded_agent` for older runs)."""
        saved = recorded_agent(saved)
        spec = learner_spec(saved["algo"])
        return cls(
            algo=spec.name,
            policy=saved["policy"],
            n_envs=saved["n_envs"],
            settings={name: saved[name] for name in spec.by_name},
            policy_kwargs=dict(saved.get("policy_kwargs") or {}),
            search_space={name: kind_from_spec(entry) for name, entry in (saved.get("search_space") or {}).items()},
            normalize=dict(saved["normalize"]),
            env_params=dict(saved.get("env_params") or {}),
            frame_stack=int(saved.get("frame_stack") or 0),
            env_wrapper=recorded_wrappers(saved.get("env_wrapper")),
        )


def recorded_agent(saved: Mapping[str, Any]) -> dict[str, Any]:
    """config.yaml's ``agent`` as this version writes it. Runs from before the learners were
    declared were PPO runs, kept the explored values under ``defaults`` and left out what had no
    setting yet (gSDE, normalisation ...): those had the learner's declared defaults then."""
    saved = dict(saved)
    spec = learner_spec(saved.get("algo", DEFAULT_ALGO))
    defaults = saved.pop("defaults", None) or {}
    entries = {
        name: {"kind": "float", "choices": [], **entry} for name, entry in (saved.get("search_space") or {}).items()
    }
    recorded = {
        "algo": spec.name,
        **spec.defaults(),
        "normalize": {"norm_obs": False, "norm_reward": False},
        **{name: value for name, value in defaults.items() if name in spec.by_name},
        **saved,
        "search_space": entries,
    }
    if "algo" not in saved and spec.upgrade is not None:
        spec.upgrade(recorded)  # what the learner resolves now that those runs did not record
    return recorded


def build_agent(
    spec: LearnerSpec,
    merged: dict[str, Any],
    env_id: str,
    game: str | None,
    shape: EnvShape | None,
    num_envs: int | None,
    ranges: Mapping[str, Sequence[float] | None],
    problems: list[str],
    sources: Mapping[str, str] | None = None,
) -> AgentSettings:
    """``merged`` (the YAML layers) with the learner's declared defaults under them,
    ``--num-envs`` and the search ranges of the flags (``ranges``: name -> (low, high) or None),
    checked against the learner and the env (``shape``; None when the env could not be made).
    Every value and search range is checked against its setting's domain first, naming where it
    came from (``sources``: see evo.config.hyperparams.resolve_agent)."""
    sources = sources or {}
    settings = {**spec.defaults(), **{name: merged[name] for name in spec.by_name if name in merged}}
    for setting in spec.settings:
        problem = setting.value_problem(settings[setting.name], sources.get(setting.name, ""))
        if problem is not None:
            problems.append(problem)
            settings[setting.name] = _stand_in(setting)  # said once: the rules below see a valid value
    n_envs = num_envs if num_envs is not None else merged.get("n_envs", 1)
    if n_envs < 1:
        problems.append(f"n_envs {n_envs}: must be at least 1")
        n_envs = 1
    frame_stack = merged.get("frame_stack", 0)
    if frame_stack < 0:
        problems.append(f"frame_stack {frame_stack}: must be 0 (no stacking) or the number of frames to stack, e.g. 4")
        frame_stack = 0
    env_wrapper = _env_wrapper(merged.get("env_wrapper", ()), env_id, game, problems)
    space = _search_space(spec, merged.get("search_space", {}), ranges, problems, sources)
    if shape is not None:
        _action_space(spec, env_id, shape, problems)
    images = bool(game) or (shape is not None and len(shape.observation_shape) == 3 and shape.observation_itemsize == 1)
    policy = _policy(spec, merged.get("policy", "mlp"), env_id, game, images, problems)
    _architecture(spec, settings, space, policy, merged.get("policy_kwargs", {}), problems)
    if spec.check is not None:
        spec.check(LearnerContext(settings, space, n_envs, shape, policy), problems)
    for name, kind in space.items():
        if is_env_param(name):
            continue  # its default is the env's own value, checked when the env is probed
        default = settings[name]
        if not kind.problems(name) and not _contains(kind, default):
            problems.append(
                f"search_space.{name}: the default {name} {_shown(default)} is not in {_where(kind)}; add it, or set "
                f"{name} in the YAML to one of them (members start from it with --initial-hparams defaults)"
            )
    return AgentSettings(
        algo=spec.name,
        policy=policy,
        n_envs=n_envs,
        settings=settings,
        policy_kwargs=merged.get("policy_kwargs", {}),
        search_space=space,
        normalize=_normalize(merged, env_id, game, problems),
        frame_stack=frame_stack,
        env_wrapper=env_wrapper,
    )


def _env_wrapper(
    entries: Sequence[Sequence[Any]], env_id: str, game: str | None, problems: list[str]
) -> tuple[tuple[str, dict[str, Any]], ...]:
    """zoo's ``env_wrapper`` for this env: none for a Procgen game (its envs are one C++ vector env) or an Atari
    game beyond zoo's own AtariWrapper, which evo applies to every Atari game itself."""
    wrappers = tuple((str(path), dict(kwargs)) for path, kwargs in entries)
    if not wrappers:
        return ()
    if game:
        problems.append(
            f"env_wrapper: {game} is a Procgen game, whose envs are one vector env in C++ that a gymnasium wrapper "
            "cannot wrap; drop env_wrapper"
        )
        return ()
    if is_atari(env_id):
        if wrappers != ((ATARI_WRAPPER, {}),):
            problems.append(
                f"env_wrapper: evo preprocesses every Atari game with zoo's own {ATARI_WRAPPER} (its defaults, sticky "
                "actions as the game's), and takes no other wrapper for it; drop env_wrapper"
            )
        return ()  # zoo's atari entry: what evo does anyway
    return wrappers


def _stand_in(setting: Setting) -> Any:
    """The value the rules after a refused one see, so that a bad value is refused once: its default, or
    its first name where that default is "off" (a noise type, say: exploring it from none is refused)."""
    if setting.default is None and setting.may_be_off and setting.domain is not None and setting.domain.names:
        return setting.domain.names[0]
    return setting.default


def _architecture(
    spec: LearnerSpec,
    settings: dict[str, Any],
    space: Mapping[str, Kind],
    policy: str,
    policy_kwargs: Mapping[str, Any],
    problems: list[str],
) -> None:
    """The networks' depth and width (``pi_layers``, ``pi_width``, ...) when any of them is given or
    explored: those not given are read from ``net_arch`` (or SB3's default), so that each member's
    architecture is known whole. They shape the MLP heads, so they need the mlp policy."""
    given = [name for name in spec.architecture if name in space or settings[name] is not None]
    if not given:
        return
    if policy != "mlp":
        problems.append(
            f"{', '.join(given)} shape the MLP networks of policy 'mlp'; policy {policy!r} is a CNN whose heads sit "
            "on its features: leave them out, or use policy mlp"
        )
        return
    net_arch = policy_kwargs.get("net_arch", spec.default_net_arch)
    for head in spec.net_arch_heads:
        hidden = list(net_arch[head] if isinstance(net_arch, Mapping) else net_arch)
        if settings[f"{head}_layers"] is None:
            settings[f"{head}_layers"] = len(hidden)
        width = f"{head}_width"
        if settings[width] is None:
            if len(set(hidden)) == 1:
                settings[width] = hidden[0]
            else:
                problems.append(
                    f"net_arch gives the {head} network the hidden layers {hidden}, and {', '.join(given)} need one "
                    f"width for all of them: set {width} (e.g. --hyperparams {width}:{max(hidden or [64])})"
                )
                settings[width] = max(hidden or [64])


def _contains(kind: Kind, value: Any) -> bool:
    if not kind.discrete:
        return value is not None and not isinstance(value, str)
    return kind.contains(value)


def _shown(value: Any) -> str:
    return "none (off)" if value is None else repr(value) if isinstance(value, str) else str(value)


def _where(kind: Kind) -> str:
    choices = getattr(kind, "choices", None)
    if choices is not None:
        return f"the choices {list(choices)}"
    return f"[{kind.low}, {kind.high}]"


def _action_space(spec: LearnerSpec, env_id: str, shape: EnvShape, problems: list[str]) -> None:
    if shape.action_space not in spec.action_spaces:
        able = [other for other in _specs_for(shape.action_space)]
        named = " or ".join(able) if len(able) < 3 else f"{', '.join(able[:-1])} or {able[-1]}"
        hint = f"; use --algo {named}" if able else ""
        problems.append(
            f"--algo {spec.name}: {spec.title} acts in {' or '.join(spec.action_spaces)} action spaces, and {env_id} "
            f"has a {shape.action_space} action space{hint}"
        )


def _specs_for(action_space: str) -> list[str]:
    from evo.learners import specs

    return [name for name, spec in specs().items() if action_space in spec.action_spaces]


def _normalize(settings: dict[str, Any], env_id: str, game: str | None, problems: list[str]) -> dict[str, bool]:
    """The YAML's ``normalize`` (SB3's VecNormalize, whose statistics travel with a member).
    Observations are normalised for vector observations only, as rl-baselines3-zoo does: a
    Procgen game's images are scaled by the CNN policy."""
    normalize = settings.get("normalize", {"norm_obs": False, "norm_reward": False})
    if game and normalize["norm_obs"]:
        problems.append(
            f"normalize {normalize} for {env_id}: observation normalisation is for vector observations, "
            "not Procgen's images (the CNN policy scales them); use normalize:{norm_obs: false, norm_reward: true} "
            "to normalise rewards only"
        )
    return normalize


def _policy(spec: LearnerSpec, name: str, env_id: str, game: str | None, images: bool, problems: list[str]) -> str:
    """The policy of ``name``: a CNN for image observations (Procgen's, or any env's H x W x C bytes), the
    MLP for the others."""
    policy = POLICY_ALIASES.get(name.lower(), name.lower())
    if policy not in spec.policies:
        close = difflib.get_close_matches(policy, spec.policies, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(f"policy {policy!r} is unknown to {spec.title}; use one of {', '.join(spec.policies)}{hint}")
    elif game and policy not in CNN_POLICIES:
        problems.append(f"policy {policy!r} cannot read Procgen's images ({game}); use 'impala' or 'nature'")
    elif not images and policy in CNN_POLICIES:
        problems.append(f"policy {policy!r} is a CNN for image observations; use 'mlp' for {env_id}")
    return policy


def _search_space(
    spec: LearnerSpec,
    raw_space: Mapping[str, Any],
    ranges: Mapping[str, Sequence[float] | None],
    problems: list[str],
    sources: Mapping[str, str],
) -> dict[str, Kind]:
    """The YAML's search space as kinds, in the learner's declaration order, with the bounds given
    on the command line (which replace choices too); an entry badly written, or reaching outside its
    setting's domain, is reported (naming where it came from) and left out."""
    space: dict[str, Kind] = {}
    for name, bounds in ranges.items():
        if bounds is not None and name not in spec.by_name:
            problems.append(f"--{name.replace('_', '-')}-range: {spec.title} has no {name} to explore")
    for name in spec.record_order([*raw_space, *(n for n, b in ranges.items() if b is not None)]):
        entry = dict(raw_space.get(name, {}))
        where = sources.get(f"search_space.{name}", "")
        if is_env_param(name):
            kind = kind_from_entry(entry)
            found = kind.problems(f"{name} ({where})" if where else name)
            problems += found
            if not found:
                space[name] = kind
            continue
        bounds = ranges.get(name)
        if bounds is not None:
            if bounds[0] >= bounds[1]:
                continue  # reported by the flag's own check
            entry.pop("choices", None)
            entry.update(low=bounds[0], high=bounds[1])
            where = f"--{name.replace('_', '-')}-range"
        if "choices" not in entry and not ("low" in entry and "high" in entry):
            problems.append(f"search_space.{name} needs both low and high, or choices (got {entry or 'nothing'})")
            continue
        setting = spec.by_name[name]
        kind = kind_from_entry(entry, whole=setting.whole)
        found = kind.problems(f"{name} ({where})" if where else name)
        if not found and (outside := setting.range_problem(kind, where)) is not None:
            found = [outside]
        problems += found
        if not found:
            space[name] = kind
    return space
