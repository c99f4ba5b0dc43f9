"""Which of ADCS-2's four changes carries its gain, per workload: the ablation's tables (issue 35).

Reads one results folder per workload (``adcs run experiments/successor/ablation/NAME.toml --out
ROOT/NAME``). Each holds ADCS-2 at its defaults ("full") and variants that each turn one of its
changes off by one switch (`adcs.schedulers.adcs2`, "Ablation switches"); a run is told apart by
its recorded parameters, not by its name:

1. ``select_every`` ≠ 1 — a fresh selection every round, off;
2. ``standardise_quality = false`` — standardised quality, off;
3. ``observe_directions = false`` — cached directions refreshed on observe, off;
4. ``group_cosine`` set — several slots per group, off.

For each workload and metric, each variant is paired by seed with the full ADCS-2
(`adcs.experiments.analysis.stats.paired_difference`, off − full, and its two-sided paired t-test
`paired_p_value`), and the four p-values of the workload are adjusted together with Holm's
step-down method (`holm`), so the family-wise error of the four calls of one workload is at most
5 %. A change **carries gain** where turning it off is worse (off − full < 0) with a Holm-adjusted
p below 5 %; **off is better** where turning it off is better under the same rule; otherwise the
ablation detects no effect. The metrics: final worst-client accuracy (the mean of the last 10 %
of evaluations, ``final_worst_acc``), the area under the worst-client accuracy curve over the
rounds (`adcs.leaderboard.ranking.curve_area`, from ``metrics.csv``), and final average accuracy.
Every variant must have run on exactly the full ADCS-2's seeds. Writes Markdown to stdout.

Usage::

    python scripts/ablation_report.py results/successor/ablation [--workloads paper,m6]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis import stats
from adcs.leaderboard.ranking import curve_area

WORKLOADS = ("paper", "bernoulli", "clients100", "dirichlet", "m6", "soft_skew")
METHOD = "adcs2"
ALPHA = 0.05
"""Family-wise error level of the four calls of one workload (Holm)."""

SWITCHES: dict[str, tuple[Any, str]] = {
    "select_every": (1, "1. fresh selection every round"),
    "standardise_quality": (True, "2. standardised quality"),
    "observe_directions": (True, "3. directions refreshed on observe"),
    "group_cosine": (None, "4. several slots per group"),
}
"""Each switch: its default (the change on) and the change it turns off."""

METRICS = {
    "worst": "final worst-client accuracy",
    "worst_auc": "area under the worst-client accuracy curve (mean over the rounds)",
    "avg": "final average accuracy",
}


class AblationError(ValueError):
    """The results cannot be read as an ablation (the message says why, on one line)."""


@dataclass(frozen=True)
class Comparison:
    """One change turned off against the full ADCS-2 on one workload and metric (accuracies in
    [0, 1]; ``diff`` and ``half`` are off − full and its 95 % paired half-width)."""

    change: str
    seeds: int
    full: float
    off: float
    diff: float
    half: float
    p: float
    holm_p: float

    @property
    def verdict(self) -> str:
        if math.isnan(self.holm_p):
            return "not measured"
        if not self.holm_p < ALPHA:
            return "no detectable effect"
        return "carries gain" if self.diff < 0 else "off is better"


def change_of(params: Mapping[str, Any]) -> str | None:
    """The change a run turns off (None: the full ADCS-2); more than one is refused."""
    off = [
        label for key, (default, label) in SWITCHES.items() if params.get(key, default) != default
    ]
    if len(off) > 1:
        raise AblationError(f"a run turns off several changes at once ({', '.join(off)})")
    return off[0] if off else None


def read_runs(folder: Path) -> dict[str | None, dict[str, dict[int, float]]]:
    """Per change (None: full), per metric, the value on each seed, from one workload's folder."""
    runs_csv = folder / "runs.csv"
    if not runs_csv.is_file():
        raise AblationError(f"{runs_csv} is missing: run the workload's ablation config first")
    with runs_csv.open(newline="", encoding="utf-8") as fh:
        runs = [r for r in csv.DictReader(fh) if r["method"] == METHOD]
    curves: dict[str, list[tuple[float, float]]] = {}
    metrics_csv = folder / "metrics.csv"
    if metrics_csv.is_file():
        with metrics_csv.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                curves.setdefault(row["run_id"], []).append(
                    (float(row["round"]), float(row["worst_acc"]))
                )
    out: dict[str | None, dict[str, dict[int, float]]] = {}
    settings: dict[str | None, dict[str, Any]] = {}
    for run in runs:
        params = json.loads(run["params"])
        change = change_of(params)
        others = {k: v for k, v in params.items() if k not in SWITCHES}
        if settings.setdefault(change, others) != others:
            raise AblationError(f"{folder.name}: two runs of '{change or 'full'}' differ")
        seed = int(run["seed"])
        values = out.setdefault(change, {m: {} for m in METRICS})
        values["worst"][seed] = float(run["final_worst_acc"])
        values["avg"][seed] = float(run["final_avg_acc"])
        curve = sorted(curves.get(run["run_id"], []))
        values["worst_auc"][seed] = (
            curve_area(np.array([t for t, _ in curve]), np.array([v for _, v in curve]))
            if curve
            else math.nan
        )
    if None not in out:
        raise AblationError(f"{folder.name}: no run of the full ADCS-2 (every switch at default)")
    for change, others in settings.items():
        # one switch apart from the full ADCS-2; observe_directions off needs refresh_every too
        allowed = {"refresh_every"} if change == SWITCHES["observe_directions"][1] else set()
        differ = {k for k in others.keys() | settings[None].keys()
                  if others.get(k) != settings[None].get(k)} - allowed  # fmt: skip
        if differ:
            raise AblationError(
                f"{folder.name}: '{change}' differs from the full ADCS-2 in "
                f"{', '.join(sorted(differ))}, not only in its switch"
            )
    return out


