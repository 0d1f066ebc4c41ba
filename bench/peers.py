"""evo against Ray Tune's PopulationBasedTraining on the same PBT work, side by side.

    python bench/peers.py --ray-python .venv-ray/bin/python [--repeats 3] [--generations 10]
        [--steps 4096] [--members 4] [--eval-episodes 10] [--only SYSTEM ...] [--json FILE]

The work is ``make run``'s: CartPole-v1, ``--members`` PPO members with evo's CartPole settings
(hyperparams/ppo.yml), ``--generations`` generations of ``--steps`` env steps, every member
scored after every generation by ``--eval-episodes`` deterministic episodes, the score PBT
selects on; evo's CartPole search space (learning rate, ent_coef, clip_range, gamma,
gae_lambda, vf_coef, on their scales), truncation / quantile fraction 0.25, resample
probability 0.25, perturbation x0.8 / x1.2, a perturbation every generation. Systems:

  evo          mpiexec -n RANKS pbt_rl_truct.py --num-agents MEMBERS --eval-episodes E --select-on test
               (make run's work; RANKS defaults to the cores Ray gets, so both run 2 members at a time)
  evo-async    the same with --asynchronous (beside Ray's asynchronous PBT)
  ray-async    Ray Tune's PopulationBasedTraining, asynchronous (bench/ray_pbt.py)
  ray-sync     the same, synch=True
  evo-single   one evo agent (mpiexec -n 1, --num-agents 1 --strategy none), same work
  sb3-single   one stock SB3 PPO agent (bench/sb3_member.py), same work

Each run is a fresh command measured from outside with its whole process tree
(bench/proctree.py): wall time, CPU seconds, the sum of every process's peak RSS, and the
number of processes. The systems alternate in a rotating order within each repeat; medians
are reported with every repeat's evo / Ray ratio. The ideal for N members on C cores is
N x (one agent's time) / C, for evo's agent and for the stock one. Ray runs in its own
virtualenv (``--ray-python``; ``make bench-peers`` creates ``.venv-ray``), never in evo's.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, processor, processor_line, write_json  # noqa: E402
from bench.proctree import measure  # noqa: E402

SYSTEMS = ("evo", "evo-async", "ray-async", "ray-sync", "evo-single", "sb3-single")
RAY_SYSTEMS = ("ray-async", "ray-sync")
SINGLE = {"evo-single": "evo", "sb3-single": "stock SB3"}
ENV_ID = "CartPole-v1"
WALL_TARGET = 0.6
"""evo's wall time at most this fraction of Ray's best (the faster of async and sync)."""
MEMORY_TARGET = 0.4
"""evo's summed peak RSS at most this fraction of Ray's (the smaller of async and sync)."""
COMPARED_PACKAGES = ("stable-baselines3", "gymnasium", "torch")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs of every system (default 3)")
    parser.add_argument("--generations", type=int, default=10, help="PBT generations (default 10)")
    parser.add_argument("--steps", type=int, default=4096, help="env steps per member per generation (default 4096)")
    parser.add_argument("--members", type=int, default=4, help="population size (default 4)")
    parser.add_argument(
        "--ranks",
        type=int,
        default=None,
        help="evo's MPI ranks (default: --cores, the CPUs Ray gets; members are spread over them, as "
        "Ray runs --cores trials at a time); --ranks 4 is make run's one rank per member",
    )
    parser.add_argument("--eval-episodes", type=int, default=10, help="evaluation episodes per score (default 10)")
    parser.add_argument("--cores", type=int, default=None, help="CPUs Ray may use, and the ideal's C (default: all)")
    parser.add_argument("--ray-python", help="the python of Ray's virtualenv (make bench-peers: .venv-ray/bin/python)")
    parser.add_argument("--only", nargs="+", choices=SYSTEMS, default=list(SYSTEMS), help="systems to run")
    parser.add_argument("--seed", type=int, default=0, help="repeat r runs every system with seed + r")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before one run is killed")
    parser.add_argument(
        "--retries",
        type=int,
        default=1,
        help="times a failed run is run again before the benchmark stops (default 1: Ray's start-up gives up "
        "after 30 s, which a heavily loaded machine can exceed); the failures are in the JSON",
    )
    parser.add_argument("--json", help="write the settings, processor, records and summary here")
    args = parser.parse_args(argv)
    if args.cores is None:
        args.cores = len(os.sched_getaffinity(0))
    if args.ranks is None:
        args.ranks = min(args.cores, args.members)
    problems = check_args(args)
    if problems:
        parser.error("\n  " + "\n  ".join(problems))
    return args


def check_args(args: argparse.Namespace) -> list[str]:
    """Every problem with the arguments, each with its fix."""
    problems = []
    for name in ("repeats", "generations", "steps", "members", "eval_episodes", "cores"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} is {getattr(args, name)}; give 1 or more")
    if args.ranks < 1 or args.members % args.ranks:
        problems.append(f"--ranks {args.ranks}: give a divisor of --members {args.members}")
    if args.retries < 0:
        problems.append(f"--retries is {args.retries}; give 0 or more")
    if args.members < 2 and any(system in args.only for system in ("evo", "evo-async", *RAY_SYSTEMS)):
        problems.append(f"--members {args.members}: PBT needs a population of 2 or more")
    if any(system in args.only for system in RAY_SYSTEMS):
        if not args.ray_python:
            problems.append(
                "--ray-python is needed for ray-async and ray-sync: `make bench-peers` creates Ray's own "
                "virtualenv .venv-ray (give --ray-python .venv-ray/bin/python), or leave Ray out with "
                "--only evo evo-single sb3-single"
            )
        elif not os.access(args.ray_python, os.X_OK):
            problems.append(f"--ray-python {args.ray_python} is not an executable; run `make bench-peers` first")
    if len(set(args.only)) != len(args.only):
        problems.append(f"--only {' '.join(args.only)} names a system twice")
    return problems


def work_argv(args: argparse.Namespace, members: int) -> list[str]:
    """evo's flags for the work (``make run``'s), for ``members`` members."""
    return [
        "--env-id",
        ENV_ID,
        "--eval-episodes",
        str(args.eval_episodes),
        "--select-on",
        "test",
        "--num-agents",
        str(members),
        "--total-generations",
        str(args.generations),
        "--agent-training-steps",
        str(args.steps),
    ]


def build_spec(args: argparse.Namespace) -> dict:
    """The work as evo resolves it (hyperparams/ppo.yml), for the Ray trainable and the stock
    agent, which must not import evo: PPO settings, default hyperparameters, search space, PBT."""
    from evo.config import parse_config

    config = parse_config(work_argv(args, args.members), world_size=args.members, check_run_dir=False)
    agent = config.agent
    settings = agent.settings
    if agent.policy != "mlp" or agent.normalizes or settings["use_sde"] or settings["target_kl"] is not None:
        raise ValueError(f"{ENV_ID}'s settings grew beyond what bench/sb3_member.py builds: {agent}")
    six = ("learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef")
    extra = set(agent.search_space) - set(six)
    if extra:
        raise ValueError(f"the search space explores {sorted(extra)}; bench/ray_pbt.py explores the six only")
    return {
        "env_id": config.env_id,
        "members": args.members,
        "generations": args.generations,
        "steps": args.steps,
        "eval_episodes": args.eval_episodes,
        "cores": args.cores,
        "n_envs": agent.n_envs,
        "n_steps": settings["n_steps"],
        "batch_size": settings["batch_size"],
        "n_epochs": settings["n_epochs"],
        "max_grad_norm": settings["max_grad_norm"],
        "normalize_advantage": settings["normalize_advantage"],
        "net_arch": list(agent.policy_kwargs["net_arch"]),
        "activation_fn": agent.policy_kwargs["activation_fn"],
        "defaults": dict(agent.defaults),
        "search_space": {
            name: {"low": space.low, "high": space.high, "scale": space.scale}
            for name, space in agent.search_space.items()
        },
        "truncation_fraction": config.truncation_fraction,
        "resample_probability": config.resample_probability,
        "perturb_factors": list(config.perturb_factors),
    }


def rotation(systems: Sequence[str], repeat: int) -> list[str]:
    """The order of ``systems`` in ``repeat``: rotated by one each repeat, so that every system
    takes every place in turn (and follows a different one)."""
    shift = repeat % len(systems) if systems else 0
    return list(systems[shift:]) + list(systems[:shift])


def command(system: str, args: argparse.Namespace, spec_path: Path, folder: Path, seed: int) -> list[str]:
    """The command line that runs ``system`` once, writing into ``folder``."""
    mpiexec = [str(Path(sys.executable).parent / "mpiexec"), "--oversubscribe", "-n"]
    evo_flags = ["--seed", str(seed), "--run-dir", str(folder / "run")]
    if system in ("evo", "evo-async"):
        work = [*work_argv(args, args.members), *(["--asynchronous"] if system == "evo-async" else [])]
        return [*mpiexec, str(args.ranks), sys.executable, "pbt_rl_truct.py", *work, *evo_flags]
    if system == "evo-single":
        single = [*work_argv(args, 1), "--strategy", "none", "--initial-hparams", "defaults"]
        return [*mpiexec, "1", sys.executable, "pbt_rl_truct.py", *single, *evo_flags]
    if system == "sb3-single":
        return [sys.executable, "bench/sb3_member.py", "--spec", str(spec_path), "--seed", str(seed)]
    if system in RAY_SYSTEMS:
        synch = "true" if system == "ray-sync" else "false"
        flags = ["--spec", str(spec_path), "--synch", synch, "--storage", str(folder), "--seed", str(seed)]
        return [args.ray_python, "bench/ray_pbt.py", *flags]
    raise ValueError(f"unknown system {system!r}; use one of {SYSTEMS}")


def run_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def outcome(system: str, folder: Path, log: Path) -> dict:
    """What the run learned (final scores, exploits), read from its records or its last line:
    not what is compared, but a run that learned nothing would make the timing meaningless."""
    if system.startswith("evo"):
        with (folder / "run" / "population.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        last = max(int(row["generation"]) for row in rows)
        lineage = folder / "run" / "lineage.jsonl"
        exploits = len(lineage.read_text().splitlines()) if lineage.exists() else 0
        return {
            "final_scores": [float(row["score_test"]) for row in rows if int(row["generation"]) == last],
            "exploits": exploits,
        }
    found = json.loads(log.read_text().strip().splitlines()[-1])
    return {"exploits": 0, **found}


def run_measured(system: str, args: argparse.Namespace, spec_path: Path, repeat: int) -> dict:
    """Run ``system`` until it succeeds, at most ``1 + args.retries`` times; the successful
    run's record, with the end of every failed attempt's output in ``failed_attempts``."""
    failures = []
    while True:
        try:
            return {**run_once(system, args, spec_path, repeat), "failed_attempts": failures}
        except RuntimeError as error:
            if len(failures) >= args.retries:
                raise
            failures.append(str(error))
            print(f"  repeat {repeat} {system}: failed, running it again. {error}", file=sys.stderr, flush=True)


def run_once(system: str, args: argparse.Namespace, spec_path: Path, repeat: int) -> dict:
    """Run ``system`` once in a fresh temporary folder and measure it; one record."""
    with tempfile.TemporaryDirectory(prefix=f"peers-{system}-") as tmp:
        folder = Path(tmp)
        log = folder / "output.log"
        seed = args.seed + repeat
        usage = measure(
            command(system, args, spec_path, folder, seed),
            cwd=ROOT,
            env=run_environment(),
            log=log,
            timeout=args.timeout,
        )
        if usage.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise RuntimeError(f"{system} exited with {usage.returncode}; the end of its output:\n{tail}")
        learned = outcome(system, folder, log)
    return {"system": system, "repeat": repeat, "seed": seed, **usage.to_dict(), **learned}


def evo_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in (*COMPARED_PACKAGES, "numpy", "mpi4py")}


def version_mismatches(evo: dict[str, str], ray: dict[str, str]) -> list[str]:
    """The packages both sides share whose versions differ (the comparison then is not fair)."""
    return [f"{name}: evo {evo[name]}, ray {ray[name]}" for name in COMPARED_PACKAGES if evo.get(name) != ray.get(name)]


def summarize(records: list[dict], members: int, cores: int) -> dict:
    """Medians per system, the ideals, evo's ratios to Ray (medians and per repeat), and
    whether the targets are met."""
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in records)]
    stats = {}
    for system in systems:
        mine = [r for r in records if r["system"] == system]
        stats[system] = {
            key: median([r[key] for r in mine])
            for key in ("wall_s", "cpu_s", "peak_rss_mb", "concurrent_rss_mb", "concurrent_pss_mb", "processes")
        }
        stats[system]["runs"] = len(mine)
        stats[system]["left_behind"] = sum(len(r["left_behind"]) for r in mine)
    summary: dict = {"members": members, "cores": cores, "systems": stats, "ideal": {}, "ratios": {}, "targets": {}}
    for single, label in SINGLE.items():
        if single in stats:
            summary["ideal"][single] = {"agent": label, "wall_s": members * stats[single]["wall_s"] / cores}
    if "evo" in stats and "evo-async" in stats:
        summary["modes"] = {
            "wall": stats["evo-async"]["wall_s"] / stats["evo"]["wall_s"],
            "wall_per_repeat": pair_ratios(records, "evo-async", "evo", "wall_s"),
        }
        if "ray-async" in stats:  # the two asynchronous PBTs side by side
            summary["modes"]["vs_ray_async"] = {
                "wall": stats["evo-async"]["wall_s"] / stats["ray-async"]["wall_s"],
                "wall_per_repeat": pair_ratios(records, "evo-async", "ray-async", "wall_s"),
            }
    if "evo" not in stats:
        return summary
    for ray in (s for s in RAY_SYSTEMS if s in stats):
        summary["ratios"][ray] = {
            "wall": stats["evo"]["wall_s"] / stats[ray]["wall_s"],
            "cpu": stats["evo"]["cpu_s"] / stats[ray]["cpu_s"],
            "peak_rss": stats["evo"]["peak_rss_mb"] / stats[ray]["peak_rss_mb"],
            "wall_per_repeat": pair_ratios(records, "evo", ray, "wall_s"),
            "peak_rss_per_repeat": pair_ratios(records, "evo", ray, "peak_rss_mb"),
        }
    rays = [s for s in RAY_SYSTEMS if s in stats]
    if rays:
        best_wall = min(rays, key=lambda s: stats[s]["wall_s"])
        least_memory = min(rays, key=lambda s: stats[s]["peak_rss_mb"])
        wall_ratio = stats["evo"]["wall_s"] / stats[best_wall]["wall_s"]
        memory_ratio = stats["evo"]["peak_rss_mb"] / stats[least_memory]["peak_rss_mb"]
        summary["targets"] = {
            "wall": {
                "against": best_wall,
                "ratio": wall_ratio,
                "target": WALL_TARGET,
                "met": wall_ratio <= WALL_TARGET,
            },
            "peak_rss": {
                "against": least_memory,
                "ratio": memory_ratio,
                "target": MEMORY_TARGET,
                "met": memory_ratio <= MEMORY_TARGET,
            },
        }
    return summary


def pair_ratios(records: list[dict], top: str, bottom: str, key: str) -> list[float]:
    """``top``'s ``key`` over ``bottom``'s, for every repeat that ran both."""
    by_run = {(r["system"], r["repeat"]): r[key] for r in records}
    repeats = sorted({r["repeat"] for r in records})
    return [by_run[top, k] / by_run[bottom, k] for k in repeats if (top, k) in by_run and (bottom, k) in by_run]


def report(summary: dict) -> str:
    """The summary as markdown: one table of the systems (medians; evo's ratio to each Ray
    system, with every repeat's), the ideals, and the targets."""
    stats = summary["systems"]
    evo_wall = stats.get("evo", {}).get("wall_s", math.nan)
    rows = []
    for system, row in stats.items():
        ratio = summary["ratios"].get(system)
        rows.append(
            [
                system,
                round(row["wall_s"], 1),
                round(row["cpu_s"], 1),
                round(row["peak_rss_mb"]),
                round(row["concurrent_pss_mb"]),
                row["processes"],
                row["left_behind"],
                _ratio_cell(ratio["wall"], ratio["wall_per_repeat"]) if ratio else "",
                _ratio_cell(ratio["peak_rss"], ratio["peak_rss_per_repeat"]) if ratio else "",
            ]
        )
    headers = ["system", "wall s", "CPU s", "summed peak RSS MB", "peak PSS MB", "processes", "left behind"]
    headers += ["evo/system wall (per repeat)", "evo/system RSS (per repeat)"]
    lines = [markdown_table(headers, rows), ""]
    for ideal in summary["ideal"].values():
        line = f"ideal ({summary['members']} x one {ideal['agent']} agent / {summary['cores']} cores): "
        line += f"{ideal['wall_s']:.1f} s"
        if "evo" in stats:
            line += f"; evo at {evo_wall / ideal['wall_s']:.2f}x it"
        lines.append(line)
    mode = summary.get("modes")
    if mode is not None:
        lines.append(
            f"evo-async / evo (asynchronous / synchronous) wall: {_ratio_cell(mode['wall'], mode['wall_per_repeat'])}"
        )
        if "vs_ray_async" in mode:
            ray = mode["vs_ray_async"]
            lines.append(f"evo-async / ray-async wall: {_ratio_cell(ray['wall'], ray['wall_per_repeat'])}")
    for name, target in summary["targets"].items():
        what = "wall time" if name == "wall" else "summed peak RSS"
        verdict = "met" if target["met"] else "NOT met"
        lines.append(
            f"target: evo's {what} <= {target['target']}x {target['against']}'s: {target['ratio']:.2f}x, {verdict}"
        )
    return "\n".join(lines)


def _ratio_cell(value: float, per_repeat: Sequence[float]) -> str:
    return f"{value:.2f} (" + ", ".join(f"{v:.2f}" for v in per_repeat) + ")"


def ray_versions(ray_python: str) -> dict[str, str]:
    code = (
        "import json; from importlib.metadata import version; print(json.dumps({n: version(n) for n in "
        "('ray', 'stable-baselines3', 'gymnasium', 'torch', 'numpy')}))"
    )
    return json.loads(subprocess.run([ray_python, "-c", code], capture_output=True, text=True, check=True).stdout)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    cpu = processor()
    versions = {"evo": evo_versions()}
    if any(system in args.only for system in RAY_SYSTEMS):
        versions["ray"] = ray_versions(args.ray_python)
        mismatches = version_mismatches(versions["evo"], versions["ray"])
        if mismatches:
            sys.exit("Ray's virtualenv runs other versions than evo's: " + "; ".join(mismatches))
    btl = os.environ.get("OMPI_MCA_btl", "unset: Open MPI's default")
    print(f"{processor_line(cpu)}; {args.cores} cores")
    print(f"versions: {json.dumps(versions)}; evo's ranks run with OMPI_MCA_btl={btl}")
    spec = build_spec(args)
    records = []
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        for repeat in range(args.repeats):
            for system in rotation(args.only, repeat):
                record = run_measured(system, args, spec_path, repeat)
                records.append(record)
                print(
                    f"  repeat {repeat} {system:10s} {record['wall_s']:7.1f} s wall {record['cpu_s']:7.1f} CPU-s "
                    f"{record['peak_rss_mb']:7.0f} MB in {record['processes']} processes, final scores "
                    + " ".join(f"{s:.0f}" for s in record["final_scores"]),
                    file=sys.stderr,
                    flush=True,
                )
    summary = summarize(records, args.members, args.cores)
    print(
        f"\n{ENV_ID}, {args.members} members, {args.generations} generations x {args.steps} env steps, "
        f"{args.eval_episodes} evaluation episodes per score, {args.cores} cores; medians of {args.repeats}\n"
    )
    print(report(summary))
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        document = {"settings": {**settings, "OMPI_MCA_btl": btl}, "cpu": cpu, "versions": versions, "spec": spec}
        write_json(args.json, {**document, "records": records, "summary": summary})


if __name__ == "__main__":
    main()
