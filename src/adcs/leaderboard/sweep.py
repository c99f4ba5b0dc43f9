"""Sweeps run as a leaderboard: ``--sweep KEY=V1,V2,…`` or a ``[sweep]`` table.

A sweep runs its configuration once per point of the Cartesian product of the swept values —
over data, partition, simulator, model or a method's parameter alike — into one results folder:

* ``OUT/<point>/`` an ordinary results folder per point (``00-alpha=0.1``, …);
* ``sweep.csv`` one row per run of every point, with a column per swept key (its dotted name);
* ``sweep.png`` each method's final worst and average accuracy against the points;
* ``report.md`` the comparison across the points, each entry's point of highest mean final worst
  accuracy and whether it lies at the edge of a numeric axis (`best_points`: a grid to widen),
  then the ranks of the methods at each point (the leaderboard's tables: a point is a workload
  there).

It is run, locked, resumed and sharded on Ray as a leaderboard is
(`run_leaderboard`), so a killed sweep resumes. The points themselves are
`adcs.experiments.run.configure.sweep_points` (the axes: `adcs.experiments.config.sweep`).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.figures import pyplot
from adcs.experiments.config import ExperimentConfig
from adcs.experiments.config.sweep import SweepAxis, value_label
from adcs.experiments.run.configure import sweep_points
from adcs.experiments.run.results import load_records
from adcs.leaderboard.ranking import entry_labels
from adcs.leaderboard.report import same_selections
from adcs.leaderboard.suite import LeaderboardOutcome, run_leaderboard

__all__ = ["best_points", "run_sweep", "write_sweep_summary"]

SWEEP_CSV = "sweep.csv"
SWEEP_FIGURE = "sweep.png"


def run_sweep(
    config: ExperimentConfig,
    axes: Sequence[SweepAxis],
    out: str | Path,
    *,
    points: Sequence[tuple[dict[str, Any], ExperimentConfig]] | None = None,
    **options: Any,
) -> LeaderboardOutcome:
    """Run every point of the sweep into ``out`` and write its summary.

    ``points``: `sweep_points` of ``config`` and ``axes``, when the caller has them
    already. ``options`` are `run_leaderboard`'s (``force``,
    ``resume``, ``workers``, ``executor``, ``progress``, …).
    """
    if points is None:
        points = sweep_points(config, axes)
    return run_leaderboard(
        [c for _, c in points], out, kind="sweep",
        finalize=lambda folder: write_sweep_summary(folder, points), **options,
    )  # fmt: skip


def _runs(folder: Path) -> list[dict[str, str]]:
    with (folder / "runs.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_sweep_summary(
    folder: Path, points: Sequence[tuple[dict[str, Any], ExperimentConfig]]
) -> dict[str, Any]:
    """Write ``sweep.csv``, ``sweep.png`` and the report's comparison; return the manifest's part.

    Parameters
    ----------
    folder : Path
        The sweep's folder, holding one results folder per point.
    points : as `sweep_points` returns them
    """
    keys = list(points[0][0])
    rows = []
    for point, config in points:
        for run in _runs(folder / config.name):
            rows.append(
                {"point": config.name, **{k: value_label(v) for k, v in point.items()}, **run}
            )
    columns = list(dict.fromkeys(c for r in rows for c in r))
    with (folder / SWEEP_CSV).open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    names = [c.name for _, c in points]
    labels = entry_labels([r for n in names for r in load_records(folder / n)])
    table = {labels[v]: cells for v, cells in _finals(rows, names).items()}
    same = {n: why for n in names if (why := same_selections(folder / n))}
    _figure(folder / SWEEP_FIGURE, table, names)
    _report(folder / "report.md", table, points, keys, same)
    return {"sweep": {"keys": keys, "points": {c.name: p for p, c in points}}}


def _finals(
    rows: Sequence[Mapping[str, str]], names: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """Mean over seeds of the final worst and average accuracy, by variant, point and metric."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for r in rows:
        cell = out.setdefault(r["variant"], {}).setdefault(r["point"], {"worst": [], "avg": []})
        cell["worst"].append(float(r["final_worst_acc"]))
        cell["avg"].append(float(r["final_avg_acc"]))
    return {
        variant: {
            p: {m: float(np.mean(v)) for m, v in cells[p].items()} for p in names if p in cells
        }
        for variant, cells in out.items()
    }


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def best_points(
    table: Mapping[str, Mapping[str, Mapping[str, float]]],
    points: Sequence[tuple[Mapping[str, Any], str]],
) -> list[str]:
    """Each entry's point of highest mean final worst accuracy, in words, one line per entry.

    The line names the runner-up too, and each numeric axis on which the point takes the
    smallest or largest value swept (a better point may lie beyond it) or a value inside.

    Parameters
    ----------
    table : mapping
        Entry → point name → ``{"worst": mean, "avg": mean}`` (fractions).
    points : sequence of (mapping, str)
        Each point's swept values by key, and its name.
    """
    values = {name: point for point, name in points}
    keys = list(dict.fromkeys(k for point, _ in points for k in point))
    axes = {}
    for k in keys:
        tried = [point[k] for point, _ in points if k in point]
        if tried and all(_numeric(v) for v in tried) and len(set(tried)) > 1:
            axes[k] = (min(tried), max(tried))
    out = []
    for entry, cells in table.items():
        order = sorted(cells, key=lambda n: -cells[n]["worst"])
        if not order:
            continue
        best = order[0]
        text = f"**{entry}: highest mean final worst accuracy at {best}** ({100 * cells[best]['worst']:.2f}%"
        if len(order) > 1:
            text += f"; the next, {order[1]}, {100 * cells[order[1]]['worst']:.2f}%"
        text += ")"
        edge = [k for k, (lo, hi) in axes.items() if values[best].get(k) in (lo, hi)]
        inside = [k for k in axes if k not in edge]
        if edge:
            text += ". At the edge of the grid in " + ", ".join(
                f"`{k}` (the {'smallest' if values[best][k] == axes[k][0] else 'largest'} "
                "value swept)"
                for k in edge
            )
            text += ": a point beyond it may do better"
        if inside:
            text += (
                (". " if not edge else "; ")
                + "inside the grid in "
                + ", ".join(f"`{k}`" for k in inside)
            )
        out.append(text + ".")
    return out


