"""Plots of a PBT run from its records (no TensorBoard needed), and the toy's figure.

    python -m evo.tools.plot RUN_DIR [--out DIR]

writes into ``RUN_DIR/plots`` (or ``--out``):

- ``scores.png``: each member's score over env steps, the population's best and mean bold;
- ``hparams.png``: each explored hyperparameter over env steps per member (the schedule
  PBT found), a marker where the member copied another (an exploit);
- ``lineage.png``: who copied whom at each generation, each line coloured by the initial
  member it descends from, so the surviving lines show at a glance; a red cross where a failed
  member was restarted (dotted to its donor);
- ``front.png``, for a run with several objectives (``--objective return,info:energy:min``): every
  member's objectives at every generation (faint, darker as the run goes on) and at the last one, its
  first Pareto front joined and each member of it named; the first two objectives when there are more.

Headless: matplotlib's Agg backend.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from evo.rundir.checkpoint import atomic_file  # noqa: E402
from evo.rundir.history import (  # noqa: E402
    RunDirError,
    RunHistory,
    ancestry,
    copy_sources,
    load_run,
    restart_sources,
    stage_starts,
)

DPI = 110
STEPS_LABEL = "env steps per member"


def member_colours(count: int) -> list:
    cmap = plt.get_cmap("tab10" if count <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(count)]


def legend_right(ax, handles=None, labels=None, title=None) -> None:
    """Legend outside the axes, so it never covers the data."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title=title, frameon=False)


def plot_scores(history: RunHistory):
    """Score per member over env steps, best and mean of the population in bold."""
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=DPI)
    colours = member_colours(len(history.members))
    for index, member in enumerate(history.members):
        rows = history.series(member)
        ax.plot(
            [r.env_steps for r in rows],
            [r.score for r in rows],
            color=colours[index],
            linewidth=1.0,
            alpha=0.75,
            marker="o",
            markersize=2.5,
            label=f"member {member}",
            gid=f"member-{member}",
        )
    steps, best, mean = [], [], []
    for generation in history.generations:
        rows = history.at(generation)  # a member without a row there (a stopped asynchronous run): its last
        scores = np.array([r.score for r in rows], dtype=float)
        steps.append(max(r.env_steps for r in rows))
        finite = scores[np.isfinite(scores)]
        best.append(finite.max() if finite.size else math.nan)
        mean.append(finite.mean() if finite.size else math.nan)
    ax.plot(steps, best, color="black", linewidth=2.6, label="population best", gid="best")
    ax.plot(steps, mean, color="dimgray", linewidth=2.2, linestyle="--", label="population mean", gid="mean")
    for stage, began in stage_starts(history).items():  # BG-PBT's stages: where each distillation began
        at = max(r.env_steps for r in history.rows if r.generation == began)
        ax.axvline(at, color="tab:purple", linewidth=1.0, linestyle=":", gid=f"stage-{stage}")
        ax.annotate(f"stage {stage}", (at, 1.0), xycoords=("data", "axes fraction"), fontsize=8, color="tab:purple",
                    xytext=(3, -10), textcoords="offset points")  # fmt: skip
    env = history.config.get("env_id", "")
    ax.set_title(f"Score per member — {env}, {len(history.members)} members, {history.generations[-1]} generations")
    ax.set_xlabel(STEPS_LABEL)
    ax.set_ylabel("score (mean episode return)")
    ax.grid(alpha=0.3)
    legend_right(ax)
    fig.tight_layout()
    return fig


