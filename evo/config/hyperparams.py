"""A learner's settings for an env: YAML layers and ``--hyperparams key:value`` overrides. Pure.

Layers, later ones winning (rl-baselines3-zoo's order): the learner's declared defaults
(evo/learners/<algo>.py), the built-in ``<algo>.yml`` (its ``default`` block, ``procgen`` and
``procgen-<param set>`` for Procgen games, ``atari`` for Atari games, then the env's own block), the same blocks of a
``--conf-file FILE`` (or ``--hyperparams FILE``), then the ``--hyperparams key:value`` overrides.
Every value is coerced by the key's declared type (PyYAML reads ``3e-4`` as a string); a key of
another learner is refused naming that learner, an unknown one with a suggestion.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from evo.config import zoo
from evo.config.envnames import is_atari, procgen_game
from evo.core.envparams import is_env_param, name_problem
from evo.core.textfiles import read_settings_file, yaml_problem
from evo.learners import LearnerSpec, learner_spec, specs


class DuplicateKey(yaml.YAMLError):
    """A mapping gives a key twice (PyYAML's safe_load keeps the last one silently)."""

    def __init__(self, key: Any, first: int, second: int):
        lines = f" (lines {first} and {second})" if first != second else ""
        super().__init__(f"{key!r} is given twice in one mapping{lines}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load's loader, refusing a key given twice in one mapping (a merge key's keys may be
    overridden: ``<<: *block`` then ``gamma: 0.999``)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise DuplicateKey(key, seen[key], line)
        except TypeError:  # an unhashable key: safe_load's own error says so
            break
        seen[key] = line
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load``, but a key given twice in one mapping raises :class:`DuplicateKey`."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506  (a SafeLoader)


# The built-in settings ship inside the package, one file per learner (hyperparams/<algo>.yml at the
# top of the repository links to each: the copies users read and edit).
HYPERPARAMS_DIR = Path(__file__).resolve().parent.parent / "hyperparams"


def builtin_hyperparams(algo: str) -> Path:
    """The built-in YAML file of learner ``algo`` (a learner of your own: the file its spec names)."""
    declared = learner_spec(algo).hyperparams if ":" in algo else None
    return Path(declared) if declared else HYPERPARAMS_DIR / f"{algo}.yml"


# Keys every learner's env block may hold, with the type each is coerced to.
COMMON_KEYS: dict[str, type | tuple[type, ...]] = {
    "policy": str,
    "n_envs": int,
    "precision": str,
    "normalize": (bool, dict),
    "agent_training_steps": int,
    "total_generations": int,
    "policy_kwargs": dict,
    "search_space": dict,
    "frame_stack": int,
    "env_wrapper": list,
    "n_timesteps": int,
}
COMMON_POLICY_KWARGS: dict[str, type | tuple[type, ...]] = {
    "net_arch": (list, dict),
    "activation_fn": str,
    "features_dim": int,
}
NORMALIZE_KEYS: dict[str, type] = {"norm_obs": bool, "norm_reward": bool}
SPACE_KEYS: dict[str, type] = {"low": float, "high": float, "scale": str, "type": str, "choices": list}
ACTIVATIONS = ("tanh", "relu", "elu", "leaky_relu")
# --param-set NAME: (distribution mode, training levels) that the name stands for
PARAM_SETS: dict[str, dict[str, Any]] = {
    # name -> the options it sets unless given (its settings are the ``procgen-<name>`` YAML block)
    "easy": {"distribution_mode": "easy", "num_levels": 0},
    "easy-200": {"distribution_mode": "easy", "num_levels": 200},
    "hard": {"distribution_mode": "hard", "num_levels": 0},
    "hard-500": {"distribution_mode": "hard", "num_levels": 500},
    # the Procgen AutoRL paper's set-up (Parker-Holder et al. 2021): 4 members selected on the mean
    # return of their last 100 training episodes
    "autorl": {"distribution_mode": "easy", "num_levels": 200, "num_agents": 4, "score_window": 100},
}
ENV_KWARGS_FORM = "key:value (e.g. reward_scale:0.1 max_episode_steps:200)"
FLOAT_LITERAL = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
OVERRIDE_FORM = "key:value (e.g. learning_rate:1e-3 batch_size:128 'policy_kwargs:{net_arch: [32, 32]}')"


def agent_keys(spec: LearnerSpec) -> dict[str, type | tuple[type, ...]]:
    """The keys an env block of ``spec``'s YAML may hold, with their types."""
    return {**COMMON_KEYS, **{setting.name: setting.type for setting in spec.settings}}


def _coerce(value: Any, kind: type | tuple[type, ...], where: str, problems: list[str]) -> Any:
    """Coerce a YAML value to ``kind`` (PyYAML reads ``3e-4`` as a string); a tuple of
    kinds (``normalize: true`` or a mapping) takes the value if it is one of them."""
    if isinstance(kind, tuple):
        if float in kind and not isinstance(value, bool) and isinstance(value, (int, float)):
            return float(value)
        if float in kind and isinstance(value, str) and FLOAT_LITERAL.fullmatch(value.strip()):
            return float(value)  # a number PyYAML 1.1 leaves as a string (3e-4)
        if isinstance(value, kind) and not (isinstance(value, bool) and bool not in kind):
            return value
        names = " or ".join("mapping" if k is dict else "a name" if k is str else k.__name__ for k in kind)
        problems.append(f"{where} must be {names}, got {value!r} ({type(value).__name__})")
        return None
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, (float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number) and number == int(number):
                return int(number)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif isinstance(value, kind):
        return value
    problems.append(f"{where} must be {kind.__name__}, got {value!r} ({type(value).__name__})")
    return None


def _unknown_key(key: str, known: Sequence[str], where: str) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
    return f"{where}: unknown key {key!r}{hint}"


def _foreign_key(key: str, spec: LearnerSpec, where: str) -> str | None:
    """The message for a setting of another learner, or None if no learner has it."""
    owners = [other for other in specs().values() if other.name != spec.name and key in other.by_name]
    if not owners:
        return None
    each = [f"{other.title} (--algo {other.name})" for other in owners]
    named = each[0] if len(each) == 1 else f"{', '.join(each[:-1])} and {each[-1]}"
    return (
        f"{where}: {key!r} is a setting of {named}, not of {spec.title}; drop it, or train with "
        f"--algo {owners[0].name}. {spec.title}'s settings: {', '.join(spec.by_name)}"
    )


def _check_keys(
    mapping: dict, schema: dict[str, Any], where: str, problems: list[str], spec: LearnerSpec | None = None
) -> dict[str, Any]:
    """Coerce each known key of ``mapping`` to its type in ``schema``; report the rest."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key not in schema:
            foreign = _foreign_key(str(key), spec, where) if spec is not None else None
            problems.append(foreign or _unknown_key(str(key), list(schema), where))
            continue
        if value is None and spec is not None and key in spec.by_name and spec.by_name[key].may_be_off:
            out[key] = None  # "off" (a limit that may be switched off: null)
            continue
        coerced = _coerce(value, schema[key], f"{where}.{key}", problems)
        if coerced is not None:
            out[key] = coerced
    return out


def _check_block(block: Any, where: str, problems: list[str], spec: LearnerSpec) -> dict[str, Any]:
    """Validate and coerce one env block of a hyperparameter file (zoo's own keys read as zoo means them, or
    refused saying what evo does instead: evo.config.zoo)."""
    if not isinstance(block, dict):
        problems.append(f"{where} must be a mapping of settings, got {type(block).__name__}")
        return {}
    block = _zoo_keys(block, where, problems)
    out = _check_keys(block, agent_keys(spec), where, problems, spec)
    if "policy_kwargs" in out:
        out["policy_kwargs"] = _check_policy_kwargs(out["policy_kwargs"], f"{where}.policy_kwargs", problems, spec)
    if "search_space" in out:
        out["search_space"] = _check_space(out["search_space"], f"{where}.search_space", problems, spec)
    if "normalize" in out:
        out["normalize"] = _check_normalize(out["normalize"], f"{where}.normalize", problems)
    return out


def _zoo_keys(block: dict, where: str, problems: list[str]) -> dict:
    """``block`` with zoo's forms read (``normalize`` and ``policy_kwargs`` as strings of Python,
    ``env_wrapper`` as a path or a list) and zoo's keys that evo does not run left out, each said."""
    block = dict(block)
    for key in ("normalize", "policy_kwargs"):
        if isinstance(block.get(key), str):
            block[key] = zoo.python_literal(block[key], f"{where}.{key}", problems)
            if block[key] is None:
                del block[key]
    for key, why in zoo.REFUSED.items():
        if key in block:
            problems.append(f"{where}.{key} {why}")
            del block[key]
    for key, value in list(block.items()):
        if (problem := zoo.schedule_problem(str(key), value, where)) is not None:
            problems.append(problem)
            del block[key]
    if "env_wrapper" in block:
        block["env_wrapper"] = [
            list(entry) for entry in zoo.wrappers(block["env_wrapper"], f"{where}.env_wrapper", problems)
        ]
    return block


