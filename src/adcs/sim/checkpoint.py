"""Checkpoints of a [`simulate`][adcs.sim.simulate] call: what is saved, when, and how it returns.

A checkpoint is taken between rounds, in the calling process, from every worker lane's exported
state (`adcs.sim.lanes`); a call resumed from it continues exactly, since every other draw is
counter-based.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int, check_number
from adcs.sim.runstate import _Run
from adcs.sim.spec import F32Array, F64Array, RunSpec

_FIRST_SEGMENT = 20
"""Rounds before the first time-based checkpoint (they measure the round rate)."""

_StreamKey = tuple[int, str | None]
"""A minibatch stream: (seed, None) shared by the seed's runs, or (seed, run_id)."""


@dataclass
class _StreamState:
    """One stream's state after a whole round: what a checkpoint or a forked worker carries.

    ``runs`` holds per run (scheduler state, scheduler generator, selected, returned,
    client_updates, loss_evals, dropped, non_finite, non_finite_clients, and the clock's
    round_s and busy_s); ``server_state`` the server optimizer's state of the stream's runs
    (``None`` without one, and in checkpoints written before there were server optimizers).
    """

    params: F32Array
    runs: list[tuple[Any, ...]]
    client_acc: F64Array  # (n_runs, n_evals, n_clients)
    test_loss: F64Array  # (n_runs, n_evals)
    server_state: Any = None


def _run_state(run: _Run) -> tuple[Any, ...]:
    return (
        run.state, run.rng, run.selected, run.returned, run.client_updates, run.loss_evals,
        run.dropped, run.non_finite, set(run.non_finite_clients), run.round_s, run.busy_s,
    )  # fmt: skip


def _set_run_state(run: _Run, values: tuple[Any, ...]) -> None:
    (
        run.state, run.rng, run.selected, run.returned, run.client_updates, run.loss_evals,
        run.dropped, run.non_finite, run.non_finite_clients, run.round_s, run.busy_s,
    ) = values  # fmt: skip


class _Exporting(Protocol):
    """What a checkpoint needs of a worker lane (`adcs.sim.lanes._Lane`)."""

    keys: list[_StreamKey]
    rounds_done: int
    next_eval: int

    def export(self) -> dict[str, Any]: ...

    def absorb(self, state: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True, eq=False)
class SimCheckpoint:
    """Everything a [`simulate`][adcs.sim.simulate] call holds after a whole round, to continue it
    exactly.

    Picklable (the runner pickles it into a results folder's checkpoint). A call resumed from it
    (``simulate(..., resume_from=checkpoint)`` with the same runs, data and config) gives results
    identical to the call that was never interrupted: the schedulers' states and generators, the
    models, the records and the evaluations are all here, and every other draw is counter-based.

    Attributes
    ----------
    rounds_done : int
        Rounds every run has completed, 1 ≤ rounds_done < T.
    rounds : int
        T of the call.
    run_ids : tuple of str
        The runs, in the order given to [`simulate`][adcs.sim.simulate].
    state : dict
        The streams' states by stream and the availability records by seed (engine-internal).
    wall_s : float
        Wall time spent on the call so far (all sessions).
    """

    rounds_done: int
    rounds: int
    run_ids: tuple[str, ...]
    state: Mapping[str, Any]
    wall_s: float


@dataclass(frozen=True)
class Checkpointing:
    """When [`simulate`][adcs.sim.simulate] hands a `SimCheckpoint` to ``save``.

    Parameters
    ----------
    save : callable
        ``save(checkpoint)``, called between rounds (in the calling process, workers idle).
    every : int, optional
        Every this many rounds. ``None`` (default): about every ``seconds`` of simulation.
    seconds : float
        Target time between checkpoints when ``every`` is None (> 0).
    """

    save: Callable[[SimCheckpoint], None]
    every: int | None = None
    seconds: float = 30.0

    def __post_init__(self) -> None:
        if not callable(self.save):
            raise ValueError(f"save must be callable, got {self.save!r}")
        if self.every is not None:
            check_int("every", self.every)
        check_number("seconds", self.seconds, 0.0, low_open=True)

    def first(self, remaining: int) -> int:
        """Rounds in the first segment: ``every``, or a short probe of the round rate."""
        return min(remaining, self.every if self.every is not None else _FIRST_SEGMENT)

    def next(self, remaining: int, rounds: int, elapsed: float) -> int:
        """Rounds in the next segment, after the last one took ``elapsed`` s for ``rounds``."""
        if self.every is not None:
            return min(remaining, self.every)
        per_round = max(elapsed, 1e-9) / max(rounds, 1)
        return max(1, min(remaining, int(self.seconds / per_round)))


def _snapshot(
    lanes: Sequence[_Exporting], runs: Sequence[RunSpec], rounds: int, wall: float
) -> SimCheckpoint:
    streams: dict[_StreamKey, _StreamState] = {}
    n_available: dict[int, NDArray[np.int32]] = {}
    available: dict[int, NDArray[np.uint8]] | None = None
    for lane in lanes:
        exported = lane.export()
        streams.update(exported["streams"])
        for seed, counts in exported["n_available"].items():
            n_available.setdefault(seed, counts)
        if exported["available"] is not None:
            available = available if available is not None else {}
            for seed, bits in exported["available"].items():
                available.setdefault(seed, bits)
    state = {  # a deep copy: the loop goes on writing into the live arrays
        "rounds_done": lanes[0].rounds_done,
        "next_eval": lanes[0].next_eval,
        "streams": streams,
        "n_available": n_available,
        "available": available,
    }
    ids = tuple(s.run_id for s in runs)
    return SimCheckpoint(lanes[0].rounds_done, rounds, ids, copy.deepcopy(state), wall)


def _restore(
    lanes: Sequence[_Exporting], checkpoint: SimCheckpoint, runs: Sequence[RunSpec], rounds: int
) -> None:
    if not isinstance(checkpoint, SimCheckpoint):
        raise ValueError(f"resume_from must be a SimCheckpoint, got {type(checkpoint).__name__}")
    if checkpoint.run_ids != tuple(s.run_id for s in runs):
        raise ValueError("resume_from was taken of other runs (their run ids differ)")
    if checkpoint.rounds != rounds or not 0 < checkpoint.rounds_done < rounds:
        raise ValueError(
            f"resume_from was taken at round {checkpoint.rounds_done} of {checkpoint.rounds}; "
            f"this call runs {rounds} rounds"
        )
    missing = [k for s in lanes for k in s.keys if k not in checkpoint.state["streams"]]
    if missing:
        raise ValueError(f"resume_from has no state for the stream(s) {missing}")
    for lane in lanes:
        lane.absorb(checkpoint.state)
