"""Asynchronous PBT's transport (evo.mpi.asynchronous) on 2 ranks, with real PPO members (the
CartPole MLP and the bigfish IMPALA policy, with their Adam state):

    python bench/async_transport.py [--rounds 4] [--fetches 30] [--json FILE]

- **overhead**: both ranks train their member (as in a run); env steps/s of rank 0 without the
  transport's threads and with its coordinator and service threads beside the training, idle
  (polling ``Iprobe``, evo.mpi.asynchronous.POLL_S); rounds alternate the order (ABBA) so drift cancels; median ratio.
- **fetch**: rank 0 fetches rank 1's snapshot from rank 1's service thread while rank 1's main
  thread trains (what a recipient does at a ready point), and while it idles; the floor is a
  bare Send/Recv of the same bytes between the two main threads. Medians, in ms.
- **migration**: rank 0 fetches rank 1's whole member (``member_state``: weights, optimizers,
  counters, envs; pickled) from rank 1's service thread: what moving a member to a free rank costs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    markdown_table,
    median,
    processor,
    processor_line,
    results_under_mpiexec,
    write_json,
)

POLICIES = {"mlp": ("CartPole-v1", "CartPole-v1"), "impala": ("bigfish", "procgen")}
STEPS = 256
DONE = 32301


def build(comm, env_id: str, block: str):
    from evo.config import parse_config
    from evo.runner.session import member_factory

    hp = Path(os.environ.get("TMPDIR", "/tmp")) / f"evo-bench-async-{os.getpid()}.yml"
    hp.write_text(f"{block}:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n")
    config = parse_config(
        ["--env-id", env_id, "--hyperparams", str(hp)], world_size=comm.Get_size(), check_run_dir=False
    )
    hp.unlink()
    member = member_factory(config).make(comm.Get_rank(), config.agent.defaults, tensorboard=False)
    member.train(STEPS)  # real Adam state
    return member


def threads(comm, member):
    """The transport's threads on this rank, idle: rank 0's coordinator and every rank's service."""
    from evo.core.asynchronous import Schedule
    from evo.mpi.asynchronous import Coordination, Coordinator, Service

    snapshots = {comm.Get_rank(): (1, member.env_steps, dict(member.exploit_state()))}
    started = [Service(comm, snapshots, lambda m: None)]
    if comm.Get_rank() == 0:
        started.append(Coordinator(comm, Coordination(Schedule({0: 0, 1: 1}, 1), lambda m, latest: None)))
    for thread in started:
        thread.start()
    return started


def steps_per_second(comm, member, seconds: float) -> float:
    comm.Barrier()
    began, steps = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        member.train(STEPS)
        steps += STEPS
    rate = steps / (time.perf_counter() - began)
    comm.Barrier()
    return rate


def overhead(comm, member, rounds: int, seconds: float) -> dict:
    plain, with_threads = [], []
    for round_ in range(rounds):  # ABBA: every other round measures with the threads first
        for threaded in (False, True) if round_ % 2 == 0 else (True, False):
            running = threads(comm, member) if threaded else []
            (with_threads if threaded else plain).append(steps_per_second(comm, member, seconds))
            for thread in running:
                thread.stop()
    ratios = [w / p for w, p in zip(with_threads, plain, strict=True)]
    return {"plain_steps_s": median(plain), "threads_steps_s": median(with_threads), "ratio": median(ratios)}


def fetches(comm, member, count: int, rank1_trains: bool) -> float:
    """Median ms of rank 0 fetching rank 1's snapshot from rank 1's service thread."""
    from evo.mpi.asynchronous import Service, fetch_snapshot

    rank = comm.Get_rank()
    snapshots = {rank: (1, member.env_steps, {k: v.copy() for k, v in member.exploit_state().items()})}
    service = Service(comm, snapshots, lambda m: None)
    service.start()
    comm.Barrier()
    samples = []
    if rank == 0:
        for _ in range(count):
            began = time.perf_counter()
            fetch_snapshot(comm, 1, 1, member.receive_buffers)
            samples.append((time.perf_counter() - began) * 1e3)
        comm.send("done", dest=1, tag=DONE)
    else:
        while not comm.Iprobe(source=0, tag=DONE):
            if rank1_trains:
                member.train(STEPS)
            else:
                time.sleep(0.001)
        comm.recv(source=0, tag=DONE)
    comm.Barrier()
    service.stop()
    return median(samples) if samples else float("nan")


def migrations(comm, member, count: int) -> tuple[float, int]:
    """Median ms of rank 0 fetching rank 1's whole member (its migration payload, pickled), and its bytes."""
    import pickle

    from evo.mpi.asynchronous import Service, fetch_member

    service = Service(comm, {}, lambda m: member.member_state())
    service.start()
    comm.Barrier()
    samples, size = [], 0
    if comm.Get_rank() == 0:
        for _ in range(count):
            began = time.perf_counter()
            payload = fetch_member(comm, 1, 1)
            samples.append((time.perf_counter() - began) * 1e3)
        size = len(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
    comm.Barrier()
    service.stop()
    return (median(samples) if samples else float("nan")), size


def floor(comm, member, count: int) -> float:
    state = member.exploit_state()
    samples = []
    for _ in range(count):
        comm.Barrier()
        began = time.perf_counter()
        for array in state.values():
            if comm.Get_rank() == 1:
                comm.Send(array, dest=0, tag=7)
            else:
                comm.Recv(array.copy(), source=1, tag=7)
        samples.append((time.perf_counter() - began) * 1e3)
    return median(samples)


def worker(rounds: int, seconds: float, count: int) -> None:
    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD.Dup()
    records = []
    for policy, (env_id, block) in POLICIES.items():
        member = build(comm, env_id, block)
        record = {"policy": policy, "bytes": int(sum(a.nbytes for a in member.exploit_state().values()))}
        record.update(overhead(comm, member, rounds, seconds))
        record["fetch_training_ms"] = fetches(comm, member, count, rank1_trains=True)
        record["fetch_idle_ms"] = fetches(comm, member, count, rank1_trains=False)
        record["floor_ms"] = comm.bcast(floor(comm, member, count), root=0)
        record["migrate_ms"], record["migrate_bytes"] = migrations(comm, member, max(3, count // 3))
        records.append(record)
        member.close()
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps(records), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="alternations of plain and with-threads training")
    parser.add_argument("--seconds", type=float, default=4.0, help="training time per measurement")
    parser.add_argument("--fetches", type=int, default=30)
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.rounds, args.seconds, args.fetches)
        return
    arguments = ["--rounds", str(args.rounds), "--seconds", str(args.seconds), "--fetches", str(args.fetches)]
    records = results_under_mpiexec(__file__, 2, arguments)
    cpu = processor()
    print(processor_line(cpu))
    print("\nAsynchronous transport on 2 ranks, both training (medians)\n")
    rows = [
        [
            r["policy"],
            f"{r['bytes'] / 1e6:.2f}",
            r["plain_steps_s"],
            r["threads_steps_s"],
            r["ratio"],
            r["fetch_training_ms"],
            r["fetch_idle_ms"],
            r["floor_ms"],
            r["migrate_ms"],
            f"{r['migrate_bytes'] / 1e6:.2f}",
        ]
        for r in records
    ]
    headers = ["policy", "MB", "steps/s", "steps/s with threads", "ratio", "fetch ms (donor trains)"]
    headers += ["fetch ms (donor idle)", "Send/Recv ms", "move member ms", "member MB"]
    print(markdown_table(headers, rows))
    write_json(args.json, {"processor": cpu, "records": records})


if __name__ == "__main__":
    main()
