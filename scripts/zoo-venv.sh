#!/usr/bin/env bash
# The evo-less virtualenv the export tests play exported agents in: stable-baselines3 and
# rl_zoo3 without evo, with evo's own torch, gymnasium, MuJoCo, ale-py, OpenCV, SB3, sb3-contrib,
# NumPy and cloudpickle versions (read from evo's virtualenv). Cached: a stamp holds the versions it was built with,
# and a second call with the same versions does nothing.
#   scripts/zoo-venv.sh ZOO_VENV EVO_PYTHON
set -euo pipefail
venv=${1:?usage: scripts/zoo-venv.sh ZOO_VENV EVO_PYTHON}
evo_python=${2:?usage: scripts/zoo-venv.sh ZOO_VENV EVO_PYTHON}
venv=$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")
python=${PYTHON:-python3}
zoo_version=2.9.2
# (MuJoCo, ale-py and OpenCV only where evo has them: without the mujoco or atari extra, the venv has none either)
pins=$("$evo_python" -c 'from importlib.metadata import PackageNotFoundError, version
def pin(name):
    try:
        return f"{name}=={version(name)}"
    except PackageNotFoundError:
        return "" if name in OPTIONAL else exit(f"evo has no {name}")
OPTIONAL = ("mujoco", "ale-py", "opencv-python-headless")
names = ("stable-baselines3", "sb3-contrib", "gymnasium", "numpy", "cloudpickle", *OPTIONAL)
print(*filter(None, map(pin, names)))')
# torch's version without its local tag (+cpu): pip's index here has the CPU wheel under it
torch=$("$evo_python" -c 'from importlib.metadata import version; print(version("torch").split("+")[0])')
want="rl_zoo3==$zoo_version requests torch==$torch $pins"
stamp="$venv/.installed-stamp"
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    exit 0
fi
test -x "$venv/bin/python" || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# torch first and pinned, the CPU wheel (scripts/install-torch.sh): any other version pulls gigabytes of CUDA wheels
bash "$(dirname "$0")/install-torch.sh" "$venv/bin/python" "$torch" cpu
# shellcheck disable=SC2086  (the pins are words)
# requests: rl_zoo3.enjoy imports it (its hub loader) without requiring it
"$venv/bin/python" -m pip install --quiet "rl_zoo3==$zoo_version" requests $pins
if (cd / && env -u PYTHONPATH "$venv/bin/python" -c 'import evo' 2>/dev/null); then  # installed there, not on the caller's path
    echo "$venv: evo is importable here, and must not be" >&2
    exit 1
fi
echo "$want" >"$stamp"
