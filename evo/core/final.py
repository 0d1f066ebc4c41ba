"""The final pick (``--final-eval EPISODES --final-top K``): which members a complete run plays again on
fresh episodes, and which of them it keeps (pure).

A member's selection score is the mean of a few noisy episodes, and the population's best is the highest
of several such means: the member with the best selection score is often the luckiest, not the best
(the selection bias). At the end of a complete run the top K members by selection score are each played
on the same EPISODES fresh episodes (evo-evaluate's: env seeds no env of the run had, and on Procgen
levels it neither trained nor selected on), and the one with the best fresh mean is the run's final pick.

- :func:`candidates`: the top K of the final population (a synchronous run's last generation, an
  asynchronous run's every member at its last ready point) by selection score. A member that copied a
  donor there is left out: its file holds its donor's weights, not those its score measured (under
  winner-takes-all every member but the winner copies it, so the winner, and any member tied with it
  that kept its weights, are all there is to play). A member without a finite score is never one.
- :func:`fresh_score`: a candidate's fresh mean and its standard error over the episodes' values of
  the run's score (the return, or ``--objective``'s first term, larger better).
- :func:`pick`: the best fresh mean. A tie goes to the member with the higher selection score (the one
  whose other evidence, its selection episodes, is the stronger), then to the one selection ranks first
  (equal selection scores: by the run's tie draw, :func:`candidates`); the pick says so (:attr:`Pick.tie`).
- :func:`held_out_levels`: the Procgen levels the fresh episodes are played on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

DEFAULT_TOP = 3
"""``--final-top``'s default: the top 3 members (or the whole population if smaller)."""
HELD_OUT_START = 10_000
"""The first Procgen level the final pick plays, unless the run trained or selected on levels past it
(evo-evaluate's docs suggest ``--start-level 10000 --num-levels 1000``)."""
HELD_OUT_LEVELS = 1_000


@dataclass(frozen=True)
class FinalSettings:
    """How a run makes its final pick: ``top`` members on ``episodes`` fresh episodes of one env seeded with
    ``seed`` (on Procgen ``levels``, ``[first, count]``, or None), ``deterministic`` actions or sampled, scored
    by ``score`` (the objective's first term, as ``--objective`` writes it), at the run's last ``generation``
    (an asynchronous run's: every member's last interval). Resolved from the config
    (evo.config.Config.final_settings)."""

    episodes: int
    top: int
    seed: int
    levels: tuple[int, int] | None
    deterministic: bool
    score: str
    generation: int
    asynchronous: bool = False

    @property
    def actions(self) -> str:
        return "deterministic" if self.deterministic else "sampled"

    @property
    def how(self) -> dict:
        """What the final pick's records say of how it played (a result made another way is played again)."""
        return {
            "episodes": self.episodes,
            "top": self.top,
            "seed": self.seed,
            "envs": 1,
            "levels": list(self.levels) if self.levels is not None else None,
            "actions": self.actions,
            "score": self.score,
            "generation": self.generation,
        }


@dataclass(frozen=True)
class Standing:
    """A member of the final population as the records have it: its selection score there and, if it
    copied a donor there, the donor (its file then holds the donor's weights)."""

    member: int
    generation: int
    """The generation (an asynchronous run: the member's interval) of its row."""
    env_steps: int
    score: float
    donor: int | None = None


@dataclass(frozen=True)
class Candidate:
    """A member the final pick plays: its selection score, and which of its files holds it."""

    member: int
    generation: int
    env_steps: int
    selection_score: float


@dataclass(frozen=True)
class FreshScore:
    """A candidate's score on the fresh episodes: their mean, its standard error (NaN with fewer than two
    values) and how many episodes gave a value (an ``info:`` key may be missing from some)."""

    mean: float
    standard_error: float
    count: int


@dataclass(frozen=True)
class Pick:
    """The final pick: the member kept, the one the selection score alone would have kept, and the tie
    the pick rests on (None: no tie in the fresh mean)."""

    member: int
    selection_member: int
    tie: str | None = None


def candidates(
    final: Iterable[Standing], top: int, tiebreak: Mapping[int, int] | None = None
) -> tuple[list[Candidate], list[Standing]]:
    """The top ``top`` of the final population by selection score (highest first, a tie by ``tiebreak``, each
    member id's priority, lower first: the run's draw for its last generation, as selection ranks; None: the
    lower member id), and the members left out because they copied a donor there. Members without a
    finite score are neither."""
    standing = sorted(
        final,
        key=lambda s: (
            -s.score if math.isfinite(s.score) else math.inf,
            tiebreak[s.member] if tiebreak is not None else s.member,
        ),
    )
    copied = [s for s in standing if s.donor is not None and s.donor != s.member]
    played = [s for s in standing if (s.donor is None or s.donor == s.member) and math.isfinite(s.score)]
    chosen = [Candidate(s.member, s.generation, s.env_steps, s.score) for s in played[:top]]
    return chosen, [s for s in copied if math.isfinite(s.score)]


def fresh_score(values: Sequence[float]) -> FreshScore:
    """The mean and standard error (sample standard deviation / sqrt(n)) of the finite ``values``."""
    finite = [float(v) for v in values if math.isfinite(v)]
    count = len(finite)
    if not count:
        return FreshScore(math.nan, math.nan, 0)
    mean = math.fsum(finite) / count
    if count < 2:
        return FreshScore(mean, math.nan, count)
    variance = math.fsum((v - mean) ** 2 for v in finite) / (count - 1)
    return FreshScore(mean, math.sqrt(variance / count), count)


def pick(chosen: Sequence[Candidate], fresh: dict[int, FreshScore]) -> Pick:
    """The candidate with the best fresh mean (``chosen``: in selection order, as :func:`candidates` gives
    them; ``fresh``: each one's score). A candidate without a fresh value ranks last."""
    order = {candidate.member: index for index, candidate in enumerate(chosen)}

    def key(candidate: Candidate) -> tuple[float, float, int]:
        mean = fresh[candidate.member].mean
        return (mean if math.isfinite(mean) else -math.inf, candidate.selection_score, -order[candidate.member])

    best = max(chosen, key=key)
    tied = [c for c in chosen if c is not best and fresh[c.member].mean == fresh[best.member].mean]
    tie = None
    if tied and math.isfinite(fresh[best.member].mean):
        others = ", ".join(str(c.member) for c in tied)
        same_selection = any(c.selection_score == best.selection_score for c in tied)
        rule = (
            "selection's order (the same selection score: the run's tie draw)"
            if same_selection
            else "the higher selection score"
        )
        tie = (
            f"member {best.member} ties member(s) {others} at a fresh mean of {fresh[best.member].mean:.6g}; "
            f"broken by {rule}"
        )
    return Pick(best.member, chosen[0].member, tie)


def held_out_levels(
    start_level: int, num_levels: int, eval_start_level: int, eval_num_levels: int
) -> tuple[int, int] | None:
    """The Procgen levels ``[first, count]`` the final pick plays: the first 1,000 levels from 10,000 or past
    every level the run trained (``start_level`` + ``num_levels``) or scored (the evaluation levels) on;
    None where the run trained on the whole distribution (``num_levels`` 0): no level is held out, and the
    fresh seeds draw the levels, as evo-evaluate does without ``--start-level``."""
    if num_levels <= 0:
        return None
    ends = [HELD_OUT_START, start_level + num_levels]
    if eval_num_levels > 0:
        ends.append(eval_start_level + eval_num_levels)
    return max(ends), HELD_OUT_LEVELS
