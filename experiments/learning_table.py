"""The learning table of docs/results.md ("Every learner against rl_zoo3", issue 57 item 1): each learner
under evo against rl_zoo3's own train, from the learning study's committed records (docs/results/learning/,
experiments/studies/learning.yml), beside zoo's published benchmark.

    python experiments/learning_table.py                 # print the table docs/results.md holds
    python experiments/learning_table.py --replay RUNS   # play the study's evo agents through stock SB3: played.json
    python experiments/learning_table.py --settings RUNS # each side's settings as SB3 saved them: settings.json

Every agent of the table is played by one evaluation script, scripts/zoo_play.py (SB3's ``evaluate_policy``,
deterministic, in the evo-less virtualenv), on the same 20 fresh episodes of its seed: rl_zoo3's agents by the
study's cross-check, evo's by ``--replay``, which exports each one (``evo-export``, the run's member 0 at its
last generation, the agent the study re-evaluated) and plays the zip on the envs and seed of its
re-evaluation. ``played.json`` holds those returns; a test checks that they are evo-evaluate's, episode for
episode, so the study's own report and this table read the same numbers.

A row's numbers are over seeds: the mean and standard deviation of the per-seed means of 20 episodes, and the
paired difference evo - rl_zoo3 by seed with its 95 % t-interval. Each row is judged as the study's report
judges it, on the Bonferroni interval for the study's 13 judgements (99.6 %): "within noise" where it holds 0 (and
where the 95 % interval alone would call a side ahead, that is said), otherwise which side is ahead. The PBT rows
compare the population's selected member (4 members on 2 ranks, each at zoo's budget) with the single evo agent of
the same seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from evo.study.report import corrected  # noqa: E402
from evo.study.spec import load_study  # noqa: E402
from evo.study.stats import Paired, paired  # noqa: E402

RECORDS = ROOT / "docs" / "results" / "learning"
PLAYED = RECORDS / "played.json"
SETTINGS = RECORDS / "settings.json"
BENCHMARK = RECORDS / "zoo-benchmark.json"
PLAY = ROOT / "scripts" / "zoo_play.py"
STUDY = ROOT / "experiments" / "studies" / "learning.yml"

LEARNERS = (
    ("PPO", "ppo", "CartPole-v1"),
    ("A2C", "a2c", "CartPole-v1"),
    ("DQN", "dqn", "CartPole-v1"),
    ("QR-DQN", "qrdqn", "CartPole-v1"),
    ("TRPO (docs/examples)", "trpo", "CartPole-v1"),
    ("SAC", "sac", "Pendulum-v1"),
    ("TD3", "td3", "Pendulum-v1"),
    ("DDPG", "ddpg", "Pendulum-v1"),
    ("TQC", "tqc", "Pendulum-v1"),
    ("CrossQ", "crossq", "Pendulum-v1"),
)
"""Name, the study's evo method (its rl_zoo3 method is ``<method>-zoo``; zoo's algo name is the method's), env."""
PBT = (("A2C", "a2c", "CartPole-v1"), ("DQN", "dqn", "CartPole-v1"), ("TQC", "tqc", "Pendulum-v1"))
"""One learner of each family under PBT: the study's ``<method>-pbt`` against its single ``<method>``."""


def results(records: Path = RECORDS) -> dict[tuple[str, int], dict]:
    """The study's results.json by (method, seed)."""
    return {(r["method"], r["seed"]): r for r in json.loads((records / "results.json").read_text())}


def by_seed(found: dict[tuple[str, int], dict], method: str) -> dict[int, float]:
    """The fresh mean of ``method``'s selected agent by seed."""
    return {seed: r["fresh_selected"] for (m, seed), r in found.items() if m == method}


def verdict(pair: Paired, ahead: str, behind: str, family: int) -> str:
    """What the paired differences say, judged as the study's report judges a secondary comparison, on the
    Bonferroni interval for the ``family`` judgements the study makes (evo.study.report.corrected): equal on every
    seed, within noise (the corrected interval holds 0; where the 95 % one does not, that is said too), which side
    is ahead beyond it, or nothing (fewer than 2 seeds: no interval)."""
    if pair.n == 0:
        return "not run"
    if all(d == 0 for d in pair.differences):
        return "equal on every seed"
    if pair.n < 2:
        return "1 seed: not judged"
    _, low, high = corrected(pair, family)
    if low > 0:
        return f"{ahead} ahead"
    if high < 0:
        return f"**{behind} ahead**"
    if pair.low > 0 or pair.high < 0:
        return f"within noise ({ahead if pair.low > 0 else behind} ahead at 95 %, not once corrected for {family})"
    return "within noise"


def family() -> int:
    """How many judgements the learning study's report makes (its secondary comparisons are corrected for them)."""
    return len(load_study(STUDY).judged)


