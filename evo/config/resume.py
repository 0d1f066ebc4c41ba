"""What ``--resume`` reads from a run and what it refuses to change. Pure.

The rules come from each option's resume class (its Config field, resolved.py): the options of classes
RESTORED and FIXED are saved under ``cli`` in config.yaml and taken back when not given
again; the Config fields of the FIXED ones, and the learner's settings (but those it declares
free on resume), may not change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evo.config.agent import recorded_agent
from evo.config.options import OPTIONS, TAKEN_FROM_RUN, Resume
from evo.config.resolved import ConfigError
from evo.learners import DEFAULT_ALGO, learner_spec

# Options a resumed run takes from the run's record unless given again.
RESUMED_FLAGS: tuple[str, ...] = tuple(option.name for option in TAKEN_FROM_RUN)
# Config fields that may not differ between a run and its resumption (and the learner's settings,
# but for those it declares free on resume).
FIXED_ON_RESUME: tuple[str, ...] = (
    *(option.field_name for option in OPTIONS if option.resume is Resume.FIXED),
    "agent",
)
# What a run recorded before a field existed had instead: a run started before --env-kwargs made
# its envs with none, one started before --algo trained PPO, one before --objective selected on the return,
# one before --eval-actions played its evaluation episodes by the policy's argmax or mean.
RECORDED_SINCE: dict[str, Any] = {
    "env_kwargs": {},
    "algo": DEFAULT_ALGO,
    "objective": "return",
    "eval_actions": "deterministic",
}


def load_saved_config(run_dir: Path) -> dict[str, Any]:
    """The config.yaml of an existing run (raises ConfigError if it cannot be read)."""
    path = Path(run_dir) / "config.yaml"
    try:
        saved = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            [f"--resume: {run_dir} is not an evo run directory (no config.yaml); check --run-dir / --exp-name"]
        ) from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError([f"--resume: cannot read {path}: {error}"]) from error
    if not isinstance(saved, dict) or not isinstance(saved.get("cli"), dict):
        raise ConfigError([f"--resume: {path} was not written by this version of evo (no 'cli' section)"])
    return saved


def resume_dir(run_dir: Path | None, exp_name: str | None) -> Path:
    """The run a ``--resume`` continues: ``--run-dir``, or ``runs/<--exp-name>``."""
    if run_dir is None and exp_name is None:
        raise ConfigError(["--resume needs the run: give --run-dir DIR (or --exp-name NAME for runs/NAME)"])
    return run_dir if run_dir is not None else Path("runs") / exp_name


def resume_differences(saved: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why a run may not be resumed with this configuration."""
    found = []
    for name in FIXED_ON_RESUME:
        if name == "agent":
            recorded = recorded_agent(saved["agent"])
            if recorded["algo"] == new["agent"]["algo"]:  # another learner: the algo's own difference says it
                found += _agent_differences(recorded, new["agent"])
        elif (before := saved.get(name, RECORDED_SINCE.get(name))) != new.get(name):
            found.append(
                f"--resume: {name} was {before!r} in this run, the command gives {new.get(name)!r}; "
                "a run resumes with the same value (drop the flag to keep it)"
            )
    return found


def _agent_differences(saved: dict[str, Any], new: dict[str, Any]) -> list[str]:
    spec = learner_spec(new["algo"])
    free = {setting.name for setting in spec.settings if setting.free_on_resume}
    keys = sorted(k for k in set(saved) | set(new) if k not in free and saved.get(k) != new.get(k))
    if not keys:
        return []
    detail = "; ".join(f"{k}: {saved.get(k)!r} -> {new.get(k)!r}" for k in keys)
    return [
        f"--resume: the {spec.title} settings differ from the run's ({detail}); the YAML, --conf-file or "
        "--hyperparams changed since the run started. Restore them, or start a new run."
    ]
