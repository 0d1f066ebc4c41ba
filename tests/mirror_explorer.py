"""A test-only explorer: one class, registered by each test that uses it with one line
(``EXPLORERS["mirror"] = Mirror``), to prove that an explorer needs nothing more: the config
offers it, checks it by what it declares, and a run applies its changes.

The tests register it in process: tests/unit/runner/test_registered_explorer.py (an asynchronous run
applying its changes), tests/unit/config/test_capabilities.py and test_objective_config.py. No test runs
this module as a script any more (since issue 58); run as a module, it is still pbt_rl_truct.py with the
explorer registered (its registry line below), for a look by hand::

    mpiexec -n 2 python -m tests.mirror_explorer --explore mirror --asynchronous ...
"""

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evo.core.explorers.base import Change, Explored, Explorer

HOW = "mirror, test-only"
"""How each value moved, as the lineage writes it: ``name : old --- (mirror, test-only) --> new``."""


def mirrored(kind, value: Any) -> Any:
    """``value`` mirrored in its kind's [0, 1] coordinate (1 - u): within bounds for every kind."""
    return kind.from_unit(1.0 - kind.to_unit(kind.coerce(value)))


class Mirror(Explorer):
    """Each recipient takes its donor's values mirrored within their ranges; no memory, no draws."""

    name = "mirror"
    summary = "a test-only explorer: each value mirrored within its range"
    asynchronous = True

    def explore(self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[Explored]:
        explored = []
        for start in starts:
            new = dict(start)
            changes = []
            for name, kind in self.space.items():
                new[name] = mirrored(kind, start[name])
                changes.append(Change(name, kind.coerce(start[name]), new[name], HOW))
            explored.append((new, changes))
        return explored


if __name__ == "__main__":
    from evo.core.explorers import EXPLORERS
    from evo.main import main_truct

    EXPLORERS["mirror"] = Mirror
    sys.exit(main_truct())
