"""The attack suite's report tables: capture by lies, poisons' accuracy, defences' costs, the goal.

Read by ``bench_attacks.py`` (which re-exports these names); each function takes the measured runs
(``bench_attacks.Measured``) and returns Markdown lines.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

GOAL_RATIO = 1.5
CAPTURE_RATE = 0.95  # selected in (nearly) every round
GOAL_WORST_POINTS = 1.0

Measured = Any
"""``bench_attacks.Measured`` (not imported: that module imports this one)."""


# ---------------------------------------------------------------------------------------------
# the report


def _fmt(x: float, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}f}"


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def _captures(rate: float, clean: float) -> bool:
    """Whether a liar's selection rate means capture, against its no-attack rate.

    Above ``GOAL_RATIO`` × the no-attack rate, or at ``CAPTURE_RATE`` or more from below it: a
    client already picked in 67% of rounds cannot reach 1.5× that, yet one picked in every round
    by its lie has captured the scheduler. NaN (not run) is never capture.
    """
    return rate > GOAL_RATIO * clean or rate >= CAPTURE_RATE > clean


def capturability_lines(measured: Sequence[Measured], methods: Sequence[str]) -> list[str]:
    """Markdown: which scheduler one liar captures, and how far — rates beside no-attack rates.

    For k = 1 (the single liar of the goal): per method and lie, the liar's selection rate
    without defence, with defences against the naive and the adaptive liar, each beside the
    same client's rate in the no-attack run with the same defences (means over seeds), then one
    plain sentence per method naming the lies that capture it (:func:`_captures`).
    """
    cells: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    lies: list[str] = []
    for m in measured:
        p = m.planned
        if p.block != "capture" or p.k != 1:
            continue
        mode = "off" if p.defence == "off" else ("adaptive" if p.adaptive else "naive")
        for c in p.malicious:
            cells[(p.method, p.attack, mode)].append((m.rates[c], m.baseline_rates[c]))
        if p.attack not in lies:
            lies.append(p.attack)
    if not cells:
        return []

    def rate(method: str, lie: str, mode: str) -> tuple[float, float]:
        pairs = cells.get((method, lie, mode), [])
        if not pairs:
            return math.nan, math.nan
        return _mean([a for a, _ in pairs]), _mean([b for _, b in pairs])

    lines = [
        "### How capturable each scheduler is (one liar; selection rate, % of rounds, beside "
        "its no-attack rate in brackets)",
        "",
        "| scheduler | lie | no defence | defences on, naive liar | defences on, adaptive liar |",
        "|---|---|---|---|---|",
    ]
    verdicts = []
    for method in methods:
        if not any(key[0] == method for key in cells):
            continue
        captured: dict[str, list[str]] = {"off": [], "on": []}
        for lie in lies:
            row = []
            for mode in ("off", "naive", "adaptive"):
                a, b = rate(method, lie, mode)
                row.append("–" if math.isnan(a) else f"{100 * a:.0f} ({100 * b:.0f})")
                if _captures(a, b):
                    captured["off" if mode == "off" else "on"].append(
                        f"{lie}{'' if mode == 'off' else f' ({mode})'} "
                        f"{100 * a:.0f}% vs {100 * b:.0f}%"
                    )
            lines.append(f"| {method} | {lie} | " + " | ".join(row) + " |")
        off = "; ".join(captured["off"]) or "none"
        on = "; ".join(captured["on"]) or "none"
        verdicts.append(
            f"- **{method}**: without defence, captured (rate > {GOAL_RATIO:g}× its no-attack "
            f"rate, or ≥ {100 * CAPTURE_RATE:.0f}% of rounds from below) by: {off}. "
            f"With defences on, by: {on}."
        )
    blind = [m for m in methods if not any(key[0] == m for key in cells)]
    if blind:
        verdicts.append(
            f"- **{', '.join(blind)}**: reads no client statistics, so no lie changes its "
            "selections (its lie runs are its no-attack runs): not capturable."
        )
    return [*lines, "", *verdicts, ""]


def capture_tables(measured: Sequence[Measured], methods: Sequence[str]) -> list[str]:
    """Markdown: per k, the liars' capture ratio for every lie and liar mode × method."""
    lines: list[str] = []
    cells: dict[tuple[int, str, str, str], list[float]] = defaultdict(list)
    rows: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for m in measured:
        p = m.planned
        if p.block != "capture":
            continue
        mode = "no defence" if p.defence == "off" else (
            "defended, adaptive" if p.adaptive else "defended, naive"
        )  # fmt: skip
        cells[(p.k, p.attack, mode, p.method)].extend(m.ratios.tolist())
        if (p.attack, mode) not in rows[p.k]:
            rows[p.k].append((p.attack, mode))
    for k in sorted(rows):
        lines += [
            f"### Capture ratio, k = {k} (liar's selection rate ÷ its no-attack rate; mean over "
            f"{'liars and ' if k > 1 else ''}seeds, max in brackets)",
            "",
            "| lie | liar | " + " | ".join(methods) + " |",
            "|---|---|" + "---|" * len(methods),
        ]
        for attack, mode in rows[k]:
            vals = []
            for method in methods:
                v = cells.get((k, attack, mode, method))
                finite = [x for x in (v or []) if not math.isnan(x)]
                if not v:
                    vals.append("(not run)")
                else:
                    peak = max(finite) if finite else math.nan
                    vals.append(f"{_fmt(_mean(v))} ({_fmt(peak)})")
            lines.append(f"| {attack} | {mode} | " + " | ".join(vals) + " |")
        lines.append("")
    return lines


