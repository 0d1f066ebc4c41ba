"""``--explore casmo``: BG-PBT's trust-region Bayesian optimisation of a recipient's values (pure).

Wan, Lu, Parker-Holder, Ball, Nguyen, Ru & Osborne, "Bayesian Generational Population-Based
Training" (AutoML-Conf 2022; code: xingchenwan/bgpbt ``hpo/casmo/casmo.py``, ``bgpbt.py``,
``kernels.py``, ``hpo/utils.py``), whose proposer is Casmopolitan (Wan et al., ICML 2021): a GP over
the mixed space searched only inside a trust region around the point it improves on (TuRBO,
Eriksson et al. 2019). Here the point is the recipient's donor:

- **data**: PB2's history (evo.core.explorers.pb2): per member and generation, the values it
  trained with in [0, 1]^d, the generation, and its change in score; the 100 most recent (BG-PBT's
  cap) since the last restart of the region;
- **targets**: copula-standardised, the changes' ranks mapped to standard normal quantiles, so
  one huge jump does not flatten the rest (BG-PBT, as HEBO does);
- **model**: a GP with BG-PBT's kernel (:func:`evo.core.explorers.kernels.casmo_kernel`):
  Matérn-5/2 over continuous and integer values, an exponentiated overlap over categories (every
  ``choices`` hyperparameter), [(1 − λ)(k_cat + k_cont) + λ·k_cat·k_cont] with λ = 0.5, times
  PB2's time decay; its length scales, decay, signal variance and noise fitted by marginal
  likelihood (scikit-learn, with BG-PBT's bounds on the signal variance and the noise);
- **pending points**: the members not replaced this generation keep their values while the
  recipients train; they join the data at the GP's predicted mean (and each recipient's pick
  before the next recipient is picked), so the acquisition's uncertainty there drops and picks
  go elsewhere;
- **acquisition**: the upper confidence bound of the standardised change in score,
  mean + β·std with β = 3, maximised. This is BG-PBT's LCB of its cost (the negated return),
  minimised, with the sign turned: evo's scores are maximised everywhere;
- **search**: inside the **trust region** around the donor: each continuous or integer value
  within ``length / 2`` of the donor's in [0, 1] (and in [0, 1]), and at most
  ⌈radius · (number of categories)⌉ categories different from the donor's. Interleaved local
  search from the donor and the best random points of the region: L-BFGS-B over the continuous
  values, then the best of 10 neighbours that redraw one integer or category within the region,
  in turn until neither improves;
- **the region's rules**: after each generation, if some member trained with values this
  explorer proposed, the generation is a *success* when the best-scoring member is one of them
  (BG-PBT's ``adjust_tr_length``: the round's best agent had a BO config), else a *failure*.
  3 successes in a row grow both sizes ×1.5 (at most 1), 10 failures in a row shrink them ÷1.5;
  a shrink that would take the length to its minimum (0.15) or the radius to its (0.1)
  *restarts* the region: both back to their initial sizes (0.4 and 1), the counters to zero and
  the GP's data forgotten (BG-PBT starts a new stage of data, ``n_distills += 1``).

Before there is data to fit (the first generation, and after a restart), or if a fit fails,
recipients draw uniformly from the trust region around their donor (``casmo warm-up``,
``casmo fallback`` in the lineage): never outside the region either.

Where this departs from BG-PBT's code, and why (also in docs/hyperparameters.md):

- the region is enforced: the code's search takes ``max_dist_cat`` but never applies it, starts
  from points whose categories are all redrawn, and leaves integers outside the box; here every
  proposal is inside the box and the Hamming radius, as the paper states;
- the region restarts on either size reaching its minimum (the code compares
  ``length_max_cat``, a constant, where it means ``length_cat``, so only the length counts);
- the categorical kernel is exp(ℓ_cat·(s − 1)) with ℓ_cat fitted; the code's exp(ℓ_cat·s) has a
  diagonal e^ℓ_cat that reweights categories against continuous values in the sum, and its
  ℓ_cat is computed under ``no_grad`` so it is never fitted;
- ties in the copula share their average rank (the code gives them the highest), so that the UCB
  of the score is exactly the LCB of its negation;
- pending points are not re-standardised after joining (the code applies the copula again to
  the real and predicted targets together, which moves the predictions off the mean);
- y is PB2's change in score over a generation (the code's change per env step: the copula's
  ranks are the same), X holds no "score before" context column, the warm-up draws from the
  region rather than the whole space, and the code's patience restart (15 rounds without a new
  best) is left to the stages of BG-PBT's generational part;
- the UCB uses the latent function's std (the code's includes the observation noise), as evo's PB2.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evo.core.explorers.base import Change, Explored
from evo.core.explorers.kernels import casmo_kernel
from evo.core.explorers.mixed import is_category
from evo.core.explorers.pb2 import MIN_OBSERVATIONS, PB2
from evo.core.kinds import Integer, Kind, SearchSpace
from evo.core.result import MemberResult

logger = logging.getLogger(__name__)

LENGTH_INIT, LENGTH_MIN, LENGTH_MAX = 0.4, 0.15, 1.0  # the continuous box's side, in [0, 1]
RADIUS_INIT, RADIUS_MIN, RADIUS_MAX = 1.0, 0.1, 1.0  # the share of categories that may differ
GROWTH = 1.5
SUCCESS_TOLERANCE, FAILURE_TOLERANCE = 3, 10
BETA = 3.0
HISTORY = 100
NEIGHBOURS = 10
STARTS = 3  # local searches per pick: from the donor and the best random points of the region
CANDIDATES = 256
SEARCH_ROUNDS = 8
SIGNAL_BOUNDS = (0.5, 5.0)  # BG-PBT's bounds on the output scale and the noise (standardised targets)
NOISE_BOUNDS = (1e-6, 0.1)


def copula_standardise(values: Sequence[float]) -> np.ndarray:
    """Each value's rank (ties share their average rank) mapped to the standard normal quantile
    rank / (n + 1): monotone, symmetric under negation, and unmoved by the size of an outlier."""
    from scipy.stats import norm, rankdata

    values = np.asarray(values, dtype=float)
    return norm.ppf(rankdata(values) / (len(values) + 1))


@dataclass
class TrustRegion:
    """The region's sizes and its success and failure counters (see the module docstring)."""

    length: float = LENGTH_INIT
    radius: float = RADIUS_INIT
    successes: int = 0
    failures: int = 0
    restarts: int = 0

    def record(self, success: bool) -> str | None:
        """Count one generation; return what happened to the region ("grown", "shrunk", "restarted") or None."""
        if success:
            self.successes, self.failures = self.successes + 1, 0
        else:
            self.successes, self.failures = 0, self.failures + 1
        if self.successes == SUCCESS_TOLERANCE:
            self.length = min(self.length * GROWTH, LENGTH_MAX)
            self.radius = min(self.radius * GROWTH, RADIUS_MAX)
            self.successes = 0
            return "grown"
        if self.failures == FAILURE_TOLERANCE:
            self.failures = 0
            length, radius = self.length / GROWTH, self.radius / GROWTH
            if length <= LENGTH_MIN or radius <= RADIUS_MIN:
                self.restart()
                return "restarted"
            self.length, self.radius = length, radius
            return "shrunk"
        return None

    def restart(self) -> None:
        self.length, self.radius, self.successes, self.failures = LENGTH_INIT, RADIUS_INIT, 0, 0
        self.restarts += 1

    def differing(self, categories: int) -> int:
        """How many of ``categories`` category columns may differ from the centre's."""
        return math.ceil(self.radius * categories - 1e-9)


