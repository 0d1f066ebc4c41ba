"""SB3's optional imports of gym and OpenCV held back for a run that uses neither (evo/sb3/holdback.py), in a fresh
interpreter each (SB3 is imported in this one): SB3 then runs as where they are not installed, any other module
still imports them, and a run that needs them (an Atari game: OpenCV) keeps them. The ranks of a real run:
tests/e2e/test_resilience.py (every rank of a CartPole run and its resume ends without gym or cv2)."""

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

PROBE = """
import json, sys
from evo.sb3.holdback import hold_back
hold_back(gym=sys.argv[1] == "1", cv2=sys.argv[2] == "1")
from evo.sb3 import _quiet  # noqa: F401  (as every evo module that uses SB3 does first)
from stable_baselines3.common import atari_wrappers
from stable_baselines3.common.vec_env import patch_gym
seen = {"sb3_gym": patch_gym.gym_installed, "sb3_cv2": atari_wrappers.cv2 is not None,
        "modules": sorted({"gym", "cv2"} & set(sys.modules))}
import cv2, gym  # any other module: imported as usual
seen["after"] = sorted({"gym", "cv2"} & set(sys.modules))
print(json.dumps(seen))
"""


def probe(gym: bool, cv2: bool) -> dict:
    pytest.importorskip("cv2", reason="OpenCV comes with the atari extra: make install EXTRAS=atari")
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE, str(int(gym)), str(int(cv2))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_held_back_sb3_runs_as_without_them_and_others_still_import_them():
    held = probe(gym=True, cv2=True)
    assert held == {"sb3_gym": False, "sb3_cv2": False, "modules": [], "after": ["cv2", "gym"]}


def test_an_atari_run_keeps_opencv_and_nothing_held_back_imports_both():
    assert probe(gym=True, cv2=False)["sb3_cv2"] is True
    assert probe(gym=False, cv2=False) | {"after": None} == {
        "sb3_gym": True,
        "sb3_cv2": True,
        "modules": ["cv2", "gym"],
        "after": None,
    }
