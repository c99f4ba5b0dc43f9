"""DivFL (Balakrishnan et al., 2022): facility location on update dissimilarity.

Greedily choose S to minimise Σ_{k∈[N]} min_{j∈S} D_kj with D_kj = ‖g_k − g_j‖: the first pick is the
client with the smallest Σ_k D_kj, each next pick the largest reduction (ties to the lowest index).

Two forms with the same picks:
[`facility_location_greedy`][adcs.schedulers.divfl.facility_location_greedy] on a dense distance
matrix (for small pools, n ≤ [`DENSE_DISTANCES_MAX`][adcs.schedulers.divfl.DENSE_DISTANCES_MAX]),
and [`facility_location_blocked`][adcs.schedulers.divfl.facility_location_blocked], which forms
distances from the updates a block of columns at a time and evaluates gains lazily (Minoux's lazy
greedy, as the authors' code does): memory O(n · block), never n × n.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

import numpy as np

from adcs._validate import check_bool, check_int, check_number
from adcs.dpp import gram_matrix, power_of_two_scale
from adcs.schedulers._common import (
    BasicState,
    SchedulerBase,
    candidate_probe,
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

DENSE_DISTANCES_MAX = 1024
"""Largest pool whose n × n distances DivFL forms at once (8 MB); larger pools go blockwise."""
_BLOCK_NUMBERS = 1 << 21
"""Distances formed at once by the blocked form (16 MB of float64)."""


def pairwise_distances(updates: FloatArray) -> FloatArray:
    """D_kj = ‖g_k − g_j‖ for updates of shape (n, dim); returns shape (n, n)."""
    return distances_from_gram(gram_matrix(np.asarray(updates, dtype=np.float64)))


_SMALLEST_SQUARE = math.ldexp(1.0, -60)
"""Smallest nonzero squared norm of an update row for
[`unit_scale_gram`][adcs.schedulers.divfl.unit_scale_gram]'s fast form: far above the float32
subnormal range (2⁻¹²⁶) its products could fall into."""


def unit_scale_gram(updates: FloatArray, *, rescale: bool = True) -> FloatArray:
    """``gram_matrix(updates * power_of_two_scale(updates))``, without the scaled copy; (n, n) float64.

    Multiplying by a power of two s commutes with every rounding of the float32 product while no
    partial result overflows or becomes subnormal, so the Gram of the unscaled updates times s²
    is the scaled Gram number for number. The product is formed unscaled when every row's
    squared norm, before and after scaling, is at least `_SMALLEST_SQUARE` (or the row is
    zero) and none overflowed; otherwise (updates of extreme scale) the scaled copy is formed.

    With ``rescale=False`` the unscaled product is returned as it is (not times s²): the scaled
    Gram up to the exact factor s², which changes no comparison of distances (DivFL's picks).
    Then s is found only when a squared norm reaches 1 (below, every entry is below 1, so
    s ≥ 1 and the test above needs no s): the two passes over the updates are saved.
    """
    u = np.ascontiguousarray(updates)  # as the scaled copy is: the same BLAS call
    if u.dtype == np.float32 and u.size:
        gram = gram_matrix(u)
        square = np.diag(gram)
        below_one = rescale is False and float(square.max()) < 1.0  # False for NaN
        scale = 1.0 if below_one else power_of_two_scale(updates)
        nonzero = square > 0.0
        least = float(square[nonzero].min(initial=np.inf)) * min(1.0, scale * scale)
        zero_rows = not u[~nonzero].any()  # a zero square must come from a zero row
        if least >= _SMALLEST_SQUARE and zero_rows and bool(np.isfinite(gram).all()):
            if rescale:
                gram *= scale * scale
            return gram
    return gram_matrix(u * power_of_two_scale(updates))


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
            np.add.reduce(buffer, axis=0, out=cost)  # buffer.sum(axis=0), one call less
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


class _Columns:
    """Columns D[:, J] of the distances of updates (n, dim), formed on demand."""

    def __init__(self, updates: FloatArray) -> None:
        self.u = np.asarray(updates, dtype=np.float64)
        self.sq = np.einsum("ij,ij->i", self.u, self.u)
        self.n = self.u.shape[0]
        self.block = max(1, _BLOCK_NUMBERS // max(self.n, 1))

    def __call__(self, cols: IntArray) -> FloatArray:
        d2 = self.sq[:, None] + self.sq[cols][None, :] - 2.0 * (self.u @ self.u[cols].T)
        d2[cols, np.arange(cols.size)] = 0.0
        return np.sqrt(np.maximum(d2, 0.0))

    def blocks(self, cols: IntArray) -> list[IntArray]:
        return [cols[i : i + self.block] for i in range(0, cols.size, self.block)]


def facility_location_blocked(
    updates: FloatArray,
    m: int,
    candidates: BoolArray,
    rng: np.random.Generator | None = None,
    sample_size: int | None = None,
) -> IntArray:
    """[`facility_location_greedy`][adcs.schedulers.divfl.facility_location_greedy] on D_kj = ‖g_k −
    g_j‖, without forming D.

    Parameters
    ----------
    updates : ndarray of shape (n, dim)
        The clients' updates g (rows to cover and candidate facilities alike).
    m, candidates, rng, sample_size
        As for [`facility_location_greedy`][adcs.schedulers.divfl.facility_location_greedy] (the
        same random draws, so the same picks).

    Returns
    -------
    ndarray of shape (m,)
        Picks in order.

    Notes
    -----
    The first pick needs every column sum Σ_k D_kj, the second every gain
    Σ_k max(cover_k − D_kj, 0): two blocked passes over the n² distances. Later picks use the
    gains' monotonicity (facility location is submodular): a stale gain bounds the fresh one,
    so only the best few candidates are re-evaluated, a column each. Ties go to the lowest index.
    The stochastic variant evaluates its sampled candidates exactly every step.
    """
    columns = _Columns(updates)
    blocked = ~np.asarray(candidates, dtype=bool)
    cover = np.full(columns.n, np.inf)
    picks: list[int] = []
    stochastic = sample_size is not None and rng is not None
    sample = sample_size if sample_size is not None else columns.n
    heap: list[tuple[float, int, int]] = []  # (−gain, client, step it was computed at)
    for step in range(m):
        if step == 0 or stochastic:
            pool = np.flatnonzero(~blocked)
            if stochastic and rng is not None and pool.size > sample:
                pool = np.sort(rng.choice(pool, size=sample, replace=False))
            cost = np.full(columns.n, np.inf)
            for cols in columns.blocks(pool):
                cost[cols] = np.minimum(cover[:, None], columns(cols)).sum(axis=0)
            j = int(cost.argmin())
        elif step == 1:  # every gain once: the bounds the later steps start from
            pool = np.flatnonzero(~blocked)
            for cols in columns.blocks(pool):
                gains = np.maximum(cover[:, None] - columns(cols), 0.0).sum(axis=0)
                heap.extend(zip((-gains).tolist(), cols.tolist(), [step] * cols.size, strict=True))
            heapq.heapify(heap)
            j = _pop_fresh(heap, step, cover, columns)
        else:
            j = _pop_fresh(heap, step, cover, columns)
        picks.append(j)
        blocked[j] = True
        np.minimum(cover, columns(np.array([j]))[:, 0], out=cover)
    return np.asarray(picks, dtype=np.intp)


def _pop_fresh(
    heap: list[tuple[float, int, int]], step: int, cover: FloatArray, columns: _Columns
) -> int:
    """The candidate of largest current gain (lowest index among ties), off the lazy heap."""
    while True:
        _, j, at = heapq.heappop(heap)
        if at == step:
            return j
        gain = float(np.maximum(cover - columns(np.array([j]))[:, 0], 0.0).sum())
        heapq.heappush(heap, (-gain, j, step))


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
        clients' rows are refreshed (through `observe`).
    stochastic_epsilon : float or None
        Stochastic greedy: each step evaluates ⌈(n/m)·ln(1/ε)⌉ random candidates, n the clients
        with updates. ``None`` (default) evaluates all.
    candidates : int or None
        d ≥ m: each round probes d clients drawn uniformly from the available ones and picks
        among them (a pool, as PowerOfChoice's pow-d). ``None`` (default): every client.

    Notes
    -----
    Clients without a usable update are not candidates; they are used only to keep the selection
    full. The distances are computed over the clients with updates only (n_probed², not N²),
    blockwise beyond [`DENSE_DISTANCES_MAX`][adcs.schedulers.divfl.DENSE_DISTANCES_MAX] clients (no
    n × n array).
    """

    stale: bool = False
    stochastic_epsilon: float | None = None
    candidates: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("stale", self.stale)
        if self.candidates is not None:
            check_int("candidates", self.candidates, minimum=self.m)
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
        return candidate_probe(self.candidates, available, rng)

    def select(
        self, state: DivFLState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, DivFLState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if self.stale and state.known is not None and state.updates is not None:
            clients, updates = state.known, state.updates
        else:
            probed, usable = probed_updates(stats)
            if usable.all():  # the usual case: no copy of the updates
                clients, updates = stats.clients.astype(np.intp), probed
            else:
                clients, updates = stats.clients[usable].astype(np.intp), probed[usable]
            if self.stale:
                state = replace(state, known=clients, updates=updates.astype(np.float32))
        candidates = available[clients]
        sample = None
        if self.stochastic_epsilon is not None:
            sample = math.ceil(clients.size / self.m * math.log(1 / self.stochastic_epsilon))
        n_picks = min(k, int(candidates.sum()))
        # D scaled by a power of two changes no greedy choice, and keeps ‖g‖² finite at any scale
        if clients.size <= DENSE_DISTANCES_MAX:
            dist = distances_from_gram(unit_scale_gram(updates, rescale=False))
            picks = facility_location_greedy(dist, n_picks, candidates, rng, sample)
        else:
            scaled = np.asarray(updates) * power_of_two_scale(updates)
            picks = facility_location_blocked(scaled, n_picks, candidates, rng, sample)
        return Selection(fill_from(clients[picks], available, k, rng, stats.non_finite())), state

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
