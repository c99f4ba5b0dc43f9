"""The multi-run federated round loop (docs/design.md §1 and §4, paper Algorithm 1 generalised).

Every run r advances through the same rounds t = 0, …, T − 1, in five steps:

1. **probe** — ``probe = scheduler.probe(state_r, t, available_t, rng_r)``;
2. **gather** — the simulator computes what the probe asks at w⁽ᵗ⁾ for the probed clients only —
   minibatch or full local losses, or local updates Δ_n = w_n^{(t,E)} − w⁽ᵗ⁾ with the loss at w⁽ᵗ⁾
   on their first minibatch — into :class:`~adcs.schedulers.ClientStats`;
3. **select** — ``selection, state_r = scheduler.select(...)``: min(m, available) distinct
   available clients, checked by :func:`adcs.rounds.check_selection`;
4. **train and aggregate** — each selected client returns its update unless it drops out; the
   updates of those that returned (probed ones reused) are aggregated with
   :func:`adcs.rounds.aggregation_weights`: w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R} c_i Δ_i — or, for a run
   with an aggregation hook (``RunSpec.aggregator``: a robust rule, a poison), by the hook from
   the returned clients' individual updates;
5. **observe** — ``observe`` gets the returned clients' updates; the round's selection, returns and
   client computations are recorded.

Cost follows the active clients (docs/design.md §4). Per round and run only the probed and the selected
clients are computed; blind schedulers (Uniform, cached ADCS rounds) select before anything is
computed, so a blind round costs O(m) client work. Runs that share a *minibatch stream* (with
``SimConfig.common_minibatches``, all runs of a seed) share one gather of their active clients'
minibatches and, when the model offers :class:`~adcs.sim.model.SharedInputs` and E = 1, one forward
product over the union of their active clients; every other job runs through the model's batched
``loss_and_grad``. Memory per run is O(active · dim) plus O(N) bookkeeping; no (N, dim) or (N, N)
array is formed.

Randomness is counter-based (:mod:`adcs.streams`): client n's minibatch at round t is a pure
function of (stream, n, t), availability of (seed, t), a dropout of (seed, n, t), a scheduler's
stream of (seed, run id) — nothing depends on a run's position in a batch, on who else is active,
or on the number of workers. A run alone therefore equals the same run batched with others
(selections exactly, metrics up to float32 rounding in the shared products).
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import dataclasses
import logging
import multiprocessing
import multiprocessing.process
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_int, check_number, is_int
from adcs.aggregation import Aggregator
from adcs.rounds import aggregation_weights, check_selection
from adcs.schedulers.base import (
    ClientStats,
    LossSource,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
    UsesRoundTimes,
)
from adcs.sim.availability import AlwaysAvailable, Availability, TraceAvailability
from adcs.sim.data import ClientData, FederatedData  # noqa: F401  (FederatedData: re-exported)
from adcs.sim.metrics import (
    group_accuracy,
    group_share,
    percentile_accuracy,
    tv_to_uniform,
    worst_and_average,
)
from adcs.sim.model import LogisticRegression, Model, SharedForward, SharedInputs, local_update
from adcs.sim.system import ClientTimes, SystemConfig, client_times, probe_phase, training_phase
from adcs.sketch import UpdateSketch
from adcs.streams import Domain, _draw, counter_uniform, round_generator, scheduler_rng, stream_key

__all__ = [
    "Checkpointing",
    "RunResult",
    "RunSpec",
    "SimCheckpoint",
    "SimConfig",
    "check_simulation",
    "simulate",
]

logger = logging.getLogger(__name__)

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

_EVAL_RUNS_PER_PRODUCT = 32
_EVAL_CACHE_BYTES = 1 << 28
"""Evaluation inputs kept in memory between evaluations (256 MB); beyond, generated in blocks."""
_EVAL_BLOCK_ROWS = 16_384
"""Test samples evaluated per product when the evaluation set is not kept (bounds memory)."""
_FULL_LOSS_ROWS = 8192
_JOB_ROWS = 16_384
"""Samples per batched ``loss_and_grad`` call of independent jobs (bounds memory)."""
_SHARED_ROWS = 65_536
"""Largest union (clients × B samples) computed in one shared forward product; larger rounds
(a probe of tens of thousands of clients) run as memory-bounded independent jobs instead."""
_PROGRESS_EVERY = 50
_FIRST_SEGMENT = 20
"""Rounds before the first time-based checkpoint (they measure the round rate)."""
_GATHER_BUDGET_BYTES = 1 << 30
"""Most inputs (float32) one round may gather at once; larger batch sizes are refused."""
_MAX_RECORDED_AVAILABILITY_BITS = 1 << 31
"""Availability masks are stored while rounds × N stays below this (256 MB packed)."""


# --------------------------------------------------------------------------------------------
# configuration and inputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimConfig:
    """Hyperparameters of a simulation (paper Sec. 6: E = 1, B = 16, η_ℓ = 0.001, η_s = 1).

    Parameters
    ----------
    rounds : int
        T ≥ 1, number of rounds.
    local_steps : int
        E ≥ 1, local SGD steps per client update.
    batch_size : int
        B ≥ 1, minibatch size of each local step (and of a minibatch loss probe). A client holding
        fewer than E·B samples trains on whole shuffles of its data back to back.
    local_lr : float
        η_ℓ > 0.
    server_lr : float
        η_s > 0.
    eval_every : int
        Test metrics are computed at rounds 0, eval_every, 2·eval_every, … and at T (≥ 1).
    weighting : {"uniform", "data_size"}
        Aggregation weights p_n: equal, or proportional to the client's number of training samples.
    common_minibatches : bool
        ``True`` (default): runs with the same seed draw the same client minibatches (common random
        numbers across methods, and the faster shared computation). ``False``: each run's
        minibatches come from its own ``(seed, run_id)`` stream.
    availability : Availability
        Which clients can be selected each round (default: all, every round).
    dropout : float
        Probability in [0, 1) that a selected client fails to return its update in a round (drawn
        per (seed, client, round)); dropped clients are not aggregated and are recorded.
    system : SystemConfig, optional
        Client devices and round rules (:mod:`adcs.sim.system`): every round is timed on a
        simulated clock, and a deadline or over-commitment decides who is aggregated. ``None``
        (default): no clock, and every number is as without this option.
    sketch_dim : int or None
        k: schedulers see each update as its seeded Johnson–Lindenstrauss sketch of length k
        (:class:`adcs.sketch.UpdateSketch`, one projection per seed), while aggregation uses the
        true updates. ``None`` (default): schedulers see the updates themselves.
    eval_clients : int or None
        Evaluate a fixed subset of this many clients (drawn once, the same for every seed and
        run) instead of all of them — the metrics of a large population at bounded cost.
        ``None`` (default): every client.
    """

    rounds: int
    local_steps: int = 1
    batch_size: int = 16
    local_lr: float = 1e-3
    server_lr: float = 1.0
    eval_every: int = 100
    weighting: Literal["uniform", "data_size"] = "uniform"
    common_minibatches: bool = True
    availability: Availability = field(default_factory=AlwaysAvailable)
    dropout: float = 0.0
    system: SystemConfig | None = None
    sketch_dim: int | None = None
    eval_clients: int | None = None

    def __post_init__(self) -> None:
        check_int("rounds", self.rounds)
        check_int("local_steps", self.local_steps)
        check_int("batch_size", self.batch_size)
        check_number("local_lr", self.local_lr, 0.0, low_open=True)
        check_number("server_lr", self.server_lr, 0.0, low_open=True)
        check_int("eval_every", self.eval_every)
        if self.weighting not in ("uniform", "data_size"):
            raise ValueError(f"weighting must be 'uniform' or 'data_size', got {self.weighting!r}")
        check_bool("common_minibatches", self.common_minibatches)
        if not isinstance(self.availability, Availability):
            raise ValueError(f"availability must be an Availability, got {self.availability!r}")
        if isinstance(self.availability, TraceAvailability):
            self.availability.check_rounds(self.rounds)
        check_number("dropout", self.dropout, 0.0, 1.0, high_open=True)
        if self.system is not None and not isinstance(self.system, SystemConfig):
            raise ValueError(f"system must be a SystemConfig or None, got {self.system!r}")
        if self.sketch_dim is not None:
            check_int("sketch_dim", self.sketch_dim)
        if self.eval_clients is not None:
            check_int("eval_clients", self.eval_clients)

    @property
    def eval_rounds(self) -> IntArray:
        """Rounds after which test metrics are computed: 0, eval_every, …, and T."""
        points = np.arange(0, self.rounds + 1, self.eval_every, dtype=np.intp)
        if points[-1] != self.rounds:
            points = np.append(points, self.rounds)
        return points


@dataclass(frozen=True)
class RunSpec:
    """One run: a scheduler, a seed and an identity.

    Parameters
    ----------
    scheduler : Scheduler
        Any object following :class:`adcs.schedulers.Scheduler`.
    seed : int
        ≥ 0. Seeds the run's availability, dropouts and minibatch stream (shared by all runs of
        this seed when ``SimConfig.common_minibatches``) and, with ``run_id``, its scheduler's
        stream.
    run_id : str
        Non-empty, unique within a :func:`simulate` call, e.g. ``"adcs-theta0.8-R20/seed3"``.
    meta : mapping
        Free-form labels (method, hyperparameters, …), carried into the result.
    aggregator : Aggregator, optional
        The run's aggregation hook (:mod:`adcs.aggregation`): a robust rule or a poison. With one,
        every returned client's update is computed individually and the aggregator gives the step
        (and what the server received, which ``observe`` then gets); without, Σ c_i Δ_i.
    """

    scheduler: Scheduler
    seed: int
    run_id: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    aggregator: Aggregator | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scheduler, Scheduler):
            raise ValueError(
                f"scheduler must follow the Scheduler protocol, got {type(self.scheduler).__name__}"
            )
        check_int("seed", self.seed, minimum=0)
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"run_id must be a non-empty string, got {self.run_id!r}")
        object.__setattr__(self, "meta", dict(self.meta))  # a copy: later edits do not leak in
        if self.aggregator is not None and not isinstance(self.aggregator, Aggregator):
            raise ValueError(
                f"aggregator must follow the Aggregator protocol, got {type(self.aggregator).__name__}"
            )


@dataclass(frozen=True, eq=False)
class RunResult:
    """What one run produced.

    Attributes
    ----------
    spec : RunSpec
    eval_rounds : ndarray of shape (n_evals,), int
        Number of rounds trained before each evaluation (0, eval_every, …, T).
    worst_acc, avg_acc : ndarray of shape (n_evals,)
        Min and mean over the evaluated clients of the per-client test accuracy (paper Fig. 1).
    test_loss : ndarray of shape (n_evals,)
        Mean cross-entropy over the union of the evaluated clients' test sets.
    client_acc : ndarray of shape (n_evals, n_eval_clients)
        Accuracy of the global model on each evaluated client's own test set (column i is client
        ``eval_clients[i]``).
    selected : ndarray of shape (rounds, m), int32
        Clients selected in each round, in the scheduler's order; −1 where fewer than m were
        (fewer than m available). With over-commitment (``SimConfig.system``) m is the number
        invited, ⌈(1 + o)·m⌉.
    returned : ndarray of shape (rounds, m), bool
        Which selected clients returned their update and were aggregated (not dropped, in time,
        among the first m with over-commitment); False in padding.
    n_available : ndarray of shape (rounds,), int
        Clients available in each round.
    available : ndarray of shape (rounds, ⌈N/8⌉), uint8, or None
        The availability masks, bit-packed (``np.unpackbits(available, axis=1, count=N)``);
        shared by the runs of a seed. None when every client is always available, or when the
        masks are too large to keep (regenerate them from ``SimConfig.availability`` and the seed).
    client_updates : int
        Local updates computed (probed ∪ returned selected per round; a probed update reused for
        aggregation counts once). Updates the clock discards (past the deadline, or beyond the
        first m with over-commitment) are not counted; their clients' time is in ``busy_time``.
    loss_evals : int
        Losses evaluated apart from an update (loss probes).
    dropped : int
        Selected clients that failed to return their update (dropped out, or past the deadline).
    wall_s : float
        This run's share of the batch's wall time (batch time / number of runs).
    group_share : ndarray of shape (n_groups,)
        Share of selection slots per group (Table 1); with over-commitment, of the invitations.
    tv_to_uniform : float
        TV distance of ``group_share`` to the groups' shares of the population
        (:func:`adcs.sim.metrics.tv_to_uniform`): what uniform selection gives in expectation.
    final_params : ndarray of shape (dim,), float32
        w⁽ᵀ⁾.
    round_time : ndarray of shape (rounds,), or None
        Simulated seconds of each round (probe phase + training phase, :mod:`adcs.sim.system`);
        None without ``SimConfig.system``.
    busy_time : ndarray of shape (rounds,), or None
        Client-seconds spent in each round, summed over the clients that worked.
    non_finite : int
        Probed clients whose loss or update was NaN or infinite, summed over rounds; they were
        excluded from selection (logged at WARNING, with the client ids, the first time).
    p10_acc : ndarray of shape (n_evals,)
        10th percentile of the per-client accuracy (the worst-decile view, steadier than the
        minimum when there are many clients).
    group_acc : ndarray of shape (n_evals, n_groups)
        Mean accuracy of each group's evaluated clients (NaN for a group none of them is in).
    eval_clients : ndarray of shape (n_eval_clients,), int
        The clients evaluated, ascending (all of them unless ``SimConfig.eval_clients``).
    """

    spec: RunSpec
    eval_rounds: IntArray
    worst_acc: F64Array
    avg_acc: F64Array
    test_loss: F64Array
    client_acc: F64Array
    selected: NDArray[np.int32]
    returned: BoolArray
    n_available: NDArray[np.int32]
    available: NDArray[np.uint8] | None
    client_updates: int
    loss_evals: int
    dropped: int
    wall_s: float
    group_share: F64Array
    tv_to_uniform: float
    final_params: F32Array
    round_time: F64Array | None = None
    busy_time: F64Array | None = None
    p10_acc: F64Array = field(default_factory=lambda: np.empty(0))
    group_acc: F64Array = field(default_factory=lambda: np.empty((0, 0)))
    eval_clients: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.intp))

    @property
    def clock(self) -> F64Array | None:
        """Simulated time at the start of each round and at the end, shape (rounds + 1,)."""
        if self.round_time is None:
            return None
        return np.concatenate([[0.0], np.cumsum(self.round_time)])

    @property
    def eval_clock(self) -> F64Array | None:
        """Simulated time of each evaluation, shape (n_evals,) (after ``eval_rounds`` rounds)."""
        clock = self.clock
        return None if clock is None else clock[self.eval_rounds]

    @property
    def total_time(self) -> float | None:
        """Simulated seconds of the whole run."""
        return None if self.round_time is None else float(self.round_time.sum())

    @property
    def client_time(self) -> float | None:
        """Client-seconds spent over the whole run."""
        return None if self.busy_time is None else float(self.busy_time.sum())

    non_finite: int = 0


# --------------------------------------------------------------------------------------------
# the round loop
# --------------------------------------------------------------------------------------------


@dataclass
class _Run:
    """Mutable bookkeeping of one run inside the loop."""

    spec: RunSpec
    scheduler: Scheduler
    state: Any
    rng: np.random.Generator
    observes: bool
    selected: NDArray[np.int32]
    returned: BoolArray
    client_updates: int = 0
    loss_evals: int = 0
    dropped: int = 0
    target: int = 0  # updates wanted per round: m (less than the invited with over-commitment)
    round_s: F64Array | None = None  # simulated seconds per round (with a system profile)
    busy_s: F64Array | None = None  # client-seconds per round
    non_finite: int = 0
    non_finite_clients: set[int] = field(default_factory=set)

    def note_non_finite(self, t: int, stats: ClientStats) -> None:
        """Count the probed clients with NaN/inf statistics; log them the first time."""
        bad = stats.non_finite()
        if bad.size == 0:
            return
        if not self.non_finite_clients:
            logger.warning(
                "run %r, round %d: client(s) %s reported NaN or infinite losses/updates; they "
                "are excluded from selection (later occurrences are counted, not logged)",
                self.spec.run_id, t, bad.tolist(),
            )  # fmt: skip
        self.non_finite += int(bad.size)
        self.non_finite_clients.update(bad.tolist())


@dataclass(frozen=True)
class _Availability:
    """A round's availability: the mask (n_clients,) and the available clients, ascending."""

    mask: BoolArray
    clients: IntArray
    blind: ClientStats


