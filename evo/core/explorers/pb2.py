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

PB2-Mix (Parker-Holder et al., NeurIPS 2021, "Tuning Mixed Input Hyperparameters on the Fly
for Efficient Population Based AutoRL") when the search space holds choices (``kind="choice"``):
the choices are picked first by a time-varying multi-armed bandit, one per categorical
hyperparameter, then the continuous values by the GP-UCB above, conditioned on those choices.

- the bandit: the paper uses TV.EXP3.M; here it is a time-discounted UCB (Garivier & Moulines'
  D-UCB): each arm's mean standardised change in score, each observation weighted by
  ``BANDIT_DISCOUNT`` per generation of age, plus sqrt(log(total weight) / arm's weight); an
  arm never tried comes first. Deterministic and a function of the history alone, so the
  checkpointed history restores it exactly. Within one generation's batch each pick counts as
  one more pull at the arm's mean (its bonus shrinks), as the GP's batch step does;
- conditioning: the GP is fitted on all observations with each choice's position among its
  choices (index / (count - 1), they are ordered) as one more input column, and the UCB is
  maximised over the continuous columns with the choice columns held at the bandit's picks;
- integers are continuous in the GP and rounded when the pick is mapped back.
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evo.core.explorers.base import Change, Explored, Explorer
from evo.core.explorers.perturb import explore
from evo.core.kinds import Kind, SearchSpace
from evo.core.result import MemberResult

logger = logging.getLogger(__name__)

MIN_OBSERVATIONS = 2
MAX_OBSERVATIONS = 256  # the most recent ones; older points have faded under the kernel anyway
BANDIT_DISCOUNT = 0.8  # weight of an observation one generation older, in PB2-Mix's bandit
BANDIT_EXPLORATION = 1.0  # the UCB bonus's weight, in standard deviations of the change in score


@functools.cache
def _kernel_class():
    """The time-varying kernel, defined on first use so that importing evo stays light."""
    from scipy.spatial.distance import cdist
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, StationaryKernelMixin

    class TimeVaryingRBF(StationaryKernelMixin, Kernel):
        """exp(−|x − x'|² / 2ℓ²) · (1 − ε)^(|t − t'| / 2); x = all columns but the last, t = the last."""

        def __init__(
            self,
            length_scale: float = 0.3,
            epsilon: float = 0.1,
            length_scale_bounds: tuple[float, float] = (1e-2, 1e2),
            epsilon_bounds: tuple[float, float] = (1e-4, 0.9),
        ):
            self.length_scale = length_scale
            self.epsilon = epsilon
            self.length_scale_bounds = length_scale_bounds
            self.epsilon_bounds = epsilon_bounds

        @property
        def hyperparameter_length_scale(self):
            return Hyperparameter("length_scale", "numeric", self.length_scale_bounds)

        @property
        def hyperparameter_epsilon(self):
            return Hyperparameter("epsilon", "numeric", self.epsilon_bounds)

        def __call__(self, X, Y=None, eval_gradient=False):
            X = np.atleast_2d(X)
            if Y is None:
                Y = X
            elif eval_gradient:
                raise ValueError("the gradient is only defined for Y = None")
            squared = cdist(X[:, :-1], Y[:, :-1], "sqeuclidean")
            elapsed = np.abs(X[:, -1:] - Y[:, -1][None, :])
            ell, eps = float(self.length_scale), float(self.epsilon)
            K = np.exp(-0.5 * squared / ell**2) * (1.0 - eps) ** (elapsed / 2.0)
            if not eval_gradient:
                return K
            # gradients with respect to the log of each free hyperparameter, in scikit-learn's
            # order of ``theta`` (the hyperparameters sorted by name)
            grads = []
            if not self.hyperparameter_epsilon.fixed:
                grads.append(-K * (elapsed / 2.0) * eps / (1.0 - eps))
            if not self.hyperparameter_length_scale.fixed:
                grads.append(K * squared / ell**2)
            return K, np.stack(grads, axis=2) if grads else np.empty(K.shape + (0,))

        def diag(self, X):
            return np.ones(np.atleast_2d(X).shape[0])

        def __repr__(self):
            return f"TimeVaryingRBF(length_scale={self.length_scale:.3g}, epsilon={self.epsilon:.3g})"

    return TimeVaryingRBF


def time_varying_kernel(length_scale: float = 0.3, epsilon: float = 0.1):
    """A new :class:`TimeVaryingRBF` (scikit-learn kernel; see the module docstring)."""
    return _kernel_class()(length_scale=length_scale, epsilon=epsilon)


def has_choices(kind: Kind) -> bool:
    """Whether PB2-Mix's bandit picks this hyperparameter (an ordered or unordered choice)."""
    return getattr(kind, "choices", None) is not None


class PB2(Explorer):
    """PB2's model of the population's history, and its suggestions.

    Lives on rank 0 (where the plan is decided) and goes into every checkpoint
    (:meth:`state` / :meth:`restore`), so a resumed run continues with its history.
    """

    name = "pb2"

    def __init__(
        self,
        space: SearchSpace,
        perturb_factors: Sequence[float] = (0.8, 1.2),
        resample_probability: float = 0.25,
        observations: list[tuple[int, list[float], float]] | None = None,
        baselines: dict[int, float] | None = None,
    ):
        super().__init__(space, perturb_factors, resample_probability)
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

    def fit(self, rng: np.random.Generator):
        """The GP on the observations (y standardised), or None if there are too few."""
        if len(self.observations) < MIN_OBSERVATIONS:
            return None
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

        X, y = self._data()
        spread = float(np.std(y))
        y = (y - float(np.mean(y))) / (spread if spread > 1e-12 else 1.0)
        kernel = ConstantKernel(1.0, (1e-2, 1e2)) * time_varying_kernel() + WhiteKernel(0.1, (1e-5, 1e1))
        gp = GaussianProcessRegressor(
            kernel, normalize_y=False, n_restarts_optimizer=2, random_state=int(rng.integers(2**31 - 1))
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # a bound reached is still a usable fit
            return gp.fit(X, y)

    def _data(self) -> tuple[np.ndarray, np.ndarray]:
        X = np.array([x + [float(t)] for t, x, _ in self.observations], dtype=float)
        y = np.array([dy for _, _, dy in self.observations], dtype=float)
        return X, y

    def kappa(self) -> float:
        """UCB's exploration weight: the GP-UCB schedule sqrt(0.2·d·log(2n)) (Kandasamy et al.),
        d the dimensions the GP searches (the choices are the bandit's)."""
        dims = len(self.space) - len(self.categorical)
        return math.sqrt(0.2 * dims * math.log(2 * max(len(self.observations), 1)))

    @property
    def categorical(self) -> dict[int, str]:
        """Column -> name of each hyperparameter PB2-Mix's bandit chooses (``kind="choice"``)."""
        return {i: name for i, (name, kind) in enumerate(self.space.items()) if has_choices(kind)}

    def choose(self, generation: int, count: int) -> list[dict[int, float]]:
        """PB2-Mix's bandit: for each of ``count`` recipients, the unit coordinate of each
        choice column (see the module docstring)."""
        picks: list[dict[int, float]] = [{} for _ in range(count)]
        if not self.categorical:
            return picks
        _, y = self._data()
        spread = float(np.std(y)) if len(y) else 0.0
        rewards = (y - float(np.mean(y))) / (spread if spread > 1e-12 else 1.0) if len(y) else y
        ages = np.array([generation - t for t, _, _ in self.observations], dtype=float)
        weights = BANDIT_DISCOUNT**ages
        for column, name in self.categorical.items():
            arms = len(self.space[name].choices)
            pulled = np.array(
                [self.space[name].index(self.space[name].from_unit(x[column])) for _, x, _ in self.observations]
            )
            bandit = DiscountedUCB.fit(arms, pulled, rewards, weights)
            for pick in picks:
                arm = bandit.best()
                pick[column] = arm / max(arms - 1, 1)
                bandit.pretend_pull(arm)
        return picks

    def suggest(self, generation: int, count: int, rng: np.random.Generator) -> list[np.ndarray] | None:
        """``count`` points in [0, 1]^d for one generation's recipients (GP-BUCB batch), or
        None while there is too little data to fit."""
        gp = self.fit(rng)
        if gp is None:
            return None
        from sklearn.gaussian_process import GaussianProcessRegressor

        choices = self.choose(generation, count)
        # The fitted kernel is signal + white noise. UCB ranks the latent function, so the
        # noise goes into ``alpha`` (per point) instead: the same posterior mean, a std
        # without the observation noise, and picks of this batch can be added as exact.
        X, y = gp.X_train_, gp.y_train_
        signal, noise = gp.kernel_.k1, float(gp.kernel_.k2.noise_level)
        alpha = np.full(len(y), noise)
        now = float(generation)
        kappa = self.kappa()
        latent = GaussianProcessRegressor(signal, alpha=alpha, optimizer=None).fit(X, y)
        picks = []
        for _ in range(count):
            fixed = choices[len(picks)]
            picks.append(maximise_ucb(latent, now, kappa, len(self.space), rng, X[:, :-1], fixed=fixed))
            if len(picks) < count:  # the batch step: the pick "observed" at its predicted mean
                point = np.append(picks[-1], now)[None, :]
                X, y = np.vstack([X, point]), np.append(y, latent.predict(point))
                alpha = np.append(alpha, 1e-10)
                latent = GaussianProcessRegressor(signal, alpha=alpha, optimizer=None).fit(X, y)
        return picks

    def explore(self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[Explored]:
        """New hyperparameters for each recipient, from its donor's: PB2's picks, or the
        usual perturb/resample while there is no data yet (or, logged, if the fit fails).
        Parameters outside the search space are kept."""
        marker = "pb2 warm-up"
        try:
            picks = self.suggest(generation, len(starts), rng)
        except (np.linalg.LinAlgError, ValueError) as error:  # a degenerate fit must not end a long run
            logger.warning("PB2 could not fit the history of generation %d (%s); perturbing instead", generation, error)
            picks, marker = None, "pb2 fallback"
        results = []
        for i, hparams in enumerate(starts):
            if picks is None:
                new, changes = explore(hparams, self.space, rng, self.perturb_factors, self.resample_probability)
                changes = [Change(c.name, c.old, c.new, f"{marker}: {c.how}") for c in changes]
            else:
                new, changes = dict(hparams), []
                for (name, kind), unit in zip(self.space.items(), picks[i], strict=True):
                    new[name] = kind.from_unit(float(unit))
                    how = "pb2-mix bandit" if has_choices(kind) else "pb2"
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
        self.baselines = {int(m): float(s) for m, s in state["baselines"].items()}

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

    starts = np.vstack([rng.uniform(0.0, 1.0, size=(candidates, len(free))), seen[:, free]])
    values = ucb(starts)
    best_x, best_value = starts[int(np.argmax(values))], float(np.max(values))
    for start in starts[np.argsort(values)[-4:]]:
        result = minimize(lambda u: -float(ucb(u)[0]), start, method="L-BFGS-B", bounds=[(0.0, 1.0)] * len(free))
        if -float(result.fun) > best_value:  # also when L-BFGS-B stops early: the point is still valid
            best_x, best_value = np.clip(result.x, 0.0, 1.0), -float(result.fun)
    return full(np.asarray(best_x, dtype=float))[0, :-1]


@dataclass
class DiscountedUCB:
    """A time-discounted UCB bandit over ``len(counts)`` arms (D-UCB, Garivier & Moulines 2011):
    ``counts`` and ``sums`` are each arm's discounted number of pulls and sum of rewards."""

    counts: np.ndarray
    sums: np.ndarray

    @classmethod
    def fit(cls, arms: int, pulled: np.ndarray, rewards: np.ndarray, weights: np.ndarray) -> DiscountedUCB:
        counts, sums = np.zeros(arms), np.zeros(arms)
        np.add.at(counts, pulled.astype(int), weights)
        np.add.at(sums, pulled.astype(int), weights * rewards)
        return cls(counts, sums)

    def scores(self) -> np.ndarray:
        """Each arm's discounted mean plus its bonus; +inf for an arm never pulled."""
        tried = self.counts > 1e-12
        total = max(float(self.counts.sum()), math.e)
        scores = np.full(len(self.counts), np.inf)
        scores[tried] = self.sums[tried] / self.counts[tried] + BANDIT_EXPLORATION * np.sqrt(
            math.log(total) / self.counts[tried]
        )
        return scores

    def best(self) -> int:
        """The arm with the highest score (ties to the lower index)."""
        return int(np.argmax(self.scores()))

    def pretend_pull(self, arm: int) -> None:
        """Count a pick of this batch as one pull at the arm's current mean (its bonus shrinks)."""
        mean = self.sums[arm] / self.counts[arm] if self.counts[arm] > 1e-12 else 0.0
        self.counts[arm] += 1.0
        self.sums[arm] += mean
