"""The leaderboard: every scheduler on a suite of workloads, ranked (docs/design.md §7).

The question users bring is *which scheduler should I use on my problem?* The leaderboard answers
it the way a careful researcher would: the same workloads, every method of
:data:`adcs.schedulers.SCHEDULERS` (a new row joins automatically), several seeds with common
random numbers (the methods of a seed see the same minibatches, availability and dropouts), and
statistics that say when two methods cannot be told apart.

**Workloads** are ordinary experiment configurations without methods
(``experiments/leaderboard/*.toml``); :func:`leaderboard_methods` supplies the methods: every
scheduler at its defaults, and ADCS at θ ∈ :data:`THETAS` (R = :data:`REFRESH_EVERY`) and with
``fresh_quality`` at the paper's θ. Each workload is run by the experiment runner into an ordinary
results folder, ``OUT/<workload>/``, checkpointed and resumable like any other.

**Scores** of an entry (a variant: a method and its hyperparameters) on a workload, per seed: the
final worst, 10th-percentile and average client accuracy (*final*: the mean of a run's last 10 %
of evaluations), the rounds to reach the workload's target worst accuracy
(:data:`~adcs.experiments.timing.TARGET_FRACTION` of Uniform's final worst accuracy — what random
selection reaches, as Oort sets its targets), client computations and TV to uniform selection.

**Ranks** (:func:`rank_workload`, :func:`rank_table`), on the final worst accuracy (the paper's
fairness metric) and likewise on the others:

* the *rank* of an entry on a workload is its place by mean over seeds, 1 the highest; entries
  with equal means share the mean of their places; an entry without a finite mean ranks last;
* the *best* entry of a workload has the highest mean;
* an entry is *tied with the best* when a two-sided paired t-test over the seeds both ran, at the
  5 % level, does not tell them apart: with d_s the best's value minus the entry's on seed s and
  n ≥ 2 seeds, |mean(d)| ≤ t(0.975, n − 1) · sd(d) / √n. Pairing by seed uses the common random
  numbers: the methods of a seed share minibatches and availability. With one seed no test is
  possible and only an exact equality ties;
* the *overall* table gives each entry's mean rank over the workloads it ran on, how often it is
  the best, and how often it is the best or tied with the best.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtrit

from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    MethodConfig,
    config_from_dict,
    read_toml,
    with_overrides,
)
from adcs.experiments.distributed import ShardExecutor
from adcs.experiments.folder import MANIFEST, ResultsFolder, RunError, provenance, source_checkout
from adcs.experiments.report import RunRecord, t_interval, variant_labels
from adcs.experiments.runner import (
    ExperimentOutcome,
    ProgressFn,
    RunInterrupted,
    config_differences,
    data_folders,
    load_records,
    resume_identity,
    run_experiment,
    submit_shards,
)
from adcs.experiments.timing import TARGET_FRACTION, Estimate, time_to_reach
from adcs.schedulers import SCHEDULERS

__all__ = [
    "METRICS",
    "PAPER_THETA",
    "QUICK",
    "REFRESH_EVERY",
    "THETAS",
    "LeaderboardOutcome",
    "Placing",
    "RankRow",
    "Score",
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
SeedValues = Mapping[int, float]
"""One entry's value on each seed it ran."""

THETAS = (0.6, 0.8, 0.9, 0.95)
"""ADCS's θ on the leaderboard: θ is the lever between diversity and quality (issue 11)."""
PAPER_THETA = 0.8
"""The paper's θ (Sec. 6); ``fresh_quality`` runs at it."""
REFRESH_EVERY = 20
"""The paper's R for every ADCS entry."""
CONFIDENCE = 0.95
"""Of every interval and of the tie test (5 % two-sided)."""

METRICS = ("worst", "p10", "avg")
"""What is ranked: final worst, 10th-percentile and average client accuracy (higher is better)."""
METRIC_NAMES = {"worst": "worst", "p10": "10th-percentile", "avg": "average"}

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
    """Every scheduler of :data:`~adcs.schedulers.SCHEDULERS`, ADCS at each θ and fresh.

    Every scheduler runs at its defaults (the published forms), in the table's order; ADCS at
    θ ∈ :data:`THETAS` with R = :data:`REFRESH_EVERY`, then with ``fresh_quality`` at
    θ = :data:`PAPER_THETA`; then ``entries``, more schedulers at their defaults (a built-in name,
    ``"package.module:Name"`` or an entry point's name; one already listed is not repeated).
    """
    out = []
    for name in SCHEDULERS:
        if name == "adcs":
            fixed = (("refresh_every", REFRESH_EVERY),)
            out.append(MethodConfig(name, params=fixed, sweep=(("theta", THETAS),)))
            fresh = (*fixed, ("theta", PAPER_THETA), ("fresh_quality", True))
            out.append(MethodConfig(name, params=fresh))
        else:
            out.append(MethodConfig(name))
    out.extend(MethodConfig(name) for name in dict.fromkeys(entries) if name not in SCHEDULERS)
    return tuple(out)


