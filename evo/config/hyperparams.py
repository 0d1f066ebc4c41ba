"""The PPO settings of an env: YAML layers and ``--hyperparams key:value`` overrides. Pure.

Layers, later ones winning (rl-baselines3-zoo's order): the built-in ``ppo.yml`` (its
``default`` block, ``procgen`` and ``procgen-<param set>`` for Procgen games, then the env's
own block), the same blocks of a ``--conf-file FILE`` (or ``--hyperparams FILE``), then the
``--hyperparams key:value`` overrides. Every value is coerced by the key's type (PyYAML reads
``3e-4`` as a string) and unknown keys are refused with a suggestion.
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

from evo.config.envnames import procgen_game
from evo.core.space import EXPLORED, EXTRA, INTEGER_NAMES

# The built-in defaults ship inside the package (hyperparams/ppo.yml at the top of the repository is a
# link to this file, the copy users read and edit).
DEFAULT_HYPERPARAMS = Path(__file__).resolve().parent.parent / "hyperparams" / "ppo.yml"

# Keys an env block of a hyperparameter file may hold, with the type each is coerced to.
AGENT_KEYS: dict[str, type | tuple[type, ...]] = {
    "policy": str,
    "n_envs": int,
    "n_steps": int,
    "n_minibatches": int,
    "batch_size": int,
    "microbatch_size": int,
    "precision": str,
    "n_epochs": int,
    "max_grad_norm": float,
    "target_kl": float,
    "normalize_advantage": bool,
    "use_sde": bool,
    "sde_sample_freq": int,
    "normalize": (bool, dict),
    "agent_training_steps": int,
    "total_generations": int,
    **{name: float for name in EXPLORED},
    "policy_kwargs": dict,
    "search_space": dict,
}
POLICY_KWARGS_KEYS: dict[str, type | tuple[type, ...]] = {
    "net_arch": (list, dict),
    "activation_fn": str,
    "ortho_init": bool,
    "log_std_init": float,
    "features_dim": int,
}
NORMALIZE_KEYS: dict[str, type] = {"norm_obs": bool, "norm_reward": bool}
SPACE_KEYS: dict[str, type] = {"low": float, "high": float, "scale": str, "type": str, "choices": list}
# Why on-policy n_steps stays out of the search space
N_STEPS_REFUSED = (
    "n_steps cannot be explored: it sizes the rollout buffer (n_envs * n_steps samples) that PPO allocates once "
    "and that every generation's agent_training_steps is rounded to, so changing it mid-run would reallocate "
    "the buffer and shift the members' generation boundaries; set n_steps as a fixed setting, and explore "
    "batch_size or n_minibatches instead"
)
ACTIVATIONS = ("tanh", "relu", "elu", "leaky_relu")
# --param-set NAME: (distribution mode, training levels) that the name stands for
PARAM_SETS = {"easy": ("easy", 0), "easy-200": ("easy", 200), "hard": ("hard", 0), "hard-500": ("hard", 500)}
ENV_KWARGS_FORM = "key:value (e.g. reward_scale:0.1 max_episode_steps:200)"
FLOAT_LITERAL = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
OVERRIDE_FORM = "key:value (e.g. learning_rate:1e-3 n_epochs:4 'policy_kwargs:{net_arch: [32, 32]}')"


def _coerce(value: Any, kind: type | tuple[type, ...], where: str, problems: list[str]) -> Any:
    """Coerce a YAML value to ``kind`` (PyYAML reads ``3e-4`` as a string); a tuple of
    kinds (``normalize: true`` or a mapping) takes the value if it is one of them."""
    if isinstance(kind, tuple):
        if isinstance(value, kind):
            return value
        names = " or ".join("mapping" if k is dict else k.__name__ for k in kind)
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


def _check_keys(mapping: dict, schema: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """Coerce each known key of ``mapping`` to its type in ``schema``; report the rest."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key not in schema:
            problems.append(_unknown_key(str(key), list(schema), where))
            continue
        coerced = _coerce(value, schema[key], f"{where}.{key}", problems)
        if coerced is not None:
            out[key] = coerced
    return out


def _check_block(block: Any, where: str, problems: list[str]) -> dict[str, Any]:
    """Validate and coerce one env block of a hyperparameter file."""
    if not isinstance(block, dict):
        problems.append(f"{where} must be a mapping of settings, got {type(block).__name__}")
        return {}
    out = _check_keys(block, AGENT_KEYS, where, problems)
    if "policy_kwargs" in out:
        out["policy_kwargs"] = _check_policy_kwargs(out["policy_kwargs"], f"{where}.policy_kwargs", problems)
    if "search_space" in out:
        out["search_space"] = _check_space(out["search_space"], f"{where}.search_space", problems)
    if "normalize" in out:
        out["normalize"] = _check_normalize(out["normalize"], f"{where}.normalize", problems)
    if out.get("sde_sample_freq", -1) == 0 or out.get("sde_sample_freq", -1) < -1:
        problems.append(
            f"{where}.sde_sample_freq is {out.pop('sde_sample_freq')}: use -1 (a new gSDE noise matrix at the start "
            "of each rollout only) or a positive number of steps"
        )
    return out


