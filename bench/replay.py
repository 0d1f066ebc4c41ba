"""What an off-policy member's replay buffer costs: at an exploit with ``--exploit-buffer copy``,
and in a checkpoint (with it, and with ``--no-checkpoint-buffers``).

    python bench/replay.py [--transitions 100000 1000000] [--repeats 5] [--json FILE]

Launches itself under ``mpiexec -n 2``: rank 0 holds a SAC member whose replay buffer is full
with ``--transitions`` transitions (random content: the cost does not depend on it), rank 1 a
member that copies it. For Pendulum-v1 (3 observations, 1 action) and HalfCheetah-v5 (17 and 6;
needs the mujoco extra) it times, median of the repeats, the slowest rank:

  exploit_ms   the exploit with --exploit-buffer own (networks and optimizers only), then with copy
               (the buffer's filled part too: sent from the donor's arrays, received into the
               recipient's), through evo's exchange as the run loop does it (p2p)
  checkpoint   the member file's size and the time to build it and write it to disk (fsync), with the
               replay buffer and without it
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

from bench.common import markdown_table, median, processor, processor_line, write_json  # noqa: E402
from bench.exchange import timed  # noqa: E402

ENVS = ("Pendulum-v1", "HalfCheetah-v5")


def member_with_full_buffer(env_id: str, transitions: int, exploit_buffer: str, rank: int):
    import numpy as np

    from evo.config import parse_config
    from evo.runner.session import member_factory

    argv = ["--algo", "sac", "--env-id", env_id, "--exploit-buffer", exploit_buffer, "--hyperparams"]
    argv += [f"buffer_size:{transitions}", "learning_starts:0"]
    config = parse_config(argv, world_size=2, check_run_dir=False)
    member = member_factory(config).make(rank, config.agent.defaults, tensorboard=False)
    buffer = member.model.replay_buffer
    rng = np.random.default_rng(rank)
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
        array = getattr(buffer, name)
        array[...] = rng.standard_normal(array.shape).astype(array.dtype)
    buffer.pos, buffer.full = 0, True
    return member


def measure(comm, env_id: str, transitions: int, repeats: int) -> dict:
    from evo.mpi import exchange
    from evo.rundir.checkpoint import atomic_write, dump_payload, member_payload
    from evo.sb3.rng import rng_state

    rank = comm.Get_rank()
    record: dict = {"env_id": env_id, "transitions": transitions}
    for mode in ("own", "copy"):
        member = member_with_full_buffer(env_id, transitions, mode, rank)

        def exploit(member=member, donors={1: 0}):  # noqa: B006 (read only)
            states = {0: member.exploit_state()} if rank == 0 else {}
            received, _ = exchange.exchange(
                comm, "p2p", donors, lambda m: m, states, lambda r, layout: member.receive_buffers(layout)
            )
            if rank == 1:
                member.load(received[1], member.hparams)

        record[f"exploit_{mode}_ms"] = timed(comm, exploit, repeats)
        if mode == "copy":
            record["copy_mb"] = sum(a.nbytes for a in member.exploit_state().values()) / 1e6
            with tempfile.TemporaryDirectory() as tmp:
                for replay in (True, False):
                    key = "with" if replay else "without"
                    sizes, seconds = [], []
                    for _ in range(max(2, repeats // 2)):
                        start = time.perf_counter()
                        data = dump_payload(member_payload(member, "bench", 1, rng_state(), replay=replay))
                        atomic_write(Path(tmp) / f"member_{rank}.pt", data)
                        seconds.append(time.perf_counter() - start)
                        sizes.append(len(data))
                    record[f"checkpoint_{key}_mb"] = sizes[-1] / 1e6
                    record[f"checkpoint_{key}_s"] = median(seconds)
        member.close()
    return record


def worker(envs: list[str], transitions: list[int], repeats: int) -> None:
    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    records = [measure(comm, env_id, count, repeats) for env_id in envs for count in transitions]
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps(records), flush=True)


def available_envs() -> list[str]:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        print("HalfCheetah-v5 left out: the mujoco extra is not installed (make install EXTRAS=mujoco)")
        return ["Pendulum-v1"]
    return list(ENVS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--envs", nargs="+", default=None)
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.envs, args.transitions, args.repeats)
        return
    envs = args.envs or available_envs()
    cpu = processor()
    print(processor_line(cpu))
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    command = [mpiexec, "-n", "2", "--oversubscribe", sys.executable, __file__, "--worker", "--repeats"]
    command += [str(args.repeats), "--envs", *envs, "--transitions", *map(str, args.transitions)]
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=env, cwd=ROOT).stdout
    line = next(line for line in output.splitlines() if line.startswith("RESULTS "))
    records = json.loads(line[len("RESULTS ") :])
    rows = [
        [
            r["env_id"],
            r["transitions"],
            r["copy_mb"],
            r["exploit_own_ms"],
            r["exploit_copy_ms"],
            r["checkpoint_with_mb"],
            r["checkpoint_with_s"],
            r["checkpoint_without_mb"],
            r["checkpoint_without_s"],
        ]
        for r in records
    ]
    headers = ["env", "transitions", "copy MB", "exploit own ms", "exploit copy ms"]
    headers += ["ckpt MB", "ckpt s", "ckpt MB no buffer", "ckpt s no buffer"]
    print(f"\nSAC replay buffer, 2 ranks, medians of {args.repeats} (slowest rank)\n")
    print(markdown_table(headers, rows))
    write_json(args.json, {"processor": cpu, "records": records})


if __name__ == "__main__":
    main()
