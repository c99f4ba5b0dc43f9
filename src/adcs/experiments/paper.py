"""The ADCS paper's experiment (Sec. 6): its constants, its figures' series, its claims, its report.

The generic experiment layer (`adcs.experiments.analysis.report`, `adcs.experiments.analysis.figures`,
`adcs.experiments.run.runner`) knows nothing of the paper; everything the paper says — the
setting of its experiment, the curves of Figures 1–3, Table 1's numbers, the claims of Sec. 6 and
how they read as numbers — is here. The runner uses this module's report only for a configuration
of the paper's setting (`differences` is empty); any other configuration gets the neutral
report. Each claim is a computed comparison whose verdict follows from the numbers shown next to
it; nothing is decided in advance.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from adcs.experiments.analysis.outputs import Study, StudyReport, register_study
from adcs.experiments.analysis.report import (
    ReportContext,
    RunRecord,
    Series,
    SeriesSummary,
    curve_series,
    fmt,
    method_label,
    pct,
    pm,
    report_body,
    select_runs,
    series_table,
    summaries,
    summarize,
    with_every_variant,
)
from adcs.experiments.config import ExperimentConfig

__all__ = [
    "CLAIMS_NEED",
    "CLAIM_MIN_ROUNDS",
    "CLAIM_MIN_SEEDS",
    "FIGURES",
    "FIGURE_SERIES",
    "PAPER_METHODS",
    "PAPER_OUTPUTS",
    "PAPER_ROUNDS",
    "PAPER_TABLE1",
    "PAPER_TV",
    "TABLE1_SERIES",
    "Claim",
    "ClaimTolerances",
    "differences",
    "evaluate_claims",
    "figure_series",
    "indicative_reasons",
    "table1_rows",
    "untested_reasons",
    "write_report",
    "write_table1",
]

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

PAPER_ROUNDS = 20_000
FULL_SEEDS = 5
PAPER_METHODS = ("uniform", "powerofchoice", "ocs", "divfl", "staticdpp", "adcs")
"""The six methods of the paper's experiment (Sec. 6), in its order."""

PAPER_SETTING: dict[str, Any] = {
    "m": 18,
    "data.dataset": "fashion-mnist",
    "data.partition": "paper_groups",
    "data.n_groups": 10,
    "data.clients_per_group": 3,
    "data.dominance": 1.0,
    "data.train_per_client": None,
    "data.test_per_client": None,
    "sim.local_steps": 1,
    "sim.batch_size": 16,
    "sim.local_lr": 0.001,
    "sim.server_lr": 1.0,
    "sim.weighting": "uniform",
    "sim.dropout": 0.0,
    "sim.availability.kind": "always",
    "sim.system": None,
    "model.kind": "logistic",
}
"""The paper's workload (Sec. 6); rounds, evaluation period and seeds may be fewer (indicative)."""


def _setting_value(config: ExperimentConfig, key: str) -> Any:
    if key.startswith("data."):  # fields, options and partition parameters alike
        return config.data.value(key.removeprefix("data."))
    value: Any = config
    for part in key.split("."):  # a user's availability class may have no kind
        value = getattr(value, part, None)
    return value


def differences(config: ExperimentConfig) -> list[str]:
    """How ``config`` departs from the paper's setting, one ``key = value (paper: …)`` each.

    Empty for the paper's configurations (``experiments/*.toml``, and those with fewer rounds
    or seeds, e.g. ``--quick``): only those get the paper's report, columns and verdicts.
    """
    out = []
    for key, paper in PAPER_SETTING.items():
        value = _setting_value(config, key)
        same = value == paper or (
            isinstance(paper, float)
            and isinstance(value, (int, float))
            and math.isclose(value, paper)
        )
        if not same:
            out.append(f"{key} = {value!r} (paper: {paper!r})")
    return out


