"""The multi-run federated round loop (DESIGN §1 and §4, paper Algorithm 1 generalised).

Every run r advances through the same rounds t = 0, …, T − 1:

1. ``probe = scheduler.probe(state_r, t, available, rng_r)``;
2. the simulator computes what it asks at w⁽ᵗ⁾ — minibatch (or full local) losses, or local updates
   Δ_n = w_n^{(t,E)} − w⁽ᵗ⁾ with the loss at w⁽ᵗ⁾ on their first minibatch — into :class:`ClientStats`;
3. ``selection, state_r = scheduler.select(...)``;
4. the selected clients' updates (probed ones reused) are aggregated:
   w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{n∈S} (p_n / Σ_S p) Δ_n, or η_s Σ_i weights_i Δ_i when the scheduler returns
   aggregation weights;
5. ``observe`` is called, and the selection and the client computations it cost are recorded.

Speed (DESIGN §4). Runs are grouped by their *minibatch stream*: with
``SimConfig.common_minibatches`` (the default), all runs with the same seed share one stream, so client
n's minibatch at round t is the same in every method of that seed (common random numbers: methods are
compared on the same sample path). Per round and group the minibatches of all N clients are gathered
once, and one matrix product ``x @ [W_1 … W_k]`` gives every run's logits; gradients come from one more
product (aggregated) or a batched product per client (when a scheduler asks for updates). The first
local step of every client needs exactly these products; further local steps (E > 1) run per client,
batched over clients and runs. Scheduling (N = 30) runs per run in Python.

Randomness. A run's scheduler draws from a generator derived from ``(seed, run_id)``; its minibatches
from one derived from ``seed`` (``common_minibatches``) or ``(seed, run_id)``; never from its position
in the batch, so a run gives the same result alone or batched with others (up to float32 rounding in
the shared matrix products). Minibatch indices are drawn 256 rounds at a time for every client, whether
or not the client is used, so a client's minibatches do not depend on who was selected.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs.schedulers.base import (
    ClientStats,
    LossSource,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
)
from adcs.sim.metrics import group_share, tv_distance, uniform_group_share, worst_and_average
from adcs.sim.model import LogisticRegression, Model, SharedForward, local_update, to_unit_float

if TYPE_CHECKING:
    from adcs.data import FashionMNIST, Partition

__all__ = [
    "FederatedData",
    "MinibatchSampler",
    "RunResult",
    "RunSpec",
    "SimConfig",
    "draw_local_indices",
    "minibatch_seed_sequence",
    "scheduler_rng",
    "simulate",
]

logger = logging.getLogger(__name__)

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

ROUNDS_PER_BLOCK = 256
"""Minibatch indices are drawn for this many rounds at a time (a run's draws do not depend on T)."""

_MAX_REDRAWS = 64
_EVAL_RUNS_PER_PRODUCT = 32
_FULL_LOSS_ROWS = 8192
_PROGRESS_EVERY = 50


# --------------------------------------------------------------------------------------------
# configuration and inputs
# --------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _positive_int(name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _positive_float(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if not math.isfinite(float(value)) or float(value) <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


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
        B ≥ 1, minibatch size of each local step (and of a minibatch loss probe).
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
    """

    rounds: int
    local_steps: int = 1
    batch_size: int = 16
    local_lr: float = 1e-3
    server_lr: float = 1.0
    eval_every: int = 100
    weighting: Literal["uniform", "data_size"] = "uniform"
    common_minibatches: bool = True

    def __post_init__(self) -> None:
        _positive_int("rounds", self.rounds)
        _positive_int("local_steps", self.local_steps)
        _positive_int("batch_size", self.batch_size)
        _positive_float("local_lr", self.local_lr)
        _positive_float("server_lr", self.server_lr)
        _positive_int("eval_every", self.eval_every)
        if self.weighting not in ("uniform", "data_size"):
            raise ValueError(f"weighting must be 'uniform' or 'data_size', got {self.weighting!r}")
        if not isinstance(self.common_minibatches, bool):
            raise ValueError(
                f"common_minibatches must be True or False, got {self.common_minibatches!r}"
            )

    @property
    def eval_rounds(self) -> IntArray:
        """Rounds after which test metrics are computed: 0, eval_every, …, and T."""
        points = np.arange(0, self.rounds + 1, self.eval_every, dtype=np.intp)
        if points[-1] != self.rounds:
            points = np.append(points, self.rounds)
        return points


def _readonly(array: NDArray[Any]) -> NDArray[Any]:
    """A read-only view (the caller's own array keeps its flags)."""
    view = array.view()
    view.setflags(write=False)
    return view


def _client_index_arrays(
    name: str, arrays: Sequence[ArrayLike], n_rows: int
) -> tuple[IntArray, ...]:
    out = []
    for i, values in enumerate(arrays):
        idx = np.asarray(values)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise ValueError(
                f"{name}[{i}] must be a 1-D integer array, got {idx.dtype} {idx.shape}"
            )
        if idx.size == 0:
            raise ValueError(f"{name}[{i}] is empty: every client needs at least one sample")
        if idx.min() < 0 or idx.max() >= n_rows:
            raise ValueError(f"{name}[{i}] holds an index outside [0, {n_rows})")
        out.append(_readonly(idx.astype(np.intp)))
    return tuple(out)


def _images(name: str, images: ArrayLike) -> NDArray[Any]:
    array = np.asarray(images)
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (n, n_features), got {array.shape}")
    if array.dtype == np.uint8:
        return _readonly(np.ascontiguousarray(array))
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"{name} must be uint8 pixels or floats, got dtype {array.dtype}")
    converted = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(converted).all():
        raise ValueError(f"{name} holds non-finite values")
    return _readonly(converted)


def _labels(name: str, labels: ArrayLike, n_rows: int, n_classes: int) -> IntArray:
    array = np.asarray(labels)
    if array.shape != (n_rows,) or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array of shape ({n_rows},), got {array.shape}")
    if array.min() < 0 or array.max() >= n_classes:
        raise ValueError(f"{name} must lie in [0, n_classes={n_classes})")
    return _readonly(array.astype(np.intp))


@dataclass(frozen=True, eq=False)
class FederatedData:
    """The clients' data, held once in memory; clients own index arrays into it.

    Parameters
    ----------
    train_images : ndarray of shape (n_train, n_features), uint8 or floating
        uint8 pixels are kept as they are and scaled to [0, 1] when gathered
        (:func:`adcs.sim.model.to_unit_float`); floats are stored as float32 and used unchanged.
    train_labels : ndarray of shape (n_train,), int in [0, n_classes)
    test_images : ndarray of shape (n_test, n_features)
    test_labels : ndarray of shape (n_test,)
    train_indices : tuple of ndarray, length n_clients
        Client n's training rows (non-empty).
    test_indices : tuple of ndarray, length n_clients
        Client n's test rows (non-empty).
    groups : ndarray of shape (n_clients,), int in [0, n_groups)
    n_groups : int
    n_classes : int
    """

    train_images: NDArray[Any]
    train_labels: NDArray[np.integer[Any]]
    test_images: NDArray[Any]
    test_labels: NDArray[np.integer[Any]]
    train_indices: tuple[IntArray, ...]
    test_indices: tuple[IntArray, ...]
    groups: IntArray
    n_groups: int
    n_classes: int = 10
    _train_concat: IntArray = field(init=False, repr=False)
    _train_offsets: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _positive_int("n_classes", self.n_classes, minimum=2)
        _positive_int("n_groups", self.n_groups)
        train_x = _images("train_images", self.train_images)
        test_x = _images("test_images", self.test_images)
        if train_x.shape[1] != test_x.shape[1]:
            raise ValueError(
                f"train_images has {train_x.shape[1]} features but test_images {test_x.shape[1]}"
            )
        n_train, n_test = train_x.shape[0], test_x.shape[0]
        train_idx = _client_index_arrays("train_indices", self.train_indices, n_train)
        test_idx = _client_index_arrays("test_indices", self.test_indices, n_test)
        if len(train_idx) == 0 or len(train_idx) != len(test_idx):
            raise ValueError(
                f"train_indices ({len(train_idx)} clients) and test_indices ({len(test_idx)}) "
                "must name the same, non-zero number of clients"
            )
        groups = np.asarray(self.groups)
        if groups.shape != (len(train_idx),) or not np.issubdtype(groups.dtype, np.integer):
            raise ValueError(f"groups must be an integer array of shape ({len(train_idx)},)")
        if groups.min() < 0 or groups.max() >= self.n_groups:
            raise ValueError(f"groups must lie in [0, n_groups={self.n_groups})")
        sizes = np.array([idx.size for idx in train_idx], dtype=np.intp)
        for name, value in (
            ("train_images", train_x),
            ("test_images", test_x),
            ("train_labels", _labels("train_labels", self.train_labels, n_train, self.n_classes)),
            ("test_labels", _labels("test_labels", self.test_labels, n_test, self.n_classes)),
            ("train_indices", train_idx),
            ("test_indices", test_idx),
            ("groups", _readonly(groups.astype(np.intp))),
            ("n_groups", int(self.n_groups)),
            ("n_classes", int(self.n_classes)),
            ("_train_concat", _readonly(np.concatenate(train_idx))),
            ("_train_offsets", _readonly(np.concatenate([[0], np.cumsum(sizes)[:-1]]))),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def from_partition(
        cls, dataset: FashionMNIST, partition: Partition, n_classes: int = 10
    ) -> FederatedData:
        """Build from :class:`adcs.data.FashionMNIST` and :class:`adcs.data.Partition`.

        Parameters
        ----------
        dataset : FashionMNIST
            ``train_images``/``test_images`` (n, 784) uint8, ``train_labels``/``test_labels``.
        partition : Partition
            ``train_indices``, ``test_indices``, ``groups``, ``n_groups``.
        n_classes : int
        """
        return cls(
            train_images=dataset.train_images,
            train_labels=dataset.train_labels,
            test_images=dataset.test_images,
            test_labels=dataset.test_labels,
            train_indices=tuple(partition.train_indices),
            test_indices=tuple(partition.test_indices),
            groups=partition.groups,
            n_groups=partition.n_groups,
            n_classes=n_classes,
        )

    @property
    def n_clients(self) -> int:
        """Number of clients N."""
        return len(self.train_indices)

    @property
    def n_features(self) -> int:
        return int(self.train_images.shape[1])

    @property
    def data_sizes(self) -> IntArray:
        """ndarray of shape (n_clients,): number of training samples of each client."""
        return np.array([idx.size for idx in self.train_indices], dtype=np.intp)

    @property
    def test_sizes(self) -> IntArray:
        """ndarray of shape (n_clients,): number of test samples of each client."""
        return np.array([idx.size for idx in self.test_indices], dtype=np.intp)

    def train_rows(self, client_rows: IntArray) -> IntArray:
        """Map local indices to training rows: ``client_rows`` (..., n_clients, k) local → global."""
        return self._train_concat[client_rows + self._train_offsets[:, None]]

    def gather_train(
        self, rows: IntArray, out: F32Array | None = None, scratch: NDArray[Any] | None = None
    ) -> F32Array:
        """Model inputs of training rows, shape (*rows.shape, n_features), float32.

        ``out`` receives the result and ``scratch`` (same shape, the images' dtype) the raw rows,
        so a caller can gather every round without allocating.
        """
        images = np.take(self.train_images, rows, axis=0, out=scratch)
        return to_unit_float(images, out=out)


@dataclass(frozen=True)
class RunSpec:
    """One run: a scheduler, a seed and an identity.

    Parameters
    ----------
    scheduler : Scheduler
        Any object following :class:`adcs.schedulers.Scheduler`.
    seed : int
        ≥ 0. Seeds the run's minibatch stream (shared by all runs of this seed when
        ``SimConfig.common_minibatches``) and, with ``run_id``, its scheduler's stream.
    run_id : str
        Non-empty, unique within a :func:`simulate` call, e.g. ``"adcs-theta0.8-R20/seed3"``.
    meta : mapping
        Free-form labels (method, theta, refresh_every, …), carried into the result.
    """

    scheduler: Scheduler
    seed: int
    run_id: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.scheduler, Scheduler):
            raise ValueError(
                f"scheduler must follow the Scheduler protocol, got {type(self.scheduler).__name__}"
            )
        _positive_int("seed", self.seed, minimum=0)
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"run_id must be a non-empty string, got {self.run_id!r}")
        object.__setattr__(self, "meta", dict(self.meta))  # a copy: later edits do not leak in


