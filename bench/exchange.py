"""Per-generation weight exchange: evo (p2p and collective) vs the raw MPI floor and a
pickled state_dict broadcast, for the IMPALA and MLP policies with their Adam state.

    python bench/exchange.py [--ranks 2 4] [--repeats 30] [--json FILE]

Launches itself under mpiexec for each rank count. The donor map is truncation's at the
default fraction (one donor -> one recipient on another rank at n = 2 and 4). Each time is
the slowest rank's, median of the repeats:
  evo_ms     pack + exchange + load, as evo's run loop does them (zero-copy buffers)
  floor_ms   the same bytes moved by a bare Send/Recv (p2p) or Bcast (collective)
  pickle_ms  comm.bcast of the policy's and optimizer's state_dicts (what pickling scripts do)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, median, write_json  # noqa: E402

POLICIES = {"impala": ("bigfish", "procgen"), "mlp": ("CartPole-v1", "CartPole-v1")}


def timed(comm, action, repeats: int) -> float:
    """Median over repeats of the slowest rank's time for ``action``, in ms."""
    from mpi4py import MPI

    samples = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        action()
        elapsed = time.perf_counter() - start
        samples.append(comm.allreduce(elapsed, op=MPI.MAX) * 1e3)
    return median(samples)


def _cloned(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _cloned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cloned(v) for v in value]
    return value


def measure_policy(comm, policy: str, env_id: str, block: str, repeats: int) -> list[dict]:
    import numpy as np

    from evo.config import parse_config
    from evo.mpi import exchange
    from evo.runner.session import member_factory

    rank, size = comm.Get_rank(), comm.Get_size()
    hp = Path(os.environ.get("TMPDIR", "/tmp")) / f"evo-bench-exchange-{os.getpid()}.yml"
    hp.write_text(f"{block}:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n")
    config = parse_config(["--env-id", env_id, "--hyperparams", str(hp)], world_size=size, check_run_dir=False)
    hp.unlink()
    member = member_factory(config).make(rank, config.agent.defaults, tensorboard=False)
    member.train(64)  # real Adam state
    donors = {size - 1: 0}  # truncation at f=0.25, n=2..4: the worst member copies the best
    scratch = np.empty_like(member.buffer)
    scratch_buffers: dict = {}

    def evo_exchange(transport):
        def run():
            states = {rank: member.exploit_state()} if rank == 0 else {}
            received, _ = exchange.exchange(
                comm,
                transport,
                donors,
                lambda m: m,
                states,
                lambda r, layout: member.receive_buffers(layout),
                scratch_buffers,
            )
            if rank == size - 1:
                member.load(received[rank], member.hparams)

        return run

    def floor_p2p():
        if rank == 0:
            comm.Send(member.buffer, dest=size - 1, tag=7)
        elif rank == size - 1:
            comm.Recv(scratch, source=0, tag=7)

    def floor_bcast():
        comm.Bcast(member.buffer if rank == 0 else scratch, root=0)

    # What a pickling script sends: the state_dicts of an ordinary model. Ours are views of one
    # flat buffer, and pickle would serialise that whole buffer once per tensor, so the
    # baseline gets private copies (made here, outside the timing).
    policy_module = member.model.policy
    state = {
        "policy": {k: v.clone() for k, v in policy_module.state_dict().items()},
        "optimizer": _cloned(policy_module.optimizer.state_dict()),
    }

    def pickled():
        comm.bcast(state if rank == 0 else None, root=0)

    pickle_ms = timed(comm, pickled, max(5, repeats // 3))
    records = []
    for mode, floor in (("p2p", floor_p2p), ("collective", floor_bcast)):
        records.append(
            {
                "policy": policy,
                "mode": mode,
                "ranks": size,
                "bytes": int(member.buffer.nbytes),
                "evo_ms": timed(comm, evo_exchange(mode), repeats),
                "floor_ms": timed(comm, floor, repeats),
                "pickle_ms": pickle_ms,
            }
        )
    member.close()
    return records


def worker(repeats: int) -> None:
    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    records = []
    for policy, (env_id, block) in POLICIES.items():
        records += measure_policy(comm, policy, env_id, block, repeats)
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps(records), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.repeats)
        return
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    records = []
    for ranks in args.ranks:
        command = [
            mpiexec,
            "-n",
            str(ranks),
            "--oversubscribe",
            sys.executable,
            __file__,
            "--worker",
            "--repeats",
            str(args.repeats),
        ]
        output = subprocess.run(command, capture_output=True, text=True, check=True, env=env, cwd=ROOT).stdout
        line = next(line for line in output.splitlines() if line.startswith("RESULTS "))
        records += json.loads(line[len("RESULTS ") :])
    rows = [
        [
            r["policy"],
            r["mode"],
            r["ranks"],
            f"{r['bytes'] / 1e6:.2f}",
            r["evo_ms"],
            r["floor_ms"],
            r["evo_ms"] / r["floor_ms"],
            r["pickle_ms"],
            r["pickle_ms"] / r["evo_ms"],
        ]
        for r in records
    ]
    print(f"Weight exchange per generation, medians of {args.repeats} (slowest rank)\n")
    print(
        markdown_table(
            ["policy", "mode", "ranks", "MB", "evo ms", "floor ms", "evo/floor", "pickle ms", "pickle/evo"], rows
        )
    )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
