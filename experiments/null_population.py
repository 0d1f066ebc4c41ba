"""The null population (issue 55, item 7; docs/results.md, "The null population"): 8 members with identical
hyperparameters that stay identical (``--initial-hparams defaults --perturb-factors 1 --resample-probability 0``:
explore changes nothing), on two envs:

=================  ==========================================================================================
NullReward-v0      defined here: 10 steps an episode, each paying 1 or 0 by a fair coin whatever the action, so
                   that no member is better than another, by its settings or its weights: the true null
CartPole-v1        no member better by its settings; its seed and the copies it takes still make some
                   members better than others, which a test should detect
=================  ==========================================================================================

Two methods on the same seeds:

==========  =========================================================================
truncation  PBT's truncation as evo runs it by default: 2 of 8 recipients a generation
welch       the same with ``--exploit-test welch`` (alpha 0.05)
==========  =========================================================================

    python experiments/null_population.py --out runs/null --records docs/results/null-population

runs each (env, method, seed) under ``mpiexec -n 2`` (``pbt_rl_truct.py``, scored on the last 10 training
episodes), counts the copies per generation in lineage.jsonl, and writes ``results.json`` (per run: the
copies, the tests and their p-values) and a table on stdout. ``--records DIR`` copies each run's
population.csv and lineage.jsonl into DIR/<env>/<method>-seed<N>/. Finished runs are kept: run it again after an
interruption.
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

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from evo.launch import find_mpiexec  # noqa: E402


class NullReward(gym.Env):
    """10 steps an episode, each paying 1 or 0 by a fair coin of the env's own generator, whatever the action:
    every policy has the same expected return (5), so a member's score differs from another's by chance alone."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.steps += 1
        reward = float(self.np_random.integers(2))
        return np.zeros(1, np.float32), reward, False, self.steps >= 10, {}


gym.register("NullReward-v0", entry_point=NullReward)
ENVS = {"NullReward-v0": "experiments.null_population:NullReward-v0", "CartPole-v1": "CartPole-v1"}

METHODS = {"truncation": [], "welch": ["--exploit-test", "welch", "--exploit-alpha", "0.05"]}
SAME = ["--initial-hparams", "defaults", "--perturb-factors", "1", "--resample-probability", "0"]


def run(out: Path, env: str, method: str, seed: int, members: int, generations: int, steps: int) -> tuple[Path, float]:
    """One run (kept if it finished before); its directory and wall time."""
    run_dir = out / env / f"{method}-seed{seed}"
    timed = run_dir.parent / f"{run_dir.name}.wall_s"
    began = time.monotonic()
    if not (run_dir / "population.csv").is_file() or not timed.is_file():
        shutil.rmtree(run_dir, ignore_errors=True)
        command = [find_mpiexec(), "-n", "2", "--oversubscribe", sys.executable, str(ROOT / "pbt_rl_truct.py")]
        command += ["--env-id", ENVS[env], "--seed", str(seed), "--num-agents", str(members), *SAME]
        command += ["--total-generations", str(generations), "--agent-training-steps", str(steps), *METHODS[method]]
        command += ["--run-dir", str(run_dir), "--tb-writer", "False", "--progress-interval", "0"]
        subprocess.run(command, check=True, cwd=ROOT)
        timed.write_text(f"{time.monotonic() - began:.1f}\n")
    return run_dir, float(timed.read_text())


def summary(run_dir: Path, generations: int) -> dict:
    """Copies per generation (a recipient that took another member's weights), the tests made and their p."""
    lines = [json.loads(line) for line in (run_dir / "lineage.jsonl").read_text().splitlines()]
    lines = [line for line in lines if "event" not in line and "failures" not in line]
    copies = [sum(line["donor"] != line["recipient"] for line in lines if line["generation"] == g)
              for g in range(1, generations + 1)]  # fmt: skip
    tests = [line["welch"] for line in lines if "welch" in line]
    return {
        "copies_per_generation": copies,
        "mean_copies": statistics.mean(copies),
        "tests": len(tests),
        "tests_copied": sum(test["copied"] for test in tests),
        "p": [test["p"] for test in tests],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "null")
    parser.add_argument("--records", type=Path, default=None, help="copy the runs' CSV and JSON records here")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--steps", type=int, default=2048)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for env in ENVS:
        for seed in args.seeds:
            for method in METHODS:
                run_dir, wall = run(args.out, env, method, seed, args.members, args.generations, args.steps)
                results.append({"env": env, "method": method, "seed": seed, "wall_s": round(wall, 1),
                                **summary(run_dir, args.generations)})  # fmt: skip
                if args.records is None:
                    continue
                target = args.records / env / run_dir.name
                target.mkdir(parents=True, exist_ok=True)
                for name in ("population.csv", "lineage.jsonl"):
                    shutil.copyfile(run_dir / name, target / name)
    how = {"envs": ENVS, "members": args.members, "generations": args.generations, "steps": args.steps,
           "ranks": 2, "flags": SAME, "methods": METHODS}  # fmt: skip
    document = json.dumps({"how": how, "runs": results}, indent=1) + "\n"
    (args.out / "results.json").write_text(document)
    if args.records is not None:
        (args.records / "results.json").write_text(document)
    print(f"{'env':14} {'method':10} {'seed':>4} {'copies/gen':>10} {'tests':>5} {'copied':>6}")
    for r in results:
        print(
            f"{r['env']:14} {r['method']:10} {r['seed']:>4} {r['mean_copies']:>10.2f} {r['tests']:>5} "
            f"{r['tests_copied']:>6}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
