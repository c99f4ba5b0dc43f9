"""A scheduler that breaks the protocol is stopped with an error naming the run and what it did."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from adcs.round.contract import SelectionError
from adcs.schedulers import (
    NO_PROBE,
    BasicState,
    ClientStats,
    Probe,
    ProbeKind,
    SchedulerBase,
    Selection,
)
from adcs.sim import RunSpec, SimConfig, simulate
from tests.sim.conftest import make_data

CONFIG = SimConfig(rounds=2, eval_every=2, batch_size=4)


@dataclass(frozen=True)
class Broken(SchedulerBase[BasicState]):
    """Selects the m lowest available clients, unless told to answer otherwise."""

    answer: Callable[[np.ndarray, BasicState], Any] | None = None
    probe_answer: Callable[[np.ndarray], Any] | None = None

    def init(self, n_clients: int, data_sizes: np.ndarray | None = None) -> BasicState:
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def probe(self, state: BasicState, round_idx: int, available: Any, rng: Any) -> Any:
        return NO_PROBE if self.probe_answer is None else self.probe_answer(available)

    def select(self, state: BasicState, round_idx: int, stats: Any, rng: Any) -> Any:
        lowest = np.flatnonzero(stats.available)[: self.m]
        return (Selection(lowest), state) if self.answer is None else self.answer(lowest, state)


BROKEN = {
    "no state": (
        dict(answer=lambda c, s: Selection(c)),
        "must return \\(Selection, state\\) from select, got Selection",
    ),
    "None": (dict(answer=lambda c, s: None), "must return \\(Selection, state\\) from select"),
    "a probe of None": (
        dict(probe_answer=lambda a: None),
        "must return a Probe from probe, got NoneType",
    ),
    "a probe out of range": (
        dict(probe_answer=lambda a: Probe(ProbeKind.LOSSES, clients=np.array([0, 50]))),
        ": its probe names client 50, outside \\[0, 8\\)",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_protocol_breach_is_a_selection_error_naming_the_run(case: str) -> None:
    kwargs, message = BROKEN[case]
    with pytest.raises(SelectionError, match=f"^mine at round 0.*{message}"):
        simulate([RunSpec(Broken(m=2, **kwargs), seed=0, run_id="mine")], make_data(), CONFIG)


@pytest.mark.parametrize(
    ("clients", "message"),
    [
        (np.array([0.0, 1.0]), "clients must be a 1-D array of client indices, got a float64"),
        (np.array([True, False]), "clients must be a 1-D array of client indices, got a bool"),
        (np.array([[0, 1]]), "of shape \\(1, 2\\)"),
        (np.array([2, -1]), "clients must be client indices >= 0, got -1"),
    ],
)
def test_a_probe_refuses_what_are_not_client_indices(clients: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Probe(ProbeKind.UPDATES, clients=clients)


def test_a_probe_takes_a_list_of_clients_as_indices() -> None:
    probe = Probe(ProbeKind.LOSSES, clients=[3, 1])  # type: ignore[arg-type]
    assert probe.clients is not None and probe.clients.dtype == np.intp
    np.testing.assert_array_equal(probe.targets(np.ones(4, dtype=bool)), [3, 1])


def test_a_scheduler_without_a_protocol_member_is_named_with_what_it_lacks() -> None:
    @dataclass(frozen=True)
    class NoObserve:
        m: int = 2

        def init(self, n_clients: int, data_sizes: Any = None) -> None:
            return None

        def select(self, *args: Any) -> Any:
            return None

    with pytest.raises(ValueError, match="NoObserve lacks observes_updates, probe, observe"):
        RunSpec(NoObserve(), seed=0, run_id="mine")  # type: ignore[arg-type]


AVAILABLE = np.ones(6, dtype=bool)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"available": np.ones(6, int)},
            "available must be a bool array of shape \\(n_clients,\\)",
        ),
        ({"clients": np.arange(6.0)}, "clients must be a 1-D array of client indices, got a float"),
        ({"clients": np.arange(3, 9)}, "clients must be distinct and ascending in \\[0, 6\\)"),
        ({"clients": np.array([2, 1])}, "clients must be distinct and ascending"),
        (
            {"losses": np.ones(3)},
            "losses must have shape \\(6,\\), one per probed client, got \\(3,",
        ),
        ({"updates": np.ones((3, 2))}, "updates must have shape \\(6, dim\\), one row per probed"),
        ({"updates": np.ones(6)}, "updates must have shape \\(6, dim\\)"),
    ],
)
def test_client_stats_are_checked_on_construction(kwargs: dict, message: str) -> None:
    # schedulers met these with NumPy broadcast and index errors, or used them silently
    given = {"available": AVAILABLE, "clients": np.arange(6), "losses": np.ones(6)} | kwargs
    with pytest.raises(ValueError, match=message):
        ClientStats(**given)


def test_client_stats_take_lists_as_arrays() -> None:
    stats = ClientStats([True, False, True], [0, 2], np.ones(2))  # type: ignore[arg-type]
    assert stats.available.dtype == bool and stats.clients.dtype == np.intp
    assert stats.usable().tolist() == [True, True]
