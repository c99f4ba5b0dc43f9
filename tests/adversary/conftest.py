"""Test doubles and data for the adversary tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adcs.schedulers._common import UPDATES_OF_ALL, BasicState
from adcs.schedulers.base import ClientStats, Probe, Selection
from adcs.sim import FederatedData
from tests.sim.conftest import make_data

N, GROUP, DIM = 12, 3, 40


def grouped_stats(seed: int = 0, noise: float = 0.05) -> ClientStats:
    """Probed statistics of N clients in groups of 3 whose updates point alike within a group."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(N // GROUP, DIM))
    updates = np.repeat(centres, GROUP, axis=0) + noise * rng.normal(size=(N, DIM))
    updates *= rng.uniform(0.5, 1.5, size=(N, 1))
    losses = np.repeat(rng.uniform(0.5, 2.0, size=N // GROUP), GROUP) + 0.05 * rng.random(N)
    return ClientStats(np.ones(N, dtype=bool), np.arange(N), losses, updates.astype(np.float32))


def paper_like_data(seed: int = 1) -> FederatedData:
    """12 clients in 4 groups of 3 (each group mostly one class): the paper's setting in small."""
    return make_data(seed=seed, n_clients=N, clients_per_group=GROUP)


@dataclass(frozen=True)
class Fixed:
    """Probes every update and always selects the same clients (so models never diverge)."""

    m: int
    chosen: tuple[int, ...] = ()
    observes_updates: bool = False

    def init(self, n_clients: int, data_sizes: Any = None) -> BasicState:
        return BasicState(n_clients)

    def probe(self, state: BasicState, round_idx: int, available: Any, rng: Any) -> Probe:
        return UPDATES_OF_ALL

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: Any
    ) -> tuple[Selection, BasicState]:
        chosen = self.chosen or tuple(range(self.m))
        return Selection(np.asarray(chosen, dtype=np.intp)), state

    def observe(self, state: BasicState, *args: Any) -> BasicState:
        return state


@dataclass(frozen=True, eq=False)
class Recording:
    """Wraps a scheduler and keeps a copy of every ClientStats it is shown."""

    inner: Any
    seen: list[ClientStats] = field(default_factory=list)

    @property
    def m(self) -> int:
        return int(self.inner.m)

    @property
    def observes_updates(self) -> bool:
        return bool(self.inner.observes_updates)

    def init(self, n_clients: int, data_sizes: Any = None) -> Any:
        return self.inner.init(n_clients, data_sizes)

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return self.inner.probe(state, round_idx, available, rng)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        self.seen.append(
            ClientStats(
                stats.available.copy(),
                stats.clients.copy(),
                None if stats.losses is None else np.array(stats.losses),
                None if stats.updates is None else np.array(stats.updates),
            )
        )
        return self.inner.select(state, round_idx, stats, rng)

    def observe(self, state: Any, *args: Any) -> Any:
        return self.inner.observe(state, *args)
