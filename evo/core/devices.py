"""Which device a rank's members train on (``--device cpu|cuda|auto``). Pure: no torch, no MPI.

With ``cuda``, each rank takes the GPU ``local rank mod visible GPUs``: the ranks of one node share its
GPUs round-robin, several ranks to a GPU when there are more ranks than GPUs (members are small next to a
GPU's memory: evo's members-per-rank and asynchronous work sharing are the shape for it). The local rank
comes from the launcher's environment (Open MPI's, SLURM's, MPICH's, PMI's); without one (a single rank
started by hand), the rank itself. The GPUs a rank sees are counted without torch (start-up refuses a run
before torch is imported): the NVIDIA device files, narrowed by ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Mapping

DEVICES = ("cpu", "cuda", "auto")
LOCAL_RANK_VARIABLES = (
    "OMPI_COMM_WORLD_LOCAL_RANK",  # Open MPI's mpiexec
    "SLURM_LOCALID",  # srun
    "MPI_LOCALRANKID",  # MPICH, Intel MPI
    "PMI_LOCAL_RANK",
    "LOCAL_RANK",  # torchrun and others
)


def local_rank(environ: Mapping[str, str], rank: int) -> int:
    """This process's rank among the ranks of its node, from the launcher's variables; ``rank`` without one."""
    for name in LOCAL_RANK_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    return rank


def visible_gpus(environ: Mapping[str, str], device_files: list[str] | None = None) -> int:
    """How many NVIDIA GPUs this process may use: the device files ``/dev/nvidia<N>``, narrowed by
    ``CUDA_VISIBLE_DEVICES`` (empty, or ``-1``: none)."""
    files = glob.glob("/dev/nvidia[0-9]*") if device_files is None else device_files
    present = len([f for f in files if re.fullmatch(r".*/nvidia\d+", f)])
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return present
    listed = [d for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    if not listed or listed[0].strip() == "-1":
        return 0
    return min(len(listed), present) if present else len(listed)


def device_for(requested: str, local: int, gpus: int) -> str:
    """The torch device of a rank: ``cpu``, or ``cuda:<local mod gpus>`` (``auto``: a GPU if there is one)."""
    if requested == "cpu" or (requested == "auto" and gpus == 0):
        return "cpu"
    if gpus == 0:
        raise ValueError("no GPU is visible")
    return f"cuda:{local % gpus}"


def device_problem(requested: str, gpus: int, host: str, environ: Mapping[str, str]) -> str | None:
    """Why ``--device cuda`` cannot run on a rank of ``host``, with the fix; None if it can (the same text for
    every rank of a host, so that a refusal says it once)."""
    if requested != "cuda" or gpus > 0:
        return None
    shown = environ.get("CUDA_VISIBLE_DEVICES")
    where = f"CUDA_VISIBLE_DEVICES={shown!r}" if shown is not None else "no /dev/nvidia<N> device"
    return (
        f"--device cuda: the ranks on {host} see no GPU ({where}); run on a GPU node (SLURM: slurm/gpu.sbatch, "
        "--gpus-per-node), or use --device cpu (or auto: a GPU where there is one)"
    )