@dataclass(frozen=True, eq=False)
class RunResult:
    """What one run produced.

    Attributes
    ----------
    spec : RunSpec
    eval_rounds : ndarray of shape (n_evals,), int
        Number of rounds trained before each evaluation (0, eval_every, …, T).
    worst_acc, avg_acc : ndarray of shape (n_evals,)
        Min and mean over clients of the per-client test accuracy (paper Fig. 1).
    test_loss : ndarray of shape (n_evals,)
        Mean cross-entropy over the union of the clients' test sets.
    client_acc : ndarray of shape (n_evals, n_clients)
        Accuracy of the global model on each client's own test set.
    selected : ndarray of shape (rounds, m), int16 or int32
        Clients selected in each round, in the scheduler's order.
    client_updates : int
        Local updates computed (probed ∪ selected per round; a probed update reused for aggregation
        counts once).
    loss_evals : int
        Losses evaluated apart from an update (loss probes).
    wall_s : float
        This run's share of the batch's wall time (batch time / number of runs).
    group_share : ndarray of shape (n_groups,)
        Share of selection slots per group (Table 1).
    tv_to_uniform : float
        TV distance of ``group_share`` to what uniform selection gives in expectation.
    final_params : ndarray of shape (*param_shape), float32
        w⁽ᵀ⁾.
    """

    spec: RunSpec
    eval_rounds: IntArray
    worst_acc: F64Array
    avg_acc: F64Array
    test_loss: F64Array
    client_acc: F64Array
    selected: NDArray[np.integer[Any]]
    client_updates: int
    loss_evals: int
    wall_s: float
    group_share: F64Array
    tv_to_uniform: float
    final_params: F32Array


