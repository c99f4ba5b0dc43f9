"""Run an experiment configuration and write its results folder (docs/design.md §3, §4, §6).

:func:`expand_runs` turns a configuration into distinct runs — one :class:`~adcs.sim.RunSpec` per
(method, hyperparameters, seed); the same run asked for twice (e.g. ADCS θ = 0.8, R = 20 by
Figures 1, 2 and 3) is made once. :func:`run_experiment` loads and partitions the data, advances
the runs in batches with :func:`adcs.sim.engine.simulate`, and writes the results folder::

    metrics.csv      one row per run × evaluation: run_id, method, seed, theta, refresh_every,
                     any other hyperparameter that varies between runs, round, worst_acc,
                     avg_acc, test_loss, p10_acc (the 10th-percentile client accuracy), acc_g<k>
                     (the mean accuracy of group k's evaluated clients); with [sim.attack],
                     honest_worst_acc, honest_p10_acc, honest_avg_acc (the malicious left out)
    runs.csv         one row per run: the same identity columns, variant, params (JSON),
                     final_* (mean over the last 10 % of evaluations, from final_from_round to
                     final_round) and last_* (the last evaluation), TV, costs, group shares
    group_share.csv  one row per run × group: share of selection slots, clients in the group
    client_acc.npz   per-client test accuracy of every run, shape (n_evals, n_eval_clients), and
                     ``eval_clients`` when ``sim.eval_clients`` samples the clients evaluated
    selections.npz   who was chosen and who could have been: per run ``selected/<run_id>``
                     (rounds × m, −1 where fewer were selected) and ``returned/<run_id>`` (same
                     shape, bool: not dropped); per seed ``n_available/seed<s>`` (rounds,) and,
                     unless every client is always available, ``available/seed<s>``: the masks
                     bit-packed along clients (``np.unpackbits(a, axis=1, count=N)``), or, when
                     too large to keep, nothing — the manifest's availability model and the seed
                     regenerate them
    summary.json     {"experiment": name, "runs": [...]}: the final and last numbers per run
    manifest.json    configuration, seeds, versions, git commit, data source and checksums, the
                     sessions that ran it (start time, wall time) and each run's wall time
    report.md, figures (curves.png, or the paper's fig1–3.png), table1.md/.csv when asked

With a ``[sim.system]`` table (client devices and the simulated clock, :mod:`adcs.sim.system`)
metrics.csv gains ``clock_s`` (simulated seconds at the evaluation), runs.csv and summary.json
``sim_time_s`` and ``client_time_s``, and three files are added::

    clock.npz        per run ``round_time/<run_id>`` and ``busy_time/<run_id>`` (rounds,): the
                     simulated seconds and the client-seconds of every round
    system.csv       per seed and client: compute (samples/s), upload and download (bytes/s) and
                     round_s, the expected seconds of a full local round
    time.png         accuracy against rounds and simulated time; report.md gains the
                     time-to-accuracy section

``metrics.csv``, ``runs.csv``, ``selections.npz``, ``summary.json`` (and ``client_acc.npz``,
``group_share.csv``, ``clock.npz``) hold no wall-clock time and no timestamp: a run gives the same bytes
whether it ran at once or was interrupted and resumed. Times are in ``manifest.json`` only.

The folder is written as ``.OUT.partial`` beside the target, locked, checkpointed every
``checkpoint_every`` rounds (default about every 30 s of simulation), and renamed at the end
(:mod:`adcs.experiments.folder`); ``resume=True`` continues an interrupted run.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import enum
import hashlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from adcs.adversary import honest_accuracy
from adcs.data import Dataset, FashionMNIST, Partition, partition_data
from adcs.data.fashion_mnist import data_folders as fashion_mnist_folders
from adcs.experiments import paper
from adcs.experiments.adversary import adversarial_run
from adcs.experiments.bounds import check_clients
from adcs.experiments.config import (
    ConfigError,
    DataConfig,
    ExperimentConfig,
    config_to_dict,
)
from adcs.experiments.distributed import ShardExecutor
from adcs.experiments.figures import write_figures
from adcs.experiments.folder import (
    ResultsFolder,
    RunError,
    os_error,
    provenance,
    source_checkout,
    write_npz,
)
from adcs.experiments.report import (
    ReportContext,
    RunRecord,
    SeriesSummary,
    curve_series,
    summaries,
    write_report,
)
from adcs.experiments.workload import DataSource, federate, load_data
from adcs.schedulers.base import Scheduler
from adcs.sim.data import ClientData
from adcs.sim.engine import (
    Checkpointing,
    RunResult,
    RunSpec,
    SimCheckpoint,
    SimConfig,
    check_simulation,
    simulate,
)
from adcs.sim.model import Model
from adcs.sim.system import client_times

__all__ = [
    "ExperimentOutcome",
    "RunError",
    "RunInterrupted",
    "check_output",
    "expand_runs",
    "load_records",
    "make_partition",
    "run_experiment",
]

logger = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: simulated rounds done over all batches, and their total."""

MEMORY_BUDGET_BYTES = 1 << 30
"""Rough memory allowed per batch of runs; larger grids are split into several batches."""

CHECKPOINT_FORMAT = 1
STANDARD_PARAM_COLUMNS = ("theta", "refresh_every")
"""Hyperparameter columns every results file has had; any other varying one is added after."""
_CLOCK_ARRAYS = ("round_time/", "busy_time/")


