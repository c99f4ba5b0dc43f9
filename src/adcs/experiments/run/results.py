"""Write and read back the data files of a results folder.

The runs' records (`RunRecord`, one per run, from its
[`RunResult`][adcs.sim.RunResult]) become ``metrics.csv``, ``runs.csv``, ``group_share.csv``,
``client_acc.npz``, ``selections.npz``, ``summary.json`` and, with a system profile,
``clock.npz`` and ``system.csv`` (`write_data_files`); `load_records` reads the
records back. None of these files holds a wall-clock time or a timestamp, so a run gives the
same bytes whether it ran at once or was interrupted and resumed.
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs.columns import COLUMNS, Column, RunView
from adcs.experiments.analysis.report import RunRecord
from adcs.experiments.config import ExperimentConfig
from adcs.experiments.run.folder import write_npz
from adcs.experiments.run.plan import canonical_value
from adcs.experiments.run.resultfiles import (
    METRIC_COLUMNS,
    RUN_COLUMNS,
    parsed,
    read_manifest,
    read_table,
)
from adcs.schedulers import SCHEDULERS
from adcs.sim.data import ClientData
from adcs.sim.engine import RunResult, RunSpec, SimConfig
from adcs.sim.evaluate import _eval_subset as engine_subset
from adcs.sim.model import Model
from adcs.sim.system import client_times

__all__ = [
    "load_records",
    "named_columns",
    "param_columns",
    "privacy_note",
    "run_record",
    "system_note",
    "write_csv",
    "write_data_files",
    "write_json",
    "write_run_files",
]

_CLOCK_ARRAYS = ("round_time/", "busy_time/")


def run_record(spec: RunSpec, result: RunResult, data: ClientData) -> RunRecord:
    """The run's record: its identity, and every column of `COLUMNS`."""
    meta = spec.meta
    view = RunView(result, data)
    own = {f.name for f in dataclasses.fields(RunRecord)}
    values = {c.attr: c.compute(view) for c in COLUMNS}
    return RunRecord(
        run_id=spec.run_id,
        variant=str(meta.get("variant", spec.run_id)),
        method=str(meta.get("method", type(spec.scheduler).__name__.lower())),
        seed=spec.seed,
        params=dict(meta.get("params", {})),
        eval_rounds=np.asarray(result.eval_rounds, dtype=np.int64),
        group_clients=np.bincount(data.groups, minlength=data.n_groups).astype(np.int64),
        wall_s=float(result.wall_s),
        **{k: v for k, v in values.items() if k in own},
        extra={k: v for k, v in values.items() if k not in own},
    )


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def named_columns(records: Sequence[RunRecord]) -> list[str]:
    """The hyperparameters the runs' schedulers name (their ``named_params``), in first use."""
    names: dict[str, None] = {}
    for method in dict.fromkeys(r.method for r in records):
        cls = SCHEDULERS.get(method)
        names.update(dict.fromkeys(getattr(cls, "named_params", ())))
    return list(names)


def param_columns(records: Sequence[RunRecord]) -> list[str]:
    """Hyperparameter columns: those the schedulers name, then any that varies among a
    method's runs."""
    named = named_columns(records)
    varying: set[str] = set()
    by_method: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        by_method.setdefault(r.method, []).append(r.params)
    for params in by_method.values():
        for key in {k for p in params for k in p}:
            values = {json.dumps(p.get(key), sort_keys=True) for p in params}
            if len(values) > 1:
                varying.add(key)
    reserved = {"run_id", "method", "seed", "round", "variant", "params"}
    return [*named, *sorted(varying - set(named) - reserved)]


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(v) for v in row])


def _final_columns() -> list[str]:
    """The end-of-training columns of ``runs.csv`` and ``summary.json``: the final window, the
    final and last value of each column marked ``final``, the last round."""
    names = [c.name for c in COLUMNS.per("eval") if c.final]
    return [
        "final_round", "final_from_round", *(f"final_{n}" for n in names),
        *(f"last_{n}" for n in names), "last_round",
    ]  # fmt: skip