def _workloads_dir() -> Path:
    from adcs.experiments.config import packaged_config_path

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
    """A workload file as an experiment configuration running :func:`leaderboard_methods`.

    ``entries`` are schedulers added to the ranked entries (:func:`leaderboard_methods`).

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
            "table runs (see adcs.experiments.leaderboard.leaderboard_methods)"
        )
    doc = {**raw, "methods": [{"name": "uniform"}], "outputs": raw.get("outputs", ["curves"])}
    config = config_from_dict(doc, source=str(path), base_dir=path.parent)
    return dataclasses.replace(config, methods=leaderboard_methods(entries))


def quick_workload(config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with the :data:`QUICK` rounds, evaluation period and seeds."""
    return with_overrides(
        config, rounds=QUICK["rounds"], eval_every=QUICK["eval_every"], seeds=QUICK["seeds"]
    )


# ---------------------------------------------------------------------------------------------
# scores


@dataclass(frozen=True, eq=False)
class Score:
    """One entry's numbers on one workload.

    Attributes
    ----------
    workload, variant, method : str
    label : str
        The entry's display name (the same on every workload).
    params : mapping
        Its hyperparameters.
    worst, p10, avg : dict of int to float
        Final worst, 10th-percentile and average client accuracy, per seed.
    rounds_to_target : dict of int to float
        Rounds to the workload's target worst accuracy per seed (NaN: never reached).
    client_updates, loss_evals, tv : float
        Mean over seeds of the updates and loss evaluations computed, and of the TV distance of
        the selection shares to uniform selection.
    """

    workload: str
    variant: str
    method: str
    label: str
    params: Mapping[str, Any]
    worst: dict[int, float]
    p10: dict[int, float]
    avg: dict[int, float]
    rounds_to_target: dict[int, float]
    client_updates: float
    loss_evals: float
    tv: float

    def values(self, metric: str) -> dict[int, float]:
        """The per-seed values of ``metric`` (one of :data:`METRICS`)."""
        values: dict[int, float] = getattr(self, metric)
        return values

    def mean(self, metric: str) -> tuple[float, float]:
        """Mean over seeds of ``metric`` and its 95 % t half-width (NaN with one seed)."""
        values = np.array(list(self.values(metric).values()), dtype=np.float64)
        if values.size == 0:
            return math.nan, math.nan
        mean, half = t_interval(values)
        return float(mean), float(half)

    @property
    def to_target(self) -> Estimate:
        """Rounds to the target over seeds (a mean only when every seed reached it)."""
        return Estimate.of_values(list(self.rounds_to_target.values()))

    @property
    def n_seeds(self) -> int:
        return len(self.worst)


def _final(values: FloatArray, record: RunRecord) -> float:
    """The final value of an evaluation series: the mean over the record's final window."""
    tail = np.asarray(values, dtype=np.float64)[record.tail]
    return float(tail.mean()) if tail.size else math.nan


def percentile_curve(client_acc: NDArray[Any], q: float = 0.1) -> FloatArray:
    """The q-quantile of the clients' accuracies at each evaluation (linear interpolation).

    Parameters
    ----------
    client_acc : ndarray of shape (n_evals, n_clients)
    q : float in [0, 1]

    Returns
    -------
    ndarray of shape (n_evals,)
    """
    acc = np.asarray(client_acc, dtype=np.float64)
    return np.asarray(np.quantile(acc, q, axis=-1), dtype=np.float64)


def target_worst(records: Sequence[RunRecord]) -> float:
    """The workload's target worst accuracy: :data:`TARGET_FRACTION` × Uniform's final.

    Uniform's final worst accuracy (mean over seeds) is what random selection reaches; without
    Uniform runs the first variant's serves.
    """
    reference = [r for r in records if r.method == "uniform"] or list(records)
    if not reference:
        return math.nan
    variant = reference[0].variant
    finals = [r.final("worst_acc") for r in reference if r.variant == variant]
    return TARGET_FRACTION * float(np.mean(finals))