def _check_normalize(value: bool | dict, where: str, problems: list[str]) -> dict[str, bool]:
    """``normalize: true`` / ``false``, or zoo's ``{norm_obs: .., norm_reward: ..}`` (a key left
    out is true, VecNormalize's default), as the mapping of both."""
    if isinstance(value, bool):
        return {"norm_obs": value, "norm_reward": value}
    return {"norm_obs": True, "norm_reward": True, **_check_keys(value, NORMALIZE_KEYS, where, problems)}


def _check_policy_kwargs(kwargs: dict, where: str, problems: list[str], spec: LearnerSpec) -> dict[str, Any]:
    out = _check_keys(kwargs, {**COMMON_POLICY_KWARGS, **spec.policy_kwargs}, where, problems)
    if "net_arch" in out and not _is_net_arch(out["net_arch"], spec.net_arch_heads):
        heads = ", ".join(f"{head}: [256, 256]" for head in spec.net_arch_heads)
        problems.append(
            f"{where}.net_arch must be a list of positive layer sizes (one network shape for every part, "
            f"e.g. [64, 64]) or {{{', '.join(f'{head}: [...]' for head in spec.net_arch_heads)}}} (separate ones, "
            f"e.g. {{{heads}}}), got {out.pop('net_arch')!r}"
        )
    if out.get("activation_fn", "tanh") not in ACTIVATIONS:
        problems.append(f"{where}.activation_fn is {out['activation_fn']!r}; use one of {', '.join(ACTIVATIONS)}")
        del out["activation_fn"]
    return out


