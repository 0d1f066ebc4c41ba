"""Pareto fronts and MO-PBT's order of a population with several objectives (pure, numpy only).

MO-PBT (Dushatskiy et al., ICML 2023) ranks a population by two rules, as its code does
(``search/mo_utils.py``: ``fastNonDominatedSorting`` then ``epsnet_sort_all_fronts``):

1. **non-dominated sorting** (Deb et al. 2002): the first front holds the members no other member
   dominates (at least as good in every objective, better in one), the second those only the first
   front dominates, and so on. Equal members dominate neither each other: they share a front.
2. **the spread rule within a front, an ε-net** (MO-ASHA's, Schmucker et al. 2021, which MO-PBT
   uses): the first member of the first front is its best in the first objective; then, front by
   front, the member farthest (Euclidean) from every member already placed comes next, until the
   front is placed. Ties go to the better first objective, then the lower index. A member at the
   same point as one already placed comes last in its front.

One change from MO-PBT's code, whose objectives (accuracy, fairness, ...) all lay in [0, 1]: each
objective is scaled to [0, 1] over the population before distances are taken (an objective with one
value throughout contributes none), so that a return in hundreds and an energy in tenths weigh the
same; without it the ε-net would spread the population along the return only.

Every value here is oriented so that larger is better (a minimised objective enters negated). A
member with a NaN in any objective (it finished no episode) is in no front and ranks after every
member with all of them, by index.
"""

from __future__ import annotations

import numpy as np


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` is at least as good as ``b`` in every objective and better in one (larger is better)."""
    return bool(np.all(a >= b) and np.any(a > b))


def _complete(values: np.ndarray) -> np.ndarray:
    return ~np.isnan(values).any(axis=1)


def fronts(values) -> list[list[int]]:
    """The rows of ``values`` (one per member, one column per objective, larger better) by front,
    the first front first, each front's rows in index order; rows with a NaN are in none."""
    values = np.asarray(values, dtype=float)
    rows = [int(i) for i in np.flatnonzero(_complete(values))]
    dominated_by = {i: 0 for i in rows}  # how many rows dominate i
    dominating = {i: [] for i in rows}  # the rows i dominates
    for i in rows:
        for j in rows:
            if i != j and dominates(values[i], values[j]):
                dominating[i].append(j)
                dominated_by[j] += 1
    found = []
    current = [i for i in rows if dominated_by[i] == 0]
    while current:
        found.append(sorted(current))
        following = []
        for i in current:
            for j in dominating[i]:
                dominated_by[j] -= 1
                if dominated_by[j] == 0:
                    following.append(j)
        current = following
    return found


def front_of(values) -> np.ndarray:
    """Each row's front (0: the first), -1 for a row with a NaN."""
    values = np.asarray(values, dtype=float)
    found = np.full(len(values), -1, dtype=int)
    for index, front in enumerate(fronts(values)):
        found[front] = index
    return found


def scaled(values) -> np.ndarray:
    """Each objective scaled to [0, 1] over the rows without a NaN (0 where it takes one value)."""
    values = np.asarray(values, dtype=float)
    complete = values[_complete(values)]
    if not len(complete):
        return np.zeros_like(values)
    low, high = complete.min(axis=0), complete.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return np.where(high > low, (values - low) / span, 0.0)


def pareto_ranking(values) -> np.ndarray:
    """Row indices from best to worst: front by front, each front in its ε-net order (see the module
    docstring); rows with a NaN last, by index."""
    values = np.asarray(values, dtype=float)
    points = scaled(values)
    placed: list[int] = []
    for front in fronts(values):
        waiting = sorted(front, key=lambda i: (-values[i, 0], i))
        if not placed:
            placed.append(waiting.pop(0))
        while waiting:
            distances = [min(float(np.linalg.norm(points[i] - points[j])) for j in placed) for i in waiting]
            placed.append(waiting.pop(int(np.argmax(distances))))  # argmax: the first of equal ones
    rest = [i for i in range(len(values)) if i not in set(placed)]
    return np.asarray(placed + rest, dtype=int)
