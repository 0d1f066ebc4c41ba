"""What selection ranks members by: ``--objective`` (pure).

Training always maximises the env's reward; selection, PB2's score changes, the kept best, BG-PBT's
stages and ``--select-on`` use the **objective**: the episode return (``return``, the default), or
a number the env puts in ``info`` when an episode ends (``info:<key>``: Sample Factory's
``true_objective``, DexPBT's success rate), averaged over the episodes a member is scored on (its
last ``--score-window`` training episodes, or its ``--eval-episodes``). Each term has a direction,
``max`` (the default) or ``min`` (``info:energy:min``). Several terms, separated by commas
(``return,info:energy:min``), rank members by Pareto fronts (MO-PBT: evo.core.pareto).

A member's ``score`` (population.csv's ``score``, the kept best, the log's best and mean, PB2's
changes) is the first term, larger better: negated for a ``min`` term; its ``objectives`` are every
term's value as measured.

**Values that are not finite.** An episode whose ``info[key]`` is NaN or ±inf is left out of the key's
mean, as one that did not report the key is (:func:`term_values`), and counted, so that the run names it
at the generation it appears (:func:`nonfinite_warning`); a member with no finite value scores NaN and
ranks last, and a key the env has only ever given as NaN or ±inf is a key it never reported
(:func:`unreported`: the run stops). A term's value that is still not finite (a mean that overflowed) is
no score: :meth:`Term.oriented` makes it NaN, so that +inf never wins an exploit nor becomes the kept best.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RETURN = "return"
INFO = "info"
DIRECTIONS = ("max", "min")
FORMS = (
    "'return' (the episode return) or 'info:<key>' (a number the env puts in info when an episode ends), each "
    "optionally followed by ':max' (the default) or ':min', several separated by commas (e.g. return,info:energy:min)"
)


@dataclass(frozen=True)
class Term:
    """One objective: the episode return (``key`` None) or ``info[key]`` at an episode's end, and whether
    larger (``max``) or smaller (``min``) is better."""

    key: str | None = None
    direction: str = "max"

    @property
    def name(self) -> str:
        """How the records name it: ``return`` or ``info:<key>``."""
        return RETURN if self.key is None else f"{INFO}:{self.key}"

    @property
    def text(self) -> str:
        """How ``--objective`` writes it (the direction only when it is ``min``)."""
        return self.name if self.direction == "max" else f"{self.name}:min"

    def oriented(self, value: float) -> float:
        """``value`` with larger better (negated for ``min``); NaN for NaN and ±inf, which are no score."""
        if not math.isfinite(value):
            return math.nan
        return float(value) if self.direction == "max" else -float(value)


@dataclass(frozen=True)
class Objective:
    """The terms selection ranks members by (see the module docstring)."""

    terms: tuple[Term, ...] = (Term(),)

    @property
    def default(self) -> bool:
        """The episode return, maximised: the records are those of a run before ``--objective`` existed."""
        return self.terms == (Term(),)

    @property
    def several(self) -> bool:
        return len(self.terms) > 1

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(term.name for term in self.terms)

    @property
    def columns(self) -> tuple[str, ...]:
        """population.csv's columns of the objective: its terms' names (none for the return's run, whose score
        is the return)."""
        return () if self.default else self.names

    @property
    def info_keys(self) -> tuple[str, ...]:
        """The keys of ``info`` it reads, in order."""
        return tuple(term.key for term in self.terms if term.key is not None)

    @property
    def text(self) -> str:
        return ",".join(term.text for term in self.terms)

    def score(self, values: Sequence[float]) -> float:
        """The selection score of a member whose terms measured ``values``: the first, larger better."""
        return self.terms[0].oriented(values[0])

    def fitness(self, values: Sequence[float]) -> tuple[float, ...]:
        """Every term of ``values``, larger better."""
        return tuple(term.oriented(value) for term, value in zip(self.terms, values, strict=True))

    def selection_keys(self, results: Sequence[Any]) -> list:
        """What selection ranks ``results`` (MemberResults) by: their scores, or with several terms a row
        of every term (larger better) per member."""
        if not self.several:
            return [result.score for result in results]
        return [self.fitness(result.objectives) if result.objectives else self.nan_row() for result in results]

    def nan_row(self) -> tuple[float, ...]:
        return (math.nan,) * len(self.terms)


DEFAULT = Objective()


def parse_objective(text: str | None) -> tuple[Objective, list[str]]:
    """``--objective TEXT`` as an :class:`Objective`, and every problem with it (the default's when
    there are problems)."""
    if text is None:
        return DEFAULT, []
    problems: list[str] = []
    terms: list[Term] = []
    for part in str(text).split(","):
        part = part.strip()
        term = _term(part, text, problems)
        if term is None:
            continue
        if any(other.name == term.name for other in terms):
            problems.append(f"--objective {text}: {term.name} is given twice; give each objective once")
            continue
        terms.append(term)
    if problems or not terms:
        return DEFAULT, problems or [f"--objective {text!r}: give {FORMS}"]
    return Objective(tuple(terms)), []


def _term(part: str, text: str, problems: list[str]) -> Term | None:
    if not part:
        problems.append(f"--objective {text}: an empty objective between commas; give {FORMS}")
        return None
    words = part.split(":")
    kind = words[0]
    if kind == RETURN:
        key, rest = None, words[1:]
    elif kind == INFO:
        if len(words) < 2 or not words[1]:
            problems.append(
                f"--objective {text}: {part!r} names no key; give info:<key>, a key the env puts in info when an "
                "episode ends (e.g. info:is_success)"
            )
            return None
        key, rest = words[1], words[2:]
    else:
        close = difflib.get_close_matches(kind, [RETURN, INFO], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(f"--objective {text}: {part!r} is not an objective{hint}; give {FORMS}")
        return None
    if len(rest) > 1 or (rest and rest[0] not in DIRECTIONS):
        direction = ":".join(rest)
        problems.append(
            f"--objective {text}: the direction {direction!r} of {part.rsplit(':' + direction, 1)[0]} is not 'max' "
            "or 'min'; write e.g. info:energy:min (smaller is better) or info:energy (larger is better)"
        )
        return None
    return Term(key, rest[0] if rest else "max")


def unreported(objective: Objective, population: Sequence[Any]) -> str | None:
    """Why the run cannot go on, or None: members of ``population`` (MemberResults) scored episodes,
    and none of them reported a key of the objective when an episode ended (as a finite number: a key
    only ever NaN or ±inf is not reported). ``info_keys`` of a result: the keys its scored env put in
    info at its episodes' ends (None: no episode ended yet)."""
    seen = [result.info_keys for result in population if result.info_keys is not None]
    if not objective.info_keys or not seen:
        return None
    reported = sorted({key for keys in seen for key in keys})
    missing = [key for key in objective.info_keys if key not in reported]
    if not missing:
        return None
    named = ", ".join(repr(key) for key in missing)
    nonfinite = [key for key in missing if any(result.nonfinite.get(key) for result in population)]
    how = f" (only as NaN or ±inf: {', '.join(repr(key) for key in nonfinite)})" if nonfinite else ""
    said = ", ".join(reported) if reported else "no key at all"
    return (
        f"--objective {objective.text}: the env never put {named} in info as a finite number when an episode "
        f"ended{how} (members {', '.join(str(r.member) for r in population if r.info_keys is not None)} finished "
        f"episodes); the keys it did report: {said}. Give one of those, or make the env report {named} as a finite "
        "number at the end of every episode"
    )


