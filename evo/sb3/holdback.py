"""What SB3 imports when it is installed, whether a run uses it or not: the unmaintained ``gym`` (SB3 offers old
gym envs through shimmy; procgen-mirror depends on gym, so it is always installed) and OpenCV (SB3's Atari
wrappers; the atari extra installs it).

:func:`hold_back`: a run that needs neither (a registered gymnasium env that is not a Procgen or Atari game, with
no env wrapper of the YAML's) makes SB3's own imports of them fail as if they were not installed, before SB3 is
first imported: each rank then imports neither (gym and OpenCV were 15 and 14 MB of imports apart; one CartPole
rank's peak RSS went from 299 to 283 MB, 2026-12-06). Only SB3's two optional imports are held back
(:data:`HELD_BY`); any other module imports gym or OpenCV as usual. This module imports nothing of SB3's.
"""

import importlib.abc
import sys

HELD_BY = {
    "gym": ("stable_baselines3.common.vec_env.patch_gym",),
    "cv2": ("stable_baselines3.common.atari_wrappers",),
}
"""The optional imports held back, each with the SB3 modules whose import of it fails when it is held back."""


class _HoldBack(importlib.abc.MetaPathFinder):
    """Fails the import of a held-back module when one of :data:`HELD_BY`'s SB3 modules makes it."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__") if frame is not None else None
        if importer in HELD_BY[name]:
            raise ModuleNotFoundError(f"{name} is held back for this run (evo.sb3._quiet)", name=name)
        return None


def hold_back(gym: bool, cv2: bool) -> None:
    """Before SB3 is first imported: SB3's optional imports of ``gym`` and OpenCV (``cv2``) fail, for those given
    True. Once SB3 is imported (a tool, a test in the same process) it is too late, and nothing is held back."""
    names = frozenset(name for name, held in (("gym", gym), ("cv2", cv2)) if held)
    if not names or "stable_baselines3" in sys.modules:
        return
    sys.meta_path.insert(0, _HoldBack(names))


def held_back(name: str) -> bool:
    return any(isinstance(finder, _HoldBack) and name in finder.names for finder in sys.meta_path)
