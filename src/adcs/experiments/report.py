"""Run records, series, their end-of-training numbers, and the neutral ``report.md``.

Everything here works on :class:`RunRecord` values — plain numbers of finished runs — so the same
code serves a fresh run and a results folder read back from disk, and tests can feed it
constructed numbers. Nothing here knows the paper or any method's hyperparameters: a series is a
method and whichever of its hyperparameters identify it; the paper's series, claims and text live
in :mod:`adcs.experiments.paper`.

**Final** has one meaning in every file and on the console: the mean over a run's last
:data:`FINAL_FRACTION` of evaluations (at least one), steadier than the single last evaluation,
which is kept as ``last_*``. Over seeds: the mean, with a 95 % Student-t interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtrit

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
    "select_runs",
    "series_table",
    "summarize",
    "t_interval",
    "tail_length",
    "variant_labels",
    "write_report",
]

FloatArray = NDArray[np.float64]

FINAL_FRACTION = 0.1
"""Share of a run's last evaluations whose mean is its *final* accuracy and loss."""

TIME_FIGURE = "time.png"
"""Accuracy against rounds and simulated time, drawn for runs with a system profile."""


def tail_length(n_evals: int) -> int:
    """Evaluations in the final window: ⌈FINAL_FRACTION · n_evals⌉, at least 1 (0 without any)."""
    return 0 if n_evals == 0 else max(1, math.ceil(FINAL_FRACTION * n_evals - 1e-9))


def final_note() -> str:
    """The definition of *final*, as the report and the console state it."""
    return (
        f"final = mean over each run's last {100 * FINAL_FRACTION:.0f}% of evaluations "
        "(last = the last evaluation alone); over seeds: mean ± 95% t-interval"
    )


def method_label(method: str) -> str:
    """A method's display name: its scheduler class's name (``powerofchoice`` → PowerOfChoice)."""
    from adcs.schedulers import SCHEDULERS

    cls = SCHEDULERS.get(method)
    return cls.__name__ if cls is not None else method


# ---------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True, eq=False)
class RunRecord:
    """The numbers of one finished run: what every results file is written from and read into.

    Attributes
    ----------
    run_id : str
        Unique within an experiment; ``variant`` plus the seed.
    variant : str
        The run's method and identifying hyperparameters, without the seed (one curve's runs).
    method : str
        A key of :data:`adcs.schedulers.SCHEDULERS`.
    seed : int
    params : dict
        Every hyperparameter of the scheduler but ``m`` (JSON-able).
    eval_rounds : ndarray of shape (n_evals,)
    worst_acc, avg_acc, test_loss : ndarray of shape (n_evals,)
        Minimum and mean over clients of test accuracy, and global test loss.
    group_share : ndarray of shape (n_groups,)
        Share of selection slots each group received.
    tv_to_uniform : float
        TV distance of ``group_share`` to what uniform selection gives (the groups' real sizes).
    client_updates, loss_evals : int
        Client computations spent (see the simulator's accounting).
    dropped : int
        Selected clients that dropped out (did not return their update).
    mean_available : float
        Mean number of clients available per round.
    non_finite : int
        Probed client statistics that were NaN or infinite (excluded from selection).
    group_clients : ndarray of shape (n_groups,) or None
        Clients in each group of this run's partition (None when unknown).
    wall_s : float
        This run's share of the simulation's wall time (NaN when unknown; never in the
        byte-reproducible files, see the manifest).
    eval_clock : ndarray of shape (n_evals,) or None
        Simulated seconds at each evaluation (runs with a system profile; else None).
    total_time, client_time : float or None
        Simulated seconds of the whole run, and client-seconds spent (with a system profile).
    p10_acc : ndarray of shape (n_evals,)
        10th-percentile client accuracy (empty when not recorded).
    group_acc : ndarray of shape (n_evals, n_groups)
        Mean accuracy of each group's evaluated clients (NaN: none evaluated).
    honest_acc : ndarray of shape (n_evals, 3)
        Worst, 10th-percentile and mean accuracy of the evaluated honest clients (runs with
        malicious clients, ``[sim.attack]``; empty otherwise).
    extra : dict
        The values of the columns declared beyond the built-in ones (:data:`adcs.columns.COLUMNS`),
        by name.
    """

    run_id: str
    variant: str
    method: str
    seed: int
    params: Mapping[str, Any]
    eval_rounds: NDArray[np.int64]
    worst_acc: FloatArray
    avg_acc: FloatArray
    test_loss: FloatArray
    group_share: FloatArray
    tv_to_uniform: float
    client_updates: int
    loss_evals: int
    dropped: int = 0
    mean_available: float = math.nan
    non_finite: int = 0
    group_clients: NDArray[np.int64] | None = None
    wall_s: float = math.nan
    eval_clock: FloatArray | None = None
    total_time: float | None = None
    client_time: float | None = None
    p10_acc: FloatArray = field(default_factory=lambda: np.empty(0))
    group_acc: FloatArray = field(default_factory=lambda: np.empty((0, 0)))
    honest_acc: FloatArray = field(default_factory=lambda: np.empty((0, 3)))
    extra: Mapping[str, Any] = field(default_factory=dict)

    def value(self, name: str) -> Any:
        """The value of a column's attribute: a field of the record, else one of ``extra``."""
        if name in self.extra:
            return self.extra[name]
        return getattr(self, name)

    @property
    def tail(self) -> slice:
        """The evaluations of the final window."""
        return slice(self.eval_rounds.size - tail_length(self.eval_rounds.size), None)

    def final(self, attr: str) -> float:
        """Mean of ``attr`` (``worst_acc``, ``avg_acc``, ``test_loss``) over the final window."""
        values = np.asarray(self.value(attr))[self.tail]
        return float(values.mean()) if values.size else math.nan

    def last(self, attr: str) -> float:
        """``attr`` at the last evaluation."""
        values = np.asarray(self.value(attr))
        return float(values[-1]) if values.size else math.nan

    @property
    def final_rounds(self) -> tuple[int, int] | None:
        """First and last round of the final window (None without evaluations)."""
        rounds = self.eval_rounds[self.tail]
        return (int(rounds[0]), int(rounds[-1])) if rounds.size else None


