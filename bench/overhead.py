"""PBT overhead: an evo run vs the same agents trained independently, same machine, same run.

    python bench/overhead.py [--repeats 3] [--generations 6] [--steps 4096] [--json FILE]

For each layout (members on ranks), alternating, repeated:
  evo          mpiexec -n RANKS pbt_rl_truct.py --num-agents N ... (training-episode scores)
  independent  RANKS plain processes, each training its N/RANKS agents (built by the same
               code, same hyperparameters) for the same env steps, no MPI, no PBT
Both walls include start-up. Also reported: the slowest rank's seconds waiting for the
others at the generation barrier, summed over the run (from the run's generations.csv).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, write_json  # noqa: E402

LAYOUTS = [(4, 2), (2, 2)]  # (members, ranks)


def independent_worker(members: int, ranks: int, rank: int, generations: int, steps: int) -> None:
    import torch

    from evo.config import parse_config
    from evo.runner.session import member_factory
    from evo.sb3.cputune import tune_allocator

    torch.set_num_threads(1)
    tune_allocator()
    config = parse_config(["--num-agents", str(members)], world_size=ranks, check_run_dir=False)
    agents = [member_factory(config).make(m, tensorboard=False) for m in config.members_of(rank)]
    for _ in range(generations):
        for agent in agents:
            agent.train(steps)


def run_evo(members, ranks, generations, steps) -> tuple[float, float]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        command = [
            str(Path(sys.executable).parent / "mpiexec"),
            "-n",
            str(ranks),
            sys.executable,
            "pbt_rl_truct.py",
            "--num-agents",
            str(members),
            "--total-generations",
            str(generations),
            "--agent-training-steps",
            str(steps),
            "--tb-writer",
            "False",
            "--checkpoint-every",
            str(generations),
            "--run-dir",
            str(run_dir),
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, env=env, capture_output=True)
        wall = time.perf_counter() - start
        with (run_dir / "generations.csv").open() as handle:
            wait = sum(float(row["wait_s"]) for row in csv.DictReader(handle))
    return wall, wait


def run_independent(members, ranks, generations, steps) -> float:
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(members), str(ranks), str(rank), str(generations), str(steps)],
            cwd=ROOT,
        )
        for rank in range(ranks)
    ]
    for process in processes:
        if process.wait() != 0:
            raise RuntimeError("an independent worker failed")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--generations", type=int, default=6)
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--json")
    parser.add_argument("--worker", nargs=5, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        independent_worker(*args.worker)
        return
    records = []
    for repeat in range(args.repeats):
        for members, ranks in LAYOUTS:
            order = ("evo", "independent") if repeat % 2 == 0 else ("independent", "evo")
            for kind in order:
                if kind == "evo":
                    wall, wait = run_evo(members, ranks, args.generations, args.steps)
                else:
                    wall, wait = run_independent(members, ranks, args.generations, args.steps), 0.0
                records.append({"members": members, "ranks": ranks, "kind": kind, "wall_s": wall, "wait_s": wait})
                print(f"  {members} members on {ranks} ranks, {kind:11s} {wall:6.1f} s", file=sys.stderr)
    rows = []
    for members, ranks in LAYOUTS:
        evo = [r for r in records if (r["members"], r["ranks"], r["kind"]) == (members, ranks, "evo")]
        alone = [r for r in records if (r["members"], r["ranks"], r["kind"]) == (members, ranks, "independent")]
        evo_wall, alone_wall = median([r["wall_s"] for r in evo]), median([r["wall_s"] for r in alone])
        rows.append(
            [f"{members} on {ranks}", evo_wall, alone_wall, evo_wall / alone_wall, median([r["wait_s"] for r in evo])]
        )
    print(
        f"CartPole-v1, {args.generations} generations x {args.steps} env steps per member, medians of {args.repeats}\n"
    )
    print(
        markdown_table(
            ["members on ranks", "evo wall s", "independent wall s", "evo/independent", "evo barrier wait s"], rows
        )
    )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
