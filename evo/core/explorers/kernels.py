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
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

EPSILON_BOUNDS = (1e-4, 0.9)
LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
MIX_BOUNDS = (1e-3, 1.0)


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
