"""Write and read back the data files of a results folder.

The runs' records (:class:`~adcs.experiments.report.RunRecord`, one per run, from its
:class:`~adcs.sim.RunResult`) become ``metrics.csv``, ``runs.csv``, ``group_share.csv``,
``client_acc.npz``, ``selections.npz``, ``summary.json`` and, with a system profile,
``clock.npz`` and ``system.csv`` (:func:`write_data_files`); :func:`load_records` reads the
records back. None of these files holds a wall-clock time or a timestamp, so a run gives the
same bytes whether it ran at once or was interrupted and resumed.
"""

from __future__ import annotations

import csv
import enum
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.adversary import honest_accuracy
from adcs.experiments.config import ExperimentConfig
from adcs.experiments.folder import write_npz
from adcs.experiments.plan import _canonical
from adcs.experiments.report import RunRecord
from adcs.sim.data import ClientData
from adcs.sim.engine import RunResult, RunSpec, SimConfig
from adcs.sim.evaluate import _eval_subset as engine_subset
from adcs.sim.model import Model
from adcs.sim.system import client_times

__all__ = ["STANDARD_PARAM_COLUMNS", "load_records", "param_columns", "write_data_files"]

STANDARD_PARAM_COLUMNS = ("theta", "refresh_every")
"""Hyperparameter columns every results file has had; any other varying one is added after."""

_CLOCK_ARRAYS = ("round_time/", "busy_time/")


def _record(spec: RunSpec, result: RunResult, data: ClientData) -> RunRecord:
    mean_available = float(np.mean(result.n_available)) if result.n_available.size else math.nan
    meta = spec.meta
    return RunRecord(
        run_id=spec.run_id,
        variant=str(meta.get("variant", spec.run_id)),
        method=str(meta.get("method", type(spec.scheduler).__name__.lower())),
        seed=spec.seed,
        params=dict(meta.get("params", {})),
        eval_rounds=np.asarray(result.eval_rounds, dtype=np.int64),
        worst_acc=np.asarray(result.worst_acc, dtype=np.float64),
        avg_acc=np.asarray(result.avg_acc, dtype=np.float64),
        test_loss=np.asarray(result.test_loss, dtype=np.float64),
        group_share=np.asarray(result.group_share, dtype=np.float64),
        tv_to_uniform=float(result.tv_to_uniform),
        client_updates=int(result.client_updates),
        loss_evals=int(result.loss_evals),
        dropped=int(result.dropped),
        mean_available=mean_available,
        non_finite=int(result.non_finite),
        group_clients=np.bincount(data.groups, minlength=data.n_groups).astype(np.int64),
        wall_s=float(result.wall_s),
        eval_clock=result.eval_clock,
        total_time=result.total_time,
        client_time=result.client_time,
        p10_acc=np.asarray(result.p10_acc, dtype=np.float64),
        group_acc=np.asarray(result.group_acc, dtype=np.float64),
        honest_acc=_honest_acc(result, meta.get("malicious", ())),
    )


def _honest_acc(result: RunResult, malicious: Sequence[int]) -> np.ndarray:
    """Worst / p10 / mean accuracy of the evaluated honest clients at each evaluation (n, 3)."""
    if not malicious:
        return np.empty((0, 3))
    liars = np.flatnonzero(np.isin(result.eval_clients, malicious)).tolist()
    rows = [honest_accuracy(acc, liars) for acc in np.asarray(result.client_acc)]
    return np.array([[h.worst, h.p10, h.average] for h in rows], dtype=np.float64).reshape(-1, 3)


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


def param_columns(records: Sequence[RunRecord]) -> list[str]:
    """Hyperparameter columns: the standard ones, then any that varies among a method's runs."""
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
    extra = sorted(varying - set(STANDARD_PARAM_COLUMNS) - reserved)
    return [*STANDARD_PARAM_COLUMNS, *extra]


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(v) for v in row])


def _final_and_last(r: RunRecord) -> list[Any]:
    window = r.final_rounds
    if window is None:
        return [None] * 9
    return [
        window[1], window[0], r.final("worst_acc"), r.final("avg_acc"), r.final("test_loss"),
        r.last("worst_acc"), r.last("avg_acc"), r.last("test_loss"), int(r.eval_rounds[-1]),
    ]  # fmt: skip


