#!/usr/bin/env bash
# Installs torch, pinned, into a virtualenv, before anything that depends on it (any other version, or an
# unpinned one, pulls gigabytes of CUDA packages), and says which build it got.
#   scripts/install-torch.sh PYTHON VERSION cpu|cuda
# cpu (make's TORCH=cpu, the default): the CPU wheel from PyTorch's CPU index (TORCH_CPU_INDEX), given to pip as
#   an extra index, since PyPI's Linux torch is the CUDA build. Where that index cannot be reached (a machine that
#   sees only PyPI), pip takes torch from its own set-up (find-links, a mirror) or else PyPI's CUDA build, which
#   runs on the CPU too: this says so, and how to point pip at the CPU wheel.
# cuda (TORCH=cuda): the CUDA build of the same version from PyTorch's CUDA index (TORCH_CUDA_INDEX).
set -euo pipefail
usage="usage: scripts/install-torch.sh PYTHON VERSION cpu|cuda"
python=${1:?$usage}
version=${2:?$usage}
build=${3:?$usage}
cpu_index=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
cuda_index=${TORCH_CUDA_INDEX:-https://download.pytorch.org/whl/cu128}
pip=("$python" -m pip install --quiet)
reachable() { # reachable URL: answers within 20 s (pip would otherwise retry every package there for seconds)
    "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=20)' "$1" 2>/dev/null
}
case $build in
cuda) "${pip[@]}" --index-url "$cuda_index" "torch==$version" ;;
cpu)
    if reachable "$cpu_index/torch/"; then
        "${pip[@]}" --extra-index-url "$cpu_index" "torch==$version"
    else
        echo "PyTorch's CPU index ($cpu_index) cannot be reached from here: torch comes from pip's own set-up"
        "${pip[@]}" "torch==$version"
    fi
    ;;
*) echo "$usage" >&2; exit 2 ;;
esac
got=$("$python" -W ignore -c 'import torch; print(torch.__version__, "cuda" if torch.version.cuda else "cpu")')
echo "torch ${got% *}, the ${got##* } build, in $(dirname "$(dirname "$python")")"
if [[ $build == cpu && ${got##* } == cuda ]]; then
    cat >&2 <<MSG
note: pip took torch's CUDA build, several GB more than the CPU wheel, since neither PyTorch's CPU index
      ($cpu_index) nor anything in your pip set-up had torch $version+cpu. It runs on the CPU as well.
      For the CPU wheel, point pip at a copy of it (PIP_FIND_LINKS=DIR, or TORCH_CPU_INDEX=URL of a mirror
      of PyTorch's CPU index), then: make clean && make install
MSG
fi