def _is_net_arch(net_arch: list | dict, heads: Sequence[str]) -> bool:
    def layers(sizes: Any) -> bool:
        return isinstance(sizes, list) and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes)

    if isinstance(net_arch, dict):
        return set(net_arch) == set(heads) and all(layers(sizes) for sizes in net_arch.values())
    return layers(net_arch)


SPACE_FORMS = "{low: 0.1, high: 0.3, scale: linear}, {low: 1, high: 20, type: int} or {choices: [3, 5, 10]}"


def _check_space(space: dict, where: str, problems: list[str], spec: LearnerSpec) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    settings = spec.by_name
    for name, entry in space.items():
        setting = settings.get(name)
        if is_env_param(name):
            checked = _check_env_entry(name, entry, where, problems)
            if checked is not None or entry is None:  # None: a later layer takes it out
                out[name] = checked
        elif entry is None and setting is not None:  # a later layer takes it out of an earlier layer's space
            out[name] = None
        elif setting is not None and not setting.tunable:
            problems.append(f"{where}.{name}: {name} cannot be explored: {setting.why_fixed}")
        elif setting is None:
            problems.append(_foreign_key(str(name), spec, where) or _unknown_key(str(name), list(spec.tunable), where))
        elif not isinstance(entry, dict):
            problems.append(f"{where}.{name} must be a mapping like {SPACE_FORMS}")
        else:
            before = len(problems)
            checked = _check_keys(entry, SPACE_KEYS, f"{where}.{name}", problems)
            if "choices" in checked:
                checked["choices"] = _check_choices(setting, checked["choices"], f"{where}.{name}", problems)
                if ranged := sorted({"low", "high", "type", "scale"} & set(checked)):
                    problems.append(f"{where}.{name} gives choices and {', '.join(ranged)}; give choices or a range")
            elif checked.get("scale") == "int":  # {scale: int} is {type: int} on a linear scale
                checked.update(scale="linear", type="int")
            if "choices" not in checked:
                if setting.type is str:
                    problems.append(f"{where}.{name} takes names: give choices (e.g. {{choices: [a, b]}})")
                elif setting.whole and checked.get("type", "float") != "int":
                    problems.append(
                        f"{where}.{name} takes whole numbers: give type: int (e.g. {{low: 1, high: 20, type: int}}) "
                        "or choices"
                    )
                elif not setting.whole and checked.get("type", "float") != "float":
                    problems.append(
                        f"{where}.{name} takes real values; type: int is for the counts "
                        f"({', '.join(s.name for s in spec.settings if s.tunable and s.whole) or 'none here'})"
                    )
                elif "low" not in checked or "high" not in checked:
                    problems.append(f"{where}.{name} needs both low and high, or choices (got {entry or 'nothing'})")
            if len(problems) == before:
                out[name] = checked
    return out


