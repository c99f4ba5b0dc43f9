"""Run an experiment configuration and write its results folder (docs/design.md §3, §4, §6).

`run_experiment` goes plan → execute → results → outputs:
`plan` turns the configuration into distinct runs (`expand_runs`:
one [`RunSpec`][adcs.sim.RunSpec] per (method, hyperparameters, seed); the same run asked for twice,
e.g. ADCS θ = 0.8, R = 20 by Figures 1, 2 and 3, is made once), loads and partitions the data and
cuts the runs into batches; `execute` advances the batches with
[`adcs.sim.engine.simulate`][adcs.sim.simulate] here, or their shards on an executor, checkpointing
as it goes; `results` writes the data files; this module adds the outputs (tables,
figures, report) and the manifest, in the results folder::

    metrics.csv      one row per run × evaluation: run_id, method, seed, the hyperparameters
                     the runs' schedulers name (their ``named_params``), any other that
                     varies between runs, round, then the
                     per-evaluation columns of `adcs.columns.COLUMNS`: worst_acc,
                     avg_acc, test_loss, p10_acc (the 10th-percentile client accuracy), acc_g<k>
                     (the mean accuracy of group k's evaluated clients); with [sim.attack],
                     honest_worst_acc, honest_p10_acc, honest_avg_acc (the malicious left out)
    runs.csv         one row per run: the same identity columns, variant, params (JSON),
                     final_* (mean over the last 10 % of evaluations, from final_from_round to
                     final_round) and last_* (the last evaluation), then the per-run columns
                     of the table: TV, costs, group shares
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
                     and, with ``[sim.privacy]``, ``client_epsilon/<run_id>`` (N,): each
                     client's ε over the run at the run's δ (runs.csv: ``epsilon``, the largest,
                     and ``delta``)
    summary.json     {"experiment": name, "runs": [...]}: the final and last numbers per run
    manifest.json    configuration, seeds, versions, git commit, data source and checksums, the
                     sessions that ran it (start time, wall time) and each run's wall time
    report.md, figures (curves.png, or the paper's fig1–3.png), table1.md/.csv when asked

With a ``[sim.system]`` table (client devices and the simulated clock, `adcs.sim.system`)
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
(`adcs.experiments.run.folder`); ``resume=True`` continues an interrupted run.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from adcs.experiments.analysis.figures import write_figures
from adcs.experiments.analysis.outputs import (
    Verdict,
    figures_by_name,
    study_of,
    write_study_report,
    write_tables,
)
from adcs.experiments.analysis.report import (
    RunRecord,
    SeriesSummary,
)
from adcs.experiments.config import ConfigError, ExperimentConfig
from adcs.experiments.run.distributed import ShardExecutor
from adcs.experiments.run.execute import (
    CHECKPOINT_FORMAT,
    ExperimentProgress,
    ProgressFn,
    SimulatedRuns,
    load_progress,
    simulate_all,
    submit_shards,
)
from adcs.experiments.run.folder import (
    ResultsFolder,
    RunError,
    note_kept,
    os_error,
)
from adcs.experiments.run.identity import config_differences, resume_identity
from adcs.experiments.run.manifest import experiment_manifest, report_context
from adcs.experiments.run.plan import (
    MEMORY_BUDGET_BYTES,
    PreparedRun,
    data_folders,
    expand_runs,
    make_partition,
    prepare_run,
    sim_settings,
)
from adcs.experiments.run.provenance import source_checkout
from adcs.experiments.run.results import (
    load_records,
    param_columns,
    write_data_files,
    write_json,
)
from adcs.experiments.run.workload import DataSource
from adcs.round.contract import SchedulerInitError
from adcs.sim.engine import RunSpec, SimConfig
from adcs.sim.spec import Evaluation

__all__ = [
    "CHECKPOINT_FORMAT",
    "MEMORY_BUDGET_BYTES",
    "ExperimentOutcome",
    "PlannedExperiment",
    "ProgressFn",
    "RunError",
    "RunInterrupted",
    "check_output",
    "config_differences",
    "data_folders",
    "expand_runs",
    "load_records",
    "make_partition",
    "param_columns",
    "plan_experiment",
    "resume_identity",
    "run_experiment",
    "sim_settings",
    "submit_shards",
]

logger = logging.getLogger(__name__)


class RunInterrupted(RunError):
    """The run was stopped (KeyboardInterrupt, SIGTERM through the CLI) before it finished.

    Attributes
    ----------
    resumable : bool
        Its checkpoint was kept in ``partial`` and ``resume=True`` continues it.
    partial : Path
    progress : str
        How far the kept checkpoint got.
    kept : str
        What is kept, in words (default: the checkpoint and how far it got).
    """

    def __init__(
        self, message: str, *, resumable: bool, partial: Path, progress: str, kept: str = ""
    ) -> None:
        super().__init__(message)
        self.resumable = resumable
        self.partial = partial
        self.progress = progress
        self.kept = kept or (f"the checkpoint ({progress})" if progress else "the checkpoint")


@dataclass(frozen=True, eq=False)
class ExperimentOutcome:
    """What `run_experiment` produced.

    Attributes
    ----------
    folder : Path
        The results folder.
    records : list of RunRecord
    summaries : list of SeriesSummary
        The report's rows: a study's series for its setting, else one per variant.
    claims : list of Verdict
        A study's claims as checked in ``report.md`` (empty off every study's setting).
    setting : str or None
        The study whose setting the configuration is (its report, columns and verdicts:
        `adcs.experiments.analysis.outputs`), e.g. ``"paper"``; None for none.
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
    claims: list[Verdict]
    setting: str | None
    figures: list[str]
    wall_s: float
    is_subset: bool
    data_source: str
    resumed: bool = False


