"""Which hyperparameters explain a run's scores: fANOVA on the run's population.csv, every member at
every generation (Optuna's ``FanovaImportanceEvaluator``).

    python -m evo.tools.importance RUN_DIR [--out DIR] [--json FILE] [--seed S]

prints a table, most important first, and writes ``importance.png`` (a bar each) into ``RUN_DIR/plots``
(or ``--out``), where ``python -m evo.tools.plot`` writes its plots.

**A point** is a member's generation (an asynchronous run: a member's interval): the hyperparameters it
trained with there, and the score it reached at its end, as its *standing* in that generation (0 the
lowest score of the generation, 1 the highest, ties shared). PBT's selection compares members within a
generation, and a run's scores rise over the run for reasons no hyperparameter owns (the weights train
on): raw scores would credit that rise to whatever hyperparameter drifted along with it.

**Points are not independent.** An exploit copies a donor's weights and, explored, its hyperparameters,
so a recipient's score owes much to weights it did not train, and a hyperparameter that merely travels
with good weights would look important. fANOVA is therefore also given the standing of the weights each
member began the generation with (its own from the generation before, or the donor's it copied; new
weights, as in generation 1, below every trained one): what those explain is credited to them (the
table's last row), not to the hyperparameters that came with them. The other caveats remain: the
points of one run are one PBT trajectory, whose exploits narrow the hyperparameters it tries, so a
hyperparameter the population soon agreed on has little variation left to explain anything with.

**Each hyperparameter** enters on the scale its search space draws it on (config.yaml's
``agent.search_space``): a range by its position there (``scale: log`` by its logarithm, ``horizon`` by
the logarithm of 1/(1 − x), an integer range likewise), an ordered choice by its position among the
choices, a categorical one (names) as categories. A column the search space does not describe is taken
linearly between the values it holds (or as categories, if they are not numbers); one that never
changed is listed as not varied.

**The importance** of a hyperparameter is fANOVA's (Hutter et al. 2014): the share of the standings'
variance that its main effect explains, on a random forest fitted to the points (scikit-learn's, 64
trees, seeded by ``--seed``); what the main effects leave is interactions. Why Optuna's: it is kept up,
runs on the scikit-learn evo already needs (it adds SQLAlchemy, Alembic, colorlog and tqdm, never torch), and
is what Optuna's users already read; the ``fanova`` package's forest, pyrfr, is C++ compiled with SWIG
at install. Optuna's PED-ANOVA (Optuna 5's default) asks another question: which values it takes to
reach the top quantile of the points, not how much of the score's variation each hyperparameter explains.

Needs the ``importance`` extra (Optuna): ``make install EXTRAS=importance`` or ``pip install
'evo[importance]'``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evo.core.kinds import Categorical, Choice, Integer, Kind
from evo.rundir.checkpoint import atomic_file, atomic_write
from evo.rundir.history import RunDirError, RunHistory, load_run, weight_origins
from evo.rundir.jsontext import dumps

PROG = "python -m evo.tools.importance"
START = "(the weights it started from)"
"""fANOVA's input for the standing of the weights a member began its generation with (no setting's name)."""
TREES = 64
MISSING = (
    "the importance tool needs Optuna, the importance extra: make install EXTRAS=importance (or pip install "
    "'evo[importance]'; pip install optuna where evo is installed)"
)


@dataclass(frozen=True)
class Points:
    """A run's points for fANOVA: per point, each varied hyperparameter's coordinate (a number in [0, 1],
    or a category's name) and the standing of the weights it started from; and its standing."""

    names: tuple[str, ...]
    """The hyperparameters that took two values or more, in population.csv's order."""
    constant: tuple[str, ...]
    """The explored hyperparameters that kept one value in every point."""
    scales: dict[str, str]
    """How each hyperparameter entered (for the table)."""
    categories: dict[str, tuple[str, ...]]
    """The categorical ones: their categories."""
    inputs: list[dict[str, float | str]] = field(repr=False)
    standings: list[float] = field(repr=False)
    left_out: int = 0
    """Rows without a score (NaN or ±inf), or alone in their generation with one."""


class ImportanceError(RunDirError):
    """The run has nothing fANOVA could rank, or the tool cannot run here."""


def standing(values: list[float]) -> np.ndarray:
    """Each value's place among ``values``: 0 the lowest, 1 the highest, ties sharing their mean place
    (−inf: below every number; one value alone: 0.5)."""
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return np.full(values.size, 0.5)
    from scipy.stats import rankdata

    return (rankdata(values) - 1.0) / (values.size - 1.0)


def scale_of(kind: Kind | None) -> str:
    """How a hyperparameter of ``kind`` enters fANOVA, in words."""
    if kind is None:
        return "linear between the values seen (not in the search space)"
    if isinstance(kind, Categorical):
        return f"categorical, {len(kind.choices)} choices"
    if isinstance(kind, Choice):
        return f"ordered, {len(kind.choices)} choices"
    if isinstance(kind, Integer):
        return "integer, log" if kind.log else "integer"
    return {"log": "log", "horizon": "log of 1/(1 − x)"}.get(getattr(kind, "scale", "linear"), "linear")


def _encoder(kind: Kind | None, values: list):
    """A function from a value to its fANOVA coordinate, and whether it is a category."""
    if isinstance(kind, Categorical):
        return str, True
    if kind is not None:
        return kind.to_unit, False
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    if len(numbers) < len(values):  # names, or "off": categories
        return str, True
    low, high = min(numbers), max(numbers)
    return (lambda value: (float(value) - low) / (high - low) if high > low else 0.0), False


def points_of(history: RunHistory) -> Points:
    """The run's points: every row with a finite score in a generation with at least two of them."""
    kinds = history.kinds()
    origins = weight_origins(history)
    generations: dict[int, list] = {}
    left_out = 0
    for row in history.rows:
        if math.isfinite(row.score):
            generations.setdefault(row.generation, []).append(row)
        else:
            left_out += 1
    rows, standings, starts = [], [], []
    for generation in sorted(generations):
        scored = generations[generation]
        if len(scored) < 2:
            left_out += len(scored)
            continue
        begun = []
        for row in scored:
            origin = origins.get((row.generation, row.member))
            start = -math.inf
            if origin is not None and history.has(origin[1], origin[0]):
                start = history.row(origin[1], origin[0]).score
            begun.append(start if math.isfinite(start) else -math.inf)
        rows += scored
        standings += [float(s) for s in standing([row.score for row in scored])]
        starts += [float(s) for s in standing(begun)]
    names, constant, scales, categories, encoded = [], [], {}, {}, {}
    for name in history.names:
        values = [row.hparams[name] for row in rows]
        kind = kinds.get(name)
        scales[name] = scale_of(kind)
        if len({repr(v) for v in values}) < 2:
            constant.append(name)
            continue
        encode, categorical = _encoder(kind, values)
        encoded[name] = [encode(value) for value in values]
        if categorical:
            categories[name] = tuple(sorted(set(encoded[name])))
        names.append(name)
    inputs = [{name: encoded[name][i] for name in names} | {START: starts[i]} for i in range(len(rows))]
    return Points(tuple(names), tuple(constant), scales, categories, inputs, standings, left_out)


@dataclass(frozen=True)
class Importance:
    """fANOVA's answer for one run."""

    run_dir: str
    importance: dict[str, float]
    """Each hyperparameter's share of the standings' variance (its main effect), largest first; the
    constant ones 0."""
    start: float
    """The share the weights' starting standing explains."""
    points: int
    members: int
    generations: int
    left_out: int
    scales: dict[str, str]
    constant: tuple[str, ...]
    seed: int
    optuna: str

    @property
    def interactions(self) -> float:
        return max(0.0, 1.0 - self.start - sum(self.importance.values()))

    def to_json(self) -> dict:
        return {
            "run": self.run_dir,
            "method": f"fANOVA: Optuna {self.optuna}'s FanovaImportanceEvaluator, {TREES} trees, seed {self.seed}",
            "point": "a member's generation: the hyperparameters it trained with -> its score's standing there",
            "points": self.points,
            "members": self.members,
            "generations": self.generations,
            "left_out": self.left_out,
            "importance": self.importance,
            "order": list(self.importance),
            "start": self.start,
            "interactions": self.interactions,
            "scales": self.scales,
            "not_varied": list(self.constant),
        }


def _optuna():
    try:
        import optuna
    except ImportError as error:
        raise ImportanceError(MISSING) from error
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per study created
    return optuna


def fanova(points: Points, seed: int = 0) -> tuple[dict[str, float], float]:
    """Each varied hyperparameter's fANOVA importance (largest first) and the weights' start's."""
    optuna = _optuna()
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    distributions = {
        name: CategoricalDistribution(points.categories[name])
        if name in points.categories
        else FloatDistribution(0.0, 1.0)
        for name in points.names
    }
    distributions[START] = FloatDistribution(0.0, 1.0)
    study = optuna.create_study(direction="maximize")
    study.add_trials(
        [
            optuna.trial.create_trial(params=inputs, distributions=distributions, value=value)
            for inputs, value in zip(points.inputs, points.standings, strict=True)
        ]
    )
    evaluator = optuna.importance.FanovaImportanceEvaluator(n_trees=TREES, seed=seed)
    try:
        found = dict(evaluator.evaluate(study))  # each main effect's share of the variance, not rescaled to sum 1
    except RuntimeError as error:  # every tree without variance: the standings never differed
        raise ImportanceError(f"fANOVA found nothing to explain ({error})") from error
    start = float(found.pop(START, 0.0))
    return {name: float(value) for name, value in found.items()}, start


def run_importance(run_dir: str | Path, seed: int = 0) -> Importance:
    """fANOVA's importance of each explored hyperparameter of the run in ``run_dir``."""
    history = load_run(run_dir)
    points = points_of(history)
    population = history.run_dir / "population.csv"
    if len(points.standings) < 2:
        raise ImportanceError(
            f"{population}: no generation has two members with a score; importance compares members within a "
            "generation: give a run of two members or more that finished a generation"
        )
    if not points.names:
        columns = ", ".join(history.names) or "none"
        raise ImportanceError(
            f"{population}: no explored hyperparameter took two values (columns: {columns}); there is nothing to "
            "rank: give a run whose members explored hyperparameters"
        )
    found, start = fanova(points, seed)
    ordered = dict(sorted(found.items(), key=lambda item: -item[1]))
    ordered |= {name: 0.0 for name in points.constant}
    return Importance(
        run_dir=str(run_dir),
        importance=ordered,
        start=start,
        points=len(points.standings),
        members=len(history.members),
        generations=len(history.generations),
        left_out=points.left_out,
        scales=points.scales,
        constant=points.constant,
        seed=seed,
        optuna=_optuna().__version__,
    )


def table(result: Importance) -> str:
    """The result as the tool prints it."""
    lines = [
        f"Hyperparameter importance of {result.run_dir}: fANOVA (Optuna {result.optuna}, {TREES} trees, seed "
        f"{result.seed}) on {result.points} points ({result.members} members, {result.generations} generations"
        + (f"; {result.left_out} rows without a score left out)" if result.left_out else ")"),
        "a point: a member's generation, the hyperparameters it trained with -> its score's standing there "
        "(0 lowest, 1 highest)",
        "",
        "| rank | hyperparameter | scale | importance |",
        "|---|---|---|---|",
    ]
    for rank, (name, value) in enumerate(result.importance.items(), start=1):
        note = " (not varied)" if name in result.constant else ""
        lines.append(f"| {rank} | {name} | {result.scales[name]} | {value:.3f}{note} |")
    lines.append(f"|  | {START} | standing | {result.start:.3f} |")
    lines += [
        "",
        "importance: the share of the standings' variance a main effect explains; interactions: "
        f"{result.interactions:.3f}",
    ]
    return "\n".join(lines)


def plot_importance(result: Importance):
    """A bar per hyperparameter, most important on top, and the weights' start's in grey below them."""
    from evo.tools.plot import DPI, plt

    names = list(result.importance)
    values = list(result.importance.values())
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.42 * (len(names) + 1)), dpi=DPI)
    positions = list(range(len(names), 0, -1))
    ax.barh(positions, values, color="tab:blue", gid="hyperparameters")
    ax.barh([0], [result.start], color="lightgray", hatch="//", edgecolor="gray", gid="start")
    ax.set_yticks([*positions, 0], [*(f"{n}\n({result.scales[n]})" for n in names), "the weights it\nstarted from"])
    for y, value in zip([*positions, 0], [*values, result.start], strict=True):
        ax.annotate(f"{value:.3f}", (value, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max(1e-9, *values, result.start) * 1.18)
    ax.set_xlabel("share of the standings' variance explained (fANOVA main effect)")
    ax.set_title(
        f"Hyperparameter importance — {Path(result.run_dir).name}\n{result.points} points: each member's generation, "
        "its hyperparameters -> its standing there",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def unwritable(folder: Path) -> str | None:
    """Why ``folder`` (made if missing) could not take a new file, or None."""
    existing = folder
    while not existing.exists():
        if existing.is_symlink() or existing.parent == existing:
            return "cannot be made"
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} may not be written to"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory (its --run-dir)")
    parser.add_argument("--out", default=None, help="folder for importance.png (default RUN_DIR/plots)")
    parser.add_argument("--json", default=None, help="also write the importances and how they were found here")
    parser.add_argument("--seed", type=int, default=0, help="the random forest's seed (default 0)")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out is not None else Path(args.run_dir) / "plots"
    path = out / "importance.png"
    problems = [
        f"{flag} {given}: {why}"
        for flag, given, folder in (("--out", args.out, out), ("--json", args.json, Path(args.json or ".").parent))
        if given is not None and (why := unwritable(folder))
    ]
    if problems:  # both checked before anything is computed or written
        print(f"{PROG}: error: {'; '.join(problems)}: give a folder you may write to", file=sys.stderr)
        return 2
    try:
        result = run_importance(args.run_dir, args.seed)
    except RunDirError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    from evo.tools.plot import plt

    fig = plot_importance(result)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as handle:  # never through a link planted at the name
            fig.savefig(handle, format="png", bbox_inches="tight")
        if args.json is not None:
            atomic_write(Path(args.json), (dumps(result.to_json(), indent=2) + "\n").encode())
    except OSError as error:  # a full disk, say
        print(f"{PROG}: error: cannot write {error.filename or path}: {error.strerror}", file=sys.stderr)
        return 2
    finally:
        plt.close(fig)
    print(table(result))
    print(f"plot: {path}" + (f"; json: {args.json}" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
