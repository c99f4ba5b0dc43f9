"""adcs in a notebook: run a configuration, and read any results folder as pandas DataFrames.

>>> res = adcs.run("experiments/quick.toml", sim__rounds=200, methods__adcs__theta=0.6)
>>> res.metrics.groupby(["variant", "round"]).worst_acc.mean()
>>> res.plot("worst_acc")
>>> adcs.load_results("results/leaderboard").leaderboard

``run`` writes an ordinary results folder (a fresh temporary one unless ``out`` is given, so
re-running a cell just works) and returns [`Results`][adcs.notebook.Results]. ``load_results`` reads
any results folder, including the leaderboard's (its workloads stacked, with a ``workload`` column).
The tables are tidy: one row per run (``runs``), per run and evaluation (``metrics``) or per
selected client and round (``selections``), with every scheduler parameter as a column of its own.

pandas is needed (``pip install "adcs[notebook]"``); it is imported here only.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adcs._validate import check_bool
from adcs.experiments.config import ExperimentConfig, config_from_dict, resolve_config
from adcs.experiments.config.overrides import keyword_edits, option_edits
from adcs.experiments.config.sweep import SweepAxis, load_with_sweep
from adcs.experiments.run.configure import configure
from adcs.experiments.run.resultfiles import (
    METRIC_COLUMNS,
    RUN_COLUMNS,
    ResultsFileError,
    parsed,
    read_arrays,
    read_manifest,
    read_table,
)
from adcs.leaderboard.sweep import run_sweep

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["Results", "load_results", "run"]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError('adcs\'s DataFrames need pandas: pip install "adcs[notebook]"') from None
    return pandas


def _config(
    config: str | Path | Mapping[str, Any] | ExperimentConfig, data: Path | None = None
) -> tuple[ExperimentConfig, list[SweepAxis]]:
    """The configuration ``run`` was given, and the axes of its file's ``[sweep]`` table: a path
    or a shipped configuration's name is read as ``adcs run`` reads it (one resolution,
    `adcs.experiments.config.resolve_config`; with ``data``, the file's own data path is not
    checked, as with ``--data``)."""
    if isinstance(config, ExperimentConfig):
        return config, []
    if isinstance(config, Mapping):
        return config_from_dict(config, source="<dict>", base_dir=Path.cwd()), []
    alternatives = "a shipped configuration's name, a mapping or an ExperimentConfig"
    path = resolve_config(_path("config", config, alternatives))
    return load_with_sweep(path, data_path=None if data is None else str(data))


def _path(name: str, value: Any, alternatives: str = "") -> Path:
    """``value`` as a path; ``TypeError`` naming ``name`` when it is none."""
    if not isinstance(value, str | os.PathLike):
        also = f", {alternatives}" if alternatives else ""
        raise TypeError(f"{name} must be a path{also}; got {type(value).__name__} {value!r:.80}")
    return Path(value)


def _sweep_axes(sweep: Any) -> list[SweepAxis]:
    """``run``'s ``sweep``: a mapping of dotted key to a list of values."""
    if sweep is None:
        return []
    if not isinstance(sweep, Mapping):
        raise TypeError(
            f"sweep must be a mapping of dotted key to values, got {type(sweep).__name__}"
        )
    axes = []
    for key, values in sweep.items():
        if not isinstance(key, str) or not isinstance(values, list | tuple | range):
            raise TypeError(
                f"sweep must map a dotted key to a list of values, got {key!r}: {values!r:.80}"
            )
        axes.append(SweepAxis(tuple(key.split(".")), tuple(values)))
    return axes


def _configured(
    config: str | Path | Mapping[str, Any] | ExperimentConfig,
    data: str | Path | None,
    sweep: Mapping[str, Sequence[Any]] | None,
    overrides: Mapping[str, Any],
) -> tuple[ExperimentConfig, list[SweepAxis]]:
    """``run``'s configuration and sweep axes, by the command line's path (`configure`): the
    keywords are its ``--set``, ``data`` its ``--data``."""
    data_path = None if data is None else _path("data", data)
    cfg, axes = _config(config, data_path)
    axes = [*axes, *_sweep_axes(sweep)]
    edits = [*keyword_edits(overrides), *option_edits(data=data_path, prefix="")]
    return configure(cfg, edits, axes), axes