_FINAL_COLUMNS = (
    "final_round", "final_from_round", "final_worst_acc", "final_avg_acc", "final_test_loss",
    "last_worst_acc", "last_avg_acc", "last_test_loss", "last_round",
)  # fmt: skip


def _timed(records: Sequence[RunRecord]) -> bool:
    return bool(records) and all(r.eval_clock is not None for r in records)


def _write_tables(folder: Path, records: Sequence[RunRecord]) -> None:
    columns = param_columns(records)
    id_columns = ["run_id", "method", "seed", *columns]
    timed = _timed(records)  # the clock's columns come last, only when there is a clock

    def ids(r: RunRecord) -> list[Any]:
        return [r.run_id, r.method, r.seed, *(r.params.get(c) for c in columns)]

    def clock(r: RunRecord) -> list[Any]:
        return list(r.eval_clock) if r.eval_clock is not None else [None] * r.eval_rounds.size

    def totals(r: RunRecord) -> list[Any]:
        return [r.total_time, r.client_time] if timed else []

    # the scale metrics follow the paper's; the clock's column stays last
    n_acc_groups = max(r.group_acc.shape[1] if r.group_acc.ndim == 2 else 0 for r in records)
    attacked = any(r.honest_acc.size for r in records)  # [sim.attack]: the honest clients' too

    def honest(r: RunRecord, i: int) -> list[Any]:
        if not attacked:
            return []
        return r.honest_acc[i].tolist() if r.honest_acc.shape[0] > i else [None] * 3

    _write_csv(
        folder / "metrics.csv",
        [*id_columns, "round", "worst_acc", "avg_acc", "test_loss", "p10_acc",
         *(f"acc_g{k}" for k in range(n_acc_groups)), *(_HONEST_COLUMNS * attacked),
         *(["clock_s"] * timed)],
        (
            [*ids(r), int(t), r.worst_acc[i], r.avg_acc[i], r.test_loss[i],
             *_scale_metrics(r, i, n_acc_groups), *honest(r, i), *([clock(r)[i]] * timed)]
            for r in records
            for i, t in enumerate(r.eval_rounds)
        ),
    )  # fmt: skip
    n_groups = max(r.group_share.size for r in records)
    _write_csv(
        folder / "runs.csv",
        [
            *id_columns, "variant", "params", *_FINAL_COLUMNS, "tv_to_uniform", "client_updates",
            "loss_evals", *(f"share_g{k}" for k in range(n_groups)), "dropped", "mean_available",
            "non_finite", *(["sim_time_s", "client_time_s"] if timed else []),
        ],
        (
            [
                *ids(r), r.variant, json.dumps(r.params, sort_keys=True), *_final_and_last(r),
                r.tv_to_uniform, r.client_updates, r.loss_evals, *r.group_share, r.dropped,
                r.mean_available, r.non_finite, *totals(r),
            ]
            for r in records
        ),
    )  # fmt: skip
    _write_csv(
        folder / "group_share.csv",
        ["run_id", "method", "seed", "group", "share", "clients"],
        (
            [
                r.run_id,
                r.method,
                r.seed,
                k,
                s,
                None if r.group_clients is None else r.group_clients[k],
            ]
            for r in records
            for k, s in enumerate(r.group_share)
        ),
    )


_HONEST_COLUMNS = ["honest_worst_acc", "honest_p10_acc", "honest_avg_acc"]


def _scale_metrics(r: RunRecord, i: int, n_groups: int) -> list[Any]:
    """p10_acc and the per-group accuracies of evaluation i (blank where not recorded)."""
    p10 = r.p10_acc[i] if r.p10_acc.size > i else None
    groups: list[Any] = (
        r.group_acc[i].tolist() if r.group_acc.ndim == 2 and r.group_acc.shape[0] > i else []
    )
    groups += [math.nan] * (n_groups - len(groups))
    return [p10, *(None if math.isnan(g) else g for g in groups)]


