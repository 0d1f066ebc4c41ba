"""The study's fresh numbers of a finished run: ``evo-evaluate``'s, cached beside the run.

A population's "best" is the member with the highest selection score, and that score is the
maximum of a few noisy ones: reporting it overstates the member. The studies report instead what
``evo-evaluate`` (evo/tools/evaluate.py) measures: every member of the run's last checkpoint, and the
kept best when the run has one, played on ``episodes`` fresh deterministic episodes of one env on
seeds the run never used (for Procgen: a range of levels disjoint from the training and selection
levels), spread over up to 8 envs (``--envs 8``). Runs of the same seed get the same episodes, so
methods are compared on the same ones.

    python experiments/reevaluate.py RUN_DIR --episodes 20 [--start-level 10000 --num-levels 1000]

writes ``RUN_DIR/reevaluation.json`` (the study's own file beside the run's records; evo-evaluate
itself never writes into a run): {"how": {...}, "members": {member: [return, ...]}, "best_ever":
{"member": M, "generation": G, "returns": [...]} or null}, and for a run with an objective of its own
(``--objective info:<key>``) "objectives": {member: {key: [value at each episode's end, ...]}}. A cache
made another way is made again.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

RESULT = "reevaluation.json"
TOOL = "evo-evaluate"
ENVS = 8
"""Envs the episodes are spread over (``evo-evaluate --envs``): one env plays Procgen's episodes one
step at a time, eight times slower."""


@dataclass(frozen=True)
class Fresh:
    """A run's fresh returns: each member of its last checkpoint, and the kept best (if kept)."""

    members: dict[int, list[float]]
    best_ever: list[float] | None = None
    best_ever_member: int | None = None
    best_ever_generation: int | None = None
    objectives: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    """Each member's info keys of the run's objective at its episodes' ends (empty: the run selected on returns)."""


def reevaluate(run_dir: Path, episodes: int, levels: tuple[int, int] | None = None) -> tuple[Fresh, dict]:
    """``evo-evaluate``'s returns for the run (``levels``: Procgen's (first, count)), and how they
    were made."""
    from evo.tools.evaluate import evaluate_members, members_to_evaluate
    from evo.tools.saved import BEST_EVER, evaluation_seed, open_run

    run = open_run(run_dir)
    seed = evaluation_seed(run.config.seed)
    start, count = levels if levels is not None else (None, None)
    envs = min(episodes, ENVS)
    results = evaluate_members(run, members_to_evaluate(run, None, None), episodes, seed, envs, start, count)
    members, kept, objectives = {}, None, {}
    for result in results:
        if result.member.label.startswith(BEST_EVER):
            kept = result
        else:
            members[result.member.member] = result.returns
            if result.objectives:
                objectives[result.member.member] = result.objectives
    how = {"tool": TOOL, "episodes": episodes, "envs": envs, "seed": seed, "levels": list(levels) if levels else None}
    if kept is None:
        return Fresh(members, objectives=objectives), how
    return Fresh(members, kept.returns, kept.member.member, kept.member.generation, objectives), how


def reevaluated(run_dir: Path, episodes: int, levels: tuple[int, int] | None = None) -> Fresh:
    """The cached fresh returns of ``run_dir`` if they were made the same way, else new ones (saved)."""
    path = Path(run_dir) / RESULT
    if path.is_file():
        saved = json.loads(path.read_text())
        how = saved.get("how", {})
        if (
            how.get("tool") == TOOL
            and how.get("episodes") == episodes
            and how.get("envs") == min(episodes, ENVS)
            and how.get("levels") == (list(levels) if levels else None)
        ):
            kept = saved.get("best_ever")
            members = {int(m): r for m, r in saved["members"].items()}
            objectives = {int(m): o for m, o in (saved.get("objectives") or {}).items()}
            if kept is None:
                return Fresh(members, objectives=objectives)
            return Fresh(members, kept["returns"], kept["member"], kept["generation"], objectives)
    fresh, how = reevaluate(Path(run_dir), episodes, levels)
    kept = None
    if fresh.best_ever is not None:
        kept = {"member": fresh.best_ever_member, "generation": fresh.best_ever_generation, "returns": fresh.best_ever}
    record = {"how": how, "members": fresh.members, "best_ever": kept}
    if fresh.objectives:
        record["objectives"] = fresh.objectives
    path.write_text(json.dumps(record, indent=1) + "\n")
    return fresh


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="experiments/reevaluate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--start-level", type=int, default=None, help="Procgen: the first test level")
    parser.add_argument("--num-levels", type=int, default=None, help="Procgen: how many test levels")
    args = parser.parse_args(argv)
    levels = None if args.start_level is None else (args.start_level, args.num_levels or 0)
    fresh = reevaluated(args.run_dir, args.episodes, levels)
    for member, values in fresh.members.items():
        measured = fresh.objectives.get(member, {}).items()
        objectives = "".join(f", info:{key} {sum(found) / len(found):.3g}" for key, found in measured if found)
        print(f"member {member}: mean {sum(values) / len(values):.2f} over {len(values)} episodes{objectives}")
    if fresh.best_ever is not None:
        mean = sum(fresh.best_ever) / len(fresh.best_ever)
        print(f"kept best (member {fresh.best_ever_member}, generation {fresh.best_ever_generation}): mean {mean:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
