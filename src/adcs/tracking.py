"""Experiment tracking: a run's evaluations as TensorBoard event files or an MLflow store.

A `Tracker` receives, per adcs run, its parameters once and then each evaluation's metrics
with the round as the step: live, every per-evaluation column of `adcs.columns.COLUMNS` one
evaluation gives (``worst_acc``, ``avg_acc``, ``test_loss``, ``p10_acc`` and any column declared
since); exported, every column of ``metrics.csv`` (per-group accuracies included). Two backends, each in an extra:

* ``tensorboard`` (``adcs[tensorboard]``): one event file per run under ``DIR/<run_id>/``, read
  by TensorBoard (``tensorboard --logdir DIR``) and its ``EventAccumulator``;
* ``mlflow`` (``adcs[mlflow]``): one MLflow experiment per adcs experiment, one MLflow run per adcs
  run, with its parameters and metrics; by default a file store ``DIR/mlruns`` (MLflow keeps the
  file store in maintenance mode: adcs opts in to it for the stores it creates), or any
  tracking URI (``sqlite:///mlflow.db``, a server).

`export` writes a finished results folder's ``metrics.csv`` to a backend. Tracking only
reads results: the results files are the same whether it is on or off.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import math
import os
import shutil
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from adcs.experiments.run.resultfiles import (
    METRIC_COLUMNS,
    RUN_COLUMNS,
    parsed,
    read_manifest,
    read_table,
)

__all__ = [
    "TRACKERS",
    "ExportError",
    "MLflowTracker",
    "TensorBoardTracker",
    "Tracker",
    "TrackingError",
    "default_destination",
    "export",
    "log_evaluations",
    "make_tracker",
    "run_params",
]


class Tracker(Protocol):
    """Where evaluations go while (or after) a run goes."""

    def start(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Open run ``run_id`` with its parameters (scheduler's, method, seed)."""
        ...

    def log(self, run_id: str, step: int, metrics: Mapping[str, float]) -> None:
        """One evaluation of ``run_id`` at round ``step``."""
        ...

    def close(self) -> None:
        """Flush and close every open run."""
        ...


def _need(extra: str) -> None:
    raise ImportError(f'tracking with {extra} needs its extra: pip install "adcs[{extra}]"')


class TrackingError(RuntimeError):
    """A tracking destination that cannot be used: a server that does not answer, a store that
    refuses (a one-line reason)."""


_CONNECT_TIMEOUT_S = 5.0
"""Seconds to wait for an MLflow server to accept a connection before it is declared away."""
_DATABASE_SCHEMES = ("sqlite", "mysql", "postgresql", "mssql")
"""MLflow's database stores: MLflow registers them only where SQLAlchemy is importable."""


class _EventFile:
    """One TensorBoard event file, written synchronously (a failed write, such as a full disk,
    raises here, naming the file, not in a writer thread)."""

    def __init__(self, folder: Path, event_pb2: Any) -> None:
        from tensorboard.summary.writer.record_writer import RecordWriter

        folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}"
        self.path = folder / f"{name}.{next(_FILE_NUMBER)}"
        self._fh = self.path.open("wb")
        self._records = RecordWriter(self._fh)
        self.write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def write(self, event: Any) -> None:
        try:
            self._records.write(event.SerializeToString())
        except OSError as exc:
            raise _named(exc, self.path) from None

    def flush(self) -> None:
        try:
            self._fh.flush()
        except OSError as exc:
            raise _named(exc, self.path) from None

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError as exc:
            raise _named(exc, self.path) from None


