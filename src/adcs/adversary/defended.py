"""`Defended`: the wrapper that stands between the runtime and any scheduler under a `Defence`.

It refuses the reports outside their domain, screens the rest (`adcs.adversary.defence.screen`),
keeps what was received (`Received`) and the peers' affinities, and holds each client to the
cap's budget; the module docstring of `adcs.adversary.defence` says what each defence does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int
from adcs.adversary.bound import Window, cap_budget, capped_availability
from adcs.adversary.defence import Defence, Received, screen
from adcs.adversary.peers import Affinity
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    Scheduler,
    Selection,
)
from adcs.streams import Domain, counter_uniform, stream_key

__all__ = ["Defended", "DefendedState"]

F32Array = NDArray[np.float32]

_TIE_JITTER = 1e-9
"""Relative jitter on corroborated losses: below any real difference, enough to break ties."""


@dataclass(frozen=True, eq=False)
class DefendedState:
    """Per-run state of `Defended`: the inner scheduler's state and what was received.

    Attributes
    ----------
    inner : object
        The wrapped scheduler's state.
    n_clients : int
    received : Received or None
        The last update received from each client (None before the first).
    window : Window or None
        Each client's selections over the cap's window (None without a cap).
    affinity : Affinity or None
        The received updates' affinities and the peers from history (None without
        ``peer_history``).
    uncorroborated : ndarray of bool, shape (n_clients,), or None
        With ``cap_uncorroborated``: whether each client's claim was clipped at its fence when it
        was last judged (a round that probed its loss or update); it stands until the client is
        judged again, so a scheduler that probes only now and then (ADCS between refreshes)
        has each selection counted on its client's last verdict.
    """

    inner: Any
    n_clients: int
    received: Received | None = None
    window: Window | None = None
    affinity: Affinity | None = None
    uncorroborated: BoolArray | None = None


_TIES, _MIX, _DRAW = 1, 2, 3
"""Salts of the defence's counter-based draws (`adcs.streams.Domain` ATTACK)."""


def _uniform_choice(key: int, round_idx: int, available: BoolArray, m: int) -> IntArray:
    """min(m, available) available clients uniformly at random, a pure function of (key, round)."""
    pool = np.flatnonzero(available)
    draws = counter_uniform(key, Domain.ATTACK, round_idx, pool, salt=_DRAW)
    return pool[np.argsort(draws, kind="stable")[:m]].astype(np.intp)


