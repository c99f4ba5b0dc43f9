"""Clustered sampling by sample size (Fraboni et al., ICML 2021, Algorithm 1).

Clients are taken in decreasing order of their weight p_i ∝ data size and poured into k rows of
unit mass, client i contributing k p_i (a client whose mass overflows a row continues in the next);
one client is drawn from each row and each draw is weighted 1/k, so the aggregate is an unbiased
estimate of Σ_i p_i Δ_i with less variance than MD sampling's (the paper's Thm. 2). The allocation
and draw, and the two departures from the paper that exactly k distinct clients require, are in
`adcs.schedulers._clustering`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adcs.schedulers._clustering import Row, allocate, draw, plan
from adcs.schedulers._common import BasicState, SchedulerBase, data_weights
from adcs.schedulers.base import ClientStats, FloatArray, IntArray, Selection, check_available


def size_rows(rest: IntArray, units: FloatArray, n_rows: int) -> list[Row]:
    """Algorithm 1's rows: the clients poured in decreasing mass, ties to the lowest position."""
    order = rest[np.lexsort((rest, -units[rest]))]
    return allocate(order, units, n_rows)


@dataclass(frozen=True)
class ClusteredSize(SchedulerBase[BasicState]):
    """Clustered sampling with clusters built from the clients' data sizes (Algorithm 1).

    Parameters
    ----------
    m : int
        Clients per round (rows).

    Notes
    -----
    Needs no probe. The clusters are built each round over the *available* clients, with p_i
    ∝ data size renormalised over them (uniform when sizes are unknown), so the aggregate is an
    unbiased estimate of the available clients' average Σ_i p_i Δ_i. ``Selection.weights`` are
    the unbiased weights: 1/k·P_rest for the drawn clients, p_i for clients taken for certain
    (k p_i ≥ 1, see `adcs.schedulers._clustering`); they sum to 1.
    """

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        pool = np.flatnonzero(available).astype(np.intp)
        if k == 0:
            return Selection(pool), state
        p = data_weights(state.data_sizes, pool)
        positions, weights = draw(plan(p, k, size_rows), p, rng)
        return Selection(pool[positions], weights), state