# ---------------------------------------------------------------------------------------------
# series


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return not isinstance(b, bool) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


@dataclass(frozen=True, eq=False)
class Series:
    """Which runs make one curve (or one table row): a method and the hyperparameters it fixes.

    Attributes
    ----------
    label : str
    method : str
    params : mapping
        Hyperparameters a run must have (others are free); numbers compare with a tolerance.
    """

    label: str
    method: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, record: RunRecord) -> bool:
        if record.method != self.method:
            return False
        return all(
            k in record.params and _same(record.params[k], v) for k, v in self.params.items()
        )


def select_runs(records: Sequence[RunRecord], series: Series) -> list[RunRecord]:
    """The runs of one series, one per seed, sorted by seed.

    When several variants match (e.g. two Uniform runs with different options), the first one in
    ``records`` is used.
    """
    matching = [r for r in records if series.matches(r)]
    if not matching:
        return []
    variant = matching[0].variant
    return sorted((r for r in matching if r.variant == variant), key=lambda r: r.seed)


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"[{len(value)} values]"
    return str(value)


def variant_labels(records: Sequence[RunRecord]) -> dict[str, str]:
    """A short label per variant: the method's name and the hyperparameters that tell it apart.

    Only the hyperparameters whose value differs between the variants of the same method in
    ``records`` are named (``ADCS gamma=0.25`` beside ``ADCS gamma=0``, not every fixed setting);
    a method with one variant is its name alone.
    """
    first: dict[str, RunRecord] = {}
    for r in records:
        first.setdefault(r.variant, r)
    by_method: dict[str, list[RunRecord]] = {}
    for r in first.values():
        by_method.setdefault(r.method, []).append(r)
    labels: dict[str, str] = {}
    for method, runs in by_method.items():
        keys = list(dict.fromkeys(k for r in runs for k in r.params))
        varying = [k for k in keys if len({_value_text(r.params.get(k)) for r in runs}) > 1]
        for r in runs:
            parts = [f"{k}={_value_text(r.params.get(k))}" for k in varying]
            labels[r.variant] = " ".join([method_label(method), ", ".join(parts)]).strip()
    return labels


def curve_series(records: Sequence[RunRecord]) -> tuple[Series, ...]:
    """One series per variant, in the order of ``records``, matching exactly its runs."""
    labels = variant_labels(records)
    seen: dict[str, RunRecord] = {}
    for r in records:
        seen.setdefault(r.variant, r)
    return tuple(Series(labels[r.variant], r.method, dict(r.params)) for r in seen.values())


# ---------------------------------------------------------------------------------------------
# summaries over seeds


def t_interval(values: FloatArray, confidence: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """Mean over seeds and half-width of the Student-t confidence interval.

    Parameters
    ----------
    values : ndarray of shape (n_seeds, ...)
    confidence : float

    Returns
    -------
    mean, half_width : ndarray of shape values.shape[1:]
        ``half_width`` is NaN with a single seed (no interval can be formed).
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan)
    sem = values.std(axis=0, ddof=1) / math.sqrt(n)
    return mean, sem * float(stdtrit(n - 1, 0.5 + confidence / 2.0))


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
        real sizes (:func:`adcs.sim.metrics.tv_to_uniform`, the one definition).
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


def pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100.0 * x:.2f}%"


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


def write_report(
    path: Path, records: Sequence[RunRecord], context: ReportContext
) -> list[SeriesSummary]:
    """Write a neutral ``report.md``: settings, one table of every variant, group shares, figures.

    Returns the summaries shown (one per variant).
    """
    rows = summaries(records, curve_series(records))
    out = [f"# Results: {context.name}", ""]
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
        if not (timed and fig == TIME_FIGURE):
            out += [f"![{fig}]({fig})", ""]
    if timed:
        from adcs.experiments.timing import time_section

        out += time_section(records, TIME_FIGURE if TIME_FIGURE in context.figures else None)
    path.write_text("\n".join(out).rstrip() + "\n", encoding="utf-8")
    return rows
