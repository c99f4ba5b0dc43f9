"""The families block of the attack suite: clients that send what they report, against the bounds.

Read by ``bench_attacks.py`` (the ``families`` block). A family is a setting of
`adcs.adversary.Crafted` (``[suite.families]``) run with k ∈ ``[suite].family_k`` malicious
clients, without defence and with the ``[suite.bound]`` defences (naive and adaptive). Each run
is judged by

* **the single attacker's share**: the largest selection rate of a malicious client over its
  fair share (the run's mean selected clients per round ÷ N; m / N when all are available);
* **the coalition's share**: the k attackers' total rate over k × the fair share;
* **the lift**: the largest attacker's rate over its own rate in the same scheduler's no-attack
  run (with the same defences): what the attack gained it, whatever its fair share;
* **the largest share over any interval**: the most selections any attacker (coalition member)
  holds in an interval of L ≥ W consecutive rounds of the run, over L × its fair share
  (`interval_share`; W the bounds' window);
* the honest clients' worst accuracy, and its change against the same seed's no-attack run with
  the same defences (the defended no-attack run for the bounds, the undefended one without);
* where the suite runs the family named `ABSENT` (``absent = true``: the k clients take no part,
  `adcs.adversary.Crafted`), the same change against the run *without* the k attackers (same
  seed, same k, same defences): what their taking part — selected, aggregated, steering the
  others' selection — did to the honest clients, apart from the loss of their own data, which
  they no longer train (the absent run's own change against the no-attack run). A defence that
  kept the attackers out entirely would give the absent run. The absent runs are not attacks
  and are left out of the goals.

A sleeper's (or a burst's) rates and lift count the rounds from its start; the any-interval
share counts every round of the run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

GOAL_SHARE = 1.5
"""The issue's bound: no attacker and no coalition above 1.5 × its fair share."""
GOAL_WORST_POINTS = 2.0
"""With k ≤ `GOAL_K` attackers, honest worst accuracy with the bounds within 2 points of the
defended no-attack run (the same seed's)."""
GOAL_K = 3
"""The goals of the bounds hold for k ≤ 3 attackers (10 % of N = 30); larger k is reported."""
ABSENT = "absent"
"""The family of runs without the attackers (module docstring)."""
GOAL_CLEAN_POINTS = 1.0
"""With the bounds and no attack, honest worst accuracy within 1 point of the undefended run
(mean over seeds)."""


def interval_share(
    selected: np.ndarray, clients: Sequence[int], window: int, n_clients: int
) -> float:
    """The most any listed client holds in L ≥ ``window`` consecutive rounds, over L × fair share.

    The fair share is the run's mean number selected per round ÷ N (m / N when every client is
    available). Among intervals of at least W rounds the largest mean is reached at a length
    below 2W (a longer interval splits into two of at least W, one of which has a mean at least
    the whole's), so lengths W … min(2W − 1, T) are searched. NaN for a run shorter than W or
    with no client listed.

    Parameters
    ----------
    selected : ndarray of shape (rounds, m), int
        The run's selection records (−1 is padding).
    clients : sequence of int
    window : int
        W ≥ 1.
    n_clients : int
    """
    sel = np.asarray(selected)
    rounds = sel.shape[0]
    if not len(clients) or rounds < window or window < 1:
        return math.nan
    fair = float((sel >= 0).sum()) / rounds / n_clients
    if fair <= 0:
        return math.nan
    hits = np.stack([(sel == c).any(axis=1) for c in clients]).astype(np.int64)
    cum = np.concatenate([np.zeros((len(clients), 1), np.int64), hits.cumsum(axis=1)], axis=1)
    best = 0.0
    for length in range(window, min(2 * window - 1, rounds) + 1):
        held = cum[:, length:] - cum[:, :-length]
        best = max(best, float(held.max()) / length)
    return best / fair