def plot_hparams(history: RunHistory):
    """One panel per explored hyperparameter: its value per member over env steps (each
    value held during the generation it was trained with), exploits marked. A choice is drawn
    at its position among the choices, each labelled with its value ("off": none)."""
    names = list(history.names)
    kinds = history.kinds()
    columns = 2
    rows_count = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows_count, columns, figsize=(11, 3.0 * rows_count), dpi=DPI, squeeze=False)
    colours = member_colours(len(history.members))
    for ax, name in zip(axes.flat, names, strict=False):
        kind = kinds.get(name)
        choices = list(getattr(kind, "choices", None) or [])
        position = _choice_position(choices)
        for index, member in enumerate(history.members):
            series = history.series(member)
            starts = [history.started_at(r) for r in series]
            xs = [x for r, start in zip(series, starts, strict=True) for x in (start, r.env_steps)]
            ys = [position(r.hparams[name]) for r in series for _ in (0, 1)]
            ax.plot(xs, ys, color=colours[index], linewidth=1.2, label=f"member {member}", gid=f"member-{member}")
            copied = [r for r in series if r.donor is not None and r.donor != member]
            if copied:  # the value it took after the copy starts at the end of that generation
                after = {(r.generation + 1): r for r in copied}
                points = [
                    (r.env_steps, position(history.row(g, member).hparams[name]))
                    for g, r in after.items()
                    if history.has(g, member)
                ]
                if points:
                    ax.scatter(
                        *zip(*points, strict=True),
                        color=colours[index],
                        marker="v",
                        s=22,
                        zorder=3,
                        edgecolors="black",
                        linewidths=0.4,
                    )
        if choices:
            ax.set_yticks(range(len(choices)), [_tick(c) for c in choices])
        elif kind is not None and kind.log_axis:
            ax.set_yscale("log")
        ax.set_title(history.label(name) + f" ({name})", fontsize=10)
        ax.set_xlabel(STEPS_LABEL, fontsize=9)
        ax.set_ylabel(name, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=colours[i], label=f"member {m}") for i, m in enumerate(history.members)]
    handles.append(
        Line2D(
            [],
            [],
            color="gray",
            marker="v",
            linestyle="",
            markeredgecolor="black",
            label="after an exploit (copied a member)",
        )
    )
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.suptitle("Hyperparameter schedules found by PBT", fontsize=12)
    fig.tight_layout()
    return fig


def _tick(choice: object) -> str:
    if choice is None:
        return "none"
    return f"{choice:g}" if isinstance(choice, (int, float)) else str(choice)


def _choice_position(choices: list):
    """Where a value is drawn: its index among ``choices``, or the value itself for a range."""
    if not choices:
        return lambda value: value
    return lambda value: choices.index(value) if value in choices else math.nan


