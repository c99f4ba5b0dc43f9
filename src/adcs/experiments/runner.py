"""Run an experiment configuration and write its results folder (DESIGN §3, §4, §6).

:func:`expand_runs` turns a configuration into distinct runs — one per (method, hyperparameters,
seed); the same run asked for twice (e.g. ADCS θ = 0.8, R = 20 by Figures 1, 2 and 3) is made
once. :func:`run_experiment` loads and partitions the data, advances the runs in batches with
:func:`adcs.sim.engine.simulate`, and writes the results folder::

    metrics.csv      one row per run × evaluation: run_id, method, seed, theta, refresh_every,
                     round, worst_acc, avg_acc, test_loss
    runs.csv         one row per run: hyperparameters, final numbers, costs, group shares
    group_share.csv  one row per run × group (tidy form of Table 1's raw numbers)
    client_acc.npz   per-client test accuracy of every run, shape (n_evals, n_clients)
    selections.npz   who was chosen and who could have been: per run ``selected/<run_id>``
                     (rounds × m, −1 where fewer were selected) and ``returned/<run_id>`` (same
                     shape, bool: not dropped); per seed ``n_available/seed<s>`` (rounds,) and,
                     unless every client is always available, ``available/seed<s>``: the masks
                     bit-packed along clients (``np.unpackbits(a, axis=1, count=N)``), or, when
                     too large to keep, nothing — the manifest's availability model and the seed
                     regenerate them
    summary.json     {"runs": [...]} final numbers per run
    manifest.json    configuration, seeds, versions, git commit, data source and checksums, time
    fig*.png, table1.md/.csv, report.md

With a ``[sim.system]`` table (client devices and the simulated clock, :mod:`adcs.sim.system`)
metrics.csv gains ``clock_s`` (simulated seconds at the evaluation), runs.csv and summary.json
``sim_time_s`` and ``client_time_s``, and three files are added::

    clock.npz        per run ``round_time/<run_id>`` and ``busy_time/<run_id>`` (rounds,): the
                     simulated seconds and the client-seconds of every round
    system.csv       per seed and client: compute (samples/s), upload and download (bytes/s) and
                     round_s, the expected seconds of a full local round
    time.png         accuracy against rounds and simulated time; report.md gains the
                     time-to-accuracy section

The folder is written under a temporary name beside the target and renamed at the end, so an
interrupted or failed run leaves nothing half-written.
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import hashlib
import itertools
import json
import logging
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from adcs.data import FashionMNIST, Partition, dirichlet, iid, load_fashion_mnist, paper_groups
from adcs.experiments.config import (
    ConfigError,
    DataConfig,
    ExperimentConfig,
    config_to_dict,
)
from adcs.experiments.figures import write_figures
from adcs.experiments.report import (
    Claim,
    ReportContext,
    RunRecord,
    write_report,
    write_table1,
)
from adcs.schedulers.base import Scheduler
from adcs.sim.engine import FederatedData, RunResult, RunSpec, SimConfig, simulate
from adcs.sim.model import LogisticRegression
from adcs.sim.system import client_times

__all__ = [
    "ExperimentOutcome",
    "PlannedRun",
    "RunError",
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

_KEY_PARAMS = ("theta", "refresh_every")
_CLOCK_ARRAYS = ("round_time/", "busy_time/")


class RunError(RuntimeError):
    """The experiment cannot be run or its results cannot be written."""


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


@dataclass(frozen=True)
class PlannedRun:
    """One distinct run of an experiment.

    Attributes
    ----------
    run_id : str
        ``variant`` plus ``-seed=<seed>``; with the seed it fixes the run's random stream.
    variant : str
        The method, θ and R when it has them, and any other hyperparameter off its default.
    method : str
    seed : int
    params : dict
        Every hyperparameter (JSON-able).
    scheduler : Scheduler
    """

    run_id: str
    variant: str
    method: str
    seed: int
    params: Mapping[str, Any]
    scheduler: Scheduler = dataclasses.field(compare=False)

    @property
    def theta(self) -> float | None:
        value = self.params.get("theta")
        return None if value is None else float(value)

    @property
    def refresh_every(self) -> int | None:
        value = self.params.get("refresh_every")
        return None if value is None else int(value)

    def meta(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "variant": self.variant,
            "theta": self.theta,
            "refresh_every": self.refresh_every,
            "params": dict(self.params),
        }


def _variant_name(method: str, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    parts = [method]
    for key in _KEY_PARAMS:
        if key in params:
            parts.append(f"{key}={_fmt_value(params[key])}")
    for key in sorted(params):
        if key not in _KEY_PARAMS and (key not in defaults or params[key] != defaults[key]):
            parts.append(f"{key}={_fmt_value(params[key])}")
    return "-".join(parts)


def expand_runs(config: ExperimentConfig) -> list[PlannedRun]:
    """Every distinct run of ``config``: methods × hyperparameter grid × seeds, duplicates removed.

    Two entries giving the same hyperparameters (explicitly or by default) yield one run. Order:
    configuration order of the first appearance, seeds innermost.
    """
    planned: dict[tuple[str, str, int], PlannedRun] = {}
    for method in config.methods:
        defaults = _default_params(method.scheduler_class)
        for point in method.grid():
            scheduler = method.build(config.m, point)
            params = _resolved_params(scheduler)
            variant = _variant_name(method.name, params, defaults)
            identity = json.dumps(params, sort_keys=True, default=str)
            for seed in config.seeds:
                key = (method.name, identity, seed)
                if key not in planned:
                    planned[key] = PlannedRun(
                        run_id=f"{variant}-seed={seed}",
                        variant=variant,
                        method=method.name,
                        seed=seed,
                        params=params,
                        scheduler=scheduler,
                    )
    runs = list(planned.values())
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):  # two identities formatted alike: should not happen
        raise ConfigError(f"run identifiers collide: {sorted(i for i in ids if ids.count(i) > 1)}")
    return runs


# ---------------------------------------------------------------------------------------------
# data


def make_partition(dataset: FashionMNIST, data: DataConfig, rng: np.random.Generator) -> Partition:
    """The clients' shares of ``dataset`` that ``data`` describes, drawn with ``rng``."""
    sizes = {"train_per_client": data.train_per_client, "test_per_client": data.test_per_client}
    if data.partition == "paper_groups":
        return paper_groups(
            dataset.train_labels, dataset.test_labels, rng,
            n_groups=data.n_groups, clients_per_group=data.clients_per_group,
            dominance=data.dominance, **sizes,
        )  # fmt: skip
    assert data.n_clients is not None
    if data.partition == "dirichlet":
        return dirichlet(
            dataset.train_labels, dataset.test_labels, rng,
            n_clients=data.n_clients, alpha=data.alpha, **sizes,
        )  # fmt: skip
    return iid(dataset.train_labels, dataset.test_labels, rng, n_clients=data.n_clients, **sizes)