def _figure(
    path: Path, table: Mapping[str, Mapping[str, Mapping[str, float]]], names: Sequence[str]
) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    x = np.arange(len(names))
    for variant, cells in table.items():
        for ax, metric in zip(axes, ("worst", "avg"), strict=True):
            ax.plot(
                x, [100 * cells.get(p, {}).get(metric, np.nan) for p in names], "o-", label=variant
            )
    for ax, title in zip(
        axes, ("final worst accuracy (%)", "final average accuracy (%)"), strict=True
    ):
        ax.set_title(title)
        ax.set_xticks(x, names, rotation=30, ha="right", fontsize="small")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _report(
    path: Path,
    table: Mapping[str, Mapping[str, Mapping[str, float]]],
    points: Sequence[tuple[dict[str, Any], ExperimentConfig]],
    keys: Sequence[str],
    same: Mapping[str, str],
) -> None:
    names = [c.name for _, c in points]
    lines = [
        "# Sweep",
        "",
        f"Swept: {', '.join(f'`{k}`' for k in keys)} — {len(points)} points, each an ordinary "
        "results folder here; every run with its point's values in `sweep.csv`.",
        "",
        *(f"**The schedulers had little to choose at {n}:** {why}." for n, why in same.items()),
        *([""] if same else []),
        "## Final worst / average accuracy (%) at each point, mean over seeds",
        "",
        "| entry | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for variant, cells in table.items():
        row = [
            f"{100 * cells[p]['worst']:.1f} / {100 * cells[p]['avg']:.1f}" if p in cells else "—"
            for p in names
        ]
        lines.append(f"| {variant} | " + " | ".join(row) + " |")
    best = best_points(table, [(p, c.name) for p, c in points])
    lines += ["", *(line for b in best for line in (b, ""))]
    lines += [f"![the sweep]({SWEEP_FIGURE})", "", "---", ""]
    ranks = path.read_text(encoding="utf-8") if path.is_file() else ""
    path.write_text("\n".join(lines) + "\n" + ranks, encoding="utf-8")
