"""The five steps of a round for the runs of one minibatch stream, in lockstep (Algorithm 1).

A stream's runs share their minibatches, so they advance together: each round every run probes,
the stream's :class:`~adcs.sim.lot._Lot` computes what they asked for over the union of their
active clients, every run selects, the lot trains the selected clients and steps every model,
and every run observes and records.
"""

from __future__ import annotations

import numpy as np

from adcs.rounds import aggregation_weights, check_selection
from adcs.schedulers.base import ClientStats, LossSource, Probe, ProbeKind, Selection
from adcs.sim.context import _Availability, _Context
from adcs.sim.jobs import _locate, _plan_early
from adcs.sim.lot import _Lot
from adcs.sim.runstate import _Run
from adcs.sim.spec import BoolArray, F64Array, IntArray
from adcs.sim.system import probe_phase, training_phase


class _Stream:
    """Runs that share a minibatch stream; they advance with shared gathers and products."""

    def __init__(self, runs: list[_Run], key: int, seed_key: int, ctx: _Context) -> None:
        self.runs = runs
        self.key = key
        self.seed_key = seed_key
        self.ctx = ctx
        self.params = ctx.model.init_params(len(runs))
        self.times = None if ctx.system is None else ctx.client_times(runs[0].spec.seed)

    # -- the five steps ------------------------------------------------------------------------

    def step(self, t: int, avail: _Availability) -> None:
        """One round of every run of the stream (Algorithm 1, lines 2–14)."""
        ctx = self.ctx
        runs = self.runs
        # 1. probe; blind runs select at once (their choice needs nothing computed)
        probes = [r.scheduler.probe(r.state, t, avail.mask, r.rng) for r in runs]
        targets = [self._targets(p, avail) for p in probes]
        selections: list[Selection | None] = [None] * len(runs)
        for j, probe in enumerate(probes):
            if probe.kind is ProbeKind.NONE:
                run = runs[j]
                selections[j], run.state = run.scheduler.select(run.state, t, avail.blind, run.rng)
        # 2. gather what the probes ask, over the union of the active clients
        plan = _plan_early(probes, targets, selections, ctx.no_clients)
        lot = _Lot(ctx, runs, self.params, self.key, t, probes, targets, plan)
        stats = [lot.gather(j, avail) for j in range(len(runs))]
        seen = [ctx.sketch(self.seed_key, s) for s in stats]  # sketched for the schedulers
        # 3. select
        chosen: list[IntArray] = []
        coefs: list[F64Array] = []
        returned: list[BoolArray] = []
        failed: list[int] = []
        for j, run in enumerate(runs):
            sel = selections[j]
            if sel is None:
                run.note_non_finite(t, stats[j])
                sel, run.state = run.scheduler.select(run.state, t, seen[j], run.rng)
            clients = check_selection(sel.clients, avail.mask, run.scheduler.m, who=run.spec.run_id)
            ok = ctx.returned(self.seed_key, t, clients)  # dropouts
            if self.times is None:
                failed.append(clients.size - int(np.count_nonzero(ok)))
            else:  # the clock: deadline and over-commitment decide who is aggregated
                ok, n_failed = self._timed(run, t, probes[j], targets[j], stats[j], clients, ok)
                failed.append(n_failed)
            chosen.append(clients)
            returned.append(ok)
            coefs.append(
                aggregation_weights(
                    clients, ok, scheduler_weights=sel.weights, base=ctx.base_weights
                )
            )
        # 4. train the selected clients that return, and aggregate
        if self.times is None:
            observed, fresh = lot.train_and_step(stats, chosen, returned, coefs)
        else:  # only the aggregated clients: a deadline drops clients without any dropout rate
            observed, fresh = lot.train_and_step(
                stats,
                [c[ok] for c, ok in zip(chosen, returned, strict=True)],
                [np.ones(int(np.count_nonzero(ok)), dtype=bool) for ok in returned],
                [c[ok] for c, ok in zip(coefs, returned, strict=True)],
            )
        # 5. observe, record
        for j, run in enumerate(runs):
            clients, ok = chosen[j], returned[j]
            if run.observes:
                updates, losses = observed[j]
                updates = ctx.sketch_rows(self.seed_key, updates)
                run.state = run.scheduler.observe(run.state, t, clients[ok], updates, losses)
            k = clients.size
            run.selected[t, :k] = clients
            run.returned[t, :k] = ok
            run.dropped += failed[j]
            probed = stats[j].n_probed if stats[j].updates is not None else 0
            run.client_updates += probed + fresh[j]
            if probes[j].kind is ProbeKind.LOSSES:
                run.loss_evals += int(targets[j].size)

    def _timed(
        self,
        run: _Run,
        t: int,
        probe: Probe,
        probed: IntArray,
        stats: ClientStats,
        clients: IntArray,
        ok: BoolArray,
    ) -> tuple[BoolArray, int]:
        """Time run's round t on the clock; return who is aggregated and how many failed.

        The probe phase waits for the slowest probed client; in the training phase a client
        whose update the probe already holds answers at once (:mod:`adcs.sim.system`).
        """
        times = self.times
        assert times is not None and run.round_s is not None and run.busy_s is not None
        if probe.kind is ProbeKind.UPDATES:
            probe_s = times.update[probed]
        elif probe.kind is ProbeKind.LOSSES:
            full = probe.loss_source is LossSource.FULL
            probe_s = (times.full_loss if full else times.loss)[probed]
        else:
            probe_s = times.update[self.ctx.no_clients]
        wait, probe_busy = probe_phase(probe_s)
        response = times.update[clients]
        if stats.updates is not None:
            response = np.where(_locate(stats.clients, clients)[0], 0.0, response)
        deadline = self.ctx.system.deadline if self.ctx.system is not None else None
        kept, seconds, busy = training_phase(response, ~ok, min(run.target, clients.size), deadline)
        run.round_s[t] = wait + seconds
        run.busy_s[t] = probe_busy + busy
        late = response > deadline if deadline is not None else np.zeros(clients.size, bool)
        return kept, int(np.count_nonzero(~ok | late))

    def _targets(self, probe: Probe, avail: _Availability) -> IntArray:
        """The clients to probe: distinct, available, ascending."""
        if probe.kind is ProbeKind.NONE:
            return self.ctx.no_clients
        if probe.clients is None:
            return avail.clients
        return np.unique(probe.targets(avail.mask))