def shares(rates: np.ndarray, malicious: Sequence[int]) -> tuple[float, float]:
    """(largest attacker's rate, coalition's total rate), each over its fair share.

    Parameters
    ----------
    rates : ndarray of shape (n_clients,)
        Selection rates of one run (their sum is the mean number selected per round).
    malicious : sequence of int
    """
    fair = float(rates.sum()) / rates.size
    if not malicious or fair <= 0:
        return math.nan, math.nan
    mine = rates[list(malicious)]
    return float(mine.max() / fair), float(mine.sum() / (len(malicious) * fair))


def lift(measured: Any) -> float:
    """The largest attacker's rate over its own no-attack rate (NaN where that is 0 or unknown)."""
    mal = list(measured.planned.malicious)
    if not mal:
        return math.nan
    base = np.asarray(measured.baseline_rates, dtype=np.float64)[mal]
    mine = np.asarray(measured.rates, dtype=np.float64)[mal]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(base > 0, mine / base, np.nan)
    return float(np.nanmax(ratio)) if np.isfinite(ratio).any() else math.nan


def _mode(p: Any) -> str:
    if p.defence == "off":
        return "off"
    return "bound, adaptive" if p.adaptive else "bound, naive"


Cell = tuple[float, float, float, float, float, float, float]
"""One run of a family: (attacker share, coalition share, any-interval share, honest worst,
its change against the no-attack run with the same defences, lift, its change against the run
without the attackers — NaN where the suite has none)."""


def family_cells(
    measured: Sequence[Any],
) -> tuple[dict[tuple[str, int, str, str], list[Cell]], dict[tuple[str, str], dict[int, float]]]:
    """Each family run's measures by (family, k, mode, method), and the no-attack honest worst
    accuracy by (method, defence) and seed."""
    worst = {m.planned.run_id: m.worst for m in measured}
    absent = {
        (m.planned.method, m.planned.defence, m.planned.k, m.planned.seed): m.worst
        for m in measured
        if m.planned.block == "families" and m.planned.attack == ABSENT
    }
    cells: dict[tuple[str, int, str, str], list[Cell]] = defaultdict(list)
    clean: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for m in measured:
        p = m.planned
        if p.block == "clean" and p.defence in ("off", "bound"):
            clean[(p.method, p.defence)][p.seed] = m.worst
        if p.block != "families":
            continue
        single, coalition = shares(m.rates, p.malicious)
        change = m.worst - worst.get(p.baseline, math.nan)
        without = m.worst - absent.get((p.method, p.defence, p.k, p.seed), math.nan)
        cells[(p.attack, p.k, _mode(p), p.method)].append(
            (
                single, coalition, getattr(m, "interval_share", math.nan), m.worst, change,
                lift(m), without,
            )
        )  # fmt: skip
    return cells, clean