def spread(values: list[float]) -> str:
    """mean ± standard deviation over seeds."""
    if not values:
        return "—"
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.1f} ± {deviation:.1f}"


def difference(pair: Paired) -> str:
    """The mean paired difference and its 95 % t-interval (none with fewer than 2 seeds)."""
    if pair.n == 0:
        return "—"
    mean, low, high = (0.0 if abs(v) < 0.05 else v for v in (pair.mean, pair.low, pair.high))
    return f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]" if pair.n > 1 else f"{mean:+.1f}"


def env_steps(records: Path, method: str, env_id: str) -> int:
    """The env steps one agent of ``method`` trained (rl_zoo3's ``steps``; the same for evo's)."""
    for path in sorted((records / env_id).glob(f"{method}-zoo-seed*/fresh.json")):
        return json.loads(path.read_text())["steps"]
    return 0


def table(records: Path = RECORDS) -> str:
    """The learning table and the PBT rows, as docs/results.md holds them."""
    found = results(records)
    judgements = family()
    benchmark = json.loads((records / BENCHMARK.name).read_text())["rows"]
    lines = [
        "| learner | env | env steps | evo | rl_zoo3 | evo − rl_zoo3 [95 %] | seeds | | zoo's benchmark |",
        "|---|---|--:|--:|--:|--:|--:|---|--:|",
    ]
    for name, method, env_id in LEARNERS:
        ours, theirs = by_seed(found, method), by_seed(found, f"{method}-zoo")
        pair = paired(ours, theirs)
        published = benchmark.get(f"{method} {env_id}")
        zoo = f"{published['mean']:.1f} ± {published['std']:.1f} ({published['n_timesteps']})" if published else "—"
        steps = env_steps(records, method, env_id)
        lines.append(
            f"| {name} | {env_id} | {f'{steps:,}' if steps else '—'} | {spread(list(ours.values()))} | "
            f"{spread(list(theirs.values()))} | {difference(pair)} | {pair.n} | "
            f"{verdict(pair, 'evo', 'rl_zoo3', judgements)} | {zoo} |"
        )
    lines += [
        "",
        "| PBT, 4 members on 2 ranks | env | evo PBT's selected member | evo, one agent | PBT − one [95 %] | seeds | |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for name, method, env_id in PBT:
        population, single = by_seed(found, f"{method}-pbt"), by_seed(found, method)
        single = {seed: value for seed, value in single.items() if seed in population}
        pair = paired(population, single)
        lines.append(
            f"| {name} | {env_id} | {spread(list(population.values()))} | {spread(list(single.values()))} | "
            f"{difference(pair)} | {pair.n} | {verdict(pair, 'PBT', 'one agent', judgements)} |"
        )
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def exported(run: Path, env_id: str):
    """``run``'s member 0 at its last generation exported by ``evo-export`` into a temporary folder: its zip."""
    from evo.tools import export

    with tempfile.TemporaryDirectory() as folder:
        if export.main([str(run), "--out", folder, "--member", "0"]) != 0:
            raise SystemExit(f"{run}: evo-export failed")
        (model,) = Path(folder).glob(f"*/{env_id}_1/{env_id}.zip")
        yield model


def replay(
    runs: Path, zoo_python: Path, played: dict[str, dict[str, list[float]]]
) -> dict[str, dict[str, list[float]]]:
    """Every evo single agent of the study's ``runs`` not yet in ``played`` exported and played through
    scripts/zoo_play.py on its re-evaluation's episodes: ``played`` with their returns by method and seed."""
    for _, method, env_id in LEARNERS:
        for run in sorted((runs / env_id).glob(f"{method}-seed*")):
            cache = run / "reevaluation.json"
            if not cache.is_file() or run.name.rsplit("-seed", 1)[1] in played.get(method, {}):
                continue
            how = json.loads(cache.read_text())["how"]
            with exported(run, env_id) as model:
                stats = model.parent / env_id / "vecnormalize.pkl"
                command = [
                    str(zoo_python), str(PLAY), str(model), method, env_id, str(how["seed"]), str(how["episodes"]),
                    str(stats) if stats.is_file() else "", "", str(how["envs"]),
                ]  # fmt: skip
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            seed = run.name.rsplit("-seed", 1)[1]
            played.setdefault(method, {})[seed] = json.loads(output.splitlines()[-1])["returns"]
            print(f"{run}: {statistics.fmean(played[method][seed]):.1f}", flush=True)
    return played


RUN_STATE = frozenset(
    {
        "_current_progress_remaining", "_episode_num", "_last_episode_starts", "_last_obs", "_last_original_obs",
        "_n_calls", "_n_updates", "_num_timesteps_at_start", "_stats_window_size", "_total_timesteps",
        "ep_info_buffer", "ep_success_buffer", "exploration_rate", "num_timesteps", "seed", "start_time",
        "tensorboard_log", "verbose",
    }
)  # fmt: skip
"""What SB3 saves with a model that is the state of a training, not a setting (counters, the last observations,
the episodes, the current ε, the seed, logging)."""


def saved_settings(model: Path) -> dict:
    """The settings SB3 saved with a model (the ``data`` of its zip, read by SB3's own ``json_to_data``) as plain
    JSON values: a class by its qualified name, a space, a schedule or a train frequency by its repr."""
    import zipfile

    from stable_baselines3.common.save_util import json_to_data

    with zipfile.ZipFile(model) as archive:
        data = json_to_data(archive.read("data").decode())
    return {name: plain(value) for name, value in sorted(data.items()) if name not in RUN_STATE}


def plain(value):
    import numpy as np

    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def settings(runs: Path) -> dict[str, dict[str, dict]]:
    """Each learner's settings as evo built its agent (seed 0's, exported) and as rl_zoo3's train built its own
    (seed 0's zip), by method: what :func:`comparable` compares."""
    found = {}
    for _, method, env_id in LEARNERS:
        with exported(runs / env_id / f"{method}-seed0", env_id) as model:
            ours = saved_settings(model)
        (theirs,) = (runs / env_id / f"{method}-zoo-seed0").glob(f"zoo/*/{env_id}_1/{env_id}.zip")
        found[method] = {"evo": ours, "rl_zoo3": saved_settings(theirs)}
    return found


STOCK_DEFAULTS = {
    "optimizer_class": "torch.optim.adam.Adam",
    "activation_fn": "torch.nn.modules.activation.Tanh",
    "use_sde": False,
}
"""policy_kwargs that name what the policy takes without them: torch's Adam (evo names its eager twin, saved as
the torch class it stands for), SB3's actor-critic activation, no gSDE."""
DEFAULT_OPTIMIZER_KWARGS = {
    "sb3_contrib.crossq.policies.CrossQPolicy": {"betas": [0.5, 0.999]},
    "stable_baselines3.common.policies.ActorCriticPolicy": {"eps": 1e-05},
}
"""The Adam settings a policy gives itself where no optimizer class is named (tests/unit/sb3/test_zoo_learners.py
checks evo's against the stock classes)."""


def comparable(saved: dict) -> dict:
    """A model's saved settings with each way of saying the same thing said one way: a constant learning rate as
    its value (evo saves the float, zoo's train a ``ConstantSchedule``); the policy_kwargs that name a default
    (:data:`STOCK_DEFAULTS`, :data:`DEFAULT_OPTIMIZER_KWARGS`, SB3's actor-critic ``net_arch`` [64, 64]) left out;
    ``gradient_steps`` -1 (as many as collected) as 1 where one env collects one step between updates (evo's YAML
    says -1 so that PBT's ``train_freq`` keeps zoo's update-to-data ratio of 1)."""
    settings = dict(saved)
    rate = settings.get("learning_rate")
    if isinstance(rate, str) and rate.startswith("ConstantSchedule(val="):
        settings["learning_rate"] = float(rate.removeprefix("ConstantSchedule(val=").removesuffix(")"))
    policy = settings.get("policy_class")
    kwargs = {k: v for k, v in (settings.get("policy_kwargs") or {}).items() if STOCK_DEFAULTS.get(k, ...) != v}
    if "optimizer_kwargs" in kwargs and kwargs["optimizer_kwargs"] == DEFAULT_OPTIMIZER_KWARGS.get(policy):
        del kwargs["optimizer_kwargs"]
    if policy == "stable_baselines3.common.policies.ActorCriticPolicy" and kwargs.get("net_arch") == [64, 64]:
        del kwargs["net_arch"]
    settings["policy_kwargs"] = kwargs
    once = "TrainFreq(frequency=1, unit=<TrainFrequencyUnit.STEP: 'step'>)"
    if settings.get("gradient_steps") == -1 and settings.get("train_freq") == once and settings.get("n_envs") == 1:
        settings["gradient_steps"] = 1
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments/learning_table.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", type=Path, metavar="RUNS", help="the study's runs folder (runs/learning/runs)")
    parser.add_argument("--settings", type=Path, metavar="RUNS", help="write settings.json from the study's runs")
    parser.add_argument(
        "--zoo-python", type=Path, default=Path(os.environ.get("ZOO_VENV", ROOT / ".venv-zoo")) / "bin" / "python"
    )
    args = parser.parse_args(argv)
    if args.settings:
        SETTINGS.write_text(json.dumps(settings(args.settings), indent=1, sort_keys=True) + "\n")
        print(f"wrote {SETTINGS}")
        return 0
    if args.replay:
        played = json.loads(PLAYED.read_text()) if PLAYED.is_file() else {}
        PLAYED.write_text(json.dumps(replay(args.replay, args.zoo_python, played), indent=1, sort_keys=True) + "\n")
        print(f"wrote {PLAYED}")
        return 0
    print(table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
