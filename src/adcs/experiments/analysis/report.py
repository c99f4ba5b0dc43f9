"""Series summaries over seeds and the neutral ``report.md``.

Works on `RunRecord` values (re-exported here with the
series and the statistics they use). Nothing here knows the paper or any method's
hyperparameters; the paper's series, claims and text live in `adcs.experiments.paper`.
*Final* and the intervals are those of `adcs.experiments.analysis.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from adcs.experiments.analysis.records import (
    RunRecord,
    Series,
    curve_series,
    method_label,
    select_runs,
    variant_labels,
    with_every_variant,
)
from adcs.experiments.analysis.stats import FINAL_FRACTION, final_note, t_interval, tail_length
from adcs.experiments.analysis.timing import time_section

__all__ = [
    "FINAL_FRACTION",
    "TIME_FIGURE",
    "ReportContext",
    "RunRecord",
    "Series",
    "SeriesSummary",
    "curve_series",
    "final_note",
    "method_label",
    "report_body",
    "select_runs",
    "series_table",
    "summarize",
    "t_interval",
    "tail_length",
    "variant_labels",
    "with_every_variant",
    "write_report",
]

FloatArray = NDArray[np.float64]

TIME_FIGURE = "time.png"
"""Accuracy against rounds and simulated time, drawn for runs with a system profile."""


# ---------------------------------------------------------------------------------------------
# summaries over seeds


@dataclass(frozen=True, eq=False)
class SeriesSummary:
    """End-of-training numbers of one series, over its seeds.

    Attributes
    ----------
    series : Series
    n_seeds : int
    worst, avg : float
        Mean over seeds of the final worst / average accuracy.
    worst_half, avg_half : float
        95 % t-interval half-widths (NaN with one seed).
    last_worst, last_avg : float
        Mean over seeds of the last evaluation's worst / average accuracy.
    worst_tail_std : float
        Mean over seeds of the standard deviation of worst accuracy over the final window.
    group_share : ndarray of shape (n_groups,)
        Mean over seeds of the share of selection slots per group; NaN when the seeds'
        partitions differ in their groups' sizes (shares of different groups do not average).
    tv : float
        Mean over seeds of each run's TV distance to uniform selection — against its own groups'
        real sizes ([`adcs.sim.metrics.tv_to_uniform`][adcs.sim.tv_to_uniform], the one definition).
    client_updates, loss_evals : float
        Mean over seeds.
    dropped, non_finite : float
        Mean over seeds.
    tail_rounds : tuple of int
        First and last evaluation round of the final window.
    """

    series: Series
    n_seeds: int
    worst: float
    worst_half: float
    avg: float
    avg_half: float
    last_worst: float
    last_avg: float
    worst_tail_std: float
    group_share: FloatArray
    tv: float
    client_updates: float
    loss_evals: float
    dropped: float
    non_finite: float
    tail_rounds: tuple[int, int]

    @property
    def label(self) -> str:
        return self.series.label


def _mean_share(runs: Sequence[RunRecord]) -> FloatArray:
    sizes = {r.group_share.size for r in runs}
    clients = [r.group_clients for r in runs]
    same = len(sizes) == 1 and (
        all(c is None for c in clients)
        or (
            all(c is not None for c in clients)
            and len({tuple(c) for c in clients if c is not None}) == 1
        )
    )
    if not same:
        return np.full(max(sizes), np.nan)
    return np.mean([r.group_share for r in runs], axis=0)


def summarize(records: Sequence[RunRecord], series: Series) -> SeriesSummary | None:
    """Summarise one series; ``None`` when no run matches."""
    runs = select_runs(records, series)
    if not runs or any(r.eval_rounds.size == 0 for r in runs):
        return None
    worst_mean, worst_half = t_interval(np.array([r.final("worst_acc") for r in runs]))
    avg_mean, avg_half = t_interval(np.array([r.final("avg_acc") for r in runs]))
    window = runs[0].final_rounds
    assert window is not None
    return SeriesSummary(
        series=series,
        n_seeds=len(runs),
        worst=float(worst_mean),
        worst_half=float(worst_half),
        avg=float(avg_mean),
        avg_half=float(avg_half),
        last_worst=float(np.mean([r.last("worst_acc") for r in runs])),
        last_avg=float(np.mean([r.last("avg_acc") for r in runs])),
        worst_tail_std=float(np.mean([r.worst_acc[r.tail].std() for r in runs])),
        group_share=_mean_share(runs),
        tv=float(np.mean([r.tv_to_uniform for r in runs])),
        client_updates=float(np.mean([r.client_updates for r in runs])),
        loss_evals=float(np.mean([r.loss_evals for r in runs])),
        dropped=float(np.mean([r.dropped for r in runs])),
        non_finite=float(np.mean([r.non_finite for r in runs])),
        tail_rounds=window,
    )


def summaries(records: Sequence[RunRecord], series: Sequence[Series]) -> list[SeriesSummary]:
    """The summaries of the series that have runs, in order."""
    return [s for s in (summarize(records, x) for x in series) if s is not None]


# ---------------------------------------------------------------------------------------------
# markdown


def pct(x: float, unit: str = "%") -> str:
    """An accuracy in % with two decimals, then ``unit`` (``—`` when not finite): every report's
    one way to write it (the leaderboard's tables write it without the sign, ``unit=""``)."""
    return "—" if not math.isfinite(x) else f"{100.0 * x:.2f}{unit}"


def pm(mean: float, half: float) -> str:
    return pct(mean) if math.isnan(half) else f"{pct(mean)} ± {100.0 * half:.2f}"


def fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def series_table(rows: Sequence[SeriesSummary]) -> str:
    """One row per series: final and last accuracies, TV to uniform, client computations."""
    lines = [
        "| Series | seeds | final worst acc. | final average acc. | last worst | last average "
        "| TV to uniform | client updates | loss evals |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s.label} | {s.n_seeds} | {pm(s.worst, s.worst_half)} | {pm(s.avg, s.avg_half)} "
            f"| {pct(s.last_worst)} | {pct(s.last_avg)} | {s.tv:.4f} | {s.client_updates:,.0f} "
            f"| {s.loss_evals:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def group_share_table(rows: Sequence[SeriesSummary]) -> str:
    """Mean share of selection slots per group, and the mean TV to uniform selection."""
    if not rows:
        return ""
    n_groups = max(s.group_share.size for s in rows)
    head = ["Series", *(f"Group {k}" for k in range(n_groups)), "TV"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in rows:
        cells = [s.label, *(fmt(float(x)) for x in s.group_share), fmt(s.tv)]
        lines.append("| " + " | ".join(cells) + " |")
    if any(np.isnan(s.group_share).all() for s in rows):
        lines += [
            "",
            "— : the seeds' partitions differ in their groups' sizes; see group_share.csv.",
        ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ReportContext:
    """What the report says about how the results were produced.

    Attributes
    ----------
    name : str
        Experiment name.
    rounds, eval_every, m, n_clients : int
    seeds : tuple of int
    data_source : str
    is_subset : bool
        The shipped Fashion-MNIST subset was used instead of the full data set.
    dataset : str
        The data set and model, in words.
    quick : bool
        Quick settings were used.
    figures : tuple of str
        File names of the figures written beside the report.
    wall_s : float
    notes : tuple of str
        Lines added after the settings (e.g. links to sub-reports).
    description : str
    model : str
        The model trained, in words.
    """

    name: str
    rounds: int
    eval_every: int
    m: int
    n_clients: int
    seeds: tuple[int, ...]
    data_source: str
    is_subset: bool
    quick: bool = False
    figures: tuple[str, ...] = ()
    wall_s: float = float("nan")
    notes: tuple[str, ...] = field(default_factory=tuple)
    description: str = ""
    dataset: str = "Fashion-MNIST"
    model: str = "multinomial logistic regression"

    def settings(self) -> str:
        """One sentence: data, model, sizes, rounds, seeds, wall time."""
        return (
            f"{self.dataset} ({self.data_source}), {self.model}, "
            f"N = {self.n_clients} clients, m = {self.m}, T = {self.rounds} rounds, "
            f"evaluated every {self.eval_every} rounds, seeds {list(self.seeds)}"
            + ("" if math.isnan(self.wall_s) else f"; wall time {self.wall_s:.1f} s")
            + "."
        )


def report_body(
    records: Sequence[RunRecord], context: ReportContext, figures_elsewhere: Sequence[str] = ()
) -> tuple[list[str], list[SeriesSummary]]:
    """The neutral report below its title: settings, one table of every variant, group shares,
    the figures but ``figures_elsewhere`` (file names a study's sections show), the time section.

    A study's report is this body with its own sections added (docs/design.md §8), so no
    variant that ran is left out of any report. Returns the lines and the summaries shown.
    """
    rows = summaries(records, curve_series(records))
    out: list[str] = []
    if context.description:
        out += [context.description, ""]
    out += [context.settings(), ""]
    if context.is_subset:
        out += ["The shipped Fashion-MNIST subset was used: the numbers are indicative only.", ""]
    if context.notes:
        out += [*context.notes, ""]
    window = rows[0].tail_rounds if rows else None
    out.append(
        final_note().capitalize()
        + (f" (here rounds {window[0]}–{window[1]})" if window else "")
        + ". Accuracy in %."
    )
    out += ["", "## Every run, by variant", "", series_table(rows)]
    shares = group_share_table(rows)
    if shares and max(s.group_share.size for s in rows) > 1:
        out += ["## Selection by group", "", shares]
    timed = bool(records) and all(r.eval_clock is not None for r in records)
    for fig in context.figures:
        if not (timed and fig == TIME_FIGURE) and fig not in figures_elsewhere:
            out += [f"![{fig}]({fig})", ""]
    if timed:
        out += time_section(records, TIME_FIGURE if TIME_FIGURE in context.figures else None)
    return out, rows


def write_report(
    path: Path, records: Sequence[RunRecord], context: ReportContext
) -> list[SeriesSummary]:
    """Write a neutral ``report.md``: settings, one table of every variant, group shares, figures.

    Returns the summaries shown (one per variant).
    """
    body, rows = report_body(records, context)
    text = "\n".join([f"# Results: {context.name}", "", *body])
    path.write_text(text.rstrip() + "\n", encoding="utf-8")
    return rows
