"""The mutable bookkeeping of one run inside the round loop, and how a run starts.

A run's scheduler, its state and generator, and its records (selections, returns, client
computations, the clock) advance round by round in `adcs.sim.lockstep`; a checkpoint carries
them (`adcs.sim.checkpoint`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.registry import PluginError, raised_in
from adcs.round.adapt import scheduler_to_ask
from adcs.round.clock import RoundClock
from adcs.round.contract import SchedulerInitError
from adcs.round.machine import PlayedRound, RoundRules
from adcs.schedulers.base import Scheduler
from adcs.sim.context import _Context
from adcs.sim.spec import BoolArray, F64Array, IntArray, RunSpec
from adcs.streams import scheduler_rng, stream_key

logger = logging.getLogger(__name__)


@dataclass
class _Run:
    """Mutable bookkeeping of one run inside the loop."""

    spec: RunSpec
    rules: RoundRules  # the scheduler (asked for the invited with over-commitment) and the rest
    state: Any
    rng: np.random.Generator
    selected: NDArray[np.int32]
    returned: BoolArray
    client_updates: int = 0
    loss_evals: int = 0
    dropped: int = 0
    round_s: F64Array | None = None  # simulated seconds per round (with a system profile)
    busy_s: F64Array | None = None  # client-seconds per round
    non_finite: int = 0
    non_finite_clients: set[int] = field(default_factory=set)

    def record(self, played: PlayedRound) -> None:
        """Keep round t's record: the state, selection, returns, dropouts, client work, clock."""
        t, clients = played.round_idx, played.selected
        self.state = played.state
        k = clients.size
        self.selected[t, :k] = clients
        self.returned[t, :k] = played.returned
        self.dropped += played.failed
        self.client_updates += played.client_updates
        self.loss_evals += played.loss_evals
        if self.round_s is not None and self.busy_s is not None:
            assert played.round_s is not None and played.busy_s is not None
            self.round_s[t] = played.round_s
            self.busy_s[t] = played.busy_s
        self.note_non_finite(t, played.non_finite)

    def note_non_finite(self, t: int, bad: IntArray) -> None:
        """Count the probed clients with NaN/inf statistics; log them the first time."""
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
    target = int(spec.scheduler.m)
    clock, invited = None, None
    if ctx.system is not None:
        clock = RoundClock(ctx.client_times(spec.seed), ctx.system.deadline)
        invited = ctx.system.invited(target, ctx.data.n_clients)
    scheduler = scheduler_to_ask(spec.scheduler, repr(spec.run_id), clock, invited)
    timed = clock is not None
    rounds, m = ctx.config.rounds, int(scheduler.m)
    try:
        state = scheduler.init(ctx.data.n_clients, ctx.sizes.astype(np.float64))
    except ValueError as exc:
        raise SchedulerInitError(f"run {spec.run_id}: {exc}") from exc
    except (PluginError, MemoryError):
        raise
    except Exception as exc:  # the scheduler's own failure: named, with the run
        raise raised_in("scheduler", scheduler, f"init, run {spec.run_id}", exc) from exc
    return _Run(
        spec=spec,
        rules=_rules(spec, scheduler, target, clock, ctx),
        state=state,
        rng=scheduler_rng(spec.seed, spec.run_id if spec.stream is None else spec.stream),
        selected=np.full((rounds, m), -1, dtype=np.int32),
        returned=np.zeros((rounds, m), dtype=bool),
        round_s=np.zeros(rounds) if timed else None,
        busy_s=np.zeros(rounds) if timed else None,
    )


def _rules(
    spec: RunSpec, scheduler: Scheduler, target: int, clock: RoundClock | None, ctx: _Context
) -> RoundRules:
    """The rules of the run's rounds: the context's sketch, dropouts, clock and weights."""
    seed_key = stream_key(spec.seed)
    cfg = ctx.config
    return RoundRules(
        scheduler,
        who=spec.run_id,
        target=target,
        base_weights=ctx.base_weights,
        sketch=None if cfg.sketch_dim is None else functools.partial(ctx.sketch_rows, seed_key),
        dropout=None if cfg.dropout == 0.0 else functools.partial(ctx.returned, seed_key),
        clock=clock,
        aggregator=spec.aggregator,
    )


def privacy_cost(run: _Run) -> dict[str, Any]:
    """The run's ``client_epsilon`` and ``delta`` (`adcs.sim.spec.RunResult`) when its
    scheduler, or one it wraps (a field ``scheduler``, its state's ``inner``), accounts privacy
    (``epsilons(state)`` and ``delta``: `adcs.privacy.Private`); else nothing."""
    scheduler: Any = run.rules.scheduler
    state = run.state
    while not hasattr(scheduler, "epsilons"):
        if not (hasattr(scheduler, "scheduler") and hasattr(state, "inner")):
            return {}
        scheduler, state = scheduler.scheduler, state.inner
    epsilons = np.asarray(scheduler.epsilons(state), dtype=np.float64)
    return {"client_epsilon": epsilons, "delta": float(scheduler.delta)}
