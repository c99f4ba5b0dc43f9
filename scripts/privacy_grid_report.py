"""Private selection's utility against ε (issue 34): results/privacy/report.md from the grid.

Reads the folders `scripts/privacy_grid.py` writes under GRID: ``WORKLOAD/inf`` (Uniform and
every method without privacy), ``WORKLOAD/inf-FORM`` (a private form without privacy) and
``WORKLOAD/epsE`` (every probing method and private form behind the private probe channel at
ε = E per client over the run). Uniform releases nothing, so its ε = ∞ run is its run at every ε.
Every number comes from the folders' ``runs.csv`` (``final_*``: the mean over each run's last
10 % of evaluations) and ``manifest.json``; a grid point without its folder is listed as not run.

Statistics, per workload, method and ε, over the seeds (paired: common random numbers):

* worst-client and average accuracy: mean ± 95 % t-interval;
* *beats Uniform*: the paired difference in worst-client accuracy is positive and a two-sided
  paired t-test at 5 % tells it from Uniform's (`adcs.experiments.analysis.stats.tied`);
* *stops beating Uniform*: the largest ε of the grid at which it does not beat Uniform;
* *kept*: (mean gain at ε) / (mean gain without privacy), the gain being worst-client accuracy
  minus Uniform's; the goal (issue 34) is kept ≥ 80 % at ε = 4 on at least two of the three
  workloads for the best private scheduler.

Usage::

    python scripts/privacy_grid_report.py GRID [--figure PNG]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path

from adcs.experiments.analysis.stats import paired_difference, t_interval, tied

WORKLOADS = ("paper", "dirichlet", "bernoulli")
EPSILONS = (1.0, 2.0, 4.0, 8.0, 16.0, math.inf)
BASELINE = "uniform"
FORM = "adcs.privacy.forms:AveragedLoss"
SAMPLED = f"{FORM} sample"
"""AveragedLoss with ``sample = true``: its own entry (keyed by its method and that parameter)."""
FORM_FOLDERS = ("averaged_loss", "averaged_loss_sampled")
"""Suffixes of the private forms' own folders: ``inf-SUFFIX`` (no privacy), ``epsE-SUFFIX``."""
LABELS = {
    "uniform": "Uniform",
    "powerofchoice": "PowerOfChoice",
    "ocs": "OCS",
    "divfl": "DivFL",
    "adcs": "ADCS",
    "adcs2": "ADCS-2",
    FORM: "AveragedLoss (private form)",
    SAMPLED: "AveragedLoss, sampled (private form)",
}
METHODS = tuple(LABELS)
GOAL_EPSILON, GOAL_SHARE, GOAL_WORKLOADS = 4.0, 0.8, 2

Values = dict[int, float]


