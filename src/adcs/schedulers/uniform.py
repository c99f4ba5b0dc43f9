"""Uniform client scheduling (McMahan et al., 2017): m of the available clients without replacement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from adcs.schedulers._common import BasicState, SchedulerBase
from adcs.schedulers.base import ClientStats, FloatArray, Selection, check_available


@dataclass(frozen=True)
class Uniform(SchedulerBase[BasicState]):
    """Pick ``m`` of the available clients uniformly at random, without replacement (all when fewer).

    Parameters
    ----------
    m : int
        Clients per round, m ≥ 1.
    """

    random_baseline: ClassVar[bool] = True

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        _, k = check_available(stats, state.n_clients, self.m)
        clients = rng.choice(stats.available_clients(), size=k, replace=False)
        return Selection(clients.astype(np.intp)), state
