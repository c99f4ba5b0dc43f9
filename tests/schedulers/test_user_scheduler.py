"""A scheduler written as docs/how-to/own-scheduler.md shows runs end to end in the simulator."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from adcs.schedulers import BasicState, ClientStats, SchedulerBase, Selection
from adcs.sim import RunSpec, SimConfig, simulate
from tests.sim.conftest import make_data


@dataclass(frozen=True, eq=False)
class SeenState(BasicState):
    seen: tuple[int, ...] = ()


@dataclass(frozen=True)
class LeastSeen(SchedulerBase[SeenState]):
    """Selects the available clients observed least often (it learns in ``observe``)."""

    @property
    def observes_updates(self) -> bool:
        return True

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> SeenState:
        return SeenState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: SeenState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, SeenState]:
        counts = np.bincount(np.asarray(state.seen, dtype=np.intp), minlength=state.n_clients)
        available = np.flatnonzero(stats.available)
        order = available[np.argsort(counts[available], kind="stable")]
        return Selection(order[: min(self.m, order.size)]), state

    def observe(
        self,
        state: SeenState,
        round_idx: int,
        clients: np.ndarray,
        updates: np.ndarray,
        losses: np.ndarray | None,
    ) -> SeenState:
        return replace(state, seen=state.seen + tuple(int(c) for c in clients))


def test_a_scheduler_that_declares_it_observes_is_observed() -> None:
    config = SimConfig(rounds=4, eval_every=4, batch_size=4)
    result = simulate([RunSpec(LeastSeen(m=2), 0, "least-seen")], make_data(), config)[0]
    assert result.selected.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_overriding_observe_without_declaring_it_is_warned_at_definition() -> None:
    # SchedulerBase says observes_updates=False and runtimes then never call observe: the
    # override was silently dead (LeastSeen without its declaration picked 0 and 1 every round)
    with pytest.warns(UserWarning, match="Forgetful overrides observe but not observes_updates"):

        @dataclass(frozen=True)
        class Forgetful(SchedulerBase[BasicState]):
            def init(self, n_clients: int, data_sizes: object = None) -> BasicState:
                return BasicState(n_clients)

            def select(self, state: BasicState, *args: object) -> tuple[Selection, BasicState]:
                return Selection(np.arange(self.m)), state

            def observe(self, state: BasicState, *args: object) -> BasicState:
                return state
