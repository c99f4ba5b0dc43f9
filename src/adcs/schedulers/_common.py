"""Pieces shared by the scheduler implementations (not part of the public API)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from adcs.dpp import greedy_map_features
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


def map_subset(
    features: FloatArray, log_weights: FloatArray, eligible: BoolArray, m: int
) -> IntArray:
    """Greedy MAP over the eligible rows, as global indices (all of them if fewer than ``m``)."""
    idx = np.flatnonzero(eligible)
    k = min(m, idx.size)
    if k == 0:
        return np.empty(0, dtype=np.intp)
    return idx[greedy_map_features(features[idx], k, log_weights[idx])].astype(np.intp)


def unit_rows(updates: FloatArray, usable: BoolArray) -> FloatArray:
    """φ_n = g_n / ‖g_n‖ (eq. 5) in float64; zero rows stay zero, unusable rows become zero."""
    phi = np.where(usable[:, None], updates, 0.0).astype(np.float64)
    norms = np.linalg.norm(phi, axis=1)
    np.divide(phi, norms[:, None], out=phi, where=norms[:, None] > 0)
    return phi