def run(
    config: str | Path | Mapping[str, Any] | ExperimentConfig,
    out: str | Path | None = None,
    *,
    overwrite: bool = False,
    data: str | Path | None = None,
    workers: int = 1,
    progress: bool = True,
    sweep: Mapping[str, Sequence[Any]] | None = None,
    **overrides: Any,
) -> Results:
    """Run an experiment configuration and return its results as DataFrames.

    Parameters
    ----------
    config : path, mapping or ExperimentConfig
        A TOML file (with its ``[sweep]`` table, if any), a shipped configuration's name
        (``"quick"``, ``"fig1"``, ``"successor/paper"``, …; resolved as ``adcs run`` resolves
        it), a document shaped like the TOML (a dict), or a configuration object.
    out : path, optional
        The results folder (new, empty, or with ``overwrite`` an earlier adcs results folder).
        Default: a fresh temporary folder (``Results.folder`` says where).
    overwrite : bool
        Replace an earlier adcs results folder at ``out``.
    data : path, optional
        The data set's folder (as ``--data``).
    workers : int
        Processes advancing different seeds at once; results do not depend on it.
    progress : bool
        Show a progress bar (in a notebook too).
    sweep : mapping of dotted key to values, optional
        Beside the file's ``[sweep]`` table, run every combination of the values
        (``{"data.partition.alpha": [0.1, 1.0]}``) into one sweep folder
        (`adcs.leaderboard.sweep`); the tables then have a column per key.
    **overrides
        Any key of the configuration, dots written as double underscores: ``m=10``,
        ``sim__rounds=200``, ``data__partition__alpha=0.1``, ``methods__adcs__theta=0.6`` (a method
        by scheduler name or position), ``sim__availability={"kind": "bernoulli", "p": 0.5}``.
        Checked like the file; a bad key or value raises ``ConfigError`` naming it.

    Returns
    -------
    Results

    Raises
    ------
    TypeError
        ``config``, ``out``, ``data`` or ``sweep`` is of a type it cannot be (named).
    ValueError
        ``overwrite`` or ``progress`` is not a bool (``ConfigError``, a ``ValueError``, for a
        bad configuration key or value).
    """
    from adcs.experiments.run.runner import run_experiment

    overwrite, progress = check_bool("overwrite", overwrite), check_bool("progress", progress)
    target = None if out is None else _path("out", out)
    cfg, axes = _configured(config, data, sweep, overrides)
    folder = Path(tempfile.mkdtemp(prefix=f"adcs-{cfg.name}-")) if target is None else target
    command = f"adcs.run({cfg.source!r})"
    with _bar(progress) as tracker:
        if axes:
            run_sweep(
                cfg, axes, folder, force=overwrite, workers=workers, command=command,
                progress=None if tracker is None else (lambda name: tracker),
            )  # fmt: skip
        else:
            run_experiment(
                cfg, folder, overwrite=overwrite, workers=workers, command=command,
                progress=tracker,
            )  # fmt: skip
    return load_results(folder)