def _read(folder: Path) -> dict[str, dict[str, Values]]:
    """method → metric (worst, avg, epsilon) → seed → value."""
    out: dict[str, dict[str, Values]] = {}
    with (folder / "runs.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            sampled = json.loads(row.get("params") or "{}").get("sample") is True
            method = f"{row['method']} sample" if sampled else row["method"]
            entry = out.setdefault(method, {"worst": {}, "avg": {}, "epsilon": {}})
            seed = int(row["seed"])
            entry["worst"][seed] = float(row["final_worst_acc"])
            entry["avg"][seed] = float(row["final_avg_acc"])
            entry["epsilon"][seed] = float(row["epsilon"]) if row.get("epsilon") else math.nan
    return out


def load(grid: Path) -> dict[str, dict[float, dict[str, dict[str, Values]]]]:
    """workload → ε → method → metric → seed → value (the grid points that ran)."""
    data: dict[str, dict[float, dict[str, dict[str, Values]]]] = {}
    for name in WORKLOADS:
        points: dict[float, dict[str, dict[str, Values]]] = {}
        if (grid / name / "inf" / "runs.csv").is_file():
            points[math.inf] = _read(grid / name / "inf")
            for suffix in FORM_FOLDERS:
                folder = grid / name / f"inf-{suffix}"
                if (folder / "runs.csv").is_file():
                    points[math.inf].update(_read(folder))
        for eps in EPSILONS[:-1]:
            folder = grid / name / f"eps{eps:g}"
            if (folder / "runs.csv").is_file():
                points[eps] = _read(folder)
                for suffix in FORM_FOLDERS:
                    extra = grid / name / f"eps{eps:g}-{suffix}"
                    if (extra / "runs.csv").is_file():
                        points[eps].update(_read(extra))
                if math.inf in points and BASELINE in points[math.inf]:
                    points[eps][BASELINE] = points[math.inf][BASELINE]
        data[name] = points
    return data


def _eps(eps: float) -> str:
    return "∞" if math.isinf(eps) else f"{eps:g}"


def _pct(values: Values) -> str:
    mean, half = t_interval([[v] for v in values.values()])
    return f"{100 * mean[0]:.1f} ± {100 * half[0]:.1f}"


def beats(method: Values, uniform: Values) -> bool:
    """Positive paired difference that a two-sided paired t-test at 5 % tells from zero."""
    mean, _, _ = paired_difference(method, uniform)
    return not math.isnan(mean) and mean > 0.0 and not tied(method, uniform)


def gain(method: Values, uniform: Values) -> float:
    return paired_difference(method, uniform)[0]


def _table(points: Mapping[float, dict[str, dict[str, Values]]], metric: str) -> list[str]:
    ran = [e for e in EPSILONS if e in points]
    head = "| method | " + " | ".join(f"ε = {_eps(e)}" for e in ran) + " |"
    lines = [head, "|---|" + "---|" * len(ran)]
    for method in METHODS:
        cells = []
        for eps in ran:
            entry = points[eps].get(method)
            cells.append(_pct(entry[metric]) if entry else "—")
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return lines


def thresholds(points: Mapping[float, dict[str, dict[str, Values]]]) -> dict[str, str]:
    """Per method: the ε below which it no longer beats Uniform, in words."""
    uniform = points.get(math.inf, {}).get(BASELINE)
    out = {}
    for method in METHODS[1:]:
        ran = [e for e in EPSILONS if e in points and method in points[e]]
        if uniform is None or not ran:
            out[method] = "not run"
            continue
        wins = {e: beats(points[e][method]["worst"], uniform["worst"]) for e in ran}
        if not wins.get(math.inf, False) and math.inf in wins:
            out[method] = "does not beat Uniform even without privacy"
            continue
        losing = [e for e in ran if not wins[e]]
        if not losing:
            out[method] = f"beats Uniform at every ε run (down to {_eps(min(ran))})"
            continue
        stop = max(losing)
        above = [e for e in ran if e > stop]
        again = any(wins[e] for e in ran if e < stop)
        text = f"no longer beats Uniform at ε = {_eps(stop)}"
        if above:
            text += f"; beats it at ε = {', '.join(_eps(e) for e in above)}"
        if again:
            text += " (and again at some ε below)"
        out[method] = text
    return out


def kept(points: Mapping[float, dict[str, dict[str, Values]]], eps: float) -> dict[str, float]:
    """Per method: mean gain at ε / mean gain without privacy (NaN: not run, or it does not
    beat Uniform without privacy: there is no gain to keep, and a ratio to a gain the seeds
    cannot tell from zero says nothing)."""
    uniform = points.get(math.inf, {}).get(BASELINE)
    out = {}
    for method in METHODS[1:]:
        if uniform is None or eps not in points or method not in points[eps]:
            out[method] = math.nan
            continue
        if method not in points[math.inf]:
            out[method] = math.nan
            continue
        if not beats(points[math.inf][method]["worst"], uniform["worst"]):
            out[method] = math.nan
            continue
        full = gain(points[math.inf][method]["worst"], uniform["worst"])
        out[method] = gain(points[eps][method]["worst"], uniform["worst"]) / full
    return out


def report(grid: Path) -> str:
    data = load(grid)
    lines = [
        "# Private selection: utility against ε (issue 34)",
        "",
        "Generated by `scripts/privacy_grid_report.py` from the folders under `grid/` "
        "(commands in `run.sh`); every number is read from their `runs.csv`. The grid: the "
        "leaderboard's workloads (T = 4 000, seeds 0–2), every probing method behind the "
        "private probe channel at ε per client over the run, δ = 1/N^1.1, the training updates "
        "aggregated in the clear (secure aggregation without DP: the ε is the selection's own "
        "cost, what a scheduler spends beyond Uniform, which releases nothing). Each method's "
        "noise is calibrated to its own plan of releases (`experiments/privacy/grid/`). "
        "Accuracies are final worst-client and average test accuracy (%), mean ± 95 % t-interval "
        "over the seeds. A scheduler *beats Uniform* at an ε when its worst-client accuracy minus "
        "Uniform's, paired by seed, has a positive mean and a two-sided paired t-test at 5 % "
        "rejects a zero difference.",
        "",
    ]
    missing = [
        f"{name} at ε = {_eps(e)}" for name in WORKLOADS for e in EPSILONS if e not in data[name]
    ]
    missing += [
        f"{LABELS[SAMPLED]} on {name} at ε = {_eps(e)}"
        for name in WORKLOADS
        for e in EPSILONS
        if e in data[name] and SAMPLED not in data[name][e]
    ]
    lines.append("**Not run:** " + ", ".join(missing) + "." if missing else "Every grid point ran.")
    walls = [
        float(json.loads(m.read_text(encoding="utf-8"))["wall_s"])
        for m in sorted(grid.glob("*/*/manifest.json"))
        if not m.parent.name.startswith(".")  # an adcs run still in progress
    ]
    lines += [
        "",
        f"Wall time: {sum(walls) / 60:.0f} min over {len(walls)} folders (their manifests' "
        "`wall_s` summed; each run with one worker, on a shared 2-core machine).",
        "",
    ]
    for name in WORKLOADS:
        points = data[name]
        lines += [f"## {name}", ""]
        if math.inf not in points:
            lines += ["Not run.", ""]
            continue
        lines += ["Worst-client accuracy (%):", "", *_table(points, "worst"), ""]
        lines += ["Average accuracy (%):", "", *_table(points, "avg"), ""]
        lines += ["Where each scheduler stops beating Uniform (worst-client accuracy):", ""]
        for method, text in thresholds(points).items():
            lines.append(f"- {LABELS[method]}: {text}.")
        lines.append("")
    lines += summary(data)
    lines += goal(data)
    return "\n".join(lines) + "\n"


def stop_epsilon(points: Mapping[float, dict[str, dict[str, Values]]], method: str) -> str:
    """The largest ε run at which ``method`` does not beat Uniform, as a table cell."""
    uniform = points.get(math.inf, {}).get(BASELINE)
    ran = [e for e in EPSILONS if e in points and method in points[e]]
    if uniform is None or math.inf not in ran:
        return "not run"
    losing = [e for e in ran if not beats(points[e][method]["worst"], uniform["worst"])]
    if math.inf in losing:
        return "no gain at ∞"
    return _eps(max(losing)) if losing else f"none (down to {_eps(min(ran))})"


def summary(data: Mapping[str, Mapping[float, dict[str, dict[str, Values]]]]) -> list[str]:
    lines = [
        "## Where each scheduler stops beating Uniform",
        "",
        "The largest ε run at which it does not beat Uniform in worst-client accuracy (the "
        "workload's list above says where it beats Uniform again at a smaller ε):",
        "",
        "| method | " + " | ".join(WORKLOADS) + " |",
        "|---|" + "---|" * len(WORKLOADS),
    ]
    for method in METHODS[1:]:
        cells = [stop_epsilon(data[name], method) for name in WORKLOADS]
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def goal(data: Mapping[str, Mapping[float, dict[str, dict[str, Values]]]]) -> list[str]:
    lines = [
        f"## The goal: {100 * GOAL_SHARE:.0f} % of the non-private gain at ε = {GOAL_EPSILON:g}",
        "",
        "Share of each scheduler's non-private gain in worst-client accuracy over Uniform that "
        f"it keeps at ε = {GOAL_EPSILON:g} (mean gain at ε = {GOAL_EPSILON:g} / mean gain "
        "without privacy; — where either was not run, or where it does not beat Uniform without "
        "privacy: no gain to keep):",
        "",
        "| method | " + " | ".join(WORKLOADS) + " |",
        "|---|" + "---|" * len(WORKLOADS),
    ]
    shares = {name: kept(data[name], GOAL_EPSILON) for name in WORKLOADS}
    for method in METHODS[1:]:
        cells = []
        for name in WORKLOADS:
            value = shares[name][method]
            cells.append("—" if math.isnan(value) else f"{100 * value:.0f} %")
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    met = []
    for name in WORKLOADS:
        values = [v for v in shares[name].values() if not math.isnan(v)]
        if values and max(values) >= GOAL_SHARE:
            met.append(name)
    ran = [n for n in WORKLOADS if GOAL_EPSILON in data[n] and math.inf in data[n]]
    best = {
        n: max(((v, m) for m, v in shares[n].items() if not math.isnan(v)), default=(math.nan, ""))
        for n in ran
    }
    lines += [""]
    for n in ran:
        value, method = best[n]
        text = "—" if math.isnan(value) else f"{LABELS[method]}, {100 * value:.0f} %"
        lines.append(f"- {n}: the largest share kept: {text}.")
    verdict = "met" if len(met) >= GOAL_WORKLOADS else "not met"
    lines += [
        "",
        f"**The goal is {verdict}**: a scheduler keeps ≥ {100 * GOAL_SHARE:.0f} % on "
        f"{len(met)} of the {len(ran)} workloads run at ε = {GOAL_EPSILON:g}"
        + (f" ({', '.join(met)})" if met else "")
        + f"; it asks for {GOAL_WORKLOADS} of {len(WORKLOADS)}.",
    ]
    return lines


def figure(grid: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load(grid)
    fig, axes = plt.subplots(2, len(WORKLOADS), figsize=(4.2 * len(WORKLOADS), 7), squeeze=False)
    ticks = [math.log2(e) if not math.isinf(e) else 5.0 for e in EPSILONS]
    for col, name in enumerate(WORKLOADS):
        points = data[name]
        for row, (metric, title) in enumerate((("worst", "worst-client"), ("avg", "average"))):
            ax = axes[row][col]
            for method in METHODS:
                xs, ys = [], []
                for eps, x in zip(EPSILONS, ticks, strict=True):
                    entry = points.get(eps, {}).get(method)
                    if entry:
                        xs.append(x)
                        ys.append(100 * t_interval([[v] for v in entry[metric].values()])[0][0])
                if xs:
                    style = "--" if method == BASELINE else "-"
                    ax.plot(xs, ys, style, marker="o", label=LABELS[method])
            ax.set_xticks(ticks, [_eps(e) for e in EPSILONS])
            ax.set_title(f"{name}: {title} accuracy")
            ax.set_xlabel("ε per client over the run")
            ax.set_ylabel("final accuracy (%)")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=Path)
    parser.add_argument("--figure", type=Path, help="also draw the figure into this PNG")
    args = parser.parse_args()
    print(report(args.grid), end="")
    if args.figure is not None:
        figure(args.grid, args.figure)


if __name__ == "__main__":
    main()