CLAIM_MIN_ROUNDS = PAPER_ROUNDS
"""Rounds a run needs before its numbers can test the paper's claims: the claims are about the
accuracy the paper reports at T = 20 000 (its Figures 1–3); a shorter run measures an earlier
point of the curves, where the methods' order differs (ADCS's diversity pays off late)."""
CLAIM_MIN_SEEDS = 2
"""Seeds a run needs before its numbers can test the claims: with one seed a difference between
two methods cannot be told from the seed's noise (no 95 % interval)."""
CLAIMS_NEED = (
    f"a verdict needs the full Fashion-MNIST data, T >= {CLAIM_MIN_ROUNDS:,} rounds and at "
    f"least {CLAIM_MIN_SEEDS} seeds"
)
"""The rule that decides which runs can test the claims, as the report and the console say it."""


def untested_reasons(is_subset: bool, rounds: int, n_seeds: int) -> list[str]:
    """Why a run cannot test the paper's claims (empty: its verdicts stand); see CLAIMS_NEED."""
    reasons = []
    if is_subset:
        reasons.append("it used the small Fashion-MNIST subset shipped with the package")
    if rounds < CLAIM_MIN_ROUNDS:
        reasons.append(f"it ran T = {rounds} rounds (the paper: {PAPER_ROUNDS})")
    if n_seeds < CLAIM_MIN_SEEDS:
        reasons.append(f"it used {n_seeds} seed(s)")
    return reasons


def indicative_reasons(context: ReportContext) -> list[str]:
    """Reasons verdicts that could be given are indicative only (empty for a full reproduction)."""
    reasons = []
    if context.quick:
        reasons.append("it used the quick settings")
    if len(context.seeds) < FULL_SEEDS:
        reasons.append(f"it used {len(context.seeds)} seed(s) (the full setting: {FULL_SEEDS})")
    return reasons


# ---------------------------------------------------------------------------------------------
# the paper's series


def _adcs(label: str, theta: float, refresh_every: int) -> Series:
    return Series(label, "adcs", {"theta": theta, "refresh_every": refresh_every})


ADCS_MAIN = _adcs("ADCS (θ=0.8, R=20)", 0.8, 20)
_BASELINES = tuple(Series(method_label(m), m) for m in PAPER_METHODS if m != "adcs")
FIGURE_SERIES: dict[str, tuple[Series, ...]] = {
    "fig1": (*_BASELINES, ADCS_MAIN),
    "fig2": (
        Series("Uniform", "uniform"),
        *(_adcs(f"ADCS θ={t}", t, 20) for t in (0.2, 0.4, 0.6, 0.8, 1.0)),
    ),
    "fig3": tuple(_adcs(f"ADCS R={r}", 0.8, r) for r in (1, 5, 20, 100, 500)),
}
"""The curves of the paper's Figures 1–3."""

FIGURES: dict[str, tuple[str, tuple[Series, ...]]] = {
    "fig1": ("Fig. 1: comparison of worst and average test accuracy", FIGURE_SERIES["fig1"]),
    "fig2": ("Fig. 2: ADCS for varying θ (R = 20)", FIGURE_SERIES["fig2"]),
    "fig3": ("Fig. 3: ADCS for varying R (θ = 0.8)", FIGURE_SERIES["fig3"]),
}
"""Title and series of each of the paper's figures, by output name."""

PAPER_OUTPUTS = (*FIGURES, "table1")
"""The outputs a configuration may ask for by the paper's names."""

TABLE1_SERIES: tuple[Series, ...] = FIGURE_SERIES["fig1"]
"""Rows of Table 1 (the runs of Fig. 1; the paper lists Uniform, OCS, PowerOfChoice, ADCS)."""


ALL_FIGURE_SERIES: tuple[Series, ...] = tuple(s for group in FIGURE_SERIES.values() for s in group)
"""Every series of the paper's figures: a variant none of them shows is added to each figure."""


