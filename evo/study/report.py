"""The study's report as text (pure: the runs' numbers in, markdown out).

What a reader needs first is the answer to the question the study declared: :func:`verdict` states
the primary comparison (and the secondary ones) in words, with the paired t-interval over seeds, the
seeds won and lost, and "not separated" when the interval includes 0. Then the tables: selection
scores (biased upwards: they chose the members), fresh returns with the floors (Procgen: a
uniform-random policy and the best constant action on the same test levels), the anytime table at
equal *total* env steps, the selection bias (selection score minus fresh score), every declared
comparison seed by seed, how far each agent is above the floor, BG-PBT's stages, and the time the
records say the runs took.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evo.study.records import Point, Result, Run
from evo.study.spec import KEPT, Comparison, percent, side_method
from evo.study.stats import Paired, bonferroni, paired, sign_flip_p, smallest_p, standard_error, t_interval

SEPARATION_SE = 3.0
"""How many standard errors above the floor an agent must be to count as having left it (the pilot)."""


@dataclass(frozen=True)
class FloorValues:
    """One env and seed's floors, as means over the fresh episodes (with standard errors)."""

    random: float
    random_se: float
    constant: float | None = None
    constant_se: float | None = None
    action: int | None = None
    constant_returns: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    """Every constant action's returns, episode by episode (to recognise a policy that plays one)."""

    def same_as_constant(self, returns: Sequence[float]) -> int | None:
        """The constant action whose returns equal ``returns`` episode for episode, if one does."""
        matches = [a for a, played in sorted(self.constant_returns.items()) if tuple(played) == tuple(returns)]
        return matches[0] if matches else None

    @property
    def highest(self) -> tuple[float, float]:
        """The higher floor's mean and standard error."""
        if self.constant is not None and self.constant > self.random:
            return self.constant, self.constant_se
        return self.random, self.random_se


def decimals(*values: float) -> int:
    """The decimals that show the largest of ``values`` (in magnitude) to three significant digits, one at
    least: returns and most scores keep one (704.5, 2.7), a success rate below 1 gets three (0.0976 and 0.1002
    read 0.098 and 0.100, where one decimal read 0.1 for both)."""
    scale = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    if scale == 0 or scale >= 1:
        return 1
    return min(2 - math.floor(math.log10(scale)), 6)


def _mean_std(values: list[float]) -> str:
    """Mean ± standard deviation of the values measured ("—" if none is: the rl_zoo3 cross-check has
    no selection scores)."""
    values = [v for v in values if v == v]
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{decimals(values[0])}f}"
    mean, std = statistics.mean(values), statistics.stdev(values)
    return f"{mean:.{decimals(mean)}f} ± {std:.{decimals(mean)}f}"


def _label(env_id: str, threshold: float | None) -> str:
    return env_id if threshold is None else f"{env_id} (≥ {threshold:g})"