_FILE_NUMBER = itertools.count()


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path`` (a write to an open file names none)."""
    return type(exc)(exc.errno, exc.strerror or str(exc), str(path))


class TensorBoardTracker:
    """TensorBoard event files, one folder per run: ``logdir/<run_id>/events.out.tfevents.*``.

    Parameters
    ----------
    logdir : path
    resume : bool, default False
        False: a run started here replaces the event files an earlier session left in its folder
        (a re-run logs every step again, so each step appears once). True: a resumed run keeps
        them and logs from its checkpoint on, marking its first step as a restart, so TensorBoard
        drops the steps the interrupted session logged from there on.
    staged : bool
        Write each run in ``logdir/.partial/`` and move it to its place at `finish` (an
        export: a run is there whole or not at all).
    """

    def __init__(self, logdir: str | Path, *, resume: bool = False, staged: bool = False) -> None:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
        except ImportError:
            _need("tensorboard")
        self.logdir = Path(logdir)
        self.resume = resume
        self.staged = staged
        self._event, self._summary = event_pb2, summary_pb2
        self._writers: dict[str, _EventFile] = {}
        self._restarting: set[str] = set()  # resumed runs whose first step is still to come

    def _folder(self, run_id: str) -> Path:
        return self.logdir / ".partial" / run_id if self.staged else self.logdir / run_id

    def start(self, run_id: str, params: Mapping[str, Any]) -> None:
        if run_id not in self._writers:
            earlier = sorted(self._folder(run_id).glob("events.out.tfevents.*"))
            if earlier and self.resume:
                self._restarting.add(run_id)
            for path in [] if self.resume else earlier:
                path.unlink()
            self._writers[run_id] = _EventFile(self._folder(run_id), self._event)
            if run_id in self._restarting:
                return  # its parameters are in the earlier session's files
        text = json.dumps(dict(params), sort_keys=True, default=str)
        self._write(run_id, 0, {"params": text})

    def log(self, run_id: str, step: int, metrics: Mapping[str, float]) -> None:
        if run_id not in self._writers:
            self.start(run_id, {})
        if run_id in self._restarting:  # TensorBoard purges the earlier steps >= this one
            self._restarting.discard(run_id)
            start = self._event.SessionLog(status=self._event.SessionLog.START)
            self._writers[run_id].write(
                self._event.Event(wall_time=time.time(), step=int(step), session_log=start)
            )
        self._write(run_id, step, metrics)

    def _write(self, run_id: str, step: int, values: Mapping[str, Any]) -> None:
        summary = self._summary.Summary()
        for tag, value in values.items():
            if isinstance(value, str):
                tensor = summary.value.add(tag=tag)
                tensor.metadata.plugin_data.plugin_name = "text"
                tensor.tensor.dtype = 7  # DT_STRING
                tensor.tensor.string_val.append(value.encode())
            elif value is not None and math.isfinite(float(value)):
                summary.value.add(tag=tag, simple_value=float(value))
        event = self._event.Event(wall_time=time.time(), step=int(step), summary=summary)
        self._writers[run_id].write(event)
        if not self.staged:  # live: each evaluation on disk as it comes
            self._writers[run_id].flush()

    def finish(self, run_id: str) -> None:
        """Close run ``run_id``; a staged one moves to its place."""
        self._writers.pop(run_id).close()
        if self.staged:
            place = self.logdir / run_id
            place.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self._folder(run_id), place)

    def discard(self, run_id: str) -> None:
        """Drop run ``run_id``, written in part (a staged one leaves nothing)."""
        writer = self._writers.pop(run_id, None)
        with contextlib.suppress(OSError):
            if writer is not None:
                writer.close()
            if self.staged:
                shutil.rmtree(self._folder(run_id))

    def close(self) -> None:
        for run_id in list(self._writers):
            if self.staged:
                self.discard(run_id)
            else:
                self._writers.pop(run_id).close()
        if self.staged:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.logdir / ".partial")


def _reachable(uri: str) -> None:
    """Refuse at once an MLflow server that accepts no connection (MLflow itself retries for
    minutes)."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = "no answer within 5 s" if isinstance(exc, TimeoutError) else exc.strerror or exc
        raise TrackingError(
            f"the MLflow tracking server {uri} cannot be reached ({reason}): start it, "
            "or choose another --dest"
        ) from None
    try:  # a server that accepts but does not answer (MLflow's /health answers at once)
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=_CONNECT_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        pass  # it answered (an error status: a proxy, a login), MLflow will say more
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError | ConnectionError):  # else (TLS …) MLflow says more
            raise TrackingError(
                f"the MLflow tracking server {uri} does not answer within 5 s ({reason}): "
                "check the address, or choose another --dest"
            ) from None
    # a server that stops answering later: a shorter timeout and fewer retries than minutes'
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