def _check_normalize(value: bool | dict, where: str, problems: list[str]) -> dict[str, bool]:
    """``normalize: true`` / ``false``, or zoo's ``{norm_obs: .., norm_reward: ..}`` (a key left
    out is true, VecNormalize's default), as the mapping of both."""
    if isinstance(value, bool):
        return {"norm_obs": value, "norm_reward": value}
    return {"norm_obs": True, "norm_reward": True, **_check_keys(value, NORMALIZE_KEYS, where, problems)}


def _check_policy_kwargs(kwargs: dict, where: str, problems: list[str]) -> dict[str, Any]:
    out = _check_keys(kwargs, POLICY_KWARGS_KEYS, where, problems)
    if "net_arch" in out and not _is_net_arch(out["net_arch"]):
        problems.append(
            f"{where}.net_arch must be a list of positive layer sizes (one network shared by policy and value, "
            f"e.g. [64, 64]) or {{pi: [...], vf: [...]}} (separate ones, e.g. {{pi: [256, 256], vf: [256, 256]}}), "
            f"got {out.pop('net_arch')!r}"
        )
    if out.get("activation_fn", "tanh") not in ACTIVATIONS:
        problems.append(f"{where}.activation_fn is {out['activation_fn']!r}; use one of {', '.join(ACTIVATIONS)}")
        del out["activation_fn"]
    return out


def _is_net_arch(net_arch: list | dict) -> bool:
    def layers(sizes: Any) -> bool:
        return isinstance(sizes, list) and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes)

    if isinstance(net_arch, dict):
        return set(net_arch) == {"pi", "vf"} and all(layers(sizes) for sizes in net_arch.values())
    return layers(net_arch)