def _federated_data(
    dataset: FashionMNIST, config: ExperimentConfig
) -> dict[int | None, FederatedData]:
    """Client data: one entry (key None) shared by every run, or one per training seed."""
    data = config.data
    try:
        if not data.partition_per_seed:
            rng = np.random.default_rng(data.partition_seed)
            return {None: FederatedData.from_partition(dataset, make_partition(dataset, data, rng))}
        out: dict[int | None, FederatedData] = {}
        for seed in config.seeds:
            rng = np.random.default_rng([seed, data.partition_seed])
            out[seed] = FederatedData.from_partition(dataset, make_partition(dataset, data, rng))
        return out
    except ValueError as exc:
        raise ConfigError(f"{config.source}: data: {exc}") from exc


def _runs_per_batch(data: FederatedData, config: SimConfig, m: int) -> int:
    """How many runs fit one batch under :data:`MEMORY_BUDGET_BYTES` (a rough, generous estimate).

    Per run: its weights, the updates of a probe of every client and their gradients
    (N × dim each, float32, the worst case), its selection records, and its logits on every
    client's test data during evaluation.
    """
    dim = (int(np.prod(data.input_shape)) + 1) * data.n_classes
    n_test = int(data.test_sizes.sum())
    records = 5 * config.rounds * m + 8 * config.eval_rounds.size * data.n_clients
    per_run = 4 * dim * (3 * data.n_clients + 8) + 8 * n_test * data.n_classes * 3 + records
    return max(1, min(512, MEMORY_BUDGET_BYTES // per_run))


# ---------------------------------------------------------------------------------------------
# the results folder


def _record(run: PlannedRun, result: RunResult) -> RunRecord:
    mean_available = float(np.mean(result.n_available)) if result.n_available.size else math.nan
    return RunRecord(
        run_id=run.run_id,
        variant=run.variant,
        method=run.method,
        seed=run.seed,
        theta=run.theta,
        refresh_every=run.refresh_every,
        params=dict(run.params),
        eval_rounds=np.asarray(result.eval_rounds, dtype=np.int64),
        worst_acc=np.asarray(result.worst_acc, dtype=np.float64),
        avg_acc=np.asarray(result.avg_acc, dtype=np.float64),
        test_loss=np.asarray(result.test_loss, dtype=np.float64),
        group_share=np.asarray(result.group_share, dtype=np.float64),
        tv_to_uniform=float(result.tv_to_uniform),
        client_updates=int(result.client_updates),
        loss_evals=int(result.loss_evals),
        wall_s=float(result.wall_s),
        dropped=int(result.dropped),
        mean_available=mean_available,
        eval_clock=result.eval_clock,
        total_time=result.total_time,
        client_time=result.client_time,
    )


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return value


_ID_COLUMNS = ("run_id", "method", "seed", "theta", "refresh_every")


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(v) for v in row])


