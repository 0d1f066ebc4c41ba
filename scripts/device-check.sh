#!/usr/bin/env bash
# The device check of GPU members (issue 41; docs/performance.md#gpu-members), run from the repository's root
# on a machine with an NVIDIA GPU, PyTorch with CUDA, mpi4py and NumPy 2 (the workplace's device machine):
#   scripts/device-wheels.sh            here, first: the wheels that machine lacks, into .whl/
#   scripts/device-check.sh             there (OUT=folder for the results; default /tmp/device-check)
# It installs the wheels, names the machine, runs the GPU-marked tests (a GPU member's state on the GPU; exploits
# GPU<->CPU bit-exact; checkpoints across devices; bf16 through CUDA's autocast; a PBT run on 2 ranks sharing
# the GPU, resumed on the CPU) and the benchmark (bench/gpu.py: one image-task PPO member on the GPU against
# one CPU core, and 1, 2, 4, 8 ranks sharing the GPU). About 5 minutes on an H100 with 16 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-check}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMPI_MCA_btl=^ofi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
    nvidia-smi -L
    grep -m1 'model name' /proc/cpuinfo
    nproc
    python3 -c 'import torch, numpy, mpi4py, gymnasium, stable_baselines3 as sb3
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))
print("numpy", numpy.__version__, "mpi4py", mpi4py.__version__, "gymnasium", gymnasium.__version__, "sb3", sb3.__version__)'
    command -v mpiexec
} 2>&1 | tee "$OUT/machine.txt"
python3 -m pytest -m gpu tests/unit/sb3/test_device_gpu.py tests/e2e/test_gpu_runs.py -q -p no:cacheprovider -rs 2>&1 \
    | tee "$OUT/tests.txt"
tests=${PIPESTATUS[0]}
python3 bench/gpu.py --json "$OUT/gpu.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt"
bench=${PIPESTATUS[0]}
echo "tests: exit $tests; benchmark: exit $bench" | tee -a "$OUT/machine.txt"
exit $((tests || bench))
