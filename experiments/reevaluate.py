"""Re-evaluate every member of a finished run on fresh episodes (the study's honest number).

A population's "best" is the member with the highest selection score, and that score is the
maximum of a few noisy ones: reporting it overstates the member. Here each member of the run's
last checkpoint is played again on ``episodes`` deterministic episodes of an evaluation env the
run never used (for Procgen: a range of levels disjoint from the training and selection levels),
and the study reports those returns.

    python experiments/reevaluate.py RUN_DIR --episodes 20 --start-level 10000 --num-levels 1000

writes ``RUN_DIR/reevaluation.json``: {"levels": [start, count], "episodes": N, "returns": {member:
[return, ...]}}. Issue 24's ``evo-evaluate`` is the general tool; this is the study's part of it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

RESULT = "reevaluation.json"


def reevaluate(run_dir: Path, episodes: int, start_level: int, num_levels: int) -> dict[int, list[float]]:
    """Each member of the run's last checkpoint: its returns on ``episodes`` deterministic
    episodes of Procgen levels ``start_level`` .. ``start_level + num_levels - 1``."""
    from evo.config import parse_config
    from evo.main import find_checkpoint
    from evo.run import load_member, make_member

    from stable_baselines3.common.evaluation import evaluate_policy  # isort: skip  (after evo quiets gym)

    config = parse_config(["--run-dir", str(run_dir), "--resume", "--log-level", "WARNING"], world_size=1)
    config = dataclasses.replace(
        config, eval_episodes=episodes, eval_start_level=start_level, eval_num_levels=num_levels, tb_writer=False
    )
    checkpoint = find_checkpoint(config)
    returns = {}
    for member_id in range(config.num_agents):
        member = make_member(config, member_id, tensorboard=False)
        load_member(member, checkpoint, config.run_id, None, reseed=1_000_003 + member_id)
        rewards, _ = evaluate_policy(
            member.model,
            member.eval_env,
            n_eval_episodes=episodes,
            deterministic=True,
            return_episode_rewards=True,
            warn=False,
        )
        returns[member_id] = [float(r) for r in rewards]
        member.close()
    return returns


def reevaluated(run_dir: Path, episodes: int, start_level: int, num_levels: int) -> dict[int, list[float]]:
    """The cached re-evaluation of ``run_dir`` if it was made the same way, else a new one (saved)."""
    path = Path(run_dir) / RESULT
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved["levels"] == [start_level, num_levels] and saved["episodes"] == episodes:
            return {int(m): r for m, r in saved["returns"].items()}
    returns = reevaluate(Path(run_dir), episodes, start_level, num_levels)
    record = {"levels": [start_level, num_levels], "episodes": episodes, "returns": returns}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return returns


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="experiments/reevaluate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--start-level", type=int, default=10_000)
    parser.add_argument("--num-levels", type=int, default=1_000)
    args = parser.parse_args(argv)
    returns = reevaluated(args.run_dir, args.episodes, args.start_level, args.num_levels)
    for member, values in returns.items():
        print(f"member {member}: mean {sum(values) / len(values):.2f} over {len(values)} episodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