def accuracy_tables(measured: Sequence[Measured], methods: Sequence[str]) -> list[str]:
    """Markdown: honest worst / p10 / average accuracy of the clean runs and the poison runs."""
    by: dict[tuple[str, str, int, bool, str], list[Measured]] = defaultdict(list)
    for m in measured:
        p = m.planned
        if p.block in ("clean", "poison"):
            by[(p.attack, p.defence, p.k, p.adaptive, p.method)].append(m)
    keys = sorted({k[:4] for k in by}, key=lambda k: (k[0] != "none", k[0], k[2], k[1], k[3]))
    lines = [
        "### Honest clients' accuracy: worst / 10th percentile / average (%, mean over seeds)",
        "",
        "| attack | k | defence | " + " | ".join(methods) + " |",
        "|---|---|---|" + "---|" * len(methods),
    ]
    for attack, defence, k, adaptive in keys:
        vals = []
        for method in methods:
            group = by.get((attack, defence, k, adaptive, method), [])
            if not group:
                vals.append("–")
                continue
            w, p10, a = (
                100 * _mean([getattr(g, f) for g in group]) for f in ("worst", "p10", "average")
            )
            vals.append(f"{w:.1f} / {p10:.1f} / {a:.1f}")
        label = defence + (", adaptive" if adaptive else "")
        lines.append(f"| {attack} | {k or '–'} | {label} | " + " | ".join(vals) + " |")
    lines.append("")
    return lines


def cost_table(measured: Sequence[Measured]) -> list[str]:
    """Markdown: the no-attack cost of each defence alone (and of the bundles)."""
    by: dict[tuple[str, str], list[Measured]] = defaultdict(list)
    for m in measured:
        p = m.planned
        if p.attack == "none":
            by[(p.method, p.defence)].append(m)
    lines = [
        "### No-attack cost of each defence (worst / p10 / average accuracy, %, mean over seeds; "
        "Δ worst against no defence)",
        "",
        "| method | defence | worst | p10 | average | Δ worst (points) | client updates |",
        "|---|---|---|---|---|---|---|",
    ]
    for (method, defence), group in sorted(by.items()):
        off = by.get((method, "off"), [])
        w = 100 * _mean([g.worst for g in group])
        delta = w - 100 * _mean([g.worst for g in off]) if off else math.nan
        lines.append(
            f"| {method} | {defence} | {w:.1f} | {100 * _mean([g.p10 for g in group]):.1f} | "
            f"{100 * _mean([g.average for g in group]):.1f} | {_fmt(delta, 1)} | "
            f"{int(np.mean([g.client_updates for g in group]))} |"
        )
    lines.append("")
    return lines


def goal_lines(measured: Sequence[Measured], methods: Sequence[str]) -> list[str]:
    """Whether the issue's goal is met, with the numbers."""
    lines = ["### The goal", ""]
    worst_ratio: dict[str, tuple[float, str]] = {}
    for m in measured:
        p = m.planned
        finite = m.ratios[~np.isnan(m.ratios)]  # NaN: selected neither with nor without
        if p.block == "capture" and p.k == 1 and p.defence == "on" and finite.size:
            r = float(finite.max())
            if p.method not in worst_ratio or r > worst_ratio[p.method][0]:
                worst_ratio[p.method] = (
                    r,
                    f"{p.attack}, {'adaptive' if p.adaptive else 'naive'}, seed {p.seed}",
                )
    for method in methods:
        if method in worst_ratio:
            r, where = worst_ratio[method]
            verdict = "met" if r <= GOAL_RATIO else "NOT met"
            lines.append(
                f"- {method}: largest single-liar capture ratio with defences on {_fmt(r)} "
                f"({where}) — ≤ {GOAL_RATIO}: {verdict}"
            )
    adcs = [method for method in methods if method.startswith("adcs")]
    for method in adcs:
        clean = {d: [m.worst for m in measured if m.planned.method == method
                     and m.planned.attack == "none" and m.planned.defence == d]
                 for d in ("off", "on", "on+robust")}  # fmt: skip
        if clean["off"] and clean["on"]:
            delta = 100 * (_mean(clean["on"]) - _mean(clean["off"]))
            verdict = "met" if delta >= -GOAL_WORST_POINTS else "NOT met"
            lines.append(
                f"- {method}: no-attack worst-client accuracy with defences on "
                f"{100 * _mean(clean['on']):.1f}% vs {100 * _mean(clean['off']):.1f}% without "
                f"({delta:+.1f} points) — within {GOAL_WORST_POINTS:g} point: {verdict}"
            )
    if len(lines) == 2:  # no lie run and no "on" no-attack run: the families' goals say it
        return []
    lines.append("")
    return lines
