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
* the honest clients' worst / 10th-percentile / average accuracy.

A sleeper's rates count the rounds from its start.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

GOAL_SHARE = 1.5
"""The issue's bound: no attacker and no coalition above 1.5 × its fair share."""
GOAL_WORST_POINTS = 2.0
"""Honest worst accuracy with the bounds within 2 points of the undefended no-attack run."""


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


def family_lines(measured: Sequence[Any], methods: Sequence[str]) -> list[str]:
    """Markdown: per family, k and mode, each method's shares and honest worst accuracy."""
    cells: dict[tuple[str, int, str, str], list[tuple[float, float, float, float]]] = defaultdict(
        list
    )
    rows: list[tuple[str, int, str]] = []
    clean: dict[tuple[str, str], list[float]] = defaultdict(list)
    for m in measured:
        p = m.planned
        if p.block == "clean" and p.defence in ("off", "bound"):
            clean[(p.method, p.defence)].append(m.worst)
        if p.block != "families":
            continue
        single, coalition = shares(m.rates, p.malicious)
        cells[(p.attack, p.k, _mode(p), p.method)].append((single, coalition, m.worst, lift(m)))
        if (p.attack, p.k, _mode(p)) not in rows:
            rows.append((p.attack, p.k, _mode(p)))
    if not rows:
        return []
    shown = [method for method in methods if any(key[3] == method for key in cells)]
    lines = [
        "### Attackers that send what they report (families; max over seeds)",
        "",
        "Each cell: the largest attacker's selection rate ÷ its fair share · the coalition's "
        "total ÷ k × the fair share · honest worst accuracy (%, mean over seeds) · the largest "
        "attacker's lift over its own no-attack rate (rates over the attack's rounds).",
        "",
        "| family | k | defence | " + " | ".join(shown) + " |",
        "|---|---|---|" + "---|" * len(shown),
    ]
    for family, k, mode in rows:
        vals = []
        for method in shown:
            got = cells.get((family, k, mode, method), [])
            if not got:
                vals.append("–")
                continue
            single = max(g[0] for g in got)
            coalition = max(g[1] for g in got)
            worst = 100 * float(np.mean([g[2] for g in got]))
            lifted = max(g[3] for g in got)
            vals.append(f"{single:.2f} · {coalition:.2f} · {worst:.1f} · {lifted:.2f}×")
        lines.append(f"| {family} | {k} | {mode} | " + " | ".join(vals) + " |")
    lines.append("")
    return [*lines, *_goal(cells, clean, shown), ""]


def _goal(
    cells: dict[tuple[str, int, str, str], list[tuple[float, float, float, float]]],
    clean: dict[tuple[str, str], list[float]],
    methods: Sequence[str],
) -> list[str]:
    """The issue's goal for the families, per method, with the numbers."""
    lines = ["#### The goal with the bounds on (every family, k, naive and adaptive)", ""]
    for method in methods:
        got = [(key, g) for key, gs in cells.items() if key[3] == method
               and key[2] != "off" for g in gs]  # fmt: skip
        if not got:
            continue
        key_s, top_s = max(got, key=lambda kg: kg[1][0])
        key_c, top_c = max(got, key=lambda kg: kg[1][1])
        ok = max(top_s[0], top_c[1]) <= GOAL_SHARE + 1e-9  # the cap binds at equality
        lines.append(
            f"- {method}: largest attacker {top_s[0]:.2f}× its fair share ({key_s[0]}, "
            f"k = {key_s[1]}, {key_s[2]}), largest coalition {top_c[1]:.2f}× ({key_c[0]}, "
            f"k = {key_c[1]}, {key_c[2]}) — ≤ {GOAL_SHARE}: {'met' if ok else 'NOT met'}"
        )
        off, bound = clean.get((method, "off")), clean.get((method, "bound"))
        if off and bound:
            delta = 100 * (float(np.mean(bound)) - float(np.mean(off)))
            worst_attacked = min(g[2] for _, g in got)
            verdict = "met" if delta >= -GOAL_WORST_POINTS else "NOT met"
            lines.append(
                f"  no-attack honest worst with the bounds {100 * float(np.mean(bound)):.1f}% vs "
                f"{100 * float(np.mean(off)):.1f}% without ({delta:+.1f} points; within "
                f"{GOAL_WORST_POINTS:g}: {verdict}); lowest honest worst under attack with the "
                f"bounds {100 * worst_attacked:.1f}%"
            )
    return lines
