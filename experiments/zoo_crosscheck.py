"""The continuous study's cross-check with a real client: rl-baselines3-zoo's own ``train`` with zoo's
own settings, at the study's budget, then played on the study's fresh episodes.

Run by the evo-less virtualenv's Python (``.venv-zoo``, scripts/zoo-venv.sh: SB3 and rl_zoo3 with
evo's torch, gymnasium and MuJoCo, no evo), as one job of ``compare.py --study continuous``:

    .venv-zoo/bin/python experiments/zoo_crosscheck.py --env Pendulum-v1 --steps 81920 --seed 0 \\
        --eval-seed S --episodes 20 --envs 8 --run-dir runs/compare-continuous/runs/Pendulum-v1/rl-zoo3-seed0

``python -m rl_zoo3.train --algo ALGO --env ENV -n STEPS --seed SEED`` (ALGO ``ppo`` unless ``--algo`` says;
``--hyperparams KEY:VALUE ...`` goes to zoo's train, over zoo's settings) trains into ``RUN_DIR/zoo``
(its own layout; no evaluation during training, one torch thread, as evo's single agents on one
core); then scripts/zoo_play.py plays the final model on EPISODES deterministic episodes spread over
ENVS envs seeded from EVAL_SEED (the study gives evo-evaluate's seed of the same seed and its number of
envs, so the episodes are the ones evo's agents are re-evaluated on) and ``RUN_DIR/fresh.json`` gets
the returns, with ``envs``. If a run directory already holds a trained model, only the playing is done
again (a study replays a cross-check played on other envs than its re-evaluation's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLAY = HERE.parent / "scripts" / "zoo_play.py"
RESULT = "fresh.json"


def train(algo: str, env_id: str, steps: int, seed: int, folder: Path, overrides: list[str]) -> Path:
    """rl_zoo3's train of ``algo`` with zoo's own hyperparameters for ``env_id`` (``overrides``: zoo's
    ``--hyperparams KEY:VALUE`` over them): the experiment's folder."""
    experiment = folder / algo / f"{env_id}_1"
    if not (experiment / f"{env_id}.zip").is_file():
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted training: zoo would number the next one _2
        command = [
            sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id, "-n", str(steps),
            "--seed", str(seed), "-f", str(folder), "--eval-freq", "-1", "--num-threads", "1", "--device", "cpu",
        ]  # fmt: skip
        subprocess.run(command + (["--hyperparams", *overrides] if overrides else []), check=True)
    return experiment


def play(algo: str, experiment: Path, env_id: str, eval_seed: int, episodes: int, envs: int = 1) -> list[float]:
    """The final model's returns on ``episodes`` deterministic episodes over ``envs`` envs (its
    VecNormalize frozen)."""
    stats = experiment / env_id / "vecnormalize.pkl"
    command = [
        sys.executable, str(PLAY), str(experiment / f"{env_id}.zip"), algo, env_id, str(eval_seed), str(episodes),
        str(stats) if stats.is_file() else "", "", str(envs),
    ]  # fmt: skip
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.splitlines()[-1])["returns"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="experiments/zoo_crosscheck.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--eval-seed", type=int, required=True)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--envs", type=int, default=1, help="envs the episodes are spread over (evo-evaluate's)")
    parser.add_argument("--algo", default="ppo", help="rl_zoo3's name of the learner (its --algo)")
    parser.add_argument(
        "--hyperparams", nargs="+", default=[], metavar="KEY:VALUE", help="zoo's --hyperparams over its own settings"
    )
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    experiment = train(args.algo, args.env, args.steps, args.seed, args.run_dir / "zoo", args.hyperparams)
    returns = play(args.algo, experiment, args.env, args.eval_seed, args.episodes, args.envs)
    record = {
        "algo": args.algo,
        "hyperparams": args.hyperparams,
        "env_id": args.env,
        "steps": args.steps,
        "seed": args.seed,
        "eval_seed": args.eval_seed,
        "episodes": args.episodes,
        "envs": args.envs,
        "returns": returns,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (args.run_dir / RESULT).write_text(json.dumps(record, indent=1) + "\n")
    mean = sum(returns) / len(returns)
    print(f"{args.env} rl_zoo3 {args.algo} seed {args.seed}: mean {mean:.1f} over {len(returns)} episodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
