"""Execute a planned experiment: its batches here, or its shards on an executor, resumably.

Locally each batch is one [`simulate`][adcs.sim.simulate] call with its own checkpoints. With a
`ShardExecutor` the batches are cut into *shards* (the runs
of one seed of one batch), all submitted at once; each finished shard is saved, so an interrupted
run resumes with the shards not yet done. `ExperimentProgress` is where an experiment stands, as its
checkpoint in the results folder keeps it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.report import RunRecord
from adcs.experiments.config import ConfigError, ExperimentConfig
from adcs.experiments.run.distributed import ShardExecutor
from adcs.experiments.run.folder import ResultsFolder, RunError
from adcs.experiments.run.identity import config_differences
from adcs.experiments.run.plan import expand_runs, prepare_run, sim_settings
from adcs.experiments.run.results import run_record
from adcs.experiments.run.workload import DataSource
from adcs.sim.data import ClientData
from adcs.sim.engine import Checkpointing, RunResult, RunSpec, SimCheckpoint, SimConfig, simulate
from adcs.sim.model import Model
from adcs.sim.spec import Evaluation

__all__ = [
    "CHECKPOINT_FORMAT",
    "ExperimentProgress",
    "ProgressFn",
    "SimulatedRuns",
    "load_progress",
    "simulate_all",
    "submit_shards",
]

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: simulated rounds done over all batches, and their total."""

CHECKPOINT_FORMAT = 1


@dataclass
class ExperimentProgress:
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
            return f"all {rounds} rounds simulated, the results not yet written"
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


def load_progress(
    folder: ResultsFolder, identity: dict[str, Any], source: str
) -> ExperimentProgress:
    state = folder.load_checkpoint()
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise RunError(f"--resume: the checkpoint in {folder.partial} is of another adcs version")
    if "identity" not in state:  # a sweep's or a leaderboard's (run_leaderboard's identity)
        raise ConfigError(
            f"{source}: --resume: {folder.partial} holds an interrupted sweep or leaderboard, not "
            "a run: resume it with the command that started it (its --sweep, or adcs leaderboard)"
        )
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
    return ExperimentProgress(
        identity, int(state["finished"]), state["current"], list(state["sessions"]),
        int(state["workers"]), shards={(int(b), int(s)) for b, s in state.get("shards", ())},
    )  # fmt: skip


def _info(state: ExperimentProgress, rounds: int) -> dict[str, Any]:
    done = 0 if state.current is None else state.current.rounds_done
    return {
        "progress": state.describe(rounds), "rounds_done": done, "rounds": rounds,
        "batches_finished": state.finished, "batches": state.identity["batches"],
    }  # fmt: skip


def _shard_key(identity: Mapping[str, Any], batch: int, seed: int) -> str:
    """A shard's name: the experiment's identity (digest), the batch and the seed."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return f"{hashlib.sha256(text.encode()).hexdigest()[:16]}/batch-{batch}/seed-{seed}"


def _shard_part(batch: int, seed: int) -> str:
    return f"batch-{batch}-seed-{seed}.pkl"


def _seeds_of(runs: Sequence[RunSpec]) -> list[int]:
    return sorted({r.seed for r in runs})


def _pending_shards(
    batches: Sequence[tuple[ClientData, list[RunSpec]]], state: ExperimentProgress
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
    folder: ResultsFolder, b: int, runs: Sequence[RunSpec], state: ExperimentProgress
) -> dict[str, RunResult]:
    """Results of ``runs`` of batch ``b`` saved by an earlier session: its part or its shards'."""
    seeds = _seeds_of(runs)
    if b < state.finished and not all((b, s) in state.shards for s in seeds):
        return {res.spec.run_id: res for res in folder.load_part(f"batch-{b}.pkl")}
    return {res.spec.run_id: res for s in seeds for res in folder.load_part(_shard_part(b, s))}


@dataclass(frozen=True)
class SimulatedRuns:
    records: list[RunRecord]
    client_acc: dict[str, np.ndarray]
    selections: dict[str, np.ndarray]
    wall_s: float
    shard_keys: tuple[str, ...] = ()


def simulate_all(
    batches: Sequence[tuple[ClientData, list[RunSpec]]],
    plan: Sequence[RunSpec],
    sim_config: SimConfig,
    progress: ProgressFn | None,
    workers: int,
    folder: ResultsFolder,
    state: ExperimentProgress,
    checkpoint_every: int | None,
    checkpoint_seconds: float,
    model: Model,
    executor: ShardExecutor | None = None,
    on_eval: Callable[[list[Evaluation]], None] | None = None,
) -> SimulatedRuns:
    """Advance every batch (finished ones are read back from the checkpoint), in plan order.

    Locally each batch is one [`simulate`][adcs.sim.simulate] call with its own checkpoints. With an
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
            checkpoint_seconds, model, on_eval,
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
            records.append(run_record(spec, res, data))
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
            if res.client_epsilon is not None:  # a private run: each client's ε (at δ)
                selections[f"client_epsilon/{spec.run_id}"] = res.client_epsilon
    order = {r.run_id: i for i, r in enumerate(plan)}
    records.sort(key=lambda r: order[r.run_id])
    client_acc = {r.run_id: client_acc[r.run_id] for r in records}
    return SimulatedRuns(records, client_acc, dict(sorted(selections.items())), wall, keys)


def _run_batches_here(
    batches: Sequence[tuple[ClientData, list[RunSpec]]],
    sim_config: SimConfig,
    progress: ProgressFn | None,
    workers: int,
    folder: ResultsFolder,
    state: ExperimentProgress,
    checkpoint_every: int | None,
    checkpoint_seconds: float,
    model: Model,
    on_eval: Callable[[list[Evaluation]], None] | None = None,
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
                checkpoint=policy, resume_from=resume_from, on_eval=on_eval,
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
    state: ExperimentProgress,
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
    ready = prepare_run(config, plan, sim_settings(config), dataset)
    state = ExperimentProgress(ready.identity)
    folder = ResultsFolder(out)
    if folder.has_checkpoint():
        with contextlib.suppress(RunError, ConfigError):
            state = load_progress(folder, ready.identity, config.source)
    pending = _pending_shards(ready.batches, state)
    for b, seed, data, runs in pending:
        key = _shard_key(ready.identity, b, seed)
        executor.submit(key, runs, data, ready.sim_config, ready.model)
    return len(pending)
