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
    SchedulerBase,
    fill_from,
    gram_matrix,
    map_subset,
    probed_updates,
    unit_gram,
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


@dataclass(frozen=True, eq=False)
class StaticDPPState(BasicState):
    """Per-run StaticDPP state.

    Attributes
    ----------
    n_clients : int
    data_sizes : ndarray of shape (n_clients,) or None
    kernel : ndarray of shape (n_clients, n_clients) or None
        C = ΦᵀΦ from the one probe (zero rows for clients without a usable update); None before it.
    subset : ndarray of shape (m,) or None
        The fixed MAP subset.
    """

    kernel: FloatArray | None = None
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
    If a client of the subset is unavailable in a later round, the MAP is recomputed on the stored
    round-0 kernel restricted to the available clients (still deterministic, still no new probe).
    """

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> StaticDPPState:
        return StaticDPPState(n_clients, self._check_init(n_clients, data_sizes))

    def probe(
        self, state: StaticDPPState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return UPDATES_OF_ALL if state.subset is None else NO_PROBE

    def select(
        self, state: StaticDPPState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, StaticDPPState]:
        available = check_available(stats.available, state.n_clients, self.m)
        if state.subset is None or state.kernel is None:
            updates, usable = probed_updates(stats)
            kernel = unit_gram(gram_matrix(updates, usable))
            subset = fill_from(
                map_subset(kernel, np.zeros(state.n_clients), usable & available, self.m),
                available,
                self.m,
            )
            state = replace(state, kernel=kernel, subset=subset)
            return Selection(subset.copy()), state
        if available[state.subset].all():
            return Selection(state.subset.copy()), state
        usable = np.diag(state.kernel) > 0
        order = map_subset(state.kernel, np.zeros(state.n_clients), usable & available, self.m)
        return Selection(fill_from(order, available, self.m)), state
