"""Our results beside the paper's (Sec. 6), and the paper's claims checked against the data.

Everything here works on :class:`RunRecord` values — plain numbers of finished runs — so the same
code serves a fresh run and a results folder read back from disk, and tests can feed it
constructed numbers. Each claim of Sec. 6 is a computed comparison whose verdict follows from the
numbers shown next to it; nothing is decided in advance.

"Accuracy at the end of training" is the mean of a run's last ``tail_fraction`` of evaluations
(default the last 10 %), which is steadier than the single last evaluation; the mean and 95 %
t-interval are then taken over seeds.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtrit

__all__ = [
    "FIGURE_SERIES",
    "METHOD_LABELS",
    "PAPER_TABLE1",
    "PAPER_TV",
    "TABLE1_SERIES",
    "Claim",
    "ClaimTolerances",
    "ReportContext",
    "RunRecord",
    "Series",
    "SeriesSummary",
    "evaluate_claims",
    "select_runs",
    "summarize",
    "t_interval",
    "table1_rows",
    "write_report",
    "write_table1",
]

FloatArray = NDArray[np.float64]

METHOD_LABELS: dict[str, str] = {
    "uniform": "Uniform",
    "powerofchoice": "PowerOfChoice",
    "ocs": "OCS",
    "divfl": "DivFL",
    "staticdpp": "StaticDPP",
    "adcs": "ADCS",
}
"""Display names of the methods, as the paper writes them."""

PAPER_TV: dict[str, float] = {
    "uniform": 0.0019,
    "ocs": 0.2241,
    "powerofchoice": 0.1934,
    "adcs": 0.1364,
}
"""TV distance of the group shares to uniform, paper Sec. 6.3."""

PAPER_TABLE1: dict[str, tuple[float, ...]] = {
    "uniform": (0.1006, 0.0998, 0.0997, 0.1000, 0.0994, 0.1006, 0.0993, 0.1006, 0.1001, 0.0999),
    "ocs": (0.1257, 0.0433, 0.1661, 0.1004, 0.1666, 0.0583, 0.1653, 0.0477, 0.0733, 0.0533),
    "powerofchoice": (
        0.1042, 0.0441, 0.1444, 0.0881, 0.1388, 0.1417, 0.1643, 0.0644, 0.0641, 0.0460,
    ),
    "adcs": (0.0952, 0.0636, 0.1127, 0.0843, 0.1032, 0.1641, 0.1564, 0.0775, 0.0821, 0.0609),
}  # fmt: skip
"""Paper Table 1: share of selection slots of groups 0–9 per method."""

TIME_FIGURE = "time.png"
"""Accuracy against rounds and simulated time, drawn for runs with a system profile."""

PAPER_ROUNDS = 20_000
FULL_SEEDS = 5


# ---------------------------------------------------------------------------------------------
# records and series


@dataclass(frozen=True, eq=False)
class RunRecord:
    """The numbers of one finished run.

    Attributes
    ----------
    run_id : str
        Unique within an experiment; ``variant`` plus the seed.
    variant : str
        The run's method and hyperparameters without the seed (runs of one curve share it).
    method : str
        A key of :data:`adcs.schedulers.SCHEDULERS`.
    seed : int
    theta, refresh_every : float, int or None
        ADCS's θ and R; ``None`` for methods without them.
    params : dict
        Every hyperparameter of the scheduler (JSON-able).
    eval_rounds : ndarray of shape (n_evals,)
    worst_acc, avg_acc, test_loss : ndarray of shape (n_evals,)
        Minimum and mean over clients of test accuracy, and global test loss.
    group_share : ndarray of shape (n_groups,)
        Share of selection slots each group received (Table 1).
    tv_to_uniform : float
        TV distance of ``group_share`` to what uniform selection gives (the groups' real sizes).
    client_updates, loss_evals : int
        Client computations spent (see the simulator's accounting).
    wall_s : float
    dropped : int
        Selected clients that dropped out (did not return their update).
    mean_available : float
        Mean number of clients available per round.
    eval_clock : ndarray of shape (n_evals,) or None
        Simulated seconds at each evaluation (runs with a system profile; else None).
    total_time, client_time : float or None
        Simulated seconds of the whole run, and client-seconds spent (with a system profile).
    """

    run_id: str
    variant: str
    method: str
    seed: int
    theta: float | None
    refresh_every: int | None
    params: Mapping[str, Any]
    eval_rounds: NDArray[np.int64]
    worst_acc: FloatArray
    avg_acc: FloatArray
    test_loss: FloatArray
    group_share: FloatArray
    tv_to_uniform: float
    client_updates: int
    loss_evals: int
    wall_s: float
    dropped: int = 0
    mean_available: float = math.nan
    eval_clock: FloatArray | None = None
    total_time: float | None = None
    client_time: float | None = None


@dataclass(frozen=True)
class Series:
    """Which runs make one curve (or one table row): a method, and θ/R for ADCS."""

    label: str
    method: str
    theta: float | None = None
    refresh_every: int | None = None

    def matches(self, record: RunRecord) -> bool:
        if record.method != self.method:
            return False
        if self.theta is not None and (
            record.theta is None or not math.isclose(record.theta, self.theta, abs_tol=1e-9)
        ):
            return False
        return self.refresh_every is None or record.refresh_every == self.refresh_every


ADCS_MAIN = Series("ADCS (θ=0.8, R=20)", "adcs", 0.8, 20)
_BASELINES = tuple(
    Series(METHOD_LABELS[m], m) for m in ("uniform", "powerofchoice", "ocs", "divfl", "staticdpp")
)
FIGURE_SERIES: dict[str, tuple[Series, ...]] = {
    "fig1": (*_BASELINES, ADCS_MAIN),
    "fig2": (
        Series("Uniform", "uniform"),
        *(Series(f"ADCS θ={t}", "adcs", t, 20) for t in (0.2, 0.4, 0.6, 0.8, 1.0)),
    ),
    "fig3": tuple(Series(f"ADCS R={r}", "adcs", 0.8, r) for r in (1, 5, 20, 100, 500)),
}
"""The curves of the paper's Figures 1–3."""

TABLE1_SERIES: tuple[Series, ...] = FIGURE_SERIES["fig1"]
"""Rows of Table 1 (the runs of Fig. 1; the paper lists Uniform, OCS, PowerOfChoice, ADCS)."""


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
        Mean over seeds of the tail-mean worst / average accuracy.
    worst_half, avg_half : float
        95 % t-interval half-widths (NaN with one seed).
    worst_tail_std : float
        Mean over seeds of the standard deviation of worst accuracy over the tail (fluctuation).
    group_share : ndarray of shape (n_groups,)
        Mean over seeds of the share of selection slots per group.
    tv : float
        Mean over seeds of each run's TV distance to uniform selection — against its own groups'
        real sizes (:func:`adcs.sim.metrics.tv_to_uniform`, the one definition).
    client_updates, loss_evals : float
        Mean over seeds.
    tail_rounds : tuple of int
        First and last evaluation round of the tail.
    """

    series: Series
    n_seeds: int
    worst: float
    worst_half: float
    avg: float
    avg_half: float
    worst_tail_std: float
    group_share: FloatArray
    tv: float
    client_updates: float
    loss_evals: float
    tail_rounds: tuple[int, int]

    @property
    def label(self) -> str:
        return self.series.label


def summarize(
    records: Sequence[RunRecord], series: Series, tail_fraction: float = 0.1
) -> SeriesSummary | None:
    """Summarise one series; ``None`` when no run matches."""
    runs = select_runs(records, series)
    if not runs:
        return None
    n_evals = min(r.worst_acc.size for r in runs)
    k = max(1, math.ceil(tail_fraction * n_evals))
    worst = np.array([r.worst_acc[:n_evals][-k:] for r in runs])
    avg = np.array([r.avg_acc[:n_evals][-k:] for r in runs])
    worst_mean, worst_half = t_interval(worst.mean(axis=1))
    avg_mean, avg_half = t_interval(avg.mean(axis=1))
    share = np.mean([r.group_share for r in runs], axis=0)
    rounds = runs[0].eval_rounds[:n_evals]
    return SeriesSummary(
        series=series,
        n_seeds=len(runs),
        worst=float(worst_mean),
        worst_half=float(worst_half),
        avg=float(avg_mean),
        avg_half=float(avg_half),
        worst_tail_std=float(worst.std(axis=1).mean()),
        group_share=share,
        tv=float(np.mean([r.tv_to_uniform for r in runs])),
        client_updates=float(np.mean([r.client_updates for r in runs])),
        loss_evals=float(np.mean([r.loss_evals for r in runs])),
        tail_rounds=(int(rounds[-k]), int(rounds[-1])),
    )


# ---------------------------------------------------------------------------------------------
# claims


@dataclass(frozen=True)
class ClaimTolerances:
    """How the paper's qualitative words are read as numbers (accuracy as a fraction).

    Attributes
    ----------
    competitive : float
        "Competitive average accuracy": within this of the best other method.
    much_lower : float
        "Significantly low worst accuracy": at least this below every other method.
    same : float
        "Almost identical": within this (both worst and average accuracy).
    tail_fraction : float
        Share of the last evaluations averaged into "accuracy at the end of training".
    """

    competitive: float = 0.01
    much_lower: float = 0.05
    same: float = 0.01
    tail_fraction: float = 0.1

    def __post_init__(self) -> None:
        for name in ("competitive", "much_lower", "same"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if not 0.0 < self.tail_fraction <= 1.0:
            raise ValueError(f"tail_fraction must be in (0, 1], got {self.tail_fraction!r}")


Verdict = Literal["holds", "does not hold", "not evaluated"]


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims, checked against our numbers.

    Attributes
    ----------
    key : str
        Short identifier (stable; tests and tools refer to it).
    where : str
        Where the paper makes it.
    statement : str
        The claim, in the paper's words where possible.
    test : str
        The comparison computed to check it.
    verdict : {"holds", "does not hold", "not evaluated"}
    evidence : str
        The numbers the verdict follows from.
    """

    key: str
    where: str
    statement: str
    test: str
    verdict: Verdict
    evidence: str


def _pct(x: float) -> str:
    return f"{100.0 * x:.2f}%"


def _pm(mean: float, half: float) -> str:
    return _pct(mean) if math.isnan(half) else f"{_pct(mean)} ± {100.0 * half:.2f}"


def _within_noise(diff: float, *halves: float) -> str:
    if any(math.isnan(h) for h in halves):
        return ""
    if abs(diff) <= math.sqrt(sum(h * h for h in halves)):
        return " (the difference is within the seeds' 95% intervals)"
    return ""


@dataclass(frozen=True)
class _ClaimDef:
    key: str
    where: str
    statement: str
    test: str
    needs: tuple[str, ...]
    check: Callable[[dict[str, SeriesSummary], ClaimTolerances], tuple[bool, str]]


def _fig1_others(s: dict[str, SeriesSummary]) -> list[SeriesSummary]:
    return [s[k] for k in ("uniform", "powerofchoice", "ocs", "divfl", "staticdpp") if k in s]


def _check_adcs_best_worst(s: dict[str, SeriesSummary], _: ClaimTolerances) -> tuple[bool, str]:
    adcs, others = s["adcs"], _fig1_others(s)
    best = max(others, key=lambda o: o.worst)
    diff = adcs.worst - best.worst
    text = (
        f"ADCS worst {_pm(adcs.worst, adcs.worst_half)}; best other: {best.label} "
        f"{_pm(best.worst, best.worst_half)}; difference {100 * diff:+.2f} points"
        + _within_noise(diff, adcs.worst_half, best.worst_half)
    )
    return diff > 0, text


def _check_adcs_competitive(s: dict[str, SeriesSummary], tol: ClaimTolerances) -> tuple[bool, str]:
    adcs, others = s["adcs"], _fig1_others(s)
    best = max(others, key=lambda o: o.avg)
    diff = adcs.avg - best.avg
    return diff >= -tol.competitive, (
        f"ADCS average {_pm(adcs.avg, adcs.avg_half)}; best other: {best.label} "
        f"{_pm(best.avg, best.avg_half)}; difference {100 * diff:+.2f} points "
        f"(tolerance −{100 * tol.competitive:.1f})"
    )


def _check_static_low(s: dict[str, SeriesSummary], tol: ClaimTolerances) -> tuple[bool, str]:
    static = s["staticdpp"]
    others = [o for o in _fig1_others(s) if o.series.method != "staticdpp"]
    if "adcs" in s:
        others.append(s["adcs"])
    lowest = min(others, key=lambda o: o.worst)
    gap = lowest.worst - static.worst
    return gap >= tol.much_lower, (
        f"StaticDPP worst {_pm(static.worst, static.worst_half)}; lowest other: {lowest.label} "
        f"{_pm(lowest.worst, lowest.worst_half)}; gap {100 * gap:.2f} points "
        f"(needed ≥ {100 * tol.much_lower:.1f})"
    )


def _check_baselines_beat_uniform(
    s: dict[str, SeriesSummary], _: ClaimTolerances
) -> tuple[bool, str]:
    uni = s["uniform"]
    parts, ok = [], True
    for key in ("ocs", "powerofchoice", "divfl"):
        diff = s[key].worst - uni.worst
        ok = ok and diff > 0
        parts.append(f"{s[key].label} {_pct(s[key].worst)} ({100 * diff:+.2f})")
    return ok, f"Uniform worst {_pct(uni.worst)}; " + ", ".join(parts)


def _check_theta02_below_uniform(
    s: dict[str, SeriesSummary], _: ClaimTolerances
) -> tuple[bool, str]:
    low, uni = s["adcs_theta0.2"], s["uniform"]
    diff = low.worst - uni.worst
    return diff < 0, (
        f"ADCS θ=0.2 worst {_pm(low.worst, low.worst_half)}; Uniform "
        f"{_pm(uni.worst, uni.worst_half)}; difference {100 * diff:+.2f} points"
        + _within_noise(diff, low.worst_half, uni.worst_half)
    )


def _check_some_theta_beats_all(
    s: dict[str, SeriesSummary], _: ClaimTolerances
) -> tuple[bool, str]:
    bench = _fig1_others(s)
    best_worst = max(bench, key=lambda o: o.worst)
    best_avg = max(bench, key=lambda o: o.avg)
    winners, parts = [], []
    for theta in (0.2, 0.4, 0.6, 0.8, 1.0):
        summ = s.get(f"adcs_theta{theta}")
        if summ is None:
            continue
        parts.append(f"θ={theta}: {_pct(summ.worst)} / {_pct(summ.avg)}")
        if summ.worst > best_worst.worst and summ.avg > best_avg.avg:
            winners.append(f"θ={theta}")
    text = (
        f"best benchmark worst: {best_worst.label} {_pct(best_worst.worst)}, best benchmark "
        f"average: {best_avg.label} {_pct(best_avg.avg)}; ADCS worst / average: "
        + "; ".join(parts)
        + (f"; better on both: {', '.join(winners)}" if winners else "; none better on both")
    )
    return bool(winners), text


def _check_small_r_same(s: dict[str, SeriesSummary], tol: ClaimTolerances) -> tuple[bool, str]:
    base = s["adcs_R1"]
    ok, parts = True, []
    for r in (5, 20):
        summ = s.get(f"adcs_R{r}")
        if summ is None:
            continue
        dw, da = summ.worst - base.worst, summ.avg - base.avg
        ok = ok and abs(dw) <= tol.same and abs(da) <= tol.same
        parts.append(f"R={r}: worst {100 * dw:+.2f}, average {100 * da:+.2f} points")
    return ok, (
        f"R=1: worst {_pct(base.worst)}, average {_pct(base.avg)}; vs R=1: "
        + "; ".join(parts)
        + f" (tolerance ±{100 * tol.same:.1f})"
    )


def _largest_r(s: dict[str, SeriesSummary]) -> SeriesSummary:
    return next(s[f"adcs_R{r}"] for r in (500, 100) if f"adcs_R{r}" in s)


def _check_large_r_worse(s: dict[str, SeriesSummary], tol: ClaimTolerances) -> tuple[bool, str]:
    base, large = s["adcs_R1"], _largest_r(s)
    diff = large.worst - base.worst
    return diff < -tol.same, (
        f"{large.label} worst {_pm(large.worst, large.worst_half)}; ADCS R=1 "
        f"{_pm(base.worst, base.worst_half)}; difference {100 * diff:+.2f} points "
        f"(needed < −{100 * tol.same:.1f})"
    )


def _check_large_r_fluctuates(s: dict[str, SeriesSummary], _: ClaimTolerances) -> tuple[bool, str]:
    base, large = s["adcs_R1"], _largest_r(s)
    return large.worst_tail_std > base.worst_tail_std, (
        f"std of worst accuracy over rounds {large.tail_rounds[0]}–{large.tail_rounds[1]}: "
        f"{large.label} {100 * large.worst_tail_std:.2f} points, ADCS R=1 "
        f"{100 * base.worst_tail_std:.2f} points"
    )


def _check_tv_order(s: dict[str, SeriesSummary], _: ClaimTolerances) -> tuple[bool, str]:
    order = ("uniform", "adcs", "powerofchoice", "ocs")
    tvs = [s[k].tv for k in order]
    ok = all(a < b for a, b in itertools.pairwise(tvs))
    measured = " < ".join(
        f"{s[k].label} {s[k].tv:.4f}" for k in sorted(order, key=lambda k: s[k].tv)
    )
    paper = " < ".join(f"{METHOD_LABELS[k]} {PAPER_TV[k]:.4f}" for k in order)
    return ok, f"measured: {measured} (paper: {paper})"


_CLAIMS: tuple[_ClaimDef, ...] = (
    _ClaimDef(
        "adcs_highest_worst", "Fig. 1, Sec. 6.1",
        "ADCS provides the highest worst test accuracy.",
        "end-of-training worst accuracy of ADCS (θ=0.8, R=20) above every other method's",
        ("adcs", "uniform", "powerofchoice", "ocs", "divfl", "staticdpp"),
        _check_adcs_best_worst,
    ),
    _ClaimDef(
        "adcs_competitive_avg", "Fig. 1, Sec. 6.1",
        "ADCS maintains competitive average test accuracy.",
        "ADCS average accuracy at least the best other method's minus the tolerance",
        ("adcs", "uniform", "powerofchoice", "ocs", "divfl", "staticdpp"),
        _check_adcs_competitive,
    ),
    _ClaimDef(
        "staticdpp_much_lower_worst", "Fig. 1, Sec. 6.1",
        "StaticDPP has significantly low worst test accuracy.",
        "StaticDPP worst accuracy below every other method's by at least the tolerance",
        ("staticdpp", "uniform", "powerofchoice", "ocs", "divfl"),
        _check_static_low,
    ),
    _ClaimDef(
        "baselines_beat_uniform_worst", "Fig. 1, Sec. 6.1",
        "OCS, PowerOfChoice and DivFL achieve better worst test accuracy than Uniform.",
        "worst accuracy of each of OCS, PowerOfChoice, DivFL above Uniform's",
        ("uniform", "ocs", "powerofchoice", "divfl"),
        _check_baselines_beat_uniform,
    ),
    _ClaimDef(
        "theta02_below_uniform_worst", "Fig. 2, Sec. 6.2",
        "With a poorly chosen θ, e.g. θ = 0.2, the worst test accuracy is worse than Uniform's.",
        "worst accuracy of ADCS θ=0.2 (R=20) below Uniform's",
        ("adcs_theta0.2", "uniform"),
        _check_theta02_below_uniform,
    ),
    _ClaimDef(
        "some_theta_beats_benchmarks", "Fig. 2, Sec. 6.2",
        "With a properly chosen θ both worst and average accuracy improve over the benchmarks.",
        "some θ with worst and average accuracy above the best benchmark's (each taken separately)",
        ("uniform", "powerofchoice", "ocs", "divfl", "staticdpp"),
        _check_some_theta_beats_all,
    ),
    _ClaimDef(
        "small_r_same_as_r1", "Fig. 3, Sec. 6.2",
        "With R up to 20 the performance of ADCS remains almost identical to that of R = 1.",
        "worst and average accuracy for R=5 and R=20 within the tolerance of R=1's",
        ("adcs_R1",),
        _check_small_r_same,
    ),
    _ClaimDef(
        "large_r_deteriorates", "Fig. 3, Sec. 6.2",
        "When R becomes too large the worst-off client's accuracy deteriorates.",
        "worst accuracy at the largest R (500, else 100) below R=1's by more than the tolerance",
        ("adcs_R1",),
        _check_large_r_worse,
    ),
    _ClaimDef(
        "large_r_fluctuates", "Fig. 3, Sec. 6.2",
        "When R becomes too large the worst-off client's accuracy fluctuates.",
        "std over the tail of the worst-accuracy curve larger at the largest R than at R=1",
        ("adcs_R1",),
        _check_large_r_fluctuates,
    ),
    _ClaimDef(
        "tv_order", "Table 1, Sec. 6.3",
        "Selection bias (TV to uniform): Uniform < ADCS < PowerOfChoice < OCS.",
        "TV distance of the mean group shares to uniform, in that order",
        ("uniform", "adcs", "powerofchoice", "ocs"),
        _check_tv_order,
    ),
)  # fmt: skip


def _claim_series() -> dict[str, Series]:
    """Named series the claims refer to."""
    named = {s.method: s for s in _BASELINES}
    named["adcs"] = ADCS_MAIN
    for s in FIGURE_SERIES["fig2"][1:]:
        named[f"adcs_theta{s.theta}"] = s
    for s in FIGURE_SERIES["fig3"]:
        named[f"adcs_R{s.refresh_every}"] = s
    return named


def evaluate_claims(
    records: Sequence[RunRecord], tolerances: ClaimTolerances | None = None
) -> list[Claim]:
    """Check each of the paper's Sec. 6 claims against the runs in ``records``.

    A claim whose runs are missing is "not evaluated" and says which are missing.
    """
    tol = tolerances or ClaimTolerances()
    summaries: dict[str, SeriesSummary] = {}
    for key, series in _claim_series().items():
        summ = summarize(records, series, tol.tail_fraction)
        if summ is not None:
            summaries[key] = summ
    claims = []
    for d in _CLAIMS:
        missing = [k for k in d.needs if k not in summaries]
        if d.key.startswith("small_r") and not any(f"adcs_R{r}" in summaries for r in (5, 20)):
            missing.append("adcs_R5 or adcs_R20")
        if d.key.startswith("large_r") and not any(f"adcs_R{r}" in summaries for r in (100, 500)):
            missing.append("adcs_R100 or adcs_R500")
        if d.key == "some_theta_beats_benchmarks" and not any(
            k.startswith("adcs_theta") and k != "adcs_theta0.8" for k in summaries
        ):
            missing.append("the θ sweep of Fig. 2")
        if missing:
            claims.append(
                Claim(d.key, d.where, d.statement, d.test, "not evaluated",
                      "runs missing: " + ", ".join(missing))
            )  # fmt: skip
            continue
        ok, evidence = d.check(summaries, tol)
        verdict: Verdict = "holds" if ok else "does not hold"
        claims.append(Claim(d.key, d.where, d.statement, d.test, verdict, evidence))
    return claims


# ---------------------------------------------------------------------------------------------
# Table 1


def table1_rows(records: Sequence[RunRecord], tail_fraction: float = 0.1) -> list[dict[str, Any]]:
    """Mean group shares and TV per method (the runs of Fig. 1), with the paper's beside.

    Returns
    -------
    list of dict
        Keys ``method``, ``label``, ``n_seeds``, ``share`` (list, one per group), ``tv``,
        ``paper_share`` (list or None), ``paper_tv`` (float or None), ``max_abs_share_diff``.
    """
    rows = []
    for series in TABLE1_SERIES:
        summ = summarize(records, series, tail_fraction)
        if summ is None:
            continue
        paper = PAPER_TABLE1.get(series.method)
        diff = None
        if paper is not None and len(paper) == summ.group_share.size:
            diff = float(np.max(np.abs(summ.group_share - np.asarray(paper))))
        rows.append(
            {
                "method": series.method,
                "label": METHOD_LABELS[series.method],
                "n_seeds": summ.n_seeds,
                "share": [float(x) for x in summ.group_share],
                "tv": summ.tv,
                "paper_share": list(paper) if paper is not None else None,
                "paper_tv": PAPER_TV.get(series.method),
                "max_abs_share_diff": diff,
            }
        )
    return rows


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def table1_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Table 1 as markdown: our shares per group, TV, and the paper's TV beside."""
    if not rows:
        return "_No runs of the Table 1 methods._\n"
    n_groups = len(rows[0]["share"])
    head = ["Method", *(f"Group {k}" for k in range(n_groups)), "TV", "TV (paper)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["label"], *(_fmt(x) for x in row["share"]), _fmt(row["tv"])]
        cells.append(_fmt(row["paper_tv"]))
        lines.append("| " + " | ".join(cells) + " |")
    paper_rows = [r for r in rows if r["paper_share"] is not None]
    if paper_rows:
        lines += ["", "The paper's Table 1, for comparison:", ""]
        lines += ["| " + " | ".join(head[:-2]) + " | TV | max abs diff to ours |"]
        lines.append("|" + "---|" * (len(head)))
        for row in paper_rows:
            cells = [f"{row['label']} (paper)", *(_fmt(x) for x in row["paper_share"])]
            cells += [_fmt(row["paper_tv"]), _fmt(row["max_abs_share_diff"])]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table1(folder: Path, records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """Write ``table1.csv`` (tidy: method, group, share, paper_share) and ``table1.md``."""
    rows = table1_rows(records)
    with (folder / "table1.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["method", "group", "share", "paper_share", "tv", "paper_tv", "n_seeds"])
        for row in rows:
            for k, share in enumerate(row["share"]):
                paper = row["paper_share"][k] if row["paper_share"] is not None else ""
                paper_tv = row["paper_tv"] if row["paper_tv"] is not None else ""
                writer.writerow(
                    [row["method"], k, share, paper, row["tv"], paper_tv, row["n_seeds"]]
                )
    (folder / "table1.md").write_text(
        "# Table 1: share of selection slots per group, and TV distance to uniform\n\n"
        + table1_markdown(rows)
    )
    return rows


# ---------------------------------------------------------------------------------------------
# report.md


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
    quick : bool
        Quick settings were used.
    figures : tuple of str
        File names of the figures written beside the report.
    wall_s : float
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

    @property
    def indicative_only(self) -> list[str]:
        """Reasons the verdicts are indicative only (empty for a full reproduction)."""
        reasons = []
        if self.is_subset:
            reasons.append("it used the small Fashion-MNIST subset shipped with the package")
        if self.quick:
            reasons.append("it used the quick settings")
        if self.rounds < PAPER_ROUNDS:
            reasons.append(f"it ran T = {self.rounds} rounds (the paper: {PAPER_ROUNDS})")
        if len(self.seeds) < FULL_SEEDS:
            reasons.append(f"it used {len(self.seeds)} seed(s) (the full setting: {FULL_SEEDS})")
        return reasons


def _series_table(summaries: Sequence[SeriesSummary]) -> str:
    lines = [
        "| Series | seeds | worst acc. | average acc. | TV to uniform | client updates "
        "| loss evals |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.label} | {s.n_seeds} | {_pm(s.worst, s.worst_half)} | {_pm(s.avg, s.avg_half)} "
            f"| {s.tv:.4f} | {s.client_updates:,.0f} | {s.loss_evals:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def write_report(
    path: Path,
    records: Sequence[RunRecord],
    context: ReportContext,
    tolerances: ClaimTolerances | None = None,
) -> list[Claim]:
    """Write ``report.md``: settings, the claims with verdicts, the per-figure numbers, Table 1.

    Returns the evaluated claims.
    """
    tol = tolerances or ClaimTolerances()
    claims = evaluate_claims(records, tol)
    out = [f"# ADCS reproduction report: {context.name}", ""]
    out.append(
        f"Fashion-MNIST ({context.data_source}), multinomial logistic regression, "
        f"N = {context.n_clients} clients, m = {context.m}, T = {context.rounds} rounds, "
        f"evaluated every {context.eval_every} rounds, seeds {list(context.seeds)}"
        + ("" if math.isnan(context.wall_s) else f"; wall time {context.wall_s:.1f} s")
        + "."
    )
    out.append("")
    reasons = context.indicative_only
    if reasons:
        out.append(
            "**The verdicts below are indicative only**, because "
            + "; ".join(reasons)
            + ". The paper's claims concern the full setting."
        )
        out.append("")
    out.extend(context.notes)
    if context.notes:
        out.append("")
    out.append(
        "Accuracy at the end of training is the mean of each run's last "
        f"{100 * tol.tail_fraction:.0f}% of evaluations, then mean ± 95% t-interval over seeds "
        "(no interval with one seed). Tolerances: competitive = "
        f"{100 * tol.competitive:.1f} points, much lower = {100 * tol.much_lower:.1f} points, "
        f"almost identical = {100 * tol.same:.1f} points."
    )
    out += ["", "## The paper's claims, checked", ""]
    out += ["| Claim | Where | Test | Our numbers | Verdict |", "|---|---|---|---|---|"]
    for c in claims:
        verdict = {"holds": "**holds**", "does not hold": "**does not hold**"}.get(
            c.verdict, c.verdict
        )
        out.append(f"| {c.statement} | {c.where} | {c.test} | {c.evidence} | {verdict} |")
    out.append("")
    for fig, series in FIGURE_SERIES.items():
        summaries = [s for s in (summarize(records, x, tol.tail_fraction) for x in series) if s]
        if not summaries:
            continue
        out += [f"## {fig.replace('fig', 'Figure ')}", ""]
        if f"{fig}.png" in context.figures:
            out += [f"![{fig}]({fig}.png)", ""]
        out.append(_series_table(summaries))
    rows = table1_rows(records, tol.tail_fraction)
    if rows:
        out += ["## Table 1: selection bias", "", table1_markdown(rows)]
    others = [f for f in context.figures if f.removesuffix(".png") not in FIGURE_SERIES]
    timed = bool(records) and all(r.eval_clock is not None for r in records)
    for fig in others:
        if not (timed and fig == TIME_FIGURE):
            out += [f"![{fig}]({fig})", ""]
    if timed:
        from adcs.experiments.timing import time_section

        out += time_section(records, TIME_FIGURE if TIME_FIGURE in context.figures else None)
    path.write_text("\n".join(out).rstrip() + "\n")
    return claims