def _final_and_last(r: RunRecord) -> list[Any]:
    window = r.final_rounds
    attrs = [c.attr for c in COLUMNS.per("eval") if c.final]
    if window is None:
        return [None] * (3 + 2 * len(attrs))
    return [
        window[1], window[0], *(r.final(a) for a in attrs), *(r.last(a) for a in attrs),
        int(r.eval_rounds[-1]),
    ]  # fmt: skip


@dataclass(frozen=True)
class _Shown:
    """A column as one file shows it: the column and its headers."""

    column: Column
    headers: list[str]


def _shown(records: Sequence[RunRecord], per: str) -> list[_Shown]:
    out = []
    for column in COLUMNS.per("eval" if per == "eval" else "run"):
        values = [r.value(column.attr) for r in records]
        if column.shown(values):
            out.append(_Shown(column, column.headers(values)))
    return out


def _write_tables(folder: Path, records: Sequence[RunRecord]) -> None:
    columns = param_columns(records)
    id_columns = ["run_id", "method", "seed", *columns]

    def ids(r: RunRecord) -> list[Any]:
        return [r.run_id, r.method, r.seed, *(r.params.get(c) for c in columns)]

    def cells(r: RunRecord, shown: Sequence[_Shown], i: int | None) -> list[Any]:
        row: list[Any] = []
        for s in shown:
            row += s.column.cells(r.value(s.column.attr), i, len(s.headers))
        return row

    per_eval, per_run = _shown(records, "eval"), _shown(records, "run")
    write_csv(
        folder / "metrics.csv",
        [*id_columns, "round", *(h for s in per_eval for h in s.headers)],
        ([*ids(r), int(t), *cells(r, per_eval, i)]
         for r in records for i, t in enumerate(r.eval_rounds)),
    )  # fmt: skip
    write_csv(
        folder / "runs.csv",
        [*id_columns, "variant", "params", *_final_columns(),
         *(h for s in per_run for h in s.headers)],
        ([*ids(r), r.variant, json.dumps(r.params, sort_keys=True), *_final_and_last(r),
          *cells(r, per_run, None)] for r in records),
    )  # fmt: skip
    write_csv(
        folder / "group_share.csv",
        ["run_id", "method", "seed", "group", "share", "clients"],
        (
            [r.run_id, r.method, r.seed, k, s,
             None if r.group_clients is None else r.group_clients[k]]
            for r in records
            for k, s in enumerate(r.group_share)
        ),
    )  # fmt: skip


