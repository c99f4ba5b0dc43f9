"""Time to accuracy on the simulated clock (docs/design.md §7, *Systems*): numbers and the report section.

Works on `RunRecord` values that carry a clock (runs made with a
``[sim.system]`` table): ``eval_clock`` (simulated seconds at each evaluation), ``total_time`` and
``client_time``. One *curve* is one variant (a method and its hyperparameters) over its seeds; the
first curve (the first method of the configuration) is the *reference*.

* **Targets**: unless given, `TARGET_FRACTION` of the reference's *final* worst and average
  accuracy (final: the mean of a run's last 10 % of evaluations, then the mean over seeds). Oort
  (Lai et al., OSDI 2021, Sec. 7.1) likewise sets the target to what random selection reaches.
* **Time to a target** of a run: the simulated time of the first evaluation at which its accuracy
  is at least the target (resolution: one evaluation interval). Over seeds: the mean and a 95 %
  t-interval, given only when every seed reached the target (otherwise how many did).
* **Ratios** to the reference are paired by seed — the seeds' devices differ, the methods of one
  seed share them — then averaged over seeds with a 95 % t-interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from adcs.experiments.analysis.records import RunRecord, variant_labels
from adcs.experiments.analysis.stats import t_interval, tail_length

__all__ = [
    "TARGET_FRACTION",
    "Estimate",
    "TimeSummary",
    "curves",
    "default_targets",
    "is_timed",
    "time_section",
    "time_summaries",
    "time_to_reach",
]

TARGET_FRACTION = 0.95
"""Default targets: this share of the reference curve's final accuracy."""


def is_timed(records: Sequence[RunRecord]) -> bool:
    """Whether the runs carry a simulated clock (they were made with a system profile)."""
    return bool(records) and all(r.eval_clock is not None for r in records)


