"""Plan an experiment: its configuration → distinct runs, the data they run on, batches.

`expand_runs` turns a configuration into distinct runs — one [`RunSpec`][adcs.sim.RunSpec] per
(method, hyperparameters, seed); the same run asked for twice (e.g. ADCS θ = 0.8, R = 20 by
Figures 1, 2 and 3) is made once. `prepare_run` loads and partitions the data, checks the
simulator's settings against them, builds the model and cuts the runs into *batches* (runs
simulated together by one [`simulate`][adcs.sim.simulate] call: the runs of one seed share
minibatches, and memory bounds a batch's size). What a resume compares is
`adcs.experiments.run.identity`.

Words: a *batch* is what one ``simulate`` call advances; a *shard* (`adcs.experiments.run.execute`)
is one seed of one batch, the unit an executor runs elsewhere.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs.data import DATASETS, Dataset, FashionMNIST, Partition, partition_data
from adcs.experiments.config import (
    ConfigError,
    DataConfig,
    ExperimentConfig,
    build_model,
    sim_for_clients,
)
from adcs.experiments.config.adversary import adversarial_run
from adcs.experiments.config.privacy import check_privacy_dim, private_spec
from adcs.experiments.run.bounds import check_clients
from adcs.experiments.run.identity import checkpoint_identity
from adcs.experiments.run.workload import DataSource, federate, load_data
from adcs.schedulers.base import Scheduler
from adcs.sim.data import ClientData
from adcs.sim.engine import RunSpec, SimConfig, check_simulation
from adcs.sim.model import Model

__all__ = [
    "MEMORY_BUDGET_BYTES",
    "PreparedRun",
    "canonical_value",
    "data_folders",
    "expand_runs",
    "federated_data",
    "make_partition",
    "prepare_run",
    "sim_settings",
]

MEMORY_BUDGET_BYTES = 1 << 30
"""Rough memory allowed per batch of runs; larger grids are split into several batches."""


def canonical_value(value: Any) -> Any:
    """A JSON-able, comparable form of a hyperparameter value."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list, np.ndarray)):
        return [canonical_value(v) for v in value]
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
        f.name: canonical_value(getattr(scheduler, f.name))
        for f in dataclasses.fields(scheduler)
        if f.init and f.name != "m"
    }


def _default_params(cls: type[Any]) -> dict[str, Any]:
    if not dataclasses.is_dataclass(cls):
        return {}
    return {
        f.name: canonical_value(f.default)
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


def runs_per_seed(config: ExperimentConfig) -> int:
    """The distinct runs of one seed of ``config`` (every seed has the same)."""
    return len(expand_runs(dataclasses.replace(config, seeds=config.seeds[:1])))


def expand_runs(config: ExperimentConfig) -> list[RunSpec]:
    """Every distinct run of ``config``: methods × hyperparameter grid × seeds, duplicates removed.

    Two entries giving the same hyperparameters (explicitly or by default) yield one run. Order:
    configuration order of the first appearance, seeds innermost. Each run's ``meta`` holds its
    ``method``, ``variant`` (the run id without the seed) and ``params`` (every hyperparameter
    but ``m``, JSON-able).
    """
    planned: dict[tuple[str, str, int], RunSpec] = {}
    points: dict[tuple[str, str], str] = {}  # what the configuration gave each identity
    for i, method in enumerate(config.methods):
        cls = method.scheduler_class
        defaults = _default_params(cls)
        named = tuple(getattr(cls, "named_params", ()))
        for point in method.grid():
            scheduler = method.build(config.m, point)
            params = _resolved_params(scheduler)
            variant = _variant_name(method.name, params, defaults, named)
            identity = json.dumps(params, sort_keys=True, default=str)
            if not dataclasses.is_dataclass(cls):
                _check_told_apart(points, f"methods[{i}]", method.name, identity, point)
            for seed in config.seeds:
                key = (method.name, identity, seed)
                if key not in planned:
                    meta = {"method": method.name, "variant": variant, "params": params}
                    spec = RunSpec(scheduler, seed, f"{variant}-seed={seed}", meta)
                    spec = _adversarial(spec, config)
                    planned[key] = private_spec(spec, config.privacy, config.data.total_clients)
    runs = list(planned.values())
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):  # two identities formatted alike: should not happen
        raise ConfigError(f"run identifiers collide: {sorted(i for i in ids if ids.count(i) > 1)}")
    return runs


