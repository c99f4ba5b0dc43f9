"""StaticDPP (after Li et al. 2021, Zhang et al. 2023, Bastola et al. 2024): one diverse subset for all rounds.

Once, before training, probe every client's update at w⁽⁰⁾, build C = ΦᵀΦ (eq. 5) and take its
greedy MAP with θ = 0 (pure diversity); that same subset trains every round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from adcs.schedulers._common import (
    UPDATES_OF_ALL,
    BasicState,
    Pool,
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

_NOBODY: IntArray = np.empty(0, dtype=np.intp)


@dataclass(frozen=True, eq=False)
class StaticDPPState(BasicState):
    """Per-run StaticDPP state.

    Attributes
    ----------
    n_clients : int
    data_sizes : ndarray of shape (n_clients,) or None
    pool : Pool or None
        Clients with a usable update at the one probe, with their kernel; None before it.
    subset : ndarray of shape (≤ m,) or None
        The MAP order over the whole pool: the subset trained every round.
    """

    pool: Pool | None = None
    subset: IntArray | None = None


@dataclass(frozen=True)
class StaticDPP(SchedulerBase[StaticDPPState]):
    """The θ = 0 greedy MAP subset of the round-0 kernel, reused every round.

    Parameters
    ----------
    m : int
        Clients per round.

    Notes
    -----
    The probe is taken at the first round with a usable update (round 0 unless nobody is
    available then; until then the round's clients are drawn at random). If a client of the
    subset is unavailable in a later round, the MAP is recomputed on the stored
    round-0 kernel restricted to the available clients (still deterministic, still no new probe).
    """

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> StaticDPPState:
        return StaticDPPState(n_clients, self._check_init(n_clients, data_sizes))

    def probe(
        self, state: StaticDPPState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return UPDATES_OF_ALL if state.subset is None else NO_PROBE

    def _map(self, state: StaticDPPState, eligible: BoolArray) -> IntArray:
        assert state.pool is not None
        return state.pool.greedy_map(np.zeros(state.pool.size), eligible, self.m)

    def select(
        self, state: StaticDPPState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, StaticDPPState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if state.subset is None:
            updates, usable = probed_updates(stats)
            if not usable.any():  # nobody to build the kernel of: probe again next round
                return Selection(fill_from(_NOBODY, available, k, rng, stats.non_finite())), state
            rows = updates if usable.all() else updates[usable]
            # the pool serves every later round: keep the kernel whenever it fits
            pool = Pool.from_updates(stats.clients[usable], rows)
            state = replace(state, pool=pool)
            state = replace(state, subset=self._map(state, np.ones(int(usable.sum()), dtype=bool)))
        assert state.pool is not None and state.subset is not None
        order = state.subset
        if order.size < k or not available[order].all():
            order = self._map(state, available[state.pool.clients])
        return Selection(fill_from(order, available, k, rng, stats.non_finite())), state
