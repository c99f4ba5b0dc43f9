"""OCS (Chen, Horváth & Richtárik, 2022): clients with the largest update norms.

The paper's adaptation (default) deterministically picks the ``m`` largest ‖g_n‖. The original
optimal client sampling is available as ``unbiased=True``: inclusion probabilities
π_n = min(1, c·p_n‖g_n‖) with Σπ = m, exactly ``m`` clients drawn with those inclusion
probabilities (systematic sampling), and the aggregate reweighted by p_n/π_n so that its expectation
is the full-participation update Σ_n p_n g_n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adcs._validate import check_bool, check_int
from adcs.dpp import row_norms
from adcs.schedulers._common import (
    BasicState,
    SchedulerBase,
    candidate_probe,
    fill_from,
    probed_updates,
)
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    Selection,
    check_available,
    top_m,
)


def ocs_inclusion_probabilities(scores: FloatArray, m: int) -> FloatArray:
    """π_n = min(1, c·a_n) with c chosen so that Σ_n π_n = m (Chen et al. 2022, eq. for OCS).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Non-negative importance a_n = p_n‖g_n‖.
    m : int
        Expected (and, with systematic sampling, exact) sample size, m ≤ n.

    Returns
    -------
    ndarray of shape (n,)
        Inclusion probabilities in [0, 1] summing to m. If fewer than ``m`` scores are positive, those
        get probability 1 and the remaining mass is spread evenly over the zero-score items.
    """
    a = np.asarray(scores, dtype=np.float64)
    n = a.size
    positive = int(np.count_nonzero(a > 0))
    if positive <= m:
        pi = (a > 0).astype(np.float64)
        if positive < m:
            pi[a <= 0] = (m - positive) / (n - positive)
        return pi
    order = np.argsort(-a, kind="stable")
    sorted_a = a[order]
    tail = np.cumsum(sorted_a[::-1])[::-1]  # tail[k] = Σ_{j ≥ k} sorted_a[j]
    pi = np.empty(n)
    for k in range(m):  # the k largest are capped at 1
        c = (m - k) / tail[k]
        if c * sorted_a[k] <= 1.0:
            pi[order[:k]] = 1.0
            pi[order[k:]] = c * sorted_a[k:]
            return np.minimum(pi, 1.0)
    raise AssertionError("unreachable: with more than m positive scores some k < m fits")


def systematic_sample(pi: FloatArray, rng: np.random.Generator) -> IntArray:
    """Exactly round(Σπ) distinct indices, index n included with probability π_n (Madow 1949)."""
    m = round(float(pi.sum()))
    perm = rng.permutation(
        pi.size
    )  # random order keeps joint inclusions from depending on index order
    edges = np.concatenate([[0.0], np.cumsum(pi[perm])])
    edges *= m / edges[-1]  # rounding must not push the last point past the end
    points = rng.uniform() + np.arange(m)
    hits = np.searchsorted(edges, points, side="right") - 1
    return perm[np.clip(hits, 0, pi.size - 1)].astype(np.intp)


@dataclass(frozen=True)
class OCS(SchedulerBase[BasicState]):
    """Probe every client's update and pick by update norm.

    Parameters
    ----------
    m : int
        Clients per round.
    unbiased : bool
        ``False`` (default, the paper's adaptation): the ``m`` largest ‖g_n‖, ties to the lowest index.
        ``True``: the original OCS — sample with π_n = min(1, c·p_n‖g_n‖), Σπ = m, and return
        aggregation weights p_n/π_n (p_n ∝ data size when known, else uniform).
    candidates : int or None
        d ≥ m: each round probes d clients drawn uniformly from the available ones and picks
        among them (with ``unbiased``, samples among them). ``None`` (default): every client.

    Notes
    -----
    Clients with a missing or non-finite update rank last and are used only to keep exactly ``m``.
    """

    unbiased: bool = False
    candidates: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("unbiased", self.unbiased)
        if self.candidates is not None:
            check_int("candidates", self.candidates, minimum=self.m)

    def probe(
        self, state: BasicState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return candidate_probe(self.candidates, available, rng)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        updates, usable = probed_updates(stats)
        rows = updates if usable.all() else updates[usable]
        norms = row_norms(rows)
        known = stats.clients[usable]
        if not self.unbiased or k == 0:
            ranked = known[top_m(norms, k)]
            return Selection(fill_from(ranked, available, k, rng, stats.non_finite())), state
        if norms.size and np.isfinite(norms.max()) and norms.max() > 0:
            norms = norms / norms.max()  # π is scale free; this keeps c·a_n finite
        usable_available = known[available[known]]
        p = np.ones(state.n_clients) if state.data_sizes is None else state.data_sizes.copy()
        if usable_available.size < k:
            # too few usable updates: every usable client goes (π = 1), the rest of the cohort is
            # drawn evenly from the clients without one
            rest = np.setdiff1d(np.flatnonzero(available), usable_available)
            short = k - usable_available.size
            pool = np.concatenate([usable_available, rest])
            pi = np.concatenate(
                [np.ones(usable_available.size), np.full(rest.size, short / rest.size)]
            )
            picked = np.concatenate(
                [
                    np.arange(usable_available.size),
                    usable_available.size + systematic_sample(pi[usable_available.size :], rng),
                ]
            )
        else:
            pool = usable_available
            importance = np.zeros(state.n_clients)
            importance[known] = p[known] * norms
            pi = ocs_inclusion_probabilities(importance[pool], k)
            picked = systematic_sample(pi, rng)
        p = p / p[pool].sum()
        return Selection(pool[picked], weights=p[pool[picked]] / pi[picked]), state
