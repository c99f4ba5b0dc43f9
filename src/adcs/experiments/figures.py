"""The paper's figures (Sec. 6): worst and average client test accuracy against rounds.

Fig. 1 compares the six methods (ADCS θ = 0.8, R = 20); Fig. 2 sweeps θ ∈ {0.2, …, 1.0} against
Uniform; Fig. 3 sweeps R ∈ {1, 5, 20, 100, 500}. Each curve is the mean over seeds with a shaded
95 % t-interval over seeds (none with a single seed). matplotlib is imported here only, with the
non-interactive Agg backend, and only when a figure is drawn.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.report import (
    FIGURE_SERIES,
    TIME_FIGURE,
    RunRecord,
    Series,
    select_runs,
    t_interval,
)

__all__ = [
    "FIGURE_TITLES",
    "curve_series",
    "plot_accuracy",
    "plot_accuracy_against_time",
    "write_figures",
]

logger = logging.getLogger(__name__)

FIGURE_TITLES: dict[str, str] = {
    "fig1": "Fig. 1: comparison of worst and average test accuracy",
    "fig2": "Fig. 2: ADCS for varying θ (R = 20)",
    "fig3": "Fig. 3: ADCS for varying R (θ = 0.8)",
    "curves": "Worst and average test accuracy",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_series(records: Sequence[RunRecord]) -> tuple[Series, ...]:
    """One series per distinct variant in ``records`` (for configurations off the paper's grid)."""
    seen: dict[str, RunRecord] = {}
    for r in records:
        seen.setdefault(r.variant, r)
    out = []
    for variant, r in seen.items():
        series = Series(variant, r.method, r.theta, r.refresh_every)
        # a series must select exactly this variant; skip ambiguous ones rather than mislabel
        if select_runs(records, series) and select_runs(records, series)[0].variant == variant:
            out.append(series)
        else:
            logger.warning("variant %s cannot be told apart by method/θ/R; not plotted", variant)
    return tuple(out)


def _stack(runs: Sequence[RunRecord], attr: str) -> tuple[np.ndarray, np.ndarray]:
    n = min(getattr(r, attr).size for r in runs)
    return runs[0].eval_rounds[:n], np.array([getattr(r, attr)[:n] for r in runs])


def plot_accuracy(
    records: Sequence[RunRecord], series: Sequence[Series], path: Path, title: str
) -> list[str]:
    """Draw worst (left) and average (right) accuracy against rounds and save a PNG.

    Parameters
    ----------
    records : sequence of RunRecord
    series : sequence of Series
        The curves; a series without runs is left out (and named in the log).
    path : Path
        Output ``.png``.
    title : str

    Returns
    -------
    list of str
        Labels of the series drawn.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    drawn = []
    for s in series:
        runs = select_runs(records, s)
        if not runs:
            logger.info("%s: no runs for %s; left out", path.name, s.label)
            continue
        label = f"{s.label} (n={len(runs)})" if len(runs) > 1 else s.label
        for ax, attr in zip(axes, ("worst_acc", "avg_acc"), strict=True):
            rounds, values = _stack(runs, attr)
            mean, half = t_interval(values)
            (line,) = ax.plot(rounds, 100 * mean, label=label, lw=1.4)
            if np.isfinite(half).all():
                # an accuracy lies in [0, 1]: the t-interval is clipped to it
                low, high = np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)
                ax.fill_between(
                    rounds, 100 * low, 100 * high, color=line.get_color(), alpha=0.2, lw=0
                )
        drawn.append(s.label)
    for ax, name in zip(axes, ("Worst", "Average"), strict=True):
        ax.set_xlabel("round")
        ax.set_ylabel(f"{name} test accuracy (%)")
        ax.grid(alpha=0.3)
    if drawn:
        axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


def plot_accuracy_against_time(
    records: Sequence[RunRecord], path: Path, targets: tuple[float, float] | None = None
) -> list[str]:
    """Worst and average accuracy against rounds (top) and simulated time (bottom), per variant.

    Each curve is one variant's mean over seeds with a shaded 95 % t-interval; on the time axis a
    point is at the seeds' mean simulated time of that evaluation. The targets of the report's
    time-to-accuracy table (default :func:`adcs.experiments.timing.default_targets`) are dashed.
    Returns the variants drawn.
    """
    from adcs.experiments.timing import curves, default_targets, variant_label

    plt = _pyplot()
    targets = default_targets(records) if targets is None else targets
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharey="col")
    drawn = []
    for variant, runs in curves(records).items():
        n = min(r.eval_rounds.size for r in runs)
        clock = np.mean([np.asarray(r.eval_clock)[:n] for r in runs], axis=0)
        label = variant_label(variant) + (f" (n={len(runs)})" if len(runs) > 1 else "")
        for col, attr in enumerate(("worst_acc", "avg_acc")):
            mean, half = t_interval(np.array([getattr(r, attr)[:n] for r in runs]))
            for row, x in enumerate((runs[0].eval_rounds[:n], clock / 3600.0)):
                ax = axes[row, col]
                (line,) = ax.plot(x, 100 * mean, label=label, lw=1.3)
                if np.isfinite(half).all():
                    low, high = np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)
                    ax.fill_between(x, 100 * low, 100 * high, color=line.get_color(), alpha=0.15)
        drawn.append(variant)
    for col, (name, target) in enumerate(zip(("Worst", "Average"), targets, strict=True)):
        for row, xlabel in enumerate(("round", "simulated time (h)")):
            ax = axes[row, col]
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"{name} test accuracy (%)")
            ax.grid(alpha=0.3)
        axes[1, col].axhline(100 * target, color="0.4", ls="--", lw=0.8)
    if drawn:
        axes[1, 1].legend(loc="lower right", fontsize=7)
    fig.suptitle("Worst and average test accuracy against rounds and simulated time")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


def write_figures(folder: Path, records: Sequence[RunRecord], outputs: Sequence[str]) -> list[str]:
    """Draw the figures named in ``outputs`` (``fig1``–``fig3``, ``curves``) into ``folder``.

    A paper figure none of whose runs exist is skipped. Runs with a simulated clock (a system
    profile) also get ``time.png`` (:func:`plot_accuracy_against_time`). Returns the file names
    written.
    """
    written = []
    for name in outputs:
        if name in FIGURE_SERIES:
            series: Sequence[Series] = FIGURE_SERIES[name]
        elif name == "curves":
            series = curve_series(records)
        else:
            continue
        if not any(select_runs(records, s) for s in series):
            logger.warning("%s: none of its runs were made; not drawn", name)
            continue
        plot_accuracy(records, series, folder / f"{name}.png", FIGURE_TITLES[name])
        written.append(f"{name}.png")
    if records and all(r.eval_clock is not None for r in records):
        plot_accuracy_against_time(records, folder / TIME_FIGURE)
        written.append(TIME_FIGURE)
    return written