# --------------------------------------------------------------------------------------------
# random streams and minibatches
# --------------------------------------------------------------------------------------------


def _run_key(run_id: str) -> tuple[int, ...]:
    digest = hashlib.sha256(run_id.encode("utf-8")).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))


_SCHEDULER_DOMAIN = 0
_MINIBATCH_DOMAIN = 1


def scheduler_rng(seed: int, run_id: str) -> np.random.Generator:
    """The scheduler's generator of run ``(seed, run_id)`` (independent of every other run)."""
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=(_SCHEDULER_DOMAIN, *_run_key(run_id)))
    )


def minibatch_seed_sequence(seed: int, run_id: str | None = None) -> np.random.SeedSequence:
    """Seed of a minibatch stream: of ``seed`` alone (shared), or of ``(seed, run_id)``."""
    key = () if run_id is None else _run_key(run_id)
    return np.random.SeedSequence(seed, spawn_key=(_MINIBATCH_DOMAIN, *key))


def _has_duplicates(rows: NDArray[np.int64]) -> BoolArray:
    ordered = np.sort(rows, axis=-1)
    return np.asarray((ordered[..., 1:] == ordered[..., :-1]).any(axis=-1))


def draw_local_indices(
    rng: np.random.Generator, sizes: IntArray, n_rounds: int, per_round: int
) -> NDArray[np.int64]:
    """Each client's local sample indices for ``n_rounds`` rounds.

    Every (round, client) gets ``per_round`` = E·B indices into the client's own data, uniformly at
    random and distinct — the first E minibatches of a fresh shuffle, as a client that reshuffles its
    data each round would use. A client with fewer than ``per_round`` samples gets whole shuffles
    back to back.

    Parameters
    ----------
    rng : numpy.random.Generator
    sizes : ndarray of shape (n_clients,), int ≥ 1
    n_rounds, per_round : int

    Returns
    -------
    ndarray of shape (n_rounds, n_clients, per_round), int64
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    span = sizes[:, None]
    idx = np.minimum(
        (rng.random((n_rounds, sizes.size, per_round)) * span).astype(np.int64), span - 1
    )
    distinct = sizes >= per_round
    if per_round > 1:
        for _ in range(_MAX_REDRAWS):  # rejection: redraw rows with a repeat (exactly uniform)
            bad = _has_duplicates(idx) & distinct
            if not bad.any():
                break
            rounds, clients = np.nonzero(bad)
            draw = rng.random((rounds.size, per_round)) * sizes[clients, None]
            idx[rounds, clients] = np.minimum(draw.astype(np.int64), sizes[clients, None] - 1)
        else:
            for t, c in zip(*np.nonzero(_has_duplicates(idx) & distinct), strict=True):
                idx[t, c] = rng.choice(sizes[c], size=per_round, replace=False)
    for small in np.flatnonzero(~distinct):
        size = int(sizes[small])
        keys = rng.random((n_rounds, -(-per_round // size), size))
        idx[:, small, :] = keys.argsort(axis=-1).reshape(n_rounds, -1)[:, :per_round]
    return idx


class MinibatchSampler:
    """The clients' minibatch rows of one stream, round by round.

    Rows are drawn :data:`ROUNDS_PER_BLOCK` rounds at a time for every client, whatever T is and
    whoever is selected, so a stream's round-t minibatches depend only on its seed sequence.

    Parameters
    ----------
    data : FederatedData
    per_round : int
        E·B rows per client per round.
    seed_sequence : numpy.random.SeedSequence
    """

    def __init__(
        self, data: FederatedData, per_round: int, seed_sequence: np.random.SeedSequence
    ) -> None:
        self._data = data
        self._sizes = data.data_sizes
        self._per_round = per_round
        self._rng = np.random.default_rng(seed_sequence)
        self._block = -1
        self._rows: IntArray = np.empty((0, data.n_clients, per_round), dtype=np.intp)

    def rows(self, round_idx: int) -> IntArray:
        """Training rows of every client at round ``round_idx``, shape (n_clients, E·B).

        Rounds must be asked for in non-decreasing order.
        """
        block = round_idx // ROUNDS_PER_BLOCK
        if block < self._block:
            raise ValueError(f"round {round_idx} was asked for after a later block")
        while self._block < block:
            local = draw_local_indices(self._rng, self._sizes, ROUNDS_PER_BLOCK, self._per_round)
            self._block += 1
            if self._block == block:
                self._rows = self._data.train_rows(local)
        return self._rows[round_idx % ROUNDS_PER_BLOCK]


# --------------------------------------------------------------------------------------------
# the round loop
# --------------------------------------------------------------------------------------------


def _observes_updates(scheduler: Scheduler) -> bool:
    """Whether ``observe`` uses the updates (they are then computed for every selected client)."""
    # a scheduler that does not say is assumed to need them
    return bool(getattr(scheduler, "observes_updates", True))


@dataclass
class _Run:
    """Mutable bookkeeping of one run inside the loop."""

    spec: RunSpec
    state: Any
    rng: np.random.Generator
    m: int
    observes: bool
    selected: NDArray[np.integer[Any]]
    client_updates: int = 0
    loss_evals: int = 0


@dataclass
class _Probed:
    """What phase 1 gathered for one run in one round."""

    stats: ClientStats
    updates: F32Array | None  # (n_clients, dim), rows of `targets` valid
    targets: IntArray


class _Group:
    """Runs that share a minibatch stream; they advance with shared gathers and matrix products."""

    def __init__(self, runs: list[_Run], sampler: MinibatchSampler, ctx: _Context) -> None:
        self.runs = runs
        self.sampler = sampler
        self.ctx = ctx
        self.params = ctx.model.init_params(len(runs))
        n_rows = ctx.data.n_clients * ctx.config.batch_size
        self._x = np.empty((n_rows, ctx.data.n_features), dtype=np.float32)
        self._raw = np.empty((n_rows, ctx.data.n_features), dtype=ctx.data.train_images.dtype)

    def step(self, t: int) -> None:
        """One round of every run of the group (Algorithm 1, lines 2–14)."""
        ctx = self.ctx
        n, batch = ctx.data.n_clients, ctx.config.batch_size
        rows = self.sampler.rows(t)
        first = rows[:, :batch].reshape(-1)
        x = ctx.data.gather_train(first, out=self._x, scratch=self._raw)
        y = ctx.data.train_labels[first]
        probes = [
            run.spec.scheduler.probe(run.state, t, ctx.available, run.rng) for run in self.runs
        ]
        forward = ctx.model.shared_forward(self.params, x, y)
        client_loss = forward.sample_loss.reshape(len(self.runs), n, batch).mean(axis=2)
        probed = self._gather_probes(probes, forward, client_loss, rows)
        coefs = np.zeros((len(self.runs), n), dtype=np.float32)
        selections: list[IntArray] = []
        for j, run in enumerate(self.runs):
            selection, run.state = run.spec.scheduler.select(run.state, t, probed[j].stats, run.rng)
            clients = ctx.check_selection(run, selection)
            selections.append(clients)
            coefs[j, clients] = ctx.aggregation_coefficients(clients, selection)
            run.selected[t] = clients
            self._count(run, probes[j], probed[j], clients)
        selected_updates = self._aggregate(forward, probed, selections, coefs, rows)
        for j, run in enumerate(self.runs):
            if run.observes:
                clients = selections[j]
                run.state = run.spec.scheduler.observe(
                    run.state, t, clients, selected_updates[j], client_loss[j, clients]
                )

    def _targets(self, probe: Probe) -> IntArray:
        if probe.kind is ProbeKind.NONE:
            return self.ctx.no_clients
        if probe.clients is None and self.ctx.all_available:
            return self.ctx.all_clients
        return probe.targets(self.ctx.available)

    def _gather_probes(
        self, probes: list[Probe], forward: SharedForward, client_loss: F32Array, rows: IntArray
    ) -> list[_Probed]:
        """ClientStats of every run: what its probe asked for, at the current model (step 2)."""
        ctx = self.ctx
        targets = [self._targets(probe) for probe in probes]
        wants = [j for j, p in enumerate(probes) if p.kind is ProbeKind.UPDATES and targets[j].size]
        updates = self._updates(forward, wants, [targets[j] for j in wants], rows)
        out = []
        for j, probe in enumerate(probes):
            if probe.kind is ProbeKind.NONE or targets[j].size == 0:
                out.append(_Probed(ctx.blind, None, targets[j]))
                continue
            mask = np.zeros(ctx.data.n_clients, dtype=bool)
            mask[targets[j]] = True
            losses = np.full(ctx.data.n_clients, np.nan)
            if probe.kind is ProbeKind.LOSSES and probe.loss_source is LossSource.FULL:
                losses[targets[j]] = ctx.full_losses(self.params[j], targets[j])
            else:
                losses[targets[j]] = client_loss[j, targets[j]]
            upd = updates.get(j)
            stats = ClientStats(available=ctx.available, probed=mask, losses=losses, updates=upd)
            out.append(_Probed(stats, upd, targets[j]))
        return out

    def _updates(
        self, forward: SharedForward, runs: list[int], targets: list[IntArray], rows: IntArray
    ) -> dict[int, F32Array]:
        """Local updates Δ_n of the target clients of each listed run, as (n_clients, dim) arrays.

        Rows of clients that are not targets are NaN.
        """
        if not runs:
            return {}
        ctx = self.ctx
        n, dim = ctx.data.n_clients, ctx.model.dim
        # a fresh array each round: a scheduler may keep stats.updates (or a view of it)
        buffer = np.empty((len(runs), n, *ctx.model.param_shape), dtype=np.float32)
        if ctx.config.local_steps == 1:
            ctx.model.group_grads(
                forward, runs, ctx.config.batch_size, scale=-ctx.config.local_lr, out=buffer
            )
            full = buffer.reshape(len(runs), n, dim)
        else:
            full = buffer.reshape(len(runs), n, dim)
            full.fill(np.nan)
            jobs_run = np.concatenate([np.full(tg.size, j) for j, tg in enumerate(targets)])
            jobs_client = np.concatenate(targets)
            delta = self._local_updates(np.asarray(runs)[jobs_run], jobs_client, rows)
            full[jobs_run, jobs_client] = delta.reshape(jobs_client.size, dim)
        result = {}
        for j, run in enumerate(runs):
            if targets[j].size < n:
                keep = np.zeros(n, dtype=bool)
                keep[targets[j]] = True
                full[j, ~keep] = np.nan
            result[run] = full[j]
        return result

    def _local_updates(self, run_index: IntArray, clients: IntArray, rows: IntArray) -> F32Array:
        """E local SGD steps for (run, client) jobs, shape (n_jobs, *param_shape)."""
        ctx = self.ctx
        cfg = ctx.config
        job_rows = rows[clients].reshape(clients.size, cfg.local_steps, cfg.batch_size)
        x = ctx.data.gather_train(job_rows)
        y = ctx.data.train_labels[job_rows]
        delta, _ = local_update(ctx.model, self.params[run_index], x, y, cfg.local_lr)
        return delta

    def _aggregate(
        self,
        forward: SharedForward,
        probed: list[_Probed],
        selections: list[IntArray],
        coefs: F32Array,
        rows: IntArray,
    ) -> dict[int, F32Array]:
        """w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_n coef_n Δ_n for every run (step 4).

        Returns the selected clients' updates (m, dim) of the runs whose scheduler observes them.
        """
        ctx = self.ctx
        cfg = ctx.config
        n, batch, dim = ctx.data.n_clients, cfg.batch_size, ctx.model.dim
        step = np.empty((len(self.runs), dim), dtype=np.float32)
        observed: dict[int, F32Array] = {}
        missing: list[int] = []
        for j, run in enumerate(self.runs):
            upd, targets = probed[j].updates, probed[j].targets
            if upd is not None and (targets.size == n or np.isin(selections[j], targets).all()):
                np.matmul(coefs[j], upd, out=step[j])  # reuse the probed updates
                if run.observes:
                    observed[j] = upd[selections[j]]
            else:
                missing.append(j)
        if missing and cfg.local_steps == 1:
            lr = np.float32(cfg.local_lr)
            sample_weights = np.repeat(coefs[missing] * (-lr / batch), batch, axis=1)
            step[missing] = ctx.model.weighted_grads(forward, missing, sample_weights).reshape(
                len(missing), dim
            )
            observing = [j for j in missing if self.runs[j].observes]
            if observing:
                own = ctx.model.group_grads(forward, observing, batch, scale=-cfg.local_lr)
                for i, j in enumerate(observing):
                    observed[j] = own[i].reshape(n, dim)[selections[j]]
        elif missing:
            jobs_run = np.concatenate([np.full(selections[j].size, j) for j in missing])
            jobs_client = np.concatenate([selections[j] for j in missing])
            delta = self._local_updates(jobs_run, jobs_client, rows).reshape(-1, dim)
            start = 0
            for j in missing:
                m = selections[j].size
                observed[j] = delta[start : start + m]
                np.matmul(coefs[j, selections[j]], observed[j], out=step[j])
                start += m
        step *= np.float32(cfg.server_lr)
        self.params += step.reshape(self.params.shape)
        return observed

    def _count(self, run: _Run, probe: Probe, probed: _Probed, clients: IntArray) -> None:
        """Client computations of the round (step 5): probed ∪ selected updates, loss probes."""
        if probe.kind is ProbeKind.UPDATES:
            n = self.ctx.data.n_clients
            covered = n if probed.targets.size == n else np.union1d(probed.targets, clients).size
            run.client_updates += int(covered)
        else:
            run.client_updates += int(clients.size)
            if probe.kind is ProbeKind.LOSSES:
                run.loss_evals += int(probed.targets.size)


class _Context:
    """What every group of one :func:`simulate` call shares (read-only during the loop)."""

    def __init__(self, data: FederatedData, config: SimConfig, model: Model) -> None:
        self.data = data
        self.config = config
        self.model = model
        n = data.n_clients
        self.available = _readonly(np.ones(n, dtype=bool))
        self.all_available = True
        self.all_clients = _readonly(np.arange(n, dtype=np.intp))
        self.no_clients = _readonly(np.empty(0, dtype=np.intp))
        self.blind = ClientStats(self.available, _readonly(np.zeros(n, dtype=bool)))
        sizes = data.data_sizes.astype(np.float64)
        self.p = sizes if config.weighting == "data_size" else np.ones(n)

    def check_selection(self, run: _Run, selection: Selection) -> IntArray:
        """The selected clients as an index array, after checking the scheduler kept its contract."""
        clients = np.asarray(selection.clients)
        n = self.data.n_clients
        ok = clients.shape == (run.m,) and clients.dtype.kind in "iu"
        if ok:
            try:  # bincount rejects negative indices; a count above 1 is a repeat
                counts = np.bincount(clients, minlength=n)
            except ValueError:
                ok = False
            else:
                ok = counts.size == n and counts.max() <= 1
                if ok and not self.all_available:
                    ok = not counts[~self.available].any()
        if not ok:
            raise RuntimeError(
                f"run {run.spec.run_id!r}: the scheduler must select {run.m} distinct available "
                f"clients in [0, {n}), got {selection.clients!r}"
            )
        return clients.astype(np.intp, copy=False)

    def aggregation_coefficients(self, clients: IntArray, selection: Selection) -> F32Array:
        """p_n / Σ_S p for the selected clients, or the scheduler's own weights, shape (m,)."""
        if selection.weights is not None:
            weights = np.asarray(selection.weights, dtype=np.float64)
            if weights.shape != clients.shape or not np.isfinite(weights).all():
                raise RuntimeError(f"selection weights must be {clients.size} finite numbers")
            return weights.astype(np.float32)
        if self.config.weighting == "uniform":
            return np.full(clients.size, 1.0 / clients.size, dtype=np.float32)
        p = self.p[clients]
        total = p.sum()
        coef = p / total if total > 0 else np.full(clients.size, 1.0 / clients.size)
        return coef.astype(np.float32)

    def full_losses(self, params: F32Array, clients: IntArray) -> F64Array:
        """Mean loss of each listed client over its whole training set at ``params``."""
        data = self.data
        rows = np.concatenate([data.train_indices[c] for c in clients])
        owner = np.repeat(np.arange(clients.size), [data.train_indices[c].size for c in clients])
        total = np.zeros(clients.size)
        for start in range(0, rows.size, _FULL_LOSS_ROWS):
            part = rows[start : start + _FULL_LOSS_ROWS]
            loss, _ = self.model.evaluate(
                params[None], data.gather_train(part), data.train_labels[part]
            )
            total += np.bincount(
                owner[start : start + _FULL_LOSS_ROWS], weights=loss[0], minlength=clients.size
            )
        return total / np.bincount(owner, minlength=clients.size)