class Region:
    """The trust region around one centre in [0, 1]^d: a box over the continuous and integer
    columns, a Hamming ball over the categories; it draws, moves and checks points."""

    def __init__(self, space: SearchSpace, centre: np.ndarray, trust: TrustRegion):
        self.kinds: list[Kind] = list(space.values())
        self.centre = np.asarray(centre, dtype=float)
        self.categories = [c for c, kind in enumerate(self.kinds) if is_category(kind)]
        self.integers = [c for c, kind in enumerate(self.kinds) if isinstance(kind, Integer)]
        self.floats = [c for c in range(len(self.kinds)) if c not in self.categories and c not in self.integers]
        self.low = np.clip(self.centre - trust.length / 2.0, 0.0, 1.0)
        self.high = np.clip(self.centre + trust.length / 2.0, 0.0, 1.0)
        self.differing = min(trust.differing(len(self.categories)), len(self.categories))
        self.whole = {c: self._whole_numbers_in_box(c) for c in self.integers}
        self.choices = {c: self._choice_units(c) for c in self.categories}

    def _whole_numbers_in_box(self, column: int) -> tuple[int, int]:
        """The least and greatest whole number whose unit coordinate is in the box (the centre's own
        value when none is)."""
        kind = self.kinds[column]
        low, high = kind.from_unit(float(self.low[column])), kind.from_unit(float(self.high[column]))
        if kind.to_unit(low) < self.low[column] - 1e-12:
            low += 1
        if kind.to_unit(high) > self.high[column] + 1e-12:
            high -= 1
        if low > high:
            low = high = kind.from_unit(float(self.centre[column]))
        return int(low), int(high)

    def _redraw_whole(self, column: int, rng: np.random.Generator, size: int | None = None) -> Any:
        low, high = self.whole[column]
        kind = self.kinds[column]
        drawn = rng.integers(low, high + 1, size=size)
        return kind.to_unit(int(drawn)) if size is None else np.array([kind.to_unit(int(k)) for k in drawn])

    def _choice_units(self, column: int) -> np.ndarray:
        kind = self.kinds[column]
        return np.array([kind.to_unit(choice) for choice in kind.choices])

    @property
    def discrete(self) -> list[int]:
        """The columns a neighbour moves: integers with somewhere to go, and categories when any may differ."""
        movable = [c for c in self.integers if self.whole[c][0] < self.whole[c][1]]
        if self.differing > 0:
            movable += [c for c in self.categories if len(self.choices[c]) > 1]
        return movable

    def changed(self, point: np.ndarray) -> list[int]:
        """The category columns where ``point`` differs from the centre."""
        return [c for c in self.categories if abs(point[c] - self.centre[c]) > 1e-9]

    def contains(self, point: np.ndarray) -> bool:
        box = list(self.floats) + list(self.integers)
        inside = bool(np.all(point[box] >= self.low[box] - 1e-9) and np.all(point[box] <= self.high[box] + 1e-9))
        return inside and len(self.changed(point)) <= self.differing

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` points drawn uniformly from the region: floats in the box, integers among the
        box's whole numbers, and a uniform number (up to the radius) of categories redrawn."""
        points = np.tile(self.centre, (count, 1))
        for c in self.floats:
            points[:, c] = rng.uniform(self.low[c], self.high[c], size=count)
        for c in self.integers:
            points[:, c] = self._redraw_whole(c, rng, count)
        movable = [c for c in self.categories if len(self.choices[c]) > 1]
        for point in points:
            if not movable or self.differing == 0:
                break
            how_many = int(rng.integers(0, min(self.differing, len(movable)) + 1))
            changed = rng.choice(movable, size=how_many, replace=False)
            for c in changed:
                others = self.choices[c][np.abs(self.choices[c] - self.centre[c]) > 1e-9]
                point[c] = rng.choice(others)
        return points

    def neighbour(self, point: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """``point`` with one integer or category redrawn within the region (None: nothing can move)."""
        changed = self.changed(point)
        free = len(changed) < self.differing  # another category may still change
        movable = [c for c in self.discrete if c not in self.categories or c in changed or free]
        if not movable:
            return None
        column = int(rng.choice(movable))
        moved = point.copy()
        if column in self.whole:
            while abs(moved[column] - point[column]) <= 1e-9:  # the box holds another whole number
                moved[column] = self._redraw_whole(column, rng)
        else:
            others = self.choices[column][np.abs(self.choices[column] - point[column]) > 1e-9]
            moved[column] = rng.choice(others)
        return moved


class Posterior:
    """A fitted GP's posterior over (x, t), with points that can be added at its own predicted mean."""

    def __init__(self, signal: Any, noise: float, X: np.ndarray, y: np.ndarray):
        self.signal, self.noise = signal, float(noise)
        self.X, self.y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        self.pending = 0
        self._factor()

    def _factor(self) -> None:
        from scipy.linalg import cho_factor, cho_solve

        K = self.signal(self.X) + (self.noise + 1e-10) * np.eye(len(self.y))
        self.cholesky = cho_factor(K, lower=True)
        self.weights = cho_solve(self.cholesky, self.y)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The latent function's mean and standard deviation at the rows of ``X``."""
        from scipy.linalg import solve_triangular

        X = np.atleast_2d(X)
        cross = self.signal(X, self.X)
        mean = cross @ self.weights
        whitened = solve_triangular(self.cholesky[0], cross.T, lower=True)
        variance = self.signal.diag(X) - np.sum(whitened**2, axis=0)
        return mean, np.sqrt(np.maximum(variance, 0.0))

    def ucb(self, X: np.ndarray) -> np.ndarray:
        mean, std = self.predict(X)
        return mean + BETA * std

    def add_pending(self, X: np.ndarray) -> np.ndarray:
        """Add points (rows of (x, t)) as data labelled with the predicted mean; return the labels."""
        X = np.atleast_2d(X)
        if len(X) == 0:
            return np.empty(0)
        labels, _ = self.predict(X)
        self.X, self.y = np.vstack([self.X, X]), np.append(self.y, labels)
        self.pending += len(X)
        self._factor()
        return labels


def fit_posterior(
    X: np.ndarray, targets: Sequence[float], categorical: Sequence[int], rng: np.random.Generator
) -> Posterior:
    """A GP with BG-PBT's kernel fitted by marginal likelihood to the rows of ``X`` (unit values, then
    the time; ``categorical``: the columns holding categories) and the copula-standardised ``targets``."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    y = copula_standardise(targets)
    kernel = ConstantKernel(1.0, SIGNAL_BOUNDS) * casmo_kernel(categorical, X.shape[1] - 1) + WhiteKernel(
        1e-3, NOISE_BOUNDS
    )
    gp = GaussianProcessRegressor(kernel, n_restarts_optimizer=1, random_state=int(rng.integers(2**31 - 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a bound reached is still a usable fit
        gp.fit(X, y)
    return Posterior(gp.kernel_.k1, float(gp.kernel_.k2.noise_level), X, y)


def maximise_in_region(posterior: Posterior, region: Region, time: float, rng: np.random.Generator) -> np.ndarray:
    """The UCB's best point in ``region`` found by interleaved local search (see the module docstring)."""
    from scipy.optimize import minimize

    def acquisition(points: np.ndarray) -> np.ndarray:
        points = np.atleast_2d(points)
        return posterior.ucb(np.column_stack([points, np.full(len(points), time)]))

    candidates = np.vstack([region.centre[None, :], region.sample(CANDIDATES, rng)])
    values = acquisition(candidates)
    order = np.argsort(-values, kind="stable")
    starts = [0] + [int(i) for i in order if i != 0][: STARTS - 1]
    best, best_value = candidates[order[0]].copy(), float(values[order[0]])
    floats = region.floats
    bounds = [(float(region.low[c]), float(region.high[c])) for c in floats]
    for start in starts:
        point, value = candidates[start].copy(), float(values[start])
        for _ in range(SEARCH_ROUNDS):  # the continuous values for these discrete ones, then a discrete move
            if floats:

                def negative(free: np.ndarray, point: np.ndarray = point) -> float:
                    trial = point.copy()
                    trial[floats] = free
                    return -float(acquisition(trial)[0])

                result = minimize(negative, point[floats], method="L-BFGS-B", bounds=bounds, options={"maxiter": 20})
                trial = point.copy()
                trial[floats] = np.clip(result.x, region.low[floats], region.high[floats])
                trial_value = float(acquisition(trial)[0])
                if trial_value > value + 1e-12:
                    point, value = trial, trial_value
            neighbours = [n for n in (region.neighbour(point, rng) for _ in range(NEIGHBOURS)) if n is not None]
            values_there = acquisition(np.array(neighbours)) if neighbours else np.empty(0)
            if not neighbours or float(np.max(values_there)) <= value + 1e-12:
                break  # no better neighbour: the continuous values are already the best for these
            point, value = neighbours[int(np.argmax(values_there))], float(np.max(values_there))
        if value > best_value:
            best, best_value = point, value
    return best


class Casmo(PB2):
    """BG-PBT's trust-region BO as an explorer (see the module docstring). Keeps PB2's history and
    baselines, and the trust region with its counters, in every checkpoint."""

    name = "casmo"
    summary = "BG-PBT's trust-region BO over mixed spaces (Wan et al. 2022)"
    asynchronous = False
    why_synchronous = (
        "grows or shrinks its trust region by whether a generation's best member trained with its proposals, "
        "and holds the members a generation does not replace as pending points"
    )
    named_choices = True
    why_ordered = ""

    def __init__(self, space: SearchSpace, *args, **kwargs):
        """The base explorer's arguments (:class:`Explorer`), and an empty trust region."""
        super().__init__(space, *args, **kwargs)
        self.trust = TrustRegion()
        self.proposed: set[int] = set()
        """Members whose values this explorer proposed at the last explore (they train with them next)."""
        self.recipients: list[int] = []
        self.pending: list[list[float]] = []

    # --- the trust region ---------------------------------------------------------------------

    @property
    def category_columns(self) -> list[int]:
        return [c for c, kind in enumerate(self.space.values()) if is_category(kind)]

    def observe(self, generation: int, population: Sequence[MemberResult], donors: Mapping[int, int]) -> None:
        """PB2's history, then the trust region's count of this generation; and who explores next
        (the donor map's keys, in id order, as evo.core.plan passes them) and who keeps its values
        (the pending points)."""
        super().observe(generation, population, donors)
        self.update_region(generation, population)
        self.recipients = sorted(donors)
        self.pending = [self.unit(result.hparams) for result in population if result.member not in donors]

    def update_region(self, generation: int, population: Sequence[MemberResult]) -> None:
        """Success if the generation's best member trained with a proposal of this explorer; nothing
        to count if none did. A restart forgets the GP's data."""
        finite = [result for result in population if math.isfinite(float(result.score))]
        proposed = [result for result in finite if result.member in self.proposed]
        self.proposed = set()
        if not proposed:
            return
        best = max(float(result.score) for result in finite)
        success = max(float(result.score) for result in proposed) >= best
        change = self.trust.record(success)
        if change == "restarted":
            self.observations = []
        if change is not None:
            logger.info(
                "casmo trust region %s at generation %d: length %.3g, radius %.3g",
                change,
                generation,
                self.trust.length,
                self.trust.radius,
            )

    # --- suggestions --------------------------------------------------------------------------

    @property
    def minimum_data(self) -> int:
        """Observations needed before the GP is fitted (BG-PBT: a population's worth)."""
        return max(MIN_OBSERVATIONS, self.population)

    def posterior(self, generation: int, rng: np.random.Generator) -> Posterior | None:
        """The GP on the most recent observations (targets copula-standardised), with the members that
        keep their values added at its predicted mean; None while there is too little data."""
        recent = self.observations[-HISTORY:]
        if len(recent) < self.minimum_data:
            return None

        X = np.array([list(x) + [float(t)] for t, x, _ in recent], dtype=float)
        posterior = fit_posterior(X, [dy for _, _, dy in recent], self.category_columns, rng)
        if self.pending:
            posterior.add_pending(np.column_stack([np.array(self.pending), np.full(len(self.pending), generation)]))
        return posterior

    def explore(self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[Explored]:
        """Each recipient's values: the UCB's best point in the trust region around its donor's, each
        pick added as pending before the next; or a uniform draw from that region while there is no
        data to fit (or, logged, if the fit fails). BLAS runs on one thread here: its matrices are a
        hundred rows, and rank 0 shares its cores with training (two threads on two busy cores made
        a generation's decision 2 s instead of 0.3 s)."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return self._explore(generation, starts, rng)

    def _explore(
        self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator
    ) -> list[Explored]:
        marker = "casmo warm-up"
        try:
            posterior = self.posterior(generation, rng)
        except (np.linalg.LinAlgError, ValueError) as error:  # a degenerate fit must not end a long run
            logger.warning(
                "casmo could not fit the history of generation %d (%s); drawing from the region", generation, error
            )
            posterior, marker = None, "casmo fallback"
        results, proposed = [], set()
        members = self.recipients if len(self.recipients) == len(starts) else [None] * len(starts)
        for member, hparams in zip(members, starts, strict=True):
            region = Region(self.space, np.array(self.unit(hparams)), self.trust)
            if posterior is None:
                units, how = region.sample(1, rng)[0], marker
            else:
                units, how = maximise_in_region(posterior, region, float(generation), rng), "casmo"
                posterior.add_pending(np.append(units, float(generation))[None, :])
                if member is not None:
                    proposed.add(member)
            new, changes = dict(hparams), []
            for (name, kind), unit in zip(self.space.items(), units, strict=True):
                new[name] = kind.from_unit(float(unit))
                changes.append(Change(name, kind.coerce(hparams[name]), new[name], how))
            results.append((new, changes))
        self.proposed = proposed
        return results

    # --- checkpoints --------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {**super().state(), "region": asdict(self.trust), "proposed": sorted(self.proposed)}

    def restore(self, state: Mapping[str, Any] | None) -> None:
        if not state:
            return
        super().restore(state)
        self.trust = TrustRegion(**state["region"])
        self.proposed = {int(m) for m in state["proposed"]}
