"""How the members of a finished HalfCheetah run move: their return on fresh deterministic
episodes and the share of steps spent on their back, from the last checkpoint.

    python experiments/posture.py runs/compare-continuous/runs/HalfCheetah-v5/pbt-seed0 [...]

A HalfCheetah that flips over can still collect forward reward by wriggling on its back; a
high score early in training is worth this look before it is believed. The torso's pitch is
``qpos[2]`` (radians, 0 upright); past 90 degrees either way the cheetah lies on its back.
Each member is loaded as evo resumes it (weights and normalisation statistics) and runs in a
plain ``HalfCheetah-v5`` with its observations scaled by the member's own statistics.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def on_its_back(pitch: float) -> bool:
    """Whether a torso pitch (``qpos[2]``, radians) has the cheetah on its back."""
    return abs(math.remainder(pitch, 2 * math.pi)) > math.pi / 2


def run_config(run_dir: Path):
    """The run's configuration as ``--resume`` reads it back from its config.yaml."""
    from evo.config import load_saved_config, parse_config

    saved = load_saved_config(run_dir)
    return parse_config(
        ["--run-dir", str(run_dir), "--resume"],
        strategy=saved["strategy"],
        transport=saved["transport"],
        world_size=saved["world_size"],
        check_run_dir=False,
    )


def episode(member, env, seed: int) -> tuple[float, float]:
    """(return, share of steps on its back) of one deterministic episode."""
    obs, _ = env.reset(seed=seed)
    total, back, steps, done = 0.0, 0, 0, False
    while not done:
        batch = obs[None]
        if member.stats is not None:
            batch = member.normalizer.normalize_obs(batch)
        action, _ = member.model.predict(batch, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action[0])
        total += float(reward)
        back += on_its_back(float(env.unwrapped.data.qpos[2]))
        steps += 1
        done = terminated or truncated
    return total, back / steps


def posture(run_dir: Path, episodes: int = 2, seed: int = 100) -> list[dict]:
    """One row per member of the run's last checkpoint."""
    import gymnasium

    from evo.rundir.checkpoint import load_payload
    from evo.runner.session import member_factory

    config = run_config(run_dir)
    last = sorted((run_dir / "checkpoints").glob("gen_*"))[-1]
    rows = []
    for path in sorted(last.glob("member_*.pt"), key=lambda p: int(p.stem.split("_")[1])):
        payload = load_payload(path)
        member = member_factory(config).make(payload["member"], dict(config.agent.defaults), tensorboard=False)
        member.restore(payload)
        env = gymnasium.make(config.env_id)
        results = [episode(member, env, seed + i) for i in range(episodes)]
        env.close()
        member.close()
        rows.append(
            {
                "member": payload["member"],
                "checkpoint": last.name,
                "returns": [round(r, 1) for r, _ in results],
                "on_its_back": [round(b, 2) for _, b in results],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--episodes", type=int, default=2)
    args = parser.parse_args(argv)
    print("| run | member | returns | share of steps on its back |")
    print("|---|---|---|---|")
    for run_dir in args.run_dirs:
        for row in posture(run_dir, args.episodes):
            returns = ", ".join(f"{r:.0f}" for r in row["returns"])
            back = ", ".join(f"{b:.2f}" for b in row["on_its_back"])
            print(f"| {run_dir.name} | {row['member']} | {returns} | {back} |", flush=True)


if __name__ == "__main__":
    main()