def _check_env_entry(name: str, entry: Any, where: str, problems: list[str]) -> dict[str, Any] | None:
    """An env parameter's entry (``env.<attribute>``): a range of any kind, or choices of numbers or of
    names (evo.core.envparams); None for a problem, or for None (a later layer's null, which takes it out)."""
    if (problem := name_problem(name)) is not None:
        problems.append(problem)
        return None
    if entry is None:
        return None
    if not isinstance(entry, dict):
        problems.append(f"{where}.{name} must be a mapping like {SPACE_FORMS}")
        return None
    before = len(problems)
    checked = _check_keys(entry, SPACE_KEYS, f"{where}.{name}", problems)
    if "choices" in checked:
        values = checked["choices"]
        if ranged := sorted({"low", "high", "type", "scale"} & set(checked)):
            problems.append(f"{where}.{name} gives choices and {', '.join(ranged)}; give choices or a range")
        elif not values:
            problems.append(f"{where}.{name}.choices is empty; list the values to choose from, e.g. [0.1, 0.5, 1.0]")
        elif not all(isinstance(v, str) for v in values):
            numbers = [None if isinstance(v, bool) else _coerce(v, float, "", []) for v in values]
            if any(n is None or not math.isfinite(n) for n in numbers):
                problems.append(f"{where}.{name}.choices must all be numbers or all names, got {values!r}")
            else:
                checked["choices"] = [int(n) if isinstance(v, int) else n for v, n in zip(values, numbers, strict=True)]
    else:
        if checked.get("scale") == "int":
            checked.update(scale="linear", type="int")
        if "low" not in checked or "high" not in checked:
            problems.append(f"{where}.{name} needs both low and high, or choices (got {entry or 'nothing'})")
    return checked if len(problems) == before else None


def _check_choices(setting, values: list, where: str, problems: list[str]) -> list:
    """The choices as the setting's values: numbers (whole numbers for the counts; ``null`` last
    for a setting that may be off), or names for a setting that takes names."""
    name = setting.name
    if setting.type is str:
        if not all(isinstance(value, str) for value in values):
            problems.append(f"{where}.choices must all be names, got {values!r}")
            return []
        if not values:
            problems.append(f"{where}.choices is empty; list the values to choose from, e.g. [a, b]")
        return list(values)
    checked: list = []
    for value in values:
        if value is None and setting.may_be_off:
            checked.append(None)
            continue
        number = None if isinstance(value, bool) else _coerce(value, float, "", [])
        if number is None or not math.isfinite(number):
            allowed = "numbers (or null: off)" if setting.may_be_off else "numbers"
            problems.append(f"{where}.choices must all be {allowed}, got {values!r} (mixed types)")
            return []
        if setting.whole:
            if number != int(number):
                problems.append(f"{where}.choices must be whole numbers for {name}, got {values!r}")
                return []
            number = int(number)
        checked.append(number)
    if not checked:
        problems.append(f"{where}.choices is empty; list the values to choose from, e.g. [3, 5, 10]")
    elif None in checked[:-1]:
        problems.append(f"{where}.choices: null (off) is the loosest option; put it last, got {values!r}")
    return checked


def load_hyperparams_file(path: Path, problems: list[str], flag: str = "--conf-file") -> dict[str, Any]:
    """Read a hyperparameter YAML file (safe_load), reporting unreadable or invalid files under ``flag``."""
    try:
        text = read_settings_file(path)
    except ValueError as error:
        problems.append(f"{flag} {path}: {error}")
        return {}
    try:
        data = load_yaml(text)
    except DuplicateKey as error:
        problems.append(f"{flag} {path}: {error}; PyYAML would keep the last one without a word: keep one")
        return {}
    except yaml.YAMLError as error:
        problems.append(f"{flag} {path}: invalid YAML: {yaml_problem(error)}")
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(
            f"{flag} {path}: expected a mapping of env ids to settings "
            f"(e.g. 'CartPole-v1: {{n_steps: 128}}'), got {type(data).__name__}"
        )
        return {}
    return data