@contextmanager
def _bar(show: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar (rich: a live widget in a notebook, a bar on a terminal), or none."""
    if not show:
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("rounds", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield tick


@dataclass
class Results:
    """A results folder as tables.

    Attributes
    ----------
    folder : Path
    runs : pandas.DataFrame
        One row per run: its identity (``run_id``, ``method``, ``variant``, ``seed``, every
        scheduler parameter as a column) and its final numbers (``final_worst_acc``, …).
    metrics : pandas.DataFrame
        One row per run and evaluation (``round``, ``worst_acc``, ``avg_acc``, ``p10_acc``, …),
        with the run's identity columns.
    manifest : dict
        ``manifest.json`` (the configuration, the command, versions).
    leaderboard : pandas.DataFrame or None
        A leaderboard folder's ``leaderboard.csv`` (one row per workload and entry).
    """

    folder: Path
    runs: pd.DataFrame
    metrics: pd.DataFrame
    manifest: dict[str, Any]
    leaderboard: pd.DataFrame | None = None
    _parts: tuple[tuple[str | None, Path], ...] = field(default=(), repr=False)
    _selections: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def selections(self) -> pd.DataFrame:
        """One row per selected client and round: ``run_id``, ``round``, ``client``, ``returned``.

        Read from ``selections.npz`` on first use (for 70 runs × 20 000 rounds × 18 clients that
        is 25 million rows, about 250 MB).
        """
        if self._selections is None:
            pandas = _pandas()
            frames = [_selection_frame(path, workload) for workload, path in self._parts]
            self._selections = pandas.concat(frames, ignore_index=True)
        return self._selections

    def plot(
        self, metric: str = "worst_acc", *, by: str = "variant", ax: Axes | None = None
    ) -> Axes:
        """``metric`` against the round, one line per ``by`` (mean over seeds), per workload."""
        import matplotlib.pyplot as plt

        if metric not in self.metrics.columns:
            raise ValueError(f"no metric {metric!r}; the metrics are {list(self.metrics.columns)}")
        if by not in self.metrics.columns:
            raise ValueError(
                f"no column {by!r} to draw one line per; the columns are {list(self.metrics.columns)}"
            )
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4))
        keys = [by] if "workload" not in self.metrics.columns else ["workload", by]
        for label, group in self.metrics.groupby(keys, sort=False):
            curve = group.groupby("round")[metric].mean()
            name = " / ".join(map(str, label)) if isinstance(label, tuple) else str(label)
            ax.plot(curve.index, curve.to_numpy(), label=name)
        ax.set_xlabel("round")
        ax.set_ylabel(metric)
        ax.legend(fontsize="small")
        return ax


def _expanded_params(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The ``params`` JSON column spread into one column per parameter, and their names."""
    pandas = _pandas()
    params = pandas.DataFrame([json.loads(p) if isinstance(p, str) else {} for p in runs["params"]])
    if params.columns.has_duplicates or not all(isinstance(c, str) for c in params.columns):
        raise ValueError("the params column holds no JSON objects of named parameters")
    params.index = runs.index
    out = runs.drop(columns=["params"])
    for name in params.columns:
        if name in out.columns:
            out[name] = out[name].where(out[name].notna(), params[name])
        else:
            out[name] = params[name]
    return out, list(params.columns)


def _frame(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A table of a results folder as a data frame, checked whole first (see
    `adcs.experiments.run.resultfiles.read_table`)."""
    read_table(path, columns)
    return parsed(path, "the table", _pandas().read_csv, path)


def _read_one(folder: Path, workload: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    path = folder / "runs.csv"
    runs, params = parsed(path, "its params column", _expanded_params, _frame(path, RUN_COLUMNS))
    metrics = _frame(folder / "metrics.csv", METRIC_COLUMNS)
    identity = ["run_id", *(c for c in ("variant", *params) if c not in metrics.columns)]
    metrics = metrics.merge(runs[identity], on="run_id", how="left")
    if workload is not None:
        runs.insert(0, "workload", workload)
        metrics.insert(0, "workload", workload)
    return runs, metrics


def _selection_frame(folder: Path, workload: str | None) -> pd.DataFrame:
    pandas = _pandas()
    path = folder / "selections.npz"
    npz = read_arrays(path, lambda key: key.startswith(("selected/", "returned/")))
    frames = []
    for key in npz:
        if not key.startswith("selected/"):
            continue
        run_id = key.split("/", 1)[1]
        selected = npz[key]
        returned = npz.get(f"returned/{run_id}")
        if returned is None or returned.shape != selected.shape or selected.ndim != 2:
            raise ResultsFileError(
                path,
                f"holds {key} without a returned/{run_id} of its shape (not a file adcs wrote)",
            )
        rounds, slots = np.nonzero(selected >= 0)
        frame = pandas.DataFrame(
            {
                "run_id": run_id,
                "round": rounds.astype(np.int32),
                "client": selected[rounds, slots].astype(np.int32),
                "returned": returned[rounds, slots],
            }
        )
        if workload is not None:
            frame.insert(0, "workload", workload)
        frames.append(frame)
    if not frames:
        raise ResultsFileError(path, "holds no selected/<run_id> array (not a file adcs wrote)")
    return pandas.concat(frames, ignore_index=True)


LEADERBOARD_COLUMNS = ("workload", "entry", "method", "variant")
"""The columns every ``leaderboard.csv`` adcs writes has."""


def load_results(folder: str | Path) -> Results:
    """Read an adcs results folder (or a leaderboard's) as [`Results`][adcs.notebook.Results].

    Raises
    ------
    FileNotFoundError
        ``folder`` is not an adcs results folder.
    ResultsFileError
        One of its files is empty, truncated, corrupt or not one adcs wrote (the message names
        the file and what is wrong with it).
    TypeError
        ``folder`` is not a path.
    """
    pandas = _pandas()
    folder = _path("folder", folder)
    if not folder.exists():
        raise FileNotFoundError(f"{folder}: no such folder")
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{folder} is not an adcs results folder: no manifest.json")
    manifest = read_manifest(manifest_path)
    board = folder / "leaderboard.csv"
    parts: tuple[tuple[str | None, Path], ...]
    if board.is_file():
        parts = tuple((p.name, p) for p in sorted(folder.iterdir()) if (p / "runs.csv").is_file())
    else:
        parts = ((None, folder),)
    tables = [_read_one(path, workload) for workload, path in parts]
    points = (manifest.get("sweep") or {}).get("points") or {}  # checked by read_manifest
    for runs, metrics in tables if points else ():  # a sweep: its values as columns of their own
        for frame in (runs, metrics):
            values = points.get(frame["workload"].iloc[0], {}) if len(frame) else {}
            for i, (key, value) in enumerate(values.items()):
                frame.insert(1 + i, key, [value] * len(frame))
    return Results(
        folder=folder,
        runs=pandas.concat([t[0] for t in tables], ignore_index=True),
        metrics=pandas.concat([t[1] for t in tables], ignore_index=True),
        manifest=manifest,
        leaderboard=_frame(board, LEADERBOARD_COLUMNS) if board.is_file() else None,
        _parts=parts,
    )