def _locate(pool: IntArray, clients: IntArray) -> tuple[BoolArray, IntArray]:
    """Which ``clients`` are in the ascending array ``pool``, and their positions there."""
    if pool.size == 0:
        return np.zeros(clients.size, dtype=bool), np.zeros(clients.size, dtype=np.intp)
    pos = np.minimum(np.searchsorted(pool, clients), pool.size - 1)
    return np.asarray(pool[pos] == clients), pos


class _Context:
    """What every stream of one :func:`simulate` call shares (read-only during the loop)."""

    def __init__(self, data: ClientData, config: SimConfig, model: Model) -> None:
        self.data = data
        self.config = config
        self.model = model
        self.shared: SharedInputs | None = (
            model if isinstance(model, SharedInputs) and config.local_steps == 1 else None
        )
        self.sizes = data.data_sizes
        self.base_weights: F64Array | None = (
            data.data_sizes.astype(np.float64) if config.weighting == "data_size" else None
        )
        self.always = isinstance(config.availability, AlwaysAvailable)
        everyone = np.ones(data.n_clients, dtype=bool)
        everyone.setflags(write=False)
        self._always = _Availability(
            everyone, np.arange(data.n_clients, dtype=np.intp), ClientStats.blind(everyone)
        )
        self.no_clients = np.empty(0, dtype=np.intp)
        self.system = config.system
        self._times: dict[int, ClientTimes] = {}
        self._sketches: dict[int, UpdateSketch] = {}

    def client_times(self, seed: int) -> ClientTimes:
        """How long each client's work takes in runs of ``seed`` (its devices, drawn once)."""
        assert self.system is not None
        if seed not in self._times:
            cfg = self.config
            self._times[seed] = client_times(
                self.system.draw(seed, self.data.groups),
                dim=self.model.dim,
                local_samples=cfg.local_steps * cfg.batch_size,
                batch_size=cfg.batch_size,
                data_sizes=self.sizes,
                forward_cost=self.system.forward_cost,
            )
        return self._times[seed]

    def sketch(self, seed_key: int, stats: ClientStats) -> ClientStats:
        """What the schedulers see of ``stats``: its updates sketched (``SimConfig.sketch_dim``)."""
        k = self.config.sketch_dim
        if k is None or stats.updates is None:
            return stats
        return dataclasses.replace(stats, updates=self.sketch_rows(seed_key, stats.updates))

    def sketch_rows(self, seed_key: int, updates: F32Array) -> F32Array:
        """Updates (n, dim) as the schedulers see them (unchanged without ``sketch_dim``)."""
        k = self.config.sketch_dim
        if k is None:
            return updates
        if seed_key not in self._sketches:  # one projection per seed, built on first use
            self._sketches[seed_key] = UpdateSketch(self.model.dim, k, seed_key)
        return self._sketches[seed_key].apply(updates)

    def availability(self, seed_key: int, t: int) -> _Availability:
        if self.always:
            return self._always
        mask = self.config.availability.mask(seed_key, t, self.data.groups)
        mask.setflags(write=False)
        return _Availability(mask, np.flatnonzero(mask), ClientStats.blind(mask))

    def returned(self, seed_key: int, t: int, clients: IntArray) -> BoolArray:
        """Which of the selected clients deliver their update (the rest drop out)."""
        if self.config.dropout == 0.0 or clients.size == 0:
            return np.ones(clients.size, dtype=bool)
        draw = counter_uniform(seed_key, Domain.DROPOUT, t, clients)
        return np.asarray(draw >= self.config.dropout)

    def minibatch(self, key: int, t: int, clients: IntArray) -> IntArray:
        """Global training rows of the clients' E·B local samples at round t, shape (n, E·B)."""
        cfg = self.config
        local = _draw(key, clients, t, self.sizes[clients], cfg.local_steps * cfg.batch_size)
        return self.data.train_rows(clients, local)

    def full_losses(self, params: F32Array, clients: IntArray) -> F64Array:
        """Mean loss of each listed client over its whole training set at ``params`` (dim,)."""
        data = self.data
        sizes = data.data_sizes[clients]
        owner = np.repeat(np.arange(clients.size), sizes)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rows = data.train_rows(clients[owner], np.arange(owner.size) - starts[owner])
        total = np.zeros(clients.size)
        for start in range(0, rows.size, _FULL_LOSS_ROWS):
            part = rows[start : start + _FULL_LOSS_ROWS]
            loss, _ = self.model.evaluate(params[None], *data.train_batch(part))
            total += np.bincount(
                owner[start : start + _FULL_LOSS_ROWS], weights=loss[0], minlength=clients.size
            )
        return total / data.data_sizes[clients]

    def local_updates(
        self, params: F32Array, run_index: IntArray, rows: IntArray
    ) -> tuple[F32Array, F32Array]:
        """E local SGD steps of independent (run, client) jobs, in memory-bounded batches.

        ``params`` (k, dim) of the stream; ``run_index`` (J,) the job's run; ``rows`` (J, E·B) its
        training rows. Returns the updates (J, dim) and the first-minibatch losses (J,).
        """
        cfg = self.config
        n_jobs = run_index.size
        updates = np.empty((n_jobs, self.model.dim), dtype=np.float32)
        losses = np.empty(n_jobs, dtype=np.float32)
        per_call = max(1, _JOB_ROWS // (cfg.local_steps * cfg.batch_size))
        for start in range(0, n_jobs, per_call):
            part = slice(start, start + per_call)
            job_rows = rows[part].reshape(-1, cfg.local_steps, cfg.batch_size)
            x, y = self.data.train_batch(job_rows)
            updates[part], losses[part] = local_update(
                self.model, params[run_index[part]], x, y, cfg.local_lr
            )
        return updates, losses

    def first_losses(self, params: F32Array, run_index: IntArray, rows: IntArray) -> F32Array:
        """Loss at w⁽ᵗ⁾ on each job's first minibatch (loss probes without the shared path)."""
        batch = self.config.batch_size
        out = np.empty(run_index.size, dtype=np.float32)
        per_call = max(1, _JOB_ROWS // batch)
        for start in range(0, run_index.size, per_call):
            part = slice(start, start + per_call)
            first = rows[part, :batch]
            loss, _ = self.model.loss_and_grad(
                params[run_index[part]], *self.data.train_batch(first)
            )
            out[part] = loss
        return out


class _Stream:
    """Runs that share a minibatch stream; they advance with shared gathers and products."""

    def __init__(self, runs: list[_Run], key: int, seed_key: int, ctx: _Context) -> None:
        self.runs = runs
        self.key = key
        self.seed_key = seed_key
        self.ctx = ctx
        self.params = ctx.model.init_params(len(runs))
        self.times = None if ctx.system is None else ctx.client_times(runs[0].spec.seed)

    # -- the five steps ------------------------------------------------------------------------

    def step(self, t: int, avail: _Availability) -> None:
        """One round of every run of the stream (Algorithm 1, lines 2–14)."""
        ctx = self.ctx
        runs = self.runs
        # 1. probe; blind runs select at once (their choice needs nothing computed)
        probes = [r.scheduler.probe(r.state, t, avail.mask, r.rng) for r in runs]
        targets = [self._targets(p, avail) for p in probes]
        selections: list[Selection | None] = [None] * len(runs)
        for j, probe in enumerate(probes):
            if probe.kind is ProbeKind.NONE:
                run = runs[j]
                selections[j], run.state = run.scheduler.select(run.state, t, avail.blind, run.rng)
        # 2. gather what the probes ask, over the union of the active clients
        batch = _Batch(self, t, probes, targets, selections)
        stats = [batch.gather(j, avail) for j in range(len(runs))]
        seen = [ctx.sketch(self.seed_key, s) for s in stats]  # sketched for the schedulers
        # 3. select
        chosen: list[IntArray] = []
        coefs: list[F64Array] = []
        returned: list[BoolArray] = []
        failed: list[int] = []
        for j, run in enumerate(runs):
            sel = selections[j]
            if sel is None:
                run.note_non_finite(t, stats[j])
                sel, run.state = run.scheduler.select(run.state, t, seen[j], run.rng)
            clients = check_selection(sel.clients, avail.mask, run.scheduler.m, who=run.spec.run_id)
            ok = ctx.returned(self.seed_key, t, clients)  # dropouts
            if self.times is None:
                failed.append(clients.size - int(np.count_nonzero(ok)))
            else:  # the clock: deadline and over-commitment decide who is aggregated
                ok, n_failed = self._timed(run, t, probes[j], targets[j], stats[j], clients, ok)
                failed.append(n_failed)
            chosen.append(clients)
            returned.append(ok)
            coefs.append(
                aggregation_weights(
                    clients, ok, scheduler_weights=sel.weights, base=ctx.base_weights
                )
            )
        # 4. train the selected clients that return, and aggregate
        if self.times is None:
            observed, fresh = batch.train_and_step(stats, chosen, returned, coefs)
        else:  # only the aggregated clients: a deadline drops clients without any dropout rate
            observed, fresh = batch.train_and_step(
                stats,
                [c[ok] for c, ok in zip(chosen, returned, strict=True)],
                [np.ones(int(np.count_nonzero(ok)), dtype=bool) for ok in returned],
                [c[ok] for c, ok in zip(coefs, returned, strict=True)],
            )
        # 5. observe, record
        for j, run in enumerate(runs):
            clients, ok = chosen[j], returned[j]
            if run.observes:
                updates, losses = observed[j]
                updates = ctx.sketch_rows(self.seed_key, updates)
                run.state = run.scheduler.observe(run.state, t, clients[ok], updates, losses)
            k = clients.size
            run.selected[t, :k] = clients
            run.returned[t, :k] = ok
            run.dropped += failed[j]
            probed = stats[j].n_probed if stats[j].updates is not None else 0
            run.client_updates += probed + fresh[j]
            if probes[j].kind is ProbeKind.LOSSES:
                run.loss_evals += int(targets[j].size)

    def _timed(
        self,
        run: _Run,
        t: int,
        probe: Probe,
        probed: IntArray,
        stats: ClientStats,
        clients: IntArray,
        ok: BoolArray,
    ) -> tuple[BoolArray, int]:
        """Time run's round t on the clock; return who is aggregated and how many failed.

        The probe phase waits for the slowest probed client; in the training phase a client
        whose update the probe already holds answers at once (:mod:`adcs.sim.system`).
        """
        times = self.times
        assert times is not None and run.round_s is not None and run.busy_s is not None
        if probe.kind is ProbeKind.UPDATES:
            probe_s = times.update[probed]
        elif probe.kind is ProbeKind.LOSSES:
            full = probe.loss_source is LossSource.FULL
            probe_s = (times.full_loss if full else times.loss)[probed]
        else:
            probe_s = times.update[self.ctx.no_clients]
        wait, probe_busy = probe_phase(probe_s)
        response = times.update[clients]
        if stats.updates is not None:
            response = np.where(_locate(stats.clients, clients)[0], 0.0, response)
        deadline = self.ctx.system.deadline if self.ctx.system is not None else None
        kept, seconds, busy = training_phase(response, ~ok, min(run.target, clients.size), deadline)
        run.round_s[t] = wait + seconds
        run.busy_s[t] = probe_busy + busy
        late = response > deadline if deadline is not None else np.zeros(clients.size, bool)
        return kept, int(np.count_nonzero(~ok | late))

    def _targets(self, probe: Probe, avail: _Availability) -> IntArray:
        """The clients to probe: distinct, available, ascending."""
        if probe.kind is ProbeKind.NONE:
            return self.ctx.no_clients
        if probe.clients is None:
            return avail.clients
        return np.unique(probe.targets(avail.mask))


class _Batch:
    """The client computations of one stream in one round (steps 2 and 4), planned and executed.

    Phase 1 covers the *early* clients — every probed client and the selection of every blind
    run — in one gather. With the shared-inputs path, one forward product of all the stream's
    runs over their union gives every loss, probed update and (after selection) aggregate those
    clients need; anything else becomes an independent job of ``loss_and_grad``.
    """

    def __init__(
        self,
        stream: _Stream,
        t: int,
        probes: list[Probe],
        targets: list[IntArray],
        selections: list[Selection | None],
    ) -> None:
        self.stream = stream
        self.ctx = stream.ctx
        self.t = t
        self.probes = probes
        self.targets = targets
        early = [
            tg
            for p, tg in zip(probes, targets, strict=True)
            if p.kind is ProbeKind.UPDATES
            or (p.kind is ProbeKind.LOSSES and p.loss_source is LossSource.MINIBATCH)
        ]
        picked = {
            j: np.asarray(s.clients, dtype=np.intp)
            for j, s in enumerate(selections)
            if s is not None
        }
        early += list(picked.values())
        self.early = set(picked)  # runs whose selection is in the union by construction
        parts = [a for a in early if a.size]
        if len(parts) == 1 or (parts and all(a is parts[0] for a in parts)):
            self.union: IntArray = np.unique(parts[0])
        else:
            self.union = np.unique(np.concatenate(parts)) if parts else self.ctx.no_clients
        self.rows = self.ctx.minibatch(stream.key, t, self.union) if self.union.size else None
        self.forward: SharedForward | None = None
        self.client_loss: F32Array | None = None
        rows = self.union.size * self.ctx.config.batch_size
        if self.ctx.shared is not None and 0 < rows <= _SHARED_ROWS:
            self._shared_forward(self.ctx.shared)

    def _shared_forward(self, model: SharedInputs) -> None:
        ctx, batch = self.ctx, self.ctx.config.batch_size
        assert self.rows is not None
        first = self.rows[:, :batch].reshape(-1)
        self.forward = model.shared_forward(self.stream.params, *ctx.data.train_batch(first))
        self.client_loss = self.forward.sample_loss.reshape(
            len(self.stream.runs), self.union.size, batch
        ).mean(axis=2)

    def _positions(self, clients: IntArray) -> IntArray:
        return np.searchsorted(self.union, clients)

    # -- step 2 --------------------------------------------------------------------------------

    def gather(self, j: int, avail: _Availability) -> ClientStats:
        """ClientStats of run j: what its probe asked for, at the current model."""
        probe, clients = self.probes[j], self.targets[j]
        if probe.kind is ProbeKind.NONE:
            return avail.blind
        ctx = self.ctx
        params = self.stream.params
        if probe.kind is ProbeKind.LOSSES:
            if clients.size == 0:
                losses = np.empty(0)
            elif probe.loss_source is LossSource.FULL:
                losses = ctx.full_losses(params[j], clients)
            elif self.client_loss is not None:
                losses = self.client_loss[j, self._positions(clients)].astype(np.float64)
            else:
                rows = self._rows_of(clients)
                losses = ctx.first_losses(params, np.full(clients.size, j), rows).astype(np.float64)
            return ClientStats(avail.mask, clients, losses)
        if clients.size == 0:  # nobody to probe (none available)
            updates, losses32 = np.empty((0, ctx.model.dim), np.float32), np.empty(0, np.float32)
        elif self.forward is not None and ctx.shared is not None:
            assert self.client_loss is not None
            pos = self._positions(clients)
            updates = ctx.shared.block_grads(
                self.forward, j, pos, ctx.config.batch_size, -ctx.config.local_lr
            )
            losses32 = self.client_loss[j, pos]
        else:
            updates, losses32 = ctx.local_updates(
                params, np.full(clients.size, j), self._rows_of(clients)
            )
        return ClientStats(avail.mask, clients, losses32.astype(np.float64), updates)

    def _rows_of(self, clients: IntArray) -> IntArray:
        """The training rows of clients of the union (their round-t minibatches)."""
        assert self.rows is not None
        return self.rows[self._positions(clients)]

    # -- step 4 --------------------------------------------------------------------------------

    def train_and_step(
        self,
        stats: list[ClientStats],
        chosen: list[IntArray],
        returned: list[BoolArray],
        coefs: list[F64Array],
    ) -> tuple[list[tuple[F32Array, F64Array]], list[int]]:
        """Aggregate the returned clients' updates and step every run's model.

        Returns, for each run, the returned clients' updates (n_returned, dim) and their
        first-minibatch losses at w⁽ᵗ⁾ (empty unless the run observes updates), and how many
        updates were computed beyond those its probe already held.
        """
        ctx, cfg = self.ctx, self.ctx.config
        runs = self.stream.runs
        dim = ctx.model.dim
        params = self.stream.params
        step = np.zeros((len(runs), dim), dtype=np.float32)
        empty = (np.empty((0, dim), np.float32), np.empty(0))
        observed: list[tuple[F32Array, F64Array]] = [empty] * len(runs)
        fresh = [0] * len(runs)
        weighted: list[tuple[int, IntArray, F64Array]] = []  # one weighted product for these
        jobs: list[tuple[int, IntArray, F64Array]] = []  # independent loss_and_grad jobs
        no_dropout = cfg.dropout == 0.0
        for j, run in enumerate(runs):
            ok = returned[j]
            if no_dropout:
                clients, coef = chosen[j], coefs[j]
            else:
                clients, coef = chosen[j][ok], coefs[j][ok]
            if run.spec.aggregator is not None:  # the aggregation hook: updates one by one
                observed[j], fresh[j] = self._aggregate_apart(j, run, clients, coef, stats[j], step)
                continue
            upd = stats[j].updates
            if upd is not None:
                have, pos = _locate(stats[j].clients, clients)
                if have.any():  # reuse the probed updates: one product over the probe's rows
                    over_probe = np.zeros(stats[j].n_probed, dtype=np.float32)
                    over_probe[pos[have]] = coef[have]
                    step[j] += over_probe @ upd
                missing = ~have
                fresh[j] = int(np.count_nonzero(missing))
            else:
                have, pos = np.zeros(clients.size, dtype=bool), self.ctx.no_clients
                missing = ~have
                fresh[j] = clients.size
            if run.observes:
                observed[j] = self._observed(j, clients, have, pos, stats[j])
                if fresh[j]:
                    step[j] += coef[missing].astype(np.float32) @ observed[j][0][missing]
            elif fresh[j]:
                lost = clients[missing] if upd is not None else clients
                if self.forward is not None and (
                    j in self.early or _locate(self.union, lost)[0].all()
                ):
                    weighted.append((j, lost, coef[missing]))
                else:
                    jobs.append((j, lost, coef[missing]))
        if weighted:
            idx = [j for j, _, _ in weighted]
            step[idx] += self._weighted(weighted)
        if jobs:
            run_index = np.concatenate([np.full(c.size, j) for j, c, _ in jobs])
            clients = np.concatenate([c for _, c, _ in jobs])
            updates, _ = ctx.local_updates(params, run_index, self._rows_for(clients))
            updates *= np.concatenate([w for _, _, w in jobs]).astype(np.float32)[:, None]
            np.add.at(step, run_index, updates)
        step *= np.float32(cfg.server_lr)
        params += step
        return observed, fresh

    def _aggregate_apart(
        self,
        j: int,
        run: _Run,
        clients: IntArray,
        coef: F64Array,
        got: ClientStats,
        step: F32Array,
    ) -> tuple[tuple[F32Array, F64Array], int]:
        """Step run j through its aggregator (:mod:`adcs.aggregation`) and add it to ``step[j]``.

        Every returned client's update is formed on its own (probed ones reused), never folded
        into the shared weighted product, so that the aggregator can replace some (a poison) or
        combine them robustly. Returns what the server received with the first-minibatch losses,
        for ``observe``, and how many updates were computed beyond the probe's.
        """
        assert run.spec.aggregator is not None
        if got.updates is not None:
            have, pos = _locate(got.clients, clients)
        else:
            have, pos = np.zeros(clients.size, dtype=bool), self.ctx.no_clients
        updates, losses = self._observed(j, clients, have, pos, got)
        received, aggregate = run.spec.aggregator.aggregate(
            run.state, self.t, clients, updates, coef, got
        )
        step[j] += aggregate
        return (received, losses), int(np.count_nonzero(~have))

    def _rows_for(self, clients: IntArray) -> IntArray:
        """Training rows of any clients at this round (from the union's draw where it has them)."""
        in_union, pos = _locate(self.union, clients)
        if self.rows is not None and in_union.all():
            return self.rows[pos]
        return self.ctx.minibatch(self.stream.key, self.t, clients)

    def _observed(
        self, j: int, clients: IntArray, have: BoolArray, pos: IntArray, got: ClientStats
    ) -> tuple[F32Array, F64Array]:
        """The updates (n, dim) and first losses (n,) of run j's returned clients."""
        ctx = self.ctx
        out = np.empty((clients.size, ctx.model.dim), dtype=np.float32)
        losses = np.empty(clients.size)
        if have.any():
            assert got.updates is not None and got.losses is not None
            out[have] = got.updates[pos[have]]
            losses[have] = got.losses[pos[have]]
        missing = clients[~have]
        if missing.size:
            in_union, upos = _locate(self.union, missing)
            if self.forward is not None and ctx.shared is not None and in_union.all():
                assert self.client_loss is not None
                out[~have] = ctx.shared.block_grads(
                    self.forward, j, upos, ctx.config.batch_size, -ctx.config.local_lr
                )
                losses[~have] = self.client_loss[j, upos]
            else:
                upd, first = ctx.local_updates(
                    self.stream.params, np.full(missing.size, j), self._rows_for(missing)
                )
                out[~have], losses[~have] = upd, first
        return out, losses

    def _weighted(self, parts: list[tuple[int, IntArray, F64Array]]) -> F32Array:
        """Σ c_i Δ_i over each listed run's clients (all in the union): one weighted product."""
        ctx, cfg = self.ctx, self.ctx.config
        batch = cfg.batch_size
        assert self.forward is not None and ctx.shared is not None
        sample_weights = np.zeros((len(parts), self.union.size), dtype=np.float32)
        for i, (_, clients, coef) in enumerate(parts):
            sample_weights[i, self._positions(clients)] = coef
        sample_weights *= np.float32(-cfg.local_lr / batch)
        per_sample = np.repeat(sample_weights, batch, axis=1)
        return ctx.shared.weighted_grads(self.forward, [j for j, _, _ in parts], per_sample)


# --------------------------------------------------------------------------------------------
# evaluation, shards, workers
# --------------------------------------------------------------------------------------------


class _Evaluator:
    """Per-client test accuracy and test loss of many runs, at bounded cost.

    The evaluated clients are all of them, or a fixed subset (``SimConfig.eval_clients``). Their
    test inputs are gathered once and kept when they fit :data:`_EVAL_CACHE_BYTES`; otherwise
    they are gathered anew at every evaluation in blocks of :data:`_EVAL_BLOCK_ROWS` samples, so
    memory stays bounded whatever the population (test data generated on demand included).
    """

    def __init__(self, data: ClientData, model: Model, eval_clients: int | None) -> None:
        self.clients = _eval_subset(data.n_clients, eval_clients)
        self.data = data
        self.model = model
        self.n_clients = int(self.clients.size)
        sizes = data.test_sizes[self.clients]
        self.sizes = sizes.astype(np.float64)
        self.rows = data.test_rows(self.clients)
        self.owner = np.repeat(np.arange(self.n_clients), sizes)
        values = int(np.prod(data.input_shape))
        self.x: F32Array | None = None
        if self.rows.size * values * 4 <= _EVAL_CACHE_BYTES:
            union, inverse = np.unique(self.rows, return_inverse=True)
            self.x, self.y = data.test_batch(union)
            self.inverse = inverse.reshape(-1)
            self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def __call__(self, params: F32Array) -> tuple[F64Array, F64Array]:
        """Client accuracies (R, n_eval_clients) and test losses (R,) of R models (R, dim)."""
        n_runs = params.shape[0]
        acc = np.empty((n_runs, self.n_clients))
        loss = np.empty(n_runs)
        for start in range(0, n_runs, _EVAL_RUNS_PER_PRODUCT):
            chunk = slice(start, start + _EVAL_RUNS_PER_PRODUCT)
            acc[chunk], loss[chunk] = (
                self._cached(params[chunk]) if self.x is not None else self._blocks(params[chunk])
            )
        return acc, loss

    def _cached(self, params: F32Array) -> tuple[F64Array, F64Array]:
        assert self.x is not None
        sample_loss, correct = self.model.evaluate(params, self.x, self.y)
        per_row = correct[:, self.inverse].astype(np.float64)
        acc = np.add.reduceat(per_row, self.starts, axis=1) / self.sizes
        return acc, sample_loss.mean(axis=1, dtype=np.float64)

    def _blocks(self, params: F32Array) -> tuple[F64Array, F64Array]:
        hits = np.zeros((params.shape[0], self.n_clients))
        total_loss = np.zeros(params.shape[0])
        for start in range(0, self.rows.size, _EVAL_BLOCK_ROWS):
            part = slice(start, start + _EVAL_BLOCK_ROWS)
            sample_loss, correct = self.model.evaluate(
                params, *self.data.test_batch(self.rows[part])
            )
            owner = self.owner[part]  # ascending: one segment per client of the block
            first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            hits[:, owner[first]] += np.add.reduceat(correct.astype(np.float64), first, axis=1)
            total_loss += sample_loss.sum(axis=1, dtype=np.float64)
        return hits / self.sizes, total_loss / self.rows.size


def _eval_subset(n_clients: int, eval_clients: int | None) -> IntArray:
    """The evaluated clients, ascending: all, or a fixed uniform subset of ``eval_clients``."""
    if eval_clients is None or eval_clients >= n_clients:
        return np.arange(n_clients, dtype=np.intp)
    # one fixed draw, the same for every seed and run, so their metrics compare like for like
    rng = round_generator(stream_key(0), Domain.EVALUATION, 0)
    return np.sort(rng.choice(n_clients, size=eval_clients, replace=False)).astype(np.intp)


_StreamKey = tuple[int, str | None]
"""A minibatch stream: (seed, None) shared by the seed's runs, or (seed, run_id)."""


@dataclass
class _StreamState:
    """One stream's state after a whole round: what a checkpoint or a forked worker carries.

    ``runs`` holds per run (scheduler state, scheduler generator, selected, returned,
    client_updates, loss_evals, dropped, non_finite, non_finite_clients, and the clock's
    round_s and busy_s).
    """

    params: F32Array
    runs: list[tuple[Any, ...]]
    client_acc: F64Array  # (n_runs, n_evals, n_clients)
    test_loss: F64Array  # (n_runs, n_evals)


def _run_state(run: _Run) -> tuple[Any, ...]:
    return (
        run.state, run.rng, run.selected, run.returned, run.client_updates, run.loss_evals,
        run.dropped, run.non_finite, set(run.non_finite_clients), run.round_s, run.busy_s,
    )  # fmt: skip


def _set_run_state(run: _Run, values: tuple[Any, ...]) -> None:
    (
        run.state, run.rng, run.selected, run.returned, run.client_updates, run.loss_evals,
        run.dropped, run.non_finite, run.non_finite_clients, run.round_s, run.busy_s,
    ) = values  # fmt: skip


class _Shard:
    """The streams one worker advances, with their evaluations and availability records."""

    def __init__(
        self,
        streams: list[_Stream],
        keys: list[_StreamKey],
        seeds: dict[int, int],
        evaluator: _Evaluator,
        ctx: _Context,
        n_evals: int,
    ) -> None:
        self.streams = streams
        self.keys = keys  # the stream identities, parallel to ``streams``
        self.seeds = seeds  # seed → its availability/dropout key
        self.evaluator = evaluator
        self.ctx = ctx
        n_runs = sum(len(s.runs) for s in streams)
        self.client_acc = np.empty((n_runs, n_evals, evaluator.n_clients))
        self.test_loss = np.empty((n_runs, n_evals))
        rounds, n = ctx.config.rounds, ctx.data.n_clients
        self.n_available = {s: np.empty(rounds, dtype=np.int32) for s in seeds}
        keep = not ctx.always and rounds * n <= _MAX_RECORDED_AVAILABILITY_BITS
        self.available: dict[int, NDArray[np.uint8]] | None = (
            {s: np.empty((rounds, (n + 7) // 8), dtype=np.uint8) for s in seeds} if keep else None
        )
        self.rounds_done = 0
        self.next_eval = 0  # index into config.eval_rounds of the next evaluation

    def export(self) -> dict[str, Any]:
        """The shard's whole state after a round, by stream and by seed (picklable).

        A forked worker sends it back; merged over shards it is a :class:`SimCheckpoint`.
        """
        streams: dict[_StreamKey, _StreamState] = {}
        row = 0
        for key, stream in zip(self.keys, self.streams, strict=True):
            rows = slice(row, row + len(stream.runs))
            streams[key] = _StreamState(
                stream.params,
                [_run_state(r) for r in stream.runs],
                self.client_acc[rows],
                self.test_loss[rows],
            )
            row = rows.stop
        return {
            "rounds_done": self.rounds_done,
            "next_eval": self.next_eval,
            "streams": streams,
            "n_available": self.n_available,
            "available": self.available,
        }

    def absorb(self, state: Mapping[str, Any]) -> None:
        """Take the state of this shard's streams from :meth:`export` (of any shards' layout)."""
        self.rounds_done = int(state["rounds_done"])
        self.next_eval = int(state["next_eval"])
        row = 0
        for key, stream in zip(self.keys, self.streams, strict=True):
            saved: _StreamState = state["streams"][key]
            rows = slice(row, row + len(stream.runs))
            stream.params = np.array(saved.params, dtype=np.float32)
            for run, values in zip(stream.runs, saved.runs, strict=True):
                _set_run_state(run, values)
            self.client_acc[rows] = saved.client_acc
            self.test_loss[rows] = saved.test_loss
            row = rows.stop
        for seed in self.seeds:
            self.n_available[seed][:] = state["n_available"][seed]
            if self.available is not None:
                self.available[seed][:] = state["available"][seed]

    def evaluate(self) -> None:
        # stream by stream: the products then do not depend on which streams share a shard, so
        # neither do the numbers (whatever ``workers`` is, and across a resume)
        row = 0
        for stream in self.streams:
            rows = slice(row, row + len(stream.runs))
            self.client_acc[rows, self.next_eval], self.test_loss[rows, self.next_eval] = (
                self.evaluator(stream.params)
            )
            row = rows.stop
        self.next_eval += 1

    def run(
        self, config: SimConfig, report: Callable[[], None], stop: threading.Event, until: int
    ) -> None:
        """Advance every stream from round ``rounds_done`` to round ``until`` (≤ T).

        Evaluations happen before the rounds they name; the last one (at T) once ``until`` = T.
        """
        eval_at = config.eval_rounds
        for t in range(self.rounds_done, until):
            if stop.is_set():  # another worker failed
                return
            if t == eval_at[self.next_eval]:
                self.evaluate()
            masks = {seed: self.ctx.availability(key, t) for seed, key in self.seeds.items()}
            for seed, avail in masks.items():
                self.n_available[seed][t] = avail.clients.size
                if self.available is not None:
                    self.available[seed][t] = np.packbits(avail.mask)
            for stream in self.streams:
                stream.step(t, masks[stream.runs[0].spec.seed])
            self.rounds_done = t + 1
            if self.rounds_done % _PROGRESS_EVERY == 0:
                report()
        if self.rounds_done == config.rounds and self.next_eval < eval_at.size:
            self.evaluate()
        report()


def _check_runs(runs: Sequence[RunSpec], data: ClientData) -> None:
    if len(runs) == 0:
        raise ValueError("runs must hold at least one RunSpec")
    seen: set[str] = set()
    for spec in runs:
        if not isinstance(spec, RunSpec):
            raise ValueError(f"runs must hold RunSpec objects, got {type(spec).__name__}")
        if spec.run_id in seen:
            raise ValueError(f"run_id {spec.run_id!r} appears twice; run ids must be unique")
        seen.add(spec.run_id)
        m = spec.scheduler.m
        if not is_int(m) or not 1 <= m <= data.n_clients:
            raise ValueError(
                f"run {spec.run_id!r}: scheduler.m must be in [1, {data.n_clients}], got {m!r}"
            )


def _check_gather_memory(ctx: _Context) -> None:
    """Refuse a batch size whose round would hold more memory at once than allowed.

    A round draws E·B local indices for each active client (index arrays, ~24 bytes per sample
    with the draw's temporaries) and gathers inputs for at most max(E·B, the job and shared-product
    bounds) samples at a time (float32). A client holding fewer samples than E·B trains on whole
    shuffles of its data back to back, so a batch far beyond every client's data buys only memory.
    """
    cfg, data = ctx.config, ctx.data
    values = int(np.prod(data.input_shape))
    steps = cfg.local_steps * cfg.batch_size
    shared = min(data.n_clients * cfg.batch_size, _SHARED_ROWS) if ctx.shared is not None else 0
    rows = max(steps, _JOB_ROWS, shared)
    need = rows * values * 4 + data.n_clients * steps * 24
    if need > _GATHER_BUDGET_BYTES:
        sizes = data.data_sizes
        raise ValueError(
            f"batch_size={cfg.batch_size} (local_steps={cfg.local_steps}) needs about "
            f"{need / 2**30:.1f} GiB at once for {data.n_clients} clients of {values}-value "
            f"samples, more than the {_GATHER_BUDGET_BYTES / 2**30:.0f} GiB allowed; the clients "
            f"hold {int(sizes.min())}–{int(sizes.max())} training samples each, and a batch "
            "larger than a client's data only repeats its samples"
        )


def _new_run(spec: RunSpec, ctx: _Context) -> _Run:
    scheduler = spec.scheduler
    target = int(scheduler.m)
    timed = ctx.system is not None
    if timed:
        scheduler = _with_system(spec, ctx)
    elif isinstance(scheduler, UsesRoundTimes) and scheduler.needs_round_times:
        raise ValueError(
            f"run {spec.run_id!r}: its scheduler needs the clients' round durations; "
            "give SimConfig a system profile (system=SystemConfig(...))"
        )
    rounds, m = ctx.config.rounds, int(scheduler.m)
    return _Run(
        spec=spec,
        scheduler=scheduler,
        state=scheduler.init(ctx.data.n_clients, ctx.sizes.astype(np.float64)),
        rng=scheduler_rng(spec.seed, spec.run_id),
        observes=bool(scheduler.observes_updates),
        selected=np.full((rounds, m), -1, dtype=np.int32),
        returned=np.zeros((rounds, m), dtype=bool),
        target=target,
        round_s=np.zeros(rounds) if timed else None,
        busy_s=np.zeros(rounds) if timed else None,
    )


def _with_system(spec: RunSpec, ctx: _Context) -> Scheduler:
    """The scheduler a timed run uses: told the round durations, asked for ⌈(1 + o)·m⌉ clients."""
    assert ctx.system is not None
    scheduler = spec.scheduler
    if isinstance(scheduler, UsesRoundTimes):
        scheduler = scheduler.with_round_times(ctx.client_times(spec.seed).update)
    invited = ctx.system.invited(int(scheduler.m), ctx.data.n_clients)
    if invited == scheduler.m:
        return scheduler
    if not dataclasses.is_dataclass(scheduler) or "m" not in {
        f.name for f in dataclasses.fields(scheduler)
    }:
        raise ValueError(
            f"run {spec.run_id!r}: over-commitment asks the scheduler for {invited} clients, "
            f"which needs a dataclass scheduler with a field m; {type(scheduler).__name__} is not"
        )
    invite: Scheduler = dataclasses.replace(scheduler, m=invited)
    return invite


def _build_shards(
    runs: Sequence[RunSpec], ctx: _Context, workers: int
) -> tuple[list[_Shard], list[list[int]]]:
    """Group the runs into streams and deal whole streams to ``workers`` shards.

    Streams are dealt largest first to the least loaded shard. A stream is never split, so the
    shared products — and therefore every number — are the same whatever ``workers`` is.
    """
    keyed: dict[_StreamKey, list[int]] = {}
    for i, spec in enumerate(runs):
        key = (spec.seed, None if ctx.config.common_minibatches else spec.run_id)
        keyed.setdefault(key, []).append(i)
    n_shards = min(workers, len(keyed))
    load = [0] * n_shards
    dealt: list[list[_StreamKey]] = [[] for _ in range(n_shards)]
    for key in sorted(keyed, key=lambda k: -len(keyed[k])):
        s = load.index(min(load))
        dealt[s].append(key)
        load[s] += len(keyed[key])
    evaluator = _Evaluator(ctx.data, ctx.model, ctx.config.eval_clients)
    n_evals = ctx.config.eval_rounds.size
    shards, members = [], []
    for keys in dealt:
        streams, member = [], []
        for seed, run_id in keys:
            indices = keyed[(seed, run_id)]
            stream_runs = [_new_run(runs[i], ctx) for i in indices]
            streams.append(_Stream(stream_runs, stream_key(seed, run_id), stream_key(seed), ctx))
            member.extend(indices)
        seeds = {seed: stream_key(seed) for seed, _ in keys}
        shards.append(_Shard(streams, list(keys), seeds, evaluator, ctx, n_evals))
        members.append(member)
    return shards, members


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SimCheckpoint:
    """Everything a :func:`simulate` call holds after a whole round, to continue it exactly.

    Picklable (the runner pickles it into a results folder's checkpoint). A call resumed from it
    (``simulate(..., resume_from=checkpoint)`` with the same runs, data and config) gives results
    identical to the call that was never interrupted: the schedulers' states and generators, the
    models, the records and the evaluations are all here, and every other draw is counter-based.

    Attributes
    ----------
    rounds_done : int
        Rounds every run has completed, 1 ≤ rounds_done < T.
    rounds : int
        T of the call.
    run_ids : tuple of str
        The runs, in the order given to :func:`simulate`.
    state : dict
        The streams' states by stream and the availability records by seed (engine-internal).
    wall_s : float
        Wall time spent on the call so far (all sessions).
    """

    rounds_done: int
    rounds: int
    run_ids: tuple[str, ...]
    state: Mapping[str, Any]
    wall_s: float


@dataclass(frozen=True)
class Checkpointing:
    """When :func:`simulate` hands a :class:`SimCheckpoint` to ``save``.

    Parameters
    ----------
    save : callable
        ``save(checkpoint)``, called between rounds (in the calling process, workers idle).
    every : int, optional
        Every this many rounds. ``None`` (default): about every ``seconds`` of simulation.
    seconds : float
        Target time between checkpoints when ``every`` is None (> 0).
    """

    save: Callable[[SimCheckpoint], None]
    every: int | None = None
    seconds: float = 30.0

    def __post_init__(self) -> None:
        if not callable(self.save):
            raise ValueError(f"save must be callable, got {self.save!r}")
        if self.every is not None:
            check_int("every", self.every)
        check_number("seconds", self.seconds, 0.0, low_open=True)

    def first(self, remaining: int) -> int:
        """Rounds in the first segment: ``every``, or a short probe of the round rate."""
        return min(remaining, self.every if self.every is not None else _FIRST_SEGMENT)

    def next(self, remaining: int, rounds: int, elapsed: float) -> int:
        """Rounds in the next segment, after the last one took ``elapsed`` s for ``rounds``."""
        if self.every is not None:
            return min(remaining, self.every)
        per_round = max(elapsed, 1e-9) / max(rounds, 1)
        return max(1, min(remaining, int(self.seconds / per_round)))


def _snapshot(
    shards: list[_Shard], runs: Sequence[RunSpec], rounds: int, wall: float
) -> SimCheckpoint:
    streams: dict[_StreamKey, _StreamState] = {}
    n_available: dict[int, NDArray[np.int32]] = {}
    available: dict[int, NDArray[np.uint8]] | None = None
    for shard in shards:
        exported = shard.export()
        streams.update(exported["streams"])
        for seed, counts in exported["n_available"].items():
            n_available.setdefault(seed, counts)
        if exported["available"] is not None:
            available = available if available is not None else {}
            for seed, bits in exported["available"].items():
                available.setdefault(seed, bits)
    state = {  # a deep copy: the loop goes on writing into the live arrays
        "rounds_done": shards[0].rounds_done,
        "next_eval": shards[0].next_eval,
        "streams": streams,
        "n_available": n_available,
        "available": available,
    }
    ids = tuple(s.run_id for s in runs)
    return SimCheckpoint(shards[0].rounds_done, rounds, ids, copy.deepcopy(state), wall)


def _restore(
    shards: list[_Shard], checkpoint: SimCheckpoint, runs: Sequence[RunSpec], rounds: int
) -> None:
    if not isinstance(checkpoint, SimCheckpoint):
        raise ValueError(f"resume_from must be a SimCheckpoint, got {type(checkpoint).__name__}")
    if checkpoint.run_ids != tuple(s.run_id for s in runs):
        raise ValueError("resume_from was taken of other runs (their run ids differ)")
    if checkpoint.rounds != rounds or not 0 < checkpoint.rounds_done < rounds:
        raise ValueError(
            f"resume_from was taken at round {checkpoint.rounds_done} of {checkpoint.rounds}; "
            f"this call runs {rounds} rounds"
        )
    missing = [k for s in shards for k in s.keys if k not in checkpoint.state["streams"]]
    if missing:
        raise ValueError(f"resume_from has no state for the stream(s) {missing}")
    for shard in shards:
        shard.absorb(checkpoint.state)


# --------------------------------------------------------------------------------------------
# workers
# --------------------------------------------------------------------------------------------


def _run_shards(
    shards: list[_Shard],
    config: SimConfig,
    progress: Callable[[int], None] | None,
    until: int,
) -> None:
    """Advance every shard to round ``until``: in this process, forked processes or threads."""
    lock = threading.Lock()
    stop = threading.Event()
    reported = [-1]

    def report() -> None:
        if progress is None:
            return
        with lock:
            done = min(s.rounds_done for s in shards)
            if done > reported[0]:
                reported[0] = done
                progress(done)

    if len(shards) == 1:
        shards[0].run(config, report, stop, until)
        return
    if _can_fork():
        _run_shards_in_processes(shards, config, report, until)
        return
    errors: list[BaseException] = []

    def work(shard: _Shard) -> None:
        try:
            shard.run(config, report, stop, until)
        except BaseException as exc:  # re-raised in the calling thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in shards]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # a timed join lets KeyboardInterrupt through
                thread.join(0.2)
    except BaseException:
        stop.set()
        raise
    if errors:
        raise errors[0]


def _can_fork() -> bool:
    # Forked workers share the data copy-on-write and run truly in parallel (the round loop is
    # Python and holds the GIL between matrix products). Elsewhere, threads.
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


_FORKED: tuple[list[_Shard], SimConfig, Any, int] | None = None
"""What a forked worker inherits: the shards, the config, the shared round counters, ``until``."""

_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _die_with_parent(parent: int) -> None:
    """Make this forked worker die with its parent, even a parent killed by SIGKILL.

    Linux's parent-death signal does it; should it be unavailable, a thread polls the parent.
    Either way a worker whose parent is already gone exits at once.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        armed = False
    if not armed:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:
        os._exit(1)


def _forked_worker(index: int, conn: Connection, parent: int) -> None:
    """A forked process: advance shard ``index`` and send its state (or its error) back."""
    _die_with_parent(parent)
    # Ctrl-C reaches the whole process group: the parent handles it and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # blocked around the fork
    assert _FORKED is not None
    shards, config, counters, until = _FORKED
    shard = shards[index]

    def report() -> None:
        counters[index] = shard.rounds_done

    try:
        shard.run(config, report, threading.Event(), until)
        message: tuple[str, Any] = ("ok", shard.export())
    except BaseException as exc:
        message = ("error", _portable_error(exc))
    try:
        conn.send(message)
    except Exception as exc:  # e.g. an unpicklable scheduler state
        conn.send(("error", RuntimeError(f"simulation worker {index}: cannot send results: {exc}")))
    conn.close()


def _portable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError carrying its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _run_shards_in_processes(
    shards: list[_Shard], config: SimConfig, report: Callable[[], None], until: int
) -> None:
    """Advance each shard in its own forked process and take its state back.

    The workers die with this process (see :func:`_die_with_parent`); on any exception here —
    a worker's error, KeyboardInterrupt, the CLI's SIGTERM — they are terminated and reaped
    before it propagates, so none is left running.
    """
    global _FORKED
    ctx = multiprocessing.get_context("fork")
    counters = ctx.Array("q", [s.rounds_done for s in shards], lock=False)
    _FORKED = (shards, config, counters, until)
    processes: list[multiprocessing.process.BaseProcess] = []
    pending: dict[Connection, int] = {}
    outcomes: dict[int, Mapping[str, Any]] = {}
    try:
        for i in range(len(shards)):
            receiver, sender = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_forked_worker, args=(i, sender, os.getpid()), daemon=True)
            # an interrupt raised inside fork's hooks would be lost ("Exception ignored"):
            # it waits until the child exists, then arrives here
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            sender.close()
            processes.append(process)
            pending[receiver] = i
        while pending:
            ready = [c for c in mp_wait(list(pending), timeout=0.5) if isinstance(c, Connection)]
            for shard, count in zip(shards, counters, strict=True):
                shard.rounds_done = max(shard.rounds_done, int(count))
            report()
            for conn in ready:
                i = pending.pop(conn)
                try:
                    kind, payload = conn.recv()
                except EOFError:
                    processes[i].join(1.0)
                    raise RuntimeError(
                        f"simulation worker {i} (pid {processes[i].pid}) died "
                        f"(exit code {processes[i].exitcode})"
                    ) from None
                finally:
                    conn.close()
                if kind == "error":
                    raise payload
                outcomes[i] = payload
    finally:
        _FORKED = None
        for conn in pending:
            conn.close()
        _stop_processes(processes)
    for i, shard in enumerate(shards):
        shard.absorb(outcomes[i])
    report()


def _stop_processes(processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Terminate the workers still running and reap every one (no zombie, no orphan)."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + 5.0
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """One BLAS and OpenMP thread for the duration of a call (restored afterwards).

    The simulator's matrix products are small (480 × 784 × 60 per stream and round): a
    multi-threaded BLAS spends more on synchronising than it gains, and on a busy machine its
    spinning threads make a run several times slower. Parallelism comes from ``workers`` instead.
    OpenMP is PyTorch's CPU thread pool (a torch model's kernels are as small), and a forked worker
    cannot use a pool its parent started: it would wait forever for threads that were not copied.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logger.debug("threadpoolctl is not installed; BLAS keeps its own thread count")
        yield
        return
    with threadpool_limits(limits={"blas": 1, "openmp": 1}):
        yield


def _context(data: ClientData, config: SimConfig, model: Model | None) -> _Context:
    if model is None:
        model = LogisticRegression(int(np.prod(data.input_shape)), data.n_classes)
    if not isinstance(model, Model):
        raise ValueError(f"model must follow the Model protocol, got {type(model).__name__}")
    if isinstance(config.availability, TraceAvailability):
        config.availability.mask(0, 0, data.groups)  # refuses a trace of another population
    ctx = _Context(data, config, model)
    _check_gather_memory(ctx)
    return ctx


def check_simulation(data: ClientData, config: SimConfig, model: Model | None = None) -> None:
    """What :func:`simulate` checks of data, config and model before any round, without running.

    Raises
    ------
    ValueError
        The model does not follow the protocol, an availability trace is of another population,
        or a round would gather more inputs than memory allows (the message starts with the
        offending argument, e.g. ``batch_size=100000 …``).
    """
    _context(data, config, model)


def simulate(
    runs: Sequence[RunSpec],
    data: ClientData,
    config: SimConfig,
    progress: Callable[[int], None] | None = None,
    *,
    model: Model | None = None,
    workers: int = 1,
    checkpoint: Checkpointing | None = None,
    resume_from: SimCheckpoint | None = None,
) -> list[RunResult]:
    """Run many independent federated trainings together (Algorithm 1 for every scheduler).

    Parameters
    ----------
    runs : sequence of RunSpec
        The runs (distinct ``run_id``); each gets its own model, scheduler state and streams.
    data : ClientData
        The clients' data: :class:`FederatedData`, or any :class:`~adcs.sim.data.ClientData`
        (e.g. :class:`adcs.data.synthetic.SyntheticClients`, generated on demand).
    config : SimConfig
    progress : callable, optional
        Called with the number of rounds every run has completed, every 50 rounds and at the end
        (from a worker thread when ``workers > 1``, never concurrently).
    model : Model, optional
        Any :class:`~adcs.sim.model.Model`; default :class:`LogisticRegression` sized for ``data``
        (the paper's model).
    workers : int
        Workers that advance disjoint sets of minibatch streams in parallel — forked processes on
        Linux, threads elsewhere (≥ 1; more than the number of streams — seeds, with
        ``common_minibatches`` — brings nothing). Results do not depend on it. Forked workers die
        with the calling process and are stopped when the call raises (KeyboardInterrupt
        included). BLAS is kept to one thread during the call when ``threadpoolctl`` is
        installed (without it, set ``OPENBLAS_NUM_THREADS=1`` for best speed).
    checkpoint : Checkpointing, optional
        Hand a :class:`SimCheckpoint` to ``checkpoint.save`` every ``checkpoint.every`` rounds
        (default about every 30 s), between rounds.
    resume_from : SimCheckpoint, optional
        Continue the call that saved this checkpoint (same runs, data, config and model; any
        ``workers``). The results are those of the uninterrupted call.

    Returns
    -------
    list of RunResult
        In the order of ``runs``.
    """
    check_int("workers", workers)
    if not isinstance(data, ClientData):
        raise ValueError(f"data must follow the ClientData protocol, got {type(data).__name__}")
    _check_runs(runs, data)
    if checkpoint is not None and not isinstance(checkpoint, Checkpointing):
        raise ValueError(f"checkpoint must be a Checkpointing, got {type(checkpoint).__name__}")
    ctx = _context(data, config, model)
    shards, members = _build_shards(runs, ctx, workers)
    earlier = 0.0
    if resume_from is not None:
        _restore(shards, resume_from, runs, config.rounds)
        earlier = resume_from.wall_s
    logger.info(
        "simulating %d runs in %d stream(s), rounds %d to %d, %d worker(s)",
        len(runs),
        sum(len(s.streams) for s in shards),
        shards[0].rounds_done,
        config.rounds,
        len(shards),
    )
    start = time.perf_counter()
    with _single_threaded_blas():
        done = shards[0].rounds_done
        step = config.rounds if checkpoint is None else checkpoint.first(config.rounds - done)
        while True:
            until = min(config.rounds, done + step)
            began = time.perf_counter()
            _run_shards(shards, config, progress, until)
            if until == config.rounds:
                break
            assert checkpoint is not None
            wall = earlier + time.perf_counter() - start
            checkpoint.save(_snapshot(shards, runs, config.rounds, wall))
            remaining = config.rounds - until
            step = checkpoint.next(remaining, until - done, time.perf_counter() - began)
            done = until
    wall = earlier + time.perf_counter() - start
    logger.info("simulated %d runs x %d rounds in %.1f s", len(runs), config.rounds, wall)
    return _collect(runs, ctx, shards, members, wall)


def _collect(
    runs: Sequence[RunSpec],
    ctx: _Context,
    shards: list[_Shard],
    members: list[list[int]],
    wall: float,
) -> list[RunResult]:
    data, config = ctx.data, ctx.config
    results: list[RunResult | None] = [None] * len(runs)
    eval_rounds = config.eval_rounds
    eval_rounds.setflags(write=False)
    groups = np.asarray(data.groups)
    eval_clients = shards[0].evaluator.clients
    available: dict[int, NDArray[np.uint8]] = {}
    for shard in shards:
        for seed, bits in (shard.available or {}).items():
            available.setdefault(seed, bits)  # the same masks in every shard of a seed
    for shard, member in zip(shards, members, strict=True):
        row = 0
        for stream in shard.streams:
            for j, run in enumerate(stream.runs):
                spec_index = member[row]
                client_acc = shard.client_acc[row]
                worst, avg = worst_and_average(client_acc)
                eval_groups = groups[eval_clients]
                share = group_share(run.selected, data.groups, data.n_groups)
                results[spec_index] = RunResult(
                    spec=run.spec,
                    eval_rounds=eval_rounds,
                    worst_acc=worst,
                    avg_acc=avg,
                    test_loss=shard.test_loss[row].copy(),
                    client_acc=client_acc.copy(),
                    selected=run.selected,
                    returned=run.returned,
                    n_available=shard.n_available[run.spec.seed],
                    available=available.get(run.spec.seed),
                    client_updates=run.client_updates,
                    loss_evals=run.loss_evals,
                    dropped=run.dropped,
                    wall_s=wall / len(runs),
                    group_share=share,
                    tv_to_uniform=tv_to_uniform(share, data.groups, data.n_groups),
                    final_params=stream.params[j].copy(),
                    round_time=run.round_s,
                    busy_time=run.busy_s,
                    non_finite=run.non_finite,
                    p10_acc=percentile_accuracy(client_acc, 0.1),
                    group_acc=group_accuracy(client_acc, eval_groups, data.n_groups),
                    eval_clients=eval_clients,
                )
                row += 1
    return [r for r in results if r is not None]
