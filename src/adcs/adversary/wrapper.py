"""What the attackers' scheduler wrappers share (`Lying`, ``Crafting``).

A wrapper stands between the runtime and a scheduler (plain or
`Defended`), rewrites the malicious clients' rows of a round's statistics
before ``select``, and remembers the direction each malicious client last reported, which the
run's aggregation hook then sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from adcs.schedulers.base import BoolArray, FloatArray, IntArray, Probe, Scheduler

__all__ = ["AttackerState", "Wrapping", "remember"]


@dataclass(frozen=True, eq=False)
class AttackerState:
    """Per-run state of an attacker's wrapper.

    Attributes
    ----------
    inner : object
        The wrapped scheduler's state.
    reported : ndarray of shape (k, dim), float32, or None
        The unit direction each malicious client (ascending client order) last reported.
    has_reported : ndarray of bool, shape (k,)
    """

    inner: Any
    reported: NDArray[np.float32] | None = None
    has_reported: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def remember(
    state: AttackerState, members: tuple[int, ...], clients: IntArray, directions: FloatArray
) -> AttackerState:
    """``state`` holding the unit ``directions`` (n, dim) just reported by malicious ``clients``."""
    if clients.size == 0:
        return state
    reported = state.reported
    if reported is None:
        reported = np.zeros((len(members), directions.shape[1]), np.float32)
    reported, has = reported.copy(), state.has_reported.copy()
    where = np.searchsorted(np.asarray(members), clients)
    reported[where] = directions
    has[where] = True
    return replace(state, reported=reported, has_reported=has)


_Wrapper = TypeVar("_Wrapper", bound="Wrapping")


class Wrapping:
    """The Scheduler protocol's delegating half: ``m``, ``probe``, ``observe`` and ``init``."""

    scheduler: Scheduler

    def around(self: _Wrapper, scheduler: Scheduler) -> _Wrapper:
        """The same wrapper around ``scheduler`` (it declares itself an
        `adcs.round.adapt.SchedulerWrapper`)."""
        return replace(self, scheduler=scheduler)  # type: ignore[type-var]

    def _check(self, attack: object, kind: type, name: str) -> None:
        if not isinstance(self.scheduler, Scheduler):
            raise ValueError(
                f"scheduler must follow the Scheduler protocol, got {type(self.scheduler).__name__}"
            )
        if not isinstance(attack, kind):
            raise ValueError(f"attack must be {name}, got {attack!r}")

    @property
    def m(self) -> int:
        return int(self.scheduler.m)

    @property
    def observes_updates(self) -> bool:
        return bool(self.scheduler.observes_updates)

    def _initial(
        self, members: tuple[int, ...], n_clients: int, data_sizes: FloatArray | None
    ) -> AttackerState:
        if max(members) >= n_clients:
            raise ValueError(f"attack.clients {list(members)} must lie in [0, {n_clients})")
        inner = self.scheduler.init(n_clients, data_sizes)
        return AttackerState(inner, None, np.zeros(len(members), dtype=bool))

    def probe(
        self, state: AttackerState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return self.scheduler.probe(state.inner, round_idx, available, rng)

    def observe(
        self,
        state: AttackerState,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> AttackerState:
        if not self.scheduler.observes_updates:
            return state
        inner = self.scheduler.observe(state.inner, round_idx, clients, updates, losses)
        return replace(state, inner=inner)
