"""A stream's runs play their rounds in lockstep, their client work batched (Algorithm 1).

A stream's runs share their minibatches, so they advance together: each round every run's
:class:`~adcs.roundplay.RunRound` (the round, written once for every runtime) probes; the early
jobs they need are planned together (:mod:`adcs.sim.jobs`); the stream's
:class:`~adcs.sim.lot._Lot` computes them over the union of their active clients; every round
selects; the lot trains the clients the rounds name and steps every model; every round
observes, and each run keeps its record (:mod:`adcs.sim.runstate`).
"""

from __future__ import annotations

import numpy as np

from adcs.roundplay import Available, RunRound
from adcs.sim.context import _Context
from adcs.sim.jobs import _plan_early
from adcs.sim.lot import _Lot
from adcs.sim.runstate import _Run
from adcs.sim.spec import BoolArray, F64Array, IntArray


class _Stream:
    """Runs that share a minibatch stream; they advance with shared gathers and products."""

    def __init__(self, runs: list[_Run], key: int, seed_key: int, ctx: _Context) -> None:
        self.runs = runs
        self.key = key
        self.seed_key = seed_key
        self.ctx = ctx
        self.params = ctx.model.init_params(len(runs))
        self.timed = ctx.system is not None

    def step(self, t: int, avail: Available) -> None:
        """One round of every run of the stream (Algorithm 1, lines 2–14)."""
        ctx = self.ctx
        # 1. probe; blind runs select at once (their choice needs nothing computed)
        rounds = [RunRound(run.rules, run.state, t, avail, run.rng) for run in self.runs]
        probes = [r.probe for r in rounds]
        targets = [r.probed for r in rounds]
        # 2. gather what the probes ask, over the union of the active clients
        plan = _plan_early(probes, targets, [r.selection for r in rounds], ctx.no_clients)
        lot = _Lot(ctx, rounds, self.params, self.key, t, probes, targets, plan)
        stats = [lot.gather(j, avail) for j in range(len(rounds))]
        # 3. select: the contract, dropouts, the clock, the aggregation weights
        for rnd, got in zip(rounds, stats, strict=True):
            rnd.select(got)
            rnd.trained()
        # 4. train the aggregated clients, and aggregate
        chosen, returned, coefs = self._aggregated(rounds)
        observed = lot.train_and_step(stats, chosen, returned, coefs)
        # 5. observe, record
        for rnd, run, (updates, losses) in zip(rounds, self.runs, observed, strict=True):
            run.record(rnd.observe(updates, losses))

    def _aggregated(
        self, rounds: list[RunRound]
    ) -> tuple[list[IntArray], list[BoolArray], list[F64Array]]:
        """What the lot trains and aggregates: each run's selected clients, whether each
        returns, and their coefficients — on a clock only the aggregated ones (a deadline drops
        clients without any dropout rate)."""
        if not self.timed:
            return (
                [r.selected for r in rounds],
                [r.returned for r in rounds],
                [r.coef for r in rounds],
            )
        return (
            [r.selected[r.returned] for r in rounds],
            [np.ones(int(np.count_nonzero(r.returned)), dtype=bool) for r in rounds],
            [r.coef[r.returned] for r in rounds],
        )