class _Evaluator:
    """Per-client test accuracy and global test loss of many runs (one product per 32 runs)."""

    def __init__(self, data: FederatedData, model: Model) -> None:
        union = np.unique(np.concatenate(data.test_indices))
        self.x = to_unit_float(np.take(data.test_images, union, axis=0))
        self.y = data.test_labels[union]
        member = np.zeros((union.size, data.n_clients), dtype=np.float32)
        for c, idx in enumerate(data.test_indices):
            np.add.at(member[:, c], np.searchsorted(union, idx), 1.0)
        self.member = member
        self.sizes = data.test_sizes.astype(np.float64)
        self.model = model

    def __call__(self, params: F32Array) -> tuple[F64Array, F64Array]:
        """Client accuracies (R, n_clients) and test losses (R,) of R models."""
        n_runs = params.shape[0]
        acc = np.empty((n_runs, self.member.shape[1]))
        loss = np.empty(n_runs)
        for start in range(0, n_runs, _EVAL_RUNS_PER_PRODUCT):
            chunk = slice(start, start + _EVAL_RUNS_PER_PRODUCT)
            sample_loss, correct = self.model.evaluate(params[chunk], self.x, self.y)
            acc[chunk] = (correct.astype(np.float32) @ self.member) / self.sizes
            loss[chunk] = sample_loss.mean(axis=1, dtype=np.float64)
        return acc, loss


