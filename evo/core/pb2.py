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
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evo.core.explore import Change, explore
from evo.core.result import MemberResult
from evo.core.space import SearchSpace

logger = logging.getLogger(__name__)

MIN_OBSERVATIONS = 2
MAX_OBSERVATIONS = 256  # the most recent ones; older points have faded under the kernel anyway


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


@dataclass
class PB2:
    """PB2's model of the population's history, and its suggestions.

    Lives on rank 0 (where the plan is decided) and goes into every checkpoint
    (:meth:`state` / :meth:`from_state`), so a resumed run continues with its history.
    """

    space: SearchSpace
    observations: list[tuple[int, list[float], float]] = field(default_factory=list)
    """(generation, x in [0, 1]^d, change in score) per member and generation."""
    baselines: dict[int, float] = field(default_factory=dict)
    """Member -> the score of the weights it starts the next generation with."""

    # --- history --------------------------------------------------------------------------

    def unit(self, hparams: Mapping[str, float]) -> list[float]:
        return [param.to_unit(float(hparams[name])) for name, param in self.space.items()]

    def observe(self, generation: int, population: Sequence[MemberResult]) -> None:
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
        """UCB's exploration weight: the GP-UCB schedule sqrt(0.2·d·log(2n)) (Kandasamy et al.)."""
        return math.sqrt(0.2 * len(self.space) * math.log(2 * max(len(self.observations), 1)))

    def suggest(self, generation: int, count: int, rng: np.random.Generator) -> list[np.ndarray] | None:
        """``count`` points in [0, 1]^d for one generation's recipients (GP-BUCB batch), or
        None while there is too little data to fit."""
        gp = self.fit(rng)
        if gp is None:
            return None
        from sklearn.gaussian_process import GaussianProcessRegressor

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
            picks.append(maximise_ucb(latent, now, kappa, len(self.space), rng, X[:, :-1]))
            if len(picks) < count:  # the batch step: the pick "observed" at its predicted mean
                point = np.append(picks[-1], now)[None, :]
                X, y = np.vstack([X, point]), np.append(y, latent.predict(point))
                alpha = np.append(alpha, 1e-10)
                latent = GaussianProcessRegressor(signal, alpha=alpha, optimizer=None).fit(X, y)
        return picks

    def explore(
        self,
        generation: int,
        donor_hparams: Sequence[Mapping[str, float]],
        rng: np.random.Generator,
        perturb_factors: Sequence[float],
        resample_probability: float,
    ) -> list[tuple[dict[str, float], list[Change]]]:
        """New hyperparameters for each recipient, from its donor's: PB2's picks, or the
        usual perturb/resample while there is no data yet (or, logged, if the fit fails).
        Parameters outside the search space are kept."""
        marker = "pb2 warm-up"
        try:
            picks = self.suggest(generation, len(donor_hparams), rng)
        except (np.linalg.LinAlgError, ValueError) as error:  # a degenerate fit must not end a long run
            logger.warning("PB2 could not fit the history of generation %d (%s); perturbing instead", generation, error)
            picks, marker = None, "pb2 fallback"
        results = []
        for i, hparams in enumerate(donor_hparams):
            if picks is None:
                new, changes = explore(hparams, self.space, rng, perturb_factors, resample_probability)
                changes = [Change(c.name, c.old, c.new, f"{marker}: {c.how}") for c in changes]
            else:
                new, changes = dict(hparams), []
                for (name, param), unit in zip(self.space.items(), picks[i], strict=True):
                    new[name] = param.from_unit(float(unit))
                    changes.append(Change(name, float(hparams[name]), new[name], "pb2"))
            results.append((new, changes))
        return results

    # --- checkpoints ------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "observations": [[t, list(x), dy] for t, x, dy in self.observations],
            "baselines": {str(m): s for m, s in self.baselines.items()},
        }

    @classmethod
    def from_state(cls, space: SearchSpace, state: Mapping[str, Any] | None) -> PB2:
        if not state:
            return cls(space)
        return cls(
            space,
            [(int(t), [float(v) for v in x], float(dy)) for t, x, dy in state["observations"]],
            {int(m): float(s) for m, s in state["baselines"].items()},
        )


def maximise_ucb(
    gp, time: float, kappa: float, dims: int, rng: np.random.Generator, seen: np.ndarray, candidates: int = 512
) -> np.ndarray:
    """argmax over [0, 1]^dims of mean + kappa·std at ``time``: the best of random and
    already-seen points, each of the top few refined by L-BFGS-B."""
    from scipy.optimize import minimize

    def ucb(units: np.ndarray) -> np.ndarray:
        points = np.hstack([np.atleast_2d(units), np.full((np.atleast_2d(units).shape[0], 1), time)])
        mean, std = gp.predict(points, return_std=True)
        return mean + kappa * std

    starts = np.vstack([rng.uniform(0.0, 1.0, size=(candidates, dims)), seen])
    values = ucb(starts)
    best_x, best_value = starts[int(np.argmax(values))], float(np.max(values))
    for start in starts[np.argsort(values)[-4:]]:
        result = minimize(lambda u: -float(ucb(u)[0]), start, method="L-BFGS-B", bounds=[(0.0, 1.0)] * dims)
        if -float(result.fun) > best_value:  # also when L-BFGS-B stops early: the point is still valid
            best_x, best_value = np.clip(result.x, 0.0, 1.0), -float(result.fun)
    return np.asarray(best_x, dtype=float)
