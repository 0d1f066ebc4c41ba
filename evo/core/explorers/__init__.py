"""How recipients change their hyperparameters: the explorers, by ``--explore`` name (pure).

One module per explorer, one line each in :data:`EXPLORERS` (see :mod:`evo.core.explorers.base`
for the interface, and for what an explorer declares it can do: the config's checks and
``--explore``'s help read it from the classes registered here when the parser is built).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.explorers.base import Change, Explorer
from evo.core.explorers.casmo import Casmo
from evo.core.explorers.mixed import PB2Mix, PB2Mult, PB2Rand
from evo.core.explorers.pb2 import PB2
from evo.core.explorers.perturb import Perturb, explore
from evo.core.kinds import SearchSpace

DEFAULT_EXPLORER = "perturb"
"""``--explore``'s default, and the only explorer ``--strategy none`` accepts (it never explores)."""

EXPLORERS: dict[str, type[Explorer]] = {
    "perturb": Perturb,  # random perturbation or resampling (the PBT paper)
    "pb2": PB2,  # PB2's GP bandit on the population's history (Parker-Holder et al. 2020)
    # the Procgen AutoRL paper's explorers for spaces with categories (Parker-Holder et al. 2021)
    "pb2-rand": PB2Rand,  # categories kept or redrawn at random, PB2 for the rest
    "pb2-mult": PB2Mult,  # categories by TV.EXP3.M, a GP per category
    "pb2-mix": PB2Mix,  # categories by TV.EXP3.M, one GP with CoCaBO's mixture kernel
    "casmo": Casmo,  # BG-PBT's trust-region BO over mixed spaces (Wan et al. 2022)
}

__all__ = [
    "DEFAULT_EXPLORER",
    "EXPLORERS",
    "Casmo",
    "PB2",
    "PB2Mix",
    "PB2Mult",
    "PB2Rand",
    "Change",
    "Explorer",
    "Perturb",
    "explore",
    "make_explorer",
]


def make_explorer(
    name: str,
    space: SearchSpace,
    perturb_factors: Sequence[float] = (0.8, 1.2),
    resample_probability: float = 0.25,
    state: Mapping[str, Any] | None = None,
    rounds: int = 0,
    population: int = 0,
) -> Explorer:
    """Explorer ``name`` over ``space`` for a run of ``rounds`` generations and ``population``
    members (0: unknown), continuing from a checkpoint's ``state`` if given."""
    if name not in EXPLORERS:
        raise ValueError(f"unknown explorer {name!r}; use one of {', '.join(EXPLORERS)}")
    explorer = EXPLORERS[name](space, perturb_factors, resample_probability, rounds=rounds, population=population)
    explorer.restore(state)
    return explorer