class _Shard:
    """The groups one worker advances, with their evaluations."""

    def __init__(self, groups: list[_Group], evaluator: _Evaluator, n_evals: int) -> None:
        self.groups = groups
        self.evaluator = evaluator
        n_runs = sum(len(g.runs) for g in groups)
        n_clients = evaluator.member.shape[1]
        self.client_acc = np.empty((n_runs, n_evals, n_clients))
        self.test_loss = np.empty((n_runs, n_evals))
        self.rounds_done = 0

    def export(self) -> tuple[Any, ...]:
        """What a forked worker sends back: everything :func:`_collect` reads."""
        groups = [
            (g.params, [(r.state, r.selected, r.client_updates, r.loss_evals) for r in g.runs])
            for g in self.groups
        ]
        return self.client_acc, self.test_loss, self.rounds_done, groups

    def absorb(self, outcome: tuple[Any, ...]) -> None:
        """Take back the results of :meth:`export` from a forked worker."""
        self.client_acc, self.test_loss, self.rounds_done, groups = outcome
        for group, (params, runs) in zip(self.groups, groups, strict=True):
            group.params = params
            for run, (state, selected, updates, evals) in zip(group.runs, runs, strict=True):
                run.state, run.selected = state, selected
                run.client_updates, run.loss_evals = updates, evals

    def evaluate(self, k: int) -> None:
        params = np.concatenate([g.params for g in self.groups])
        acc, loss = self.evaluator(params)
        self.client_acc[:, k] = acc
        self.test_loss[:, k] = loss

    def run(self, config: SimConfig, report: Callable[[], None], stop: threading.Event) -> None:
        eval_at = config.eval_rounds
        next_eval = 0
        for t in range(config.rounds):
            if stop.is_set():  # another worker failed
                return
            if t == eval_at[next_eval]:
                self.evaluate(next_eval)
                next_eval += 1
            for group in self.groups:
                group.step(t)
            self.rounds_done = t + 1
            if self.rounds_done % _PROGRESS_EVERY == 0:
                report()
        self.evaluate(next_eval)
        report()


