"""The control plane of a generation as the population grows, measured and modelled.

    python bench/controlplane.py [--ranks 2 4 8 16 32] [--generations 10] [--json FILE]

Measured (each launches mpiexec -n R --oversubscribe itself):

1. **One generation's control plane**, for each R: evo's real run (``evo.main.main``, truncation,
   p2p as pbt_rl_truct.py and collective as pbt_rl_truct_collective.py, one after the other in
   the same job) with one tiny CartPole member per rank (2 envs x 32 steps, one rollout and one
   epoch a generation). The benchmark wraps the loop's own steps (``evo.loop``'s train, score,
   gather, plan, checkpoint, the stop agreement, ``evo.mpi.exchange.apply_exploits`` and the run's
   records hook) in a timer with a barrier in front: the barrier is the time the rank waits for the
   slowest one, what follows the phase's own cost. Per phase, the slowest rank's time of each
   generation, median over the generations after the first (a warm-up).
2. **The exchange's latency and bandwidth on this host** (alpha, beta): ``evo.mpi.exchange.exchange``
   of one buffer from rank 0 to rank 1, 4 B to 64 MB, 2 ranks, over shared memory (Open MPI's
   default here) and over TCP loopback (``--mca btl self,tcp``), fitted by bench/netmodel.py.
3. **The model against the measured exchange**: the same function at R ranks with truncation's
   donor maps and buffers of the CartPole MLP's and the IMPALA CNN's size.

Modelled (bench/netmodel.py): the exchange per generation for P = 2 ... 1024 ranks, one member per
rank, for the byte sizes of real policies (CartPole's MLP, a MuJoCo 256x256 MLP with its
VecNormalize statistics, the IMPALA CNN; weights and Adam state), on 10 GbE and InfiniBand HDR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import netmodel  # noqa: E402
from bench.common import markdown_table, median, processor, processor_line, write_json  # noqa: E402

TRANSPORTS = {"p2p": "pbt_rl_truct.py", "collective": "pbt_rl_truct_collective.py"}
TINY_CARTPOLE = "CartPole-v1:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 1\n  n_epochs: 1\n"
STEPS_PER_GENERATION = 64
FRACTION = 0.25  # truncation's default
PHASES = ("agree", "gather", "plan", "broadcast", "exchange", "records", "checkpoint")
SWEEP = [4**k for k in range(1, 14)]  # 4 B .. 64 MB
MODEL_RANKS = [2**k for k in range(1, 11)]
POLICIES = {  # name: (env id, YAML block to shrink, extra --hyperparams)
    "CartPole MLP 64x64": ("CartPole-v1", "CartPole-v1", ""),
    "MuJoCo MLP 256x256": ("HalfCheetah-v5", "HalfCheetah-v5", "  batch_size: 32\n"),
    "IMPALA CNN": ("bigfish", "procgen", "  n_minibatches: 1\n"),
}


# ---------------------------------------------------------------------------------------
# Inside the MPI job: evo's run with its steps timed


class PhaseClock:
    """Per generation, this rank's seconds in each timed step (``name``) and waiting at the
    barrier in front of it (``name_wait``)."""

    def __init__(self, comm):
        self.comm = comm
        self.rows: list[dict] = []

    def begin(self, generation: int) -> None:
        self.rows.append({"generation": generation})

    def timed(self, name: str, function, barrier: bool):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            if barrier:
                self.comm.Barrier()
            ready = time.perf_counter()
            result = function(*args, **kwargs)
            if self.rows:  # not the initial population's checkpoint, before generation 1
                self.rows[-1][name] = time.perf_counter() - ready
                if barrier:
                    self.rows[-1][f"{name}_wait"] = ready - start
            return result

        return wrapper


def install_clock(clock: PhaseClock) -> None:
    """Wrap the steps of evo's generation loop in the clock (module attributes, which the loop
    looks up at every call), so the real code runs, timed."""
    import evo.runner.generation
    import evo.runner.loop
    import evo.runner.members
    from evo.mpi import exchange

    run_generation, plan, apply_exploits = evo.runner.loop.run_generation, evo.runner.loop.plan, exchange.apply_exploits

    def begin_generation(comm, members, owner, hooks, generation, *args):
        clock.begin(generation)
        return run_generation(comm, members, owner, hooks, generation, *args)

    def timed_plan(comm, decide, generation, population):
        def timed_decide(generation, population):
            start = time.perf_counter()
            exploits = decide(generation, population)
            clock.rows[-1]["decide"] = time.perf_counter() - start
            return exploits

        return plan(comm, timed_decide, generation, population)

    def recorded_exchange(comm, exploits, members, transport, owner, scratch=None):
        donors = apply_exploits(comm, exploits, members, transport, owner, scratch)
        member = next(iter(members.values()))
        stats = getattr(member, "stats", None)
        clock.rows[-1]["buffers"] = [int(member.buffer.nbytes)] + ([int(stats.nbytes)] if stats is not None else [])
        clock.rows[-1]["donors"] = sorted(donors.items())
        return donors

    evo.runner.loop.run_generation = begin_generation
    evo.runner.loop.train = clock.timed("train", evo.runner.loop.train, barrier=False)
    exchange.StopNotifier.agree = clock.timed("agree", exchange.StopNotifier.agree, barrier=True)
    evo.runner.loop.score = clock.timed("score", evo.runner.loop.score, barrier=False)
    evo.runner.loop.gather = clock.timed("gather", evo.runner.loop.gather, barrier=True)
    evo.runner.loop.plan = clock.timed("plan", timed_plan, barrier=True)
    exchange.apply_exploits = clock.timed("exchange", recorded_exchange, barrier=True)
    generation = evo.runner.generation
    generation.after_exchange = clock.timed("records", generation.after_exchange, barrier=True)
    evo.runner.loop.checkpoint = clock.timed("checkpoint", evo.runner.loop.checkpoint, barrier=True)
    # inside the checkpoint: serialising the members, and writing them (files, fsync, manifest)
    factory = evo.runner.members.MemberFactory
    factory.files = clock.timed("snapshot", factory.files, barrier=False)
    generation.write_checkpoint = clock.timed("write", generation.write_checkpoint, barrier=False)


def barrier_floor(comm, repeats: int) -> float:
    """Median of the slowest rank's time for a bare barrier (s): what a barrier costs here."""
    from bench.exchange import timed

    return timed(comm, comm.Barrier, repeats) / 1e3


