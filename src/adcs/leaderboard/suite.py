"""The leaderboard: every scheduler on a suite of workloads, ranked (docs/design.md §7).

The question users bring is *which scheduler should I use on my problem?* The leaderboard answers
it the way a careful researcher would: the same workloads, every method of
[`adcs.schedulers.SCHEDULERS`][adcs.schedulers.SCHEDULERS] (a new row joins automatically), several
seeds with common random numbers (the methods of a seed see the same minibatches, availability and
dropouts), and statistics that say when two methods cannot be told apart.

**Workloads** are ordinary experiment configurations without methods
(``experiments/leaderboard/*.toml``); `leaderboard_methods` supplies the methods: every
scheduler at its defaults, or at the points it declares for the leaderboard
(`adcs.schedulers.variants.Variants`, its ``leaderboard_variants``: ADCS at several θ and
with fresh quality). Each workload is run by the experiment runner into an ordinary results
folder, ``OUT/<workload>/``, checkpointed and resumable like any other.

**Scores** of an entry (a variant: a method and its hyperparameters) on a workload, per seed: the
final worst, 10th-percentile and average client accuracy (*final*: the mean of a run's last 10 %
of evaluations), the rounds to reach the workload's target worst accuracy
(`TARGET_FRACTION` of the final worst accuracy of random selection,
the scheduler that declares itself so, Uniform — what random selection reaches, as Oort sets its
targets), client computations and TV to uniform selection.

**Ranks** (`rank_workload`, `rank_table`), on the final worst accuracy (the paper's
fairness metric) and likewise on the others:

* the *rank* of an entry on a workload is its place by mean over seeds, 1 the highest; entries
  with equal means share the mean of their places; an entry without a finite mean ranks last;
* the *best* entry of a workload has the highest mean;
* an entry is *tied with the best* when a two-sided paired t-test over the seeds both ran does
  not tell them apart at the 5 % level once Holm-adjusted over the workload's comparisons with the
  best: with d_s the best's value minus the entry's on seed s and n ≥ 2 seeds, the test's p-value
  (t = mean(d) / (sd(d) / √n), n − 1 degrees of freedom) is multiplied by Holm's factor and stays
  at least 0.05 (`adcs.experiments.analysis.stats.holm`; the chance of calling any entry of the workload
  behind when it is not is at most 5 %). Pairing by seed uses the common random numbers: the
  methods of a seed share minibatches and availability. With one seed no test is possible and only
  an exact equality ties;
* the *overall* table gives each entry's mean rank over the workloads it ran on, how often it is
  the best, and how often it is the best or tied with the best.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.experiments.analysis.stats import paired_difference, tied
from adcs.experiments.analysis.timing import TARGET_FRACTION
from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    MethodConfig,
    config_from_dict,
    packaged_config_path,
    read_toml,
)
from adcs.experiments.config.overrides import Edit, edited
from adcs.experiments.run.distributed import ShardExecutor
from adcs.experiments.run.folder import (
    MANIFEST,
    ResultsFolder,
    RunError,
    note_kept,
    os_error,
)
from adcs.experiments.run.identity import document_identity
from adcs.experiments.run.provenance import provenance, source_checkout
from adcs.experiments.run.runner import (
    ProgressFn,
    RunInterrupted,
    config_differences,
    data_folders,
    resume_identity,
    run_experiment,
    submit_shards,
)
from adcs.leaderboard.ranking import (
    METRICS,
    Placing,
    RankRow,
    Score,
    check_metrics,
    rank_table,
    rank_workload,
    scores_of,
    variants_of,
)
from adcs.leaderboard.report import write_summary
from adcs.schedulers import SCHEDULERS

__all__ = [
    "METRICS",
    "QUICK",
    "QUICK_EDITS",
    "TARGET_FRACTION",
    "LeaderboardOutcome",
    "Placing",
    "RankRow",
    "Score",
    "join_entries",
    "join_leaderboard",
    "leaderboard_methods",
    "load_workload",
    "paired_difference",
    "quick_workload",
    "rank_table",
    "rank_workload",
    "run_leaderboard",
    "scores_of",
    "summarize_leaderboard",
    "tied",
    "workload_paths",
]

logger = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

QUICK: dict[str, Any] = {"rounds": 150, "eval_every": 15, "seeds": (0, 1, 2)}
"""``--quick``: every workload with these rounds, evaluation period and seeds (a smoke run)."""

WORKLOADS_FOLDER = "leaderboard"
"""Where the workloads are: ``experiments/leaderboard/`` (or the installed package's copy)."""
OPTIONAL_FOLDER = "optional"
"""Shipped workloads that run only when named (``experiments/leaderboard/optional/``)."""
REFERENCE_WORKLOAD = "paper"
"""Listed first: the paper's setting, against which the others are departures."""
CHECKPOINT_FORMAT = 1
SUMMARY_FILES = ("report.md", "leaderboard.csv", "ranks.csv", "summary.json", "summary.png")


# ---------------------------------------------------------------------------------------------
# workloads and methods


def leaderboard_methods(entries: Sequence[str] = ()) -> tuple[MethodConfig, ...]:
    """Every scheduler of [`SCHEDULERS`][adcs.schedulers.SCHEDULERS], each at its leaderboard
    points.

    In the table's order, each scheduler at its defaults (the published forms) or, when it
    declares ``leaderboard_variants`` (`Variants`), at those
    points in their order (for ADCS: θ swept at R = 20, then fresh quality); then ``entries``,
    more schedulers likewise (a built-in name, ``"package.module:Name"`` or an entry point's
    name; one already listed is not repeated).
    """
    names = [*SCHEDULERS, *(n for n in dict.fromkeys(entries) if n not in SCHEDULERS)]
    return tuple(method for name in names for method in _entries_of(name))


def _entries_of(name: str) -> list[MethodConfig]:
    """A scheduler's leaderboard entries: its declared variants' grids, else its defaults."""
    variants = variants_of(name)
    if variants is None:
        return [MethodConfig(name)]
    return [MethodConfig(name, params=params, sweep=sweep) for params, sweep in variants.grids()]


def _workloads_dir() -> Path:
    # the folder beside the shipped configurations (the checkout's, else the package's)
    return packaged_config_path("quick").parent / WORKLOADS_FOLDER


def workload_paths(names: Sequence[str] | None = None) -> list[Path]:
    """The workload files: the default suite of ``experiments/leaderboard/``, or those named.

    Parameters
    ----------
    names : sequence of str, optional
        Workload names (file stems, e.g. ``"m6"``, or an optional workload of
        ``experiments/leaderboard/optional/`` such as ``"cnn"``) or paths to TOML files of one's
        own. Default: the suite (``experiments/leaderboard/*.toml``), the paper's setting first,
        then by name; the optional workloads run only when named.

    Raises
    ------
    ConfigError
        A name that is no shipped workload (the known ones are listed).
    """
    folder = _workloads_dir()
    shipped = sorted(folder.glob("*.toml"), key=lambda p: (p.stem != REFERENCE_WORKLOAD, p.stem))
    if not names:
        if not shipped:
            raise ConfigError(f"no leaderboard workloads in {folder}")
        return shipped
    optional = sorted((folder / OPTIONAL_FOLDER).glob("*.toml"))
    by_name = {p.stem: p for p in [*optional, *shipped]}
    out = []
    for name in names:
        if name.endswith(".toml") or "/" in name:
            out.append(Path(name))
        elif name in by_name:
            out.append(by_name[name])
        else:
            raise ConfigError(f"no leaderboard workload {name!r}; known: {sorted(by_name)}")
    return out


def load_workload(path: str | Path, entries: Sequence[str] = ()) -> ExperimentConfig:
    """A workload file as an experiment configuration running `leaderboard_methods`.

    ``entries`` are schedulers added to the ranked entries (`leaderboard_methods`).

    Raises
    ------
    ConfigError
        The file lists methods (the leaderboard supplies them), or fails the configuration's
        checks (the key named).
    """
    path = Path(path)
    with contextlib.suppress(ValueError):  # named relative to the working folder where it is in it
        path = path.resolve().relative_to(Path.cwd().resolve())
    raw = read_toml(path)
    if "methods" in raw:
        raise ConfigError(
            f"{path}: a leaderboard workload lists no [[methods]]: every scheduler of the name "
            "table runs (see adcs.leaderboard.suite.leaderboard_methods)"
        )
    placeholder = [{"name": next(iter(SCHEDULERS))}]  # the configuration's checks need one
    doc = {**raw, "methods": placeholder, "outputs": raw.get("outputs", ["curves"])}
    config = config_from_dict(doc, source=str(path), base_dir=path.parent)
    return dataclasses.replace(config, methods=leaderboard_methods(entries))


QUICK_EDITS = (
    Edit("--quick", ("sim", "rounds"), QUICK["rounds"], "preset"),
    Edit("--quick", ("sim", "eval_every"), QUICK["eval_every"], "preset"),
    Edit("--quick", ("seeds",), list(QUICK["seeds"]), "preset"),
)
"""``--quick`` as edits of a workload's document (`adcs.experiments.config.overrides`)."""


def quick_workload(config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with the `QUICK` rounds, evaluation period and seeds."""
    return edited(config, QUICK_EDITS)


# ---------------------------------------------------------------------------------------------
# the leaderboard folder


@dataclass(frozen=True, eq=False)
class LeaderboardOutcome:
    """What `run_leaderboard` produced.

    Attributes
    ----------
    folder : Path
    workloads : list of str
    ranks : list of RankRow
        On the final worst accuracy.
    scores : dict of str to list of Score
    report : Path
    wall_s : float
    resumed : bool
    """

    folder: Path
    workloads: list[str]
    ranks: list[RankRow]
    scores: dict[str, list[Score]]
    report: Path
    wall_s: float
    resumed: bool = False


def _identity(configs: Sequence[ExperimentConfig]) -> dict[str, Any]:
    """What must agree for a leaderboard to be resumed: the workloads and their configurations."""
    out = {config.name: resume_identity(config) for config in configs}
    return {"format": CHECKPOINT_FORMAT, "kind": "leaderboard", "workloads": out}


def _check_resume(folder: ResultsFolder, identity: dict[str, Any]) -> None:
    saved = folder.load_checkpoint()
    if isinstance(saved, dict) and "identity" in saved:  # a run's (execute.load_progress)
        raise ConfigError(
            f"--resume: {folder.partial} holds an interrupted run, not a sweep or leaderboard: "
            "resume it with the command that started it (without --sweep)"
        )
    if not isinstance(saved, dict) or saved.get("kind") != "leaderboard":
        raise RunError(f"--resume: {folder.partial} holds no interrupted leaderboard")
    if list(saved["workloads"]) != list(identity["workloads"]):
        raise ConfigError(
            f"--resume: the interrupted leaderboard ran the workloads {list(saved['workloads'])}, "
            f"not {list(identity['workloads'])}"
        )
    diffs = config_differences(saved["workloads"], identity["workloads"])
    if diffs:
        raise ConfigError(
            "--resume: the workloads differ from the interrupted leaderboard's in "
            + "; ".join(diffs)
        )


def _workload_state(parent: Path, name: str) -> str:
    """``done`` (a complete results folder), ``resume`` (a checkpoint) or ``new``."""
    sub = ResultsFolder(parent / name)
    if (parent / name / MANIFEST).is_file():
        return "done"
    if sub.has_checkpoint():
        return "resume"
    return "new"


def run_leaderboard(
    workloads: Sequence[ExperimentConfig],
    out: str | Path,
    *,
    quick: bool = False,
    force: bool = False,
    resume: bool = False,
    workers: int | None = None,
    checkpoint_every: int | None = None,
    executor: ShardExecutor | None = None,
    dataset: Any = None,
    progress: Callable[[str], ProgressFn | None] | None = None,
    on_workload: Callable[[str, str], None] | None = None,
    command: str = "",
    kind: str = "leaderboard",
    finalize: Callable[[Path], Mapping[str, Any]] | None = None,
    metrics: Sequence[str] = (),
) -> LeaderboardOutcome:
    """Run every workload into ``out/<workload>/`` and write the leaderboard beside them.

    The leaderboard folder is written as a results folder is: locked, as ``.OUT.partial``
    beside ``out`` until everything is written, then renamed. It is resumable from the start:
    ``resume=True`` keeps the finished workloads, resumes the interrupted one from its checkpoint
    and runs the rest.

    Parameters
    ----------
    workloads : sequence of ExperimentConfig
        Distinct names (each names its results folder).
    out : path
    quick : bool
        Recorded (and said in the report).
    force, resume : bool
        As for `run_experiment`, for the whole leaderboard.
    workers, checkpoint_every : int, optional
        Passed to each workload's run.
    executor : ShardExecutor, optional
        Run the (workload, seed) shards there (e.g. on a Ray cluster): every workload's shards
        are submitted before the first is gathered, so they run at once.
    dataset : FashionMNIST, optional
        Use these data for every workload (tests).
    progress : callable, optional
        ``progress(workload)`` gives that workload's progress callback.
    on_workload : callable, optional
        ``on_workload(workload, state)`` with state ``done`` (kept from an interrupted run),
        ``resume``, ``new``, before each workload runs.
    command : str
    kind : str
        What the folder is, recorded in its manifest (``"sweep"`` for
        `run_sweep`, whose points are the workloads).
    finalize : callable, optional
        Called with the partial folder once the summary is written; what it returns is added to
        the manifest.
    metrics : sequence of str
        Result columns ranked beside the accuracies (any of
        `rankable_columns`, e.g. ``"test_loss"``).

    Raises
    ------
    ConfigError, RunError, RunInterrupted
        As `run_experiment` does; an interrupted leaderboard keeps
        its partial folder (``resume=True`` continues it).
    """
    options = _Options(
        out=out, quick=quick, force=force, resume=resume, workers=workers,
        checkpoint_every=checkpoint_every, executor=executor, dataset=dataset,
        progress=progress, on_workload=on_workload, command=command, kind=kind,
        finalize=finalize, metrics=tuple(metrics),
    )  # fmt: skip
    return _run(workloads, options)


@dataclass(frozen=True, eq=False)
class _Options:
    """`run_leaderboard`'s arguments beside the workloads (documented there)."""

    out: str | Path
    quick: bool
    force: bool
    resume: bool
    workers: int | None
    checkpoint_every: int | None
    executor: ShardExecutor | None
    dataset: Any
    progress: Callable[[str], ProgressFn | None] | None
    on_workload: Callable[[str, str], None] | None
    command: str
    kind: str
    finalize: Callable[[Path], Mapping[str, Any]] | None
    metrics: tuple[str, ...]


def _run(workloads: Sequence[ExperimentConfig], options: _Options) -> LeaderboardOutcome:
    """`run_leaderboard`: the folder's life (check, lock, resume, finish) around the runs."""
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    names = _checked_names(workloads)
    try:
        metrics = check_metrics(options.metrics)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    data = [] if options.dataset is not None else sorted({p for c in workloads
                                                           for p in data_folders(c)})  # fmt: skip
    folder = ResultsFolder(options.out, data=data, keep=source_checkout())
    force, resume, command = options.force, options.resume, options.command
    folder.check(force=force, resume=resume)
    identity = _identity(workloads)
    folder.acquire(command)
    try:
        resumed = folder.prepare(force=force, resume=resume, command=command)
        if resumed:
            _check_resume(folder, identity)
        folder.save_checkpoint(identity, {"progress": "leaderboard", "workloads": names})
        _run_workloads(workloads, folder, options)
        try:
            ranks, scores = write_summary(
                folder.partial, names, quick=options.quick, metrics=metrics, kind=options.kind
            )
            extra = {} if options.finalize is None else dict(options.finalize(folder.partial))
        except OSError as exc:  # a full disk: the folder, and that every workload is kept
            error = os_error(f"cannot write the {options.kind}'s summary", exc, folder.partial)
            kept = _kept(folder.partial, names, options.kind, "")
            note_kept(error, kept or "the checkpoint", folder.partial)
            raise error from exc
        executor = options.executor
        manifest = {
            "experiment": options.kind, "kind": options.kind, "workloads": names,
            "configs": identity["workloads"], "quick": options.quick, "command": command,
            "started_at": started_at, "wall_s": time.perf_counter() - started,
            "resumed": resumed,
            **({} if executor is None else {"executor": executor.describe([])}),
            **extra, **provenance(),
        }  # fmt: skip
        text = json.dumps(manifest, indent=2, default=str) + "\n"
        (folder.partial / MANIFEST).write_text(text, encoding="utf-8")
        folder.finish()
    finally:
        folder.release()
    return LeaderboardOutcome(
        folder=folder.out, workloads=names, ranks=ranks, scores=scores,
        report=folder.out / "report.md", wall_s=time.perf_counter() - started, resumed=resumed,
    )  # fmt: skip


def _checked_names(workloads: Sequence[ExperimentConfig]) -> list[str]:
    """The workloads' names: at least one, distinct (each names its results folder)."""
    names = [c.name for c in workloads]
    if not names:
        raise ConfigError("the leaderboard needs at least one workload")
    if len(set(names)) != len(names):
        raise ConfigError(f"workload names must be distinct, got {names}")
    return names


def _run_workloads(
    workloads: Sequence[ExperimentConfig], folder: ResultsFolder, runs: _Options
) -> None:
    """Run (or keep, or resume) every workload into the partial folder.

    An interruption keeps the partial folder for ``--resume``; another failure before any
    workload has started discards it.
    """
    partial = folder.partial
    names = [c.name for c in workloads]
    try:
        states = {n: _workload_state(partial, n) for n in names}
        if runs.executor is not None:  # every workload's shards first, so they run at once
            for config in workloads:
                if states[config.name] != "done":
                    submit_shards(config, partial / config.name, runs.executor,
                                  dataset=runs.dataset)  # fmt: skip
        for config in workloads:
            _run_workload(config, partial, states[config.name], runs)
    except (RunInterrupted, KeyboardInterrupt) as exc:
        inner = exc.progress if isinstance(exc, RunInterrupted) and exc.resumable else ""
        kept = _kept(partial, names, runs.kind, inner)
        if kept is None:  # no workload finished and none took a checkpoint
            folder.discard(keep_checkpoint=False)
            raise RunInterrupted(
                f"interrupted before the first {_unit(runs.kind)} finished or took a checkpoint; "
                "nothing was kept",
                resumable=False, partial=partial, progress="",
            ) from exc  # fmt: skip
        raise RunInterrupted(
            f"interrupted; {kept} is kept in {partial}: continue with the same command and "
            "--resume",
            resumable=True, partial=partial, progress=inner, kept=kept,
        ) from exc  # fmt: skip
    except BaseException as exc:
        kept = _kept(partial, names, runs.kind, "")
        if kept is None:
            folder.discard(keep_checkpoint=False)  # nothing worth resuming
        if isinstance(exc, OSError):  # a full disk: the folder it was writing, named
            error = os_error(f"cannot write the {runs.kind}", exc, partial)
            if kept is not None:
                note_kept(error, kept, partial)
            raise error from exc
        if kept is not None:
            note_kept(exc, kept, partial)
        raise


def _unit(kind: str) -> str:
    return "point" if kind == "sweep" else "workload"


def _kept(partial: Path, names: Sequence[str], kind: str, progress: str) -> str | None:
    """What an interrupted leaderboard or sweep keeps, in words (None: nothing worth resuming):
    its finished workloads (a sweep's points) and the checkpoint of the one that was running."""
    states = {n: _workload_state(partial, n) for n in names}
    done = sum(s == "done" for s in states.values())
    running = [n for n, s in states.items() if s == "resume"]
    if not done and not running:
        return None
    unit = _unit(kind)
    said = f"{done} of {len(names)} {unit}s finished"
    if running:
        said += f", {unit} {running[0]}'s checkpoint" + (f": {progress}" if progress else "")
    return f"what the {kind} has done ({said})"


def _run_workload(config: ExperimentConfig, partial: Path, state: str, runs: _Options) -> None:
    """One workload into ``partial/<name>/``: kept when done, else resumed or run."""
    name = config.name
    if runs.on_workload is not None:
        runs.on_workload(name, state)
    if state == "done":
        return
    run_experiment(
        config, partial / name, overwrite=True, resume=state == "resume", quick=runs.quick,
        dataset=runs.dataset, workers=runs.workers, checkpoint_every=runs.checkpoint_every,
        executor=runs.executor, command=runs.command,
        progress=None if runs.progress is None else runs.progress(name),
        extra_manifest={"command": runs.command, "leaderboard": str(runs.out)},
    )  # fmt: skip


def summarize_leaderboard(
    folder: str | Path,
    names: Sequence[str] | None = None,
    *,
    quick: bool = False,
    metrics: Sequence[str] = (),
) -> tuple[list[RankRow], dict[str, list[Score]]]:
    """(Re)write the leaderboard's summary in ``folder`` from its workloads' results folders.

    ``names`` default: every subfolder holding a results folder, the paper's setting first.
    """
    folder = Path(folder)
    if names is None:
        found = [p.parent.name for p in folder.glob(f"*/{MANIFEST}")]
        names = sorted(found, key=lambda n: (n != REFERENCE_WORKLOAD, n))
    own = folder / MANIFEST  # a sweep's folder says so; without a manifest, a leaderboard's
    kind = json.loads(own.read_text(encoding="utf-8")).get("kind") if own.is_file() else None
    return write_summary(
        folder, list(names), quick=quick, metrics=metrics, kind=kind or "leaderboard"
    )


def join_leaderboard(
    folder: str | Path, workloads: Sequence[str | Path], *, command: str = ""
) -> list[str]:
    """Add finished workloads to a finished leaderboard, keeping its own as they are.

    Each workload's results folder (e.g. ``OUT2/<name>/`` of another leaderboard) is copied
    into ``folder`` unchanged; ``folder``'s manifest lists it, with its configuration (as a
    leaderboard records it) and where it came from; then the summary is rewritten over every
    workload (`summarize_leaderboard`). The workloads already there are neither rerun nor
    rewritten, so a leaderboard grows by new workloads without recomputing the old ones.

    Parameters
    ----------
    folder : path
        A finished leaderboard (its ``manifest.json`` says ``kind = "leaderboard"``).
    workloads : sequence of path
        Finished results folders, each named as its workload, none already in ``folder``.
    command : str
        Recorded in the manifest beside each joined workload.

    Returns
    -------
    list of str
        The leaderboard's workloads, the joined ones last.

    Raises
    ------
    ConfigError
        ``folder`` is no finished leaderboard, a workload is no finished results folder, or its
        name is taken.
    """
    folder = Path(folder)
    path = folder / MANIFEST
    doc = _finished_leaderboard(folder)
    names = list(doc.get("workloads", []))
    sources = [Path(w) for w in workloads]
    joined = []
    for source in sources:
        own = source / MANIFEST
        manifest = json.loads(own.read_text(encoding="utf-8")) if own.is_file() else {}
        if "config" not in manifest:
            raise ConfigError(f"{source} is no finished results folder (no {MANIFEST})")
        if source.name in names or (folder / source.name).exists():
            raise ConfigError(f"{folder} already holds a workload {source.name!r}")
        names.append(source.name)
        doc.setdefault("configs", {})[source.name] = document_identity(manifest["config"])
        joined.append({"workload": source.name, "from": str(source), "command": command,
                       "started_at": manifest.get("started_at"), "wall_s": manifest.get("wall_s")})  # fmt: skip
    for source in sources:
        partial = folder / f".{source.name}.joining"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial, copy_function=shutil.copy2)
        partial.rename(folder / source.name)
    doc["workloads"] = names
    doc["joined"] = [*doc.get("joined", []), *joined]
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    summarize_leaderboard(folder, names, quick=bool(doc.get("quick")))
    return names


def join_entries(
    folder: str | Path, parts: Sequence[str | Path], *, command: str = ""
) -> list[str]:
    """Add entries run later to a finished leaderboard's workloads, keeping the runs there.

    Each part is a finished results folder named as one of ``folder``'s workloads and running
    that workload's configuration with other methods (its seeds all, or some with further parts
    of the same workload): `adcs.experiments.run.merge.merge_results` joins the workload's folder
    and its parts, the joined folder replaces the workload's (its report says that its seeds'
    runs were computed in parts), the manifest records the joined configuration and the parts,
    and the summary is rewritten over every workload (`summarize_leaderboard`).

    Returns
    -------
    list of str
        The workloads that gained entries.

    Raises
    ------
    ConfigError
        ``folder`` is no finished leaderboard, a part names no workload of it, or a merge
        refuses (the part ran another configuration, or a run twice).
    """
    from adcs.experiments.run.merge import merge_results

    folder = Path(folder)
    path = folder / MANIFEST
    doc = _finished_leaderboard(folder)
    by_workload: dict[str, list[Path]] = {}
    for part in map(Path, parts):
        if part.name not in doc.get("workloads", []):
            raise ConfigError(
                f"{part} is named as no workload of {folder}: name it as its workload"
            )
        by_workload.setdefault(part.name, []).append(part)
    staging = folder / ".joining-entries"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        joined = {
            name: merge_results([folder / name, *more], staging / name, command=command)
            for name, more in by_workload.items()
        }  # every merge checked before any workload is replaced
        for name, merged in joined.items():
            old = folder / f".{name}.old"
            (folder / name).rename(old)
            merged.rename(folder / name)
            shutil.rmtree(old)
            manifest = json.loads((folder / name / MANIFEST).read_text(encoding="utf-8"))
            doc["configs"][name] = document_identity(manifest["config"])
        doc["entries_joined"] = [
            *doc.get("entries_joined", []),
            *({"workload": n, "from": [str(p) for p in ps], "command": command}
              for n, ps in by_workload.items()),
        ]  # fmt: skip
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    summarize_leaderboard(folder, doc["workloads"], quick=bool(doc.get("quick")))
    return list(by_workload)


def _finished_leaderboard(folder: Path) -> dict[str, Any]:
    """A finished leaderboard's manifest (`join_leaderboard`, `join_entries`)."""
    path = folder / MANIFEST
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if doc.get("kind") != "leaderboard":
        raise ConfigError(
            f"{folder} is no finished leaderboard (no {MANIFEST} of kind leaderboard)"
        )
    return doc