def entry_labels(records: Sequence[RunRecord]) -> dict[str, str]:
    """A display name per variant: ADCS's leaderboard entries by θ, the others by the table
    (k-DPP spelled so)."""
    labels = variant_labels(records)
    for r in records:
        if r.method == "kdpp":  # its class name reads badly
            labels[r.variant] = labels[r.variant].replace("KDPP", "k-DPP", 1)
        if r.method == "adcs" and "theta" in r.params:
            label = f"ADCS θ={float(r.params['theta']):g}"
            if r.params.get("fresh_quality"):
                label += ", fresh q"
            if r.params.get("refresh_every") != REFRESH_EVERY:
                label += f", R={r.params.get('refresh_every')}"
            labels[r.variant] = label
    return labels


def scores_of(
    workload: str,
    records: Sequence[RunRecord],
    client_acc: Mapping[str, NDArray[Any]],
    labels: Mapping[str, str] | None = None,
) -> tuple[list[Score], float]:
    """Every entry's :class:`Score` on one workload, in the order of ``records``, and the target.

    Parameters
    ----------
    workload : str
    records : sequence of RunRecord
        The workload's runs.
    client_acc : mapping of run id to ndarray of shape (n_evals, n_clients)
        Per-client accuracies (``client_acc.npz``), for the 10th percentile; a run without one
        gets NaN.
    labels : mapping, optional
        Display names by variant (default :func:`entry_labels` of ``records``).
    """
    labels = dict(labels or entry_labels(records))
    target = target_worst(records)
    by_variant: dict[str, list[RunRecord]] = {}
    for r in records:
        by_variant.setdefault(r.variant, []).append(r)
    scores = []
    for variant, runs in by_variant.items():
        runs = sorted(runs, key=lambda r: r.seed)
        p10 = {}
        for r in runs:
            acc = client_acc.get(r.run_id)
            p10[r.seed] = math.nan if acc is None else _final(percentile_curve(acc), r)
        reach = {
            r.seed: time_to_reach(r.eval_rounds.astype(np.float64), r.worst_acc, target)
            for r in runs
        }
        score = Score(
            workload=workload, variant=variant, method=runs[0].method,
            label=labels.get(variant, variant), params=dict(runs[0].params),
            worst={r.seed: r.final("worst_acc") for r in runs}, p10=p10,
            avg={r.seed: r.final("avg_acc") for r in runs}, rounds_to_target=reach,
            client_updates=float(np.mean([r.client_updates for r in runs])),
            loss_evals=float(np.mean([r.loss_evals for r in runs])),
            tv=float(np.mean([r.tv_to_uniform for r in runs])),
        )  # fmt: skip
        scores.append(score)
    return scores, target


# ---------------------------------------------------------------------------------------------
# ranks and ties


def paired_difference(
    a: SeedValues, b: SeedValues, confidence: float = CONFIDENCE
) -> tuple[float, float, int]:
    """Mean over common seeds of ``a − b``, its paired t half-width, and the number of seeds.

    The half-width is NaN with fewer than two common seeds, and the mean NaN with none or when
    a value is not finite.
    """
    seeds = sorted(set(a) & set(b))
    d = np.array([a[s] - b[s] for s in seeds], dtype=np.float64)
    if d.size == 0 or not np.isfinite(d).all():
        return math.nan, math.nan, int(d.size)
    if d.size < 2:
        return float(d[0]), math.nan, 1
    sem = float(d.std(ddof=1)) / math.sqrt(d.size)
    return float(d.mean()), sem * float(stdtrit(d.size - 1, 0.5 + confidence / 2.0)), int(d.size)


def tied(a: SeedValues, b: SeedValues, confidence: float = CONFIDENCE) -> bool:
    """Whether a two-sided paired t-test over the common seeds cannot tell ``a`` from ``b``.

    |mean(d)| ≤ t(0.5 + confidence/2, n − 1) · sd(d)/√n with d_s = a_s − b_s over n ≥ 2 common
    seeds (the boundary counts as tied); with one common seed only an exact equality ties; with
    none, or a value that is not finite, nothing does.
    """
    mean, half, n = paired_difference(a, b, confidence)
    if math.isnan(mean):
        return False
    if n < 2:
        return mean == 0.0
    return abs(mean) <= half


