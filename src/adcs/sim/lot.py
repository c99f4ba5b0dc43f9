"""A lot: the client computations of one minibatch stream in one round, in batched products.

Which (run, client) jobs the round needs is planned in `adcs.sim.jobs`; a lot executes them —
one gather of the planned clients' minibatches, one shared forward product over their union when
the model offers [`SharedInputs`][adcs.sim.SharedInputs], and memory-bounded independent
``loss_and_grad`` calls for the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adcs.round.machine import Available, RunRound
from adcs.schedulers.base import ClientStats, LossSource, Probe, ProbeKind
from adcs.sim.context import _SHARED_ROWS, _Context
from adcs.sim.jobs import _EarlyJobs, _locate
from adcs.sim.model import SharedForward, SharedInputs
from adcs.sim.spec import BoolArray, F32Array, F64Array, IntArray


class _Lot:
    """The client computations of one stream in one round (steps 2 and 4), executed in batched products.

    The early jobs (`_EarlyJobs`: every probed client and the selection of
    every blind run) are gathered once. With the shared-inputs path, one forward product of all
    the stream's runs over their union gives every loss, probed update and (after selection)
    aggregate those clients need; anything else becomes an independent job of ``loss_and_grad``.

    ``params`` (n_runs, dim) are the stream's models, stepped in place by `step_models`.
    """

    def __init__(
        self,
        ctx: _Context,
        runs: list[RunRound],
        params: F32Array,
        key: int,
        t: int,
        probes: list[Probe],
        targets: list[IntArray],
        plan: _EarlyJobs,
    ) -> None:
        self.ctx = ctx
        self.runs = runs
        self.params = params
        self.key = key
        self.t = t
        self.probes = probes
        self.targets = targets
        self.plan = plan
        self.union = plan.union
        # the union of every client (ascending, distinct): a client's position is its index
        self.full = self.union.size == ctx.data.n_clients
        self.rows = self.ctx.minibatch(key, t, self.union) if self.union.size else None
        self.forward: SharedForward | None = None
        self.client_loss: F32Array | None = None
        dim = ctx.model.dim
        self.step = np.zeros((len(runs), dim), dtype=np.float32)  # Σ c_i Δ_i of every run
        self.stepped = np.zeros(len(runs), dtype=bool)  # which runs aggregated any client
        self.weighted: list[tuple[int, IntArray, F64Array]] = []  # one weighted product
        self.jobs: list[tuple[int, IntArray, F64Array]] = []  # independent loss_and_grad jobs
        self.nothing = (np.empty((0, dim), np.float32), np.empty(0))  # what is not observed
        rows = self.union.size * self.ctx.config.batch_size
        if self.ctx.shared is not None and 0 < rows <= _SHARED_ROWS:
            self._shared_forward(self.ctx.shared)

    def _shared_forward(self, model: SharedInputs) -> None:
        ctx, batch = self.ctx, self.ctx.config.batch_size
        assert self.rows is not None
        first = self.rows[:, :batch].reshape(-1)
        self.forward = model.shared_forward(self.params, *ctx.data.train_batch(first))
        self.client_loss = self.forward.sample_loss.reshape(
            len(self.runs), self.union.size, batch
        ).mean(axis=2)

    def _positions(self, clients: IntArray) -> IntArray:
        """Positions in the union of clients it holds."""
        return clients if self.full else np.searchsorted(self.union, clients)

    def _held(self, got: ClientStats, clients: IntArray) -> tuple[BoolArray, IntArray]:
        """Which ``clients`` the probe's statistics hold, and their rows there."""
        if self.full and got.n_probed == self.union.size:  # every client probed: row = index
            return np.ones(clients.size, dtype=bool), clients
        return _locate(got.clients, clients)

    # -- step 2 --------------------------------------------------------------------------------

    def gather(self, j: int, avail: Available) -> ClientStats:
        """ClientStats of run j: what its probe asked for, at the current model."""
        probe, clients = self.probes[j], self.targets[j]
        if probe.kind is ProbeKind.NONE:
            return avail.blind
        ctx = self.ctx
        params = self.params
        if probe.kind is ProbeKind.LOSSES:
            if clients.size == 0:
                losses = np.empty(0)
            elif probe.loss_source is LossSource.FULL:
                losses = ctx.full_losses(params[j], clients)
            elif self.client_loss is not None:
                losses = self.client_loss[j, self._positions(clients)].astype(np.float64)
            else:
                rows = self._rows_of(clients)
                losses = ctx.first_losses(params, np.full(clients.size, j), rows).astype(np.float64)
            return ClientStats(avail.mask, clients, losses)
        if clients.size == 0:  # nobody to probe (none available)
            updates, losses32 = np.empty((0, ctx.model.dim), np.float32), np.empty(0, np.float32)
        elif self.forward is not None and ctx.shared is not None:
            assert self.client_loss is not None
            pos = self._positions(clients)
            updates = ctx.shared.block_grads(
                self.forward, j, pos, ctx.config.batch_size, -ctx.config.lr_at(self.t)
            )
            losses32 = self.client_loss[j, pos]
        else:
            updates, losses32 = ctx.local_updates(
                params, np.full(clients.size, j), self._rows_of(clients), self.t, clients, self.key
            )
        return ClientStats(avail.mask, clients, losses32.astype(np.float64), updates)

    def _rows_of(self, clients: IntArray) -> IntArray:
        """The training rows of clients of the union (their round-t minibatches)."""
        assert self.rows is not None
        return self.rows[self._positions(clients)]

    # -- step 4 --------------------------------------------------------------------------------

    def aggregate(
        self, j: int, got: ClientStats, clients: IntArray, coef: F64Array
    ) -> tuple[F32Array, F64Array]:
        """Step 4 of run j once it has selected: its aggregated ``clients`` (n,) with their
        coefficients c (n,) enter the step of its model (`step_models`).

        The updates the probe holds are reused at once, while they are fresh in the cache; the
        others join the shared weighted product or the independent jobs. Returns the clients'
        updates (n, dim) and their first-minibatch losses at w⁽ᵗ⁾ when the run observes updates
        or has an aggregation rule (then what the rule received), else empty arrays. The
        weights and the count of updates computed are the round's
        (`adcs.round.machine.RunRound`).
        """
        run = self.runs[j]
        self.stepped[j] = clients.size > 0
        if run.rules.aggregator is not None:  # the aggregation hook: updates one by one
            return self._aggregate_apart(j, run, clients, coef, got)
        have, pos = self._reuse(j, got, clients, coef)
        if run.observes:
            observed = self._observed(j, clients, have, pos, got)
            if not have.all():
                missing = ~have
                self.step[j] += coef[missing].astype(np.float32) @ observed[0][missing]
            return observed
        if not have.any():  # nothing held: every aggregated client trains (if any)
            if clients.size:
                self._route(j, clients, coef)
        elif not have.all():
            self._route(j, clients[~have], coef[~have])
        return self.nothing

    def step_models(self, server_state: Any = None) -> Any:
        """Add the shared weighted product and the independent jobs to the step, and step
        every run's model: w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ c_i Δ_i, or the server optimizer's step from
        Σ c_i Δ_i (``SimConfig.server_optimizer``, its state ``server_state`` of the stream's
        runs). Returns the optimizer's new state (``None`` without one)."""
        ctx, cfg, step = self.ctx, self.ctx.config, self.step
        weighted, jobs = self.weighted, self.jobs
        if weighted:
            idx = [j for j, _, _ in weighted]
            step[idx] += self._weighted(weighted)
        if jobs:
            run_index = np.concatenate([np.full(c.size, j) for j, c, _ in jobs])
            clients = np.concatenate([c for _, c, _ in jobs])
            updates, _ = ctx.local_updates(
                self.params, run_index, self._rows_for(clients), self.t, clients, self.key
            )
            updates *= np.concatenate([w for _, _, w in jobs]).astype(np.float32)[:, None]
            # row by row in job order: the same additions as np.add.at, in the same order (so the
            # same bits), without its per-element dispatch (7 ms → 0.2 ms a round for LeNet-5)
            for j, update in zip(run_index.tolist(), updates, strict=True):
                step[j] += update
        optimizer = cfg.server_optimizer
        if optimizer is None:
            step *= np.float32(cfg.server_lr)
        else:
            step, server_state = optimizer.update(step, server_state, self.stepped)
        self.params += step
        return server_state

    def _reuse(
        self, j: int, got: ClientStats, clients: IntArray, coef: F64Array
    ) -> tuple[BoolArray, IntArray]:
        """Add run j's aggregated clients whose update the probe holds to ``step[j]`` (one
        product over the probe's rows); which of ``clients`` it holds, and their rows there."""
        if got.updates is None:
            return np.zeros(clients.size, dtype=bool), self.ctx.no_clients
        have, pos = self._held(got, clients)
        if have.any():
            over_probe = np.zeros(got.n_probed, dtype=np.float32)
            over_probe[pos[have]] = coef[have]
            self.step[j] += over_probe @ got.updates
        return have, pos

    def _route(self, j: int, lost: IntArray, coef: F64Array) -> None:
        """Send run j's clients still to train into the shared weighted product when the
        forward pass covers them, else into independent jobs."""
        if self.forward is not None and (self.full or self.plan.covers(j, lost)):
            self.weighted.append((j, lost, coef))
        else:
            self.jobs.append((j, lost, coef))

    def _aggregate_apart(
        self,
        j: int,
        run: RunRound,
        clients: IntArray,
        coef: F64Array,
        got: ClientStats,
    ) -> tuple[F32Array, F64Array]:
        """Step run j through its aggregator (`adcs.aggregation`) and add it to ``step[j]``.

        Every returned client's update is formed on its own (probed ones reused), never folded
        into the shared weighted product, so that the aggregator can replace some (a poison) or
        combine them robustly. Returns what the server received with the first-minibatch losses,
        for ``observe``.
        """
        if got.updates is not None:
            have, pos = _locate(got.clients, clients)
        else:
            have, pos = np.zeros(clients.size, dtype=bool), self.ctx.no_clients
        updates, losses = self._observed(j, clients, have, pos, got)
        received, aggregate = run.aggregate(clients, updates, coef)
        self.step[j] += aggregate
        return received, losses

    def _rows_for(self, clients: IntArray) -> IntArray:
        """Training rows of any clients at this round (from the union's draw where it has them)."""
        in_union, pos = _locate(self.union, clients)
        if self.rows is not None and in_union.all():
            return self.rows[pos]
        return self.ctx.minibatch(self.key, self.t, clients)

    def _observed(
        self, j: int, clients: IntArray, have: BoolArray, pos: IntArray, got: ClientStats
    ) -> tuple[F32Array, F64Array]:
        """The updates (n, dim) and first losses (n,) of run j's returned clients."""
        ctx = self.ctx
        out = np.empty((clients.size, ctx.model.dim), dtype=np.float32)
        losses = np.empty(clients.size)
        if have.any():
            assert got.updates is not None and got.losses is not None
            out[have] = got.updates[pos[have]]
            losses[have] = got.losses[pos[have]]
        missing = clients[~have]
        if missing.size:
            in_union, upos = _locate(self.union, missing)
            if self.forward is not None and ctx.shared is not None and in_union.all():
                assert self.client_loss is not None
                out[~have] = ctx.shared.block_grads(
                    self.forward, j, upos, ctx.config.batch_size, -ctx.config.lr_at(self.t)
                )
                losses[~have] = self.client_loss[j, upos]
            else:
                upd, first = ctx.local_updates(
                    self.params,
                    np.full(missing.size, j),
                    self._rows_for(missing),
                    self.t,
                    missing,
                    self.key,
                )
                out[~have], losses[~have] = upd, first
        return out, losses

    def _weighted(self, parts: list[tuple[int, IntArray, F64Array]]) -> F32Array:
        """Σ c_i Δ_i over each listed run's clients (all in the union): one weighted product."""
        ctx, cfg = self.ctx, self.ctx.config
        batch = cfg.batch_size
        assert self.forward is not None and ctx.shared is not None
        sample_weights = np.zeros((len(parts), self.union.size), dtype=np.float32)
        for i, (_, clients, coef) in enumerate(parts):
            sample_weights[i, self._positions(clients)] = coef
        sample_weights *= np.float32(-cfg.lr_at(self.t) / batch)
        per_sample = np.repeat(sample_weights, batch, axis=1)
        return ctx.shared.weighted_grads(self.forward, [j for j, _, _ in parts], per_sample)
