"""Where one PPO agent's CPU time goes, by part of the step: the emulator, the env wrappers' preprocessing,
the frame stack, the rollout's forward passes, and the update's forward, backward and optimizer steps.

    python bench/step_profile.py [--case pong-nature] [--variant evo] [--iterations 2] [--json FILE]

The agent is bench/throughput.py's (the same ``build``), trained one warm-up iteration, then ITERATIONS
iterations under cProfile; each part is the cumulative time of the functions that do it (a part's own
functions' time, what they call included), as shares of the profiled total. cProfile's own overhead falls on
the Python-heavy parts (the wrappers, the rollout's bookkeeping) more than on torch's and the emulator's C
code, so read the shares as an upper bound for those and a lower bound for these.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import CASES, build  # noqa: E402  (the benchmark's own agents)

PARTS = {
    "env steps (SB3's DummyVecEnv: the emulator, the wrappers, the monitor)": [
        ("vec_env/dummy_vec_env.py", "step_wait")
    ],
    "  emulator (ale-py's AtariEnv.step)": [("ale_py/env.py", "step")],
    "frame stack (SB3's VecFrameStack)": [("vec_env/stacked_observations.py", "update")],
    "rollout forward passes": [("common/policies.py", "forward")],
    "update, all (PPO's train)": [("sb3/ppo.py", "train"), ("ppo/ppo.py", "train")],
    "  backward": [("torch/_tensor.py", "backward")],
    "  optimizer steps": [("torch/optim/adam.py", "step"), ("evo/sb3/optimizer.py", "grad_mode_step")],
}
"""Each part: the (file suffix, function) pairs whose cumulative time it is (the first that the profile has)."""


def cumulative(stats: pstats.Stats, where: list[tuple[str, str]]) -> float:
    for suffix, function in where:
        found = [
            entry[3]
            for (path, _, name), entry in stats.stats.items()  # type: ignore[attr-defined]
            if name == function and path.endswith(suffix)
        ]
        if found:
            return max(found)
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="pong-nature", choices=list(CASES))
    parser.add_argument("--variant", default="evo", choices=("stock", "evo", "evo-bf16"))
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--json", help="write the shares here")
    args = parser.parse_args()
    model, config = build(args.case, args.variant)
    rollout = config.agent.unit_steps
    model.learn(rollout, reset_num_timesteps=False)  # warm-up: first rollout and update
    profile = cProfile.Profile()
    profile.enable()
    model.learn(rollout * args.iterations, reset_num_timesteps=False)
    profile.disable()
    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]
    steps = rollout * args.iterations
    rows = {part: cumulative(stats, where) for part, where in PARTS.items()}
    names = list(PARTS)
    env, frames, forward, update = (rows[names[i]] for i in (0, 2, 3, 4))
    wrappers, rest, losses = (
        "  the wrappers' preprocessing and the rest of a step",
        "the rest (the rollout's buffer and bookkeeping, SB3's callbacks)",
        "  the update's forward passes, losses and the rest",
    )
    rows[wrappers] = env - rows[names[1]]
    rows[losses] = update - rows[names[5]] - rows[names[6]]
    rows[rest] = total - env - frames - forward - update
    print(f"{args.case}, {args.variant}: {steps} env steps profiled, {total:.1f} s ({steps / total:.0f} steps/s)")
    print("| part | seconds | share | ms per env step |\n|---|---|---|---|")
    order = [*names[:2], wrappers, *names[2:], losses, rest]
    for part in order:
        seconds = rows[part]
        print(f"| {part} | {seconds:.2f} | {seconds / total:.0%} | {1000 * seconds / steps:.2f} |")
    if args.json:
        record = {"case": args.case, "variant": args.variant, "steps": steps, "total_s": total, "parts_s": rows}
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