def _max(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return max(finite) if finite else math.nan


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def _f(x: float, digits: int = 2, suffix: str = "", sign: bool = False) -> str:
    if math.isnan(x):
        return "–"
    return f"{x:+.{digits}f}{suffix}" if sign else f"{x:.{digits}f}{suffix}"


def family_lines(measured: Sequence[Any], methods: Sequence[str], window: int = 100) -> list[str]:
    """Markdown: the no-attack cost of the bounds, per family × k × mode × method the shares,
    lift and honest worst accuracy, and the issue's goals checked against them."""
    cells, clean = family_cells(measured)
    if not cells and not clean:
        return []
    shown = [method for method in methods if any(key[3] == method for key in cells)]
    absent = any(key[0] == ABSENT for key in cells)
    lines = [*_clean_lines(clean, methods)]
    if cells:
        lines += [
            "### Attackers that send what they report (families)",
            "",
            "Per run: *share* is the largest attacker's selection rate over its attack's rounds "
            "÷ its fair share (max over seeds); *coalition* the k attackers' total ÷ k × the fair "
            f"share (max over seeds); *any {window}+* the most any attacker holds in L ≥ {window} "
            "consecutive rounds ÷ L × the fair share (max over seeds); *lift* the largest "
            "attacker's rate over its own rate in the no-attack run with the same defences (max "
            "over seeds); *worst* the honest clients' worst accuracy (%, mean over seeds) and "
            "*Δ worst* its change against the same seed's no-attack run with the same defences "
            "(points, mean over seeds: the defended no-attack run for the bounds, the undefended "
            "one without)."
            + (
                " *Δ vs absent*: the change against the same seed's run without the k attackers "
                f"(family `{ABSENT}`, same k and defences; points, mean over seeds): what their "
                "taking part did to the honest clients beyond the loss of their data (negative: "
                "harm; a defence that kept them out entirely would give the absent run)."
                if absent
                else ""
            ),
            "",
            f"| family | k | defence | method | seeds | share | coalition | any {window}+ | lift "
            "| worst | Δ worst |" + (" Δ vs absent |" if absent else ""),
            "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if absent else ""),
        ]
        keys = sorted({key[:3] for key in cells}, key=lambda key: _row_order(key, cells))
        for family, k, mode in keys:
            for method in shown:
                got = cells.get((family, k, mode, method), [])
                if not got:
                    continue
                lines.append(
                    f"| {family} | {k} | {mode} | {method} | {len(got)} | "
                    f"{_f(_max([g[0] for g in got]))} | "
                    f"{_f(_max([g[1] for g in got]))} | {_f(_max([g[2] for g in got]))} | "
                    f"{_f(_max([g[5] for g in got]), suffix='×')} | "
                    f"{_f(100 * _mean([g[3] for g in got]), 1)} | "
                    f"{_f(100 * _mean([g[4] for g in got]), 1, sign=True)} |"
                    + (f" {_f(100 * _mean([g[6] for g in got]), 1, sign=True)} |" if absent else "")
                )
        lines.append("")
    goal = _goal(cells, clean, methods)
    return [*lines, *goal, ""] if goal else lines


def _row_order(key: tuple[str, int, str], cells: Any) -> tuple[int, int, int]:
    """Families in the order first run, then k, then off / naive / adaptive."""
    families = list(dict.fromkeys(c[0] for c in cells))
    modes = ("off", "bound, naive", "bound, adaptive")
    return families.index(key[0]), key[1], modes.index(key[2])


def clean_change(clean: dict[tuple[str, str], dict[int, float]], method: str) -> float:
    """The bounds' no-attack change of honest worst accuracy (fraction), mean over the seeds
    run both ways (NaN where none is)."""
    off, bound = clean.get((method, "off"), {}), clean.get((method, "bound"), {})
    seeds = sorted(set(off) & set(bound))
    return float(np.mean([bound[s] - off[s] for s in seeds])) if seeds else math.nan


def _clean_lines(
    clean: dict[tuple[str, str], dict[int, float]], methods: Sequence[str]
) -> list[str]:
    rows = [m for m in methods if not math.isnan(clean_change(clean, m))]
    if not rows:
        return []
    lines = [
        "### The bounds' cost with no attack",
        "",
        "Honest worst-client accuracy (%, mean over seeds) without defence and with the bounds, "
        "and the change (points, mean over seeds of the same seed's difference).",
        "",
        "| method | seeds | without | with the bounds | change | per seed |",
        "|---|---|---|---|---|---|",
    ]
    for method in rows:
        off, bound = clean[(method, "off")], clean[(method, "bound")]
        seeds = sorted(set(off) & set(bound))
        per_seed = ", ".join(f"{100 * (bound[s] - off[s]):+.1f}" for s in seeds)
        lines.append(
            f"| {method} | {len(seeds)} | {100 * np.mean([off[s] for s in seeds]):.1f} | "
            f"{100 * np.mean([bound[s] for s in seeds]):.1f} | "
            f"{100 * clean_change(clean, method):+.1f} | {per_seed} |"
        )
    return [*lines, ""]


def _goal(
    cells: dict[tuple[str, int, str, str], list[Cell]],
    clean: dict[tuple[str, str], dict[int, float]],
    methods: Sequence[str],
) -> list[str]:
    """The issue's goals, per method, with the numbers."""
    lines = ["#### The goals with the bounds on", ""]
    for method in methods:
        change = clean_change(clean, method)
        got = [(key, g) for key, gs in cells.items()
               if key[3] == method and key[2] != "off" and key[0] != ABSENT for g in gs]  # fmt: skip
        if math.isnan(change) and not got:
            continue
        lines.append(f"- **{method}**")
        if not math.isnan(change):
            ok = abs(100 * change) <= GOAL_CLEAN_POINTS + 1e-9
            lines.append(
                f"  - no attack: honest worst {100 * change:+.1f} points with the bounds — within "
                f"{GOAL_CLEAN_POINTS:g}: {'met' if ok else 'NOT met'}"
            )
        small = [(key, g) for key, g in got if key[1] <= GOAL_K]
        if small:
            key_i, top = max(small, key=lambda kg: -math.inf if math.isnan(kg[1][2]) else kg[1][2])
            ok = not math.isnan(top[2]) and top[2] <= GOAL_SHARE + 1e-9  # the cap binds at equality
            lines.append(
                f"  - k ≤ {GOAL_K}: largest attacker over any interval of ≥ W rounds "
                f"{_f(top[2])}× its fair share ({key_i[0]}, k = {key_i[1]}, {key_i[2]}) — ≤ "
                f"{GOAL_SHARE}: {'met' if ok else 'NOT met'}"
            )
            lines += _worst_line(small, 4, "the defended no-attack run")
            lines += _worst_line(small, 6, f"the defended run without the attackers (`{ABSENT}`)")
        large = [(key, g) for key, g in got if key[1] > GOAL_K]
        if large:
            damage = _key_means(large, 4)
            if damage:
                worst_key = min(damage, key=lambda key: damage[key])
                lines.append(
                    f"  - k > {GOAL_K} (reported): the largest loss of honest worst accuracy "
                    f"against the defended no-attack run {damage[worst_key]:+.1f} points "
                    f"({worst_key[0]}, k = {worst_key[1]}, {worst_key[2]})"
                )
    return lines if len(lines) > 2 else []


def _key_means(
    pairs: Iterable[tuple[tuple[str, int, str, str], Cell]], column: int
) -> dict[tuple[str, int, str, str], float]:
    """Per family row, the mean of one measure of its runs in points (rows where it is NaN in
    every run left out: a suite without absent runs has no change against them)."""
    values: dict[tuple[str, int, str, str], list[float]] = defaultdict(list)
    for key, g in pairs:
        values[key].append(g[column])
    means = {key: 100 * _mean(v) for key, v in values.items()}
    return {key: v for key, v in means.items() if not math.isnan(v)}


def _worst_line(
    small: Sequence[tuple[tuple[str, int, str, str], Cell]], column: int, against: str
) -> list[str]:
    """The goal line on the honest worst's change (``column`` of the cells) against a run."""
    means = _key_means(small, column)
    if not means:
        return []
    missed = sorted((v, key) for key, v in means.items() if v < -GOAL_WORST_POINTS)
    low_key = min(means, key=lambda key: means[key])
    return [
        f"  - k ≤ {GOAL_K}: honest worst against {against} at least "
        f"{means[low_key]:+.1f} points ({low_key[0]}, k = {low_key[1]}, {low_key[2]}) — "
        f"within {GOAL_WORST_POINTS:g}: "
        + (
            "met"
            if not missed
            else f"NOT met in {len(missed)} of {len(means)}: "
            + ", ".join(
                f"{key[0]} k = {key[1]} {key[2].split(', ')[1]} {v:+.1f}" for v, key in missed
            )
        )
    ]


COLUMNS = ("seeds", "share", "coalition", "interval", "lift", "worst", "change", "absent")
"""What `claim_text` reads of a row of the families table (``interval``: the any-interval share)."""
MODES = {"off": "off", "naive": "bound, naive", "adaptive": "bound, adaptive"}


def _variant(keys: Sequence[str], method: str) -> str:
    """The variant label of ``method`` (a method name, or a label itself) among ``keys``."""
    found = [v for v in dict.fromkeys(keys) if v == method or v.split("-")[0] == method]
    if len(found) != 1:
        raise ValueError(f"method {method!r}: {'ambiguous' if found else 'not found'}")
    return found[0]


def claim_text(measured: Sequence[Any], column: str, row: str, method: str) -> str:
    """A number of the families' report as the report prints it, for a claim marker.

    ``row`` is ``none`` (the bounds' no-attack runs: ``change`` is their cost, ``worst`` the
    defended no-attack honest worst accuracy), ``goal`` (over every family run with the bounds:
    ``interval``, the largest any-interval share at k ≤ `GOAL_K`; ``worst``, the lowest mean
    change of honest worst accuracy at k ≤ `GOAL_K`; ``absent``, the same against the runs
    without the attackers; ``damage``, the same at k > `GOAL_K`) or
    ``FAMILY:K:MODE`` with MODE ``off``, ``naive`` or ``adaptive`` (a row of the families table;
    ``column`` one of `COLUMNS`).
    """
    cells, clean = family_cells(measured)
    if row == "goal":
        return _goal_number(cells, column, _variant([c[3] for c in cells], method))
    if row == "none":
        variant = _variant([m for m, _ in clean], method)
        if column == "change":
            return f"{100 * clean_change(clean, variant):+.1f}"
        if column == "worst":
            return f"{100 * float(np.mean(list(clean[(variant, 'bound')].values()))):.1f}"
        raise ValueError(f"column {column!r}: the no-attack row has change and worst")
    try:
        family, k_text, mode = row.split(":")
        key = (family, int(k_text), MODES[mode])
    except (ValueError, KeyError):
        raise ValueError(f"row {row!r}: none or FAMILY:K:off|naive|adaptive") from None
    got = cells.get((*key, _variant([c[3] for c in cells], method)))
    if not got:
        raise ValueError(f"row {row!r}: not run for {method}")
    index = {"share": 0, "coalition": 1, "interval": 2, "lift": 5}
    if column == "seeds":
        return str(len(got))
    if column in index:
        return _f(_max([g[index[column]] for g in got]), suffix="×" if column == "lift" else "")
    if column == "worst":
        return _f(100 * _mean([g[3] for g in got]), 1)
    if column == "change":
        return _f(100 * _mean([g[4] for g in got]), 1, sign=True)
    if column == "absent":
        return _f(100 * _mean([g[6] for g in got]), 1, sign=True)
    raise ValueError(f"column {column!r}: not one of {list(COLUMNS)}")


def _goal_number(
    cells: dict[tuple[str, int, str, str], list[Cell]], column: str, variant: str
) -> str:
    """The numbers of the goal lines (`claim_text`'s ``goal`` row), with where they were met."""
    bound = {
        key: got
        for key, got in cells.items()
        if key[3] == variant and key[2] != "off" and key[0] != ABSENT
    }
    small = {key: got for key, got in bound.items() if key[1] <= GOAL_K}
    if column == "interval":
        return _f(_max([g[2] for got in small.values() for g in got]))
    if column in ("worst", "absent", "damage"):
        chosen = small if column != "damage" else {k: v for k, v in bound.items() if k[1] > GOAL_K}
        pairs = [(key, g) for key, got in chosen.items() for g in got]
        means = _key_means(pairs, 6 if column == "absent" else 4)
        return _f(min(means.values()), 1, sign=True) if means else "–"
    raise ValueError(f"column {column!r}: the goal row has interval, worst, absent and damage")