def term_values(
    objective: Objective, episode_return: float, info_values: Mapping[str, Sequence[float]]
) -> tuple[list[float], dict[str, int]]:
    """Each term's value on a member's scored episodes (``episode_return``: their mean return;
    ``info_values``: each info key's values at the ends of those that reported it): an info key's mean
    over its finite values (NaN with none); and, per key, how many of its values were not finite (NaN,
    ±inf: left out; keys with none are not listed)."""
    values, nonfinite = [], {}
    for term in objective.terms:
        if term.key is None:
            values.append(float(episode_return))
            continue
        given = [float(value) for value in info_values.get(term.key, ())]
        finite = [value for value in given if math.isfinite(value)]
        values.append(math.fsum(finite) / len(finite) if finite else math.nan)
        if len(finite) < len(given):
            nonfinite[term.key] = len(given) - len(finite)
    return values, nonfinite


def outcomes_of(
    objective: Objective, returns: Sequence[float], info_values: Mapping[str, Sequence[float]]
) -> tuple[float, ...]:
    """The values behind a member's score, one per scored episode: the first term's, larger better, finite
    ones only (``returns``: each scored episode's return; ``info_values``: as :func:`term_values` takes them).
    What ``--exploit-test welch`` compares (evo.core.welch)."""
    term = objective.terms[0]
    given = returns if term.key is None else info_values.get(term.key, ())
    return tuple(value for value in (term.oriented(float(v)) for v in given) if math.isfinite(value))


def nonfinite_warning(objective: Objective, population: Sequence[Any]) -> str | None:
    """What to warn of, or None: members of ``population`` (MemberResults) whose scored episodes ended
    with an info key of the objective NaN or ±inf (``nonfinite``: per key, how many), each scored on its
    finite values."""
    found = []
    for key in objective.info_keys:
        counts = {result.member: result.nonfinite[key] for result in population if result.nonfinite.get(key)}
        if counts:
            each = ", ".join(f"member {member}: {count}" for member, count in counts.items())
            found.append(f"info:{key} was NaN or ±inf at the end of {sum(counts.values())} scored episodes ({each})")
    if not found:
        return None
    return (
        f"{'; '.join(found)}: those values are left out, each member scored on its finite ones (with none, it "
        "ranks last, as a member whose episodes did not report the key)"
    )


class ObjectiveNotReported(RuntimeError):
    """The env never reports a key ``--objective`` reads: the run stops (every rank), its records kept."""


def scores_of(objective: Objective, values: Sequence[float]) -> tuple[float, tuple[float, ...]]:
    """A member's selection score and its objectives (as measured; empty for the default objective)
    from every term's measured ``values``."""
    if objective.default:
        return float(values[0]), ()
    return objective.score(values), tuple(float(value) for value in values)