def _check_space(space: dict, where: str, problems: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, entry in space.items():
        if name == "n_steps":
            problems.append(f"{where}.n_steps: {N_STEPS_REFUSED}")
        elif name not in EXPLORED + EXTRA:
            problems.append(_unknown_key(str(name), list(EXPLORED + EXTRA), where))
        elif not isinstance(entry, dict):
            problems.append(
                f"{where}.{name} must be a mapping like {{low: 0.1, high: 0.3, scale: linear}}, "
                "{low: 1, high: 20, type: int} or {choices: [3, 5, 10]}"
            )
        else:
            before = len(problems)
            checked = _check_keys(entry, SPACE_KEYS, f"{where}.{name}", problems)
            if "choices" in checked:
                checked["choices"] = _check_choices(name, checked["choices"], f"{where}.{name}", problems)
                if ranged := sorted({"low", "high", "type", "scale"} & set(checked)):
                    problems.append(f"{where}.{name} gives choices and {', '.join(ranged)}; give choices or a range")
            elif checked.get("scale") == "int":  # {scale: int} is {type: int} on a linear scale
                checked.update(scale="linear", type="int")
            if name in INTEGER_NAMES and "choices" not in checked and checked.get("type", "float") != "int":
                problems.append(
                    f"{where}.{name} takes whole numbers: give type: int (e.g. {{low: 1, high: 20, type: int}}) "
                    "or choices"
                )
            if len(problems) == before:
                out[name] = checked
    return out


def _check_choices(name: str, values: list, where: str, problems: list[str]) -> list:
    """The choices as numbers (whole numbers for the counts; ``null`` for target_kl is inf: no
    early stop), or the reason they are not."""
    checked: list = []
    for value in values:
        if value is None and name == "target_kl":
            checked.append(math.inf)
            continue
        number = None if isinstance(value, bool) else _coerce(value, float, "", [])
        if number is None or not math.isfinite(number):
            allowed = "numbers (or null: no early stop)" if name == "target_kl" else "numbers"
            problems.append(f"{where}.choices must all be {allowed}, got {values!r} (mixed types)")
            return []
        if name in INTEGER_NAMES:
            if number != int(number):
                problems.append(f"{where}.choices must be whole numbers for {name}, got {values!r}")
                return []
            number = int(number)
        checked.append(number)
    if not checked:
        problems.append(f"{where}.choices is empty; list the values to choose from, e.g. [3, 5, 10]")
    elif math.inf in checked[:-1]:
        problems.append(f"{where}.choices: null (no early stop) is the loosest limit; put it last, got {values!r}")
    return checked


def load_hyperparams_file(path: Path, problems: list[str], flag: str = "--conf-file") -> dict[str, Any]:
    """Read a hyperparameter YAML file (safe_load), reporting unreadable or invalid files under ``flag``."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        problems.append(f"{flag} {path}: cannot read the file ({error.strerror or error})")
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problems.append(f"{flag} {path}: invalid YAML: {error}".replace("\n", " "))
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
    param_set: str | None = None,
) -> list:
    procgen_names = ["procgen"] + ([f"procgen-{param_set}"] if param_set else [])
    names = ["default"] + (procgen_names if game else []) + [env_key]
    return [_check_block(data[name], f"{source}[{name}]", problems) for name in names if name in data]


def _file_layers(path: Path, flag: str, env_id: str, problems: list[str], param_set: str | None) -> list:
    """The blocks of a user's hyperparameter file that apply to ``env_id``."""
    game = procgen_game(env_id)
    env_key = game or env_id
    data = load_hyperparams_file(path, problems, flag)
    if data and not ({"default", "procgen", env_key} & set(data)):
        problems.append(
            f"{flag} {path}: no block applies to {env_id!r}; "
            f"its blocks are {', '.join(map(str, data))} (use 'default' or {env_key!r})"
        )
    return _layers(data, env_key, game, str(path), problems, param_set)


def _merge(layers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One flat settings dict; nested mappings merge key by key, the later layer winning."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key in ("policy_kwargs", "search_space"):
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
            # batch_size and n_minibatches say the same thing; the later layer wins.
            if key == "batch_size":
                merged.pop("n_minibatches", None)
            elif key == "n_minibatches":
                merged.pop("batch_size", None)
    return merged


def resolve_agent(
    env_id: str,
    hyperparams_file: Path | None,
    problems: list[str],
    builtin: Path = DEFAULT_HYPERPARAMS,
    param_set: str | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    file_flag: str = "--conf-file",
) -> dict[str, Any]:
    """Merge the YAML layers for ``env_id`` (and a Procgen ``param_set``), then the checked
    ``--hyperparams key:value`` ``overrides``, into one flat settings dict."""
    game = procgen_game(env_id)
    layers = _layers(load_hyperparams_file(builtin, problems), game or env_id, game, builtin.name, problems, param_set)
    if hyperparams_file is not None:
        layers += _file_layers(hyperparams_file, file_flag, env_id, problems, param_set)
    if overrides:
        layers.append(overrides)
    return _merge(layers)


def is_file_form(tokens: Sequence[str] | None) -> bool:
    """Whether ``--hyperparams`` names a YAML file (one value: an existing file, or a path-like
    name without ``:``) rather than key:value overrides."""
    if not tokens or len(tokens) != 1:
        return False
    token = tokens[0]
    if Path(token).is_file():
        return True
    return ":" not in token and (token.endswith((".yml", ".yaml", ".json")) or os.sep in token)


def key_values(tokens: Sequence[str], flag: str, form: str, problems: list[str]) -> dict[str, Any]:
    """``key:value ...`` tokens as a dict, each value read as a YAML scalar (or flow collection)."""
    raw: dict[str, Any] = {}
    for token in tokens:
        key, colon, text = token.partition(":")
        if not colon:
            problems.append(f"{flag} {token}: expected {form}")
            continue
        try:
            raw[key.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as error:
            problems.append(f"{flag} {token}: {text!r} is not a YAML value ({error})".replace("\n", " "))
    for key in [key for key, value in raw.items() if value is None]:
        problems.append(f"{flag} {key}: has no value; expected {form}")
        del raw[key]
    return raw


def parse_overrides(tokens: Sequence[str], problems: list[str]) -> dict[str, Any]:
    """``--hyperparams key:value ...`` as one checked settings layer (values are YAML scalars)."""
    raw = key_values(tokens, "--hyperparams", f"{OVERRIDE_FORM}, or a single YAML FILE", problems)
    return _check_block(raw, "--hyperparams", problems) if raw else {}


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
    conf_file: Path | None, tokens: Sequence[str] | None, problems: list[str]
) -> tuple[Path | None, str, dict[str, Any]]:
    """The YAML file to layer over the built-in one, the flag that named it, and the checked
    key:value overrides, from ``--conf-file`` and ``--hyperparams``."""
    if not tokens or not is_file_form(tokens):
        return conf_file, "--conf-file", parse_overrides(tokens or (), problems)
    if conf_file is not None:
        problems.append(
            f"--hyperparams {tokens[0]} and --conf-file {conf_file} both name a YAML file; give one "
            f"(and put overrides on top with --hyperparams {OVERRIDE_FORM})"
        )
    return Path(tokens[0]), "--hyperparams", {}
