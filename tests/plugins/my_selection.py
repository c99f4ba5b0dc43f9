"""A user's own schedulers, outside adcs: what a plugin package holds (imported by path in tests)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adcs.schedulers import BasicState, ClientStats, SchedulerBase, Selection


@dataclass(frozen=True)
class LowestIndex(SchedulerBase[BasicState]):
    """The ``m`` available clients of lowest index, shifted by ``offset`` places (a toy rule)."""

    offset: int = 0

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        available = np.flatnonzero(stats.available)
        k = min(self.m, available.size)
        start = self.offset % max(available.size, 1)
        return Selection(np.roll(available, -start)[:k]), state


@dataclass(frozen=True)
class Greedy(SchedulerBase[BasicState]):
    """Breaks the selection contract: it returns one client too many."""

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        return Selection(np.flatnonzero(stats.available)[: self.m + 1]), state


class NotAScheduler:
    """Has none of the protocol's methods."""
