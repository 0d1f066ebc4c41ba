"""A finished run's fresh numbers, ``evo-evaluate``'s, cached beside the run (evo/study/fresh.py):

    python experiments/reevaluate.py RUN_DIR --episodes 20 [--start-level 10000 --num-levels 1000]
        [--actions auto|sampled|deterministic] [--generation G]

writes ``RUN_DIR/reevaluation.json`` (``reevaluation-gen<G>.json`` with ``--generation``): every member
of the checkpoint (and, of the last, the kept best) on fresh episodes of envs seeded from the run's
seed, as evo-study reports them, and for a run with an objective of its own (``--objective
info:<key>``) each key at each episode's end; a cache made another way is made again.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from evo.study.fresh import reevaluated  # noqa: E402
from evo.tools.evaluate import ACTIONS, deterministic_actions  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="experiments/reevaluate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--start-level", type=int, default=None, help="Procgen: the first test level")
    parser.add_argument("--num-levels", type=int, default=None, help="Procgen: how many test levels")
    parser.add_argument("--actions", choices=ACTIONS, default="auto", help="as evo-evaluate's (default auto)")
    parser.add_argument("--generation", type=int, default=None, help="a kept checkpoint (default: the last)")
    args = parser.parse_args(argv)
    from evo.tools.saved import open_run

    levels = None if args.start_level is None else (args.start_level, args.num_levels or 0)
    deterministic = deterministic_actions(args.actions, open_run(args.run_dir).config.env_id)
    fresh = reevaluated(args.run_dir, args.episodes, levels, deterministic, args.generation)
    for member, values in fresh.members.items():
        measured = fresh.objectives.get(member, {}).items()
        objectives = "".join(f", info:{key} {statistics.mean(found):.3g}" for key, found in measured if found)
        print(f"member {member}: mean {statistics.mean(values):.2f} over {len(values)} episodes{objectives}")
    if fresh.best_ever is not None:
        mean = statistics.mean(fresh.best_ever)
        print(f"kept best (member {fresh.best_ever_member}, generation {fresh.best_ever_generation}): mean {mean:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