def table(results: list[Result], envs, methods, thresholds: Mapping[str, float | None]) -> str:
    """The markdown table, one row per env and method (mean ± std over seeds)."""
    lines = [
        "| env | method | members | seeds | final best | final median | best at one agent's total env steps | "
        "area under best curve | total env steps to threshold (median of the seeds that reached it) | reached | "
        "wall time (s) | ties / copies per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for env_id in envs:
        for method in methods:
            rows = [r for r in results if r.env_id == env_id and r.method == method]
            if not rows:
                continue
            reached = [r.steps_to_threshold for r in rows if r.steps_to_threshold is not None]
            steps = f"{statistics.median(reached):,.0f}" if reached else "—"
            count = f"{len(reached)}/{len(rows)}"
            if thresholds.get(env_id) is None:  # nothing declared to reach
                steps, count = "—", "— (no threshold)"
            lines.append(
                f"| {_label(env_id, thresholds.get(env_id))} | {method} | {rows[0].members} | {len(rows)} | "
                f"{_mean_std([r.final_best for r in rows])} | {_mean_std([r.final_median for r in rows])} | "
                f"{_mean_std([r.equal_total for r in rows])} | {_mean_std([r.auc for r in rows])} | "
                f"{steps} | {count} | "
                f"{statistics.mean(r.wall_s for r in rows):.0f} | "
                f"{statistics.mean(r.ties for r in rows):.1f} / {statistics.mean(r.copies for r in rows):.1f} |"
            )
    return "\n".join(lines) + "\n"


def _ci(mean: float, low: float, high: float) -> str:
    d = decimals(mean, low, high)
    return f"{mean:.{d}f} [{low:.{d}f}, {high:.{d}f}]"


def method_rows(results: list[Result], envs, methods):
    """Per env and method that ran: (env, method, its results by seed, the env's results by (method, seed))."""
    for env_id in envs:
        runs = {(r.method, r.seed): r for r in results if r.env_id == env_id}
        for method in methods:
            rows = [r for (m, _), r in sorted(runs.items()) if m == method]
            if rows:
                yield env_id, method, rows, runs


def _wins(differences: Sequence[float]) -> str:
    return f"{sum(d > 0 for d in differences)} / {sum(d < 0 for d in differences)} of {len(differences)}"


def comparisons(results: list[Result], envs, methods, reference: str) -> str:
    """Per env and method: the final best selection score and the area under the best curve with
    95 % t-intervals over seeds, and the paired difference from ``reference`` over the seeds both
    ran (mean, t-interval, wins/losses, the sign-flip test's p)."""
    lines = [
        f"| env | method | seeds | final best, mean [95 % CI] | area under best curve [95 % CI] | "
        f"final best minus {reference}'s, same seed [95 % CI] | better / worse than {reference} | p (sign flip) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env_id, method, rows, runs in method_rows(results, envs, methods):
        if all(math.isnan(r.final_best) for r in rows):
            continue  # no selection score (the rl_zoo3 cross-check): only in the fresh table
        best = _ci(*t_interval([r.final_best for r in rows]))
        auc = _ci(*t_interval([r.auc for r in rows]))
        pairs = [(r.final_best, runs[(reference, r.seed)].final_best) for r in rows if (reference, r.seed) in runs]
        if method == reference or not pairs:
            versus = "—", "—", "—"
        else:
            differences = [a - b for a, b in pairs]
            versus = _ci(*t_interval(differences)), _wins(differences), f"{sign_flip_p(differences):.3f}"
        lines.append(f"| {env_id} | {method} | {len(rows)} | {best} | {auc} | " + " | ".join(versus) + " |")
    seeds = len({r.seed for r in results})
    note = (
        f"\nSelection scores (the scores that chose the members, so biased upwards). With {seeds} paired seeds the "
        f"two-sided sign-flip test cannot give p below {smallest_p(seeds):.3f}; intervals are Student's t over seeds "
        "(percentile bootstraps over 3-5 seeds cover the mean far less often than 95 %).\n"
    )
    return "\n".join(lines) + "\n" + note


def actions_words(deterministic: bool) -> str:
    return "deterministic" if deterministic else "sampled-action"


def fresh_table(
    results: list[Result],
    envs,
    methods,
    reference: str,
    episodes: int,
    levels: tuple[int, int] | None,
    deterministic: bool = True,
    floors: Mapping[str, Mapping[int, FloorValues]] | None = None,
) -> str:
    """The numbers to report: the selected member, the kept best and the population's median,
    re-evaluated on fresh episodes, mean and t-interval over seeds, and paired with the reference;
    the floors of each env that has them, on the same episodes."""
    where = "on seeds no run used"
    if levels is not None:
        start, count = levels
        where = f"of levels {start}-{start + count - 1} (never trained or selected on)"
    how = "sampled-action"
    if deterministic:
        how = "deterministic (argmax)" if levels is not None else "deterministic"
    sampled = " Actions were sampled from each policy, as DrAC's test.py plays Procgen." if not deterministic else ""
    lines = [
        f"Re-evaluated on {episodes} fresh {how} episodes {where}; mean [95 % t-interval] "
        'over seeds; "kept best": the run\'s final pick where it made one (`--final-eval`), else the weights behind '
        f"its highest selection score (— where the run kept none).{sampled}\n",
        f"| env | method | seeds | selected member | kept best | population median | selected minus "
        f"{reference}'s, same seed | better / worse than {reference} | p (sign flip) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for env_id, method, rows, runs in method_rows(results, envs, methods):
        differences = [
            r.fresh_selected - runs[(reference, r.seed)].fresh_selected for r in rows if (reference, r.seed) in runs
        ]
        versus = ("—", "—", "—")
        if method != reference and differences:
            versus = _ci(*t_interval(differences)), _wins(differences), f"{sign_flip_p(differences):.3f}"
        kept = [r.fresh_best_ever for r in rows if r.fresh_best_ever == r.fresh_best_ever]
        lines.append(
            f"| {env_id} | {method} | {len(rows)} | {_ci(*t_interval([r.fresh_selected for r in rows]))} | "
            f"{_ci(*t_interval(kept)) if len(kept) == len(rows) else '—'} | "
            f"{_ci(*t_interval([r.fresh_median for r in rows]))} | " + " | ".join(versus) + " |"
        )
    for env_id in envs:
        lines += floor_rows(env_id, (floors or {}).get(env_id, {}), results, reference)
    return "\n".join(lines) + "\n"


def floor_rows(env_id: str, floors: Mapping[int, FloorValues], results: list[Result], reference: str) -> list[str]:
    """The floors' rows of the fresh table (none without floors), paired with the reference like a method."""
    if not floors:
        return []
    seeds = sorted(floors)
    ours = {r.seed: r.fresh_selected for r in results if r.env_id == env_id and r.method == reference}
    rows = [("floor: uniform-random policy", {s: floors[s].random for s in seeds})]
    if all(floors[s].constant is not None for s in seeds):
        actions = ", ".join(str(floors[s].action) for s in seeds)
        rows.append((f"floor: best constant action (action {actions} by seed)", {s: floors[s].constant for s in seeds}))
    lines = []
    for name, values in rows:
        pair = paired(values, ours)
        versus = ("—", "—", "—")
        if pair.n:
            versus = _ci(pair.mean, pair.low, pair.high), _wins(pair.differences), f"{pair.p:.3f}"
        mean = _ci(*t_interval(list(values.values())))
        lines.append(f"| {env_id} | {name} | {len(seeds)} | {mean} | — | — | " + " | ".join(versus) + " |")
    return lines


def stages_table(results: list[Result]) -> str:
    """One row per stage of each run that had stages (empty without any), and where the stages'
    checkpoints were kept, the best students against their teachers on fresh episodes."""
    staged = [r for r in results if r.stages]
    if not staged:
        return ""
    lines = [
        "BG-PBT's stages (selection scores): the members' best when the stage started, each rung's best "
        "student, how the survivors were proposed, the members' best in the generation after the stage and "
        "at the end; the env steps the students trained, and their share of the run's total.\n",
        "| env | method | seed | stage after generation (why) | teachers | best before | best student per rung "
        "| survivors | best the generation after | final best | students' env steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    fresh = []
    for r in sorted(staged, key=lambda r: (r.env_id, r.method, r.seed)):
        total = r.curve[-1][0] if r.curve else 0
        for f in r.stages:
            why = "patience" if "improved" in f["reason"] else "stage steps"
            share = f["student_env_steps"] / total if total else math.nan
            lines.append(
                f"| {r.env_id} | {r.method} | {r.seed} | {f['after_generation']} ({why}) | "
                f"{', '.join(map(str, f['teachers']))} | {f['best_before']:.1f} | "
                f"{', '.join(f'{b:.1f}' for b in f['rung_best'])} | {', '.join(f['survivors_how'])} | "
                f"{f['best_after']:.1f} | {r.final_best:.1f} | {f['student_env_steps']:,} ({share:.1%}) |"
            )
            if math.isfinite(f["fresh_difference"]):
                fresh.append((r, f))
    return "\n".join(lines) + "\n" + (distillation_table(fresh) if fresh else "")


def distillation_table(stages: list[tuple[Result, dict]]) -> str:
    """Each stage's best student (by its last rung's selection score) against the teacher it was
    distilled from, both on the study's fresh episodes (the same ones), and how often it held."""
    lines = [
        "\nThe best student of each stage against its teacher on the same fresh episodes (the teacher at the "
        "checkpoint the stage began after, the student at its last rung's); the difference is the mean of "
        "the episode-by-episode differences, with its t-interval over the episodes.\n",
        "| env | method | seed | teacher | its fresh mean | best student | its fresh mean | student − teacher |",
        "|---|---|---|---|---|---|---|---|",
    ]
    above = below = 0
    for r, f in stages:
        lines.append(
            f"| {r.env_id} | {r.method} | {r.seed} | {f['its_teacher']} | {f['teacher_fresh']:.1f} | "
            f"{f['best_student']} | {f['best_student_fresh']:.1f} | "
            f"{_ci(f['fresh_difference'], f['fresh_low'], f['fresh_high'])} |"
        )
        above += f["fresh_low"] > 0
        below += f["fresh_high"] < 0
    at_least = sum(f["fresh_difference"] >= 0 for _, f in stages)
    lines.append(
        f"\nThe best student's fresh mean was at or above its teacher's in {at_least} of {len(stages)} stages; "
        f"above by more than its interval in {above}, below by more than its interval in {below}, "
        f"not separated in {len(stages) - above - below}.\n"
    )
    return "\n".join(lines)


def points_by_seed(runs: Sequence[Run], env_id: str, method: str, fraction: float) -> dict[int, Point]:
    """``{seed: the method's re-evaluated point}`` at a fraction of its budget."""
    found = {}
    for run in runs:
        if run.job.env_id == env_id and run.job.method == method:
            for point in run.points:
                if math.isclose(point.fraction, fraction):
                    found[run.job.seed] = point
    return found


def fresh_by_seed(runs: Sequence[Run], env_id: str, side: str, fraction: float) -> dict[int, float]:
    """``{seed: the selected member's fresh mean}`` of a method at a fraction of its budget; of a ``METHOD:kept``
    side, its kept best's at the end of the budget (spec.KEPT: with ``--final-eval``, the final pick)."""
    if side.endswith(KEPT):
        method = side_method(side)
        found = {r.job.seed: r.result.fresh_best_ever for r in runs if (r.job.env_id, r.job.method) == (env_id, method)}
        return {seed: value for seed, value in found.items() if not math.isnan(value)}
    return {seed: point.selected for seed, point in points_by_seed(runs, env_id, side, fraction).items()}


SAME_WEIGHTS, OTHER_WEIGHTS, SAME_SCORE = "the same weights", "other weights", "the same score"
"""How two selected members that returned the same on every fresh episode compare (:func:`sameness`)."""


def sameness(runs: Sequence[Run], env_id: str, comparison: Comparison) -> dict[int, str]:
    """``{seed: how}`` for the seeds in which both methods' selected members returned the same on every fresh
    episode (a difference of exactly 0, not a noisy estimate near 0): ``SAME_WEIGHTS`` where their weights
    digests are equal (a top member PBT never replaced trains as random search's does, from the same seed
    and draw), ``OTHER_WEIGHTS`` where they differ (policies that act alike on these episodes: on MiniGrid
    two argmax policies both scored 0.0), ``SAME_SCORE`` where either digest was not recorded (a cache
    made before issue 55): equal returns alone do not say which."""
    a = points_by_seed(runs, env_id, comparison.a, comparison.at)
    b = points_by_seed(runs, env_id, comparison.b, comparison.at)
    found = {}
    for seed in sorted(a.keys() & b.keys()):
        if not a[seed].returns or a[seed].returns != b[seed].returns:
            continue
        digests = (a[seed].digest, b[seed].digest)
        if None in digests:
            found[seed] = SAME_SCORE
        else:
            found[seed] = SAME_WEIGHTS if digests[0] == digests[1] else OTHER_WEIGHTS
    return found


def same_episodes(runs: Sequence[Run], env_id: str, comparison: Comparison) -> list[int]:
    """The seeds in which both methods' selected members returned the same on every fresh episode."""
    return sorted(sameness(runs, env_id, comparison))


def same_episodes_words(found: Mapping[int, str]) -> str:
    """The verdict's words for the seeds of :func:`sameness`: the same member only where the digests say so."""
    words = {
        SAME_WEIGHTS: "are the same member (the same weights: their digests are equal), trained alike from the "
        "same seed and draw (any exploits changed other members)",
        OTHER_WEIGHTS: "returned the same score on every fresh episode from other weights (their digests "
        "differ): policies that act alike on these episodes",
        SAME_SCORE: "returned the same score on every fresh episode",
    }
    text = ""
    for how, said in words.items():
        seeds = [seed for seed, found_how in found.items() if found_how == how]
        if seeds:
            which = f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(str(s) for s in seeds)
            text += f" In {which} both selected members {said}, so the difference there is exactly 0."
    return text


def selection_ties(runs: Sequence[Run], env_id: str, comparison: Comparison) -> dict[int, list[str]]:
    """``{seed: what}`` for the seeds in which either method's selected member tied another member on
    selection score (evo.study.records.selection_tie): which member was "selected" there was decided by the
    study's tie rule (the lower id), not by the scores, and so is the seed's difference."""
    found: dict[int, list[str]] = {}
    for method in (comparison.a, comparison.b):
        for seed, point in sorted(points_by_seed(runs, env_id, method, comparison.at).items()):
            if point.tied:
                others = ("member " if len(point.tied) == 1 else "members ") + ", ".join(map(str, point.tied))
                found.setdefault(seed, []).append(f"{method}'s member {point.selected_member} tied {others}")
    return found


def selection_ties_words(found: Mapping[int, list[str]]) -> str:
    """The verdict's words for the seeds of :func:`selection_ties`."""
    if not found:
        return ""
    which = "; ".join(f"seed {seed}: {', '.join(said)}" for seed, said in sorted(found.items()))
    return (
        f" A selected member rests on a tie of selection scores ({which}): the study took the lower id, so "
        "the difference in those seeds rests on that tie, not on the scores."
    )


def selection_by_seed(runs: Sequence[Run], env_id: str, method: str) -> dict[int, float]:
    """``{seed: final best selection score}`` (a study without fresh episodes compares these)."""
    return {r.job.seed: r.result.final_best for r in runs if r.job.env_id == env_id and r.job.method == method}


def both_by_seed(
    runs: Sequence[Run], env_id: str, comparison: Comparison, fresh: bool
) -> tuple[dict[int, float], dict[int, float]]:
    """``{seed: value}`` of the comparison's two methods: fresh means at its fraction, or final selection scores."""
    if fresh:
        a = fresh_by_seed(runs, env_id, comparison.a, comparison.at)
        return a, fresh_by_seed(runs, env_id, comparison.b, comparison.at)
    return selection_by_seed(runs, env_id, comparison.a), selection_by_seed(runs, env_id, comparison.b)


def compared(runs: Sequence[Run], env_id: str, comparison: Comparison, fresh: bool) -> Paired:
    return paired(*both_by_seed(runs, env_id, comparison, fresh))


def measure_of(runs: Sequence[Run], env_id: str, comparison: Comparison) -> str | None:
    """What both sides of ``comparison`` on ``env_id`` measure (records.Run.measure: ``return``, or the first term
    of the runs' own objective); None where the two methods' runs measure different things (a run of
    ``--objective info:success`` against one of the return, or an rl_zoo3 agent, which has returns only)."""
    methods = (side_method(comparison.a), side_method(comparison.b))
    found = {run.measure for run in runs if run.job.env_id == env_id and run.job.method in methods}
    return found.pop() if len(found) == 1 else (None if found else "return")


def verdict(
    comparison: Comparison,
    pair: Paired,
    planned: int,
    fresh: bool = True,
    env_id: str = "",
    family: int = 1,
    measure: str | None = "return",
) -> str:
    """The comparison in words: the mean paired difference, its 95 % t-interval, the seeds each way,
    and which is better only where the interval excludes 0 ("not separated" otherwise). A secondary
    comparison is one of ``family`` the report makes (:func:`family_size`): it is judged on its Bonferroni
    interval (:func:`corrected`), which the words give beside the 95 % one; the primary (``family`` 1)
    is the question the study was declared for and keeps its 95 %. ``measure``: what both sides' runs measure
    (:func:`measure_of`): the fresh returns, or the fresh values of the runs' own objective, like minus like;
    None: they measure different things, and nothing is said."""
    what = "fresh returns" if fresh else "selection scores (biased upwards: they chose the members)"
    if fresh and measure not in ("return", None):
        what = f"fresh values of the runs' objective, {measure} (larger better)"
    where = f" on {env_id}" if env_id else ""
    label = f"**{comparison.a} − {comparison.b}** at {percent(comparison.at)} of the budget{where}"
    if measure is None:
        return (
            f"{label}: {comparison.a}'s and {comparison.b}'s runs measure different things (their objectives differ, "
            "or one is an rl_zoo3 agent, which has returns only); nothing is said. Compare methods whose runs select "
            "on one objective"
        )
    if pair.n == 0:
        return f"{label}: no seed has both runs yet; nothing can be said."
    d = decimals(pair.mean, pair.low, pair.high)
    interval = f" [{pair.low:.{d}f}, {pair.high:.{d}f}] (mean difference, 95 % t-interval)" if pair.n > 1 else ""
    text = (
        f"{label}, {what} paired over {pair.n} seed{'s' if pair.n != 1 else ''}: {pair.mean:+.{d}f}{interval}; "
        f"{comparison.a} higher in {pair.wins}, lower in {pair.losses} of {pair.n}"
    )
    if pair.n < planned:
        text += f" ({pair.n} of the {planned} planned seeds: provisional)"
    if pair.n < 2:
        return text + ". **Not separated**: one seed gives no interval."
    text += f"; sign-flip p = {pair.p:.3f} (it cannot go below {smallest_p(pair.n):.3f} with {pair.n} seeds). "
    low, high, which = pair.low, pair.high, "the interval"
    if family > 1:
        confidence, low, high = corrected(pair, family)
        text += (
            f"Corrected for the {family} comparisons declared (Bonferroni: a {confidence * 100:.3g} % t-interval): "
            f"[{low:.{d}f}, {high:.{d}f}]. "
        )
        which = "the corrected interval"
    if low > 0:
        return text + f"**{comparison.a} is better**: {which} lies above 0."
    if high < 0:
        return text + f"**{comparison.b} is better**: {which} lies below 0."
    return text + f"**Not separated**: {which} includes 0, so these seeds cannot tell which is better."


def family_size(comparison: Comparison, primary: Comparison | None, judged: Sequence) -> int:
    """The family ``comparison`` is judged in: 1 for the primary; for a secondary, how many judgements the report
    makes (``judged``: each declared comparison on each env both its sides run on; the number its correction is
    for)."""
    return 1 if comparison == primary else len(judged)


def corrected(pair: Paired, family: int) -> tuple[float, float, float]:
    """A secondary comparison's confidence and its t-interval at it: Bonferroni's for ``family`` comparisons."""
    confidence = bonferroni(family)
    _, low, high = t_interval(pair.differences, confidence)
    return confidence, low, high


def several_envs(judged: Sequence[tuple[Comparison, str]]) -> bool:
    """Whether the judgements span several envs (each verdict then names its env)."""
    return len({env_id for _, env_id in judged}) > 1


def verdicts(
    runs: Sequence[Run], judged: Sequence[tuple[Comparison, str]], primary: Comparison | None, planned: int, fresh: bool
) -> str:
    """The declared comparisons in words (``judged``: each on each env both its sides run on, the primary first),
    the secondary ones corrected for their number."""
    if not judged:
        return ""
    labelled = several_envs(judged)
    lines = []
    for comparison, env_id in judged:
        kind = "Primary" if comparison == primary else "Secondary"
        pair = compared(runs, env_id, comparison, fresh)
        family = family_size(comparison, primary, judged)
        measure = measure_of(runs, env_id, comparison)
        text = verdict(comparison, pair, planned, fresh, env_id if labelled else "", family, measure)
        if fresh:
            text += same_episodes_words(sameness(runs, env_id, comparison))
            text += selection_ties_words(selection_ties(runs, env_id, comparison))
        lines.append(f"- {kind}: " + text)
    return "\n".join(lines) + "\n"


SAME_NOTES = {
    SAME_WEIGHTS: "the same member: the same weights",
    OTHER_WEIGHTS: "the same score on every episode, other weights",
    SAME_SCORE: "the same score on every episode",
}
"""The per-seed table's note on a seed of :func:`sameness`."""


def per_seed_table(runs: Sequence[Run], judged: Sequence[tuple[Comparison, str]], fresh: bool) -> str:
    """Each declared comparison seed by seed (``judged``: each on each env both its sides run on): what it measures
    (fresh returns, the fresh values of the runs' objective, or selection scores without a re-evaluation), a's and
    b's values and the difference."""
    if not judged:
        return ""
    lines = ["| env | comparison | measure | seed | a | b | a − b |", "|---|---|---|---|---|---|---|"]
    for comparison, env_id in judged:
        a, b = both_by_seed(runs, env_id, comparison, fresh)
        measure = measure_words(measure_of(runs, env_id, comparison), fresh)
        same = sameness(runs, env_id, comparison) if fresh else {}
        ties = selection_ties(runs, env_id, comparison) if fresh else {}
        d = decimals(*a.values(), *b.values())
        for seed in sorted(set(a) & set(b)):
            difference = f"{a[seed] - b[seed]:+.{d}f}" + (f" ({SAME_NOTES[same[seed]]})" if seed in same else "")
            if seed in ties:
                difference += f" (a tie of selection scores: {', '.join(ties[seed])}; the lower id taken)"
            cells = [
                env_id,
                str(comparison),
                measure,
                str(seed),
                f"{a[seed]:.{d}f}",
                f"{b[seed]:.{d}f}",
                difference,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def measure_words(measure: str | None, fresh: bool) -> str:
    """A per-seed row's measure in a few words (None: the two sides measure different things)."""
    if not fresh:
        return "selection score"
    if measure is None:
        return "different things (not comparable)"
    return "fresh return" if measure == "return" else f"fresh {measure}"


def env_steps_range(points: Sequence[Point]) -> str:
    """The total env steps of one method's points at one fraction of its budget, over seeds: one number,
    or the range where the seeds' totals differ (SAC's members overshoot a generation's steps by a few)."""
    low, high = min(p.total_env_steps for p in points), max(p.total_env_steps for p in points)
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def anytime_table(runs: Sequence[Run], envs, methods) -> str:
    """Every re-evaluated point, ordered by the total env steps all members had used: the selected
    member's fresh mean, the population's median fresh mean with and without the members copied in
    that generation (an exploit's recipients hold untrained copies of a top member), over seeds."""
    lines = [
        "| env | total env steps | method | fraction of its budget | seeds | selected member, fresh [95 % CI] | "
        "population median | median without that generation's copies |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env_id in envs:
        rows: dict[tuple[str, float], list[Point]] = {}
        for run in runs:
            if run.job.env_id == env_id:
                for point in run.points:
                    rows.setdefault((run.job.method, point.fraction), []).append(point)
        order = {m: i for i, m in enumerate(methods)}
        for (method, fraction), points in sorted(
            rows.items(), key=lambda kv: (min(p.total_env_steps for p in kv[1]), order[kv[0][0]])
        ):
            total = env_steps_range(points)
            selected = _ci(*t_interval([p.selected for p in points]))
            single = all(len(p.members) == 1 for p in points)
            median = "(one agent)" if single else _ci(*t_interval([p.median for p in points]))
            uncopied = [p.median_uncopied for p in points if p.median_uncopied == p.median_uncopied]
            without = "(one agent)" if single else (_ci(*t_interval(uncopied)) if uncopied else "—")
            lines.append(
                f"| {env_id} | {total} | {method} | {percent(fraction)} | {len(points)} | {selected} | "
                f"{median} | {without} |"
            )
    return "\n".join(lines) + "\n"


def selection_bias_table(runs: Sequence[Run], envs, methods) -> str:
    """Selection score minus fresh score of the selected member, per method and fraction (over seeds)."""
    lines = [
        "| env | method | fraction of its budget | seeds | selection score | fresh | selection minus fresh [95 % CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for env_id in envs:
        for method in methods:
            by_fraction: dict[float, list[Point]] = {}
            for run in runs:
                if run.job.env_id == env_id and run.job.method == method:
                    for point in run.points:
                        if point.selection_score == point.selection_score:
                            by_fraction.setdefault(point.fraction, []).append(point)
            for fraction, points in sorted(by_fraction.items()):
                selection, selected = (statistics.mean(p.selection_score for p in points),
                                       statistics.mean(p.selected for p in points))  # fmt: skip
                d = decimals(selection, selected)
                lines.append(
                    f"| {env_id} | {method} | {percent(fraction)} | {len(points)} | {selection:.{d}f} | "
                    f"{selected:.{d}f} | "
                    f"{_ci(*t_interval([p.selection_bias for p in points]))} |"
                )
    return "\n".join(lines) + "\n"


def above_floor(point: Point, floor: FloorValues) -> float:
    """How many standard errors the selected member's fresh mean is above the higher floor's (its
    episodes and the floor's are independent draws of the same levels' kind)."""
    mean, se = floor.highest
    spread = math.sqrt((point.selected_se or 0.0) ** 2 + (se or 0.0) ** 2)
    return (point.selected - mean) / spread if spread > 0 else math.copysign(math.inf, point.selected - mean)


def floor_table(runs: Sequence[Run], floors: Mapping[str, Mapping[int, FloorValues]]) -> str:
    """Per run and re-evaluated point: the selected member against its seed's higher floor, in
    standard errors, and whether it left the floor (at least ``SEPARATION_SE`` of them)."""
    lines = [
        "| env | method | seed | fraction | total env steps | selected member, fresh ± se | higher floor ± se | "
        f"standard errors above it | left the floor (≥ {SEPARATION_SE:g}) | the same returns as a constant action |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    found = False
    for run in sorted(runs, key=lambda r: (r.job.env_id, r.job.method, r.job.seed)):
        floor = floors.get(run.job.env_id, {}).get(run.job.seed)
        if floor is None:
            continue
        for point in run.points:
            found = True
            above = above_floor(point, floor)
            mean, se = floor.highest
            constant = floor.same_as_constant(point.returns) if point.returns else None
            lines.append(
                f"| {run.job.env_id} | {run.job.method} | {run.job.seed} | {percent(point.fraction)} | "
                f"{point.total_env_steps:,} | {point.selected:.2f} ± {point.selected_se:.2f} | {mean:.2f} ± {se:.2f} | "
                f"{above:.1f} | {'yes' if above >= SEPARATION_SE else 'no'} | "
                f"{'—' if constant is None else f'action {constant}, episode for episode'} |"
            )
    return "\n".join(lines) + "\n" if found else ""


def floor_values(random: Sequence[float], constant: Mapping[int, Sequence[float]]) -> FloorValues:
    """A seed's floors from their returns: the random policy's and the best constant action's means."""
    if not constant:
        return FloorValues(float(np.mean(random)), standard_error(random))
    action = max(sorted(constant), key=lambda a: float(np.mean(constant[a])))
    best = constant[action]
    played = {a: tuple(r) for a, r in constant.items()}
    return FloorValues(
        float(np.mean(random)), standard_error(random), float(np.mean(best)), standard_error(best), action, played
    )


def floor_summary(runs: Sequence[Run], floors: Mapping[str, Mapping[int, FloorValues]], envs, methods) -> str:
    """Per env and method with floors: the first fraction of its budget at which the selected member
    left the higher floor by ``SEPARATION_SE`` standard errors in every seed, or that it never did."""
    lines = []
    for env_id in envs:
        for method in methods:
            ours = [r for r in runs if r.job.env_id == env_id and r.job.method == method]
            ours = [r for r in ours if r.job.seed in floors.get(env_id, {})]
            if not ours:
                continue
            seeds = f"{len(ours)} seed{'s' if len(ours) != 1 else ''}"
            left = _first_above(ours, floors[env_id])
            if left is None:
                lines.append(f"- {env_id}, {method}: did not leave the floor within its budget ({seeds}).")
            else:
                lines.append(
                    f"- {env_id}, {method}: left the floor by {SEPARATION_SE:g} standard errors at "
                    f"{percent(left.fraction)} of its budget ({left.total_env_steps:,} env steps), in all {seeds}."
                )
    return "\n".join(lines) + "\n" if lines else ""


def _first_above(runs: Sequence[Run], floors: Mapping[int, FloorValues]) -> Point | None:
    """The earliest point at which every run's selected member is ``SEPARATION_SE`` above its floor."""
    for fraction in sorted({p.fraction for r in runs for p in r.points}):
        at = {r.job.seed: p for r in runs for p in r.points if p.fraction == fraction}
        if len(at) == len(runs) and all(above_floor(p, floors[s]) >= SEPARATION_SE for s, p in at.items()):
            return next(iter(at.values()))
    return None


def timing_text(runs: Sequence[Run], launches: Sequence[Mapping] = ()) -> str:
    """What the records say the runs took: the sum of every run's ``wall_s`` (each launch of it), the
    core-hours (population runs hold their ranks' cores), the generations' own time (generations.csv),
    and with the study's launch log, the time from the first start to the last end."""
    walls = [r.timing.wall_s for r in runs if r.timing.wall_s == r.timing.wall_s]
    cores = sum(r.timing.wall_s * r.timing.ranks for r in runs if r.timing.wall_s == r.timing.wall_s)
    generations = [r.timing.generations_s for r in runs if r.timing.generations_s == r.timing.generations_s]
    text = (
        f"Time from the records: the {len(walls)} runs' `wall_s` add up to {_duration(sum(walls))} "
        f"({cores / 3600:.1f} core-hours: a population run holds its ranks' cores)"
    )
    if generations:
        text += f"; their generations (generations.csv: training, scoring, exchange) to {_duration(sum(generations))}"
    if launches:
        start = min(entry["started"] for entry in launches)
        end = max(entry["started"] + entry["seconds"] for entry in launches)
        text += f"; the study's launches ran from first start to last end in {_duration(end - start)}"
    return text + ". Runs that shared the cores with other work took longer than they would alone.\n"


def _duration(seconds: float) -> str:
    hours, rest = divmod(round(seconds), 3600)
    return f"{seconds:.0f} s ({hours} h {rest // 60:02d} min)"