class RunInterrupted(RunError):
    """The run was stopped (KeyboardInterrupt, SIGTERM through the CLI) before it finished.

    Attributes
    ----------
    resumable : bool
        Its checkpoint was kept in ``partial`` and ``resume=True`` continues it.
    partial : Path
    progress : str
        How far the kept checkpoint got.
    """

    def __init__(self, message: str, *, resumable: bool, partial: Path, progress: str) -> None:
        super().__init__(message)
        self.resumable = resumable
        self.partial = partial
        self.progress = progress


# ---------------------------------------------------------------------------------------------
# planning


def _canonical(value: Any) -> Any:
    """A JSON-able, comparable form of a hyperparameter value."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_canonical(v) for v in value]
    return value


def _fmt_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, (int, float, str)):
        return str(value)
    digest = hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:8]
    return f"h{digest}"


def _resolved_params(scheduler: Scheduler) -> dict[str, Any]:
    """Every hyperparameter of a built scheduler except ``m``, canonicalised."""
    if not dataclasses.is_dataclass(scheduler):
        return {}
    return {
        f.name: _canonical(getattr(scheduler, f.name))
        for f in dataclasses.fields(scheduler)
        if f.init and f.name != "m"
    }


def _default_params(cls: type[Any]) -> dict[str, Any]:
    if not dataclasses.is_dataclass(cls):
        return {}
    return {
        f.name: _canonical(f.default)
        for f in dataclasses.fields(cls)
        if f.init and f.default is not dataclasses.MISSING
    }


def _variant_name(
    method: str, params: Mapping[str, Any], defaults: Mapping[str, Any], named: Sequence[str]
) -> str:
    """The method, its named hyperparameters, then any other off its default (sorted)."""
    parts = [method]
    for key in named:
        if key in params:
            parts.append(f"{key}={_fmt_value(params[key])}")
    for key in sorted(params):
        if key not in named and (key not in defaults or params[key] != defaults[key]):
            parts.append(f"{key}={_fmt_value(params[key])}")
    return "-".join(parts)


def expand_runs(config: ExperimentConfig) -> list[RunSpec]:
    """Every distinct run of ``config``: methods × hyperparameter grid × seeds, duplicates removed.

    Two entries giving the same hyperparameters (explicitly or by default) yield one run. Order:
    configuration order of the first appearance, seeds innermost. Each run's ``meta`` holds its
    ``method``, ``variant`` (the run id without the seed) and ``params`` (every hyperparameter
    but ``m``, JSON-able).
    """
    planned: dict[tuple[str, str, int], RunSpec] = {}
    for method in config.methods:
        cls = method.scheduler_class
        defaults = _default_params(cls)
        named = tuple(getattr(cls, "named_params", ()))
        for point in method.grid():
            scheduler = method.build(config.m, point)
            params = _resolved_params(scheduler)
            variant = _variant_name(method.name, params, defaults, named)
            identity = json.dumps(params, sort_keys=True, default=str)
            for seed in config.seeds:
                key = (method.name, identity, seed)
                if key not in planned:
                    meta = {"method": method.name, "variant": variant, "params": params}
                    spec = RunSpec(scheduler, seed, f"{variant}-seed={seed}", meta)
                    planned[key] = _adversarial(spec, config)
    runs = list(planned.values())
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):  # two identities formatted alike: should not happen
        raise ConfigError(f"run identifiers collide: {sorted(i for i in ids if ids.count(i) > 1)}")
    return runs


def _adversarial(spec: RunSpec, config: ExperimentConfig) -> RunSpec:
    """The run under the configuration's ``[sim.attack]`` and ``[sim.defence]`` (if any).

    The scheduler is wrapped (lies told to a defended server) and the aggregation hook set (a
    poison, a robust rule); ``meta["malicious"]`` lists the run's malicious clients.
    """
    attack, defence = config.sim.attack, config.sim.defence
    if attack is None and defence is None:
        return spec
    n = config.data.total_clients
    if n is None:  # the malicious set is drawn before the data are loaded
        raise ConfigError(
            "[sim.attack] and [sim.defence] need a configuration that fixes N "
            f"(dataset {config.data.dataset!r} with partition {config.data.partition!r} does not)"
        )
    scheduler, aggregator = adversarial_run(spec.scheduler, spec.seed, n, attack, defence)
    malicious = [] if attack is None else list(attack.malicious(spec.seed, n))
    meta = {**spec.meta, "malicious": malicious}
    return dataclasses.replace(spec, scheduler=scheduler, meta=meta, aggregator=aggregator)


# ---------------------------------------------------------------------------------------------
# data


def make_partition(
    dataset: Dataset | FashionMNIST, data: DataConfig, rng: np.random.Generator
) -> Partition:
    """The clients' shares of ``dataset`` that ``data`` describes, drawn with ``rng``.

    The partition of :data:`adcs.data.PARTITIONS` named by ``data.partition``, with its
    parameters.
    """
    return partition_data(str(data.partition), dataset, rng, **data.partition_params)


def _partition_error(exc: ValueError, data: DataConfig) -> str:
    """A partition's refusal, naming the configuration key the user can change."""
    text = str(exc)
    where = "data" if data.flat else "data.partition"
    for key in ("train_per_client", "test_per_client"):
        if text.startswith(key) and key in data.partition_params:
            return f"{where}.{text}"
    if text.startswith("n_clients="):
        count = (
            f"{where}.n_groups × {where}.clients_per_group"
            if data.partition == "paper_groups"
            else f"{where}.n_clients"
        )
        return f"{count} = {data.total_clients}: {text.split(': ', 1)[1]}"
    return f"data: partition {data.partition!r}: {text}"


