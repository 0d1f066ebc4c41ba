"""Ray Tune's PopulationBasedTraining on the work evo's ``make run`` does, for ``bench/peers.py``.

Run ONLY with the Python of Ray's own virtualenv (``make bench-peers`` creates ``.venv-ray``);
Ray is never a dependency of evo, and nothing in evo or its tests imports this file:

    .venv-ray/bin/python bench/ray_pbt.py --spec SPEC.json --synch {true,false} --storage DIR [--seed 0]

The spec (written by ``bench/peers.py`` from evo's resolved config) gives the population, the
PPO settings, the search space and the PBT settings. Each trial is one SB3 PPO member
(``bench/sb3_member.py``) on one CPU with one torch thread: one ``tune.report`` per generation
(``steps`` env steps, then ``eval_episodes`` deterministic evaluation episodes as the score),
with a checkpoint (SB3's ``model.save``: the policy and its Adam state) every generation, as
PBT needs to exploit; ``tune.get_checkpoint()`` restores one into a freshly built model with
the trial's (new) hyperparameters. PBT: ``time_attr="training_iteration"``,
``perturbation_interval=1``, ``quantile_fraction``, ``resample_probability`` and
``perturbation_factors`` from the spec, ``synch`` as asked, ``reuse_actors=True`` (Tune's
recommendation for PBT), ``ray.init(num_cpus=cores)``.

The search space is evo's, on evo's scales: ``log`` -> ``tune.loguniform``, ``linear`` ->
``tune.uniform``, ``horizon`` (gamma, gae_lambda) -> ``tune.loguniform`` over the horizon
1 / (1 - x), explored as ``<name>_horizon`` (a perturbation then multiplies the horizon, as
evo's does). Ray does not clip a perturbed value; a ``custom_explore_fn`` clips it to the
bounds, as evo does. Prints one JSON line at the end: final scores, exploits, versions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ray  # noqa: E402
import sb3_member  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.schedulers import PopulationBasedTraining  # noqa: E402
from ray.tune.search.basic_variant import BasicVariantGenerator  # noqa: E402

MODEL_FILE = "model.zip"
STATE_FILE = "state.json"


def ray_bounds(spec: dict) -> dict[str, tuple[float, float, str]]:
    """Each explored value as Ray sees it: name, (low, high, 'log' or 'linear')."""
    bounds = {}
    for name, param in spec["search_space"].items():
        low, high, scale = param["low"], param["high"], param["scale"]
        if scale == "horizon":
            bounds[name + sb3_member.HORIZON_SUFFIX] = (1.0 / (1.0 - low), 1.0 / (1.0 - high), "log")
        elif scale in ("log", "linear"):
            bounds[name] = (low, high, scale)
        else:
            raise ValueError(f"search_space.{name}: scale {scale!r} has no Ray Tune counterpart here")
    return bounds


def search_space(spec: dict) -> dict:
    return {
        name: tune.loguniform(low, high) if scale == "log" else tune.uniform(low, high)
        for name, (low, high, scale) in ray_bounds(spec).items()
    }


def clip_to_bounds(spec: dict):
    """A ``custom_explore_fn``: every explored value back inside its bounds (Ray multiplies by
    the perturbation factor and leaves the result wherever it lands)."""
    bounds = ray_bounds(spec)

    def explore(config: dict) -> dict:
        for name, (low, high, _) in bounds.items():
            config[name] = min(max(float(config[name]), low), high)
        return config

    return explore


def trainable(config: dict) -> None:
    """One PBT member: trains and reports one generation per iteration until ``generations``."""
    import torch

    torch.set_num_threads(1)
    with open(config["spec"]) as handle:
        spec = json.load(handle)
    hparams = sb3_member.hparams_from_config(config, spec)
    model = sb3_member.build_model(spec, hparams, config["seed"])
    eval_env = sb3_member.make_eval_env(spec, config["seed"] + 1)
    generation = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            model.set_parameters(os.path.join(folder, MODEL_FILE), exact_match=True, device="cpu")
            with open(os.path.join(folder, STATE_FILE)) as handle:
                generation = json.load(handle)["generation"]
    while generation < spec["generations"]:
        sb3_member.train_generation(model, spec["steps"])
        score = sb3_member.evaluate(model, eval_env, spec["eval_episodes"])
        generation += 1
        with tempfile.TemporaryDirectory() as folder:
            model.save(os.path.join(folder, MODEL_FILE))
            with open(os.path.join(folder, STATE_FILE), "w") as handle:
                json.dump({"generation": generation}, handle)
            tune.report(
                {"score": score, "generation": generation, **hparams},
                checkpoint=tune.Checkpoint.from_directory(folder),
            )


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("ray", "stable-baselines3", "gymnasium", "torch", "numpy")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="the JSON spec bench/peers.py writes")
    parser.add_argument("--synch", choices=("true", "false"), required=True, help="synchronous PBT or not")
    parser.add_argument("--storage", required=True, help="a folder for Ray's results, checkpoints and session")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spec_path = str(Path(args.spec).resolve())
    with open(spec_path) as handle:
        spec = json.load(handle)
    storage = Path(args.storage).resolve()
    random.seed(args.seed)  # PBT's exploit and explore draw from `random`
    # the trial processes import sb3_member too: they inherit the environment through the raylet
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")])
    )

    scheduler = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=1,
        hyperparam_mutations=search_space(spec),
        quantile_fraction=spec["truncation_fraction"],
        resample_probability=spec["resample_probability"],
        perturbation_factors=tuple(spec["perturb_factors"]),
        custom_explore_fn=clip_to_bounds(spec),
        synch=args.synch == "true",
    )
    ray.init(num_cpus=spec["cores"], _temp_dir=str(storage / "ray"), log_to_driver=False)
    try:
        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            param_space={**search_space(spec), "spec": spec_path, "seed": tune.randint(0, 2**31 - 1)},
            tune_config=tune.TuneConfig(
                scheduler=scheduler,
                metric="score",
                mode="max",
                num_samples=spec["members"],
                reuse_actors=True,
                search_alg=BasicVariantGenerator(random_state=args.seed),
            ),
            run_config=tune.RunConfig(
                name="pbt",
                storage_path=str(storage / "results"),
                stop={"training_iteration": spec["generations"]},
                checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                failure_config=tune.FailureConfig(fail_fast=True),
                verbose=0,
            ),
        )
        results = tuner.fit()
        final_scores = [float(result.metrics["score"]) for result in results]
        log = storage / "results" / "pbt" / "pbt_global.txt"
        exploits = len(log.read_text().splitlines()) if log.exists() else 0
        errors = [str(result.error) for result in results if result.error]
    finally:
        ray.shutdown()
    print(json.dumps({"final_scores": final_scores, "exploits": exploits, "errors": errors, "versions": versions()}))
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
