"""One stock Stable-Baselines3 PPO agent for ``bench/peers.py``, built from the PPO settings evo
resolves for the run (a JSON spec that ``bench/peers.py`` writes), with nothing of evo in it.

The Ray Tune trainable (``bench/ray_pbt.py``) trains its members with these functions, and run
as a script this file is the benchmark's stock single agent:

    python bench/sb3_member.py --spec SPEC.json [--seed 0]

It trains one agent with the spec's default hyperparameters for ``generations`` x ``steps``
env steps, scoring it after every generation with ``eval_episodes`` deterministic episodes,
and prints the scores as one JSON line. It imports only SB3, gymnasium, numpy and torch, so
that it runs in Ray's virtualenv as well as in evo's, and those only when a function needs
them: Ray's driver process imports this file for the search space's names and should not
load torch (about 230 MB) for that.
"""

from __future__ import annotations

import argparse
import json
import math

HORIZON_SUFFIX = "_horizon"


def hparams_from_config(config: dict, spec: dict) -> dict[str, float]:
    """The six PPO hyperparameters from a config that may hold a ``horizon``-scaled value as its
    horizon ``<name>_horizon`` = 1 / (1 - value) (how Ray Tune explores gamma and gae_lambda
    on evo's scale: log-uniform in the horizon, perturbations multiply the horizon)."""
    hparams = {}
    for name in spec["defaults"]:
        if name + HORIZON_SUFFIX in config:
            hparams[name] = 1.0 - 1.0 / float(config[name + HORIZON_SUFFIX])
        else:
            hparams[name] = float(config.get(name, spec["defaults"][name]))
    return hparams


def build_model(spec: dict, hparams: dict[str, float], seed: int):
    """SB3's PPO with the spec's settings and ``hparams``, on ``n_envs`` copies of the env."""
    from stable_baselines3 import PPO
    from torch import nn

    env = make_vec_env(spec["env_id"], spec["n_envs"], seed)
    activations = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}
    policy_kwargs = {"net_arch": list(spec["net_arch"]), "activation_fn": activations[spec["activation_fn"]]}
    return PPO(
        "MlpPolicy",
        env,
        n_steps=spec["n_steps"],
        batch_size=spec["batch_size"],
        n_epochs=spec["n_epochs"],
        max_grad_norm=spec["max_grad_norm"],
        normalize_advantage=spec["normalize_advantage"],
        policy_kwargs=policy_kwargs,
        seed=seed,
        device="cpu",
        verbose=0,
        **hparams,
    )


def make_vec_env(env_id: str, n_envs: int, seed: int):
    """``n_envs`` copies of the env in one process (SB3's DummyVecEnv, with episode monitors)."""
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    return sb3_make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv)


def make_eval_env(spec: dict, seed: int):
    """The evaluation envs, as evo builds them: min(eval_episodes, 8) copies."""
    return make_vec_env(spec["env_id"], min(spec["eval_episodes"], 8), seed)


def evaluate(model, eval_env, episodes: int) -> float:
    """Mean return of ``episodes`` deterministic episodes."""
    from stable_baselines3.common.evaluation import evaluate_policy

    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True, warn=False)
    return float(mean)


def train_generation(model, steps: int) -> None:
    """``steps`` more env steps (rounded up to whole rollouts by SB3, as evo does)."""
    model.learn(total_timesteps=steps, reset_num_timesteps=False, progress_bar=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="the JSON spec bench/peers.py writes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.spec) as handle:
        spec = json.load(handle)
    import torch

    torch.set_num_threads(1)
    model = build_model(spec, dict(spec["defaults"]), args.seed)
    eval_env = make_eval_env(spec, args.seed + 1)
    scores = []
    for _ in range(spec["generations"]):
        train_generation(model, spec["steps"])
        scores.append(evaluate(model, eval_env, spec["eval_episodes"]))
    best = max(scores) if scores else math.nan
    print(json.dumps({"scores": scores, "final_scores": scores[-1:], "best_score": best}))


if __name__ == "__main__":
    main()
