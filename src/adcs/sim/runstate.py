"""The mutable bookkeeping of one run inside the round loop, and how a run starts.

A run's scheduler, its state and generator, and its records (selections, returns, client
computations, the clock) advance round by round in :mod:`adcs.sim.lockstep`; a checkpoint carries
them (:mod:`adcs.sim.checkpoint`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.schedulers.base import ClientStats, Scheduler, UsesRoundTimes
from adcs.sim.context import _Context
from adcs.sim.spec import BoolArray, F64Array, RunSpec
from adcs.streams import scheduler_rng

logger = logging.getLogger(__name__)


@dataclass
class _Run:
    """Mutable bookkeeping of one run inside the loop."""

    spec: RunSpec
    scheduler: Scheduler
    state: Any
    rng: np.random.Generator
    observes: bool
    selected: NDArray[np.int32]
    returned: BoolArray
    client_updates: int = 0
    loss_evals: int = 0
    dropped: int = 0
    target: int = 0  # updates wanted per round: m (less than the invited with over-commitment)
    round_s: F64Array | None = None  # simulated seconds per round (with a system profile)
    busy_s: F64Array | None = None  # client-seconds per round
    non_finite: int = 0
    non_finite_clients: set[int] = field(default_factory=set)

    def note_non_finite(self, t: int, stats: ClientStats) -> None:
        """Count the probed clients with NaN/inf statistics; log them the first time."""
        bad = stats.non_finite()
        if bad.size == 0:
            return
        if not self.non_finite_clients:
            logger.warning(
                "run %r, round %d: client(s) %s reported NaN or infinite losses/updates; they "
                "are excluded from selection (later occurrences are counted, not logged)",
                self.spec.run_id, t, bad.tolist(),
            )  # fmt: skip
        self.non_finite += int(bad.size)
        self.non_finite_clients.update(bad.tolist())


def _new_run(spec: RunSpec, ctx: _Context) -> _Run:
    scheduler = spec.scheduler
    target = int(scheduler.m)
    timed = ctx.system is not None
    if timed:
        scheduler = _with_system(spec, ctx)
    elif isinstance(scheduler, UsesRoundTimes) and scheduler.needs_round_times:
        raise ValueError(
            f"run {spec.run_id!r}: its scheduler needs the clients' round durations; "
            "give SimConfig a system profile (system=SystemConfig(...))"
        )
    rounds, m = ctx.config.rounds, int(scheduler.m)
    return _Run(
        spec=spec,
        scheduler=scheduler,
        state=scheduler.init(ctx.data.n_clients, ctx.sizes.astype(np.float64)),
        rng=scheduler_rng(spec.seed, spec.run_id),
        observes=bool(scheduler.observes_updates),
        selected=np.full((rounds, m), -1, dtype=np.int32),
        returned=np.zeros((rounds, m), dtype=bool),
        target=target,
        round_s=np.zeros(rounds) if timed else None,
        busy_s=np.zeros(rounds) if timed else None,
    )


def _with_system(spec: RunSpec, ctx: _Context) -> Scheduler:
    """The scheduler a timed run uses: told the round durations, asked for ⌈(1 + o)·m⌉ clients."""
    assert ctx.system is not None
    scheduler = spec.scheduler
    if isinstance(scheduler, UsesRoundTimes):
        scheduler = scheduler.with_round_times(ctx.client_times(spec.seed).update)
    invited = ctx.system.invited(int(scheduler.m), ctx.data.n_clients)
    if invited == scheduler.m:
        return scheduler
    if not dataclasses.is_dataclass(scheduler) or "m" not in {
        f.name for f in dataclasses.fields(scheduler)
    }:
        raise ValueError(
            f"run {spec.run_id!r}: over-commitment asks the scheduler for {invited} clients, "
            f"which needs a dataclass scheduler with a field m; {type(scheduler).__name__} is not"
        )
    invite: Scheduler = dataclasses.replace(scheduler, m=invited)
    return invite
