"""A stream's runs play their rounds in lockstep, their client work batched (Algorithm 1).

A stream's runs share their minibatches, so they advance together: each round every run's
`RunRound` (the round, written once for every runtime) probes; the early
jobs they need are planned together (`adcs.sim.jobs`); the stream's
`_Lot` computes them over the union of their active clients; run by run,
each round gathers what its probe asked, selects and hands its aggregated clients to the lot
(while its probed updates are fresh in the cache); the lot trains the rest and steps every
model; every round observes, and each run keeps its record (`adcs.sim.runstate`).

The *lean* path (`_Stream.lean`) is the same round for a stream none of whose runs shows
its scheduler the delivered updates (every built-in scheduler but DivFL's stale form): step 5
has nothing to show, so each run keeps its round's record (`RunRound.played`) at once, without
forming the updates observed. Both paths keep the same record, a `PlayedRound`, and the numbers
are those of the general path (``tests/sim/test_lean.py``).
"""

from __future__ import annotations

from typing import Any

from adcs.round.machine import Available, RunRound
from adcs.sim.context import _Context
from adcs.sim.jobs import _plan_early
from adcs.sim.lot import _Lot
from adcs.sim.runstate import _Run

LEAN = True
"""Take the lean path where it applies (``False`` forces the general path: for tests)."""


class _Stream:
    """Runs that share a minibatch stream; they advance with shared gathers and products."""

    def __init__(self, runs: list[_Run], key: int, seed_key: int, ctx: _Context) -> None:
        self.runs = runs
        self.key = key
        self.seed_key = seed_key
        self.ctx = ctx
        self.params = ctx.model.init_params(len(runs))
        optimizer = ctx.config.server_optimizer
        self.server_state: Any = None if optimizer is None else optimizer.init(self.params)
        """The server optimizer's state of the stream's runs (`adcs.optimizers`)."""
        self.lean = not any(run.rules.observes for run in runs)
        """Whether no run observes updates (step 5 only keeps the record)."""

    def step(self, t: int, avail: Available) -> None:
        """One round of every run of the stream (Algorithm 1, lines 2–14)."""
        ctx = self.ctx
        # 1. probe; blind runs select at once (their choice needs nothing computed)
        rounds = [RunRound(run.rules, run.state, t, avail, run.rng) for run in self.runs]
        probes = [r.probe for r in rounds]
        targets = [r.probed for r in rounds]
        plan = _plan_early(
            probes, targets, [r.selection for r in rounds], ctx.no_clients, avail.clients
        )
        # 2. gather what the probes ask, over the union of the active clients
        lot = _Lot(ctx, rounds, self.params, self.key, t, probes, targets, plan)
        observed = []
        for j, rnd in enumerate(rounds):
            # 3. select: the contract, dropouts, the clock, the aggregation weights
            rnd.select(lot.gather(j, avail))
            rnd.trained()
            # 4. aggregate: the probed updates now, the others in the lot's products
            observed.append(lot.aggregate(j, rnd.stats, rnd.aggregated, rnd.aggregated_coef))
        self.server_state = lot.step_models(self.server_state)
        # 5. observe, record
        if self.lean and LEAN:
            for rnd, run in zip(rounds, self.runs, strict=True):
                run.record(rnd.played())
            return
        for rnd, run, (updates, losses) in zip(rounds, self.runs, observed, strict=True):
            run.record(rnd.observe(updates, losses))