@dataclass(frozen=True)
class Placing:
    """An entry's place on one workload.

    Attributes
    ----------
    rank : float
        1 = the highest mean; equal means share the mean of their places.
    mean : float
        Mean over seeds (NaN: not finite on some seed).
    best : bool
        It has the highest mean.
    tied : bool
        It is the best or tied with the best (:func:`tied`).
    """

    rank: float
    mean: float
    best: bool
    tied: bool


def _seed_mean(values: SeedValues) -> float:
    array = np.array(list(values.values()), dtype=np.float64)
    return float(array.mean()) if array.size and np.isfinite(array).all() else math.nan


def rank_workload(
    entries: Mapping[str, SeedValues], confidence: float = CONFIDENCE
) -> dict[str, Placing]:
    """Rank the entries of one workload by their mean over seeds (higher is better).

    Parameters
    ----------
    entries : mapping of entry to (mapping of seed to value)
    confidence : float
        Of the tie test.

    Returns
    -------
    dict of entry to Placing
        Ranks 1 … n; equal means share the mean of their places; an entry whose mean is not
        finite ranks after every finite one. The best (the first of the highest means, in the
        order of ``entries``) is the reference of the tie test.
    """
    names = list(entries)
    means = np.array([_seed_mean(entries[n]) for n in names], dtype=np.float64)
    key = np.where(np.isfinite(means), means, -np.inf)
    ranks = np.empty(len(names), dtype=np.float64)
    for i, k in enumerate(key):
        above = float(np.sum(key > k))
        same = float(np.sum(key == k))
        ranks[i] = above + (same + 1.0) / 2.0  # the mean of the places above+1 … above+same
    if not names:
        return {}
    top = float(key.max())
    best = names[int(np.argmax(key))]
    out = {}
    for i, name in enumerate(names):
        is_best = bool(np.isfinite(key[i]) and key[i] == top)
        out[name] = Placing(
            rank=float(ranks[i]),
            mean=float(means[i]),
            best=is_best,
            tied=is_best or tied(entries[best], entries[name], confidence),
        )
    return out


@dataclass(frozen=True)
class RankRow:
    """An entry's line of the overall table, for one metric.

    Attributes
    ----------
    entry : str
    mean_rank : float
        Over the workloads it ran on.
    workloads : int
        How many it ran on.
    best, tied : int
        On how many it was the best, and the best or tied with the best.
    ranks : dict of str to float
        Its rank on each workload.
    """

    entry: str
    mean_rank: float
    workloads: int
    best: int
    tied: int
    ranks: dict[str, float] = field(default_factory=dict)


def rank_table(
    workloads: Mapping[str, Mapping[str, SeedValues]], confidence: float = CONFIDENCE
) -> tuple[list[RankRow], dict[str, dict[str, Placing]]]:
    """The overall table: each entry's mean rank over workloads, bests and ties.

    Parameters
    ----------
    workloads : mapping of workload to (mapping of entry to per-seed values)

    Returns
    -------
    rows : list of RankRow
        Sorted by mean rank, then by more ties with the best, then by name.
    placings : dict of workload to (dict of entry to Placing)
    """
    placings = {w: rank_workload(entries, confidence) for w, entries in workloads.items()}
    names = list(dict.fromkeys(e for entries in workloads.values() for e in entries))
    rows = []
    for name in names:
        mine = {w: p[name] for w, p in placings.items() if name in p}
        rows.append(
            RankRow(
                entry=name,
                mean_rank=float(np.mean([p.rank for p in mine.values()])),
                workloads=len(mine),
                best=sum(p.best for p in mine.values()),
                tied=sum(p.tied for p in mine.values()),
                ranks={w: p.rank for w, p in mine.items()},
            )
        )
    rows.sort(key=lambda r: (r.mean_rank, -r.tied, r.entry))
    return rows, placings


# ---------------------------------------------------------------------------------------------
# the leaderboard folder


