"""Experiment tracking: a run's evaluations as TensorBoard event files or an MLflow store.

A `Tracker` receives, per adcs run, its parameters once and then each evaluation's metrics
(``worst_acc``, ``avg_acc``, ``p10_acc``, ``test_loss``, per-group accuracies …) with the round as
the step. Two backends, each in an extra:

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

import csv
import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "TRACKERS",
    "ExportError",
    "MLflowTracker",
    "TensorBoardTracker",
    "Tracker",
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
    """

    def __init__(self, logdir: str | Path, *, resume: bool = False) -> None:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            _need("tensorboard")
        self.logdir = Path(logdir)
        self.resume = resume
        self._event, self._summary, self._writer_cls = event_pb2, summary_pb2, EventFileWriter
        self._writers: dict[str, Any] = {}
        self._restarting: set[str] = set()  # resumed runs whose first step is still to come

    def start(self, run_id: str, params: Mapping[str, Any]) -> None:
        writer = self._writers.get(run_id)
        if writer is None:
            earlier = sorted((self.logdir / run_id).glob("events.out.tfevents.*"))
            if earlier and self.resume:
                self._restarting.add(run_id)
            for path in [] if self.resume else earlier:
                path.unlink()
            writer = self._writer_cls(str(self.logdir / run_id))
            self._writers[run_id] = writer
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
            self._writers[run_id].add_event(
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
        self._writers[run_id].add_event(event)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()


class MLflowTracker:
    """An MLflow experiment with one MLflow run per adcs run.

    Parameters
    ----------
    experiment : str
        The MLflow experiment's name (created if missing).
    uri : str or path
        A tracking URI (``sqlite:///mlflow.db``, ``http://…``), or a folder for a file store.
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
        self.uri = text
        self.client = MlflowClient(tracking_uri=text)
        found = self.client.get_experiment_by_name(experiment)
        self.experiment_id = (
            found.experiment_id if found else self.client.create_experiment(experiment)
        )
        self._runs: dict[str, str] = {}

    def start(self, run_id: str, params: Mapping[str, Any]) -> None:
        if run_id in self._runs:
            return
        run = self.client.create_run(self.experiment_id, run_name=run_id)
        self._runs[run_id] = run.info.run_id
        for key, value in params.items():
            self.client.log_param(run.info.run_id, key, value)

    def log(self, run_id: str, step: int, metrics: Mapping[str, float]) -> None:
        if run_id not in self._runs:
            self.start(run_id, {})
        mlflow_run = self._runs[run_id]
        for key, value in metrics.items():
            if value is not None and math.isfinite(float(value)):
                self.client.log_metric(mlflow_run, key, float(value), step=int(step))

    def close(self) -> None:
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
    """Log [`Evaluation`][adcs.sim.Evaluation] events (their round as the step)."""
    for e in events:
        metrics = {"worst_acc": e.worst_acc, "avg_acc": e.avg_acc, "p10_acc": e.p10_acc,
                   "test_loss": e.test_loss}  # fmt: skip
        tracker.log(e.run_id, e.round, metrics)


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        yield from csv.DictReader(f)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class ExportError(ValueError):
    """A folder that cannot be exported, or a destination that already holds its export."""


def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path} cannot be read as JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ExportError(f"{path} is not a JSON object")
    return manifest


_RUN_COLUMNS = ("run_id", "method", "seed")
_METRIC_COLUMNS = ("run_id", "round")


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
    for _, part in parts:
        for name, columns in (("runs.csv", _RUN_COLUMNS), ("metrics.csv", _METRIC_COLUMNS)):
            if not (part / name).is_file():
                raise FileNotFoundError(f"{part} is not an adcs results folder: {name} is missing")
            with (part / name).open(newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), [])
            missing = [c for c in columns if c not in header]
            if missing:
                raise ExportError(f"{part / name} lacks the column(s) {', '.join(missing)}")
    return parts


def _exported(tracker: Tracker) -> set[str]:
    """The run names ``tracker``'s destination already holds."""
    if isinstance(tracker, MLflowTracker):
        found = tracker.client.search_runs([tracker.experiment_id], max_results=50_000)
        return {r.info.run_name for r in found}
    assert isinstance(tracker, TensorBoardTracker)
    return {
        str(p.parent.relative_to(tracker.logdir))
        for p in tracker.logdir.glob("**/events.out.tfevents.*")
    }


def _export_part(tracker: Tracker, part: Path, name: str | None, point: Mapping[str, Any]) -> None:
    """Log one results folder's runs, named ``name/<run_id>`` when it is a part."""
    prefix = "" if name is None else f"{name}/"
    run_columns: set[str] = set()
    for run in _rows(part / "runs.csv"):
        run_columns.update(run)
        params = dict(json.loads(run.get("params") or "{}"))
        params.update(method=run["method"], seed=run["seed"], variant=run.get("variant", ""))
        if name is not None:
            params.update(point, workload=name)
        tracker.start(prefix + run["run_id"], params)
    for row in _rows(part / "metrics.csv"):  # a run's own columns are no metrics
        values = {k: _number(v) for k, v in row.items() if k not in run_columns | {"round"}}
        metrics = {k: v for k, v in values.items() if v is not None}
        tracker.log(prefix + row["run_id"], int(row["round"]), metrics)


def export(folder: str | Path, to: str, dest: str | Path | None = None) -> Path | str:
    """Write a finished results folder's evaluations to a tracking backend.

    Parameters
    ----------
    folder : path
        An adcs results folder (``runs.csv`` and ``metrics.csv``), or a sweep's or leaderboard's
        folder: each of its parts is exported, its runs named ``<part>/<run_id>`` with the part
        (``workload``) and its sweep values among their parameters.
    to : {"tensorboard", "mlflow"}
    dest : path or URI, optional
        Default: ``FOLDER/tensorboard`` or ``FOLDER/mlruns``.

    Returns
    -------
    path or str
        Where the backend wrote (the log folder, or the MLflow tracking URI).

    Raises
    ------
    FileNotFoundError
        ``folder`` is no results folder (a file is missing).
    ExportError
        Its manifest or tables cannot be read, or ``dest`` already holds one of its runs (an
        earlier export: the runs would be doubled).
    """
    folder = Path(folder)
    parts = _parts(folder)
    manifest = _manifest(folder)
    sweep = manifest.get("sweep")
    points = sweep.get("points", {}) if isinstance(sweep, dict) else {}
    target = (
        dest if dest is not None else folder / ("tensorboard" if to == "tensorboard" else "mlruns")
    )
    tracker = make_tracker(to, target, str(manifest.get("experiment", folder.name)))
    try:
        names = {
            ("" if name is None else f"{name}/") + run["run_id"]
            for name, part in parts
            for run in _rows(part / "runs.csv")
        }
        again = sorted(names & _exported(tracker))
        if again:
            raise ExportError(
                f"{target} already holds run {again[0]!r}"
                + (f" and {len(again) - 1} more" if len(again) > 1 else "")
                + " (an earlier export); remove it or choose another --dest"
            )
        for name, part in parts:
            _export_part(tracker, part, name, points.get(name, {}) if name else {})
    finally:
        tracker.close()
    return tracker.uri if isinstance(tracker, MLflowTracker) else Path(target)