def _database_store(uri: str) -> None:
    scheme = uri.split(":", 1)[0].split("+", 1)[0]
    if scheme in _DATABASE_SCHEMES and not all(
        importlib.util.find_spec(m) is not None for m in ("sqlalchemy", "alembic")
    ):
        raise ImportError(
            f"MLflow's database store ({scheme}://) needs SQLAlchemy and Alembic, which "
            'mlflow-skinny lacks: pip install "adcs[mlflow]"'
        )


@contextlib.contextmanager
def _store_errors(uri: str) -> Iterator[None]:
    """MLflow's failures (its exceptions, a connection lost) as one-line `TrackingError`."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except MlflowException as exc:
        first = str(exc.message if hasattr(exc, "message") else exc).strip().splitlines()
        raise TrackingError(f"the MLflow store {uri}: {first[0] if first else exc!r}") from None


class MLflowTracker:
    """An MLflow experiment with one MLflow run per adcs run.

    Parameters
    ----------
    experiment : str
        The MLflow experiment's name (created if missing).
    uri : str or path
        A tracking URI (``sqlite:///mlflow.db``, ``http://…``), or a folder for a file store.

    Raises
    ------
    ImportError
        MLflow, or the database store's SQLAlchemy, is not installed.
    TrackingError
        The server cannot be reached or the store refuses.
    """

    def __init__(self, experiment: str, uri: str | Path) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            _need("mlflow")
        text = str(uri)
        if "://" not in text and not text.startswith("file:"):
            text = Path(text).resolve().as_uri()
        if text.startswith("file:"):  # the stores adcs creates: opt in to MLflow's file store
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        _database_store(text)
        _reachable(text)
        self.uri = text
        with _store_errors(text):
            self.client = MlflowClient(tracking_uri=text)
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = (
                found.experiment_id if found else self.client.create_experiment(experiment)
            )
        self._runs: dict[str, str] = {}

    def start(self, run_id: str, params: Mapping[str, Any]) -> None:
        if run_id in self._runs:
            return
        with _store_errors(self.uri):
            run = self.client.create_run(self.experiment_id, run_name=run_id)
            self._runs[run_id] = run.info.run_id
            for key, value in params.items():
                self.client.log_param(run.info.run_id, key, value)

    def log(self, run_id: str, step: int, metrics: Mapping[str, float]) -> None:
        if run_id not in self._runs:
            self.start(run_id, {})
        mlflow_run = self._runs[run_id]
        with _store_errors(self.uri):
            for key, value in metrics.items():
                if value is not None and math.isfinite(float(value)):
                    self.client.log_metric(mlflow_run, key, float(value), step=int(step))

    def finish(self, run_id: str) -> None:
        """Mark run ``run_id`` FINISHED: it holds every evaluation."""
        with _store_errors(self.uri):
            self.client.set_terminated(self._runs.pop(run_id))

    def discard(self, run_id: str) -> None:
        """Delete run ``run_id``, written in part."""
        mlflow_run = self._runs.pop(run_id, None)
        if mlflow_run is not None:
            with contextlib.suppress(Exception):  # the store may be what failed
                self.client.delete_run(mlflow_run)

    def close(self) -> None:
        with _store_errors(self.uri):
            for mlflow_run in self._runs.values():
                self.client.set_terminated(mlflow_run)
        self._runs.clear()


TRACKERS = ("tensorboard", "mlflow")
"""The tracking backends by name."""


def make_tracker(kind: str, dest: str | Path, experiment: str, *, resume: bool = False) -> Tracker:
    """The tracker of backend ``kind`` writing to ``dest`` (a folder, or an MLflow URI);
    ``resume`` for a resumed run (`TensorBoardTracker`'s).

    Raises
    ------
    ValueError
        An unknown backend.
    ImportError
        The backend's extra is not installed (the message says which).
    """
    if kind == "tensorboard":
        return TensorBoardTracker(dest, resume=resume)
    if kind == "mlflow":
        return MLflowTracker(experiment, dest)
    raise ValueError(f"unknown tracking backend {kind!r}; choose one of {list(TRACKERS)}")


def default_destination(kind: str) -> Path:
    """Where live tracking writes by default: TensorBoard's ``runs/``, MLflow's ``mlruns/``
    (in the working folder, never inside a results folder, which is written atomically)."""
    return Path("runs" if kind == "tensorboard" else "mlruns")


def run_params(spec: Any) -> dict[str, Any]:
    """A run's parameters for a tracker: its scheduler's hyperparameters, method and seed."""
    scheduler = spec.scheduler
    fields = getattr(scheduler, "__dataclass_fields__", {})
    params = {name: getattr(scheduler, name) for name in fields}
    params.update(method=type(scheduler).__name__, seed=spec.seed)
    return {k: v.value if hasattr(v, "value") else v for k, v in params.items()}


def log_evaluations(tracker: Tracker, events: Any) -> None:
    """Log [`Evaluation`][adcs.sim.Evaluation] events (their round as the step): every
    per-evaluation column of `adcs.columns.COLUMNS` one evaluation gives (``Evaluation.columns``)."""
    for e in events:
        tracker.log(e.run_id, e.round, e.columns)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class ExportError(ValueError):
    """A folder that cannot be exported, or a destination that already holds its export."""


def _parts(folder: Path) -> list[tuple[str | None, Path]]:
    """The results folders to export: ``folder`` itself, or a sweep's or leaderboard's parts."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder (an adcs results folder is expected)")
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"{folder} is not an adcs results folder: manifest.json is missing")
    if (folder / "leaderboard.csv").is_file():  # a sweep's or a leaderboard's: one per part
        parts: list[tuple[str | None, Path]] = [
            (p.name, p) for p in sorted(folder.iterdir()) if (p / "runs.csv").is_file()
        ]
        if not parts:
            raise FileNotFoundError(f"{folder} holds a leaderboard.csv but no results folder")
    else:
        parts = [(None, folder)]
    return parts


