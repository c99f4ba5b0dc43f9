"""Clustered sampling by model similarity (Fraboni et al., ICML 2021, Algorithm 2).

Each client is represented by its last known update (its "representative gradient"). Every round
the available clients are clustered hierarchically (Ward linkage) on a distance between their
representatives — the paper's arccos distance arccos(cos(g_i, g_j)), or the Euclidean one; the
dendrogram is cut into the largest subtrees whose weight Σ p_i is at most 1/k; the k heaviest of
those clusters each seed a row, and the clients of the smaller clusters (in increasing cluster
weight, shuffled within a cluster, as the authors' code does) are poured into the rows' remaining
room. One client is drawn per row, weighted 1/k: unbiased for Σ_i p_i Δ_i, and the draws spread
over dissimilar clients. Allocation, draw and the two departures from the paper needed for exactly
k distinct clients: `adcs.schedulers._clustering`.

Representatives (as the paper and DivFL's stale form): every client's update is probed the first
round it is available without one; afterwards only the selected clients refresh theirs, from the
update they return (`ClusteredSimilarity.observe`), so no round but the first costs a probe.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from adcs.schedulers._clustering import Row, allocate, draw, plan
from adcs.schedulers._common import BasicState, SchedulerBase, data_weights, probed_updates
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
    Selection,
    check_available,
    finite_rows,
)


class Distance(enum.Enum):
    """The dissimilarity of two clients' representative updates."""

    ARCCOS = "arccos"
    """The angle arccos(g_iᵀg_j / ‖g_i‖‖g_j‖) (the paper's choice); π/2 to a zero update."""
    L2 = "l2"
    """The Euclidean distance ‖g_i − g_j‖."""


@dataclass(frozen=True, eq=False)
class ClusteredSimilarityState(BasicState):
    """Per-run state: the clients' representative updates and their Gram matrix.

    Attributes
    ----------
    known : ndarray of shape (n_known,), int, or None
        Clients with a representative, ascending.
    representatives : ndarray of shape (n_known, dim), float32, or None
        The last finite update seen from each of ``known``.
    gram : ndarray of shape (n_known, n_known) or None
        Their inner products, updated row by row as representatives change (no full recompute).
    """

    known: IntArray | None = None
    representatives: FloatArray | None = None
    gram: FloatArray | None = None


def refresh_representatives(
    state: ClusteredSimilarityState, clients: IntArray, updates: FloatArray
) -> ClusteredSimilarityState:
    """Replace (or add) the representatives of ``clients`` by the finite rows of ``updates``."""
    rows = np.asarray(updates)
    ok = finite_rows(rows) if rows.ndim == 2 and rows.size else np.zeros(0, dtype=bool)
    if not ok.any():
        return state
    clients = np.asarray(clients, dtype=np.intp)[ok]
    rows = rows[ok].astype(np.float32)
    if state.known is not None and state.representatives is not None and state.gram is not None:
        pos = np.minimum(np.searchsorted(state.known, clients), state.known.size - 1)
        if (state.known[pos] == clients).all():  # no new client: overwrite rows of copies
            reps = state.representatives.copy()
            reps[pos] = rows
            gram = state.gram.copy()
            _set_rows(gram, reps, pos)
            return replace(state, representatives=reps, gram=gram)
    old_known: IntArray = np.empty(0, dtype=np.intp)
    old_reps: FloatArray = np.empty((0, rows.shape[1]), np.float32)
    old_gram: FloatArray = np.empty((0, 0))
    if state.known is not None and state.representatives is not None and state.gram is not None:
        old_known, old_reps, old_gram = state.known, state.representatives, state.gram
    known = np.union1d(old_known, clients).astype(np.intp)
    reps = np.empty((known.size, rows.shape[1]), dtype=np.float32)
    old_pos, new_pos = np.searchsorted(known, old_known), np.searchsorted(known, clients)
    reps[old_pos] = old_reps
    reps[new_pos] = rows
    gram = np.empty((known.size, known.size))
    gram[np.ix_(old_pos, old_pos)] = old_gram
    _set_rows(gram, reps, new_pos)
    return replace(state, known=known, representatives=reps, gram=gram)


