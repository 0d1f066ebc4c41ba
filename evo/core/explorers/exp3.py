"""TV.EXP3.M, the bandit that picks categories in PB2-Mult and PB2-Mix (pure, numpy only).

Parker-Holder et al., "Tuning Mixed Input Hyperparameters on the Fly for Efficient Population
Based AutoRL" (NeurIPS 2021; code: jparkerholder/procgen_autorl ``exp3.py`` and
``exp3_multiple_play/deep_round.py``) choose a categorical hyperparameter (DrAC's augmentation) with a
time-varying EXP3 with multiple plays: Exp3.M (Uchiya, Nakamura & Kudo 2010), which plays B distinct
arms per round, with Exp3.S's fixed share (Auer et al. 2002) so that an arm that was bad early can
come back when the best category changes during training. Here, for K categories, a population of B
members and T rounds (generations):

- exploration rate γ = sqrt(K·ln(K/B) / ((e − 1)·B·T/10)) when B < K, else 0.2 (the paper's code);
  clipped to (0, 1], since the formula passes 1 for short runs (K = 8, B = 4, T ≤ 8);
- fixed share ω = 1/(10·T): after each round every arm's weight gains e·ω·Σw/K;
- capping (Exp3.M): when one weight is so large that its inclusion probability would pass 1, the
  weights above a threshold α (α / Σ min(w, α) = (1/B − γ/K)/(1 − γ)) count as α, and those arms are
  not updated that round (they are played with probability 1 anyway);
- inclusion probabilities q_i = B·((1 − γ)·w'_i/Σw' + γ/K), which sum to B and are at most 1;
- update per round: each arm's rewards of the round, importance-weighted by 1/q_i, w_i ←
  w_i·exp(γ·B/K · Σ r/q_i) + e·ω·Σw/K, then the weights are normalised;
- rewards: the change in score over a round, min–max normalised to [0, 1] over the data the
  bandit replays (PB2's observations: the change per generation, so per env step up to a constant);
- draws: DepRound (Gandhi et al. 2006) picks k distinct arms with inclusion probabilities exactly
  k·q_i/B, for the k recipients of one generation; when B ≥ K (no capping, q may pass 1) the k
  recipients draw independently from q/B, as the paper's code does.

Like the paper's code, the bandit keeps no state of its own: its weights start at 1 and are rebuilt
by replaying the rounds of PB2's observations, so a checkpoint of those observations restores it and
``--resume`` continues it. Three things differ from that code, each a correction of what reads as a
slip there: the fixed share reaches every arm each round (the code adds it only to arms played that
round, which lets an arm never played fade for good: the opposite of what the share is for); the
weight update multiplies the weight by the exponential and then adds the share (the code multiplies
by their sum); and a reward is weighted by its arm's inclusion probability q_i once (the code, when
B < K, divides by B·q_i).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

SNAP = 1e-9  # DepRound: a probability this close to 0 or 1 is settled


def exploration_rate(arms: int, batch: int, rounds: int) -> float:
    """γ of TV.EXP3.M (see the module docstring), in (0, 1]."""
    if batch >= arms:
        return 0.2
    gamma = math.sqrt(arms * math.log(arms / batch) / ((math.e - 1) * batch * max(rounds, 1) / 10))
    return min(gamma, 1.0)


def normalise_rewards(changes: Sequence[float]) -> np.ndarray:
    """Changes in score min–max scaled to [0, 1] (all 0.5 when they are all equal)."""
    values = np.asarray(changes, dtype=float)
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low <= 1e-12:
        return np.full(values.shape, 0.5)
    return (values - low) / (high - low)


def dep_round(probabilities: Sequence[float], rng: np.random.Generator) -> list[int]:
    """DepRound (Gandhi et al. 2006): k distinct indices, where k = sum(probabilities) (a whole
    number) and each index i is chosen with probability exactly ``probabilities[i]`` (each in [0, 1]).

    Each step takes two undecided entries and moves mass between them so that one of them becomes
    0 or 1, with the coin's odds chosen so that both keep their expected values."""
    p = np.array(probabilities, dtype=float)
    k = round(float(p.sum()))
    if abs(p.sum() - k) > 1e-6 or (p < -SNAP).any() or (p > 1 + SNAP).any():
        raise ValueError(f"DepRound needs probabilities in [0, 1] with a whole-number sum, got {p.tolist()}")
    p = np.clip(p, 0.0, 1.0)
    while True:
        p[p < SNAP] = 0.0
        p[p > 1 - SNAP] = 1.0
        open_ = np.flatnonzero((p > 0) & (p < 1))
        if len(open_) < 2:
            break
        i, j = int(open_[0]), int(open_[1])
        up, down = min(1 - p[i], p[j]), min(p[i], 1 - p[j])  # i up and j down by ``up``, or the reverse
        if rng.random() < down / (up + down):
            p[i], p[j] = p[i] + up, p[j] - up
        else:
            p[i], p[j] = p[i] - down, p[j] + down
    chosen = [int(i) for i in np.flatnonzero(p == 1.0)]
    if len(chosen) < k:  # rounding left one entry a hair under 1
        rest = [int(i) for i in np.argsort(-p) if p[i] < 1.0]
        chosen += rest[: k - len(chosen)]
    return sorted(chosen)


