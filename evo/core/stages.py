"""BG-PBT's stages (pure): when a population starts a new stage, which architectures the new stage's
students take, and how successive halving cuts the students down to the population.

Wan et al., "Bayesian Generational Population-Based Training" (AutoML-Conf 2022; code
xingchenwan/bgpbt, ``hpo/casmo/bgpbt_arch.py``). BG-PBT calls them generations; in evo a generation
is a PBT interval, so here they are *stages*. A new stage starts when the population's best score
has not improved for ``patience`` generations, or after a stage's budget of env steps, while fewer
than ``max_stages`` distillations have run (:func:`stage_due`). Its students' architectures come
from :func:`propose_architectures`; each student is distilled from a top teacher (evo/core/distill.py,
evo/sb3/ppo.py), and successive halving keeps the best of them (:func:`halving_rungs`,
:func:`survivors`) until the population's size remains.

Not built yet: the loop that runs a stage (where the students live while they outnumber the
population, their records, resume during a distillation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evo.core.kinds import SearchSpace
from evo.core.selection import ranking

ETA = 2
"""Successive halving's rate: a rung keeps 1/ETA of its students (BG-PBT's ``eta = 2.0``)."""
CANDIDATES = 512
"""Random architectures the BO's upper confidence bound is evaluated on, per pick."""


def stage_due(
    bests: Sequence[float],
    patience: int,
    steps_in_stage: int,
    every: int | None,
    stages_done: int,
    max_stages: int,
) -> str | None:
    """Why a new stage starts after this generation, or None. ``bests``: the population's best score
    at each generation of the current stage, in order; due when none of the last ``patience`` beat the
    best before them (BG-PBT's ``patience``), or when the stage has trained ``every`` env steps per
    member (its ``distill_every``; None: no such limit), and only while ``stages_done`` <
    ``max_stages`` (its ``max_distillation``)."""
    if patience < 1:
        raise ValueError(f"patience {patience}: the generations without improvement must be at least 1")
    if stages_done >= max_stages:
        return None
    if every is not None and steps_in_stage >= every:
        return f"the stage has trained {steps_in_stage} env steps per member (at most {every})"
    if len(bests) > patience:
        before = [b for b in bests[:-patience] if not math.isnan(b)]
        recent = [b for b in bests[-patience:] if not math.isnan(b)]
        if before and (not recent or max(recent) <= max(before)):
            return f"the best score {max(before):.4g} has not improved for {patience} generations"
    return None


@dataclass(frozen=True)
class Rung:
    """One round of successive halving: ``students`` train ``steps`` env steps each, then ``keep`` of
    them go on."""

    students: int
    steps: int
    keep: int


def halving_rungs(candidates: int, population: int, budget: int, eta: int = ETA) -> list[Rung]:
    """Successive halving from ``candidates`` students down to ``population``, as BG-PBT's code runs it:
    each rung keeps max(population, round(n / eta)) of its n students, until ``population`` remain;
    with s rungs, rung r (from 0) trains eta^(r − s) · ``budget`` env steps and the last rung the rest
    of ``budget``, so every survivor is distilled for ``budget`` env steps in all (the length of its
    α schedule). Equal numbers: one rung that keeps everyone. s is the number of cuts needed; the
    code's ⌈log n / log population⌉ is the same for its 24 students and 8 members, but can add a last
    rung that cuts nobody (8 students, 4 members: 2 rungs there, 1 here)."""
    if population < 1 or candidates < population:
        raise ValueError(f"{candidates} candidates for a population of {population}: give at least as many")
    if budget < 1 or eta < 2:
        raise ValueError(f"budget {budget}, eta {eta}: a distillation needs env steps, and a rung must cut (eta >= 2)")
    sizes = [candidates]
    while sizes[-1] > population:
        sizes.append(max(population, round(sizes[-1] / eta)))
    rungs = max(len(sizes) - 1, 1)
    if len(sizes) == 1:
        sizes.append(population)
    steps = [int(budget * eta ** (r - rungs)) for r in range(rungs - 1)]
    steps.append(budget - sum(steps))
    return [Rung(students=sizes[r], steps=steps[r], keep=sizes[r + 1]) for r in range(rungs)]


def survivors(scores: Sequence[float], keep: int) -> list[int]:
    """The indices of the ``keep`` best ``scores`` (NaN last, ties to the lower index), best first."""
    return [int(i) for i in ranking(scores)[:keep]]


def propose_architectures(
    space: SearchSpace,
    count: int,
    reached: Sequence[tuple[Mapping[str, Any], float, int]],
    kept: Sequence[Mapping[str, Any]],
    rng: np.random.Generator,
) -> list[tuple[dict[str, Any], str]]:
    """``count`` architectures for a new stage's students, each with how it was chosen (BG-PBT's
    ``search_init`` with ``init_policy='bo'``):

    - ``kept``: the best architecture of each earlier stage, as they are ("kept");
    - then half of ``count`` by BO ("bo"): a GP with BG-PBT's kernel (Matérn over integer values,
      exponentiated overlap over ``choices``, the stage as its time) fitted to ``reached``, each
      architecture that ran with the best score it reached and its stage, copula-standardised; each
      pick maximises the upper confidence bound over random architectures of ``space`` and joins the
      data at the GP's predicted mean, so the next goes elsewhere. With fewer than 2 distinct scores
      no GP is fitted and these are drawn at random too;
    - the rest drawn uniformly from ``space`` ("random").

    ``space`` holds the architecture's dimensions only (``pi_layers`` ...)."""
    from evo.core.explorers.casmo import fit_posterior
    from evo.core.explorers.mixed import is_category

    names = list(space)
    chosen: list[tuple[dict[str, Any], str]] = [({n: a[n] for n in names}, "kept") for a in kept[:count]]
    by_bo = min(count // 2, count - len(chosen))
    finite = [(a, score, stage) for a, score, stage in reached if not math.isnan(score)]
    if by_bo and len({score for _, score, _ in finite}) >= 2:
        X = np.array([[space[n].to_unit(a[n]) for n in names] + [float(stage)] for a, _, stage in finite])
        categories = [c for c, n in enumerate(names) if is_category(space[n])]
        posterior = fit_posterior(X, [score for _, score, _ in finite], categories, rng)
        now = float(max(stage for _, _, stage in finite) + 1)
        for _ in range(by_bo):
            drawn = [{n: space[n].sample(rng) for n in names} for _ in range(CANDIDATES)]
            units = np.array([[space[n].to_unit(a[n]) for n in names] + [now] for a in drawn])
            best = int(np.argmax(posterior.ucb(units)))
            chosen.append((drawn[best], "bo"))
            posterior.add_pending(units[best])
    while len(chosen) < count:
        chosen.append(({n: space[n].sample(rng) for n in names}, "random"))
    return chosen