def _set_rows(gram: FloatArray, reps: FloatArray, pos: IntArray) -> None:
    """Recompute the rows and columns ``pos`` of the Gram matrix of ``reps``, in place."""
    with np.errstate(over="ignore", invalid="ignore"):
        cross = (reps[pos] @ reps.T).astype(np.float64)
    if not np.isfinite(cross).all():  # huge (finite) updates overflow float32: in float64
        cross = reps[pos].astype(np.float64) @ reps.T.astype(np.float64)
    gram[pos] = cross
    gram[:, pos] = cross.T
    block = gram[np.ix_(pos, pos)]
    gram[np.ix_(pos, pos)] = (block + block.T) / 2


def distances_from_gram(gram: FloatArray, distance: Distance) -> FloatArray:
    """Pairwise distances of shape (n, n) from the Gram matrix of the representatives."""
    sq = np.maximum(np.diag(gram), 0.0)
    if distance is Distance.ARCCOS:
        norms = np.sqrt(sq)
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        cos = np.clip(gram * inv[:, None] * inv[None, :], -1.0, 1.0)
        dist = np.arccos(cos)  # a zero representative has cos 0: π/2 from everyone
    else:
        dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * gram, 0.0))
    dist = (dist + dist.T) / 2
    np.fill_diagonal(dist, 0.0)
    return dist


def weight_clusters(tree: FloatArray, units: FloatArray) -> IntArray:
    """Flat clusters: the largest subtrees of the dendrogram whose weight is at most one row.

    The authors' cut: the linkage heights are replaced by the merged clusters' weights (which
    grow towards the root) and the tree is cut at one row, 1/k of the total weight.

    Parameters
    ----------
    tree : ndarray of shape (n − 1, 4)
        A scipy linkage matrix over n leaves.
    units : ndarray of shape (n,)
        The leaves' weights in row units (k' p_i / P_rest, each below 1).

    Returns
    -------
    ndarray of shape (n,), int
        Cluster labels 1 … n_clusters.
    """
    n = units.shape[0]
    weight = np.concatenate([units, np.zeros(n - 1)])
    for j, (a, b) in enumerate(tree[:, :2].astype(np.intp)):
        weight[n + j] = weight[a] + weight[b]
    cut = tree.copy()
    cut[:, 2] = weight[n:]
    from scipy.cluster.hierarchy import fcluster  # here: scipy.cluster is slow to import

    return fcluster(cut, t=1.0 + 1e-9, criterion="distance").astype(np.intp)


