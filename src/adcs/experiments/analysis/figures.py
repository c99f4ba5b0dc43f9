"""Figures: worst and average client test accuracy against rounds, one curve per series.

Each curve is the mean over seeds with a shaded 95 % t-interval over seeds (none with a single
seed). The ``curves`` figure has one curve per variant of the experiment, so every swept
hyperparameter shows; runs on a simulated clock also get accuracy against simulated time; named
figures (the paper's Figures 1–3, `adcs.experiments.paper.FIGURES`) are given by the caller as a
title and their series. matplotlib is imported here only, with the non-interactive Agg backend, and
only when a figure is drawn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.records import (
    RunRecord,
    Series,
    curve_series,
    select_runs,
    variant_labels,
    with_every_variant,
)
from adcs.experiments.analysis.report import TIME_FIGURE
from adcs.experiments.analysis.stats import t_interval
from adcs.experiments.analysis.timing import curves, default_targets

__all__ = ["CURVES_TITLE", "plot_accuracy", "plot_accuracy_against_time", "pyplot", "write_figures"]

logger = logging.getLogger(__name__)

CURVES_TITLE = "Worst and average test accuracy"


def pyplot() -> Any:
    """matplotlib's ``pyplot``, imported on first use: on the non-interactive Agg backend unless a
    backend was chosen already (``MPLBACKEND``, e.g. a notebook's inline backend, or pyplot
    imported by the caller) — the results' figures are saved and closed either way."""
    import os
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    plt = pyplot()
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
    time-to-accuracy table (default `adcs.experiments.analysis.timing.default_targets`) are dashed.
    Returns the variants drawn.
    """
    plt = pyplot()
    targets = default_targets(records) if targets is None else targets
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharey="col")
    drawn = []
    labels = variant_labels(records)
    for variant, runs in curves(records).items():
        n = min(r.eval_rounds.size for r in runs)
        clock = np.mean([np.asarray(r.eval_clock)[:n] for r in runs], axis=0)
        label = labels[variant] + (f" (n={len(runs)})" if len(runs) > 1 else "")
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


def write_figures(
    folder: Path,
    records: Sequence[RunRecord],
    outputs: Sequence[str],
    named: Mapping[str, tuple[str, Sequence[Series]]] | None = None,
) -> list[str]:
    """Draw the figures named in ``outputs`` into ``folder``; return the file names written.

    ``curves`` draws every variant; any other name is looked up in ``named`` (title, series) and
    draws its series and, after them, every variant that no figure of ``named`` shows (a user's own
    scheduler beside the paper's methods: `adcs.experiments.analysis.records.with_every_variant`).
    A figure none of whose runs exist is skipped (with a warning). Runs with a simulated clock (a
    system profile) also get ``time.png`` (`plot_accuracy_against_time`).
    """
    written = []
    covered = [s for _, group in (named or {}).values() for s in group]
    for name in outputs:
        if name == "curves":
            title, series = CURVES_TITLE, curve_series(records)
        elif named is not None and name in named:
            title, series = named[name][0], tuple(named[name][1])
        else:
            continue
        if not any(select_runs(records, s) for s in series):
            logger.warning("%s: none of its runs were made; not drawn", name)
            continue
        if name != "curves":
            series = with_every_variant(records, series, covered)
        plot_accuracy(records, series, folder / f"{name}.png", title)
        written.append(f"{name}.png")
    if records and all(r.eval_clock is not None for r in records):
        plot_accuracy_against_time(records, folder / TIME_FIGURE)
        written.append(TIME_FIGURE)
    return written