def _timed(records: Sequence[RunRecord]) -> bool:
    return bool(records) and all(r.eval_clock is not None for r in records)


def _write_tables(folder: Path, records: Sequence[RunRecord]) -> None:
    def ids(r: RunRecord) -> list[Any]:
        return [r.run_id, r.method, r.seed, r.theta, r.refresh_every]

    timed = _timed(records)  # the clock's columns come last, only when there is a clock

    def clock(r: RunRecord) -> Iterable[Any]:
        return r.eval_clock if r.eval_clock is not None else itertools.repeat(None)

    def totals(r: RunRecord) -> list[Any]:
        return [r.total_time, r.client_time] if timed else []

    _write_csv(
        folder / "metrics.csv",
        [*_ID_COLUMNS, "round", "worst_acc", "avg_acc", "test_loss", *(["clock_s"] * timed)],
        (
            [*ids(r), int(t), w, a, loss, *([c] * timed)]
            for r in records
            for t, w, a, loss, c in zip(r.eval_rounds, r.worst_acc, r.avg_acc, r.test_loss,
                                        clock(r), strict=False)
        ),
    )  # fmt: skip
    n_groups = max(r.group_share.size for r in records)
    _write_csv(
        folder / "runs.csv",
        [
            *_ID_COLUMNS, "variant", "params", "final_round", "final_worst_acc", "final_avg_acc",
            "final_test_loss", "tv_to_uniform", "client_updates", "loss_evals", "wall_s",
            *(f"share_g{k}" for k in range(n_groups)), "dropped", "mean_available",
            *(["sim_time_s", "client_time_s"] if timed else []),
        ],
        (
            [
                *ids(r), r.variant, json.dumps(r.params, sort_keys=True),
                *_final(r), r.tv_to_uniform, r.client_updates, r.loss_evals, r.wall_s,
                *r.group_share, r.dropped, r.mean_available, *totals(r),
            ]
            for r in records
        ),
    )  # fmt: skip
    _write_csv(
        folder / "group_share.csv",
        [*_ID_COLUMNS, "group", "share"],
        ([*ids(r), k, s] for r in records for k, s in enumerate(r.group_share)),
    )


def _final(r: RunRecord) -> list[Any]:
    if r.eval_rounds.size == 0:
        return [None, None, None, None]
    return [int(r.eval_rounds[-1]), r.worst_acc[-1], r.avg_acc[-1], r.test_loss[-1]]