def _layers(
    data: Mapping[str, Any],
    env_key: str,
    game: str | None,
    source: str,
    problems: list[str],
    spec: LearnerSpec,
    param_set: str | None = None,
) -> list:
    """The blocks of ``data`` that apply, each with where it is (``ppo.yml[CartPole-v1]``): ``default``, then
    ``procgen`` and ``procgen-<param set>`` for a Procgen game or ``atari`` for an Atari game (zoo's key), then
    the env's own (a ``module:EnvId``'s: ``EnvId``'s, as zoo keys it, then ``module:EnvId``'s)."""
    procgen_names = ["procgen"] + ([f"procgen-{param_set}"] if param_set else [])
    family = procgen_names if game else ["atari"] if is_atari(env_key) else []
    registered = env_key.rpartition(":")[2]  # a module:EnvId's block may be keyed by the registered id, as zoo's
    names = list(dict.fromkeys(["default", *family, registered, env_key]))
    found = []
    for name in names:
        if name in data:
            where = f"{source}[{name}]"
            found.append((where, _check_block(data[name], where, problems, spec)))
    return found


def _file_layers(
    path: Path, flag: str, env_id: str, problems: list[str], spec: LearnerSpec, param_set: str | None
) -> list:
    """The blocks of a user's hyperparameter file that apply to ``env_id``."""
    game = procgen_game(env_id)
    env_key = game or env_id
    before = len(problems)
    data = load_hyperparams_file(path, problems, flag)
    if not data and len(problems) == before:
        problems.append(
            f"{flag} {path} is empty: it holds no settings; give a 'default' or {env_key!r} block (e.g. "
            f"'{env_key}: {{learning_rate: 1.0e-3}}'), or drop {flag}"
        )
    family = "procgen" if game else "atari" if is_atari(env_key) else None
    if data and not ({"default", family, env_key, env_key.rpartition(":")[2]} & set(data)):
        use = f"'default'{f', {family!r}' if family else ''} or {env_key!r}"
        problems.append(f"{flag} {path}: no block applies to {env_id!r}; {_blocks_named(data)} (use {use})")
    return _layers(data, env_key, game, str(path), problems, spec, param_set)


_BLOCK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}")
"""How a block's name (an env id, 'default', a family) looks: a key that does not is not named in a message."""


def _blocks_named(data: Mapping[Any, Any], most: int = 8) -> str:
    """The names of a file's settings blocks (keys that look like env ids and hold a mapping), the first
    ``most`` of them; a file with none (one that is not a settings file: its lines are keys of no value) is
    said to have none, and nothing of it is quoted."""
    names = [key for key, block in data.items() if isinstance(block, Mapping) and _BLOCK_NAME.fullmatch(str(key))]
    if not names:
        return f"it holds no settings block ({len(data)} top-level entries, none a mapping named like an env id)"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"its blocks are {', '.join(map(str, names[:most]))}{more}"


