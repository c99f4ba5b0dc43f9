"""Sweeps over any configuration key: ``--sweep KEY=V1,V2,…`` or a ``[sweep]`` table.

A sweep runs its configuration once per point of the Cartesian product of the swept values —
over data, partition, simulator, model or a method's parameter alike — into one results folder:

* ``OUT/<point>/`` an ordinary results folder per point (``00-alpha=0.1``, …);
* ``sweep.csv`` one row per run of every point, with a column per swept key (its dotted name);
* ``sweep.png`` each method's final worst and average accuracy against the points;
* ``report.md`` the comparison across the points, then the ranks of the methods at each point
  (the leaderboard's tables: a point is a workload there).

It is run, locked, resumed and sharded on Ray as a leaderboard is
(`run_leaderboard`), so a killed sweep resumes.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.figures import pyplot
from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    config_from_file,
    read_toml,
)
from adcs.experiments.config.overrides import (
    Edit,
    check_edits,
    edited,
    parse_key,
    parse_value,
    parse_values,
    split_assignment,
)
from adcs.experiments.run.bounds import check_counts
from adcs.experiments.run.plan import runs_per_seed
from adcs.experiments.run.results import load_records
from adcs.leaderboard.ranking import entry_labels
from adcs.leaderboard.report import same_selections
from adcs.leaderboard.suite import LeaderboardOutcome, run_leaderboard

__all__ = [
    "SweepAxis",
    "check_plan",
    "configure",
    "load_with_sweep",
    "parse_sweep",
    "point_edits",
    "run_sweep",
    "sweep_axes",
    "sweep_points",
    "write_sweep_summary",
]

SWEEP_CSV = "sweep.csv"
SWEEP_FIGURE = "sweep.png"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=,+-]+")


@dataclass(frozen=True)
class SweepAxis:
    """One swept key and its values, in order.

    Attributes
    ----------
    key : tuple of str
        The dotted key's parts (``("data", "partition", "alpha")``).
    values : tuple
    """

    key: tuple[str, ...]
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        name = ".".join(self.key)
        if not self.key or not all(self.key):
            raise ConfigError(f"sweep key {name!r} must be a dotted key, e.g. data.partition.alpha")
        if not self.values:
            raise ConfigError(f"sweep {name}: give at least one value")
        if len({repr(v) for v in self.values}) != len(self.values):
            raise ConfigError(f"sweep {name} repeats a value: {list(self.values)}")

    @property
    def name(self) -> str:
        return ".".join(self.key)


def parse_sweep(text: str) -> SweepAxis:
    """``"data.partition.alpha=0.1,0.3,1"`` (or ``KEY=[…]``, a TOML array) → `SweepAxis`."""
    key, sep, raw = split_assignment(text)
    parts = parse_key(key) if sep and raw else None
    if parts is None:
        raise ConfigError(f"--sweep {text!r}: expected KEY=V1,V2,… (or KEY=[V1, V2])")
    where = f"--sweep {key}"
    values = parse_value(raw, where) if raw.startswith("[") else parse_values(raw, where)
    return SweepAxis(parts, tuple(values))


def sweep_axes(table: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[SweepAxis]:
    """A ``[sweep]`` table as axes, in order: ``"data.partition.alpha" = [0.1, 0.3]``, or the
    same key written as nested tables (``data.partition.alpha = [...]`` unquoted)."""
    axes = []
    for key, values in table.items():
        parts = (*prefix, *key.split("."))
        if isinstance(values, Mapping):
            axes.extend(sweep_axes(values, parts))
        elif isinstance(values, list):
            axes.append(SweepAxis(parts, tuple(values)))
        else:
            raise ConfigError(f"sweep.{'.'.join(parts)} must be an array of values, got {values!r}")
    return axes


def load_with_sweep(
    path: str | Path, *, data_path: str | None = None
) -> tuple[ExperimentConfig, list[SweepAxis]]:
    """A configuration file and the axes of its ``[sweep]`` table (none without one);
    ``data_path`` as for `load_config`."""
    path = Path(path)
    raw = read_toml(path)
    table = raw.pop("sweep", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: sweep must be a table of arrays ([sweep])")
    try:
        axes = sweep_axes(table)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return config_from_file(raw, path, data_path=data_path), axes


def _label(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_label(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "+".join(_label(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _frozen(value: Any) -> Any:
    """A configuration document as a hashable value that is equal exactly where the document
    is (``1`` and ``1.0`` of a float key hash and compare alike, as in the document)."""
    if isinstance(value, Mapping):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def point_edits(
    axes: Sequence[SweepAxis], values: Sequence[Any], *, valued: bool = False
) -> list[Edit]:
    """The edits of one sweep point: each axis's key set to its value there, labelled
    ``sweep KEY`` (``valued``: ``sweep KEY=VALUE``)."""
    return [
        Edit(f"sweep {a.name}" + (f"={v!r}" if valued else ""), a.key, v, "sweep")
        for a, v in zip(axes, values, strict=True)
    ]


def check_plan(config: ExperimentConfig, edits: Sequence[Edit] = ()) -> None:
    """The plan check of a configuration about to run, the same from every entry point: its
    records must fit in memory (`check_counts`).

    With the ``edits`` about to be made to ``config``, the counts they ask for (``--rounds``,
    ``--seeds``, ``sim__rounds``) are checked before the edits are parsed, so a huge ``--seeds``
    is refused before its seeds are even listed, and named by its label (``--seeds 1000000000``).
    """
    asked: dict[str, int] = {}
    labels: dict[str, str] = {}
    for e in edits:
        if e.key == ("sim", "rounds") and isinstance(e.value, int):
            asked["rounds"], labels["rounds"] = e.value, e.label
        elif e.key == ("seeds",) and isinstance(e.value, Sized):
            asked["seeds"], labels["seeds"] = len(e.value), e.label
    check_counts(config, runs_per_seed=runs_per_seed(config), labels=labels, **asked)


def configure(
    config: ExperimentConfig, edits: Sequence[Edit] = (), axes: Sequence[SweepAxis] = ()
) -> ExperimentConfig:
    """The configuration a run (or each point of a sweep over ``axes``) starts from: the one
    path of a configuration and its overrides, for the command line and `adcs.run` alike.

    The edits' overlaps, the sweep's keys among them, are refused once (`check_edits`); the
    edits are made to ``config``'s document and parsed once (`edited`); the plan is checked
    (`check_plan`). Each point of a sweep is then `sweep_points` of the result.

    Raises
    ------
    ConfigError
        Naming the override or key at fault.
    """
    if "name" in [a.name for a in axes]:  # it would be replaced by each point's own, silently
        raise ConfigError("sweep name: a point is named after its values; sweep another key")
    check_edits(config.document, [*edits, *point_edits(axes, [a.values[0] for a in axes])])
    check_plan(config, edits)  # the counts asked for, before they are listed
    out = edited(config, edits)
    check_plan(out)
    return out


def sweep_points(
    config: ExperimentConfig,
    axes: Sequence[SweepAxis],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[dict[str, Any], ExperimentConfig]]:
    """Every point of the sweep: its values by dotted key, and the configuration it runs.

    Each point's configuration is ``config``'s document with the point's edits, parsed once,
    named after the point (``03-alpha=0.3-p=0.5``) and checked like the file (`check_plan`), so
    a value the configuration refuses is named with its key before anything runs. Two points
    that are one configuration are refused (found by hashing each point's checked document:
    linear in the number of points). ``progress(done, total)`` is called after each point.
    """
    if "name" in [a.name for a in axes]:  # it would be replaced by each point's own, silently
        raise ConfigError("sweep name: a point is named after its values; sweep another key")
    check_edits(config.document, point_edits(axes, [a.values[0] for a in axes]))
    names = [a.name for a in axes]
    total = math.prod(len(a.values) for a in axes)
    points: list[tuple[dict[str, Any], ExperimentConfig]] = []
    seen: dict[Any, str] = {}  # each point's configuration, as checked, to the point
    for i, values in enumerate(itertools.product(*(a.values for a in axes))):
        point = dict(zip(names, values, strict=True))
        label = "-".join(f"{a.key[-1]}={_label(v)}" for a, v in zip(axes, values, strict=True))
        edits = point_edits(axes, values, valued=True)
        checked = edited(config, edits, name=f"{i:02d}-{_UNSAFE.sub('', label)}"[:96])
        check_plan(checked)  # the file's bounds too
        where = ", ".join(f"{k}={v!r}" for k, v in point.items())
        said = seen.setdefault(_frozen({**checked.document, "name": ""}), where)
        if said != where:
            raise ConfigError(f"sweep: {said} and {where} are one configuration; sweep others")
        points.append((point, checked))
        if progress is not None:
            progress(i + 1, total)
    return points


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
            rows.append({"point": config.name, **{k: _label(v) for k, v in point.items()}, **run})
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
    lines += ["", f"![the sweep]({SWEEP_FIGURE})", "", "---", ""]
    ranks = path.read_text(encoding="utf-8") if path.is_file() else ""
    path.write_text("\n".join(lines) + "\n" + ranks, encoding="utf-8")
