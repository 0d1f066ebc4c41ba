"""The GP kernels of PB2 and PB2-Mix, as scikit-learn kernels (defined on first use, so that
importing evo stays light).

Both read the time (the generation) from the last column of X and fade old observations by
(1 − ε)^(|t − t'| / 2), the time-varying kernel of Bogunovic et al. (2016) that PB2 uses.
scikit-learn has no kernel that decays with time, and its kernels cannot be restricted to some
input columns, so these are written here, each with the gradient of its log-hyperparameters that
the likelihood fit needs (in scikit-learn's order: the hyperparameters sorted by name).

- :func:`time_varying_kernel`: exp(−|x − x'|² / 2ℓ²) · (1 − ε)^(|t − t'| / 2) (PB2);
- :func:`mixture_kernel`: CoCaBO's mixture (Ru et al. 2020) made time-varying as in PB2-Mix's code,
  k = (1 − λ)·½(k₁ + k₂) + λ·k₁·k₂, with k₁ = the squared exponential over the continuous columns
  × (1 − ε₁)^(|Δt|/2) and k₂ = the share of categorical columns with equal values (the overlap
  kernel) × (1 − ε₂)^(|Δt|/2); λ, ε₁, ε₂ and ℓ are fitted. A sum and a Schur product of positive
  semi-definite kernels, so positive semi-definite for λ in [0, 1]; its diagonal is 1.
- :func:`casmo_kernel`: BG-PBT's Casmopolitan kernel (Wan et al. 2021, 2022; xingchenwan/bgpbt
  ``hpo/casmo/kernels.py``), k = [(1 − λ)(k_cat + k_cont) + λ·k_cat·k_cont] · (1 − ε)^(|Δt|/2) with
  λ = 0.5 fixed, k_cont the Matérn-5/2 over the continuous and integer columns (length scale ℓ) and
  k_cat the exponentiated overlap exp(ℓ_cat·(s − 1)), s the share of categorical columns with equal
  values; ℓ, ℓ_cat and ε are fitted. With no categorical column k is k_cont times the decay, with
  no continuous one k_cat times it. Positive semi-definite: exp of a positive semi-definite kernel
  times ℓ_cat ≥ 0 is one (its power series), and sums and Schur products keep the property; its
  diagonal is 2 − λ in the mixed case, 1 otherwise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

EPSILON_BOUNDS = (1e-4, 0.9)
LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
MIX_BOUNDS = (1e-3, 1.0)
CATEGORICAL_SCALE_BOUNDS = (1e-2, 1e1)
CASMO_MIX = 0.5  # BG-PBT's λ, fixed


def _log_decay_gradient(K: np.ndarray, elapsed: np.ndarray, epsilon: float) -> np.ndarray:
    """d K / d log ε for K = (…) · (1 − ε)^(elapsed / 2)."""
    return -K * (elapsed / 2.0) * epsilon / (1.0 - epsilon)


@functools.cache
def _rbf_class():
    from scipy.spatial.distance import cdist
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, StationaryKernelMixin

    class TimeVaryingRBF(StationaryKernelMixin, Kernel):
        """exp(−|x − x'|² / 2ℓ²) · (1 − ε)^(|t − t'| / 2); x = all columns but the last, t = the last."""

        def __init__(
            self,
            length_scale: float = 0.3,
            epsilon: float = 0.1,
            length_scale_bounds: tuple[float, float] = LENGTH_SCALE_BOUNDS,
            epsilon_bounds: tuple[float, float] = EPSILON_BOUNDS,
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
            grads = []  # in scikit-learn's order of ``theta``: epsilon, length_scale
            if not self.hyperparameter_epsilon.fixed:
                grads.append(_log_decay_gradient(K, elapsed, eps))
            if not self.hyperparameter_length_scale.fixed:
                grads.append(K * squared / ell**2)
            return K, np.stack(grads, axis=2) if grads else np.empty(K.shape + (0,))

        def diag(self, X):
            return np.ones(np.atleast_2d(X).shape[0])

        def __repr__(self):
            return f"TimeVaryingRBF(length_scale={self.length_scale:.3g}, epsilon={self.epsilon:.3g})"

    return TimeVaryingRBF


@functools.cache
def _mixture_class():
    from scipy.spatial.distance import cdist
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, StationaryKernelMixin

    class TimeVaryingMixture(StationaryKernelMixin, Kernel):
        """CoCaBO's mixture of a continuous and a categorical kernel, each fading with time (see
        the module docstring). ``categorical``: the columns of X (before the time, the last one)
        that hold categories; equal values are equal categories."""

        def __init__(
            self,
            categorical: tuple[int, ...] = (),
            length_scale: float = 0.3,
            epsilon_continuous: float = 0.1,
            epsilon_categorical: float = 0.1,
            mix: float = 0.5,
            length_scale_bounds: tuple[float, float] = LENGTH_SCALE_BOUNDS,
            epsilon_bounds: tuple[float, float] = EPSILON_BOUNDS,
            mix_bounds: tuple[float, float] = MIX_BOUNDS,
        ):
            self.categorical = tuple(categorical)
            self.length_scale = length_scale
            self.epsilon_continuous = epsilon_continuous
            self.epsilon_categorical = epsilon_categorical
            self.mix = mix
            self.length_scale_bounds = length_scale_bounds
            self.epsilon_bounds = epsilon_bounds
            self.mix_bounds = mix_bounds

        @property
        def hyperparameter_length_scale(self):
            return Hyperparameter("length_scale", "numeric", self.length_scale_bounds)

        @property
        def hyperparameter_epsilon_continuous(self):
            return Hyperparameter("epsilon_continuous", "numeric", self.epsilon_bounds)

        @property
        def hyperparameter_epsilon_categorical(self):
            return Hyperparameter("epsilon_categorical", "numeric", self.epsilon_bounds)

        @property
        def hyperparameter_mix(self):
            return Hyperparameter("mix", "numeric", self.mix_bounds)

        def parts(self, X, Y):
            """k₁ (continuous), k₂ (categorical), the squared distances and the elapsed times."""
            features = X.shape[1] - 1
            categorical = list(self.categorical)
            continuous = [c for c in range(features) if c not in categorical]
            squared = cdist(X[:, continuous], Y[:, continuous], "sqeuclidean") if continuous else 0.0
            if categorical:
                same = np.isclose(X[:, None, categorical], Y[None, :, categorical], rtol=0.0, atol=1e-9)
                overlap = same.mean(axis=2)
            else:
                overlap = np.ones((X.shape[0], Y.shape[0]))
            elapsed = np.abs(X[:, -1:] - Y[:, -1][None, :])
            k1 = np.exp(-0.5 * squared / float(self.length_scale) ** 2) * (1.0 - self.epsilon_continuous) ** (
                elapsed / 2.0
            )
            k2 = overlap * (1.0 - self.epsilon_categorical) ** (elapsed / 2.0)
            return k1, k2, np.broadcast_to(squared, k1.shape), elapsed

        def __call__(self, X, Y=None, eval_gradient=False):
            X = np.atleast_2d(X)
            if Y is None:
                Y = X
            elif eval_gradient:
                raise ValueError("the gradient is only defined for Y = None")
            k1, k2, squared, elapsed = self.parts(X, np.atleast_2d(Y))
            lam = float(self.mix)
            K = (1.0 - lam) * 0.5 * (k1 + k2) + lam * k1 * k2
            if not eval_gradient:
                return K
            through_k1 = (1.0 - lam) * 0.5 + lam * k2  # dK/dk1
            through_k2 = (1.0 - lam) * 0.5 + lam * k1  # dK/dk2
            grads = []  # scikit-learn's order: epsilon_categorical, epsilon_continuous, length_scale, mix
            if not self.hyperparameter_epsilon_categorical.fixed:
                grads.append(through_k2 * _log_decay_gradient(k2, elapsed, float(self.epsilon_categorical)))
            if not self.hyperparameter_epsilon_continuous.fixed:
                grads.append(through_k1 * _log_decay_gradient(k1, elapsed, float(self.epsilon_continuous)))
            if not self.hyperparameter_length_scale.fixed:
                grads.append(through_k1 * k1 * squared / float(self.length_scale) ** 2)
            if not self.hyperparameter_mix.fixed:
                grads.append(lam * (k1 * k2 - 0.5 * (k1 + k2)))
            return K, np.stack(grads, axis=2) if grads else np.empty(K.shape + (0,))

        def diag(self, X):
            return np.ones(np.atleast_2d(X).shape[0])

        def __repr__(self):
            return (
                f"TimeVaryingMixture(categorical={self.categorical}, length_scale={self.length_scale:.3g}, "
                f"epsilon_continuous={self.epsilon_continuous:.3g}, "
                f"epsilon_categorical={self.epsilon_categorical:.3g}, mix={self.mix:.3g})"
            )

    return TimeVaryingMixture


def time_varying_kernel(length_scale: float = 0.3, epsilon: float = 0.1):
    """PB2's kernel (see the module docstring)."""
    return _rbf_class()(length_scale=length_scale, epsilon=epsilon)