def _exported(tracker: Tracker) -> dict[str, bool]:
    """The run names ``tracker``'s destination already holds, and whether each is whole."""
    if isinstance(tracker, MLflowTracker):
        with _store_errors(tracker.uri):
            found = tracker.client.search_runs([tracker.experiment_id], max_results=50_000)
        return {r.info.run_name: r.info.status == "FINISHED" for r in found}
    assert isinstance(tracker, TensorBoardTracker)
    return {
        str(p.parent.relative_to(tracker.logdir)): True
        for p in tracker.logdir.glob("**/events.out.tfevents.*")
        if p.relative_to(tracker.logdir).parts[0] != ".partial"
    }


@dataclass(frozen=True)
class _Run:
    """One run to export: its name, parameters and evaluations (round, metrics)."""

    name: str
    params: dict[str, Any]
    evaluations: list[tuple[int, dict[str, float]]]


def _part_runs(part: Path, name: str | None, point: Mapping[str, Any]) -> list[_Run]:
    """One results folder's runs, read whole before anything is written; named
    ``name/<run_id>`` when it is a part."""
    prefix = "" if name is None else f"{name}/"
    runs = read_table(part / "runs.csv", RUN_COLUMNS)
    metrics = read_table(part / "metrics.csv", METRIC_COLUMNS)
    own = set(runs.header) | {"round"}  # a run's own columns are no metrics
    evaluations: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for i, row in enumerate(metrics.rows, start=2):
        step = parsed(metrics.path, f"line {i}'s round", int, row["round"])
        values = {k: _number(v) for k, v in row.items() if k not in own}
        found = {k: v for k, v in values.items() if v is not None}
        evaluations.setdefault(row["run_id"], []).append((step, found))
    out = []
    for i, run in enumerate(runs.rows, start=2):
        params = dict(parsed(runs.path, f"line {i}'s params", json.loads, run["params"] or "{}"))
        params.update(method=run["method"], seed=run["seed"], variant=run["variant"])
        if name is not None:
            params.update(point, workload=name)
        out.append(_Run(prefix + run["run_id"], params, evaluations.get(run["run_id"], [])))
    return out


