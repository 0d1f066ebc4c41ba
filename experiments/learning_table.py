"""The learning table of docs/results.md ("Every learner against rl_zoo3", issue 57 item 1): each learner
under evo against rl_zoo3's own train, from the learning study's committed records (docs/results/learning/,
experiments/studies/learning.yml), beside zoo's published benchmark.

    python experiments/learning_table.py                 # print the table docs/results.md holds
    python experiments/learning_table.py --replay RUNS   # play the study's evo agents through stock SB3: played.json

Every agent of the table is played by one evaluation script, scripts/zoo_play.py (SB3's ``evaluate_policy``,
deterministic, in the evo-less virtualenv), on the same 20 fresh episodes of its seed: rl_zoo3's agents by the
study's cross-check, evo's by ``--replay``, which exports each one (``evo-export``, the run's member 0 at its
last generation, the agent the study re-evaluated) and plays the zip on the envs and seed of its
re-evaluation. ``played.json`` holds those returns; a test checks that they are evo-evaluate's, episode for
episode, so the study's own report and this table read the same numbers.

A row's numbers are over seeds: the mean and standard deviation of the per-seed means of 20 episodes, and the
paired difference evo - rl_zoo3 by seed with its 95 % t-interval. "within noise" where the interval holds 0
(or every seed is tied), otherwise which side is ahead. The PBT rows compare the population's selected member
(4 members on 2 ranks, each at zoo's budget) with the single evo agent of the same seeds.
"""

from __future__ import annotations

import argparse
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

from evo.study.stats import Paired, paired  # noqa: E402

RECORDS = ROOT / "docs" / "results" / "learning"
PLAYED = RECORDS / "played.json"
BENCHMARK = RECORDS / "zoo-benchmark.json"
PLAY = ROOT / "scripts" / "zoo_play.py"

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


def verdict(pair: Paired, ahead: str, behind: str) -> str:
    """What the paired differences say: equal on every seed, within noise (the 95 % interval holds 0), which side
    is ahead beyond it, or nothing (fewer than 2 seeds: no interval)."""
    if pair.n == 0:
        return "not run"
    if all(d == 0 for d in pair.differences):
        return "equal on every seed"
    if pair.n < 2:
        return "1 seed: not judged"
    if pair.low > 0:
        return f"{ahead} ahead"
    if pair.high < 0:
        return f"**{behind} ahead**"
    return "within noise"


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
            f"{spread(list(theirs.values()))} | {difference(pair)} | {pair.n} | {verdict(pair, 'evo', 'rl_zoo3')} | "
            f"{zoo} |"
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
            f"{difference(pair)} | {pair.n} | {verdict(pair, 'PBT', 'one agent')} |"
        )
    return "\n".join(lines) + "\n"


def replay(
    runs: Path, zoo_python: Path, played: dict[str, dict[str, list[float]]]
) -> dict[str, dict[str, list[float]]]:
    """Every evo single agent of the study's ``runs`` not yet in ``played`` exported and played through
    scripts/zoo_play.py on its re-evaluation's episodes: ``played`` with their returns by method and seed."""
    from evo.tools import export

    for _, method, env_id in LEARNERS:
        for run in sorted((runs / env_id).glob(f"{method}-seed*")):
            cache = run / "reevaluation.json"
            if not cache.is_file() or run.name.rsplit("-seed", 1)[1] in played.get(method, {}):
                continue
            how = json.loads(cache.read_text())["how"]
            with tempfile.TemporaryDirectory() as folder:
                if export.main([str(run), "--out", folder, "--member", "0"]) != 0:
                    raise SystemExit(f"{run}: evo-export failed")
                (model,) = Path(folder).glob(f"*/{env_id}_1/{env_id}.zip")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments/learning_table.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", type=Path, metavar="RUNS", help="the study's runs folder (runs/learning/runs)")
    parser.add_argument(
        "--zoo-python", type=Path, default=Path(os.environ.get("ZOO_VENV", ROOT / ".venv-zoo")) / "bin" / "python"
    )
    args = parser.parse_args(argv)
    if args.replay:
        played = json.loads(PLAYED.read_text()) if PLAYED.is_file() else {}
        PLAYED.write_text(json.dumps(replay(args.replay, args.zoo_python, played), indent=1, sort_keys=True) + "\n")
        print(f"wrote {PLAYED}")
        return 0
    print(table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
