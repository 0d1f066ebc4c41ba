"""The final pick's records in the run directory (``--final-eval``; evo.core.final, evo.runner.final).

- ``final/member_<i>.json``: one candidate's fresh episodes, written by the rank that played it as soon as
  it finished (so that a run stopped during the final pick plays again only the candidates without one):
  ``how`` (how the final pick plays: evo.core.final.FinalSettings.how), the candidate (``member``, ``generation``,
  ``env_steps``), each episode's ``returns``, the ``values`` of the run's score (the return, or
  ``--objective``'s first term, larger better; null where an episode did not report it) and the env steps
  played (``env_steps_played``).
- ``final.json``: the final pick, written by rank 0 once every candidate was played (docs/records.md).

A result that was made another way (other episodes, top members, seed, levels, actions or generation), or
that is not of the candidate it names (its env steps), is not used: the candidate is played again. Every
file is written through :func:`~evo.rundir.checkpoint.atomic_write`; a file that is a symbolic link, not a
regular file, or not a record evo writes is read as missing.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evo.rundir.checkpoint import atomic_write
from evo.rundir.jsontext import dumps

logger = logging.getLogger(__name__)

FINAL = "final.json"
FINAL_DIR = "final"
MAX_BYTES = 16 << 20
"""The largest record read back (a million episodes' values fit; anything larger is not evo's)."""


def final_path(run_dir: Path) -> Path:
    return Path(run_dir) / FINAL


def result_path(run_dir: Path, member: int) -> Path:
    return Path(run_dir) / FINAL_DIR / f"member_{member}.json"


def read_record(path: Path) -> dict | None:
    """The JSON mapping at ``path``, or None: missing, a symbolic link, not a regular file, too large, or
    not a JSON mapping."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_result(run_dir: Path, result: Mapping[str, Any]) -> None:
    """A candidate's fresh episodes (see the module docstring), by the rank that played them."""
    path = result_path(run_dir, int(result["member"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (dumps(dict(result), indent=1) + "\n").encode())


def _numbers(values: Any, allow_null: bool) -> bool:
    return isinstance(values, list) and all(
        (value is None and allow_null)
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
        for value in values
    )


def result_problem(found: Mapping[str, Any], how: Mapping[str, Any], member: int, generation: int, env_steps: int):
    """Why ``found`` (a ``final/member_<i>.json``) is not the result of this candidate played this way, or None."""
    if found.get("how") != dict(how):
        return "made another way (other episodes, members, seed, levels, actions or generation)"
    if (found.get("member"), found.get("generation"), found.get("env_steps")) != (member, generation, env_steps):
        return "of another member file"
    episodes = how["episodes"]
    if not (_numbers(found.get("returns"), False) and len(found["returns"]) == episodes):
        return "damaged (its returns)"
    if not (_numbers(found.get("values"), True) and len(found["values"]) <= episodes):
        return "damaged (its values)"
    played = found.get("env_steps_played")
    if not isinstance(played, int) or isinstance(played, bool) or played < 0:
        return "damaged (its env steps)"
    return None


def read_results(run_dir: Path, how: Mapping[str, Any], candidates: Iterable[Any]) -> dict[int, dict]:
    """The results already on disk of ``candidates`` (each with ``member``, ``generation``, ``env_steps``)
    played as ``how`` says, by member; a file that is there but is not such a result is said and left to
    be played again."""
    found = {}
    for candidate in candidates:
        path = result_path(run_dir, candidate.member)
        record = read_record(path)
        if record is None:
            if path.exists() or path.is_symlink():
                logger.warning("%s: not a record evo writes; member %d is played again", path, candidate.member)
            continue
        problem = result_problem(record, how, candidate.member, candidate.generation, candidate.env_steps)
        if problem is not None:
            logger.info("%s: %s; member %d is played again", path, problem, candidate.member)
            continue
        found[candidate.member] = record
    return found


def remove_other_results(run_dir: Path, members: Iterable[int]) -> None:
    """The results in ``final/`` of members that are not ``members`` (an earlier final pick's) removed."""
    folder = Path(run_dir) / FINAL_DIR
    if not folder.is_dir():
        return
    keep = {result_path(run_dir, member).name for member in members}
    for path in folder.glob("member_*.json"):
        if path.name not in keep:
            path.unlink(missing_ok=True)


def write_final(run_dir: Path, record: Mapping[str, Any]) -> None:
    """``final.json`` (rank 0, once every candidate was played)."""
    atomic_write(final_path(run_dir), (dumps(dict(record), indent=1) + "\n").encode())


def read_final(run_dir: Path) -> dict | None:
    """``final.json`` if it is a final pick's record (its ``how``, its members and its pick), else None."""
    found = read_record(final_path(run_dir))
    if found is None or not isinstance(found.get("how"), dict) or not isinstance(found.get("members"), list):
        return None
    pick = found.get("pick")
    if not isinstance(pick, dict) or not all(isinstance(pick.get(key), int) for key in ("member", "generation")):
        return None
    return found


def final_done(run_dir: Path, how: Mapping[str, Any]) -> bool:
    """Whether ``final.json`` holds the final pick made as ``how`` says (nothing is left to play; its pick may
    be none, where no member had a finite selection score)."""
    found = read_record(final_path(run_dir))
    return found is not None and found.get("how") == dict(how)