def export(
    folder: str | Path, to: str, dest: str | Path | None = None, *, resume: bool = False
) -> Path | str:
    """Write a finished results folder's evaluations to a tracking backend, run by run.

    Each run is written whole or not at all: a TensorBoard run is written aside and moved to
    its place once complete; an MLflow run is marked FINISHED once complete and deleted when
    the export stops inside it. An export that stops says (in its exception's notes) how many
    runs it wrote and how to finish: the same export with ``resume=True`` writes the rest.

    Parameters
    ----------
    folder : path
        An adcs results folder (``runs.csv`` and ``metrics.csv``), or a sweep's or leaderboard's
        folder: each of its parts is exported, its runs named ``<part>/<run_id>`` with the part
        (``workload``) and its sweep values among their parameters.
    to : {"tensorboard", "mlflow"}
    dest : path or URI, optional
        Default: ``FOLDER/tensorboard`` or ``FOLDER/mlruns``.
    resume : bool
        Finish an earlier export that stopped: skip the runs ``dest`` holds whole (an MLflow run
        it holds unfinished is deleted and written again).

    Returns
    -------
    path or str
        Where the backend wrote (the log folder, or the MLflow tracking URI).

    Raises
    ------
    FileNotFoundError
        ``folder`` is no results folder (a file is missing).
    ResultsFileError
        One of its files is empty, truncated, corrupt or not one adcs wrote.
    ExportError
        ``dest`` already holds one of its runs (an earlier export: the runs would be doubled;
        without ``resume``).
    TrackingError
        The MLflow server cannot be reached or its store refuses.
    """
    folder = Path(folder)
    parts = _parts(folder)
    manifest = read_manifest(folder / "manifest.json")
    points = (manifest.get("sweep") or {}).get("points") or {}
    runs = [r for name, part in parts for r in _part_runs(part, name, points.get(name, {}))]
    target = (
        dest if dest is not None else folder / ("tensorboard" if to == "tensorboard" else "mlruns")
    )
    experiment = str(manifest.get("experiment", folder.name))
    tracker: Tracker = (
        TensorBoardTracker(target, staged=True)
        if to == "tensorboard"
        else make_tracker(to, target, experiment)
    )
    where = tracker.uri if isinstance(tracker, MLflowTracker) else str(target)
    done, current = 0, None
    try:
        held = _exported(tracker)
        again = [r.name for r in runs if r.name in held and (held[r.name] or not resume)]
        if again and not resume:
            raise ExportError(
                f"{where} already holds run {again[0]!r}"
                + (f" and {len(again) - 1} more" if len(again) > 1 else "")
                + " (an earlier export); remove it or choose another --dest, or pass --resume "
                "to finish an export that stopped"
            )
        if isinstance(tracker, MLflowTracker):  # an export that stopped inside a run
            _delete_unfinished(
                tracker, {r.name for r in runs} & {n for n, ok in held.items() if not ok}
            )
        todo = [r for r in runs if r.name not in again]
        done = len(runs) - len(todo)
        for run in todo:
            current = run.name
            tracker.start(run.name, run.params)
            for step, metrics in run.evaluations:
                tracker.log(run.name, step, metrics)
            _finish(tracker, run.name)
            done, current = done + 1, None
    except BaseException as exc:
        if current is not None:
            _discard(tracker, current)
        if done < len(runs) and not isinstance(exc, ExportError):
            _note(exc, f"{done} of {len(runs)} runs are exported whole in {where} (the one being "
                       f"written was removed); the same export with --resume writes the rest")  # fmt: skip
        raise
    finally:
        tracker.close()
    return tracker.uri if isinstance(tracker, MLflowTracker) else Path(target)


def _finish(tracker: Tracker, name: str) -> None:
    assert isinstance(tracker, MLflowTracker | TensorBoardTracker)
    tracker.finish(name)


def _discard(tracker: Tracker, name: str) -> None:
    assert isinstance(tracker, MLflowTracker | TensorBoardTracker)
    tracker.discard(name)


def _delete_unfinished(tracker: MLflowTracker, names: set[str]) -> None:
    """Delete the runs named ``names`` that an export which stopped left unfinished."""
    if not names:
        return
    with _store_errors(tracker.uri):
        for r in tracker.client.search_runs([tracker.experiment_id], max_results=50_000):
            if r.info.run_name in names and r.info.status != "FINISHED":
                tracker.client.delete_run(r.info.run_id)


def _note(exc: BaseException, note: str) -> None:
    """Add ``note`` to ``exc`` (PEP 678; the command line's ``error:`` line ends with it)."""
    exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]
