"""Run by the evo-less virtualenv's Python (.venv-zoo): load an exported agent with stock SB3 and play
it, printing its per-episode returns as JSON. Proves the export needs no evo: this file imports
nothing of evo, and that virtualenv has no evo to import.

    .venv-zoo/bin/python scripts/zoo_play.py MODEL.zip ALGO ENV_ID SEED EPISODES \\
        [VECNORMALIZE.pkl] [ENV_KWARGS_JSON] [N_ENVS]

N_ENVS envs (default 1) seeded SEED, SEED + 1, ..., the episodes spread over them by SB3's
``evaluate_policy`` (deterministic), the observation statistics frozen and rewards raw: as
``evo-evaluate --seed SEED --envs N_ENVS`` plays them, so both play the same episodes.
"""

import json
import sys

from rl_zoo3.utils import ALGOS
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize


def main(argv: list[str]) -> None:
    model_path, algo, env_id, seed, episodes = argv[:5]
    stats_path = argv[5] if len(argv) > 5 and argv[5] else None
    env_kwargs = json.loads(argv[6]) if len(argv) > 6 and argv[6] else {}
    n_envs = int(argv[7]) if len(argv) > 7 else 1
    if "evo" in sys.modules or any(name.startswith("evo.") for name in sys.modules):
        raise SystemExit("evo was imported")
    model = ALGOS[algo].load(model_path, device="cpu")  # zoo's classes by --algo name (SB3's and sb3-contrib's)
    env = make_vec_env(env_id, n_envs=n_envs, seed=int(seed), vec_env_cls=DummyVecEnv, env_kwargs=env_kwargs)
    if stats_path:
        env = VecNormalize.load(stats_path, env)
        env.training, env.norm_reward = False, False
    returns, _ = evaluate_policy(
        model, env, n_eval_episodes=int(episodes), deterministic=True, return_episode_rewards=True, warn=False
    )
    classes = {
        "policy": f"{type(model.policy).__module__}.{type(model.policy).__qualname__}",
        "optimizers": sorted({f"{type(o).__module__}.{type(o).__qualname__}" for o in optimizers(model)}),
    }
    print(json.dumps({"returns": [float(r) for r in returns], "classes": classes}))


def optimizers(model):
    policy = model.policy
    found = [getattr(policy, "optimizer", None)]
    for part in ("actor", "critic"):
        found.append(getattr(getattr(policy, part, None), "optimizer", None))
    found.append(getattr(model, "ent_coef_optimizer", None))
    return [o for o in found if o is not None]


if __name__ == "__main__":
    main(sys.argv[1:])
