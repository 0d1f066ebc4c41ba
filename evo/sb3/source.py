"""``--init-from``'s agent read into memory (:class:`SourceAgent`), checked against the run's members
(:func:`source_problems`), and taken by each new member (``SB3Learner.start_from``).

An SB3 zip holds the state_dicts its algorithm names in ``_get_torch_save_params`` (the policy, its
optimizers), its other tensors (SAC's ``log_ent_coef``), and its attributes (spaces, policy class,
hyperparameters). A zip says nothing of its algorithm's name, so the learners it can belong to are those
whose SB3 class lists its policy class (PPO and A2C share one: their optimizers' state tells them apart, as
the check of the network does). The normalisation statistics of a zoo agent lie beside the zip
(:data:`STATISTICS`). A run's member file holds evo's own state (its flat weights and optimizer state, its
statistics): a new member takes it as a recipient takes a donor's at an exploit (``SB3Learner.load``), bit for
bit. What to re-check when SB3 changes: ``load_from_zip_file``, ``set_parameters``, ``VecNormalize``'s pickled
fields.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3.common.save_util import load_from_zip_file

from evo.config.source import RUN, SourceRef, sha256_of
from evo.learners import DEFAULT_ALGO
from evo.rundir.checkpoint import load_payload
from evo.sb3.learner import NORMALIZATION, WEIGHTS
from evo.sb3.stock import stock_class

STATISTICS = ("{stem}/vecnormalize.pkl", "vecnormalize.pkl", "vec_normalize.pkl")
"""Where a zip's normalisation statistics are looked for, beside it: rl-baselines3-zoo's layout
(``<env>/vecnormalize.pkl`` next to ``<env>.zip``), then the file beside the zip (the Hub's ``vec_normalize.pkl``)."""


@dataclass(frozen=True)
class Normalization:
    """A source's VecNormalize statistics: what it normalised, and the running means and variances."""

    norm_obs: bool
    norm_reward: bool
    obs_rms: Any
    ret_rms: Any


@dataclass(frozen=True)
class SourceAgent:
    """The agent ``--init-from`` names, read: a zip's state as SB3's ``get_parameters`` gives it, or a run's
    member's flat state, and what the check against the run needs."""

    ref: SourceRef
    algos: tuple[str, ...]
    """The learners it can belong to (a run's member: its run's; a zip: those whose SB3 class lists its policy)."""
    hparams: dict[str, Any]
    """Its hyperparameters by name (a zip's schedules as their value at the start)."""
    policy_class: type | None = None
    observation_space: Any = None
    action_space: Any = None
    params: dict[str, dict[str, Any]] | None = None
    """A zip's state_dicts by name (``policy``, ``policy.optimizer`` ...)."""
    variables: dict[str, torch.Tensor] | None = None
    """A zip's tensors outside a state_dict (SAC's ``log_ent_coef``)."""
    normalization: Normalization | None = None
    """A zip's statistics (beside it)."""
    state: dict[str, np.ndarray] | None = None
    """A run's member's exploit state: its flat ``weights`` and its ``normalization`` statistics."""

    @property
    def where(self) -> str:
        return f"--init-from {self.ref.text}"


def load_source(ref: SourceRef) -> SourceAgent:
    """The agent ``ref`` names, read from its file (which must still be the one start-up resolved)."""
    if sha256_of(Path(ref.path)) != ref.sha256:
        raise RuntimeError(
            f"--init-from {ref.text}: {ref.path} changed since the run started (its SHA-256 is no longer "
            f"{ref.sha256}); a run's members start from one agent: start it again"
        )
    return _run_agent(ref) if ref.kind == RUN else _zip_agent(ref)


def _zip_agent(ref: SourceRef) -> SourceAgent:
    data, params, variables = load_from_zip_file(ref.path, device="cpu", print_system_info=False)
    data = data or {}
    policy_class = data.get("policy_class")
    return SourceAgent(
        ref=ref,
        algos=algos_of_policy(policy_class),
        hparams={name: _start_value(value) for name, value in data.items()},
        policy_class=policy_class if isinstance(policy_class, type) else None,
        observation_space=data.get("observation_space"),
        action_space=data.get("action_space"),
        params=params,
        variables={name: tensor.detach().clone() for name, tensor in (variables or {}).items()},
        normalization=_zip_statistics(Path(ref.path)),
    )


def _run_agent(ref: SourceRef) -> SourceAgent:
    payload = load_payload(Path(ref.path))
    state = {WEIGHTS: payload["state"].numpy()}
    if payload.get("normalization") is not None:
        state[NORMALIZATION] = payload["normalization"].numpy()
    return SourceAgent(
        ref=ref, algos=(payload.get("algo", DEFAULT_ALGO),), hparams=dict(payload["hparams"]), state=state
    )


def _start_value(value: Any) -> Any:
    """A hyperparameter as a number: a schedule (SB3 saves some settings as one, zoo's ``lin_`` rates too) at
    the start of training."""
    if callable(value) and not isinstance(value, type):
        try:
            return float(value(1.0))
        except Exception:  # not a schedule of progress
            return None
    return value


def _zip_statistics(path: Path) -> Normalization | None:
    for pattern in STATISTICS:
        found = path.parent / pattern.format(stem=path.stem)
        if found.is_file():
            with found.open("rb") as handle:
                saved = pickle.load(handle)  # SB3's VecNormalize.save pickles itself without its env
            return Normalization(bool(saved.norm_obs), bool(saved.norm_reward), saved.obs_rms, saved.ret_rms)
    return None


def algos_of_policy(policy_class: Any) -> tuple[str, ...]:
    """The built-in learners whose SB3 class lists ``policy_class`` among its policies."""
    from evo.learners import algos
    from evo.sb3.learner import learner_class

    if not isinstance(policy_class, type):
        return ()
    found = []
    for algo in algos():
        if policy_class in stock_class(learner_class(algo).algorithm).policy_aliases.values():
            found.append(algo)
    return tuple(found)


# --- the check against the run ------------------------------------------------------------------------


def source_problems(source: SourceAgent, member, algo: str) -> list[str]:
    """Why ``source`` cannot start the run's members (``member``: one of them, built as the run builds them;
    ``algo``: the run's learner), each with its fix: another learner's agent, other observation or action
    spaces, another network (a layer's shape, an optimizer's state), normalisation the run does not do."""
    where = source.where
    if not hasattr(member, "start_from"):
        return [f"{where}: {type(member).__name__} cannot start from an agent (it has no start_from); drop the flag"]
    if source.algos and algo not in source.algos:
        policy = source.policy_class.__name__ if source.policy_class is not None else "unknown"
        return [
            f"{where}: the source is a {' or '.join(a.upper() for a in source.algos)} agent (its policy is {policy}); "
            f"this run trains {algo.upper()}: give --algo {source.algos[0]}, or a {algo.upper()} source"
        ]
    if source.state is not None:
        return _state_problems(where, source.state, member)
    problems = []
    model = member.model
    for name, theirs, ours in (
        ("observations", source.observation_space, model.observation_space),
        ("actions", source.action_space, model.action_space),
    ):
        if theirs is not None and theirs != ours:
            problems.append(
                f"{where}: its {name} are {theirs}, this run's env has {ours}; give an agent of this env (or run "
                "the source's env)"
            )
    if problems:
        return problems
    problems += _network_problems(where, source.params, model.get_parameters())
    problems += _normalization_problems(where, source.normalization, member.normalizer)
    return problems


def _state_problems(where: str, state: Mapping[str, np.ndarray], member) -> list[str]:
    """A run's member against the run's: the same flat state (network and optimizers) and statistics."""
    ours, theirs = member.own_buffers(), dict(state)
    if theirs[WEIGHTS].size != ours[WEIGHTS].size:
        return [
            f"{where}: its network is not this run's (its state holds {theirs[WEIGHTS].size} floats, this run's "
            f"members {ours[WEIGHTS].size}); give the run the source run's network (its YAML's net_arch and policy "
            "settings)"
        ]
    if (NORMALIZATION in theirs) != (NORMALIZATION in ours):
        done, ours_done = ("normalised", "does not") if NORMALIZATION in theirs else ("did not normalise", "does")
        return [
            f"{where}: the source run {done} its observations, this run {ours_done}; set normalize in the YAML as "
            "the source run had it"
        ]
    if NORMALIZATION in theirs and theirs[NORMALIZATION].size != ours[NORMALIZATION].size:
        return [f"{where}: its normalisation statistics are of another env's size; give a run of this env"]
    return []


def _network_problems(where: str, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    fix = "give the run the source's network (net_arch and the policy's settings in the YAML or --hyperparams)"
    if "policy" not in theirs:
        return [f"{where}: it holds no policy weights; give a model zip that SB3's save wrote"]
    policy_theirs, policy_ours = theirs["policy"], ours["policy"]
    missing = [key for key in policy_ours if key not in policy_theirs]
    extra = [key for key in policy_theirs if key not in policy_ours]
    if missing or extra:
        said = "; ".join(
            part
            for part in (
                f"this run's network has {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} which the "
                "source lacks"
                if missing
                else "",
                f"the source has {', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''}" if extra else "",
            )
            if part
        )
        return [f"{where}: its network is not this run's ({said}); {fix}"]
    for key, tensor in policy_ours.items():
        if tuple(policy_theirs[key].shape) != tuple(tensor.shape):
            return [
                f"{where}: its network is not this run's (layer {key} is {list(policy_theirs[key].shape)} in the "
                f"source, {list(tensor.shape)} here); {fix}"
            ]
    for name, state in ours.items():
        if name == "policy" or name not in theirs or not isinstance(state, dict) or "state" not in state:
            continue
        kinds_ours = {tuple(sorted(entry)) for entry in state["state"].values()}
        kinds_theirs = {tuple(sorted(entry)) for entry in theirs[name]["state"].values()}
        if kinds_theirs and kinds_theirs != kinds_ours:
            return [
                f"{where}: its optimizer {name} keeps {', '.join(sorted(set().union(*kinds_theirs)))}, this run's "
                f"keeps {', '.join(sorted(set().union(*kinds_ours)))}: another optimizer (A2C's RMSprop and PPO's "
                "Adam share a policy class); give an agent of this run's learner"
            ]
        if len(theirs[name]["state"]) not in (0, len(state["state"])):
            return [f"{where}: its optimizer {name} holds state for another number of tensors; {fix}"]
    return []


def _normalization_problems(where: str, theirs: Normalization | None, normalizer) -> list[str]:
    if theirs is None:
        return []
    if normalizer is None or (theirs.norm_obs and not normalizer.norm_obs):
        return [
            f"{where}: the source normalised its observations (its vecnormalize.pkl), this run does not: its "
            "agent would see raw observations; set normalize in the YAML as the source had it (zoo's "
            "normalize: true)"
        ]
    if theirs.norm_obs and normalizer.norm_obs and theirs.obs_rms.mean.shape != normalizer.obs_rms.mean.shape:
        return [
            f"{where}: its normalisation statistics are of shape {theirs.obs_rms.mean.shape}, this run's "
            f"observations {normalizer.obs_rms.mean.shape}; give an agent of this env"
        ]
    return []


def source_notes(source: SourceAgent, member, names: Mapping[str, Any], start: Callable[[str], Any]) -> list[str]:
    """What start-up says of a source that fits (rank 0's log): where it is from, which hyperparameters it
    gives (``names``: the explored ones; ``start``: a name's value as the members start, for a value moved into
    its search range), and statistics the run normalises with but the source lacks."""
    notes = [f"--init-from: every new member starts from {source.ref.describe()}"]
    given = [name for name in names if isinstance(source.hparams.get(name), (int, float))]
    lacking = [name for name in names if name not in given]
    if given:
        said = ", ".join(f"{name} {source.hparams[name]!r}" for name in given)
        notes.append(f"--init-from: the source's hyperparameters: {said}")
        moved = [
            f"{name} {source.hparams[name]!r} -> {start(name)!r}"
            for name in given
            if start(name) != source.hparams[name] and float(start(name)) != float(source.hparams[name])
        ]
        if moved:
            notes.append(
                f"--init-from: outside the search space, moved to its nearest bound: {', '.join(moved)}; widen the "
                "space to keep the source's values"
            )
    if lacking:
        notes.append(f"--init-from: the source has no value for {', '.join(lacking)}: the YAML's is the start")
    if member.normalizer is not None and source.normalization is None:
        notes.append(
            "--init-from: the source has no normalisation statistics; members start with fresh ones (and so do not "
            "play exactly as the source until the statistics settle)"
        )
    return notes