def plot_lineage(history: RunHistory):
    """Genealogy: one row per member slot, one column per generation (an asynchronous run: each
    member's own intervals); a line from donor to recipient where a member copied another (from
    the donor's generation whose weights it took). Colours: the initial member a line descends from."""
    members, generations = history.members, history.generations
    founders = ancestry(history)
    copies = copy_sources(history)
    colours = member_colours(len(members))
    colour_of = {m: colours[i] for i, m in enumerate(members)}
    width = max(8.0, min(14.0, 3 + 0.35 * len(generations)))
    fig, ax = plt.subplots(figsize=(width, 1.2 + 0.45 * len(members)), dpi=DPI)
    for member in members:
        own = [g for g in generations if history.has(g, member)]
        for generation in own:
            founder = founders[generation][member]
            copied = copies.get((generation - 1, member))
            if copied is None and generation > own[0]:
                ax.plot(
                    [generation - 1, generation],
                    [member, member],
                    color=colour_of[founder],
                    linewidth=2.2,
                    solid_capstyle="round",
                )
            elif copied is not None:
                donor, donor_generation = copied
                ax.plot(
                    [donor_generation, generation],
                    [donor, member],
                    color=colour_of[founder],
                    linewidth=1.4,
                    linestyle=(0, (3, 1.5)),
                )
        ax.scatter(
            own,
            [member] * len(own),
            color=[colour_of[founders[g][member]] for g in own],
            s=18,
            zorder=3,
            edgecolors="black",
            linewidths=0.3,
        )
    teachers = {}  # a stage's student: its teacher, at the generation its stage began
    for row in history.rows:
        if row.teacher is not None and not history.has(row.generation - 1, row.member):
            teachers[row.member] = (row.generation, row.teacher)
    for student, (generation, teacher) in teachers.items():
        ax.plot([generation - 1, generation], [teacher, student], color="tab:purple", linewidth=0.8, linestyle=":")
    if teachers:
        handles_extra = [Line2D([], [], color="tab:purple", linestyle=":", label="a stage's student and its teacher")]
    else:
        handles_extra = []
    last = generations[-1]
    ended = [m for m in members if history.has(last, m)] if not history.asynchronous else members
    survivors = sorted({founders[history.last_generation(m)][m] for m in ended})
    ax.set_yticks(members, [f"member {m}" for m in members])
    ax.invert_yaxis()
    ax.set_xlabel("interval of each member (asynchronous PBT)" if history.asynchronous else "generation")
    step = max(1, len(generations) // 15)
    ax.set_xticks(generations[::step])
    when = "at its ready point, from the donor's interval" if history.asynchronous else "at the end of a generation"
    ax.set_title(
        f"Lineage: who copied whom (dashed: a copy {when})\n"
        f"surviving lines: {', '.join(f'member {m}' for m in survivors)}",
        fontsize=10,
    )
    handles = [Line2D([], [], color=colour_of[m], linewidth=2.2, label=f"line of member {m}") for m in members]
    restarts = restart_sources(history)
    for (generation, member), source in restarts.items():  # a failed member trained its generation again
        if source is not None:
            ax.plot([source[1], generation], [source[0], member], color="black", linewidth=0.8, linestyle=":")
        ax.scatter([generation], [member], marker="x", color="red", s=60, zorder=4)
    if restarts:
        handles.append(Line2D([], [], color="red", marker="x", linestyle="", label="restarted after a failure"))
    handles += handles_extra
    legend_right(ax, handles, [h.get_label() for h in handles], title="descends from")
    fig.tight_layout()
    return fig


def plot_front(history: RunHistory):
    """The first two objectives of every row, the last generation's bold and its first front joined."""
    objective = history.objective
    x_name, y_name = objective.names[:2]
    fig, ax = plt.subplots(figsize=(6.4, 5.2), dpi=DPI)
    last = history.generations[-1]
    for row in history.rows:
        if row.objectives and row.generation < last:
            shade = 0.15 + 0.5 * row.generation / last
            ax.scatter(row.objectives[x_name], row.objectives[y_name], s=10, color=(0.5, 0.5, 0.5), alpha=shade)
    final = [row for row in history.at(last) if row.objectives]
    ax.scatter(
        [r.objectives[x_name] for r in final],
        [r.objectives[y_name] for r in final],
        s=30,
        color="tab:blue",
        label=f"generation {last}",
        gid="final",
    )
    front = sorted(history.first_front(final), key=lambda r: r.objectives[x_name])
    ax.plot(
        [r.objectives[x_name] for r in front],
        [r.objectives[y_name] for r in front],
        color="tab:red",
        marker="o",
        linewidth=1.5,
        label="first front",
        gid="front",
    )
    for row in front:
        ax.annotate(f"{row.member}", (row.objectives[x_name], row.objectives[y_name]), fontsize=8, xytext=(4, 4),
                    textcoords="offset points")  # fmt: skip
    arrow = {
        term.name: "(larger better)" if term.direction == "max" else "(smaller better)" for term in objective.terms
    }
    ax.set_xlabel(f"{x_name} {arrow[x_name]}")
    ax.set_ylabel(f"{y_name} {arrow[y_name]}")
    ax.set_title(f"objectives ({objective.text}); earlier generations grey")
    legend_right(ax)
    fig.tight_layout()
    return fig


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write scores.png, hparams.png and lineage.png for the run (and front.png for a run with several
    objectives); returns their paths."""
    history = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    plots = [("scores", plot_scores), ("hparams", plot_hparams), ("lineage", plot_lineage)]
    if history.objective.several:
        plots.append(("front", plot_front))
    for name, build in plots:
        fig = build(history)
        path = out / f"{name}.png"
        with atomic_file(path) as handle:  # never through a link planted at the name (the run directory's plots/)
            fig.savefig(handle, format="png", bbox_inches="tight")
        plt.close(fig)
        written[name] = path
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evo.tools.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory (its --run-dir)")
    parser.add_argument("--out", default=None, help="directory for the PNGs (default RUN_DIR/plots)")
    args = parser.parse_args(argv)
    try:
        written = plot_run(args.run_dir, args.out)
    except RunDirError as error:
        print(f"python -m evo.tools.plot: error: {error}", file=sys.stderr)
        return 2
    for path in written.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
