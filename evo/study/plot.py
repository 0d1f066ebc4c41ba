"""The study's figures: ``compare.png`` (the best selection score against the population's total env
steps, every generation) and ``anytime.png`` (the selected member's fresh return at each re-evaluated
fraction of the budget, against the total env steps all members had used then, with the floors)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from evo.rundir.checkpoint import atomic_file
from evo.study.records import Result, Run
from evo.study.stats import t_interval


def _colours(methods, plt) -> dict[str, tuple]:
    palette = plt.get_cmap("tab10").colors  # a colour per method of this study
    return {method: palette[i % len(palette)] for i, method in enumerate(methods)}


def _label(ax, env_id: str, ylabel: str) -> None:
    """An env's panel: its title, the axes' names (x: the population's total env steps), the legend."""
    ax.set_title(env_id)
    ax.set_xlabel("total env steps (all members)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="method (seeds)", title_fontsize=8)


def _save(figure, path: Path) -> None:
    """The figure as a PNG at ``path``, written whole or not at all."""
    from evo.tools.plot import DPI, plt

    figure.tight_layout()
    with atomic_file(path) as handle:
        figure.savefig(handle, format="png", dpi=DPI)
    plt.close(figure)


def plot(results: list[Result], envs, methods, path: Path, thresholds: Mapping[str, float | None]) -> None:
    """Best score vs the population's total env steps: mean over seeds, min–max band."""
    from evo.tools.plot import plt  # matplotlib, headless

    figure, axes = plt.subplots(1, len(envs), figsize=(6.5 * len(envs), 4.5), squeeze=False)
    colours = _colours(methods, plt)
    for ax, env_id in zip(axes[0], envs, strict=False):
        for method in methods:
            runs = [r for r in results if r.env_id == env_id and r.method == method and r.curve]
            if not runs:
                continue
            length = min(len(r.curve) for r in runs)
            steps = np.array([total for total, _ in runs[0].curve[:length]])
            best = np.array([[r.curve[i][1] for i in range(length)] for r in runs])
            ax.plot(steps, best.mean(axis=0), marker="o", ms=3, color=colours[method], label=f"{method} ({len(runs)})")
            ax.fill_between(steps, best.min(axis=0), best.max(axis=0), color=colours[method], alpha=0.15)
        threshold = thresholds.get(env_id)
        if threshold is not None:
            ax.axhline(threshold, color="grey", linestyle=":", linewidth=1)
        _label(ax, env_id, "best member's evaluation score")
    _save(figure, path)


def plot_anytime(runs: Sequence[Run], envs, methods, path: Path, floors: Mapping[str, float] | None = None) -> None:
    """The selected member's fresh return against the total env steps used, at each re-evaluated
    fraction: mean over seeds and its 95 % t-interval; the floors (mean over seeds) as lines."""
    from evo.tools.plot import plt  # matplotlib, headless

    figure, axes = plt.subplots(1, len(envs), figsize=(6.5 * len(envs), 4.5), squeeze=False)
    colours = _colours(methods, plt)
    for ax, env_id in zip(axes[0], envs, strict=False):
        for method in methods:
            by_fraction: dict[float, list] = {}
            for run in runs:
                if run.job.env_id == env_id and run.job.method == method:
                    for point in run.points:
                        by_fraction.setdefault(point.fraction, []).append(point)
            if not by_fraction:
                continue
            fractions = sorted(by_fraction)  # a point's x: its seeds' mean total (SAC's differ by a few steps)
            steps = [statistics.mean(p.total_env_steps for p in by_fraction[f]) for f in fractions]
            intervals = (t_interval([p.selected for p in by_fraction[f]]) for f in fractions)
            means, lows, highs = zip(*intervals, strict=True)
            seeds = max(len(v) for v in by_fraction.values())
            ax.plot(steps, means, marker="o", ms=4, color=colours[method], label=f"{method} ({seeds})")
            ax.fill_between(steps, lows, highs, color=colours[method], alpha=0.15)
        for name, value in ((floors or {}).get(env_id) or {}).items():
            ax.axhline(value, color="grey", linestyle=":" if "random" in name else "--", linewidth=1, label=name)
        _label(ax, env_id, "selected member, fresh episodes")
    _save(figure, path)
