"""Why asynchronous PBT's transport is point-to-point with a service thread and not a one-sided MPI
window: how long a passive-target ``Get`` of a donor's snapshot takes while the donor's rank
computes without entering MPI (as a rank training PPO does for seconds), against a fetch served by a
service thread (evo.mpi.asynchronous), on 2 ranks:

    python bench/async_window.py [--mb 1] [--busy 3] [--btl tcp,self] [--json FILE]

Rank 1 exposes a buffer in an ``MPI.Win`` (and the same buffer as a snapshot to its service
thread), then computes for ``--busy`` seconds in NumPy without an MPI call. Meanwhile rank 0 times
``Lock / Get / Unlock`` of the whole buffer, then a snapshot fetch. With ``--btl tcp,self`` the ranks
talk over TCP as two hosts do (no shared memory), the case the issue asks about.
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

from bench.common import markdown_table, processor, processor_line, write_json  # noqa: E402


def busy(seconds: float) -> None:
    import numpy as np

    end = time.perf_counter() + seconds
    a = np.random.default_rng(0).random((256, 256))
    while time.perf_counter() < end:
        a = np.tanh(a @ a / 256)


def worker(mb: float, seconds: float) -> None:
    import numpy as np
    from mpi4py import MPI

    from evo.learners.interface import buffers_for
    from evo.mpi.asynchronous import Service, fetch_snapshot

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    count = int(mb * 1e6 / 4)
    buffer = np.full(count, float(rank), dtype=np.float32)
    result = {}
    # 1. a window, with nothing else on rank 1 entering MPI while it computes
    window = MPI.Win.Create(buffer, comm=comm)
    comm.Barrier()
    if rank == 1:
        busy(seconds)
    else:
        time.sleep(0.2)  # rank 1 is computing
        target = np.empty(count, dtype=np.float32)
        began = time.perf_counter()
        window.Lock(1, MPI.LOCK_SHARED)
        window.Get(target, 1)
        window.Unlock(1)
        result["window_get_s"] = time.perf_counter() - began
        assert target[0] == 1.0
    comm.Barrier()
    window.Free()
    # 2. the service thread of evo.mpi.asynchronous
    service_comm = comm.Dup()
    service = Service(service_comm, {0: (1, 0, {"x": buffer})}, lambda member: None)
    service.start()
    comm.Barrier()
    if rank == 1:
        busy(seconds)
    else:
        time.sleep(0.2)
        began = time.perf_counter()
        receive = lambda layout: buffers_for(layout, {"x": np.empty(count, np.float32)})  # noqa: E731
        _, _, got = fetch_snapshot(service_comm, 1, 0, receive)
        result["service_fetch_s"] = time.perf_counter() - began
        assert got["x"][0] == 1.0
    comm.Barrier()
    service.stop()
    service_comm.Free()
    if rank == 0:
        print("RESULTS " + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=1.0, help="snapshot size in MB")
    parser.add_argument("--busy", type=float, default=3.0, help="seconds rank 1 computes without MPI")
    parser.add_argument("--btl", default="tcp,self", help="Open MPI's byte transfer layers (tcp,self: as two hosts)")
    parser.add_argument("--json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.mb, args.busy)
        return
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": args.btl}
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    command = [mpiexec, "-n", "2", "--oversubscribe", sys.executable, __file__, "--worker"]
    command += ["--mb", str(args.mb), "--busy", str(args.busy)]
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=env, cwd=ROOT).stdout
    result = json.loads(next(line for line in output.splitlines() if line.startswith("RESULTS "))[8:])
    cpu = processor()
    print(processor_line(cpu))
    rows = [
        [f"passive-target window (Lock/Get/Unlock), btl {args.btl}", result["window_get_s"]],
        ["service thread (evo.mpi.asynchronous.fetch_snapshot)", result["service_fetch_s"]],
    ]
    print(f"\n{args.mb} MB snapshot from rank 1 while it computes {args.busy} s without entering MPI\n")
    print(markdown_table(["transport", "seconds to get the snapshot"], rows))
    write_json(args.json, {"processor": cpu, "args": vars(args), **result})


if __name__ == "__main__":
    main()