@dataclass(frozen=True)
class ClusteredSimilarity(SchedulerBase[ClusteredSimilarityState]):
    """Clustered sampling with clusters from the similarity of the clients' updates (Algorithm 2).

    Parameters
    ----------
    m : int
        Clients per round (rows).
    distance : Distance
        ``ARCCOS`` (default, the paper's) or ``L2`` between representative updates; the linkage is
        Ward's, as in the authors' code.

    Notes
    -----
    Simplifications and choices, stated:

    * The authors pass the square distance matrix to ``scipy.cluster.hierarchy.linkage``, which
      reads its rows as observation vectors (so the tree is Ward on the rows of D); here the
      condensed distances are passed, the linkage of the distances themselves.
    * A client without a representative (never available, or its every update non-finite) is
      given a zero one: π/2 from everyone under ``ARCCOS``, its norm under ``L2``.
    * Weights p_i ∝ data size over the available clients (uniform when sizes are unknown);
      ``Selection.weights`` are the unbiased weights of `adcs.schedulers._clustering`.
    * The clustering is over all available clients each round: O(n²) distances and an O(n²)
      Ward linkage, and a Gram matrix of the representatives kept in the state (n_known² floats)
      so that a round recomputes only the refreshed clients' rows. Fine for thousands of
      clients, not for a cross-device population.
    """

    distance: Distance = Distance.ARCCOS

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.distance, Distance):
            raise ValueError(
                f"distance must be a Distance ({[d.value for d in Distance]}), got {self.distance!r}"
            )

    @property
    def observes_updates(self) -> bool:
        """The selected clients' updates refresh their representatives."""
        return True

    def init(
        self, n_clients: int, data_sizes: FloatArray | None = None
    ) -> ClusteredSimilarityState:
        return ClusteredSimilarityState(n_clients, self._check_init(n_clients, data_sizes))

    def _missing(self, state: ClusteredSimilarityState, available: BoolArray) -> IntArray:
        pool = np.flatnonzero(available).astype(np.intp)
        if state.known is None:
            return pool
        return pool[~np.isin(pool, state.known)]

    def probe(
        self,
        state: ClusteredSimilarityState,
        round_idx: int,
        available: BoolArray,
        rng: np.random.Generator,
    ) -> Probe:
        available, _ = check_available(available, state.n_clients, self.m)
        missing = self._missing(state, available)
        return Probe(ProbeKind.UPDATES, clients=missing) if missing.size else NO_PROBE

    def _rows(
        self, state: ClusteredSimilarityState, pool: IntArray, rng: np.random.Generator
    ) -> Callable[[IntArray, FloatArray, int], list[Row]]:
        """``build_rows`` for `plan` over ``pool``'s positions."""

        def build(rest: IntArray, units: FloatArray, n_rows: int) -> list[Row]:
            if rest.size <= n_rows:
                return allocate(rest, units, n_rows)
            labels = weight_clusters(self._tree(state, pool[rest]), units[rest])
            clusters = [rest[labels == c] for c in range(1, int(labels.max()) + 1)]
            weights = np.array([units[c].sum() for c in clusters])
            order = np.argsort(weights, kind="stable")  # ascending, as the authors sort
            kept = [clusters[i] for i in order[len(order) - n_rows :]]
            fillers = [rng.permutation(clusters[i]) for i in order[: len(order) - n_rows]]
            poured = np.concatenate(fillers) if fillers else np.empty(0, dtype=np.intp)
            return allocate(poured, units, n_rows, kept=kept)

        return build

    def _tree(self, state: ClusteredSimilarityState, clients: IntArray) -> FloatArray:
        """Ward linkage over ``clients`` (n ≥ 2) on their representatives' distances."""
        gram = np.zeros((clients.size, clients.size))
        if state.known is not None and state.gram is not None:
            pos = np.searchsorted(state.known, clients)
            pos = np.minimum(pos, state.known.size - 1)
            have = state.known[pos] == clients
            gram[np.ix_(have, have)] = state.gram[np.ix_(pos[have], pos[have])]
        from scipy.cluster.hierarchy import linkage  # here: scipy.cluster is slow to import
        from scipy.spatial.distance import squareform

        dist = distances_from_gram(gram, self.distance)
        return linkage(squareform(dist, checks=False), method="ward")

    def select(
        self,
        state: ClusteredSimilarityState,
        round_idx: int,
        stats: ClientStats,
        rng: np.random.Generator,
    ) -> tuple[Selection, ClusteredSimilarityState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if stats.updates is not None and stats.n_probed:
            updates, usable = probed_updates(stats)
            state = refresh_representatives(state, stats.clients[usable], updates[usable])
        pool = np.flatnonzero(available).astype(np.intp)
        if k == 0:
            return Selection(pool), state
        p = data_weights(state.data_sizes, pool)
        positions, weights = draw(plan(p, k, self._rows(state, pool, rng)), p, rng)
        return Selection(pool[positions], weights), state

    def observe(
        self,
        state: ClusteredSimilarityState,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> ClusteredSimilarityState:
        if np.asarray(clients).size == 0:
            return state
        return refresh_representatives(state, clients, updates)
