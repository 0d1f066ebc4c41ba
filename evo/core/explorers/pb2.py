"""PB2 explore: Population Based Bandits (Parker-Holder et al., NeurIPS 2020). Pure: no MPI.

Instead of multiplying a recipient's hyperparameters by a random factor, PB2 models how
much a member's score changed over one generation as a function of the hyperparameters it
trained with and of time, and picks the recipient's new hyperparameters where that model's
upper confidence bound is highest:

- data: one point per member and generation, x = the member's hyperparameters during the
  generation (mapped to [0, 1] on their search-space scale: log for log, log-horizon for
  gamma-like), t = the generation, y = score at its end − the score of the weights it
  started from (its donor's, if it was exploited);
- model: a Gaussian process with the time-varying squared-exponential kernel of the paper,
  k((x, t), (x', t')) = c · exp(−|x − x'|² / 2ℓ²) · (1 − ε)^(|t − t'| / 2) + noise, so that
  old observations fade as training moves on; c, ℓ, ε and the noise are fitted by maximum
  likelihood;
- pick: maximise the UCB, mean + κ·std at the current time, inside the bounds;
- batch: when several recipients are chosen in one generation, each pick is added to the
  data with its predicted mean as the outcome before the next pick (as in GP-BUCB, the
  batch step of the paper): the mean is unchanged and the uncertainty at earlier picks
  drops to zero, so later picks go elsewhere. (The pick is added without observation
  noise: with noisy data and a flat model, a noisy hallucination barely lowers the
  uncertainty and a batch would repeat one point.)

What comes from libraries: the GP fit and its likelihood optimisation (scikit-learn's
``GaussianProcessRegressor`` with its ``ConstantKernel`` and ``WhiteKernel``) and the
acquisition optimisation (SciPy's L-BFGS-B). What is written here, and why: the
time-varying kernel (scikit-learn has no kernel that decays with time, and its kernels
cannot be restricted to some input columns, so the kernel below reads x from the leading
columns and t from the last one and gives its own gradient for the likelihood fit), and
the bookkeeping of the population's history.

Before there are observations to fit (the first generation: its starting scores are not
measured), recipients explore by the usual perturb/resample, marked "pb2 warm-up" in
the lineage.

Ordered choices (``{choices: [3, 5, 10]}``) and integers are GP inputs on their index or value
scale, rounded when a pick is mapped back. Named choices have no order for the GP to read: the
Procgen AutoRL paper's explorers for them (PB2-Rand, PB2-Mult, PB2-Mix) are in
:mod:`evo.core.explorers.mixed`, built on this class's hooks (``categories``,
``pick_categories``, ``model``, ``model_key``).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evo.core.explorers.base import Change, Explored, Explorer
from evo.core.explorers.kernels import time_varying_kernel
from evo.core.explorers.perturb import explore
from evo.core.kinds import SearchSpace
from evo.core.result import MemberResult

logger = logging.getLogger(__name__)

MIN_OBSERVATIONS = 2
MAX_OBSERVATIONS = 256  # the most recent ones; older points have faded under the kernel anyway


@dataclass
class Pick:
    """A recipient's new point in [0, 1]^d, and whether a GP chose its non-category columns
    (False: PB2-Mult had no data with its categories, and the donor's values are kept)."""

    units: np.ndarray
    modelled: bool = True
    how: dict[int, str] = field(default_factory=dict)
    """Category column -> how its value was chosen, for the lineage."""


@dataclass
class GPModel:
    """A fitted GP over some of the space's ``columns`` and time, ready to pick from: its kernel's
    signal part with the fitted noise as a per-point ``alpha``, so that UCB ranks the latent
    function and picks of one batch can be added as exact (GP-BUCB)."""

    latent: Any
    columns: list[int]
    X: np.ndarray
    y: np.ndarray
    alpha: np.ndarray
    time: float
    kappa: float

    @classmethod
    def of(cls, gp: Any, columns: list[int], generation: int, kappa: float) -> GPModel:
        from sklearn.gaussian_process import GaussianProcessRegressor

        X, y = gp.X_train_, gp.y_train_
        signal, noise = gp.kernel_.k1, float(gp.kernel_.k2.noise_level)
        alpha = np.full(len(y), noise)
        latent = GaussianProcessRegressor(signal, alpha=alpha, optimizer=None).fit(X, y)
        return cls(latent, columns, X, y, alpha, float(generation), kappa)

    def pick(self, fixed: Mapping[int, float], rng: np.random.Generator) -> np.ndarray:
        """The UCB's argmax over this GP's columns, those in ``fixed`` (space columns) held at their
        values; the pick then joins the data at its predicted mean."""
        from sklearn.gaussian_process import GaussianProcessRegressor

        local = {self.columns.index(c): v for c, v in fixed.items() if c in self.columns}
        units = maximise_ucb(self.latent, self.time, self.kappa, len(self.columns), rng, self.X[:, :-1], fixed=local)
        point = np.append(units, self.time)[None, :]
        self.X, self.y = np.vstack([self.X, point]), np.append(self.y, self.latent.predict(point))
        self.alpha = np.append(self.alpha, 1e-10)
        self.latent = GaussianProcessRegressor(self.latent.kernel, alpha=self.alpha, optimizer=None).fit(self.X, self.y)
        return units


class PB2(Explorer):
    """PB2's model of the population's history, and its suggestions.

    Lives on rank 0 (where the plan is decided) and goes into every checkpoint
    (:meth:`state` / :meth:`restore`), so a resumed run continues with its history.
    """

    name = "pb2"
    summary = "PB2's GP bandit on the population's history (Parker-Holder et al. 2020)"
    asynchronous = True  # observe_ready: one observation per ready point
    named_choices = False
    why_ordered = "PB2's GP needs values with an order"
    several_objectives = False
    why_one_objective = (
        "its GP models how one score changes with the hyperparameters, and a Pareto ranking gives no one score "
        "whose change it could model"
    )

    def __init__(
        self,
        space: SearchSpace,
        perturb_factors: Sequence[float] = (0.8, 1.2),
        resample_probability: float = 0.25,
        observations: list[tuple[int, list[float], float]] | None = None,
        baselines: dict[int, float] | None = None,
        rounds: int = 0,
        population: int = 0,
    ):
        super().__init__(space, perturb_factors, resample_probability, rounds, population)
        self.observations: list[tuple[int, list[float], float]] = list(observations or [])
        """(generation, x in [0, 1]^d, change in score) per member and generation."""
        self.baselines: dict[int, float] = dict(baselines or {})
        """Member -> the score of the weights it starts the next generation with."""

    # --- history --------------------------------------------------------------------------

    def unit(self, hparams: Mapping[str, Any]) -> list[float]:
        return [kind.to_unit(hparams[name]) for name, kind in self.space.items()]

    def observe(self, generation: int, population: Sequence[MemberResult], donors: Mapping[int, int]) -> None:
        """Record the generation's changes in score, then start every member's next baseline
        from the weights it will hold (its donor's, or its own)."""
        self.record(generation, population)
        self.rebase(population, donors)

    def observe_ready(self, interval: int, result: MemberResult, start: MemberResult) -> None:
        """One member's change in score over its interval, then its next baseline (the score of
        the weights it holds next): asynchronous mode's :meth:`observe`, one member at a time."""
        self.record(interval, [result])
        self.baselines[result.member] = float(start.score)

    def record(self, generation: int, population: Sequence[MemberResult]) -> None:
        """Record each member's change in score over ``generation`` (needs its baseline),
        in the order of ``population`` (the plan passes it sorted by member id)."""
        for result in population:
            score = float(result.score)
            before = self.baselines.get(result.member)
            if before is None or not (math.isfinite(score) and math.isfinite(before)):
                continue
            self.observations.append((generation, self.unit(result.hparams), score - before))
        del self.observations[:-MAX_OBSERVATIONS]

    def rebase(self, population: Sequence[MemberResult], donors: Mapping[int, int]) -> None:
        """After selection: each member next starts from its donor's weights, or its own
        (``donors`` maps member ids to member ids)."""
        scores = {result.member: float(result.score) for result in population}
        self.baselines = {member: scores[donors.get(member, member)] for member in scores}

    # --- suggestions ----------------------------------------------------------------------

    def fit(self, rng: np.random.Generator, rows: Sequence[int] | None = None, columns: Sequence[int] | None = None):
        """The GP on the observations ``rows`` (default: all) over the space's ``columns`` (default:
        all) and the time, y standardised; None if there are too few."""
        X, y = self.data(rows, columns)
        if len(y) < MIN_OBSERVATIONS:
            return None
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

        spread = float(np.std(y))
        y = (y - float(np.mean(y))) / (spread if spread > 1e-12 else 1.0)
        kernel = ConstantKernel(1.0, (1e-2, 1e2)) * self.kernel(columns) + WhiteKernel(0.1, (1e-5, 1e1))
        gp = GaussianProcessRegressor(
            kernel, normalize_y=False, n_restarts_optimizer=2, random_state=int(rng.integers(2**31 - 1))
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # a bound reached is still a usable fit
            return gp.fit(X, y)

    def kernel(self, columns: Sequence[int] | None):
        """The GP's correlation over ``columns`` and time: PB2's time-varying kernel."""
        return time_varying_kernel()

    def data(
        self, rows: Sequence[int] | None = None, columns: Sequence[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """X (the ``columns`` of the unit coordinates, then the generation) and y (the change in score)."""
        chosen = [self.observations[i] for i in rows] if rows is not None else self.observations
        columns = list(range(len(self.space))) if columns is None else list(columns)
        X = np.array([[x[c] for c in columns] + [float(t)] for t, x, _ in chosen], dtype=float)
        y = np.array([dy for _, _, dy in chosen], dtype=float)
        return X.reshape(len(chosen), len(columns) + 1), y

    def kappa(self, dims: int | None = None, points: int | None = None) -> float:
        """UCB's exploration weight: the GP-UCB schedule sqrt(0.2·d·log(2n)) (Kandasamy et al.), d
        the dimensions the GP searches (default: the space's), n its data (default: all)."""
        dims = len(self.space) if dims is None else dims
        points = len(self.observations) if points is None else points
        return math.sqrt(0.2 * dims * math.log(2 * max(points, 1)))

    # --- the hooks of PB2's variants (evo.core.explorers.mixed) -------------------------------

    @property
    def categories(self) -> dict[int, str]:
        """Column -> name of each hyperparameter chosen as a category, outside the GP's search
        (PB2: none; ordered choices are GP inputs on their index scale)."""
        return {}

    def pick_categories(
        self, generation: int, donors: Sequence[Sequence[float]], rng: np.random.Generator
    ) -> list[dict[int, tuple[float, str]]]:
        """Each recipient's categories: column -> (unit coordinate, how it was chosen) (PB2: none)."""
        return [{} for _ in donors]

    def model(self, generation: int, fixed: Mapping[int, float], rng: np.random.Generator) -> GPModel | None:
        """The GP a recipient with categories ``fixed`` is picked from (PB2: one over every column
        and every observation), or None when there is no data to fit it."""
        gp = self.fit(rng)
        return None if gp is None else GPModel.of(gp, list(range(len(self.space))), generation, self.kappa())

    def model_key(self, fixed: Mapping[int, float]) -> Any:
        """Recipients whose keys are equal share one GP (and its batch step)."""
        return ()

    # --- suggestions ----------------------------------------------------------------------

    def suggest(
        self,
        generation: int,
        count: int,
        rng: np.random.Generator,
        donors: Sequence[Sequence[float]] | None = None,
    ) -> list[Pick] | None:
        """``count`` points in [0, 1]^d for one generation's recipients, from their donors' unit
        coordinates (``donors``; default the centre), or None while there is too little data to
        fit. Recipients picked from one GP are a GP-BUCB batch: each pick is added to its data at
        its predicted mean before the next."""
        if len(self.observations) < MIN_OBSERVATIONS:
            return None
        dims = len(self.space)
        donors = [list(d) for d in donors] if donors is not None else [[0.5] * dims] * count
        categories = self.pick_categories(generation, donors, rng)
        models: dict[Any, GPModel | None] = {}
        picks = []
        for donor, chosen in zip(donors, categories, strict=True):
            fixed = {column: unit for column, (unit, _) in chosen.items()}
            key = self.model_key(fixed)
            if key not in models:
                models[key] = self.model(generation, fixed, rng)
            units = np.array(donor, dtype=float)
            for column, unit in fixed.items():
                units[column] = unit
            model = models[key]
            if model is not None:
                units[model.columns] = model.pick(fixed, rng)
            picks.append(Pick(units, model is not None, {column: how for column, (_, how) in chosen.items()}))
        return picks

    def explore(self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[Explored]:
        """New hyperparameters for each recipient, from its donor's: PB2's picks, or the
        usual perturb/resample while there is no data yet (or, logged, if the fit fails).
        Parameters outside the search space are kept."""
        marker = f"{self.name} warm-up"
        try:
            picks = self.suggest(generation, len(starts), rng, [self.unit(hparams) for hparams in starts])
        except (np.linalg.LinAlgError, ValueError) as error:  # a degenerate fit must not end a long run
            logger.warning("PB2 could not fit the history of generation %d (%s); perturbing instead", generation, error)
            picks, marker = None, f"{self.name} fallback"
        results = []
        for i, hparams in enumerate(starts):
            if picks is None:
                new, changes = explore(hparams, self.space, rng, self.perturb_factors, self.resample_probability)
                changes = [Change(c.name, c.old, c.new, f"{marker}: {c.how}") for c in changes]
            else:
                pick, new, changes = picks[i], dict(hparams), []
                for column, ((name, kind), unit) in enumerate(zip(self.space.items(), pick.units, strict=True)):
                    if column in self.categories:
                        new[name], how = kind.from_unit(float(unit)), pick.how[column]
                    elif pick.modelled:
                        new[name], how = kind.from_unit(float(unit)), "pb2"
                    else:
                        new[name], how = kind.coerce(hparams[name]), f"{self.name}: no data with these categories, kept"
                    changes.append(Change(name, kind.coerce(hparams[name]), new[name], how))
            results.append((new, changes))
        return results

    # --- checkpoints ------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "observations": [[t, list(x), dy] for t, x, dy in self.observations],
            "baselines": {str(m): s for m, s in self.baselines.items()},
        }

    def restore(self, state: Mapping[str, Any] | None) -> None:
        if not state:
            return
        self.observations = [(int(t), [float(v) for v in x], float(dy)) for t, x, dy in state["observations"]]
        self.baselines = {int(m): math.nan if s is None else float(s) for m, s in state["baselines"].items()}

    @classmethod
    def from_state(cls, space: SearchSpace, state: Mapping[str, Any] | None, **settings: Any) -> PB2:
        explorer = cls(space, **settings)
        explorer.restore(state)
        return explorer


def maximise_ucb(
    gp,
    time: float,
    kappa: float,
    dims: int,
    rng: np.random.Generator,
    seen: np.ndarray,
    candidates: int = 512,
    fixed: Mapping[int, float] | None = None,
) -> np.ndarray:
    """argmax over [0, 1]^dims of mean + kappa·std at ``time``: the best of random and
    already-seen points, each of the top few refined by L-BFGS-B. The columns in ``fixed``
    (PB2-Mix's choices) are held at their values; the search runs over the others."""
    from scipy.optimize import minimize

    fixed = dict(fixed or {})
    free = [i for i in range(dims) if i not in fixed]

    def full(units: np.ndarray) -> np.ndarray:
        units = np.atleast_2d(units)
        points = np.empty((units.shape[0], dims + 1))
        points[:, free] = units
        for column, value in fixed.items():
            points[:, column] = value
        points[:, -1] = time
        return points

    def ucb(units: np.ndarray) -> np.ndarray:
        mean, std = gp.predict(full(units), return_std=True)
        return mean + kappa * std

    if not free:  # every column held: nothing to search
        return full(np.empty((1, 0)))[0, :-1]

    starts = np.vstack([rng.uniform(0.0, 1.0, size=(candidates, len(free))), seen[:, free]])
    values = ucb(starts)
    best_x, best_value = starts[int(np.argmax(values))], float(np.max(values))
    for start in starts[np.argsort(values)[-4:]]:
        result = minimize(lambda u: -float(ucb(u)[0]), start, method="L-BFGS-B", bounds=[(0.0, 1.0)] * len(free))
        if -float(result.fun) > best_value:  # also when L-BFGS-B stops early: the point is still valid
            best_x, best_value = np.clip(result.x, 0.0, 1.0), -float(result.fun)
    return full(np.asarray(best_x, dtype=float))[0, :-1]
