"""What a member reached in one generation: the typed row the ranks gather (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

NAN = float("nan")


@dataclass(frozen=True)
class Scores:
    """A member's scores at the end of a generation: ``score`` is the one selection uses;
    ``score_train`` (training episodes) and ``score_test`` (evaluation episodes) are NaN
    when not measured. ``score_train_stale``: ``score_train`` is carried, not measured (the
    member finished no training episode since its weights last changed hands: it is the last
    training score those weights had)."""

    score: float
    score_train: float = NAN
    score_test: float = NAN
    score_train_stale: bool = False
    objectives: tuple[float, ...] = ()
    """With ``--objective`` other than the return: each term's value on the scored episodes, as
    measured (evo.core.objective; ``score`` is the first, larger better)."""
    info_keys: tuple[str, ...] | None = None
    """With an ``info:`` objective: the keys the scored env put in info when its episodes ended (None:
    none ended yet)."""
    nonfinite: Mapping[str, int] = field(default_factory=dict)
    """With an ``info:`` objective: per key, how many of the scored episodes ended with it NaN or ±inf
    (left out of its mean: evo.core.objective.term_values); keys with none are not listed."""
    outcomes: tuple[float, ...] = ()
    """The values behind ``score``, one per scored episode (its return, or with ``--objective`` the first
    term's value, larger better; finite ones only): what ``--exploit-test welch`` compares
    (evo.core.welch). Empty when the learner gives none."""


@dataclass(frozen=True)
class Standing:
    """What a member's weights earned, carried whole with them when they change hands (an exploit, a restart,
    a ready point's copy, a stage's survivor): the training score, the objectives (``--objective``) and the
    outcomes behind the score (:attr:`Scores.outcomes`). The member that takes the weights is scored by these
    until it finishes an episode of its own."""

    score_train: float = NAN
    objectives: tuple[float, ...] = ()
    outcomes: tuple[float, ...] = ()


@dataclass(frozen=True)
class MemberResult:
    """One member at the end of one generation, as gathered on rank 0: its id, the rank
    that holds it, its env-step counter, its scores and the hyperparameters it trained with."""

    member: int
    rank: int
    env_steps: int
    score: float
    score_train: float = NAN
    score_test: float = NAN
    hparams: Mapping[str, float] = field(default_factory=dict)
    score_train_stale: bool = False
    objectives: tuple[float, ...] = ()
    """Each ``--objective`` term's value as measured (empty for the default, the return)."""
    info_keys: tuple[str, ...] | None = None
    """The keys the member's scored env put in info at its episodes' ends (see :class:`Scores`)."""
    nonfinite: Mapping[str, int] = field(default_factory=dict)
    """Per info key, how many of its scored episodes ended with it NaN or ±inf (see :class:`Scores`)."""
    outcomes: tuple[float, ...] = ()
    """The values behind its score, one per scored episode (see :class:`Scores`)."""

    @classmethod
    def of(cls, member: int, rank: int, env_steps: int, scores: Scores, hparams: Mapping[str, float]) -> MemberResult:
        return cls(
            member,
            rank,
            env_steps,
            scores.score,
            scores.score_train,
            scores.score_test,
            dict(hparams),
            scores.score_train_stale,
            tuple(scores.objectives),
            scores.info_keys,
            dict(scores.nonfinite),
            tuple(scores.outcomes),
        )

    @property
    def standing(self) -> Standing:
        """What its weights carry to a member that copies them (:class:`Standing`)."""
        return Standing(self.score_train, tuple(self.objectives), tuple(self.outcomes))

    @property
    def scored(self) -> bool:
        """False when the member finished no episode (a NaN score ranks last), or its score is ±inf
        (no score: it never becomes the kept best)."""
        return math.isfinite(self.score)


def finite_or_none(value: float) -> float | None:
    """A number as JSON holds it: NaN and ±inf, which JSON cannot, as null."""
    return float(value) if math.isfinite(value) else None


def by_member(population: Sequence[MemberResult]) -> list[MemberResult]:
    """The population sorted by member id; refuses a member id given twice."""
    ordered = sorted(population, key=lambda result: result.member)
    ids = [result.member for result in ordered]
    if len(set(ids)) != len(ids):
        raise ValueError(f"member ids {ids} repeat: each member must report once per generation")
    return ordered


def new_best(
    results: Sequence[MemberResult], best_score: float | None, tiebreak: Mapping[int, int] | None = None
) -> MemberResult | None:
    """The result among ``results`` that beats ``best_score`` (the best selection score the run kept
    so far; None: none yet), or None. The highest score wins, a tie going to the lower priority in
    ``tiebreak`` (each member id's, evo.core.streams.tie_priorities: the generation's draw, as in
    selection; None: the lower member id); a NaN or ±inf score never wins, and equalling the kept best
    does not beat it (the earlier one stays)."""
    scored = [result for result in results if result.scored]
    if not scored:
        return None
    top = max(
        scored,
        key=lambda result: (result.score, -(tiebreak[result.member] if tiebreak is not None else result.member)),
    )
    if best_score is not None and not top.score > best_score:
        return None
    return top