@dataclass(frozen=True)
class Defended:
    """Any scheduler behind the defences of `Defence` (the Scheduler protocol).

    Parameters
    ----------
    scheduler : Scheduler
        The wrapped scheduler; it sees the screened statistics (`screen`).
    defence : Defence
    seed : int
        The run's seed: the defence's own draws (tie-breaks, the uniform mixture) are
        counter-based on it, so every run of a seed — attacked or not — gets the same ones and
        the wrapped scheduler's stream is left untouched.
    """

    scheduler: Scheduler
    defence: Defence
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.scheduler, Scheduler):
            raise ValueError(
                f"scheduler must follow the Scheduler protocol, got {type(self.scheduler).__name__}"
            )
        if not isinstance(self.defence, Defence):
            raise ValueError(f"defence must be a Defence, got {self.defence!r}")
        check_int("seed", self.seed, minimum=0)

    @property
    def m(self) -> int:
        return int(self.scheduler.m)

    def around(self, scheduler: Scheduler) -> Defended:
        """The same defences around ``scheduler`` (`adcs.round.adapt.SchedulerWrapper`)."""
        return replace(self, scheduler=scheduler)

    @property
    def observes_updates(self) -> bool:
        """The server remembers what it receives (``received``, ``corroborate``)."""
        return self.defence.remembers or bool(self.scheduler.observes_updates)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> DefendedState:
        cap = self.defence.cap > 0
        window = Window.empty(n_clients, self.defence.any_interval) if cap else None
        affinity = None
        if self.defence.peer_history:
            affinity = Affinity.empty(int(n_clients), self.defence.peers)
        flags = np.zeros(int(n_clients), dtype=bool) if self.defence.cap_uncorroborated else None
        return DefendedState(
            self.scheduler.init(n_clients, data_sizes), int(n_clients), None, window, affinity,
            flags,
        )  # fmt: skip

    def probe(
        self, state: DefendedState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return self.scheduler.probe(state.inner, round_idx, available, rng)

    def select(
        self, state: DefendedState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, DefendedState]:
        key = stream_key(self.seed)
        rate = self.defence.cap * self.m / state.n_clients  # the any-interval rule's r
        affinity = state.affinity
        if affinity is not None:
            affinity = affinity.rolled(round_idx, self.defence.window)
        history = None if affinity is None else affinity.peers
        screening = screen(self.defence, state.received, stats, round_idx, history)
        seen = screening.stats
        if state.window is not None:  # the cap: over-budget clients are not available this round
            budget = cap_budget(self.defence.cap, self.defence.window, self.m, state.n_clients)
            allowed = capped_availability(
                stats.available, state.window, budget, self.m, key, round_idx, rate
            )
            stats = ClientStats(allowed, stats.clients, stats.losses, stats.updates)
            seen = ClientStats(allowed, seen.clients, seen.losses, seen.updates)
        clipped = screening.clipped
        if self.defence.corroborate and seen.losses is not None and seen.n_probed > 1:
            # a neighbourhood shares one median (or clipped rows one fence): break its exact
            # ties at random, not by index; with a fence only the clipped rows are moved
            u = counter_uniform(key, Domain.ATTACK, round_idx, seen.clients, salt=_TIES)
            moved = np.ones(seen.n_probed, dtype=bool) if self.defence.fence == 0 else clipped
            if moved is not None and moved.any():
                jitter = np.where(moved, 1.0 + _TIE_JITTER * u, 1.0)
                losses = seen.losses * jitter
                seen = ClientStats(seen.available, seen.clients, losses, seen.updates)
        selection, inner = self.scheduler.select(state.inner, round_idx, seen, rng)
        if self.defence.uniform_mix > 0:
            coin = counter_uniform(key, Domain.ATTACK, round_idx, np.zeros(1), salt=_MIX)[0]
            if coin < self.defence.uniform_mix:
                selection = Selection(_uniform_choice(key, round_idx, stats.available, self.m))
        window, flags = state.window, state.uncorroborated
        if window is not None:
            counted = np.asarray(selection.clients)
            if flags is not None:  # only the selections of uncorroborated claims count
                judged = stats.n_probed > 0 and (
                    stats.losses is not None or stats.updates is not None
                )
                if judged and clipped is not None:  # this round's verdicts replace the last ones
                    flags = flags.copy()
                    flags[np.asarray(stats.clients)] = clipped
                counted = counted[flags[counted]]
            window = window.pushed(counted, self.defence.window, rate)
        return selection, replace(
            state, inner=inner, window=window, affinity=affinity, uncorroborated=flags
        )

    def observe(
        self,
        state: DefendedState,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> DefendedState:
        inner = state.inner
        if self.scheduler.observes_updates:
            inner = self.scheduler.observe(inner, round_idx, clients, updates, losses)
        received = state.received
        if self.defence.remembers and clients.size:
            if received is None:
                received = Received.empty(state.n_clients)
            received = received.updated(round_idx, clients, updates)
        affinity = state.affinity
        if affinity is not None and received is not None and received.rows:
            affinity = _affinity_after(affinity, received, round_idx, clients, self.defence.window)
        return replace(state, inner=inner, received=received, affinity=affinity)


def _affinity_after(
    affinity: Affinity, received: Received, round_idx: int, clients: IntArray, window: int
) -> Affinity:
    """``affinity`` after this round's receipts from ``clients``, against every update received
    in the last ``window`` rounds."""
    clients = np.asarray(clients, dtype=np.intp)
    new = clients[received.known[clients] & (received.at[clients] == round_idx)]
    fresh = np.flatnonzero(received.known & (received.at >= round_idx - window))
    if new.size == 0:
        return affinity
    dim = received.dim
    return affinity.received(new, received.directions(new, dim), received.directions(fresh, dim),
                             fresh)  # fmt: skip