def compare(
    values: Mapping[str | None, Mapping[str, Mapping[int, float]]], metric: str
) -> list[Comparison]:
    """The comparisons of every change present against the full ADCS-2, Holm over them."""
    full = values[None][metric]
    rows = []
    for _, label in SWITCHES.values():
        if label not in values:
            continue
        off = values[label][metric]
        if set(off) != set(full):
            raise AblationError(
                f"'{label}' ran on seeds {sorted(off)}, the full ADCS-2 on {sorted(full)}: "
                "every variant needs the same seeds"
            )
        diff, half, n = stats.paired_difference(off, full)
        # a value that is not measured (no metrics.csv for the area) is no evidence either way
        p = stats.paired_p_value(off, full) if math.isfinite(diff) else math.nan
        rows.append((label, n, off, diff, half, p))
    tested = [i for i, r in enumerate(rows) if math.isfinite(r[5])]
    adjusted = [math.nan] * len(rows)
    for i, q in zip(tested, stats.holm([rows[i][5] for i in tested]), strict=True):
        adjusted[i] = q
    mean_full = float(np.mean(list(full.values())))
    return [
        Comparison(label, n, mean_full, float(np.mean(list(off.values()))), diff, half, p, q)
        for (label, n, off, diff, half, p), q in zip(rows, adjusted, strict=True)
    ]


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:.2f}"


def table(results: Mapping[str, Mapping[str | None, Any]], metric: str) -> list[str]:
    """One Markdown table of every workload's four comparisons on ``metric``."""
    lines = [
        f"### {METRICS[metric]} (%)",
        "",
        "| workload | change turned off | seeds | ADCS-2 | off | off − full ± 95 % | p "
        "| Holm p | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, values in results.items():
        for c in compare(values, metric):
            half = "—" if math.isnan(c.half) else f"{100 * c.half:.2f}"
            lines.append(
                f"| {workload} | {c.change} | {c.seeds} | {_pct(c.full)} | {_pct(c.off)} "
                f"| {100 * c.diff:+.2f} ± {half} | {c.p:.3g} | {c.holm_p:.3g} | {c.verdict} |"
            )
    return [*lines, ""]


def summary(results: Mapping[str, Mapping[str | None, Any]], metric: str = "worst") -> list[str]:
    """Per workload, the changes that carry the gain on ``metric``, largest loss when off first."""
    lines = [
        f"| workload | carries the gain ({METRICS[metric]}) | off is better |",
        "|---|---|---|",
    ]
    for workload, values in results.items():
        rows = sorted(compare(values, metric), key=lambda c: c.diff)
        carry = [f"{c.change} ({100 * c.diff:+.2f})" for c in rows if c.verdict == "carries gain"]
        better = [f"{c.change} ({100 * c.diff:+.2f})" for c in rows if c.verdict == "off is better"]
        lines.append(
            f"| {workload} | {', '.join(carry) or 'none detected'} | {', '.join(better) or '—'} |"
        )
    return [*lines, ""]


def report(root: Path, workloads: Sequence[str]) -> str:
    """The ablation's Markdown report over the workloads' folders under ``root``."""
    results = {w: read_runs(root / w) for w in workloads}
    lines = [
        "# The ablation of ADCS-2: which change carries the gain",
        "",
        "Written by `scripts/ablation_report.py` from the runs of each workload's folder. Each row "
        "turns one change off; off − full is paired by seed (points), p the two-sided paired "
        "t-test, Holm p its step-down adjustment over the workload's four comparisons; a change "
        f"carries gain where turning it off is worse with Holm p < {ALPHA:g}.",
        "",
        "## Summary",
        "",
        *summary(results),
        "## Every comparison",
        "",
    ]
    for metric in METRICS:
        lines += table(results, metric)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder of one results folder per workload")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args(argv)
    try:
        print(report(args.root, [w for w in args.workloads.split(",") if w]))
    except AblationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