@dataclass(frozen=True, eq=False)
class LeaderboardOutcome:
    """What :func:`run_leaderboard` produced.

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
        As for :func:`~adcs.experiments.runner.run_experiment`, for the whole leaderboard.
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
        :func:`~adcs.experiments.sweep.run_sweep`, whose points are the workloads).
    finalize : callable, optional
        Called with the partial folder once the summary is written; what it returns is added to
        the manifest.

    Raises
    ------
    ConfigError, RunError, RunInterrupted
        As :func:`~adcs.experiments.runner.run_experiment` does; an interrupted leaderboard keeps
        its partial folder (``resume=True`` continues it).
    """
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    names = [c.name for c in workloads]
    if not names:
        raise ConfigError("the leaderboard needs at least one workload")
    if len(set(names)) != len(names):
        raise ConfigError(f"workload names must be distinct, got {names}")
    data = sorted({p for c in workloads for p in (data_folders(c) if dataset is None else [])})
    folder = ResultsFolder(out, data=data, keep=source_checkout())
    folder.check(force=force, resume=resume)
    identity = _identity(workloads)
    folder.acquire(command)
    try:
        resumed = folder.prepare(force=force, resume=resume, command=command)
        if resumed:
            _check_resume(folder, identity)
        folder.save_checkpoint(identity, {"progress": "leaderboard", "workloads": names})
        partial = folder.partial
        try:
            states = {n: _workload_state(partial, n) for n in names}
            if executor is not None:
                for config in workloads:
                    if states[config.name] != "done":
                        submit_shards(config, partial / config.name, executor, dataset=dataset)
            outcomes: dict[str, ExperimentOutcome] = {}
            for config in workloads:
                name = config.name
                if on_workload is not None:
                    on_workload(name, states[name])
                if states[name] == "done":
                    continue
                outcomes[name] = run_experiment(
                    config, partial / name, overwrite=True, resume=states[name] == "resume",
                    quick=quick, dataset=dataset, workers=workers,
                    checkpoint_every=checkpoint_every, executor=executor, command=command,
                    progress=None if progress is None else progress(name),
                    extra_manifest={"command": command, "leaderboard": str(out)},
                )  # fmt: skip
        except RunInterrupted as exc:
            raise RunInterrupted(
                f"interrupted; the leaderboard is kept in {partial} (finished workloads and the "
                f"current one's checkpoint, {exc.progress or 'none yet'}): continue with the "
                "same command and --resume",
                resumable=True, partial=partial, progress=exc.progress,
            ) from exc  # fmt: skip
        except KeyboardInterrupt as exc:
            raise RunInterrupted(
                f"interrupted; the leaderboard is kept in {partial}: continue with the same "
                "command and --resume",
                resumable=True, partial=partial, progress="",
            ) from exc  # fmt: skip
        except BaseException:
            if not any(_workload_state(partial, n) != "new" for n in names):
                folder.discard(keep_checkpoint=False)  # nothing worth resuming
            raise
        from adcs.experiments.leaderboard_report import write_summary

        ranks, scores = write_summary(partial, names, quick=quick)
        extra = {} if finalize is None else dict(finalize(partial))
        manifest = {
            "experiment": kind,
            "kind": kind,
            "workloads": names,
            "configs": identity["workloads"],
            "quick": quick,
            "command": command,
            "started_at": started_at,
            "wall_s": time.perf_counter() - started,
            "resumed": resumed,
            **({} if executor is None else {"executor": executor.describe([])}),
            **extra,
            **provenance(),
        }
        text = json.dumps(manifest, indent=2, default=str) + "\n"
        (partial / MANIFEST).write_text(text, encoding="utf-8")
        folder.finish()
    finally:
        folder.release()
    return LeaderboardOutcome(
        folder=folder.out, workloads=names, ranks=ranks, scores=scores,
        report=folder.out / "report.md", wall_s=time.perf_counter() - started, resumed=resumed,
    )  # fmt: skip


def workload_scores(folder: Path, name: str) -> tuple[list[RunRecord], dict[str, NDArray[Any]]]:
    """A workload's records and per-client accuracies, read back from its results folder."""
    records = load_records(folder / name)
    with np.load(folder / name / "client_acc.npz") as npz:
        client_acc = {k: np.asarray(npz[k]) for k in npz.files}
    return records, client_acc


def summarize_leaderboard(
    folder: str | Path, names: Sequence[str] | None = None, *, quick: bool = False
) -> tuple[list[RankRow], dict[str, list[Score]]]:
    """(Re)write the leaderboard's summary in ``folder`` from its workloads' results folders.

    ``names`` default: every subfolder holding a results folder, the paper's setting first.
    """
    from adcs.experiments.leaderboard_report import write_summary

    folder = Path(folder)
    if names is None:
        found = [p.parent.name for p in folder.glob(f"*/{MANIFEST}")]
        names = sorted(found, key=lambda n: (n != REFERENCE_WORKLOAD, n))
    return write_summary(folder, list(names), quick=quick)
