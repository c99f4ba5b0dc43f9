"""DivFL (Balakrishnan et al., 2022): facility location on update dissimilarity.

Greedily choose S to minimise Σ_{k∈[N]} min_{j∈S} D_kj with D_kj = ‖g_k − g_j‖: the first pick is the
client with the smallest Σ_k D_kj, each next pick the largest reduction (ties to the lowest index).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from adcs._validate import check_number
from adcs.dpp import gram_matrix, power_of_two_scale
from adcs.schedulers._common import (
    UPDATES_OF_ALL,
    BasicState,
    SchedulerBase,
    fill_from,
    probed_updates,
)
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    Selection,
    check_available,
)


def pairwise_distances(updates: FloatArray) -> FloatArray:
    """D_kj = ‖g_k − g_j‖ for updates of shape (n, dim); returns shape (n, n)."""
    return distances_from_gram(gram_matrix(np.asarray(updates, dtype=np.float64)))


def distances_from_gram(gram: FloatArray) -> FloatArray:
    """D_kj = sqrt(G_kk + G_jj − 2 G_kj) from the Gram matrix G of shape (n, n)."""
    sq = np.diag(gram)
    d2 = sq[:, None] + sq[None, :] - 2.0 * gram
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(np.maximum(d2, 0.0))


def facility_location_greedy(
    dist: FloatArray,
    m: int,
    candidates: BoolArray,
    rng: np.random.Generator | None = None,
    sample_size: int | None = None,
) -> IntArray:
    """Greedy minimisation of Σ_k min_{j∈S} dist[k, j] over S ⊆ candidates, |S| = m.

    Parameters
    ----------
    dist : ndarray of shape (n, n)
        Dissimilarities; rows are the clients to cover, columns the candidate facilities.
    m : int
        Number of picks (at most the number of candidates).
    candidates : ndarray of bool, shape (n,)
        Columns that may be picked.
    rng, sample_size : optional
        Stochastic greedy (Mirzasoleiman et al. 2015): each step evaluates only ``sample_size``
        candidates drawn at random.

    Returns
    -------
    ndarray of shape (m,)
        Picks in order.
    """
    dist = np.ascontiguousarray(dist, dtype=np.float64)
    cover = np.full(dist.shape[0], np.inf)
    blocked = ~np.asarray(candidates, dtype=bool)
    picks: list[int] = []
    buffer = np.empty_like(dist)
    cost = dist.sum(axis=0)  # nothing covered yet: the cost of a lone facility
    for step in range(m):
        if step:  # buffers reused: a step is a handful of passes over n × n numbers
            np.minimum(cover[:, None], dist, out=buffer)
            buffer.sum(axis=0, out=cost)
        if sample_size is not None and rng is not None:
            pool = np.flatnonzero(~blocked)
            if pool.size > sample_size:
                unsampled = np.ones_like(blocked)
                unsampled[rng.choice(pool, size=sample_size, replace=False)] = False
                cost[unsampled] = np.inf
        cost[blocked] = np.inf
        j = int(cost.argmin())  # argmin takes the first minimum: lowest index
        picks.append(j)
        blocked[j] = True
        np.minimum(cover, dist[:, j], out=cover)
    return np.asarray(picks, dtype=np.intp)


@dataclass(frozen=True, eq=False)
class DivFLState(BasicState):
    """Per-run DivFL state.

    Attributes
    ----------
    n_clients : int
    data_sizes : ndarray of shape (n_clients,) or None
    known : ndarray of shape (n_known,), int, or None
        Stale form only: the clients whose last update is remembered, ascending.
    updates : ndarray of shape (n_known, dim), float32, or None
        Stale form only: the last finite update seen from each of ``known``.
    """

    known: IntArray | None = None
    updates: FloatArray | None = None


@dataclass(frozen=True)
class DivFL(SchedulerBase[DivFLState]):
    """Diverse client selection by facility location on ‖g_k − g_j‖.

    Parameters
    ----------
    m : int
        Clients per round.
    stale : bool
        ``False`` (default, the strongest form): fresh updates of all clients every round.
        ``True``: the original code's form — all clients' updates at round 0, then only the selected
        clients' rows are refreshed (through :meth:`observe`).
    stochastic_epsilon : float or None
        Stochastic greedy: each step evaluates ⌈(N/m)·ln(1/ε)⌉ random candidates. ``None``
        (default) evaluates all.

    Notes
    -----
    Clients without a usable update are not candidates; they are used only to keep the selection
    full. The distances are computed over the clients with updates only (n_probed², not N²).
    """

    stale: bool = False
    stochastic_epsilon: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stochastic_epsilon is not None:
            check_number(
                "stochastic_epsilon",
                self.stochastic_epsilon,
                0.0,
                1.0,
                low_open=True,
                high_open=True,
            )

    @property
    def observes_updates(self) -> bool:
        """The stale form refreshes the selected clients' rows from their updates."""
        return self.stale

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> DivFLState:
        return DivFLState(n_clients, self._check_init(n_clients, data_sizes))

    def probe(
        self, state: DivFLState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        if self.stale and state.known is not None:
            return NO_PROBE
        return UPDATES_OF_ALL

    def select(
        self, state: DivFLState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, DivFLState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if self.stale and state.known is not None and state.updates is not None:
            clients, updates = state.known, state.updates
        else:
            probed, usable = probed_updates(stats)
            clients, updates = stats.clients[usable].astype(np.intp), probed[usable]
            if self.stale:
                state = replace(state, known=clients, updates=updates.astype(np.float32))
        # D scaled by a power of two changes no greedy choice, and keeps ‖g‖² finite at any scale
        scaled = np.asarray(updates) * power_of_two_scale(updates)
        dist = distances_from_gram(gram_matrix(scaled))
        candidates = available[clients]
        sample = None
        if self.stochastic_epsilon is not None:
            sample = math.ceil(state.n_clients / self.m * math.log(1 / self.stochastic_epsilon))
        picks = facility_location_greedy(
            dist, min(k, int(candidates.sum())), candidates, rng, sample
        )
        return Selection(fill_from(clients[picks], available, k, stats.non_finite())), state

    def observe(
        self,
        state: DivFLState,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> DivFLState:
        if not self.stale or state.known is None or state.updates is None:
            return state
        rows = np.asarray(updates)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.isfinite(rows).all(axis=1)
        known = np.union1d(state.known, clients[ok]).astype(np.intp)
        new = np.empty((known.size, rows.shape[1]), dtype=np.float32)
        new[np.searchsorted(known, state.known)] = state.updates
        new[np.searchsorted(known, clients[ok])] = rows[ok]
        return replace(state, known=known, updates=new)