def _selected_dtype(n_clients: int) -> type[np.integer[Any]]:
    return np.int16 if n_clients <= np.iinfo(np.int16).max else np.int32


def _check_runs(runs: Sequence[RunSpec], data: FederatedData) -> None:
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
        if not _is_int(m) or not 1 <= m <= data.n_clients:
            raise ValueError(
                f"run {spec.run_id!r}: scheduler.m must be in [1, {data.n_clients}], got {m!r}"
            )


def _build_groups(runs: Sequence[RunSpec], ctx: _Context) -> tuple[list[_Group], list[list[int]]]:
    cfg, data = ctx.config, ctx.data
    sizes = data.data_sizes.astype(np.float64)
    keyed: dict[tuple[int, str | None], list[int]] = {}
    for i, spec in enumerate(runs):
        key = (spec.seed, None if cfg.common_minibatches else spec.run_id)
        keyed.setdefault(key, []).append(i)
    groups, members = [], []
    for (seed, run_id), idx in keyed.items():
        group_runs = []
        for i in idx:
            spec = runs[i]
            scheduler = spec.scheduler
            group_runs.append(
                _Run(
                    spec=spec,
                    state=scheduler.init(data.n_clients, sizes.copy()),
                    rng=scheduler_rng(spec.seed, spec.run_id),
                    m=int(scheduler.m),
                    observes=_observes_updates(scheduler),
                    selected=np.empty((cfg.rounds, scheduler.m), _selected_dtype(data.n_clients)),
                )
            )
        per_round = cfg.local_steps * cfg.batch_size
        sampler = MinibatchSampler(data, per_round, minibatch_seed_sequence(seed, run_id))
        groups.append(_Group(group_runs, sampler, ctx))
        members.append(idx)
    return groups, members


