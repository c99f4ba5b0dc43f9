"""A user's own schedulers, outside adcs: what a plugin package holds (imported by path in tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from adcs.schedulers import BasicState, ClientStats, Extra, SchedulerBase, Selection, Variants


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
class Shifted(LowestIndex):
    """LowestIndex that declares leaderboard variants: its offset swept, and a reversed order."""

    reverse: bool = False

    leaderboard_variants: ClassVar[Variants | None] = Variants(
        lever="offset",
        values=(0, 2),
        published=2,
        extras=(Extra("rev", (("reverse", True),), "reversed", "the highest indices first"),),
        symbols=(("offset", "k"),),
    )

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        selection, state = super().select(state, round_idx, stats, rng)
        if not self.reverse:
            return selection, state
        available = np.flatnonzero(stats.available)[::-1]
        return Selection(available[: selection.clients.size]), state


@dataclass(frozen=True)
class Greedy(SchedulerBase[BasicState]):
    """Breaks the selection contract: it returns one client too many."""

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        return Selection(np.flatnonzero(stats.available)[: self.m + 1]), state


@dataclass(frozen=True)
class BeyondTheLast(Greedy):
    """Breaks the selection contract: it returns clients past the last one (N, N+1, ...)."""

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        return Selection(stats.available.size + np.arange(self.m)), state


@dataclass(frozen=True)
class BareArray(Greedy):
    """Breaks the selection contract: it returns an index array, not a Selection."""

    def select(  # type: ignore[override]
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[np.ndarray, BasicState]:
        return np.flatnonzero(stats.available)[: self.m], state


@dataclass(frozen=True)
class BreaksLate(LowestIndex):
    """LowestIndex until round ``at``, then it breaks the contract (one client too many)."""

    at: int = 0

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        if round_idx < self.at:
            return super().select(state, round_idx, stats, rng)
        return Selection(np.flatnonzero(stats.available)[: self.m + 1]), state


@dataclass(frozen=True)
class Explodes(LowestIndex):
    """Its constructor fails with an error of its own (not a ValueError)."""

    def __post_init__(self) -> None:
        raise RuntimeError("no licence server")


@dataclass(frozen=True)
class PicklesNot(LowestIndex):
    """LowestIndex whose state holds a lambda: it cannot be checkpointed or sent back by a worker."""

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> BasicState:
        state = super().init(n_clients, data_sizes)
        object.__setattr__(state, "hook", lambda: None)
        return state


class NotAScheduler:
    """Has none of the protocol's methods."""


@dataclass(frozen=True)
class BreaksAt(LowestIndex):
    """LowestIndex whose ``select`` raises an error of its own at round ``at``."""

    at: int = 1

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        if round_idx == self.at:
            raise ZeroDivisionError("the quality table is empty")
        return super().select(state, round_idx, stats, rng)


@dataclass(frozen=True)
class InitFails(LowestIndex):
    """LowestIndex whose ``init`` raises an error of its own (not a ValueError)."""

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> BasicState:
        raise KeyError("cluster map")


@dataclass(frozen=True)
class Weighted(LowestIndex):
    """LowestIndex that gives its own aggregation weights ``weight`` (each client alike)."""

    weight: float = 1.0

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        selection, state = super().select(state, round_idx, stats, rng)
        weights = np.full(selection.clients.size, self.weight)
        return Selection(selection.clients, weights), state


@dataclass(frozen=True)
class Typed(LowestIndex):
    """LowestIndex with a parameter of each annotated type."""

    rate: float = 0.5
    deep: bool = False
    tag: str = "a"
    pair: tuple[int, int] = (1, 2)
