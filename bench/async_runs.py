"""Asynchronous against synchronous PBT as a user runs them: ``pbt_rl_truct.py`` with and without
``--asynchronous``, every run a fresh ``mpiexec`` measured from outside (wall time), on the same work:

    python bench/async_runs.py [--repeats 2] [--members 8] [--intervals 4] [--steps 2048] [--json FILE]

- **alike**: ``--members`` PPO members on 2 ranks, CartPole-v1 with evo's CartPole settings
  (hyperparams/ppo.yml), ``--intervals`` intervals of ``--steps`` env steps, 10 evaluation
  episodes selecting; the env is bench/slow_env.py's with no delay;
- **rank 1 twice as slow**: the same, where rank 1 sleeps at each env step as long as it computed
  since the previous one (bench/slow_env.py), so that everything rank 1 does costs twice as much;
- **make run**: ``make run``'s work (4 members on 4 ranks, CartPole-v1, its YAML's budget).

Each pair alternates (sync, async, async, sync, ...). Reported: median wall times, the
asynchronous / synchronous ratio (per repeat too), the intervals each rank trained
(population.csv's rank column) and the synchronous runs' seconds at the barrier (generations.csv's
wait_s, summed over generations: the slowest rank's wait for the others); an asynchronous run has
no barrier. The work-sharing ideal with one rank twice as slow is 2/3 of the synchronous time.
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

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, processor, processor_line, write_json  # noqa: E402

SLOW_ENV = "bench.slow_env:SlowCartPole-v0"
MODES = ("sync", "async")


def environment() -> dict[str, str]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.setdefault("OMPI_MCA_btl", "^ofi")
    return env


def cartpole_settings(folder: Path) -> Path:
    """evo's CartPole-v1 block of hyperparams/ppo.yml, for the slow env (a YAML block by its id)."""
    blocks = yaml.safe_load((ROOT / "evo" / "hyperparams" / "ppo.yml").read_text())
    path = folder / "slow.yml"
    path.write_text(yaml.safe_dump({SLOW_ENV: blocks["CartPole-v1"]}))
    return path


def run(ranks: int, args: list[str], mode: str, folder: Path, seed: int) -> dict:
    """One run of pbt_rl_truct.py (``--asynchronous`` in mode async): wall time and its records."""
    run_dir = folder / f"run-{mode}-{seed}-{time.monotonic_ns()}"
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    command = [mpiexec, "-n", str(ranks), "--oversubscribe", sys.executable, "pbt_rl_truct.py", *args]
    command += ["--seed", str(seed), "--run-dir", str(run_dir), "--tb-writer", "False", "--progress-interval", "0"]
    command += ["--asynchronous"] if mode == "async" else []
    began = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=environment(), capture_output=True, text=True)
    wall = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {result.returncode}:\n{result.stderr[-3000:]}")
    with (run_dir / "population.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    by_rank = [sum(1 for row in rows if int(row["rank"]) == r) for r in range(ranks)]
    record = {"mode": mode, "seed": seed, "wall_s": wall, "intervals_by_rank": by_rank}
    timing = run_dir / "generations.csv"
    if timing.exists():
        with timing.open(newline="") as handle:
            generations = list(csv.DictReader(handle))
        record["barrier_wait_s"] = sum(float(g["wait_s"]) for g in generations)
    last = {}
    for row in rows:
        last[row["member"]] = float(row["score"])
    record["best_final_score"] = max(last.values())
    return record


def pair(name: str, ranks: int, args: list[str], repeats: int, folder: Path, seed: int) -> list[dict]:
    records = []
    for repeat in range(repeats):
        order = MODES if repeat % 2 == 0 else MODES[::-1]
        for mode in order:
            record = run(ranks, args, mode, folder, seed + repeat)
            records.append({"setting": name, "repeat": repeat, **record})
            print(f"  {name} {mode} repeat {repeat}: {record['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return records


def summary_rows(records: list[dict]) -> list[list]:
    rows = []
    for setting in dict.fromkeys(r["setting"] for r in records):
        mine = [r for r in records if r["setting"] == setting]
        walls = {mode: median([r["wall_s"] for r in mine if r["mode"] == mode]) for mode in MODES}
        per_repeat = []
        for repeat in sorted({r["repeat"] for r in mine}):
            by_mode = {r["mode"]: r["wall_s"] for r in mine if r["repeat"] == repeat}
            per_repeat.append(by_mode["async"] / by_mode["sync"])
        counts = {mode: next(r["intervals_by_rank"] for r in mine if r["mode"] == mode) for mode in MODES}
        wait = median([r["barrier_wait_s"] for r in mine if r["mode"] == "sync"])
        rows.append(
            [
                setting,
                walls["sync"],
                walls["async"],
                f"{walls['async'] / walls['sync']:.2f} (" + ", ".join(f"{v:.2f}" for v in per_repeat) + ")",
                f"{wait:.1f}",
                " / ".join(map(str, counts["sync"])),
                " / ".join(map(str, counts["async"])),
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--intervals", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2048, help="env steps per member and interval")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-make-run", action="store_true", help="leave make run's work out")
    parser.add_argument("--json", help="write the records here")
    args = parser.parse_args()
    cpu = processor()
    print(processor_line(cpu), flush=True)
    records = []
    with tempfile.TemporaryDirectory(prefix="evo-bench-async-") as tmp:
        folder = Path(tmp)
        work = [
            *("--env-id", SLOW_ENV, "--hyperparams", str(cartpole_settings(folder))),
            *("--num-agents", str(args.members), "--total-generations", str(args.intervals)),
            *("--agent-training-steps", str(args.steps), "--eval-episodes", "10", "--select-on", "test"),
        ]
        records += pair("alike", 2, work, args.repeats, folder, seed=0)
        slow = [*work, "--env-kwargs", "slow_rank:1"]
        records += pair("rank 1 twice as slow", 2, slow, args.repeats, folder, seed=0)
        if not args.skip_make_run:
            make_run = ["--env-id", "CartPole-v1", "--eval-episodes", "10", "--select-on", "test"]
            records += pair("make run (4 ranks)", 4, make_run, args.repeats, folder, seed=0)
    print(
        f"\n{args.members} PPO members on 2 ranks, {args.intervals} intervals x {args.steps} env steps; "
        "make run: 4 members on 4 ranks\n"
    )
    headers = ["work", "sync s", "async s", "async / sync (per repeat)", "sync barrier wait s"]
    headers += ["intervals by rank, sync", "async"]
    print(markdown_table(headers, summary_rows(records)))
    write_json(args.json, {"processor": cpu, "args": vars(args), "records": records})


if __name__ == "__main__":
    main()