def control_plane_worker(generations: int, run_root: str, hyperparams: str) -> None:
    import torch
    from mpi4py import MPI

    import evo.main

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    clock = PhaseClock(comm)
    install_clock(clock)
    results = {}
    for transport, script in TRANSPORTS.items():
        clock.rows = []
        argv = [
            *("--env-id", "CartPole-v1", "--hyperparams", hyperparams, "--seed", "0"),
            *("--agent-training-steps", str(STEPS_PER_GENERATION), "--total-generations", str(generations)),
            *("--run-dir", str(Path(run_root) / transport), "--progress-interval", "0", "--log-level", "WARNING"),
        ]
        status = evo.main.main("truncation", transport, argv, prog=script)
        if status != 0:
            raise RuntimeError(f"{script} exited with {status}")
        results[transport] = comm.gather(clock.rows, root=0)
    floor = barrier_floor(comm, 50)
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps({"runs": results, "barrier_s": floor}), flush=True)


def exchange_worker(sizes: list[int], maps: int, repeats: int) -> None:
    """At 2 ranks, the sweep: rank 0's buffer to rank 1 for every size. At any size, truncation's
    donor maps (one member per rank) with buffers of ``sizes``'s last entries (``--maps``)."""
    import numpy as np
    from mpi4py import MPI

    from bench.exchange import timed
    from evo.learners.interface import buffers_for
    from evo.mpi import exchange

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    records = []

    def measure(transport, donors, nbytes, count):
        states = {rank: {"weights": np.full(nbytes // 4, rank, dtype=np.float32)}}
        scratch: dict = {}

        def run():
            exchange.exchange(
                comm,
                transport,
                donors,
                netmodel.one_per_rank,
                {d: states[d] for d in set(donors.values()) if d in states},
                lambda r, layout: buffers_for(layout, states[r]),
                scratch,
            )

        seconds = timed(comm, run, count) / 1e3
        return {"transport": transport, "ranks": size, "bytes": nbytes, "donors": sorted(donors.items()), "s": seconds}

    for transport in TRANSPORTS:
        if maps == 0:
            for nbytes in sizes:
                records.append(measure(transport, {1: 0}, nbytes, repeats if nbytes <= 2**20 else max(5, repeats // 5)))
            continue
        for index in range(maps):
            donors = comm.bcast(netmodel.truncation_maps(size, FRACTION, 1, seed=index)[0], root=0)
            for nbytes in sizes:
                records.append({**measure(transport, donors, nbytes, repeats), "map": index})
    if rank == 0:
        print("RESULTS " + json.dumps(records), flush=True)


def plans(config) -> list[dict]:
    """For P members: the bytes of one member's result (what each rank sends to rank 0's gather)
    and of the plan rank 0 broadcasts, and rank 0's time to decide it (truncation, perturb;
    median of 5, in this process)."""
    import pickle

    import numpy as np

    from evo.core.explorers import make_explorer
    from evo.core.kinds import sample_hparams
    from evo.core.plan import generation_rng, plan_generation
    from evo.core.result import MemberResult, Scores

    space, rng, records = config.agent.search_space, np.random.default_rng(0), []
    for size in MODEL_RANKS:
        population = [
            MemberResult.of(m, m, 4096, Scores(float(rng.normal())), sample_hparams(space, rng)) for m in range(size)
        ]
        seconds = []
        for repeat in range(5):
            start = time.perf_counter()
            explorer = make_explorer("perturb", space)
            plan = plan_generation(repeat + 1, population, "truncation", explorer, generation_rng(0, repeat + 1))
            seconds.append(time.perf_counter() - start)
        result_bytes = len(pickle.dumps([population[0]]))
        records.append(
            {"ranks": size, "result": result_bytes, "plan": len(pickle.dumps(plan)), "decide_s": median(seconds)}
        )
    return records


def sizes_worker() -> None:
    """Bytes a member exchanges for each policy: weights + Adam state (float32), and the
    VecNormalize statistics (float64) where the env normalises; and the plan's sizes and cost."""
    from evo.config import parse_config
    from evo.runner.session import member_factory

    sizes = {}
    for name, (env_id, block, extra) in POLICIES.items():
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as handle:
            handle.write(f"{block}:\n  n_envs: 1\n  n_steps: 32\n{extra}")
            handle.flush()
            config = parse_config(["--env-id", env_id, "--hyperparams", handle.name], world_size=1, check_run_dir=False)
            member = member_factory(config).make(0, config.agent.defaults, tensorboard=False)
        stats = member.stats.nbytes if member.stats is not None else 0
        sizes[name] = {"env_id": env_id, "buffer": int(member.buffer.nbytes), "stats": int(stats)}
        member.close()
    cartpole = parse_config(["--env-id", "CartPole-v1"], world_size=1, check_run_dir=False)
    print("RESULTS " + json.dumps({"policies": sizes, "plans": plans(cartpole)}), flush=True)


# ---------------------------------------------------------------------------------------
# The launcher


def launch(ranks: int, worker_args: list[str], mca: list[str] = ()) -> dict:
    """Run this script's worker under mpiexec (or alone with ranks 0); its RESULTS line, and the
    1-minute load average when it started."""
    load = float(Path("/proc/loadavg").read_text().split()[0])
    command = [sys.executable, __file__, "--worker", *worker_args]
    if ranks:
        command = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks), "--oversubscribe", *mca, *command]
    # Waiting ranks yield the core (Open MPI's own choice when oversubscribed), at every rank count
    # alike: a rank that busy-polls on a shared machine loses whole timeslices (~10 ms) to the
    # other load when it needs the core back.
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULTS "))
    return {"load": load, "results": json.loads(line[len("RESULTS ") :])}


def phase_times(per_rank: list[list[dict]]) -> list[dict]:
    """Per generation after the first, each phase's slowest rank (s). ``plan`` is rank 0's
    decision; ``broadcast`` the rest of the plan step until the last rank holds the plan;
    ``wait`` the most any rank spent in the barriers, waiting for the slowest."""
    generations = []
    for index in range(1, len(per_rank[0])):
        rows = [ranks_rows[index] for ranks_rows in per_rank]
        decide = rows[0]["decide"]
        times = {phase: max(row[phase] for row in rows) for phase in ("train", "agree", "gather", "exchange")}
        times |= {phase: max(row[phase] for row in rows) for phase in ("records", "checkpoint", "snapshot")}
        times["write"] = max(row.get("write", 0.0) for row in rows)  # a boundary not due is not written
        times["plan"] = decide
        times["broadcast"] = max(row["plan"] for row in rows) - decide
        times["wait"] = max(sum(v for k, v in row.items() if k.endswith("_wait")) for row in rows)
        times["control"] = sum(times[phase] for phase in PHASES)
        times["donors"], times["buffers"] = rows[0]["donors"], rows[0]["buffers"]
        generations.append(times)
    return generations


def fit(records: list[dict], transport: str) -> tuple[float, float]:
    mine = [r for r in records if r["transport"] == transport]
    return netmodel.fit_latency_bandwidth([r["bytes"] for r in mine], [r["s"] for r in mine])


def measure_control_plane(ranks: list[int], generations: int, alpha_beta: dict) -> tuple[list, list]:
    """The control-plane table: one mpiexec per rank count, both transports."""
    records, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        hyperparams = Path(tmp) / "tiny.yml"
        hyperparams.write_text(TINY_CARTPOLE)
        for size in ranks:
            run_root = Path(tmp) / f"ranks-{size}"
            started = time.perf_counter()
            job = launch(size, ["control", str(run_root), str(hyperparams), "--generations", str(generations)])
            wall = time.perf_counter() - started
            print(f"  {size} ranks: {wall:.0f} s (load {job['load']:.1f})", file=sys.stderr)
            for transport, per_rank in job["results"]["runs"].items():
                per_generation = phase_times(per_rank)
                alpha, bandwidth = alpha_beta[transport]
                owner = netmodel.one_per_rank
                model = [
                    netmodel.exchange_time(transport, dict(g["donors"]), owner, size, g["buffers"], alpha, bandwidth)
                    for g in per_generation
                ]
                keys = ("train", "wait", "control", "snapshot", "write", *PHASES)
                medians = {key: median([g[key] for g in per_generation]) for key in keys}
                record = {"ranks": size, "transport": transport, "load": job["load"], "job_wall_s": wall}
                record |= {"barrier_s": job["results"]["barrier_s"], "model_exchange_s": median(model), **medians}
                record["generations"] = per_generation
                records.append(record)
                ms = [1e3 * medians[key] for key in ("wait", *PHASES, "control")]
                rows.append([size, transport, f"{job['load']:.1f}", medians["train"], *ms])
                rows[-1] += [1e3 * record["model_exchange_s"], 1e3 * record["barrier_s"]]
    return records, rows


def measure_exchange(ranks: list[int], sizes: dict, repeats: int) -> dict:
    """alpha and beta of evo's exchange here (shared memory and TCP loopback, 2 ranks), and the
    model against truncation's exchanges at ``ranks``."""
    sweep = ["exchange", *map(str, SWEEP), "--maps", "0", "--repeats", str(repeats)]
    shared = launch(2, sweep)
    tcp = launch(2, sweep, ["--mca", "btl", "self,tcp"])
    fitted = {
        "shared memory": {t: fit(shared["results"], t) for t in TRANSPORTS},
        "TCP loopback": {t: fit(tcp["results"], t) for t in TRANSPORTS},
    }
    validation = []
    for size in ranks:
        nbytes = [sizes["CartPole MLP 64x64"]["buffer"], sizes["IMPALA CNN"]["buffer"]]
        job = launch(size, ["exchange", *map(str, nbytes), "--maps", "5", "--repeats", "10"])
        for record in job["results"]:
            alpha, bandwidth = fitted["shared memory"][record["transport"]]
            donors = dict(record["donors"])
            record["model_s"] = netmodel.exchange_time(
                record["transport"], donors, netmodel.one_per_rank, size, [record["bytes"]], alpha, bandwidth
            )
            record["load"] = job["load"]
        validation += job["results"]
    return {"sweep": {"shared memory": shared, "TCP loopback": tcp}, "fitted": fitted, "validation": validation}


# ---------------------------------------------------------------------------------------
# Tables


def model_tables(sizes: dict, software_latency: dict) -> tuple[list[dict], list[str]]:
    """Predicted exchange per generation (ms), one member per rank, for every network, policy and
    transport; a network's latency gets evo's own per-message cost measured here added."""
    records, tables = [], []
    for network in netmodel.NETWORKS:
        rows = []
        for size in MODEL_RANKS:
            row = [size]
            for policy, nbytes in sizes.items():
                buffers = [nbytes["buffer"]] + ([nbytes["stats"]] if nbytes["stats"] else [])
                for transport in TRANSPORTS:
                    latency = network.latency + software_latency[transport]
                    seconds = netmodel.expected_exchange_time(
                        transport, size, FRACTION, buffers, latency, network.bandwidth, draws=100
                    )
                    row.append(1e3 * seconds)
                    records.append(
                        {"network": network.name, "ranks": size, "policy": policy, "transport": transport, "s": seconds}
                    )
            rows.append(row)
        headers = ["P"] + [f"{policy} {transport}" for policy in sizes for transport in TRANSPORTS]
        tables.append(
            f"{network.name}: latency {network.latency * 1e6:g} us + evo's own, "
            f"{network.bandwidth / 1e9:g} GB/s ({network.source})\n\n" + markdown_table(headers, rows)
        )
    return records, tables


def counts_table(sizes: dict) -> str:
    rows = []
    impala = sizes["IMPALA CNN"]["buffer"]
    for size in MODEL_RANKS:
        counts = netmodel.expected_counts(size, FRACTION)
        rows.append(
            [
                size,
                counts.recipients,
                counts.busiest_sender_messages,
                f"{counts.busiest_sender_messages * impala / 1e6:.1f}",
                counts.broadcasts,
                f"{counts.broadcasts * impala / 1e6:.0f}",
            ]
        )
    headers = [
        "P",
        "recipients = p2p messages",
        "p2p: busiest donor's messages",
        "its MB (IMPALA)",
        "collective: Bcasts",
        "MB every rank receives (IMPALA)",
    ]
    return markdown_table(headers, rows)


def plan_table(plans: list[dict], software_latency: float) -> str:
    """Measured: the plan's bytes and rank 0's time to decide it. Modelled: the gather of the
    results to rank 0 and the broadcast of the plan on each network."""
    rows = []
    for plan in plans:
        row = [plan["ranks"], plan["result"], plan["plan"], 1e3 * plan["decide_s"]]
        for network in netmodel.NETWORKS:
            latency = network.latency + software_latency
            gather = netmodel.gather_time(plan["ranks"], plan["result"], latency, network.bandwidth)
            row.append(1e3 * (gather + netmodel.bcast_time(plan["ranks"], plan["plan"], latency, network.bandwidth)))
        rows.append(row)
    headers = ["P", "result bytes per member", "plan bytes", "decide ms (measured)"]
    headers += [f"gather + plan Bcast ms, {network.name}" for network in netmodel.NETWORKS]
    return markdown_table(headers, rows)


def print_exchange(exchange: dict) -> None:
    rows = [
        [link, transport, 1e6 * alpha, bandwidth / 1e9]
        for link, fitted in exchange["fitted"].items()
        for transport, (alpha, bandwidth) in fitted.items()
    ]
    print("\nevo's exchange on this host, 2 ranks, 4 B .. 64 MB, fitted t = alpha + n / bandwidth\n")
    print(markdown_table(["link", "transport", "alpha us", "bandwidth GB/s"], rows))
    groups = {}
    for record in exchange["validation"]:
        groups.setdefault((record["ranks"], record["transport"], record["bytes"]), []).append(record)
    rows = []
    for (size, transport, nbytes), records in sorted(groups.items()):
        measured, model = median([r["s"] for r in records]), median([r["model_s"] for r in records])
        rows.append([size, transport, f"{nbytes / 1e6:.2f}", 1e3 * measured, 1e3 * model, measured / model])
    print("\nThe exchange of truncation's donor maps (5 maps, medians), measured against the model (shared memory)\n")
    print(markdown_table(["ranks", "transport", "MB", "measured ms", "model ms", "measured/model"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--generations", type=int, default=10, help="per run; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=50, help="per size of the alpha-beta sweep")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--maps", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "control":
            control_plane_worker(args.generations, *rest)
        elif kind == "exchange":
            exchange_worker([int(n) for n in rest], args.maps, args.repeats)
        else:
            sizes_worker()
        return

    cpu = processor()
    print(processor_line(cpu))
    measured = launch(0, ["sizes"])["results"]
    sizes = measured["policies"]
    exchange = measure_exchange(args.ranks, sizes, args.repeats)
    control, rows = measure_control_plane(args.ranks, args.generations, exchange["fitted"]["shared memory"])
    print(
        f"\nOne generation's control plane, one tiny CartPole member per rank, mpiexec --oversubscribe on "
        f"{os.cpu_count()} cores; slowest rank, median of {args.generations - 1} generations, ms (train in s)\n"
    )
    headers = ["ranks", "transport", "load", "train s", "wait", *PHASES, "control plane", "exchange model", "barrier"]
    print(markdown_table(headers, rows))
    print("\nInside the checkpoint: serialising the members (snapshot) and writing them (files, fsync, manifest)\n")
    split = [[r["ranks"], r["transport"], 1e3 * r["snapshot"], 1e3 * r["write"], r["job_wall_s"]] for r in control]
    print(markdown_table(["ranks", "transport", "snapshot ms", "write ms", "whole job s (both runs)"], split))
    print_exchange(exchange)
    software = {t: alpha for t, (alpha, _) in exchange["fitted"]["shared memory"].items()}
    model, tables = model_tables(sizes, software)
    print("\nBytes a member exchanges (weights + Adam state, float32; VecNormalize statistics, float64)\n")
    size_rows = [[name, s["env_id"], f"{s['buffer'] / 1e6:.3f}", s["stats"]] for name, s in sizes.items()]
    print(markdown_table(["policy", "env", "weights + Adam MB", "statistics bytes"], size_rows))
    print(f"\nMessages per generation, truncation at f = {FRACTION}, one member per rank (means of 200 draws)\n")
    print(counts_table(sizes))
    for table in tables:
        print("\nModelled exchange per generation, ms: " + table)
    print("\nThe small messages: one member's result to rank 0, the plan back (truncation, perturb)\n")
    print(plan_table(measured["plans"], software["p2p"]))
    write_json(
        args.json,
        [{"cpu": cpu, "measured": measured, "exchange": exchange, "control": control, "model": model}],
    )


if __name__ == "__main__":
    main()