def _run_shards(
    shards: list[_Shard], config: SimConfig, progress: Callable[[int], None] | None
) -> None:
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
        shards[0].run(config, report, stop)
        return
    if _can_fork():
        _run_shards_in_processes(shards, config, report)
        return
    errors: list[BaseException] = []

    def work(shard: _Shard) -> None:
        try:
            shard.run(config, report, stop)
        except BaseException as exc:  # re-raised in the calling thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in shards]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _can_fork() -> bool:
    # Forked workers share the data copy-on-write and run truly in parallel (the round loop is
    # Python and holds the GIL between matrix products). Elsewhere, threads.
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


_FORKED: tuple[list[_Shard], SimConfig, Any] | None = None
"""What a forked worker inherits: the shards, the config and the shared round counters."""


def _forked_worker(index: int) -> tuple[Any, ...]:
    assert _FORKED is not None
    shards, config, counters = _FORKED
    shard = shards[index]

    def report() -> None:
        counters[index] = shard.rounds_done

    shard.run(config, report, threading.Event())
    return shard.export()


def _run_shards_in_processes(
    shards: list[_Shard], config: SimConfig, report: Callable[[], None]
) -> None:
    """Advance each shard in its own forked process and take its results back."""
    global _FORKED
    ctx = multiprocessing.get_context("fork")
    counters = ctx.Array("q", len(shards), lock=False)
    _FORKED = (shards, config, counters)
    try:
        with ProcessPoolExecutor(len(shards), mp_context=ctx) as pool:
            futures = [pool.submit(_forked_worker, i) for i in range(len(shards))]
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
                for shard, count in zip(shards, counters, strict=True):
                    shard.rounds_done = int(count)
                report()
                if any(f.exception() is not None for f in done):
                    for f in pending:
                        f.cancel()
                    break
            outcomes = [f.result() for f in futures]  # re-raises a worker's exception
    finally:
        _FORKED = None
    for shard, outcome in zip(shards, outcomes, strict=True):
        shard.absorb(outcome)
    report()


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """One BLAS thread for the duration of a call (restored afterwards).

    The simulator's matrix products are small (480 × 784 × 60 per group and round): a
    multi-threaded BLAS spends more on synchronising than it gains, and on a busy machine its
    spinning threads make a run several times slower. Parallelism comes from ``workers`` instead.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logger.debug("threadpoolctl is not installed; BLAS keeps its own thread count")
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def simulate(
    runs: Sequence[RunSpec],
    data: FederatedData,
    config: SimConfig,
    progress: Callable[[int], None] | None = None,
    *,
    model: Model | None = None,
    workers: int = 1,
) -> list[RunResult]:
    """Run many independent federated trainings together (Algorithm 1 for every scheduler).

    Parameters
    ----------
    runs : sequence of RunSpec
        The runs (distinct ``run_id``); each gets its own model, scheduler state and streams.
    data : FederatedData
    config : SimConfig
    progress : callable, optional
        Called with the number of rounds every run has completed, every 50 rounds and at the end
        (from a worker thread when ``workers > 1``, never concurrently).
    model : Model, optional
        Default :class:`LogisticRegression` sized for ``data`` (the paper's model).
    workers : int
        Workers that advance disjoint sets of minibatch groups in parallel — forked processes on
        Linux, threads elsewhere (≥ 1; more than the
        number of minibatch groups — seeds, with ``common_minibatches`` — brings nothing). Results
        do not depend on it. BLAS is kept to one thread during the call when ``threadpoolctl`` is
        installed (without it, set ``OPENBLAS_NUM_THREADS=1`` for best speed).

    Returns
    -------
    list of RunResult
        In the order of ``runs``.
    """
    _positive_int("workers", workers)
    _check_runs(runs, data)
    model = model or LogisticRegression(data.n_features, data.n_classes)
    if model.param_shape[0] != data.n_features + 1:
        raise ValueError(
            f"model expects {model.param_shape[0] - 1} features, data has {data.n_features}"
        )
    ctx = _Context(data, config, model)
    groups, members = _build_groups(runs, ctx)
    evaluator = _Evaluator(data, model)
    n_evals = config.eval_rounds.size
    n_shards = min(workers, len(groups))
    assignment = [list(range(s, len(groups), n_shards)) for s in range(n_shards)]
    shards = [_Shard([groups[g] for g in gs], evaluator, n_evals) for gs in assignment]
    logger.info(
        "simulating %d runs in %d minibatch groups, %d rounds, %d worker(s)",
        len(runs),
        len(groups),
        config.rounds,
        n_shards,
    )
    start = time.perf_counter()
    with _single_threaded_blas():
        _run_shards(shards, config, progress)
    wall = time.perf_counter() - start
    logger.info("simulated %d runs x %d rounds in %.1f s", len(runs), config.rounds, wall)
    return _collect(runs, data, config, groups, members, shards, assignment, wall)


def _collect(
    runs: Sequence[RunSpec],
    data: FederatedData,
    config: SimConfig,
    groups: list[_Group],
    members: list[list[int]],
    shards: list[_Shard],
    assignment: list[list[int]],
    wall: float,
) -> list[RunResult]:
    results: list[RunResult | None] = [None] * len(runs)
    target = uniform_group_share(data.groups, data.n_groups)
    eval_rounds = _readonly(config.eval_rounds)
    for shard, group_ids in zip(shards, assignment, strict=True):
        row = 0
        for g in group_ids:
            group = groups[g]
            for j, (run, spec_index) in enumerate(zip(group.runs, members[g], strict=True)):
                client_acc = shard.client_acc[row]
                worst, avg = worst_and_average(client_acc)
                share = group_share(run.selected, data.groups, data.n_groups)
                results[spec_index] = RunResult(
                    spec=run.spec,
                    eval_rounds=eval_rounds,
                    worst_acc=worst,
                    avg_acc=avg,
                    test_loss=shard.test_loss[row].copy(),
                    client_acc=client_acc.copy(),
                    selected=run.selected,
                    client_updates=run.client_updates,
                    loss_evals=run.loss_evals,
                    wall_s=wall / len(runs),
                    group_share=share,
                    tv_to_uniform=tv_distance(share, target),
                    final_params=group.params[j].copy(),
                )
                row += 1
    return [r for r in results if r is not None]