def _merge(
    layers: Sequence[tuple[str, Mapping[str, Any]]],
    exclusive: Sequence[tuple[str, str]] = (),
    sources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One flat settings dict from ``(where, layer)`` pairs; nested mappings merge key by key, the later
    layer winning. Of a pair of ``exclusive`` settings (that say the same thing), the one a later layer
    gives wins. ``sources``, if given, gets where each value came from: a setting's name, and
    ``search_space.<name>`` and ``policy_kwargs.<key>`` for the nested ones."""
    others = {a: b for pair in exclusive for a, b in (pair, pair[::-1])}
    merged: dict[str, Any] = {}
    found: dict[str, str] = {}
    for where, layer in layers:
        for key, value in layer.items():
            if key == "search_space":  # an entry set to null leaves the space
                space = {**merged.get(key, {}), **value}
                merged[key] = {name: entry for name, entry in space.items() if entry is not None}
            elif key == "policy_kwargs":
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
            found |= {f"{key}.{name}": where for name in value} if isinstance(value, dict) else {}
            found[key] = where
            if key in others:
                merged.pop(others[key], None)
    if sources is not None:
        sources.update(found)
    return merged


def resolve_agent(
    spec: LearnerSpec,
    env_id: str,
    hyperparams_file: Path | None,
    problems: list[str],
    builtin: Path | None = None,
    param_set: str | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    file_flag: str = "--conf-file",
    sources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Merge ``spec``'s YAML layers for ``env_id`` (and a Procgen ``param_set``), then the checked
    ``--hyperparams key:value`` ``overrides``, into one flat settings dict; ``sources``, if given, gets
    where each value came from (:func:`_merge`), for the messages about it."""
    game = procgen_game(env_id)
    builtin = builtin or builtin_hyperparams(spec.name)
    data = load_hyperparams_file(builtin, problems, "the built-in file")
    layers = _layers(data, game or env_id, game, builtin.name, problems, spec, param_set)
    if hyperparams_file is not None:
        layers += _file_layers(hyperparams_file, file_flag, env_id, problems, spec, param_set)
    if overrides:
        layers.append(("--hyperparams", overrides))
    # zoo's n_timesteps and evo's total_generations say the budget: the later layer's wins
    return _merge(layers, (*spec.exclusive, ("n_timesteps", "total_generations")), sources)


def is_file_form(tokens: Sequence[str] | None) -> bool:
    """Whether ``--hyperparams`` names a YAML file (one value: an existing file, or a path-like
    name without ``:``) rather than key:value overrides."""
    if not tokens or len(tokens) != 1:
        return False
    token = tokens[0]
    try:
        if Path(token).is_file():
            return True
    except OSError:  # a key:value longer than a file name may be (ENAMETOOLONG) is no file
        return False
    return ":" not in token and (token.endswith((".yml", ".yaml", ".json")) or os.sep in token)


def key_values(tokens: Sequence[str], flag: str, form: str, problems: list[str]) -> dict[str, Any]:
    """``key:value ...`` tokens as a dict, each value read as a YAML scalar (or flow collection)."""
    raw: dict[str, Any] = {}
    for token in tokens:
        key, colon, text = token.partition(":")
        if not colon:
            problems.append(f"{flag} {token}: expected {form}")
            continue
        key = key.strip()
        try:
            value = load_yaml(text) if text.strip() else None
        except DuplicateKey as error:
            problems.append(f"{flag} {token}: {error}; keep one")
            continue
        except yaml.YAMLError as error:
            problems.append(f"{flag} {token}: {text!r} is not a YAML value ({error})".replace("\n", " "))
            continue
        if key in raw:
            problems.append(f"{flag} {key} is given twice ({raw[key]} and {value}); keep one")
            continue
        raw[key] = value
    for key in [key for key, value in raw.items() if value is None]:
        problems.append(f"{flag} {key}: has no value; expected {form}")
        del raw[key]
    return raw


def parse_overrides(tokens: Sequence[str], problems: list[str], spec: LearnerSpec) -> dict[str, Any]:
    """``--hyperparams key:value ...`` as one checked settings layer (values are YAML scalars)."""
    raw = key_values(tokens, "--hyperparams", f"{OVERRIDE_FORM}, or a single YAML FILE", problems)
    return _check_block(raw, "--hyperparams", problems, spec) if raw else {}


def parse_env_kwargs(tokens: Sequence[str] | None, problems: list[str]) -> dict[str, Any]:
    """``--env-kwargs key:value ...``: YAML scalars, except that a number PyYAML leaves as a
    string (``3e-4``, YAML 1.1 wants ``3.0e-4``) is read as the float it spells."""
    raw = key_values(tokens or (), "--env-kwargs", ENV_KWARGS_FORM, problems)
    return {key: _yaml12_float(value) for key, value in raw.items()}


def _yaml12_float(value: Any) -> Any:
    if isinstance(value, str) and FLOAT_LITERAL.fullmatch(value.strip()):
        return float(value)
    return value


def hyperparams_sources(
    conf_file: Path | None, tokens: Sequence[str] | None, problems: list[str], spec: LearnerSpec
) -> tuple[Path | None, str, dict[str, Any]]:
    """The YAML file to layer over the built-in one, the flag that named it, and the checked
    key:value overrides, from ``--conf-file`` and ``--hyperparams``."""
    if not tokens or not is_file_form(tokens):
        return conf_file, "--conf-file", parse_overrides(tokens or (), problems, spec)
    if conf_file is not None:
        problems.append(
            f"--hyperparams {tokens[0]} and --conf-file {conf_file} both name a YAML file; give one "
            f"(and put overrides on top with --hyperparams {OVERRIDE_FORM})"
        )
    return Path(tokens[0]), "--hyperparams", {}