def _summary(records: Sequence[RunRecord], config: ExperimentConfig) -> dict[str, Any]:
    runs = []
    for r in records:
        final_round, worst, avg, loss = _final(r)
        runs.append(
            {
                "run_id": r.run_id,
                "variant": r.variant,
                "method": r.method,
                "seed": r.seed,
                "theta": r.theta,
                "refresh_every": r.refresh_every,
                "params": dict(r.params),
                "final_round": final_round,
                "final_worst_acc": None if worst is None else float(worst),
                "final_avg_acc": None if avg is None else float(avg),
                "final_test_loss": None if loss is None else float(loss),
                "group_share": [float(x) for x in r.group_share],
                "tv_to_uniform": r.tv_to_uniform,
                "client_updates": r.client_updates,
                "loss_evals": r.loss_evals,
                "wall_s": r.wall_s,
                "dropped": r.dropped,
                "mean_available": r.mean_available,
            }
        )
        if r.eval_clock is not None:
            runs[-1].update({"sim_time_s": r.total_time, "client_time_s": r.client_time})
    return {"experiment": config.name, "runs": runs}


def _system_rows(
    fed: Mapping[int | None, FederatedData], sim_config: SimConfig, seeds: Sequence[int]
) -> list[list[Any]]:
    """Rows of ``system.csv``: seed, client, its devices and its full-round seconds."""
    system = sim_config.system
    assert system is not None
    rows = []
    for seed in seeds:
        data = fed[seed] if seed in fed else fed[None]
        profile = system.draw(seed, data.groups)
        model = LogisticRegression(int(np.prod(data.input_shape)), data.n_classes)  # simulate's
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


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("adcs", "numpy", "scipy", "matplotlib", "typer", "rich"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True,
            text=True, timeout=5, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _git_info() -> dict[str, Any]:
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.generic, enum.Enum)):
        return _canonical(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON-able: {type(value).__name__}")


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, default=_json_default, allow_nan=True) + "\n")


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
    claims : list of Claim
        The paper's claims as checked in ``report.md``.
    figures : list of str
        File names of the figures written.
    wall_s : float
    is_subset : bool
        The shipped Fashion-MNIST subset was used.
    data_source : str
    """

    folder: Path
    records: list[RunRecord]
    claims: list[Claim]
    figures: list[str]
    wall_s: float
    is_subset: bool
    data_source: str


def _check_target(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise RunError(f"output {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise RunError(f"output folder {out} exists and is not empty (overwrite it explicitly)")


def _make_parent(out: Path) -> Path | None:
    """Create the target's parent; return the top folder created (to remove on failure)."""
    top = None
    for ancestor in reversed(out.parent.resolve().parents):
        if not ancestor.exists():
            top = ancestor
            break
    if top is None and not out.parent.exists():
        top = out.parent.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    return top


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _put_in_place(tmp: Path, out: Path) -> None:
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        old.rmdir()
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)


