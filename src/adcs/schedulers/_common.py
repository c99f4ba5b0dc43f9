"""Pieces shared by the scheduler implementations (not part of the public API)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from adcs.dpp import greedy_map
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
    check_positive_int,
)


@dataclass(frozen=True, eq=False)
class BasicState:
    """Per-run state of a scheduler that remembers nothing between rounds.

    Attributes
    ----------
    n_clients : int
    data_sizes : ndarray of shape (n_clients,) or None
    """

    n_clients: int
    data_sizes: FloatArray | None = None


StateT = TypeVar("StateT", bound=BasicState)


@dataclass(frozen=True)
class SchedulerBase(Generic[StateT]):
    """Hyperparameter ``m`` (clients per round), its validation, and no-op protocol defaults."""

    m: int

    def __post_init__(self) -> None:
        check_positive_int("m", self.m)

    @property
    def observes_updates(self) -> bool:
        """``observe`` ignores the updates unless a subclass says otherwise."""
        return False

    def _check_init(self, n_clients: int, data_sizes: FloatArray | None) -> FloatArray | None:
        check_positive_int("n_clients", n_clients)
        if n_clients < self.m:
            raise ValueError(f"n_clients={n_clients} is smaller than m={self.m}")
        if data_sizes is None:
            return None
        sizes = np.asarray(data_sizes, dtype=np.float64)
        if sizes.shape != (n_clients,) or not np.isfinite(sizes).all() or (sizes < 0).any():
            raise ValueError(f"data_sizes must be {n_clients} finite non-negative numbers")
        return sizes

    def probe(
        self, state: StateT, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return NO_PROBE

    def observe(
        self,
        state: StateT,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> StateT:
        return state


UPDATES_OF_ALL = Probe(ProbeKind.UPDATES)
KERNEL_RTOL = 1e-5
"""Residual (squared sine of the angle to the span of the clients already chosen) below which a
client's update direction counts as dependent; float32 Gram matrices are accurate to about 1e-6."""


def probed_updates(stats: ClientStats) -> tuple[FloatArray, BoolArray]:
    """The updates matrix (n_clients, dim) and which rows are usable (available, probed, finite)."""
    if stats.updates is None:
        raise ValueError("this scheduler needs probed client updates but stats.updates is None")
    updates = np.asarray(stats.updates)
    if updates.ndim != 2 or updates.shape[0] != stats.n_clients:
        raise ValueError(
            f"stats.updates must have shape ({stats.n_clients}, dim), got {updates.shape}"
        )
    return updates, stats.usable()


def fill_from(order: IntArray, available: BoolArray, m: int) -> IntArray:
    """First ``m`` available entries of ``order``, topped up with other available clients by index.

    Clients without usable statistics (not probed, NaN) are never preferred, but they keep a
    selection at exactly ``m`` when too few clients have statistics.
    """
    picked = [int(i) for i in order if available[i]][:m]
    if len(picked) < m:
        taken = set(picked)
        picked += [int(i) for i in np.flatnonzero(available) if i not in taken][: m - len(picked)]
    return np.asarray(picked, dtype=np.intp)


def gram_matrix(updates: FloatArray, usable: BoolArray) -> FloatArray:
    """G = U Uᵀ of the usable updates, returned in float64, shape (n_clients, n_clients).

    The product runs in the updates' own precision (float32 updates: float32, no copy). Rows and
    columns of unusable clients (not probed, non-finite) are zero, so they carry no direction; a
    non-finite update only spoils its own row and column. Every kernel a scheduler needs (C of
    eq. 5, norms, distances) follows from G, computed once per probe.
    """
    u = np.asarray(updates)
    if u.dtype not in (np.float32, np.float64):
        u = u.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        gram = (u @ u.T).astype(np.float64)
    gram[~usable] = 0.0
    gram[:, ~usable] = 0.0
    return gram


def unit_gram(gram: FloatArray) -> FloatArray:
    """C_ij = G_ij / (‖g_i‖‖g_j‖) = φ_iᵀφ_j (eq. 5); rows of zero updates stay zero."""
    norms = np.sqrt(np.maximum(np.diag(gram), 0.0))
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    c = gram * inv[:, None] * inv[None, :]
    np.fill_diagonal(c, (norms > 0).astype(np.float64))
    return c


def map_subset(
    kernel: FloatArray, log_weights: FloatArray, eligible: BoolArray, m: int
) -> IntArray:
    """Greedy MAP over the eligible clients of ``kernel`` (shape (n, n)), as global indices.

    Returns all eligible clients (in greedy order) when fewer than ``m`` are eligible.
    """
    idx = np.flatnonzero(eligible)
    k = min(m, idx.size)
    if k == 0:
        return np.empty(0, dtype=np.intp)
    sub = kernel[np.ix_(idx, idx)]
    return idx[greedy_map(sub, k, log_weights[idx], rtol=KERNEL_RTOL)].astype(np.intp)