def _check_told_apart(
    points: dict[tuple[str, str], str], key: str, name: str, identity: str, point: Mapping[str, Any]
) -> None:
    """Refuse two different hyperparameter points of a scheduler that is no dataclass: its
    hyperparameters cannot be read back (`_resolved_params`), so both would be one run and
    the second would silently not run."""
    given = json.dumps(
        {k: canonical_value(v) for k, v in point.items()}, sort_keys=True, default=str
    )
    earlier = points.setdefault((name, identity), given)
    if earlier != given:
        raise ConfigError(
            f"{key} ({name}): the hyperparameters {given} and {earlier} would be one run: "
            f"{name} is not a dataclass, so its hyperparameters are not recorded; make it a "
            "frozen dataclass (subclass adcs.schedulers.SchedulerBase)"
        )


def _adversarial(spec: RunSpec, config: ExperimentConfig) -> RunSpec:
    """The run under the configuration's ``[sim.attack]`` and ``[sim.defence]`` (if any).

    The scheduler is wrapped (lies told to a defended server) and the aggregation hook set (a
    poison, a robust rule); ``meta["malicious"]`` lists the run's malicious clients.
    """
    attack, defence = config.attack, config.defence
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


def make_partition(
    dataset: Dataset | FashionMNIST, data: DataConfig, rng: np.random.Generator
) -> Partition:
    """The clients' shares of ``dataset`` that ``data`` describes, drawn with ``rng``.

    The partition of `adcs.data.PARTITIONS` named by ``data.partition``, with its
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
        return sim_for_clients(config.sim, n_clients if n_clients is not None else 1)
    except ConfigError as exc:
        raise ConfigError(f"{config.source}: {exc}") from exc


def federated_data(dataset: DataSource, config: ExperimentConfig) -> dict[int | None, ClientData]:
    """Client data: one entry (key None) shared by every run, or one per training seed."""
    try:
        return federate(dataset, config.data, config.seeds)
    except ValueError as exc:
        raise ConfigError(f"{config.source}: {_partition_error(exc, config.data)}") from exc


def _runs_per_batch(data: ClientData, config: SimConfig, m: int, dim: int) -> int:
    """How many runs fit one batch under `MEMORY_BUDGET_BYTES` (a rough, generous estimate).

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


def data_folders(config: ExperimentConfig) -> list[Path]:
    """The data folders a run of ``config`` may read (results must keep clear of them)."""
    return DATASETS.resolve(config.data.dataset).data_folders(config.data.path)


@dataclass(frozen=True, eq=False)
class PreparedRun:
    """An experiment made ready to simulate: its data, simulator settings, model and batches."""

    dataset: DataSource
    fed: dict[int | None, ClientData]
    sim_config: SimConfig
    model: Model
    batches: list[tuple[ClientData, list[RunSpec]]]
    identity: dict[str, Any]


def prepare_run(
    config: ExperimentConfig,
    plan: list[RunSpec],
    sim_config: SimConfig,
    dataset: DataSource | None,
) -> PreparedRun:
    """Load and partition the data, check the settings against them, build the model, batch.

    Raises
    ------
    ConfigError
        The configuration does not fit the data or the model cannot be built.
    """
    if dataset is None:
        dataset = load_data(config.data)
    fed = federated_data(dataset, config)
    first = next(iter(fed.values()))
    if config.m > first.n_clients:
        raise ConfigError(
            f"{config.source}: m={config.m} exceeds the number of clients N={first.n_clients}"
        )
    check_clients(
        config, first.n_clients, runs_per_seed(config)
    )  # eval_clients ≤ N; the records fit with the real N
    if config.data.total_clients is None:  # a trace is checked against the real N
        sim_config = sim_settings(config, first.n_clients)
    for data in fed.values():
        try:
            check_simulation(data, sim_config)
        except ValueError as exc:
            raise ConfigError(f"{config.source}: sim.{exc}") from exc
    try:  # the model is built and checked on one batch before any round
        model = build_model(config, first.input_shape, first.n_classes)
    except ConfigError as exc:
        raise ConfigError(f"{config.source}: {exc}") from None
    try:
        check_privacy_dim(config.privacy, model.dim, sim_config.sketch_dim)
    except ConfigError as exc:
        raise ConfigError(f"{config.source}: {exc}") from None
    batches = _batches(plan, fed, sim_config, model.dim)
    identity = checkpoint_identity(config, dataset, plan, len(batches))
    return PreparedRun(dataset, fed, sim_config, model, batches, identity)
