"""Asynchronous against lockstep PBT with real PPO members, on 2 ranks, where one rank's training
costs twice as much (it sleeps as long as each interval's training took: the benchmark's own
slow rank; the product has no such switch) and where both ranks are alike:

    python bench/async_heterogeneous.py [--members 8] [--intervals 4] [--steps 1024] [--json FILE]

- lockstep: evo's generation loop (evo.loop.run_generations: train, gather, plan, exchange), the
  members placed in blocks as the scripts place them;
- asynchronous: evo.mpi.asynchronous's workers (members as tasks: the fast rank trains the
  members that are due, moving them from the slow rank).

Both train every member for the same intervals of the same env steps with truncation and random
perturbation. Wall time of the whole run (the slowest rank), each mode twice, alternated; the
asynchronous/lockstep ratio of the medians, and the intervals each rank trained. The work-sharing
ideal with one rank twice as slow is 2/3 of the lockstep time (lockstep: 2 units a round;
asynchronous: the work of 3 units shared as 2 + 1).
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

TINY = "CartPole-v1:\n  n_envs: 2\n  n_steps: 128\n  n_minibatches: 2\n  n_epochs: 2\n"


def setup(comm, members: int):
    from evo.config import parse_config

    hp = Path(os.environ.get("TMPDIR", "/tmp")) / f"evo-bench-async-het-{os.getpid()}-{comm.Get_rank()}.yml"
    hp.write_text(TINY)
    config = parse_config(
        ["--env-id", "CartPole-v1", "--hyperparams", str(hp), "--num-agents", str(members), "--tb-writer", "False"],
        world_size=comm.Get_size(),
        check_run_dir=False,
    )
    hp.unlink()
    return config


def trainer(comm, steps: int, slow: bool):
    """Train one interval; the slow rank then sleeps as long again."""
    trained = []

    def train(member, should_stop) -> None:
        began = time.perf_counter()
        member.train(steps, should_stop)
        if slow and comm.Get_rank() == 1:
            time.sleep(time.perf_counter() - began)
        trained.append(member.member_id)

    return train, trained


def score(member):
    scores = member.evaluate()
    member.scores.append(scores.score)
    return scores


def lockstep(comm, config, intervals: int, steps: int, slow: bool) -> tuple[float, int]:
    from evo.core.explorers import make_explorer
    from evo.core.plan import generation_rng, plan_generation
    from evo.runner.loop import Hooks, LoopSettings, run_generations
    from evo.runner.session import member_factory

    members = {m: member_factory(config).make(m, tensorboard=False) for m in config.members_of(comm.Get_rank())}
    explorer = make_explorer("perturb", config.agent.search_space)
    train, trained = trainer(comm, steps, slow)

    def plan(generation, population):
        return plan_generation(generation, population, "truncation", explorer, generation_rng(0, generation))

    hooks = Hooks(train=train, score=score, plan=plan)
    comm.Barrier()
    began = time.perf_counter()
    run_generations(comm, members, config.owner, hooks, LoopSettings(0, intervals))
    comm.Barrier()
    wall = time.perf_counter() - began
    for member in members.values():
        member.close()
    return wall, len(trained)


def asynchronous(comm, config, intervals: int, steps: int, slow: bool) -> tuple[float, int]:
    from evo.core.asynchronous import Schedule, decide_at_ready, ready_rng
    from evo.core.explorers import make_explorer
    from evo.mpi.asynchronous import Coordination, WorkerHooks, run_workers
    from evo.runner.session import member_factory

    rank = comm.Get_rank()
    members = {m: member_factory(config).make(m, tensorboard=False) for m in config.members_of(rank)}
    explorer = make_explorer("perturb", config.agent.search_space)
    train, trained = trainer(comm, steps, slow)

    def pack(member):
        state = member.member_state()
        member.close()
        return state

    def adopt(member_id, state):
        member = member_factory(config).make(member_id, state["hparams"], tensorboard=False)
        member.restore(state)
        return member

    def decide(member, latest):
        rng = ready_rng(0, member, latest[member].interval)
        return decide_at_ready(member, latest, "truncation", explorer, rng)

    placement = {m: config.owner(m) for m in range(config.num_agents)}
    plan = Coordination(Schedule(placement, intervals), decide) if rank == 0 else None
    hooks = WorkerHooks(train=train, score=score, pack=pack, adopt=adopt)
    comm.Barrier()
    began = time.perf_counter()
    run_workers(comm, members, hooks, plan)
    comm.Barrier()
    wall = time.perf_counter() - began
    for member in members.values():
        member.close()
    return wall, len(trained)


def worker(members: int, intervals: int, steps: int, repeats: int) -> None:
    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    config = setup(comm, members)
    records = []
    for slow in (True, False):
        for _ in range(repeats):
            for mode, run in (("lockstep", lockstep), ("asynchronous", asynchronous)):
                wall, count = run(comm, config, intervals, steps, slow)
                walls = comm.gather(wall, root=0)
                counts = comm.gather(count, root=0)
                if comm.Get_rank() == 0:
                    records.append({"slow_rank": slow, "mode": mode, "wall_s": max(walls), "intervals_by_rank": counts})
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps(records), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--intervals", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1024, help="env steps per member and interval")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.members, args.intervals, args.steps, args.repeats)
        return
    arguments = ["--members", str(args.members), "--intervals", str(args.intervals), "--steps", str(args.steps)]
    records = results_under_mpiexec(__file__, 2, [*arguments, "--repeats", str(args.repeats)])
    cpu = processor()
    print(processor_line(cpu))
    print(f"\n{args.members} PPO members on 2 ranks, {args.intervals} intervals of {args.steps} env steps each\n")
    rows = []
    for slow in (True, False):
        walls = {
            mode: median([r["wall_s"] for r in records if r["slow_rank"] == slow and r["mode"] == mode])
            for mode in ("lockstep", "asynchronous")
        }
        counts = next(r["intervals_by_rank"] for r in records if r["slow_rank"] == slow and r["mode"] == "asynchronous")
        rows.append(
            [
                "rank 1 twice as slow" if slow else "alike",
                walls["lockstep"],
                walls["asynchronous"],
                walls["asynchronous"] / walls["lockstep"],
                " / ".join(str(c) for c in counts),
            ]
        )
    headers = ["ranks", "lockstep s", "asynchronous s", "async / lockstep", "intervals by rank (async)"]
    print(markdown_table(headers, rows))
    write_json(args.json, {"processor": cpu, "args": vars(args), "records": records})


if __name__ == "__main__":
    main()