def check_output(
    config: ExperimentConfig,
    out: str | Path,
    *,
    force: bool = False,
    resume: bool = False,
    dataset: DataSource | None = None,
) -> ResultsFolder:
    """Check ``out`` for a run of ``config`` before any work (see `ResultsFolder.check`).

    Raises
    ------
    RunError
        ``out`` cannot hold the results (one line, naming why).
    """
    data = [] if dataset is not None else data_folders(config)
    folder = ResultsFolder(out, data=data, keep=source_checkout())
    folder.check(force=force, resume=resume)
    return folder


@dataclass(frozen=True, eq=False)
class PlannedExperiment:
    """A configuration checked against its results folder and expanded into its runs, once.

    Attributes
    ----------
    config : ExperimentConfig
    folder : ResultsFolder
        Checked (`check_output`), not yet locked.
    runs : list of RunSpec
        The distinct runs (`expand_runs`).
    sim_config : SimConfig
    """

    config: ExperimentConfig
    folder: ResultsFolder
    runs: list[RunSpec]
    sim_config: SimConfig


def plan_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    dataset: DataSource | None = None,
) -> PlannedExperiment:
    """Check ``out`` and expand the runs of ``config`` before any work (the plan step).

    The command line shows the plan, then hands it to `run_experiment`, which does not
    check or expand again.

    Raises
    ------
    ConfigError, RunError
        As `run_experiment`, before any work.
    """
    folder = check_output(config, out, force=overwrite, resume=resume, dataset=dataset)
    return PlannedExperiment(config, folder, expand_runs(config), sim_settings(config))


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
    on_eval: Callable[[list[Evaluation]], None] | None = None,
    planned: PlannedExperiment | None = None,
) -> ExperimentOutcome:
    """Run every distinct run of ``config`` and write the results folder ``out``.

    Parameters
    ----------
    config : ExperimentConfig
    out : path
        Results folder: new, empty, or (with ``overwrite``) an earlier adcs results folder.
    overwrite : bool
        Replace an existing adcs results folder (once the new results are complete), and remove
        the stale partial folders of dead runs on ``out``.
    resume : bool
        Continue the interrupted run on ``out`` from its checkpoint (the same configuration;
        the differing keys are named otherwise), to byte-identical files.
    quick : bool
        Recorded in the manifest and the report (verdicts then indicative only).
    dataset : Dataset, FashionMNIST or Synthetic, optional
        Use these data instead of loading the configured data set (tests, callers holding it).
    progress : callable, optional
        ``progress(done, total)`` in simulated rounds summed over batches.
    extra_manifest : mapping, optional
        Added to ``manifest.json`` (e.g. the command line).
    finalize : callable, optional
        Called with the partial folder once the data files and figures are written (e.g. the
        theory check in a subfolder, linked from ``report.md``); what it returns joins the manifest.
    workers : int, optional
        Processes advancing the seeds' streams (no result depends on it); default 1, or the
        interrupted run's on resume.
    checkpoint_every : int, optional
        Rounds between checkpoints; ``None`` (default) about every ``checkpoint_seconds`` (float)
        of simulation; 0 never (an interrupted run then leaves nothing to resume).
    command : str
        The command line, named in the lock file while the run writes ``out``.
    executor : ShardExecutor, optional
        Run the shards (the runs of one seed) there instead (e.g. a ``RayExecutor``), each
        checkpointed once gathered; the files are a local run's, byte for byte.
    on_eval : callable, optional
        Each evaluation as it happens ([`Evaluation`][adcs.sim.Evaluation]; runs simulated here, not
        shards on an executor), e.g. for live tracking. It changes no result.
    planned : PlannedExperiment, optional
        `plan_experiment` of these arguments, already made (not repeated).

    Raises
    ------
    ConfigError
        The configuration does not fit the data, or differs from the checkpoint's (before any
        simulation).
    RunError
        ``out`` is unusable, busy, or has a stale partial folder (before any work); an OS failure.
    RunInterrupted
        KeyboardInterrupt (or the CLI's SIGTERM) stopped the run; says whether it is resumable.
    """
    options = _Options(
        quick, progress, extra_manifest, finalize, workers, checkpoint_every, checkpoint_seconds,
        executor, time.perf_counter(), datetime.now(timezone.utc).isoformat(timespec="seconds"),
        on_eval,
    )  # fmt: skip
    if planned is None:
        planned = plan_experiment(config, out, overwrite=overwrite, resume=resume, dataset=dataset)
    elif planned.config is not config:
        raise ValueError("planned must be plan_experiment() of the same configuration")
    return _locked(planned, overwrite, resume, dataset, command, options)