def figure_series(records: Sequence[RunRecord], fig: str) -> tuple[Series, ...]:
    """A figure's curves: its series that have runs, then every variant that no figure of the
    paper shows (a user's own scheduler, MD, Oort), as `adcs.experiments.analysis.figures.write_figures`
    draws them (`adcs.experiments.analysis.records.with_every_variant`)."""
    return with_every_variant(records, FIGURE_SERIES[fig], ALL_FIGURE_SERIES)


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
    """

    competitive: float = 0.01
    much_lower: float = 0.05
    same: float = 0.01

    def __post_init__(self) -> None:
        for name in ("competitive", "much_lower", "same"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")


Verdict = Literal["holds", "does not hold", "not tested", "not evaluated"]


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
    verdict : {"holds", "does not hold", "not tested", "not evaluated"}
        "not tested": the runs are there but cannot test the claim (see `CLAIMS_NEED`);
        "not evaluated": the runs it compares are missing.
    evidence : str
        The numbers the verdict follows from (or would).
    """

    key: str
    where: str
    statement: str
    test: str
    verdict: Verdict
    evidence: str


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
        f"ADCS worst {pm(adcs.worst, adcs.worst_half)}; best other: {best.label} "
        f"{pm(best.worst, best.worst_half)}; difference {100 * diff:+.2f} points"
        + _within_noise(diff, adcs.worst_half, best.worst_half)
    )
    return diff > 0, text


