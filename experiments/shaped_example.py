"""The worked example of ``--objective`` and env parameters (issue 38; docs/results.md, "A shaped reward
that can be gamed"): ``evo.examples.shaped:ShapedCorridor-v0``, whose shaped bonus weight is an env
parameter of the search space, selected three ways on the same seeds and the same initial draws:

=========  ====================================================================================
return     ``--objective return``: the shaped return the members train on (PBT as it was)
success    ``--objective info:success``: the true objective, the share of episodes that reach the goal
front      ``--objective info:success,info:bonus``: both, ranked by Pareto fronts (MO-PBT)
=========  ====================================================================================

    python experiments/shaped_example.py --out runs/shaped --records docs/results/shaped

runs each (method, seed) under ``mpiexec -n 2`` (``pbt_rl_truct.py``, truncation, perturb), then
``evo-evaluate --objective info:success,info:bonus`` on 20 fresh episodes, and writes ``results.json``
(per run: the mean bonus weight of the population at the first and the last generation, its members'
fresh success rate, shaped return and bonus) and a table on stdout. ``--records DIR`` copies each
run's population.csv, lineage.jsonl, front.json and the fresh evaluation (JSON and CSV only) into
DIR/<method>-seed<N>/. Finished runs are kept: run it again after an interruption.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from evo.launch import find_mpiexec  # noqa: E402

ENV = "evo.examples.shaped:ShapedCorridor-v0"
METHODS = {"return": "return", "success": "info:success", "front": "info:success,info:bonus"}
EPISODES = 20


def run(out: Path, method: str, seed: int, members: int, generations: int, steps: int) -> tuple[Path, float]:
    """One run (kept if it finished before) and its fresh evaluation; its directory and wall time (the run's
    and the evaluation's, as measured when it ran)."""
    run_dir = out / f"{method}-seed{seed}"
    fresh = run_dir.parent / f"{run_dir.name}.fresh.json"
    timed = run_dir.parent / f"{run_dir.name}.wall_s"
    began = time.monotonic()
    if not (run_dir / "population.csv").is_file() or not fresh.is_file() or not timed.is_file():
        shutil.rmtree(run_dir, ignore_errors=True)
        command = [find_mpiexec(), "-n", "2", "--oversubscribe", sys.executable, str(ROOT / "pbt_rl_truct.py")]
        command += ["--env-id", ENV, "--objective", METHODS[method], "--seed", str(seed), "--num-agents", str(members)]
        command += ["--total-generations", str(generations), "--agent-training-steps", str(steps)]
        command += ["--run-dir", str(run_dir), "--tb-writer", "False", "--progress-interval", "0"]
        subprocess.run(command, check=True, cwd=ROOT)
        evaluate = [sys.executable, "-m", "evo.tools.evaluate", str(run_dir), "--episodes", str(EPISODES)]
        evaluate += ["--objective", "info:success,info:bonus", "--json", str(fresh)]
        subprocess.run(evaluate, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        timed.write_text(f"{time.monotonic() - began:.1f}\n")
    return run_dir, float(timed.read_text())


def summary(run_dir: Path) -> dict:
    """The population's mean bonus weight at its first and last generation, and its members' fresh numbers."""
    import csv

    with (run_dir / "population.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    last = max(int(row["generation"]) for row in rows)

    def weight(generation: int) -> float:
        return statistics.mean(float(r["env.bonus_weight"]) for r in rows if int(r["generation"]) == generation)

    fresh = json.loads((run_dir.parent / f"{run_dir.name}.fresh.json").read_text())["members"]
    members = [m for m in fresh if not m["label"].startswith("best-ever")]
    return {
        "weight_first": weight(1),
        "weight_last": weight(last),
        "success": statistics.mean(statistics.mean(m["objectives"]["info:success"]) for m in members),
        "shaped_return": statistics.mean(m["mean"] for m in members),
        "bonus": statistics.mean(statistics.mean(m["objectives"]["info:bonus"]) for m in members),
        "members_reaching_the_goal": sum(statistics.mean(m["objectives"]["info:success"]) >= 0.5 for m in members),
        "members": len(members),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "shaped")
    parser.add_argument("--records", type=Path, default=None, help="copy the runs' CSV and JSON records here")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--generations", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1024)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in args.seeds:
        for method in METHODS:
            run_dir, wall = run(args.out, method, seed, args.members, args.generations, args.steps)
            results.append({"method": method, "objective": METHODS[method], "seed": seed, "wall_s": round(wall, 1),
                            **summary(run_dir)})  # fmt: skip
            if args.records is not None:
                target = args.records / run_dir.name
                target.mkdir(parents=True, exist_ok=True)
                for name in ("population.csv", "lineage.jsonl", "front.json"):
                    if (run_dir / name).is_file():
                        shutil.copyfile(run_dir / name, target / name)
                shutil.copyfile(run_dir.parent / f"{run_dir.name}.fresh.json", target / "fresh.json")
    how = {"env_id": ENV, "members": args.members, "generations": args.generations, "steps": args.steps,
           "ranks": 2, "episodes": EPISODES}  # fmt: skip
    document = json.dumps({"how": how, "runs": results}, indent=1) + "\n"
    (args.out / "results.json").write_text(document)
    if args.records is not None:
        (args.records / "results.json").write_text(document)
    print(f"{'method':8} {'seed':>4} {'weight 1st':>10} {'weight last':>11} {'success':>8} {'shaped':>7} {'bonus':>6}")
    for r in results:
        print(f"{r['method']:8} {r['seed']:>4} {r['weight_first']:>10.4f} {r['weight_last']:>11.4f} "
              f"{r['success']:>8.2f} {r['shaped_return']:>7.2f} {r['bonus']:>6.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