def _locked(
    planned: PlannedExperiment,
    overwrite: bool,
    resume: bool,
    dataset: DataSource | None,
    command: str,
    options: _Options,
) -> ExperimentOutcome:
    """Run the plan with its results folder locked."""
    folder = planned.folder
    folder.acquire(command)
    try:
        resumable = folder.prepare(force=overwrite, resume=resume, command=command)
        return _run_in(
            folder, planned.config, planned.runs, planned.sim_config, resumable, dataset, options
        )
    finally:
        folder.release()


@dataclass(frozen=True, eq=False)
class _Options:
    """How `run_experiment` was asked to run (its keyword arguments) and when it began."""

    quick: bool
    progress: ProgressFn | None
    extra_manifest: Mapping[str, Any] | None
    finalize: Callable[[Path], Mapping[str, Any] | None] | None
    workers: int | None
    checkpoint_every: int | None
    checkpoint_seconds: float
    executor: ShardExecutor | None
    started: float
    started_at: str
    on_eval: Callable[[list[Evaluation]], None] | None = None

    def __post_init__(self) -> None:
        workers, checkpoint_every = self.workers, self.checkpoint_every
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


def _run_in(
    folder: ResultsFolder,
    config: ExperimentConfig,
    plan: list[RunSpec],
    sim_config: SimConfig,
    resumable: bool,
    dataset: DataSource | None,
    options: _Options,
) -> ExperimentOutcome:
    """Prepare, execute and write the results in the locked ``folder``; on failure keep what
    can be resumed and say so."""
    workers, executor, started = options.workers, options.executor, options.started
    state: ExperimentProgress | None = None
    rounds = sim_config.rounds
    try:
        ready = prepare_run(config, plan, sim_config, dataset)
        sim_config, batches, identity = ready.sim_config, ready.batches, ready.identity
        if resumable:
            state = load_progress(folder, identity, config.source)
            logger.info("resuming %s at %s", config.name, state.describe(rounds))
            workers = state.workers if workers is None else workers
        else:
            state = ExperimentProgress(identity)
        state.workers = workers = workers or 1
        if config.model.device != "cpu" and workers > 1:
            logger.info("model on %s: one worker (a device context does not survive a fork)",
                        config.model.device)  # fmt: skip
            workers = 1
        state.started = started
        state.session = {"started_at": options.started_at, "pid": os.getpid(), "workers": workers,
                         "from": state.describe(rounds)}  # fmt: skip
        logger.info("%s: %d distinct runs, %d rounds each", config.name, len(plan), rounds)
        if executor is not None:
            state.session["executor"] = "shards"
        sim = simulate_all(
            batches, plan, sim_config, options.progress, workers, folder, state,
            options.checkpoint_every, options.checkpoint_seconds, ready.model, executor,
            options.on_eval,
        )  # fmt: skip
        ran = {} if executor is None else {"executor": executor.describe(sim.shard_keys)}
        return _write_results(
            folder, config, plan, ready, sim, options.quick,
            {**ran, **dict(options.extra_manifest or {})}, options.finalize, state, started,
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
        failure = exc
        if isinstance(exc, pickle.PicklingError):  # say what must pickle
            failure = RunError(f"{exc}: a scheduler's state must pickle (checkpoints and workers)")
        elif isinstance(exc, SchedulerInitError):  # a hyperparameter that does not fit the data
            failure = ConfigError(f"{config.source}: {exc}")
        if kept:
            note_kept(
                failure, f"the checkpoint ({where})" if where else "the checkpoint", folder.partial
            )
        if failure is exc:
            raise
        raise failure from exc


def _write_results(
    folder: ResultsFolder,
    config: ExperimentConfig,
    plan: list[RunSpec],
    ready: PreparedRun,
    sim: SimulatedRuns,
    quick: bool,
    extra_manifest: Mapping[str, Any] | None,
    finalize: Callable[[Path], Mapping[str, Any] | None] | None,
    state: ExperimentProgress,
    started: float,
) -> ExperimentOutcome:
    """Write the data files, the outputs (tables, figures, report) and the manifest; finish."""
    tmp, records, dataset = folder.partial, sim.records, ready.dataset
    notes = write_data_files(
        tmp, config, ready.sim_config, ready.fed, records, sim.client_acc, sim.selections,
        ready.model,
    )  # fmt: skip
    own, differs = study_of(config)
    write_tables(tmp, config.outputs, records, own)
    figures = write_figures(tmp, records, config.outputs, figures_by_name())
    extra = dict(finalize(tmp) or {}) if finalize is not None else {}
    context = report_context(config, ready, quick, figures, started, notes, tmp)
    shown = write_study_report(tmp / "report.md", records, context, own)
    wall_s = time.perf_counter() - started
    manifest = {
        **experiment_manifest(config, plan, ready, sim, quick, differs, state),
        **dict(extra_manifest or {}),
        **extra,
    }
    write_json(tmp / "manifest.json", manifest)
    folder.finish()
    return ExperimentOutcome(
        folder=folder.out, records=records, summaries=shown.rows, claims=shown.claims,
        setting=None if own is None else own.name, figures=figures, wall_s=wall_s, is_subset=dataset.is_subset,
        data_source=dataset.source, resumed=bool(state.sessions),
    )  # fmt: skip