def _check_adcs_competitive(s: dict[str, SeriesSummary], tol: ClaimTolerances) -> tuple[bool, str]:
    adcs, others = s["adcs"], _fig1_others(s)
    best = max(others, key=lambda o: o.avg)
    diff = adcs.avg - best.avg
    return diff >= -tol.competitive, (
        f"ADCS average {pm(adcs.avg, adcs.avg_half)}; best other: {best.label} "
        f"{pm(best.avg, best.avg_half)}; difference {100 * diff:+.2f} points "
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
        f"StaticDPP worst {pm(static.worst, static.worst_half)}; lowest other: {lowest.label} "
        f"{pm(lowest.worst, lowest.worst_half)}; gap {100 * gap:.2f} points "
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
        parts.append(f"{s[key].label} {pct(s[key].worst)} ({100 * diff:+.2f})")
    return ok, f"Uniform worst {pct(uni.worst)}; " + ", ".join(parts)


def _check_theta02_below_uniform(
    s: dict[str, SeriesSummary], _: ClaimTolerances
) -> tuple[bool, str]:
    low, uni = s["adcs_theta0.2"], s["uniform"]
    diff = low.worst - uni.worst
    return diff < 0, (
        f"ADCS θ=0.2 worst {pm(low.worst, low.worst_half)}; Uniform "
        f"{pm(uni.worst, uni.worst_half)}; difference {100 * diff:+.2f} points"
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
        parts.append(f"θ={theta}: {pct(summ.worst)} / {pct(summ.avg)}")
        if summ.worst > best_worst.worst and summ.avg > best_avg.avg:
            winners.append(f"θ={theta}")
    text = (
        f"best benchmark worst: {best_worst.label} {pct(best_worst.worst)}, best benchmark "
        f"average: {best_avg.label} {pct(best_avg.avg)}; ADCS worst / average: "
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
        f"R=1: worst {pct(base.worst)}, average {pct(base.avg)}; vs R=1: "
        + "; ".join(parts)
        + f" (tolerance ±{100 * tol.same:.1f})"
    )


def _largest_r(s: dict[str, SeriesSummary]) -> SeriesSummary:
    return next(s[f"adcs_R{r}"] for r in (500, 100) if f"adcs_R{r}" in s)


def _check_large_r_worse(s: dict[str, SeriesSummary], tol: ClaimTolerances) -> tuple[bool, str]:
    base, large = s["adcs_R1"], _largest_r(s)
    diff = large.worst - base.worst
    return diff < -tol.same, (
        f"{large.label} worst {pm(large.worst, large.worst_half)}; ADCS R=1 "
        f"{pm(base.worst, base.worst_half)}; difference {100 * diff:+.2f} points "
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
    paper = " < ".join(f"{method_label(k)} {PAPER_TV[k]:.4f}" for k in order)
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
        "mean over seeds of each run's TV distance to uniform selection, in that order",
        ("uniform", "adcs", "powerofchoice", "ocs"),
        _check_tv_order,
    ),
)  # fmt: skip


def _claim_series() -> dict[str, Series]:
    """Named series the claims refer to."""
    named = {s.method: s for s in _BASELINES}
    named["adcs"] = ADCS_MAIN
    for s in FIGURE_SERIES["fig2"][1:]:
        named[f"adcs_theta{s.params['theta']}"] = s
    for s in FIGURE_SERIES["fig3"]:
        named[f"adcs_R{s.params['refresh_every']}"] = s
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
        summ = summarize(records, series)
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


def table1_rows(
    records: Sequence[RunRecord], *, paper_columns: bool = True
) -> list[dict[str, Any]]:
    """Mean group shares and TV per method (the runs of Fig. 1), with the paper's beside, then
    every variant that no figure of the paper shows (`figure_series`).

    Returns
    -------
    list of dict
        Keys ``method`` (the method's key; for a variant beyond the paper's, the run's variant,
        which tells it apart), ``label``, ``n_seeds``, ``share`` (list, one per group), ``tv``,
        ``paper_share`` (list or None), ``paper_tv`` (float or None), ``max_abs_share_diff``.
        The paper's entries are None without ``paper_columns``.
    """
    ours = tuple(Series(method_label(s.method), s.method, s.params) for s in TABLE1_SERIES)
    rows = []
    for series in with_every_variant(records, ours, ALL_FIGURE_SERIES):
        summ = summarize(records, series)
        if summ is None:
            continue
        papers = any(series.method == s.method and series.params == s.params for s in ours)
        method = series.method if papers else select_runs(records, series)[0].variant
        paper = PAPER_TABLE1.get(method) if paper_columns else None
        diff = None
        if paper is not None and len(paper) == summ.group_share.size:
            diff = float(np.max(np.abs(summ.group_share - np.asarray(paper))))
        rows.append(
            {
                "method": method,
                "label": series.label,
                "n_seeds": summ.n_seeds,
                "share": [float(x) for x in summ.group_share],
                "tv": summ.tv,
                "paper_share": list(paper) if paper is not None else None,
                "paper_tv": PAPER_TV.get(method) if paper_columns else None,
                "max_abs_share_diff": diff,
            }
        )
    return rows


def table1_markdown(rows: Sequence[Mapping[str, Any]], *, paper_columns: bool = True) -> str:
    """Table 1 as markdown: our shares per group, TV, and (paper setting) the paper's TV beside."""
    if not rows:
        return "_No runs of the Table 1 methods._\n"
    n_groups = len(rows[0]["share"])
    head = ["Method", *(f"Group {k}" for k in range(n_groups)), "TV"]
    head += ["TV (paper)"] if paper_columns else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["label"], *(fmt(x) for x in row["share"]), fmt(row["tv"])]
        cells += [fmt(row["paper_tv"])] if paper_columns else []
        lines.append("| " + " | ".join(cells) + " |")
    paper_rows = [r for r in rows if r["paper_share"] is not None]
    if paper_columns and paper_rows:
        lines += ["", "The paper's Table 1, for comparison:", ""]
        lines += ["| " + " | ".join(head[:-2]) + " | TV | max abs diff to ours |"]
        lines.append("|" + "---|" * (len(head)))
        for row in paper_rows:
            cells = [f"{row['label']} (paper)", *(fmt(x) for x in row["paper_share"])]
            cells += [fmt(row["paper_tv"]), fmt(row["max_abs_share_diff"])]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table1(
    folder: Path, records: Sequence[RunRecord], *, paper_columns: bool = True
) -> list[dict[str, Any]]:
    """Write ``table1.csv`` (tidy: method, group, share, …) and ``table1.md``.

    ``paper_columns`` (the paper's setting only) adds the paper's shares and TV beside ours.
    """
    rows = table1_rows(records, paper_columns=paper_columns)
    with (folder / "table1.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        head = ["method", "group", "share", "tv", "n_seeds"]
        writer.writerow(head + (["paper_share", "paper_tv"] if paper_columns else []))
        for row in rows:
            for k, share in enumerate(row["share"]):
                cells = [row["method"], k, share, row["tv"], row["n_seeds"]]
                if paper_columns:
                    paper = row["paper_share"][k] if row["paper_share"] is not None else ""
                    cells += [paper, row["paper_tv"] if row["paper_tv"] is not None else ""]
                writer.writerow(cells)
    (folder / "table1.md").write_text(
        "# Table 1: share of selection slots per group, and TV distance to uniform\n\n"
        + table1_markdown(rows, paper_columns=paper_columns),
        encoding="utf-8",
    )
    return rows


# ---------------------------------------------------------------------------------------------
# report.md


def write_report(
    path: Path,
    records: Sequence[RunRecord],
    context: ReportContext,
    tolerances: ClaimTolerances | None = None,
) -> list[Claim]:
    """Write the paper's ``report.md``: the neutral report (every variant that ran), then the
    claims with verdicts, Figs 1–3 and Table 1.

    Only for a configuration of the paper's setting (see `differences`). The paper's sections
    are added to the neutral report (`adcs.experiments.analysis.report.report_body`), and each figure and
    table shows, beside the paper's series, every variant no figure of the paper shows
    (`figure_series`). Returns the evaluated claims.
    """
    tol = tolerances or ClaimTolerances()
    claims = evaluate_claims(records, tol)
    paper_figures = [f"{fig}.png" for fig in FIGURE_SERIES]
    body, _ = report_body(records, context, figures_elsewhere=paper_figures)
    out = [
        f"# ADCS reproduction report: {context.name}",
        "",
        *body,
        "## The paper's claims, checked",
        "",
    ]
    untested = untested_reasons(context.is_subset, context.rounds, len(context.seeds))
    reasons = indicative_reasons(context)
    if untested:
        claims = [
            dataclasses.replace(c, verdict="not tested") if c.verdict != "not evaluated" else c
            for c in claims
        ]
        out.append(
            "**The paper's claims are not tested by this run**, because "
            + "; ".join(untested)
            + f": {CLAIMS_NEED}. Our numbers are shown beside each claim for information only."
        )
        out.append("")
    elif reasons:
        out.append(
            "**The verdicts below are indicative only**, because "
            + "; ".join(reasons)
            + ". The paper's claims concern the full setting."
        )
        out.append("")
    out.append(
        f"Tolerances: competitive = {100 * tol.competitive:.1f} points, much lower = "
        f"{100 * tol.much_lower:.1f} points, almost identical = {100 * tol.same:.1f} points."
    )
    out += ["", "| Claim | Where | Test | Our numbers | Verdict |", "|---|---|---|---|---|"]
    for c in claims:
        verdict = {"holds": "**holds**", "does not hold": "**does not hold**"}.get(
            c.verdict, c.verdict
        )
        out.append(f"| {c.statement} | {c.where} | {c.test} | {c.evidence} | {verdict} |")
    out.append("")
    for fig, series in FIGURE_SERIES.items():
        if not summaries(records, series):
            continue
        out += [f"## {fig.replace('fig', 'Figure ')}", ""]
        if f"{fig}.png" in context.figures:
            out += [f"![{fig}]({fig}.png)", ""]
        out.append(series_table(summaries(records, figure_series(records, fig))))
    table = table1_rows(records)
    if table:
        out += ["## Table 1: selection bias", "", table1_markdown(table)]
    path.write_text("\n".join(out).rstrip() + "\n", encoding="utf-8")
    return claims


def _report(path: Path, records: Sequence[RunRecord], context: ReportContext) -> StudyReport:
    claims = write_report(path, records, context)
    return StudyReport(summaries(records, curve_series(records)), list(claims))


def _table1(folder: Path, records: Sequence[RunRecord], in_setting: bool) -> None:
    write_table1(folder, records, paper_columns=in_setting)


STUDY = register_study(Study("paper", differences, FIGURES, {"table1": _table1}, _report))
"""The paper as a study (`adcs.experiments.analysis.outputs`): its figures, Table 1 and report."""
