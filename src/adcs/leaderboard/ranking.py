"""Scores and ranks of the leaderboard's entries (docs/design.md §7).

An entry's `Score` on a workload holds its per-seed final values; `rank_workload`
and `rank_table` rank the entries by their means with paired ties
(`adcs.experiments.analysis.stats.paired_p_value`, Holm-adjusted over the workload's comparisons with its
best, `adcs.experiments.analysis.stats.holm`). `adcs.leaderboard.suite` runs the
workloads and `adcs.leaderboard.report` writes the summary; both use this
module, and neither imports the other's way back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.columns import COLUMNS, Column
from adcs.experiments.analysis.records import RunRecord, method_label, tell_apart, variant_labels
from adcs.experiments.analysis.stats import CONFIDENCE, SeedValues, holm, paired_p_value, t_interval
from adcs.experiments.analysis.timing import TARGET_FRACTION, Estimate, time_to_reach
from adcs.experiments.run.resultfiles import read_arrays
from adcs.experiments.run.results import load_records
from adcs.schedulers import SCHEDULERS
from adcs.schedulers.variants import Variants

__all__ = [
    "METRICS",
    "METRIC_NAMES",
    "Placing",
    "RankRow",
    "Score",
    "baseline_label",
    "check_metrics",
    "curve_area",
    "entry_labels",
    "is_random_baseline",
    "percentile_curve",
    "placed",
    "places",
    "rank_table",
    "rank_workload",
    "rankable_columns",
    "scores_of",
    "target_worst",
    "variants_of",
    "workload_scores",
]

FloatArray = NDArray[np.float64]

METRICS = ("worst", "p10", "avg")
"""What is ranked: final worst, 10th-percentile and average client accuracy (higher is better)."""
METRIC_NAMES = {"worst": "worst", "p10": "10th-percentile", "avg": "average"}
AUC = "worst_auc"
"""Reported beside the final worst accuracy, not ranked: the area under the worst accuracy's
curve over the rounds (`curve_area`)."""


# ---------------------------------------------------------------------------------------------
# scores


@dataclass(frozen=True, eq=False)
class Score:
    """One entry's numbers on one workload.

    Attributes
    ----------
    workload, variant, method : str
    label : str
        The entry's display name (the same on every workload).
    params : mapping
        Its hyperparameters.
    worst, p10, avg : dict of int to float
        Final worst, 10th-percentile and average client accuracy, per seed.
    rounds_to_target : dict of int to float
        Rounds to the workload's target worst accuracy per seed (NaN: never reached).
    client_updates, loss_evals, tv : float
        Mean over seeds of the updates and loss evaluations computed, and of the TV distance of
        the selection shares to uniform selection.
    columns : dict of str to (dict of int to float)
        Per seed, every column of `rankable_columns`: a per-evaluation one by its final
        value, a per-run one as it is (NaN where the run has none).
    worst_auc : dict of int to float
        Per seed, the area under the worst client accuracy over the rounds, as a mean accuracy
        over the run (`curve_area`): it counts how early accuracy came, not only where it ended.
    """

    workload: str
    variant: str
    method: str
    label: str
    params: Mapping[str, Any]
    worst: dict[int, float]
    p10: dict[int, float]
    avg: dict[int, float]
    rounds_to_target: dict[int, float]
    client_updates: float
    loss_evals: float
    tv: float
    columns: dict[str, dict[int, float]] = field(default_factory=dict)
    worst_auc: dict[int, float] = field(default_factory=dict)

    def values(self, metric: str) -> dict[int, float]:
        """The per-seed values of ``metric`` (one of `METRICS`, or a column's name)."""
        if metric in METRICS or metric == AUC:
            values: dict[int, float] = getattr(self, metric)
            return values
        return self.columns[metric]

    def ranked(self, metric: str) -> dict[int, float]:
        """The values the ranks are taken on: higher is better (a column whose lower values are
        better, ``Column.lower_is_better``, negated)."""
        values = self.values(metric)
        if metric in METRICS or not COLUMNS[metric].lower_is_better:
            return values
        return {seed: -v for seed, v in values.items()}

    def mean(self, metric: str) -> tuple[float, float]:
        """Mean over seeds of ``metric`` and its 95 % t half-width (NaN with one seed)."""
        values = np.array(list(self.values(metric).values()), dtype=np.float64)
        if values.size == 0:
            return math.nan, math.nan
        mean, half = t_interval(values)
        return float(mean), float(half)

    @property
    def to_target(self) -> Estimate:
        """Rounds to the target over seeds (a mean only when every seed reached it)."""
        return Estimate.of_values(list(self.rounds_to_target.values()))

    @property
    def n_seeds(self) -> int:
        return len(self.worst)


def _final(values: FloatArray, record: RunRecord) -> float:
    """The final value of an evaluation series: the mean over the record's final window."""
    tail = np.asarray(values, dtype=np.float64)[record.tail]
    return float(tail.mean()) if tail.size else math.nan


def curve_area(rounds: NDArray[Any], values: NDArray[Any]) -> float:
    """The area under an evaluation curve over the rounds, as a mean value over the run.

    The trapezoid rule over the evaluation rounds (the values linear between evaluations),
    divided by the rounds spanned: ∫ v dt / (t_last − t_first), in the values' unit (an accuracy
    stays in [0, 1]). One evaluation gives its value; none, or a value that is not finite, NaN.

    Parameters
    ----------
    rounds : ndarray of shape (n_evals,)
        Increasing evaluation rounds.
    values : ndarray of shape (n_evals,)

    Returns
    -------
    float
    """
    t = np.asarray(rounds, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.isfinite(v).all():
        return math.nan
    if v.size == 1 or t[-1] == t[0]:
        return float(v.mean())
    return float(np.sum(np.diff(t) * (v[1:] + v[:-1]) / 2.0) / (t[-1] - t[0]))


def percentile_curve(client_acc: NDArray[Any], q: float = 0.1) -> FloatArray:
    """The q-quantile of the clients' accuracies at each evaluation (linear interpolation).

    Parameters
    ----------
    client_acc : ndarray of shape (n_evals, n_clients)
    q : float in [0, 1]

    Returns
    -------
    ndarray of shape (n_evals,)
    """
    acc = np.asarray(client_acc, dtype=np.float64)
    return np.asarray(np.quantile(acc, q, axis=-1), dtype=np.float64)


def is_random_baseline(method: str) -> bool:
    """Whether a method's scheduler declares itself random selection (``random_baseline``)."""
    return bool(getattr(SCHEDULERS.get(method), "random_baseline", False))


def baseline_label() -> str:
    """The display name of the table's random-selection baseline (``Uniform``)."""
    name = next((n for n in SCHEDULERS if is_random_baseline(n)), None)
    return "random selection" if name is None else method_label(name)


def target_worst(records: Sequence[RunRecord]) -> float:
    """The workload's target worst accuracy: `TARGET_FRACTION` × random selection's final.

    The final worst accuracy (mean over seeds) of the first variant of a scheduler that declares
    itself random selection (``random_baseline``: Uniform) is what random selection reaches;
    without one the first variant's serves.
    """
    reference = [r for r in records if is_random_baseline(r.method)] or list(records)
    if not reference:
        return math.nan
    variant = reference[0].variant
    finals = [r.final("worst_acc") for r in reference if r.variant == variant]
    return TARGET_FRACTION * float(np.mean(finals))


def variants_of(method: str) -> Variants | None:
    """The leaderboard variants a method's scheduler declares (its ``leaderboard_variants``),
    None when it declares none or is not a scheduler that can be found."""
    variants = getattr(SCHEDULERS.get(method), "leaderboard_variants", None)
    return variants if isinstance(variants, Variants) else None


def entry_labels(records: Sequence[RunRecord]) -> dict[str, str]:
    """A display name per variant, the name of its entry in every table, figure and file of the
    leaderboard: a scheduler's leaderboard variants by its declaration (`Variants.label`, e.g.
    ``ADCS θ=0.8, fresh q``), the others by the table. Two entries never share a name: one that
    would is followed by the hyperparameters that tell it apart
    (`adcs.experiments.analysis.records.tell_apart`), so none merges into another's row."""
    labels = variant_labels(records)
    params: dict[str, Mapping[str, Any]] = {}
    for r in records:
        params.setdefault(r.variant, r.params)
        variants = variants_of(r.method)
        label = None if variants is None else variants.label(method_label(r.method), r.params)
        if label is not None:
            labels[r.variant] = label
    return tell_apart(labels, params, sep=", ")


def rankable_columns() -> list[Column]:
    """The columns the leaderboard can rank: one number per evaluation or per run."""
    return [c for c in COLUMNS if not c.per_group and not c.parts]


def check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    """``metrics`` if each is one of `METRICS` or a rankable column's name.

    Raises
    ------
    ValueError
        Naming the metric and those that can be ranked.
    """
    known = [*METRICS, *(c.name for c in rankable_columns())]
    for metric in metrics:
        if metric not in known:
            raise ValueError(f"cannot rank by {metric!r}; the columns that can be: {known}")
    return tuple(dict.fromkeys(metrics))


def _column_value(column: Column, record: RunRecord) -> float:
    value = record.value(column.attr)
    if value is None:
        return math.nan
    if column.per == "eval":
        return record.final(column.attr)
    return float(value)


def scores_of(
    workload: str,
    records: Sequence[RunRecord],
    client_acc: Mapping[str, NDArray[Any]],
    labels: Mapping[str, str] | None = None,
) -> tuple[list[Score], float]:
    """Every entry's `Score` on one workload, in the order of ``records``, and the target.

    Parameters
    ----------
    workload : str
    records : sequence of RunRecord
        The workload's runs.
    client_acc : mapping of run id to ndarray of shape (n_evals, n_clients)
        Per-client accuracies (``client_acc.npz``), for the 10th percentile; a run without one
        gets NaN.
    labels : mapping, optional
        Display names by variant (default `entry_labels` of ``records``).
    """
    labels = dict(labels or entry_labels(records))
    target = target_worst(records)
    by_variant: dict[str, list[RunRecord]] = {}
    for r in records:
        by_variant.setdefault(r.variant, []).append(r)
    scores = []
    for variant, runs in by_variant.items():
        runs = sorted(runs, key=lambda r: r.seed)
        p10 = {}
        for r in runs:
            acc = client_acc.get(r.run_id)
            p10[r.seed] = math.nan if acc is None else _final(percentile_curve(acc), r)
        reach = {
            r.seed: time_to_reach(r.eval_rounds.astype(np.float64), r.worst_acc, target)
            for r in runs
        }
        score = Score(
            workload=workload, variant=variant, method=runs[0].method,
            label=labels.get(variant, variant), params=dict(runs[0].params),
            worst={r.seed: r.final("worst_acc") for r in runs}, p10=p10,
            avg={r.seed: r.final("avg_acc") for r in runs}, rounds_to_target=reach,
            client_updates=float(np.mean([r.client_updates for r in runs])),
            loss_evals=float(np.mean([r.loss_evals for r in runs])),
            tv=float(np.mean([r.tv_to_uniform for r in runs])),
            columns={c.name: {r.seed: _column_value(c, r) for r in runs}
                     for c in rankable_columns()},
            worst_auc={r.seed: curve_area(r.eval_rounds, r.worst_acc) for r in runs},
        )  # fmt: skip
        scores.append(score)
    return scores, target


# ---------------------------------------------------------------------------------------------
# ranks and ties


@dataclass(frozen=True)
class Placing:
    """An entry's place on one workload.

    Attributes
    ----------
    rank : float
        1 = the highest mean; equal means share the mean of their places.
    mean : float
        Mean over seeds (NaN: not finite on some seed).
    best : bool
        It has the highest mean.
    tied : bool
        It is the best or tied with the best: its comparison with the best is not rejected at
        the 5 % level after Holm's adjustment over the workload's comparisons with the best.
    p_value : float
        Of its paired t-test against the best (`paired_p_value`), Holm-adjusted (`holm`) over
        the workload's other entries unless the ranking was asked for without adjustment; NaN
        for the best.
    """

    rank: float
    mean: float
    best: bool
    tied: bool
    p_value: float = math.nan


def _seed_mean(values: SeedValues) -> float:
    array = np.array(list(values.values()), dtype=np.float64)
    return float(array.mean()) if array.size and np.isfinite(array).all() else math.nan


def rank_workload(
    entries: Mapping[str, SeedValues], confidence: float = CONFIDENCE, *, adjust: bool = True
) -> dict[str, Placing]:
    """Rank the entries of one workload by their mean over seeds (higher is better).

    The best (the first of the highest means, in the order of ``entries``) is compared with each
    other entry by a two-sided paired t-test over their common seeds (`paired_p_value`); those k
    p-values form one family, Holm-adjusted (`holm`) so that the chance of calling any entry
    *behind* the best when it is not stays at most 1 − ``confidence``. An entry is tied with the
    best when its adjusted p-value is at least 1 − ``confidence``. With ``adjust=False`` each
    comparison is read alone (p ≥ 1 − ``confidence``, `adcs.experiments.analysis.stats.tied`).

    Parameters
    ----------
    entries : mapping of entry to (mapping of seed to value)
    confidence : float
        Of the tie test.
    adjust : bool
        Holm's adjustment over the workload's comparisons (default), or none.

    Returns
    -------
    dict of entry to Placing
        Ranks 1 … n; equal means share the mean of their places; an entry whose mean is not
        finite ranks after every finite one.
    """
    names = list(entries)
    if not names:
        return {}
    means = np.array([_seed_mean(entries[n]) for n in names], dtype=np.float64)
    key = np.where(np.isfinite(means), means, -np.inf)
    ranks = np.empty(len(names), dtype=np.float64)
    for i, k in enumerate(key):
        above = float(np.sum(key > k))
        same = float(np.sum(key == k))
        ranks[i] = above + (same + 1.0) / 2.0  # the mean of the places above+1 … above+same
    top = float(key.max())
    best = names[int(np.argmax(key))]
    others = [n for n in names if n != best]
    raw = [paired_p_value(entries[best], entries[n]) for n in others]
    p_values = dict(zip(others, holm(raw) if adjust else raw, strict=True))
    alpha = 1.0 - confidence
    out = {}
    for i, name in enumerate(names):
        is_best = bool(np.isfinite(key[i]) and key[i] == top)
        p = p_values.get(name, math.nan)
        out[name] = Placing(
            rank=float(ranks[i]),
            mean=float(means[i]),
            best=is_best,
            tied=is_best or p >= alpha,
            p_value=p,
        )
    return out


@dataclass(frozen=True)
class RankRow:
    """An entry's line of the overall table, for one metric.

    Attributes
    ----------
    entry : str
    mean_rank : float
        Over the workloads it ran on.
    workloads : int
        How many it ran on.
    best, tied : int
        On how many it was the best, and the best or tied with the best.
    ranks : dict of str to float
        Its rank on each workload.
    marks : dict of str to str
        On each workload, ``"★"`` where it is the best, ``"="`` where tied with the best, else
        ``""``.
    """

    entry: str
    mean_rank: float
    workloads: int
    best: int
    tied: int
    ranks: dict[str, float] = field(default_factory=dict)
    marks: dict[str, str] = field(default_factory=dict)


def rank_table(
    workloads: Mapping[str, Mapping[str, SeedValues]], confidence: float = CONFIDENCE
) -> tuple[list[RankRow], dict[str, dict[str, Placing]]]:
    """The overall table: each entry's mean rank over workloads, bests and ties.

    Parameters
    ----------
    workloads : mapping of workload to (mapping of entry to per-seed values)

    Returns
    -------
    rows : list of RankRow
        The entries that ran on the most workloads first, each part sorted by mean rank, then
        by more ties with the best, then by name: a mean rank over fewer workloads is not
        comparable, so such an entry gets no place (`placed`).
    placings : dict of workload to (dict of entry to Placing)
    """
    placings = {w: rank_workload(entries, confidence) for w, entries in workloads.items()}
    names = list(dict.fromkeys(e for entries in workloads.values() for e in entries))
    rows = []
    for name in names:
        mine = {w: p[name] for w, p in placings.items() if name in p}
        rows.append(
            RankRow(
                entry=name,
                mean_rank=float(np.mean([p.rank for p in mine.values()])),
                workloads=len(mine),
                best=sum(p.best for p in mine.values()),
                tied=sum(p.tied for p in mine.values()),
                ranks={w: p.rank for w, p in mine.items()},
                marks={w: "★" if p.best else "=" if p.tied else "" for w, p in mine.items()},
            )
        )
    rows.sort(key=lambda r: (-r.workloads, r.mean_rank, -r.tied, r.entry))
    return rows, placings


def placed(rows: Sequence[RankRow]) -> list[RankRow]:
    """The rows of `rank_table` that take a place: the entries that ran on the most workloads
    (every entry, when all ran on every workload)."""
    most = max((r.workloads for r in rows), default=0)
    return [r for r in rows if r.workloads == most]


def places(rows: Sequence[RankRow]) -> list[int | None]:
    """Each row's place in the overall table: 1, 2, ... for the `placed` rows, None after."""
    n = len(placed(rows))
    return [i + 1 if i < n else None for i in range(len(rows))]


def workload_scores(folder: Path, name: str) -> tuple[list[RunRecord], dict[str, NDArray[Any]]]:
    """A workload's records and per-client accuracies, read back from its results folder."""
    records = load_records(folder / name)
    return records, read_arrays(folder / name / "client_acc.npz")