def curves(records: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    """The runs of each variant, sorted by seed, in the order the variants first appear."""
    out: dict[str, list[RunRecord]] = {}
    for r in records:
        out.setdefault(r.variant, []).append(r)
    return {v: sorted(rs, key=lambda r: r.seed) for v, rs in out.items()}


def time_to_reach(clock: np.ndarray, values: np.ndarray, target: float) -> float:
    """Simulated time of the first evaluation with ``values >= target`` (NaN if none).

    Parameters
    ----------
    clock : ndarray of shape (n_evals,)
        Simulated seconds at each evaluation (non-decreasing).
    values : ndarray of shape (n_evals,)
        Accuracy at each evaluation.
    target : float
    """
    reached = np.flatnonzero(np.asarray(values) >= target)
    return float(clock[reached[0]]) if reached.size else math.nan


def _clock(record: RunRecord) -> np.ndarray:
    assert record.eval_clock is not None
    return np.asarray(record.eval_clock)


def _total(record: RunRecord) -> float:
    """Simulated seconds of the run (its clock at the last evaluation when not recorded)."""
    return float(record.total_time) if record.total_time is not None else float(_clock(record)[-1])


def _client(record: RunRecord) -> float:
    return math.nan if record.client_time is None else float(record.client_time)


def _final(values: np.ndarray) -> float:
    """The final value of an evaluation series: the report's one definition (`tail_length`)."""
    return float(np.mean(values[-tail_length(values.size) :]))


def default_targets(records: Sequence[RunRecord]) -> tuple[float, float]:
    """Worst- and average-accuracy targets: `TARGET_FRACTION` × the reference's final."""
    reference = next(iter(curves(records).values()))
    worst = float(np.mean([_final(r.worst_acc) for r in reference]))
    avg = float(np.mean([_final(r.avg_acc) for r in reference]))
    return TARGET_FRACTION * worst, TARGET_FRACTION * avg


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its 95 % half-width (NaN with one seed), from ``n`` of ``of`` seeds.

    When some seeds have no value (a target never reached) there is no mean: ``n < of``.
    """

    mean: float
    half: float
    n: int
    of: int

    @classmethod
    def of_values(cls, values: Sequence[float]) -> Estimate:
        array = np.asarray(values, dtype=np.float64)
        finite = np.isfinite(array)
        if array.size == 0 or not finite.all():
            return cls(math.nan, math.nan, int(finite.sum()), array.size)
        mean, half = t_interval(array)
        return cls(float(mean), float(half), array.size, array.size)

    @property
    def complete(self) -> bool:
        return self.of > 0 and self.n == self.of


@dataclass(frozen=True)
class TimeSummary:
    """A curve's numbers on the simulated clock, over its seeds.

    Attributes
    ----------
    variant : str
    n_seeds : int
    worst_time, avg_time : Estimate
        Simulated seconds to reach the worst- and average-accuracy targets.
    worst_ratio, avg_ratio, total_ratio : Estimate
        The same times, and the total time, over the reference's, paired by seed.
    total_time, client_time : Estimate
        Simulated seconds of the whole run, and client-seconds spent.
    round_time : float
        Mean simulated seconds per round (mean over seeds).
    final_worst, final_avg : Estimate
        Final worst and average accuracy.
    """

    variant: str
    n_seeds: int
    worst_time: Estimate
    avg_time: Estimate
    worst_ratio: Estimate
    avg_ratio: Estimate
    total_ratio: Estimate
    total_time: Estimate
    client_time: Estimate
    round_time: float
    final_worst: Estimate
    final_avg: Estimate


def _paired(
    runs: Sequence[RunRecord], reference: Sequence[RunRecord], value: Callable[[RunRecord], float]
) -> Estimate:
    """value(run) / value(reference run of the same seed), over the seeds both have."""
    by_seed = {r.seed: value(r) for r in reference}
    ratios = [value(r) / by_seed[r.seed] if by_seed.get(r.seed, 0.0) else math.nan for r in runs]
    return Estimate.of_values(ratios)


def time_summaries(
    records: Sequence[RunRecord], targets: tuple[float, float] | None = None
) -> list[TimeSummary]:
    """One `TimeSummary` per curve (``targets`` default: `default_targets`)."""
    if not is_timed(records):
        raise ValueError("time summaries need runs with a simulated clock ([sim.system])")
    worst_target, avg_target = default_targets(records) if targets is None else targets

    def to_worst(r: RunRecord) -> float:
        return time_to_reach(_clock(r), r.worst_acc, worst_target)

    def to_avg(r: RunRecord) -> float:
        return time_to_reach(_clock(r), r.avg_acc, avg_target)

    groups = curves(records)
    reference = next(iter(groups.values()))
    out = []
    for variant, runs in groups.items():
        rounds = [max(1, int(r.eval_rounds[-1])) for r in runs]  # the last evaluation is at T
        out.append(
            TimeSummary(
                variant=variant,
                n_seeds=len(runs),
                worst_time=Estimate.of_values([to_worst(r) for r in runs]),
                avg_time=Estimate.of_values([to_avg(r) for r in runs]),
                worst_ratio=_paired(runs, reference, to_worst),
                avg_ratio=_paired(runs, reference, to_avg),
                total_ratio=_paired(runs, reference, _total),
                total_time=Estimate.of_values([_total(r) for r in runs]),
                client_time=Estimate.of_values([_client(r) for r in runs]),
                round_time=float(
                    np.mean([_total(r) / n for r, n in zip(runs, rounds, strict=True)])
                ),
                final_worst=Estimate.of_values([_final(r.worst_acc) for r in runs]),
                final_avg=Estimate.of_values([_final(r.avg_acc) for r in runs]),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# the report section


def _time(e: Estimate, scale: float) -> str:
    if not e.complete:
        return f"reached by {e.n} of {e.of} seeds"
    text = f"{e.mean / scale:,.1f}"
    return text if math.isnan(e.half) else f"{text} ± {e.half / scale:,.1f}"


def _ratio(e: Estimate) -> str:
    if not e.complete:
        return "—"
    return f"{e.mean:.2f}×" if math.isnan(e.half) else f"{e.mean:.2f} ± {e.half:.2f}×"


def _acc(e: Estimate) -> str:
    text = f"{100 * e.mean:.2f}%"
    return text if math.isnan(e.half) else f"{text} ± {100 * e.half:.2f}"


def time_section(
    records: Sequence[RunRecord],
    figure: str | None = None,
    targets: tuple[float, float] | None = None,
) -> list[str]:
    """The report's *time to accuracy* section, as markdown lines.

    ``figure`` is the file name of the accuracy-against-time figure, when one was drawn.
    """
    worst_target, avg_target = default_targets(records) if targets is None else targets
    summaries = time_summaries(records, (worst_target, avg_target))
    hours = max(s.total_time.mean for s in summaries if s.total_time.complete) >= 36_000
    unit, scale = ("h", 3600.0) if hours else ("s", 1.0)
    labels = variant_labels(records)
    ref = labels.get(summaries[0].variant, summaries[0].variant)
    out = ["## Time to accuracy on the simulated clock", ""]
    out.append(
        "Each round is timed from the clients' devices: a probe phase (the slowest probed client; "
        "an update probe is a full local round, a loss probe a download, one minibatch's forward "
        "pass and a float32 back) then a training phase that ends when the last selected client "
        "answers, or at the deadline, or — with over-commitment — once the first m updates are "
        "in. Evaluations take no simulated time. Time to a target: the simulated time of the "
        "first evaluation that reaches it, mean ± 95% t-interval over seeds (none when a seed "
        "never reached it). Ratios are to the reference curve, paired by seed (the methods of "
        "a seed share its devices), then mean ± 95% t-interval. Targets: "
        f"{100 * TARGET_FRACTION:.0f}% of the reference's final accuracy unless set — worst "
        f"accuracy {100 * worst_target:.2f}%, average accuracy {100 * avg_target:.2f}%. "
        f"Reference: {ref}."
    )
    if worst_target <= 0.0:
        out.append(
            "The reference's final worst accuracy is 0: the worst-accuracy target is reached at "
            "once and its times say nothing."
        )
    out.append("")
    if figure is not None:
        out += [f"![accuracy against simulated time]({figure})", ""]
    out += [
        f"| Curve | seeds | to worst ≥ {100 * worst_target:.1f}% ({unit}) | ratio "
        f"| to average ≥ {100 * avg_target:.1f}% ({unit}) | ratio | total time ({unit}) "
        f"| ratio | mean round (s) | client time ({unit}) | final worst | final average |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        out.append(
            f"| {labels.get(s.variant, s.variant)} | {s.n_seeds} | {_time(s.worst_time, scale)} | {_ratio(s.worst_ratio)} "
            f"| {_time(s.avg_time, scale)} | {_ratio(s.avg_ratio)} "
            f"| {_time(s.total_time, scale)} | {_ratio(s.total_ratio)} | {s.round_time:,.2f} "
            f"| {_time(s.client_time, scale)} | {_acc(s.final_worst)} | {_acc(s.final_avg)} |"
        )
    out.append("")
    return out