def sim_settings(config: ExperimentConfig, n_clients: int | None = None) -> SimConfig:
    """The simulator's configuration of ``config`` (a trace or device profile is read here).

    ``n_clients``: the population, when the data decide it (FEMNIST's writers); default the
    configured one (1 while unknown: a trace is checked again once the data are read).

    Raises
    ------
    ConfigError
        The ``[sim]`` table cannot be built (e.g. an unreadable trace).
    """
    if n_clients is None:
        n_clients = config.data.total_clients
    try:
        return config.sim.build(n_clients if n_clients is not None else 1)
    except (TypeError, ValueError) as exc:
        where = "" if str(exc).startswith("sim.") else "sim: "  # the key when it names none
        raise ConfigError(f"{config.source}: {where}{exc}") from exc


def _federated_data(dataset: DataSource, config: ExperimentConfig) -> dict[int | None, ClientData]:
    """Client data: one entry (key None) shared by every run, or one per training seed."""
    try:
        return federate(dataset, config.data, config.seeds)
    except ValueError as exc:
        raise ConfigError(f"{config.source}: {_partition_error(exc, config.data)}") from exc


def _runs_per_batch(data: ClientData, config: SimConfig, m: int, dim: int) -> int:
    """How many runs fit one batch under :data:`MEMORY_BUDGET_BYTES` (a rough, generous estimate).

    Per run: its weights, the updates of a probe of every client available in a round and their
    gradients (n_available × dim each, float32, the worst case; ``dim`` is the model's; cost
    follows the active clients),
    its selection records, and its logits on the evaluated clients' test data.
    """
    n_eval = min(data.n_clients if config.eval_clients is None else config.eval_clients,
                 data.n_clients)  # fmt: skip
    n_test = int(data.test_sizes.mean() * n_eval)  # the evaluated clients' test samples
    active = int(config.availability.mask(0, 0, data.groups).sum())
    records = 5 * config.rounds * m + 8 * config.eval_rounds.size * n_eval
    per_run = 4 * dim * (3 * active + 8) + 8 * n_test * data.n_classes * 3 + records
    return max(1, min(512, MEMORY_BUDGET_BYTES // per_run))


def _batches(
    plan: Sequence[RunSpec],
    fed: Mapping[int | None, ClientData],
    sim_config: SimConfig,
    dim: int,
) -> list[tuple[ClientData, list[RunSpec]]]:
    """The plan in batches: runs of one seed together (they share minibatches), memory bounded."""
    out: list[tuple[ClientData, list[RunSpec]]] = []
    m = max(int(r.scheduler.m) for r in plan)
    for key, data in fed.items():
        runs = sorted((r for r in plan if key is None or r.seed == key), key=lambda r: r.seed)
        size = _runs_per_batch(data, sim_config, m, dim)
        for i in range(0, len(runs), size):
            out.append((data, runs[i : i + size]))
    return out


# ---------------------------------------------------------------------------------------------
# records and the results files


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


# ---------------------------------------------------------------------------------------------
# checkpoints


def resume_identity(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration as a resume compares it: without the data's path and the description."""
    doc = config_to_dict(config)
    doc["data"].pop("path", None)
    doc.pop("description", None)
    return doc


def _identity(
    config: ExperimentConfig, dataset: DataSource, plan: Sequence[RunSpec], n_batches: int
) -> dict[str, Any]:
    """What must be the same for a checkpoint to be resumed (the data by content, not path)."""
    return {
        "config": resume_identity(config),
        "data": dict(dataset.checksums) or {"source": dataset.source},
        "runs": [r.run_id for r in plan],
        "batches": n_batches,
    }


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, Mapping):
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(doc, list) and any(isinstance(v, Mapping) for v in doc):
        out = {}
        for i, v in enumerate(doc):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: doc}


def config_differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``key (interrupted run: a, now: b)`` for every key whose value differs."""
    a, b = _flatten(saved), _flatten(now)
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<unset>") != b.get(key, "<unset>"):
            out.append(
                f"{key} (interrupted run: {a.get(key, 'unset')!r}, now: {b.get(key, 'unset')!r})"
            )
    return out


@dataclass
class _Progress:
    """Where an experiment stands: batches finished, the current batch's simulator checkpoint,
    and the shards (one seed of one batch) an executor finished, as ``(batch, seed)``."""

    identity: dict[str, Any]
    finished: int = 0
    current: SimCheckpoint | None = None
    sessions: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # earlier ones
    workers: int = 1
    session: dict[str, Any] = dataclasses.field(default_factory=dict)  # this one
    started: float = dataclasses.field(default_factory=time.perf_counter)
    shards: set[tuple[int, int]] = dataclasses.field(default_factory=set)

    def all_sessions(self) -> list[dict[str, Any]]:
        """The earlier sessions and this one, with its wall time so far."""
        return [*self.sessions, {**self.session, "wall_s": time.perf_counter() - self.started}]

    def describe(self, rounds: int) -> str:
        batches = self.identity["batches"]
        if self.finished >= batches:
            return "simulation complete"
        if self.shards and self.current is None:
            return f"{len(self.shards)} shard(s) of one seed done"
        done = 0 if self.current is None else self.current.rounds_done
        where = f" in batch {self.finished + 1} of {batches}" if batches > 1 else ""
        return f"round {done} of {rounds}{where}"

    def state(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "identity": self.identity, "finished": self.finished,
            "current": self.current, "sessions": self.all_sessions(), "workers": self.workers,
            "shards": sorted(self.shards),
        }  # fmt: skip


def _load_progress(folder: ResultsFolder, identity: dict[str, Any], source: str) -> _Progress:
    state = folder.load_checkpoint()
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise RunError(f"--resume: the checkpoint in {folder.partial} is of another adcs version")
    saved = state["identity"]
    diffs = config_differences(saved["config"], identity["config"])
    if diffs:
        raise ConfigError(
            f"{source}: --resume: the configuration differs from the interrupted run's in "
            + "; ".join(diffs)
        )
    if saved["data"] != identity["data"]:
        raise ConfigError(
            f"{source}: --resume: the data differ from the interrupted run's (other checksums)"
        )
    if saved["runs"] != identity["runs"] or saved["batches"] != identity["batches"]:
        raise RunError("--resume: the interrupted run planned other runs (another adcs version?)")
    return _Progress(
        identity, int(state["finished"]), state["current"], list(state["sessions"]),
        int(state["workers"]), shards={(int(b), int(s)) for b, s in state.get("shards", ())},
    )  # fmt: skip


def _shard_key(identity: Mapping[str, Any], batch: int, seed: int) -> str:
    """A shard's name: the experiment's identity (digest), the batch and the seed."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return f"{hashlib.sha256(text.encode()).hexdigest()[:16]}/batch-{batch}/seed-{seed}"


def _shard_part(batch: int, seed: int) -> str:
    return f"batch-{batch}-seed-{seed}.pkl"


def _seeds_of(runs: Sequence[RunSpec]) -> list[int]:
    return sorted({r.seed for r in runs})


def _pending_shards(
    batches: Sequence[tuple[ClientData, list[RunSpec]]], state: _Progress
) -> list[tuple[int, int, ClientData, list[RunSpec]]]:
    """``(batch, seed, data, runs)`` of every shard not yet finished, in plan order."""
    out = []
    for b, (data, runs) in enumerate(batches):
        if b < state.finished:
            continue
        for seed in _seeds_of(runs):
            if (b, seed) not in state.shards:
                out.append((b, seed, data, [r for r in runs if r.seed == seed]))
    return out


def _load_finished(
    folder: ResultsFolder, b: int, runs: Sequence[RunSpec], state: _Progress
) -> dict[str, RunResult]:
    """Results of ``runs`` of batch ``b`` saved by an earlier session: its part or its shards'."""
    seeds = _seeds_of(runs)
    if b < state.finished and not all((b, s) in state.shards for s in seeds):
        return {res.spec.run_id: res for res in folder.load_part(f"batch-{b}.pkl")}
    return {res.spec.run_id: res for s in seeds for res in folder.load_part(_shard_part(b, s))}


@dataclass(frozen=True)
class _Simulated:
    records: list[RunRecord]
    client_acc: dict[str, np.ndarray]
    selections: dict[str, np.ndarray]
    wall_s: float
    shard_keys: tuple[str, ...] = ()


def _simulate_all(
    batches: Sequence[tuple[ClientData, list[RunSpec]]],
    plan: Sequence[RunSpec],
    sim_config: SimConfig,
    progress: ProgressFn | None,
    workers: int,
    folder: ResultsFolder,
    state: _Progress,
    checkpoint_every: int | None,
    checkpoint_seconds: float,
    model: Model,
    executor: ShardExecutor | None = None,
) -> _Simulated:
    """Advance every batch (finished ones are read back from the checkpoint), in plan order.

    Locally each batch is one :func:`simulate` call with its own checkpoints. With an
    ``executor`` the batches are cut into shards (the runs of one seed), all submitted at once;
    each finished shard is saved, so an interrupted run resumes with the shards not yet done.
    A run's results do not depend on the runs it was simulated with, so either way gives the
    same numbers.
    """
    keep = checkpoint_every != 0
    keys: tuple[str, ...] = ()
    if executor is not None:
        fresh, keys = _run_shards_elsewhere(
            batches, sim_config, progress, folder, state, executor, keep, model
        )
    else:
        fresh = _run_batches_here(
            batches, sim_config, progress, workers, folder, state, checkpoint_every,
            checkpoint_seconds, model,
        )  # fmt: skip
    records: list[RunRecord] = []
    client_acc: dict[str, np.ndarray] = {}
    selections: dict[str, np.ndarray] = {}
    wall = 0.0
    for b, (data, runs) in enumerate(batches):
        missing = [r for r in runs if r.run_id not in fresh]
        saved = _load_finished(folder, b, missing, state) if missing else {}
        for spec in runs:
            res = fresh[spec.run_id] if spec.run_id in fresh else saved[spec.run_id]
            records.append(_record(spec, res, data))
            wall += res.wall_s
            client_acc[spec.run_id] = np.asarray(res.client_acc, dtype=np.float32)
            selections[f"selected/{spec.run_id}"] = res.selected
            selections[f"returned/{spec.run_id}"] = res.returned
            selections.setdefault(f"n_available/seed{spec.seed}", res.n_available)
            if res.available is not None:
                selections.setdefault(f"available/seed{spec.seed}", res.available)
            if res.round_time is not None and res.busy_time is not None:
                selections[f"round_time/{spec.run_id}"] = res.round_time
                selections[f"busy_time/{spec.run_id}"] = res.busy_time
    order = {r.run_id: i for i, r in enumerate(plan)}
    records.sort(key=lambda r: order[r.run_id])
    client_acc = {r.run_id: client_acc[r.run_id] for r in records}
    return _Simulated(records, client_acc, dict(sorted(selections.items())), wall, keys)


def _run_batches_here(
    batches: Sequence[tuple[ClientData, list[RunSpec]]],
    sim_config: SimConfig,
    progress: ProgressFn | None,
    workers: int,
    folder: ResultsFolder,
    state: _Progress,
    checkpoint_every: int | None,
    checkpoint_seconds: float,
    model: Model,
) -> dict[str, RunResult]:
    """Simulate the unfinished batches in this process (and its forked workers), in order.

    Returns the results computed, by run id. Runs of a batch whose shards an executor finished
    in an earlier session are not redone.
    """
    rounds = sim_config.rounds
    total = rounds * len(batches)
    keep = checkpoint_every != 0
    fresh: dict[str, RunResult] = {}
    if progress is not None:  # where this session starts (a resumed run part-way)
        start = state.current.rounds_done if state.current is not None else 0
        progress(min(state.finished, len(batches)) * rounds + start, total)
    for b, (data, runs) in enumerate(batches):
        if b < state.finished:
            continue
        todo = [r for r in runs if (b, r.seed) not in state.shards]

        def report(k: int, start: int = b * rounds) -> None:
            if progress is not None:
                progress(start + min(k, rounds), total)

        def save(checkpoint: SimCheckpoint) -> None:
            state.current = checkpoint
            folder.save_checkpoint(state.state(), _info(state, rounds))

        policy = (
            Checkpointing(save, every=checkpoint_every, seconds=checkpoint_seconds)
            if keep
            else None
        )
        resume_from, state.current = state.current, None
        if resume_from is not None and resume_from.run_ids != tuple(r.run_id for r in todo):
            resume_from = None  # taken of other runs: an executor has finished some since
        results: list[RunResult] = []
        if todo:
            results = simulate(
                todo, data, sim_config, progress=report, model=model, workers=workers,
                checkpoint=policy, resume_from=resume_from,
            )  # fmt: skip
        fresh.update((res.spec.run_id, res) for res in results)
        if len(todo) < len(runs):  # saved as shards, beside those the executor saved
            for seed in _seeds_of(todo):
                if keep:
                    part = [res for res in results if res.spec.seed == seed]
                    folder.save_part(_shard_part(b, seed), part)
                state.shards.add((b, seed))
        elif keep:
            folder.save_part(f"batch-{b}.pkl", results)
        state.finished, state.current = b + 1, None
        if keep:
            folder.save_checkpoint(state.state(), _info(state, rounds))
    if progress is not None:
        progress(total, total)
    return fresh


def _run_shards_elsewhere(
    batches: Sequence[tuple[ClientData, list[RunSpec]]],
    sim_config: SimConfig,
    progress: ProgressFn | None,
    folder: ResultsFolder,
    state: _Progress,
    executor: ShardExecutor,
    keep: bool,
    model: Model,
) -> tuple[dict[str, RunResult], tuple[str, ...]]:
    """Submit every unfinished shard to ``executor``; save each as it comes back.

    Returns the results, by run id, and the shards' keys.
    """
    rounds = sim_config.rounds
    n_shards = sum(len(_seeds_of(runs)) for _, runs in batches)
    pending = _pending_shards(batches, state)
    keys: dict[str, tuple[int, int]] = {}
    for b, seed, data, runs in pending:
        key = _shard_key(state.identity, b, seed)
        keys[key] = (b, seed)
        executor.submit(key, runs, data, sim_config, model)
    done = n_shards - len(pending)
    if progress is not None:
        progress(done * rounds, n_shards * rounds)
    fresh: dict[str, RunResult] = {}
    remaining = set(keys)
    try:
        for key, results in executor.completed(list(keys)):
            remaining.discard(key)
            b, seed = keys[key]
            fresh.update((res.spec.run_id, res) for res in results)
            state.shards.add((b, seed))
            if keep:
                folder.save_part(_shard_part(b, seed), results)
                folder.save_checkpoint(state.state(), _info(state, rounds))
            done += 1
            if progress is not None:
                progress(done * rounds, n_shards * rounds)
    except BaseException:
        executor.cancel(sorted(remaining))
        raise
    return fresh, tuple(keys)


@dataclass(frozen=True, eq=False)
class _Prepared:
    """An experiment made ready to simulate: its data, simulator settings, model and batches."""

    dataset: DataSource
    fed: dict[int | None, ClientData]
    sim_config: SimConfig
    model: Model
    batches: list[tuple[ClientData, list[RunSpec]]]
    identity: dict[str, Any]


def _prepare(
    config: ExperimentConfig,
    plan: list[RunSpec],
    sim_config: SimConfig,
    dataset: DataSource | None,
) -> _Prepared:
    """Load and partition the data, check the settings against them, build the model, batch.

    Raises
    ------
    ConfigError
        The configuration does not fit the data or the model cannot be built.
    """
    if dataset is None:
        dataset = load_data(config.data)
    fed = _federated_data(dataset, config)
    first = next(iter(fed.values()))
    if config.m > first.n_clients:
        raise ConfigError(
            f"{config.source}: m={config.m} exceeds the number of clients N={first.n_clients}"
        )
    check_clients(config, first.n_clients)  # eval_clients ≤ N; the records fit with the real N
    if config.data.total_clients is None:  # a trace is checked against the real N
        sim_config = sim_settings(config, first.n_clients)
    for data in fed.values():
        try:
            check_simulation(data, sim_config)
        except ValueError as exc:
            raise ConfigError(f"{config.source}: sim.{exc}") from exc
    try:  # the model is built and checked on one batch before any round
        model = config.model.build(first.input_shape, first.n_classes)
    except ConfigError as exc:
        raise ConfigError(f"{config.source}: {exc}") from None
    batches = _batches(plan, fed, sim_config, model.dim)
    identity = _identity(config, dataset, plan, len(batches))
    return _Prepared(dataset, fed, sim_config, model, batches, identity)


def submit_shards(
    config: ExperimentConfig,
    out: str | Path,
    executor: ShardExecutor,
    *,
    dataset: DataSource | None = None,
) -> int:
    """Submit the shards a run of ``config`` into ``out`` will ask ``executor`` for, ahead of it.

    Lets a caller start the shards of several experiments at once (the leaderboard) and then run
    each with ``run_experiment(..., executor=executor)``, which finds them submitted. Shards an
    interrupted run at ``out`` already finished are not submitted again. Returns how many were.
    """
    plan = expand_runs(config)
    ready = _prepare(config, plan, sim_settings(config), dataset)
    state = _Progress(ready.identity)
    folder = ResultsFolder(out)
    if folder.has_checkpoint():
        with contextlib.suppress(RunError, ConfigError):
            state = _load_progress(folder, ready.identity, config.source)
    pending = _pending_shards(ready.batches, state)
    for b, seed, data, runs in pending:
        key = _shard_key(ready.identity, b, seed)
        executor.submit(key, runs, data, ready.sim_config, ready.model)
    return len(pending)


def _info(state: _Progress, rounds: int) -> dict[str, Any]:
    done = 0 if state.current is None else state.current.rounds_done
    return {
        "progress": state.describe(rounds), "rounds_done": done, "rounds": rounds,
        "batches_finished": state.finished, "batches": state.identity["batches"],
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# running


@dataclass(frozen=True, eq=False)
class ExperimentOutcome:
    """What :func:`run_experiment` produced.

    Attributes
    ----------
    folder : Path
        The results folder.
    records : list of RunRecord
    summaries : list of SeriesSummary
        The report's rows: the paper's series for its setting, else one per variant.
    claims : list of Claim
        The paper's claims as checked in ``report.md`` (empty off the paper's setting).
    paper_setting : bool
        The configuration is of the paper's setting (its report, columns and verdicts).
    figures : list of str
        File names of the figures written.
    wall_s : float
    is_subset : bool
        The shipped Fashion-MNIST subset was used.
    data_source : str
    resumed : bool
        The run continued an interrupted one.
    """

    folder: Path
    records: list[RunRecord]
    summaries: list[SeriesSummary]
    claims: list[paper.Claim]
    paper_setting: bool
    figures: list[str]
    wall_s: float
    is_subset: bool
    data_source: str
    resumed: bool = False


def data_folders(config: ExperimentConfig) -> list[Path]:
    """The data folders a run of ``config`` may read (results must keep clear of them)."""
    data = config.data
    if data.dataset == "fashion-mnist":
        return fashion_mnist_folders(data.path)
    if data.path is None:
        return []
    path = Path(data.path)
    return [path if path.is_dir() else path.parent]


def check_output(
    config: ExperimentConfig,
    out: str | Path,
    *,
    force: bool = False,
    resume: bool = False,
    dataset: DataSource | None = None,
) -> ResultsFolder:
    """Check ``out`` for a run of ``config`` before any work (see :meth:`ResultsFolder.check`).

    Raises
    ------
    RunError
        ``out`` cannot hold the results (one line, naming why).
    """
    data = [] if dataset is not None else data_folders(config)
    folder = ResultsFolder(out, data=data, keep=source_checkout())
    folder.check(force=force, resume=resume)
    return folder


def run_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    quick: bool = False,
    dataset: DataSource | None = None,
    progress: ProgressFn | None = None,
    extra_manifest: Mapping[str, Any] | None = None,
    finalize: Callable[[Path], Mapping[str, Any] | None] | None = None,
    workers: int | None = None,
    checkpoint_every: int | None = None,
    checkpoint_seconds: float = 30.0,
    command: str = "",
    executor: ShardExecutor | None = None,
) -> ExperimentOutcome:
    """Run every distinct run of ``config`` and write the results folder ``out``.

    Parameters
    ----------
    config : ExperimentConfig
    out : path
        Results folder: new, empty, or (with ``overwrite``) an earlier adcs results folder.
    overwrite : bool
        Replace an existing adcs results folder (only once the new results are complete), and
        remove the stale partial folders of dead runs on ``out``.
    resume : bool
        Continue the interrupted run on ``out`` from its checkpoint; the configuration must be
        the same (the differing keys are named otherwise). The results files are byte-identical
        to those of an uninterrupted run.
    quick : bool
        Recorded in the manifest and the report (verdicts then indicative only).
    dataset : Dataset, FashionMNIST or Synthetic, optional
        Use these data instead of loading the configured data set (tests, callers holding it).
    progress : callable, optional
        ``progress(done, total)`` in simulated rounds summed over batches.
    extra_manifest : mapping, optional
        Added to ``manifest.json`` (e.g. the command line).
    finalize : callable, optional
        Called with the partial folder once the runs' files and figures are written (e.g. to
        add the theory check in a subfolder, which ``report.md`` then links to); a mapping it
        returns is added to the manifest.
    workers : int, optional
        Processes advancing the seeds' minibatch streams (results do not depend on it); default
        1, or on resume the interrupted run's.
    checkpoint_every : int, optional
        Rounds between checkpoints; ``None`` (default) about every ``checkpoint_seconds`` of
        simulation; 0 never (an interrupted run then leaves nothing to resume).
    checkpoint_seconds : float
    command : str
        The command line, named in the lock file while the run writes ``out``.
    executor : ShardExecutor, optional
        Run the shards (the runs of one seed) there instead — e.g. a
        :class:`~adcs.experiments.distributed.RayExecutor` — and gather them here; the results
        files are those of a local run, byte for byte. ``workers`` then does not apply. Each
        finished shard is checkpointed (unless ``checkpoint_every`` is 0).

    Raises
    ------
    ConfigError
        The configuration does not fit the data, or differs from the checkpoint's (checked
        before any simulation).
    RunError
        The output folder is unusable, busy, or holds a stale partial folder (checked before any
        work); an OS failure while writing.
    RunInterrupted
        KeyboardInterrupt (or the CLI's SIGTERM) stopped the run; says whether it is resumable.
    """
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if checkpoint_every is not None and (
        isinstance(checkpoint_every, bool)
        or not isinstance(checkpoint_every, int)
        or checkpoint_every < 0
    ):
        raise ValueError(f"checkpoint_every must be an integer >= 0, got {checkpoint_every!r}")
    plan = expand_runs(config)
    sim_config = sim_settings(config)
    folder = check_output(config, out, force=overwrite, resume=resume, dataset=dataset)
    folder.acquire(command)
    try:
        resumable = folder.prepare(force=overwrite, resume=resume, command=command)
        return _run_in(
            folder, config, plan, sim_config, resumable, dataset, quick, progress,
            extra_manifest, finalize, workers, checkpoint_every, checkpoint_seconds, started,
            started_at, executor,
        )  # fmt: skip
    finally:
        folder.release()


def _run_in(
    folder: ResultsFolder,
    config: ExperimentConfig,
    plan: list[RunSpec],
    sim_config: SimConfig,
    resumable: bool,
    dataset: DataSource | None,
    quick: bool,
    progress: ProgressFn | None,
    extra_manifest: Mapping[str, Any] | None,
    finalize: Callable[[Path], Mapping[str, Any] | None] | None,
    workers: int | None,
    checkpoint_every: int | None,
    checkpoint_seconds: float,
    started: float,
    started_at: str,
    executor: ShardExecutor | None,
) -> ExperimentOutcome:
    state: _Progress | None = None
    rounds = sim_config.rounds
    try:
        ready = _prepare(config, plan, sim_config, dataset)
        dataset, fed, sim_config, model = ready.dataset, ready.fed, ready.sim_config, ready.model
        batches, identity = ready.batches, ready.identity
        if resumable:
            state = _load_progress(folder, identity, config.source)
            logger.info("resuming %s at %s", config.name, state.describe(rounds))
            workers = state.workers if workers is None else workers
        else:
            state = _Progress(identity)
        state.workers = workers = workers or 1
        if config.model.device != "cpu" and workers > 1:
            logger.info("model on %s: one worker (a device context does not survive a fork)",
                        config.model.device)  # fmt: skip
            workers = 1
        state.started = started
        state.session = {"started_at": started_at, "pid": os.getpid(), "workers": workers,
                         "from": state.describe(rounds)}  # fmt: skip
        logger.info("%s: %d distinct runs, %d rounds each", config.name, len(plan), rounds)
        if executor is not None:
            state.session["executor"] = "shards"
        sim = _simulate_all(
            batches, plan, sim_config, progress, workers, folder, state, checkpoint_every,
            checkpoint_seconds, model, executor,
        )  # fmt: skip
        ran = {} if executor is None else {"executor": executor.describe(sim.shard_keys)}
        return _write_results(
            folder, config, plan, sim_config, dataset, fed, sim, quick,
            {**ran, **dict(extra_manifest or {})}, finalize, state, started, model,
        )  # fmt: skip
    except BaseException as exc:
        kept = folder.discard(keep_checkpoint=True)
        where = state.describe(rounds) if state is not None else ""
        if kept:
            logger.info("kept the checkpoint (%s) in %s", where, folder.partial)
        if isinstance(exc, KeyboardInterrupt):
            message = (
                f"interrupted; the checkpoint ({where}) is kept in {folder.partial}: continue "
                "with the same command and --resume"
                if kept
                else "interrupted before the first checkpoint; nothing was kept"
            )
            raise RunInterrupted(message, resumable=kept, partial=folder.partial,
                                 progress=where) from exc  # fmt: skip
        if isinstance(exc, OSError):
            hint = f" (the checkpoint, {where}, is kept: --resume continues)" if kept else ""
            error = os_error("cannot write the results", exc, folder.partial)
            raise RunError(f"{error}{hint}") from exc
        raise


_DATASET_NAMES = {
    "fashion-mnist": "Fashion-MNIST", "digits": "Digits (8×8)", "arrays": "User arrays",
    "cifar10": "CIFAR-10", "femnist": "FEMNIST", "synthetic": "Synthetic(α, β)",
}  # fmt: skip
_LISTED_SIZES = 10_000
"""Clients whose sizes the manifest lists one by one; larger populations get a summary."""


def _sizes(sizes: np.ndarray) -> Any:
    if sizes.size <= _LISTED_SIZES:
        return np.asarray(sizes).tolist()
    q = np.quantile(sizes, [0.0, 0.1, 0.5, 0.9, 1.0])
    return {"n_clients": int(sizes.size), "total": int(sizes.sum()), "mean": float(sizes.mean()),
            "min": int(q[0]), "p10": float(q[1]), "median": float(q[2]), "p90": float(q[3]),
            "max": int(q[4])}  # fmt: skip


def _eval_subset(fed: Mapping[int | None, ClientData], config: SimConfig) -> np.ndarray:
    from adcs.sim.engine import _eval_subset as engine_subset  # the engine's one fixed draw

    return engine_subset(next(iter(fed.values())).n_clients, config.eval_clients)


def _write_results(
    folder: ResultsFolder,
    config: ExperimentConfig,
    plan: list[RunSpec],
    sim_config: SimConfig,
    dataset: DataSource,
    fed: Mapping[int | None, ClientData],
    sim: _Simulated,
    quick: bool,
    extra_manifest: Mapping[str, Any] | None,
    finalize: Callable[[Path], Mapping[str, Any] | None] | None,
    state: _Progress,
    started: float,
    model: Model,
) -> ExperimentOutcome:
    tmp, records = folder.partial, sim.records
    # the clock's arrays travel with the selections but have a file of their own
    selections = dict(sim.selections)
    clocks = {k: selections.pop(k) for k in list(selections) if k.startswith(_CLOCK_ARRAYS)}
    _write_tables(tmp, records)
    client_acc = dict(sim.client_acc)
    if sim_config.eval_clients is not None:
        client_acc["eval_clients"] = _eval_subset(fed, sim_config)
    write_npz(tmp / "client_acc.npz", client_acc)
    write_npz(tmp / "selections.npz", selections)
    _write_json(tmp / "summary.json", _summary(records, config))
    notes: list[str] = []
    if sim_config.system is not None:
        write_npz(tmp / "clock.npz", clocks)
        devices = _system_rows(fed, sim_config, config.seeds, model)
        header = ["seed", "client", "compute", "upload", "download", "round_s"]
        _write_csv(tmp / "system.csv", header, devices)
        notes.append(_system_note(devices))
    differs = paper.differences(config)
    is_paper = not differs
    if "table1" in config.outputs:
        paper.write_table1(tmp, records, paper_columns=is_paper)
    figures = write_figures(tmp, records, config.outputs, paper.FIGURES)
    extra = dict(finalize(tmp) or {}) if finalize is not None else {}
    first = next(iter(fed.values()))
    context = ReportContext(
        name=config.name, rounds=sim_config.rounds, eval_every=config.sim.eval_every,
        m=config.m, n_clients=first.n_clients, seeds=config.seeds,
        data_source=dataset.source, is_subset=dataset.is_subset, quick=quick,
        figures=tuple(figures), wall_s=time.perf_counter() - started,
        description=config.description, model=config.model.describe(),
        dataset=_DATASET_NAMES.get(config.data.dataset, config.data.dataset),
        notes=(*notes, *(
            f"See also [{p.parent.name}/report.md]({p.parent.name}/report.md)."
            for p in sorted(tmp.glob("*/report.md"))
        )),
    )  # fmt: skip
    if is_paper:
        claims = paper.write_report(tmp / "report.md", records, context)
        rows = summaries(records, paper.console_series(records)) or summaries(
            records, curve_series(records)
        )
    else:
        claims = []
        rows = write_report(tmp / "report.md", records, context)
    wall_s = time.perf_counter() - started
    sessions = state.all_sessions()
    manifest = {
        "experiment": config.name,
        "description": config.description,
        "config": config_to_dict(config),
        "config_source": config.source,
        "seeds": list(config.seeds),
        "quick": quick,
        "paper_setting": is_paper,
        "differences_from_paper": differs,
        "runs": [r.run_id for r in plan],
        "data": {
            "source": dataset.source,
            "is_subset": dataset.is_subset,
            "checksums": dict(dataset.checksums),
            "dataset": config.data.dataset,
            "partition": config.data.partition,
            "resample_per_seed": config.data.resample_per_seed,
            "n_clients": first.n_clients,
            "n_groups": first.n_groups,
            "data_sizes": {str(k): _sizes(v.data_sizes) for k, v in fed.items()},
        },
        "availability": sim_config.availability.describe(),
        "malicious": {r.run_id: r.meta["malicious"] for r in plan if r.meta.get("malicious")},
        **({} if sim_config.system is None else {"system": sim_config.system.describe()}),
        **provenance(),
        "argv": list(sys.argv),
        "started_at": sessions[0]["started_at"],
        "wall_s": sum(float(s["wall_s"]) for s in sessions),
        "sessions": sessions,
        "simulation_wall_s": sim.wall_s,
        "run_wall_s": {r.run_id: r.wall_s for r in records},
        **dict(extra_manifest or {}),
        **extra,
    }
    _write_json(tmp / "manifest.json", manifest)
    folder.finish()
    return ExperimentOutcome(
        folder=folder.out, records=records, summaries=rows, claims=claims,
        paper_setting=is_paper, figures=figures, wall_s=wall_s, is_subset=dataset.is_subset,
        data_source=dataset.source, resumed=bool(state.sessions),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# reading a results folder back


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
