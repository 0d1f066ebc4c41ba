"""GPU members, measured (issue 41): env steps per second of one image-task PPO member (IMPALA-CNN on
bench/image_env.py's Catch, 64 x 64 RGB) on the GPU against the same member on one CPU core, and 1, 2, 4
and 8 ranks sharing one GPU (each rank one member: throughput, and GPU memory per member), with the CPU
and the GPU named. Run by scripts/device-check.sh on a machine with a GPU:

    python bench/gpu.py --json OUT/gpu.json [--steps 16384] [--ranks 1 2 4 8]

Each measurement trains the member through evo's own SB3 member (evo.runner.session.member_factory): a
warm-up rollout first (CUDA's kernels chosen, the allocator grown), then ``--steps`` env steps timed.
The ranks sharing the GPU run as ``mpiexec -n K python bench/gpu.py --worker``: every rank builds its
member on ``cuda:0`` (local rank mod 1 GPU), trains at the same time as the others, and reports its env
steps per second and ``torch.cuda.max_memory_allocated``; rank 0 gathers them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETTINGS = ["policy:impala", "n_envs:8", "n_steps:128", "n_minibatches:4", "n_epochs:3"]
"""One member's PPO settings: 8 envs x 128 steps a rollout, 4 minibatches, 3 epochs (IMPALA-CNN)."""


def build(device: str):
    """One Catch member on ``device``, as a run builds it."""
    import bench.image_env  # noqa: F401  (registers Catch-v0)
    from evo.config import parse_config
    from evo.runner.session import member_factory

    config = parse_config(
        ["--env-id", "bench.image_env:Catch-v0", "--hyperparams", *SETTINGS, "--tb-writer", "False"],
        check_run_dir=False,
    )
    return member_factory(config, device).make(0, config.agent.defaults, tensorboard=False)


def measure(device: str, steps: int) -> dict:
    """Env steps per second of one member on ``device`` (after a warm-up rollout), and its peak GPU memory."""
    import torch

    member = build(device)
    member.train(8 * 128)  # warm-up: one rollout and its update
    if device != "cpu":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    before, start = member.env_steps, time.perf_counter()
    member.train(steps)  # rounded up to whole rollouts: counted by the member
    if device != "cpu":
        torch.cuda.synchronize()
    seconds, trained = time.perf_counter() - start, member.env_steps - before
    found = {"device": device, "env_steps": trained, "seconds": seconds, "env_steps_per_s": trained / seconds}
    if device != "cpu":
        found["max_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
    member.close()
    return found


def worker(steps: int) -> None:
    """One rank of K sharing the GPU: its member's numbers, gathered on rank 0 (printed as JSON)."""
    import torch
    from mpi4py import MPI

    from evo.core.devices import device_for, local_rank

    comm = MPI.COMM_WORLD
    torch.set_num_threads(1)
    device = device_for("cuda", local_rank(os.environ, comm.Get_rank()), torch.cuda.device_count())
    comm.Barrier()  # every rank trains at once
    found = measure(device, steps)
    gathered = comm.gather(found, root=0)
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps(gathered), flush=True)


def shared(ranks: int, steps: int) -> dict:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    command = [str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", str(ranks), "--oversubscribe"]
    command += [sys.executable, str(Path(__file__)), "--worker", "--steps", str(steps)]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        return {"ranks": ranks, "error": done.stderr[-2000:]}
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    members = json.loads(line[len("RESULTS ") :])
    return {
        "ranks": ranks,
        "env_steps_per_s_total": sum(m["env_steps_per_s"] for m in members),
        "env_steps_per_s_per_member": [m["env_steps_per_s"] for m in members],
        "max_memory_mb_per_member": [m.get("max_memory_mb") for m in members],
    }


def machine() -> dict:
    import torch

    cpu = platform.processor()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--steps", type=int, default=16384)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.steps)
        return 0
    import torch

    torch.set_num_threads(1)  # the CPU member on one core, as a rank has it
    result = {"machine": machine(), "settings": SETTINGS, "steps": args.steps}
    result["cpu_one_core"] = measure("cpu", args.steps // 4)  # a quarter: the CPU is slow at it
    if torch.cuda.is_available():
        result["gpu_one_member"] = measure("cuda:0", args.steps)
        result["speedup"] = result["gpu_one_member"]["env_steps_per_s"] / result["cpu_one_core"]["env_steps_per_s"]
        result["shared"] = [shared(k, args.steps) for k in args.ranks]
    text = json.dumps(result, indent=1)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
