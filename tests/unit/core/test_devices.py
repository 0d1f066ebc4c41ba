"""Which device a rank trains on (evo/core/devices.py), by cases: the local rank from each launcher's
variables, the GPUs counted from the device files and CUDA_VISIBLE_DEVICES, a GPU per local rank round
robin, and the refusal of --device cuda where no GPU is visible."""

import pytest

from evo.core.devices import device_for, device_problem, local_rank, visible_gpus

GPUS = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "3", "SLURM_LOCALID": "1"}, 3),  # Open MPI's first
        ({"SLURM_LOCALID": "1"}, 1),
        ({"MPI_LOCALRANKID": "2"}, 2),
        ({"PMI_LOCAL_RANK": "5"}, 5),
        ({"LOCAL_RANK": "4"}, 4),
        ({}, 7),  # none: the rank itself
        ({"SLURM_LOCALID": ""}, 7),
    ],
)
def test_the_local_rank_comes_from_the_launcher(environ, expected):
    assert local_rank(environ, rank=7) == expected


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, 2),
        ({"CUDA_VISIBLE_DEVICES": "1"}, 1),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2),
        ({"CUDA_VISIBLE_DEVICES": ""}, 0),
    ]
    + [({"CUDA_VISIBLE_DEVICES": "-1"}, 0)],
)
def test_visible_gpus_are_the_device_files_narrowed_by_cuda_visible_devices(environ, expected):
    assert visible_gpus(environ, GPUS) == expected
    assert visible_gpus({}, ["/dev/nvidiactl"]) == 0  # the control file alone is no GPU


def test_ranks_share_the_gpus_round_robin():
    assert [device_for("cuda", local, 2) for local in range(5)] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"]
    assert device_for("cuda", 3, 1) == "cuda:0"  # 4 ranks on one GPU
    assert device_for("auto", 1, 2) == "cuda:1" and device_for("auto", 1, 0) == "cpu"
    assert device_for("cpu", 0, 8) == "cpu"
    with pytest.raises(ValueError):
        device_for("cuda", 0, 0)


def test_cuda_without_a_gpu_is_refused_with_the_fix():
    said = device_problem("cuda", 0, "node-3", {"CUDA_VISIBLE_DEVICES": ""})
    assert "--device cuda: the ranks on node-3 see no GPU (CUDA_VISIBLE_DEVICES='')" in said
    assert "--device cpu" in said and "gpu.sbatch" in said
    assert device_problem("cuda", 1, "node-3", {}) is None
    assert device_problem("auto", 0, "node-3", {}) is None and device_problem("cpu", 0, "node-3", {}) is None
