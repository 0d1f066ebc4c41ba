"""PPO throughput of one agent: evo's agent vs stock SB3, same network and hyperparameters.

    python bench/throughput.py [--repeats 3] [--iterations 2] [--json FILE]

Each measurement runs in a fresh process (allocator settings cannot be undone inside one),
alternating stock and evo, and reports env steps per CPU second and per wall second of
PPO (rollout + update) after one warm-up iteration, and the peak RSS. Torch uses one thread,
as evo's ranks do.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, write_json  # noqa: E402

# env, policy, n_envs, n_steps: small rollouts so that the benchmark runs in minutes
CASES = {
    "bigfish-impala": ("bigfish", "impala", 16, 128),
    "bigfish-nature": ("bigfish", "nature", 16, 128),  # 16 x 128 = 2048 = one paper-sized minibatch
    "cartpole-mlp": ("CartPole-v1", "mlp", 8, 256),
}


def build(case: str, variant: str):
    """A PPO model for ``case``: 'stock' = plain SB3 constructor, 'evo' = evo's agent."""
    import torch

    torch.set_num_threads(1)
    env_id, policy, n_envs, n_steps = CASES[case]
    from evo.config import parse_config

    hyperparams = Path(os.environ.get("TMPDIR", "/tmp")) / f"evo-bench-{os.getpid()}.yml"
    block = "procgen" if policy != "mlp" else env_id
    # one minibatch per epoch: for Procgen that is 2048 samples, the minibatch size of the
    # paper's config (64 envs x 256 steps / 8 minibatches), so activations are as large
    hyperparams.write_text(
        f"{block}:\n  policy: {policy}\n  n_envs: {n_envs}\n  n_steps: {n_steps}\n  n_minibatches: 1\n"
    )
    argv = ["--env-id", env_id, "--hyperparams", str(hyperparams)] + (["--no-cpu-tuning"] if variant == "stock" else [])
    config = parse_config(argv, check_run_dir=False)
    hyperparams.unlink()
    if variant == "evo":
        from evo.agent import build_model
        from evo.cputune import tune_allocator

        tune_allocator()
        return build_model(config, 0, config.agent.defaults, None), config
    from stable_baselines3 import PPO

    from evo.agent import policy_arguments
    from evo.envs import make_env

    agent, hp = config.agent, config.agent.defaults
    name, policy_kwargs = policy_arguments(agent, channels_last=False)
    model = PPO(
        name,
        make_env(env_id, n_envs, seed=0),
        n_steps=agent.n_steps,
        batch_size=agent.batch_size,
        n_epochs=agent.n_epochs,
        max_grad_norm=agent.max_grad_norm,
        policy_kwargs=policy_kwargs,
        seed=0,
        device="cpu",
        **hp,
    )
    return model, config


def worker(case: str, variant: str, iterations: int) -> dict:
    model, config = build(case, variant)
    rollout = config.agent.rollout_steps
    model.learn(rollout, reset_num_timesteps=False)  # warm-up: first rollout and update
    cpu, wall = time.process_time(), time.perf_counter()
    model.learn(rollout * iterations, reset_num_timesteps=False)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = rollout * iterations
    return {
        "case": case,
        "variant": variant,
        "steps_per_cpu_s": steps / cpu,
        "steps_per_wall_s": steps / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure(case: str, variant: str, iterations: int) -> dict:
    command = [sys.executable, __file__, "--worker", case, variant, "--iterations", str(iterations)]
    output = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=1, help="PPO iterations measured after the warm-up")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--json", help="write the raw records here")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.iterations)))
        return

    records = []
    for repeat in range(args.repeats):
        for case in args.cases:
            for variant in ("stock", "evo") if repeat % 2 == 0 else ("evo", "stock"):
                record = measure(case, variant, args.iterations)
                records.append(record)
                print(f"  {case:16s} {variant:5s} {record['steps_per_cpu_s']:8.1f} env-steps/CPU-s", file=sys.stderr)
    rows = []
    for case in args.cases:
        stats = {}
        for variant in ("stock", "evo"):
            mine = [r for r in records if r["case"] == case and r["variant"] == variant]
            stats[variant] = {
                k: median([r[k] for r in mine]) for k in ("steps_per_cpu_s", "steps_per_wall_s", "peak_rss_mb")
            }
        rows.append(
            [
                case,
                stats["stock"]["steps_per_cpu_s"],
                stats["evo"]["steps_per_cpu_s"],
                stats["evo"]["steps_per_cpu_s"] / stats["stock"]["steps_per_cpu_s"],
                stats["stock"]["steps_per_wall_s"],
                stats["evo"]["steps_per_wall_s"],
                stats["stock"]["peak_rss_mb"],
                stats["evo"]["peak_rss_mb"],
            ]
        )
    print(f"PPO throughput, one agent, 1 torch thread, medians of {args.repeats} alternating runs\n")
    print(
        markdown_table(
            [
                "case",
                "stock steps/CPU-s",
                "evo steps/CPU-s",
                "evo/stock",
                "stock steps/wall-s",
                "evo steps/wall-s",
                "stock peak RSS MB",
                "evo peak RSS MB",
            ],
            rows,
        )
    )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
