"""Turn a PBT run into a hyperparameter schedule for one agent.

    python -m evo.replay RUN_DIR [--member best|N] [--out schedule.yml]

follows the member's lineage back through every exploit and writes the hyperparameters its
weights were trained with, as a list of ``env_steps`` → hyperparameters. Train one agent
from scratch on that schedule, with no population, by

    python pbt_rl_truct.py --env-id ENV --num-agents 1 --schedule schedule.yml
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import yaml

from evo.history import RunDirError, best_member, load_run, schedule_of
from evo.space import EXPLORED

SCHEDULE_FORMAT = 1


def write_schedule(run_dir: str | Path, member: str | int = "best", out: str | Path | None = None) -> tuple[Path, dict]:
    """Write the schedule of ``member`` ('best' or an id) of the run in ``run_dir``; returns
    the file and what it holds."""
    history = load_run(run_dir)
    chosen = best_member(history) if str(member) == "best" else int(member)
    schedule = schedule_of(history, chosen)
    last = history.row(history.generations[-1], chosen)
    document = {
        "format": SCHEDULE_FORMAT,
        "env_id": history.config.get("env_id"),
        "source": {
            "run_dir": str(Path(run_dir).resolve()),
            "run_id": history.config.get("run_id"),
            "member": chosen,
            "final_score": None if math.isnan(last.score) else last.score,
            "generations": history.generations[-1],
            "env_steps": last.env_steps,
            "agent_training_steps": history.config.get("agent_training_steps"),
        },
        "schedule": [
            {
                "env_steps": entry["env_steps"],
                "hparams": {name: entry["hparams"][name] for name in EXPLORED},
                "from": {"member": entry["member"], "generation": entry["generation"]},
            }
            for entry in schedule
        ],
    }
    out = Path(out) if out is not None else Path(run_dir) / f"schedule_member{chosen}.yml"
    header = (
        f"# Hyperparameter schedule of member {chosen} of {run_dir}, following its lineage back through every\n"
        f"# exploit. Replay it with: python pbt_rl_truct.py --env-id {document['env_id']} --num-agents 1 "
        f"--schedule {out}\n"
    )
    out.write_text(header + yaml.safe_dump(document, sort_keys=False))
    return out, document


def load_schedule(path: str | Path) -> tuple[list[tuple[int, dict[str, float]]], str | None]:
    """Read a schedule file: ``[(env_steps, hparams), ...]`` sorted by env_steps, and its env id.

    Raises ValueError naming the file and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--schedule {path}: no such file (write one with python -m evo.replay RUN_DIR)")
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"--schedule {path} is not valid YAML: {error}") from None
    entries = document.get("schedule") if isinstance(document, dict) else document
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"--schedule {path}: expected a 'schedule:' list of {{env_steps, hparams}} entries")
    schedule = []
    for index, entry in enumerate(entries):
        where = f"--schedule {path}, entry {index}"
        if not isinstance(entry, dict) or "env_steps" not in entry or not isinstance(entry.get("hparams"), dict):
            raise ValueError(f"{where}: each entry needs env_steps and an hparams mapping")
        missing = [name for name in EXPLORED if name not in entry["hparams"]]
        unknown = sorted(set(entry["hparams"]) - set(EXPLORED))
        if missing or unknown:
            raise ValueError(
                f"{where}: hparams must give exactly {', '.join(EXPLORED)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(unknown)}" if unknown else "")
            )
        try:
            steps = int(entry["env_steps"])
            hparams = {name: float(entry["hparams"][name]) for name in EXPLORED}
        except (TypeError, ValueError):
            raise ValueError(f"{where}: env_steps and the hyperparameters must be numbers") from None
        if steps < 0 or not all(math.isfinite(v) for v in hparams.values()):
            raise ValueError(f"{where}: env_steps must be >= 0 and every value finite")
        schedule.append((steps, hparams))
    schedule.sort(key=lambda item: item[0])
    if schedule[0][0] != 0:
        raise ValueError(f"--schedule {path}: the first entry must start at env_steps 0, got {schedule[0][0]}")
    env_id = document.get("env_id") if isinstance(document, dict) else None
    return schedule, env_id


def hparams_at(schedule: list[tuple[int, dict[str, float]]], env_steps: int) -> dict[str, float]:
    """The schedule's hyperparameters in effect at ``env_steps`` (the last entry starting at or before it)."""
    current = schedule[0][1]
    for start, hparams in schedule:
        if start > env_steps:
            break
        current = hparams
    return current


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evo.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory (its --run-dir)")
    parser.add_argument("--member", default="best", help="'best' (highest final score) or a member id")
    parser.add_argument("--out", default=None, help="where to write the YAML (default RUN_DIR/schedule_member<N>.yml)")
    args = parser.parse_args(argv)
    if args.member != "best" and not args.member.isdigit():
        parser.error(f"--member {args.member!r}: give 'best' or a member id such as 0")
    try:
        out, document = write_schedule(args.run_dir, args.member, args.out)
    except RunDirError as error:
        print(f"python -m evo.replay: error: {error}", file=sys.stderr)
        return 2
    print(
        f"schedule of member {document['source']['member']} (final score {document['source']['final_score']}): "
        f"{len(document['schedule'])} segment(s) -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
