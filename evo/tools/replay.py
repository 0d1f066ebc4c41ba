"""Turn a PBT run into a hyperparameter schedule for one agent.

    python -m evo.tools.replay RUN_DIR [--member best|N] [--out schedule.yml]

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

from evo.core.schedule import SCHEDULE_FORMAT
from evo.rundir.history import RunDirError, best_member, load_run, schedule_of


def write_schedule(run_dir: str | Path, member: str | int = "best", out: str | Path | None = None) -> tuple[Path, dict]:
    """Write the schedule of ``member`` ('best' or an id) of the run in ``run_dir``; returns
    the file and what it holds."""
    history = load_run(run_dir)
    chosen = best_member(history) if str(member) == "best" else int(member)
    schedule = schedule_of(history, chosen)
    last = history.row(history.last_generation(chosen), chosen)
    document = {
        "format": SCHEDULE_FORMAT,
        "env_id": history.config.get("env_id"),
        "algo": history.algo,
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
                "hparams": {name: entry["hparams"][name] for name in history.names},
                "from": {"member": entry["member"], "generation": entry["generation"]},
            }
            for entry in schedule
        ],
    }
    out = Path(out) if out is not None else Path(run_dir) / f"schedule_member{chosen}.yml"
    header = (
        f"# Hyperparameter schedule of member {chosen} of {run_dir}, following its lineage back through every\n"
        f"# exploit. Replay it with: python pbt_rl_truct.py --algo {document['algo']} --env-id {document['env_id']} "
        f"--num-agents 1 --schedule {out}\n"
    )
    out.write_text(header + yaml.safe_dump(document, sort_keys=False))
    return out, document


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evo.tools.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory (its --run-dir)")
    parser.add_argument("--member", default="best", help="'best' (highest final score) or a member id")
    parser.add_argument("--out", default=None, help="where to write the YAML (default RUN_DIR/schedule_member<N>.yml)")
    args = parser.parse_args(argv)
    if args.member != "best" and not args.member.isdigit():
        parser.error(f"--member {args.member!r}: give 'best' or a member id such as 0")
    try:
        out, document = write_schedule(args.run_dir, args.member, args.out)
    except RunDirError as error:
        print(f"python -m evo.tools.replay: error: {error}", file=sys.stderr)
        return 2
    print(
        f"schedule of member {document['source']['member']} (final score {document['source']['final_score']}): "
        f"{len(document['schedule'])} segment(s) -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