def mixture_kernel(categorical: Sequence[int], mix: float = 0.5, length_scale: float = 0.3, epsilon: float = 0.1):
    """PB2-Mix's kernel over X's columns, ``categorical`` of them holding categories (see the
    module docstring); both decays start at ``epsilon``, the mixing weight λ at ``mix``."""
    return _mixture_class()(
        categorical=tuple(categorical),
        length_scale=length_scale,
        epsilon_continuous=epsilon,
        epsilon_categorical=epsilon,
        mix=mix,
    )


def _matern52(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Matérn-5/2 at distances ``r`` in length scales, and its derivative by log ℓ."""
    root5 = math.sqrt(5.0)
    decay = np.exp(-root5 * r)
    return (1.0 + root5 * r + 5.0 / 3.0 * r**2) * decay, 5.0 / 3.0 * r**2 * (1.0 + root5 * r) * decay


def _exponentiated_overlap(share: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """exp(ℓ_cat·(s − 1)) for the ``share`` s of equal categories, and its derivative by log ℓ_cat."""
    k_cat = np.exp(scale * (share - 1.0))
    return k_cat, k_cat * scale * (share - 1.0)


@functools.cache
def _casmo_class():
    from scipy.spatial.distance import cdist
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, StationaryKernelMixin

    class CasmoKernel(StationaryKernelMixin, Kernel):
        """BG-PBT's mixed kernel times the time decay (see the module docstring). ``categorical``: the
        columns of X (before the time, the last one) that hold categories; equal values are equal
        categories. ``columns``: how many columns there are before the time, the categorical ones
        included (the rest are continuous or integer)."""

        def __init__(
            self,
            categorical: tuple[int, ...] = (),
            columns: int = 1,
            length_scale: float = 0.5,
            length_scale_categorical: float = 1.0,
            epsilon: float = 0.1,
            mix: float = CASMO_MIX,
            length_scale_bounds: tuple[float, float] = LENGTH_SCALE_BOUNDS,
            categorical_scale_bounds: tuple[float, float] = CATEGORICAL_SCALE_BOUNDS,
            epsilon_bounds: tuple[float, float] = EPSILON_BOUNDS,
        ):
            self.categorical = tuple(categorical)
            self.columns = columns
            self.length_scale = length_scale
            self.length_scale_categorical = length_scale_categorical
            self.epsilon = epsilon
            self.mix = mix
            self.length_scale_bounds = length_scale_bounds
            self.categorical_scale_bounds = categorical_scale_bounds
            self.epsilon_bounds = epsilon_bounds

        @property
        def continuous(self) -> list[int]:
            return [c for c in range(self.columns) if c not in self.categorical]

        @property
        def hyperparameter_length_scale(self):
            bounds = self.length_scale_bounds if self.continuous else "fixed"
            return Hyperparameter("length_scale", "numeric", bounds)

        @property
        def hyperparameter_length_scale_categorical(self):
            bounds = self.categorical_scale_bounds if self.categorical else "fixed"
            return Hyperparameter("length_scale_categorical", "numeric", bounds)

        @property
        def hyperparameter_epsilon(self):
            return Hyperparameter("epsilon", "numeric", self.epsilon_bounds)

        def __call__(self, X, Y=None, eval_gradient=False):
            X = np.atleast_2d(X)
            if Y is None:
                Y = X
            elif eval_gradient:
                raise ValueError("the gradient is only defined for Y = None")
            Y = np.atleast_2d(Y)
            continuous, categorical = self.continuous, list(self.categorical)
            ones = np.ones((X.shape[0], Y.shape[0]))
            k_cont = d_cont = k_cat = d_cat = None
            if continuous:
                k_cont, d_cont = _matern52(cdist(X[:, continuous], Y[:, continuous]) / float(self.length_scale))
            if categorical:
                same = np.isclose(X[:, None, categorical], Y[None, :, categorical], rtol=0.0, atol=1e-9)
                k_cat, d_cat = _exponentiated_overlap(same.mean(axis=2), float(self.length_scale_categorical))
            lam = float(self.mix)
            if k_cont is not None and k_cat is not None:
                spatial = (1.0 - lam) * (k_cat + k_cont) + lam * k_cat * k_cont
                through_cont, through_cat = (1.0 - lam) + lam * k_cat, (1.0 - lam) + lam * k_cont
            elif k_cont is not None:
                spatial, through_cont, through_cat = k_cont, ones, None
            else:
                spatial, through_cont, through_cat = k_cat, None, ones
            elapsed = np.abs(X[:, -1:] - Y[:, -1][None, :])
            eps = float(self.epsilon)
            time = (1.0 - eps) ** (elapsed / 2.0)
            K = spatial * time
            if not eval_gradient:
                return K
            grads = []  # scikit-learn's order of theta: epsilon, length_scale, length_scale_categorical
            if not self.hyperparameter_epsilon.fixed:
                grads.append(_log_decay_gradient(K, elapsed, eps))
            if not self.hyperparameter_length_scale.fixed:
                grads.append(time * through_cont * d_cont)
            if not self.hyperparameter_length_scale_categorical.fixed:
                grads.append(time * through_cat * d_cat)
            return K, np.stack(grads, axis=2) if grads else np.empty(K.shape + (0,))

        def diag(self, X):
            X = np.atleast_2d(X)
            mixed = bool(self.continuous) and bool(self.categorical)
            return np.full(X.shape[0], 2.0 - float(self.mix) if mixed else 1.0)

        def __repr__(self):
            return (
                f"CasmoKernel(categorical={self.categorical}, length_scale={self.length_scale:.3g}, "
                f"length_scale_categorical={self.length_scale_categorical:.3g}, epsilon={self.epsilon:.3g})"
            )

    return CasmoKernel


def casmo_kernel(
    categorical: Sequence[int],
    columns: int,
    length_scale: float = 0.5,
    length_scale_categorical: float = 1.0,
    epsilon: float = 0.1,
):
    """``--explore casmo``'s kernel over X's ``columns`` (then the time), ``categorical`` of them
    holding categories (see the module docstring); λ is BG-PBT's fixed 0.5."""
    return _casmo_class()(
        categorical=tuple(categorical),
        columns=columns,
        length_scale=length_scale,
        length_scale_categorical=length_scale_categorical,
        epsilon=epsilon,
    )
