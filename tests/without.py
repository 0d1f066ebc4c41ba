"""Runs a script with some packages made unimportable: ``python tests/without.py torch,stable_baselines3
SCRIPT ARGS...``. An import of one of them raises ImportError, so a test can show that a path of
the program (bad input refused at start-up, say) never needs them."""

import importlib.abc
import runpy
import sys


class Refuse(importlib.abc.MetaPathFinder):
    def __init__(self, packages: set[str]):
        self.packages = packages

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.packages:
            raise ImportError(f"{name} is blocked by tests/without.py")
        return None


if __name__ == "__main__":
    blocked, script, *args = sys.argv[1:]
    sys.meta_path.insert(0, Refuse(set(blocked.split(","))))
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