def _simulate_all(
    plan: Sequence[PlannedRun],
    fed: Mapping[int | None, FederatedData],
    sim_config: SimConfig,
    progress: ProgressFn | None,
    workers: int = 1,
) -> tuple[list[RunRecord], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Advance every planned run.

    Returns the records in plan order, per-client accuracy by run id, and the arrays of
    ``selections.npz``.
    """
    batches: list[tuple[FederatedData, list[PlannedRun]]] = []
    for key, data in fed.items():
        # runs of one seed share minibatches in the simulator: keep them in one batch
        runs = sorted((r for r in plan if key is None or r.seed == key), key=lambda r: r.seed)
        size = _runs_per_batch(data, sim_config, max(int(r.scheduler.m) for r in plan))
        for i in range(0, len(runs), size):
            batches.append((data, runs[i : i + size]))
    total = sim_config.rounds * len(batches)
    done = 0
    records: list[RunRecord] = []
    client_acc: dict[str, np.ndarray] = {}
    selections: dict[str, np.ndarray] = {}
    for data, runs in batches:
        specs = [RunSpec(r.scheduler, r.seed, r.run_id, r.meta()) for r in runs]
        start = done

        def report(k: int, start: int = start) -> None:
            if progress is not None:
                progress(start + min(k, sim_config.rounds), total)

        results = simulate(specs, data, sim_config, progress=report, workers=workers)
        done += sim_config.rounds
        for run, res in zip(runs, results, strict=True):
            records.append(_record(run, res))
            client_acc[run.run_id] = np.asarray(res.client_acc, dtype=np.float32)
            selections[f"selected/{run.run_id}"] = res.selected
            selections[f"returned/{run.run_id}"] = res.returned
            selections.setdefault(f"n_available/seed{run.seed}", res.n_available)
            if res.available is not None:
                selections.setdefault(f"available/seed{run.seed}", res.available)
            if res.round_time is not None and res.busy_time is not None:
                selections[f"round_time/{run.run_id}"] = res.round_time
                selections[f"busy_time/{run.run_id}"] = res.busy_time
    if progress is not None:
        progress(total, total)
    order = {r.run_id: i for i, r in enumerate(plan)}
    records.sort(key=lambda r: order[r.run_id])
    return records, client_acc, selections


def run_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    overwrite: bool = False,
    quick: bool = False,
    dataset: FashionMNIST | None = None,
    progress: ProgressFn | None = None,
    extra_manifest: Mapping[str, Any] | None = None,
    finalize: Callable[[Path], Mapping[str, Any] | None] | None = None,
    workers: int = 1,
) -> ExperimentOutcome:
    """Run every distinct run of ``config`` and write the results folder ``out``.

    Parameters
    ----------
    config : ExperimentConfig
    out : path
        Results folder; must not exist or be empty unless ``overwrite``.
    overwrite : bool
        Replace an existing folder (only once the new results are complete).
    quick : bool
        Recorded in the manifest and the report (verdicts then indicative only).
    dataset : FashionMNIST, optional
        Use these data instead of loading Fashion-MNIST (tests, callers holding it already).
    progress : callable, optional
        ``progress(done, total)`` in simulated rounds summed over batches.
    extra_manifest : mapping, optional
        Added to ``manifest.json`` (e.g. the command line).
    finalize : callable, optional
        Called with the temporary folder once the runs' files and figures are written (e.g. to
        add the theory check in a subfolder, which ``report.md`` then links to); a mapping it
        returns is added to the manifest.
    workers : int
        Threads the simulator advances the seeds' minibatch groups on (results do not depend on
        it; keep BLAS single-threaded when using more than one).

    Raises
    ------
    ConfigError
        The configuration does not fit the data (checked before any simulation).
    RunError
        The output folder is unusable (checked before any work).
    """
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out = Path(out)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    _check_target(out, overwrite)
    plan = expand_runs(config)
    try:
        sim_config = config.sim.build(config.data.total_clients)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{config.source}: sim: {exc}") from exc
    if dataset is None:
        dataset = load_fashion_mnist(config.data.path)
    fed = _federated_data(dataset, config)
    logger.info("%s: %d distinct runs, %d rounds each", config.name, len(plan), config.sim.rounds)

    created = _make_parent(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the results are ordinary files
    try:
        records, client_acc, selections = _simulate_all(plan, fed, sim_config, progress, workers)
        # the clock's arrays travel with the selections but have a file of their own
        clocks = {k: selections.pop(k) for k in list(selections) if k.startswith(_CLOCK_ARRAYS)}
        _write_tables(tmp, records)
        np.savez_compressed(tmp / "client_acc.npz", **client_acc)  # type: ignore[arg-type]
        np.savez_compressed(tmp / "selections.npz", **selections)  # type: ignore[arg-type]
        _write_json(tmp / "summary.json", _summary(records, config))
        notes: list[str] = []
        if sim_config.system is not None:
            np.savez_compressed(tmp / "clock.npz", **clocks)  # type: ignore[arg-type]
            rows = _system_rows(fed, sim_config, config.seeds)
            _write_csv(
                tmp / "system.csv",
                ["seed", "client", "compute", "upload", "download", "round_s"],
                rows,
            )
            notes.append(_system_note(rows))
        if "table1" in config.outputs:
            write_table1(tmp, records)
        figures = write_figures(tmp, records, config.outputs)
        extra = dict(finalize(tmp) or {}) if finalize is not None else {}
        first = next(iter(fed.values()))
        context = ReportContext(
            name=config.name, rounds=config.sim.rounds, eval_every=config.sim.eval_every,
            m=config.m, n_clients=first.n_clients, seeds=config.seeds,
            data_source=dataset.source, is_subset=dataset.is_subset, quick=quick,
            figures=tuple(figures), wall_s=time.perf_counter() - started,
            notes=(*notes, *(
                f"See also [{p.parent.name}/report.md]({p.parent.name}/report.md)."
                for p in sorted(tmp.glob("*/report.md"))
            )),
        )  # fmt: skip
        claims = write_report(tmp / "report.md", records, context)
        wall_s = time.perf_counter() - started
        manifest = {
            "experiment": config.name,
            "description": config.description,
            "config": config_to_dict(config),
            "config_source": config.source,
            "seeds": list(config.seeds),
            "quick": quick,
            "runs": [r.run_id for r in plan],
            "data": {
                "source": dataset.source,
                "is_subset": dataset.is_subset,
                "checksums": dict(dataset.checksums),
                "n_clients": first.n_clients,
                "n_groups": first.n_groups,
                "data_sizes": {str(k): np.asarray(v.data_sizes).tolist() for k, v in fed.items()},
            },
            "availability": sim_config.availability.describe(),
            **({} if sim_config.system is None else {"system": sim_config.system.describe()}),
            "versions": _versions(),
            "git": _git_info(),
            "platform": platform.platform(),
            "argv": list(sys.argv),
            "started_at": started_at,
            "wall_s": wall_s,
            **dict(extra_manifest or {}),
            **extra,
        }
        _write_json(tmp / "manifest.json", manifest)
        _put_in_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return ExperimentOutcome(
        folder=out, records=records, claims=claims, figures=figures, wall_s=wall_s,
        is_subset=dataset.is_subset, data_source=dataset.source,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# reading a results folder back


def load_records(folder: str | Path) -> list[RunRecord]:
    """Rebuild the run records of a results folder from ``runs.csv`` and ``metrics.csv``."""
    folder = Path(folder)
    with (folder / "runs.csv").open(newline="") as fh:
        runs = list(csv.DictReader(fh))
    with (folder / "metrics.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        metrics = list(reader)
        fields = set(reader.fieldnames or ())
    by_run: dict[str, list[dict[str, str]]] = {}
    for row in metrics:
        by_run.setdefault(row["run_id"], []).append(row)

    def opt(value: str, kind: Callable[[str], Any]) -> Any:
        return None if value == "" else kind(value)

    records = []
    for row in runs:
        rows = by_run.get(row["run_id"], [])
        shares = [float(v) for k, v in row.items() if k.startswith("share_g") and v != ""]
        records.append(
            RunRecord(
                run_id=row["run_id"],
                variant=row["variant"],
                method=row["method"],
                seed=int(row["seed"]),
                theta=opt(row["theta"], float),
                refresh_every=opt(row["refresh_every"], int),
                params=json.loads(row["params"]),
                eval_rounds=np.array([int(m["round"]) for m in rows], dtype=np.int64),
                worst_acc=np.array([float(m["worst_acc"]) for m in rows]),
                avg_acc=np.array([float(m["avg_acc"]) for m in rows]),
                test_loss=np.array([float(m["test_loss"]) for m in rows]),
                group_share=np.array(shares),
                tv_to_uniform=float(row["tv_to_uniform"]),
                client_updates=int(row["client_updates"]),
                loss_evals=int(row["loss_evals"]),
                wall_s=float(row["wall_s"]),
                dropped=int(row.get("dropped") or 0),
                mean_available=float(row.get("mean_available") or "nan"),
                eval_clock=(
                    np.array([float(m["clock_s"]) for m in rows]) if "clock_s" in fields else None
                ),
                total_time=opt(row.get("sim_time_s", ""), float),
                client_time=opt(row.get("client_time_s", ""), float),
            )
        )
    return records