def _summary(records: Sequence[RunRecord], config: ExperimentConfig) -> dict[str, Any]:
    named = named_columns(records)
    runs = []
    for r in records:
        run = {
            "run_id": r.run_id,
            "variant": r.variant,
            "method": r.method,
            "seed": r.seed,
            **{c: r.params.get(c) for c in named},
            "params": dict(r.params),
            **dict(zip(_final_columns(), _final_and_last(r), strict=True)),
        }
        for column in sorted(COLUMNS.per("run"), key=lambda c: not c.per_group):
            value = r.value(column.attr)  # the lists first, then the numbers
            if column.present == "always" or column.has(value):
                run[column.key] = value
        runs.append(run)
    return {
        "experiment": config.name,
        "final": "mean over the last 10% of evaluations",
        "runs": runs,
    }


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.generic, enum.Enum)):
        return canonical_value(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON-able: {type(value).__name__}")


def write_json(path: Path, doc: Any) -> None:
    text = json.dumps(doc, indent=2, default=_json_default, allow_nan=True) + "\n"
    path.write_text(text, encoding="utf-8")


def _system_rows(
    fed: Mapping[int | None, ClientData],
    sim_config: SimConfig,
    seeds: Sequence[int],
    model: Model,
) -> list[list[Any]]:
    """Rows of ``system.csv``: seed, client, its devices and its full-round seconds."""
    system = sim_config.system
    assert system is not None
    rows = []
    for seed in seeds:
        data = fed[seed] if seed in fed else fed[None]
        profile = system.draw(seed, data.groups)
        times = client_times(
            profile, dim=model.dim, local_samples=sim_config.local_steps * sim_config.batch_size,
            batch_size=sim_config.batch_size, data_sizes=data.data_sizes,
            forward_cost=system.forward_cost,
        )  # fmt: skip
        for n in range(data.n_clients):
            rows.append(
                [seed, n, profile.compute[n], profile.upload[n], profile.download[n],
                 times.update[n]]
            )  # fmt: skip
    return rows


def system_note(rows: Sequence[Sequence[Any]]) -> str:
    """One line for the report: each seed's median and slowest full-round time."""
    parts = []
    for seed in sorted({int(r[0]) for r in rows}):
        times = np.array([float(r[5]) for r in rows if r[0] == seed])
        median, slowest = float(np.median(times)), float(times.max())
        parts.append(f"seed {seed}: median {median:.2f} s, slowest {slowest:.2f} s "
                     f"({slowest / median:.1f}× the median)")  # fmt: skip
    return "Client devices (system.csv): seconds of a full local round, " + "; ".join(parts) + "."


def _eval_subset(fed: Mapping[int | None, ClientData], config: SimConfig) -> np.ndarray:
    """The clients evaluated: the engine's one fixed draw (all of them without ``eval_clients``)."""
    return engine_subset(next(iter(fed.values())).n_clients, config.eval_clients)


def load_records(folder: str | Path) -> list[RunRecord]:
    """Rebuild the run records of a results folder from ``runs.csv`` and ``metrics.csv``.

    Group sizes come from ``group_share.csv`` and wall times from ``manifest.json`` when the
    folder has them.

    Raises
    ------
    FileNotFoundError
        ``runs.csv`` or ``metrics.csv`` is missing.
    ResultsFileError
        A file is empty, truncated, corrupt or not one adcs wrote (the message names it).
    """
    folder = Path(folder)
    runs_table = read_table(folder / "runs.csv", RUN_COLUMNS)
    metrics_table = read_table(folder / "metrics.csv", METRIC_COLUMNS)
    runs, run_fields = runs_table.rows, runs_table.header
    fields = metrics_table.header
    by_run: dict[str, list[dict[str, str]]] = {}
    for row in metrics_table.rows:
        by_run.setdefault(row["run_id"], []).append(row)
    clients: dict[str, dict[int, int]] = {}
    shares = folder / "group_share.csv"
    if shares.is_file():
        for row in read_table(shares, ("run_id", "group", "clients")).rows:
            if row["clients"]:
                what = f"run {row['run_id']!r}'s group sizes"
                group, count = parsed(
                    shares, what, lambda r: (int(r["group"]), int(r["clients"])), row
                )
                clients.setdefault(row["run_id"], {})[group] = count
    wall: dict[str, float] = {}
    manifest = folder / "manifest.json"
    if manifest.is_file():
        walls = read_manifest(manifest).get("run_wall_s") or {}
        wall = parsed(manifest, "run_wall_s", lambda w: {k: float(v) for k, v in w.items()}, walls)

    readers = [(c, c.file_headers(run_fields if c.per == "run" else fields)) for c in COLUMNS]
    records = []
    for row in runs:
        rows = by_run.get(row["run_id"], [])
        records.append(
            parsed(
                runs_table.path,
                f"run {row['run_id']!r} (its row, or its rows of metrics.csv)",
                _read_record,
                row,
                rows,
                readers,
                clients.get(row["run_id"]),
                wall,
            )
        )
    return records


def _read_record(
    row: Mapping[str, str],
    rows: Sequence[Mapping[str, str]],
    readers: Sequence[tuple[Column, Any]],
    groups: Mapping[int, int] | None,
    wall: Mapping[str, float],
) -> RunRecord:
    """One run's record from its ``runs.csv`` row and its ``metrics.csv`` rows."""
    own = {f.name for f in dataclasses.fields(RunRecord)}
    values = {
        c.attr: c.read([row] if c.per == "run" else rows, headers)
        for c, headers in readers
        if headers is not None
    }
    return RunRecord(
        run_id=row["run_id"],
        variant=row["variant"],
        method=row["method"],
        seed=int(row["seed"]),
        params=json.loads(row["params"]),
        eval_rounds=np.array([int(m["round"]) for m in rows], dtype=np.int64),
        group_clients=None
        if groups is None
        else np.array([groups[k] for k in sorted(groups)], dtype=np.int64),
        wall_s=wall.get(row["run_id"], float(row.get("wall_s") or "nan")),
        **{k: v for k, v in values.items() if k in own},
        extra={k: v for k, v in values.items() if k not in own},
    )


def write_run_files(
    folder: Path,
    config: ExperimentConfig,
    records: Sequence[RunRecord],
    client_acc: Mapping[str, np.ndarray],
    selections: Mapping[str, np.ndarray],
) -> None:
    """The data files every results folder has: ``runs.csv``, ``metrics.csv``,
    ``group_share.csv``, ``client_acc.npz``, ``selections.npz`` and ``summary.json``, from the
    records and the arrays (in the order given)."""
    _write_tables(folder, records)
    write_npz(folder / "client_acc.npz", client_acc)
    write_npz(folder / "selections.npz", selections)
    write_json(folder / "summary.json", _summary(records, config))


def write_data_files(
    folder: Path,
    config: ExperimentConfig,
    sim_config: SimConfig,
    fed: Mapping[int | None, ClientData],
    records: Sequence[RunRecord],
    client_acc: Mapping[str, np.ndarray],
    selections: Mapping[str, np.ndarray],
    model: Model,
) -> list[str]:
    """Write every data file of a results folder into ``folder``; the report's notes.

    ``client_acc`` maps run ids to (n_evals, n_eval_clients) accuracies; ``selections`` the
    arrays of ``selections.npz`` and, with a system profile, those of ``clock.npz``.
    """
    # the clock's arrays travel with the selections but have a file of their own
    selections = dict(selections)
    clocks = {k: selections.pop(k) for k in list(selections) if k.startswith(_CLOCK_ARRAYS)}
    client_acc = dict(client_acc)
    if sim_config.eval_clients is not None:
        client_acc["eval_clients"] = _eval_subset(fed, sim_config)
    write_run_files(folder, config, records, client_acc, selections)
    notes: list[str] = []
    if sim_config.system is not None:
        write_npz(folder / "clock.npz", clocks)
        devices = _system_rows(fed, sim_config, config.seeds, model)
        header = ["seed", "client", "compute", "upload", "download", "round_s"]
        write_csv(folder / "system.csv", header, devices)
        notes.append(system_note(devices))
    if any(r.extra.get("epsilon") is not None for r in records):
        notes.append(privacy_note(records))
    return notes


def privacy_note(records: Sequence[RunRecord]) -> str:
    """One line for the report: each private run's largest client ε and its δ (runs.csv)."""
    parts = [
        f"{r.run_id} {r.extra['epsilon']:.3g}"
        for r in records
        if r.extra.get("epsilon") is not None
    ]
    deltas = sorted({f"{r.extra['delta']:.3g}" for r in records if r.extra.get("delta")})
    return (
        "Privacy ([sim.privacy], docs/concepts/privacy.md): the largest client ε over the run "
        f"at δ = {', '.join(deltas)} (each client's in selections.npz, client_epsilon/<run_id>): "
        + "; ".join(parts)
        + "."
    )
