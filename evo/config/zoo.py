"""rl-baselines3-zoo's hyperparameter keys that are not evo's own, read as zoo means them or refused with what
evo does instead. Pure (it parses and imports nothing it names).

A zoo file's entry (``hyperparams/ppo.yml`` of rl-baselines3-zoo) runs under evo as it is:

- ``env_wrapper``: a wrapper's class path (``minigrid.wrappers.FlatObsWrapper``), or a list of them, each as
  a path or ``{path: {keyword: value}}``; every env of a member (training, evaluation, evo's tools) is wrapped
  in that order, outside SB3's Monitor, as zoo's ``make_vec_env`` does, and the export writes them into zoo's
  ``config.yml`` so that ``rl_zoo3.enjoy`` wraps the same way (:func:`wrappers`);
- ``n_timesteps``: zoo's training budget of one agent; under evo each member trains that many env steps in
  all: the run's generations are ``n_timesteps / agent_training_steps``, rounded up (a later layer's
  ``total_generations``, or ``--total-generations``, says otherwise);
- ``normalize`` and ``policy_kwargs`` written as zoo writes them, as strings of Python
  (``"{'norm_obs': True, 'norm_reward': False}"``, ``"dict(net_arch=[64, 64], activation_fn=nn.ReLU)"``): read
  as literals, never evaluated (:func:`python_literal`); an activation is named by its class (``nn.ReLU`` is
  ``relu``);
- ``frame_stack``: evo's own key, the same as zoo's;
- ``callback`` and ``vec_env_wrapper`` are refused, saying what evo does instead (:data:`REFUSED`), as is a
  ``lin_`` schedule in place of a number (:func:`schedule_problem`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

REFUSED = {
    "callback": (
        "is zoo's training callback, which evo does not run: evo's own callbacks checkpoint, score and exchange the "
        "members; drop it (evo's --tb-writer logs to TensorBoard, evo's checkpoints keep the best)"
    ),
    "vec_env_wrapper": (
        "wraps zoo's VecEnv, which evo builds itself: normalisation is evo's normalize key, frame stacking its "
        "frame_stack key; drop it, or write the wrapper as an env_wrapper of one env"
    ),
}
"""zoo's keys evo refuses, each with what it does instead."""

ACTIVATION_CLASSES = {"Tanh": "tanh", "ReLU": "relu", "ELU": "elu", "LeakyReLU": "leaky_relu"}
"""torch's activation classes by name, as evo names them (``activation_fn``)."""

CLASS_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
SCHEDULE = re.compile(r"(lin|linear)_[-+0-9.eE]+")


def wrappers(value: Any, where: str, problems: list[str]) -> tuple[tuple[str, dict[str, Any]], ...]:
    """zoo's ``env_wrapper`` as ``((class path, keyword arguments), ...)`` in the order they wrap (each problem
    appended, naming the value and the form zoo writes)."""
    entries = value if isinstance(value, list) else [value]
    found = []
    for entry in entries:
        path, kwargs = entry, {}
        if isinstance(entry, Mapping) and len(entry) == 1:
            path, kwargs = next(iter(entry.items()))
            kwargs = {} if kwargs is None else kwargs
        if not isinstance(path, str) or not CLASS_PATH.fullmatch(path) or not isinstance(kwargs, Mapping):
            problems.append(
                f"{where}: {entry!r} is not a wrapper as zoo writes one: give its class path "
                "(minigrid.wrappers.FlatObsWrapper), or {path: {keyword: value}}, or a list of them"
            )
            continue
        found.append((path, {str(key): item for key, item in kwargs.items()}))
    return tuple(found)


def recorded_wrappers(entries: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The wrappers config.yaml's ``agent.env_wrapper`` holds (``[{path: kwargs}, ...]``), as evo keeps them."""
    return tuple((str(path), dict(kwargs or {})) for entry in entries or () for path, kwargs in entry.items())


def python_literal(text: str, where: str, problems: list[str]) -> Any:
    """A zoo value written as a string of Python: a literal (``"{'norm_obs': True}"``, ``"True"``) or a
    ``dict(key=value, ...)`` call of literals, where torch's activation classes (``nn.ReLU``,
    ``th.nn.Tanh``) stand for their names (``relu``, ``tanh``). Nothing is evaluated: anything else is a
    problem naming the part that is not a literal. None after a problem."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        problems.append(f"{where}: {text!r} is not Python zoo could read either; write it as a YAML mapping")
        return None
    try:
        return _literal(tree)
    except ValueError as error:
        problems.append(
            f"{where}: {text!r}: {error}; evo reads literals only (numbers, strings, lists, mappings, "
            "dict(...) of them and torch's activations such as nn.ReLU): write it as a YAML mapping"
        )
        return None


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        if any(keyword.arg is None for keyword in node.keywords):
            raise ValueError("**kwargs is not a literal")
        return {keyword.arg: _literal(keyword.value) for keyword in node.keywords}
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise ValueError("**kwargs is not a literal")
        return {_literal(key): _literal(value) for key, value in zip(node.keys, node.values, strict=True)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Attribute) and node.attr in ACTIVATION_CLASSES:
        return ACTIVATION_CLASSES[node.attr]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{ast.unparse(node)} is not a literal") from None


def schedule_problem(key: str, value: Any, where: str) -> str | None:
    """The refusal of zoo's ``lin_<value>`` schedule (a value that falls linearly to 0 over the training), or
    None: under PBT a hyperparameter changes at the generations' exploits, or by evo's own --schedule."""
    if isinstance(value, str) and SCHEDULE.fullmatch(value.strip()):
        start = value.strip().split("_", 1)[1]
        return (
            f"{where}.{key}: {value!r} is zoo's linear schedule, which evo does not run: PBT changes {key} at its "
            f"exploits; give the number ({key}: {start}), and explore it in the search space, or give evo's "
            "--schedule for a fixed schedule"
        )
    return None