def _summary(records: Sequence[RunRecord], config: ExperimentConfig) -> dict[str, Any]:
    runs = []
    for r in records:
        values = dict(zip(_FINAL_COLUMNS, _final_and_last(r), strict=True))
        runs.append(
            {
                "run_id": r.run_id,
                "variant": r.variant,
                "method": r.method,
                "seed": r.seed,
                **{c: r.params.get(c) for c in STANDARD_PARAM_COLUMNS},
                "params": dict(r.params),
                **values,
                "group_share": [float(x) for x in r.group_share],
                "tv_to_uniform": r.tv_to_uniform,
                "client_updates": r.client_updates,
                "loss_evals": r.loss_evals,
                "dropped": r.dropped,
                "mean_available": r.mean_available,
                "non_finite": r.non_finite,
            }
        )
        if r.eval_clock is not None:
            runs[-1].update({"sim_time_s": r.total_time, "client_time_s": r.client_time})
    return {
        "experiment": config.name,
        "final": "mean over the last 10% of evaluations",
        "runs": runs,
    }


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.generic, enum.Enum)):
        return _canonical(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON-able: {type(value).__name__}")


def _write_json(path: Path, doc: Any) -> None:
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


def _system_note(rows: Sequence[Sequence[Any]]) -> str:
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
    """
    folder = Path(folder)
    with (folder / "runs.csv").open(newline="", encoding="utf-8") as fh:
        runs = list(csv.DictReader(fh))
    with (folder / "metrics.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        metrics = list(reader)
        fields = set(reader.fieldnames or ())
    by_run: dict[str, list[dict[str, str]]] = {}
    for row in metrics:
        by_run.setdefault(row["run_id"], []).append(row)
    clients: dict[str, dict[int, int]] = {}
    if (folder / "group_share.csv").is_file():
        with (folder / "group_share.csv").open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row.get("clients"):
                    clients.setdefault(row["run_id"], {})[int(row["group"])] = int(row["clients"])
    wall: dict[str, float] = {}
    manifest = folder / "manifest.json"
    if manifest.is_file():
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        wall = {k: float(v) for k, v in (doc.get("run_wall_s") or {}).items()}

    records = []
    for row in runs:
        rows = by_run.get(row["run_id"], [])
        shares = [float(v) for k, v in row.items() if k.startswith("share_g") and v != ""]
        groups = clients.get(row["run_id"])
        records.append(
            RunRecord(
                run_id=row["run_id"],
                variant=row["variant"],
                method=row["method"],
                seed=int(row["seed"]),
                params=json.loads(row["params"]),
                eval_rounds=np.array([int(m["round"]) for m in rows], dtype=np.int64),
                worst_acc=np.array([float(m["worst_acc"]) for m in rows]),
                avg_acc=np.array([float(m["avg_acc"]) for m in rows]),
                test_loss=np.array([float(m["test_loss"]) for m in rows]),
                group_share=np.array(shares),
                tv_to_uniform=float(row["tv_to_uniform"]),
                client_updates=int(row["client_updates"]),
                loss_evals=int(row["loss_evals"]),
                dropped=int(row.get("dropped") or 0),
                mean_available=float(row.get("mean_available") or "nan"),
                non_finite=int(row.get("non_finite") or 0),
                group_clients=None
                if groups is None
                else np.array([groups[k] for k in sorted(groups)], dtype=np.int64),
                wall_s=wall.get(row["run_id"], float(row.get("wall_s") or "nan")),
                eval_clock=(
                    np.array([float(m["clock_s"]) for m in rows]) if "clock_s" in fields else None
                ),
                total_time=float(row["sim_time_s"]) if row.get("sim_time_s") else None,
                client_time=float(row["client_time_s"]) if row.get("client_time_s") else None,
                p10_acc=np.array([float(m.get("p10_acc") or "nan") for m in rows]),
                group_acc=np.array(
                    [
                        [float(v or "nan") for k, v in m.items() if k.startswith("acc_g")]
                        for m in rows
                    ]
                ),
                honest_acc=np.array(
                    [[float(m[c] or "nan") for c in _HONEST_COLUMNS] for m in rows]
                    if fields >= set(_HONEST_COLUMNS)
                    else np.empty((0, 3))
                ).reshape(-1, 3),
            )
        )
    return records


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
    _write_tables(folder, records)
    client_acc = dict(client_acc)
    if sim_config.eval_clients is not None:
        client_acc["eval_clients"] = _eval_subset(fed, sim_config)
    write_npz(folder / "client_acc.npz", client_acc)
    write_npz(folder / "selections.npz", selections)
    _write_json(folder / "summary.json", _summary(records, config))
    notes: list[str] = []
    if sim_config.system is not None:
        write_npz(folder / "clock.npz", clocks)
        devices = _system_rows(fed, sim_config, config.seeds, model)
        header = ["seed", "client", "compute", "upload", "download", "round_s"]
        _write_csv(folder / "system.csv", header, devices)
        notes.append(_system_note(devices))
    return notes