@dataclass
class TVExp3M:
    """TV.EXP3.M over ``arms`` categories for a population of ``batch`` members over ``rounds``
    generations (see the module docstring); ``weights`` sum to 1."""

    arms: int
    batch: int
    rounds: int
    weights: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.weights is None:
            self.weights = np.full(self.arms, 1.0 / self.arms)

    @property
    def gamma(self) -> float:
        return exploration_rate(self.arms, self.batch, self.rounds)

    @property
    def omega(self) -> float:
        return 1.0 / (10.0 * max(self.rounds, 1))

    def capped(self) -> tuple[np.ndarray, np.ndarray]:
        """The weights with Exp3.M's cap applied, and a mask of the capped arms."""
        w, gamma = self.weights, self.gamma
        none = np.zeros(self.arms, dtype=bool)
        if self.batch >= self.arms or gamma >= 1.0:
            return w.copy(), none
        eta = (1.0 / self.batch - gamma / self.arms) / (1.0 - gamma)
        if w.max() < eta * w.sum():
            return w.copy(), none
        ordered = np.sort(w)[::-1]
        alpha = float(ordered[0])
        for top in range(1, self.arms):  # the ``top`` largest capped at alpha, the rest as they are
            if top * eta >= 1.0:  # cannot happen with a cap to find (fewer than B arms are capped)
                break
            alpha = eta * float(ordered[top:].sum()) / (1.0 - top * eta)
            if ordered[top] <= alpha:
                break
        capped = w > alpha
        return np.where(capped, alpha, w), capped

    def inclusion(self) -> tuple[np.ndarray, np.ndarray]:
        """Each arm's probability of being among ``batch`` plays (they sum to ``batch``; at most 1
        when batch < arms), and the mask of capped arms."""
        w, capped = self.capped()
        draw = (1.0 - self.gamma) * w / w.sum() + self.gamma / self.arms
        return self.batch * draw, capped

    def update(self, played: Sequence[int], rewards: Sequence[float]) -> None:
        """One round: the arms the members trained with and their rewards (in [0, 1])."""
        q, capped = self.inclusion()
        estimates = np.zeros(self.arms)
        for arm, reward in zip(played, rewards, strict=True):
            estimates[arm] += float(reward) / q[arm]
        share = math.e * self.omega * float(self.weights.sum()) / self.arms
        growth = np.where(capped, 0.0, self.gamma * self.batch / self.arms * estimates)
        weights = self.weights * np.exp(growth) + share
        self.weights = weights / weights.sum()

    def draw(self, count: int, rng: np.random.Generator) -> list[int]:
        """``count`` arms for one generation's recipients: distinct, by DepRound, with inclusion
        probabilities count·q/B, when B < K; else independent draws from q/B."""
        q, _ = self.inclusion()
        per_draw = q / q.sum()
        if self.batch < self.arms and count <= self.batch:
            picks = dep_round(per_draw * count, rng)
            return [picks[int(i)] for i in rng.permutation(len(picks))]
        return [int(arm) for arm in rng.choice(self.arms, size=count, p=per_draw)]

    @classmethod
    def replay(cls, arms: int, batch: int, rounds: int, history: Iterable[tuple[int, int, float]]) -> TVExp3M:
        """The bandit after the rounds of ``history``: (round, arm, reward in [0, 1]) triples, one
        per member and round, replayed in round order."""
        bandit = cls(arms, batch, rounds)
        by_round: dict[int, list[tuple[int, float]]] = {}
        for round_, arm, reward in history:
            by_round.setdefault(int(round_), []).append((int(arm), float(reward)))
        for round_ in sorted(by_round):
            played, rewards = zip(*by_round[round_], strict=True)
            bandit.update(played, rewards)
        return bandit
