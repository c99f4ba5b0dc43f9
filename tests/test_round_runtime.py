"""A third runtime in a few lines: one run's round (:mod:`adcs.round.machine`) driven by a plain loop.

:class:`LoopRuntime` is the recipe of docs/design.md §8 ("A new runtime"): it computes each
client's work on its own with NumPy (the simulator's logistic model and minibatch streams, one
client at a time, no batching across clients) and leaves every rule of the round — probe,
sketch, selection contract, dropouts, clock, weights, aggregation rule, observe — to
:func:`adcs.round.play.play`. It must reproduce :func:`adcs.sim.simulate`:

* exactly the same clients probed, selected and aggregated in every round, and the same counts
  (dropouts, client updates, loss evaluations, simulated seconds);
* the same model up to float32 rounding (rtol 1e-5): the simulator forms many clients' updates
  and their weighted sum in one batched product, whose sums round differently from one client
  at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from adcs.aggregation import Robust, RobustAggregation
from adcs.round.adapt import scheduler_to_ask
from adcs.round.clock import RoundClock
from adcs.round.contract import SelectionError
from adcs.round.machine import PlayedRound, RoundRules
from adcs.round.play import Trained, play
from adcs.schedulers import ADCS, OCS, PowerOfChoice, Uniform
from adcs.schedulers.base import LossSource
from adcs.sim import FederatedData, RunResult, RunSpec, SimConfig, simulate
from adcs.sim.model import LogisticRegression, local_update
from adcs.sim.system import SystemConfig, client_times
from adcs.sketch import UpdateSketch
from adcs.streams import Domain, counter_uniform, minibatch_indices, scheduler_rng, stream_key
from tests.sim.conftest import make_data

ROUNDS = 6


@dataclass
class _Clients:
    """The gatherer of one round: each client's loss or update at w⁽ᵗ⁾, one client at a time."""

    data: FederatedData
    config: SimConfig
    model: LogisticRegression
    params: np.ndarray
    key: int
    t: int

    def _rows(self, client: int) -> np.ndarray:
        cfg = self.config
        size = self.data.data_sizes[client : client + 1]
        local = minibatch_indices(self.key, [client], self.t, size, cfg.local_steps, cfg.batch_size)
        return self.data.train_rows(np.array([client]), local)  # (1, E, B)

    def losses(self, clients: np.ndarray, source: LossSource) -> dict[int, float | str]:
        assert source is LossSource.MINIBATCH
        out: dict[int, float | str] = {}
        for c in clients.tolist():
            x, y = self.data.train_batch(self._rows(c)[:, 0])  # the first minibatch
            loss, _ = self.model.loss_and_grad(self.params[None], x, y)
            out[c] = float(loss[0])
        return out

    def updates(self, clients: np.ndarray, features: bool = True) -> dict[int, Trained | str]:
        out: dict[int, Trained | str] = {}
        for c in clients.tolist():
            x, y = self.data.train_batch(self._rows(c))
            update, loss = local_update(self.model, self.params[None], x, y, self.config.local_lr)
            out[c] = Trained(update[0], float(loss[0]), float(self.data.data_sizes[c]))
        return out


@dataclass
class LoopRuntime:
    """One run, round after round, its client work in a Python loop over clients."""

    data: FederatedData
    config: SimConfig
    spec: RunSpec
    history: list[PlayedRound] = field(default_factory=list)

    def rules(self, dim: int) -> RoundRules:
        cfg, seed_key, n = self.config, stream_key(self.spec.seed), self.data.n_clients
        sketch = None
        if cfg.sketch_dim is not None:
            sketch = UpdateSketch(dim, cfg.sketch_dim, seed_key).apply
        clock = None
        if cfg.system is not None:
            profile = cfg.system.draw(self.spec.seed, self.data.groups)
            seconds = client_times(
                profile,
                dim=dim,
                local_samples=cfg.local_steps * cfg.batch_size,
                batch_size=cfg.batch_size,
                data_sizes=self.data.data_sizes,
                forward_cost=cfg.system.forward_cost,
            )
            clock = RoundClock(seconds, cfg.system.deadline)

        def dropout(t: int, clients: np.ndarray) -> np.ndarray:
            return np.asarray(counter_uniform(seed_key, Domain.DROPOUT, t, clients) >= cfg.dropout)

        invited = None if cfg.system is None else cfg.system.invited(self.spec.scheduler.m, n)
        return RoundRules(
            scheduler_to_ask(self.spec.scheduler, self.spec.run_id, clock, invited),
            target=self.spec.scheduler.m,
            who=self.spec.run_id,
            base_weights=self.data.data_sizes.astype(float)
            if cfg.weighting == "data_size"
            else None,
            sketch=sketch,
            dropout=dropout if cfg.dropout else None,
            clock=clock,
            aggregator=self.spec.aggregator,
        )

    def run(self) -> np.ndarray:
        """Play every round; the final model (dim,)."""
        cfg, data, seed = self.config, self.data, self.spec.seed
        model = LogisticRegression(int(np.prod(data.input_shape)), data.n_classes)
        params = model.init_params(1)[0]
        rules = self.rules(model.dim)
        rng = scheduler_rng(seed, self.spec.run_id)
        state = rules.scheduler.init(data.n_clients, data.data_sizes.astype(float))
        key = stream_key(seed) if cfg.common_minibatches else stream_key(seed, self.spec.run_id)
        for t in range(cfg.rounds):
            available = cfg.availability.mask(stream_key(seed), t, data.groups)
            clients = _Clients(data, cfg, model, params, key, t)
            played = play(rules, state, t, available, rng, clients, model.dim)
            record = played.record
            state = record.state
            step = played.step
            if step is None:
                step = record.aggregated_coef.astype(np.float32) @ played.rows(
                    record.aggregated, model.dim
                )
            params = params + np.asarray(step, dtype=np.float32) * np.float32(cfg.server_lr)
            self.history.append(record)
        return params


def _check_same(config: SimConfig, specs: list[RunSpec], data: FederatedData) -> list[RunResult]:
    """Assert the loop runtime plays every run as the simulator does; the simulator's results."""
    results = simulate(specs, data, config)
    for spec, result in zip(specs, results, strict=True):
        runtime = LoopRuntime(data, config, spec)
        params = runtime.run()
        m = spec.scheduler.m
        for t, record in enumerate(runtime.history):
            k = record.selected.size
            np.testing.assert_array_equal(record.selected, result.selected[t, :k])
            assert (result.selected[t, k:m] == -1).all()
            np.testing.assert_array_equal(record.returned, result.returned[t, :k])
            if result.round_time is not None:
                assert record.round_s == pytest.approx(result.round_time[t], rel=1e-12)
        assert sum(r.failed for r in runtime.history) == result.dropped
        assert sum(r.client_updates for r in runtime.history) == result.client_updates
        assert sum(r.loss_evals for r in runtime.history) == result.loss_evals
        np.testing.assert_allclose(params, result.final_params, rtol=1e-5, atol=1e-6)
    return results


def test_loop_runtime_matches_the_simulator_with_dropouts_sketches_and_weights() -> None:
    data = make_data(n_clients=10, clients_per_group=2)
    config = SimConfig(
        rounds=ROUNDS,
        batch_size=8,
        local_lr=0.1,
        eval_every=ROUNDS,
        weighting="data_size",
        dropout=0.2,
        sketch_dim=5,
    )
    specs = [
        RunSpec(Uniform(m=3), seed=1, run_id="uniform"),
        RunSpec(PowerOfChoice(m=3), seed=1, run_id="poc"),
        RunSpec(ADCS(m=3, refresh_every=2), seed=1, run_id="adcs"),
        RunSpec(OCS(m=4), seed=1, run_id="ocs"),
        RunSpec(Uniform(m=4), seed=1, run_id="median", aggregator=RobustAggregation(Robust.MEDIAN)),
    ]
    results = _check_same(config, specs, data)
    assert all(r.dropped > 0 for r in results)  # the dropouts were exercised
    assert results[1].loss_evals > 0 and results[2].client_updates > 0


def test_loop_runtime_matches_the_simulator_on_a_clock() -> None:
    data = make_data(n_clients=10, clients_per_group=2)
    system = SystemConfig(deadline=0.8, overcommit=0.5)
    config = SimConfig(rounds=ROUNDS, batch_size=8, local_lr=0.1, eval_every=ROUNDS, system=system)
    specs = [
        RunSpec(Uniform(m=3), seed=2, run_id="uniform"),
        RunSpec(ADCS(m=3, refresh_every=3), seed=2, run_id="adcs"),
    ]
    results = _check_same(config, specs, data)
    for result in results:  # 5 invited, at most 3 kept; some late
        assert (result.selected >= 0).sum(axis=1).tolist() == [5] * ROUNDS
        assert (result.returned.sum(axis=1) <= 3).all()
    assert sum(r.dropped for r in results) > 0


def test_a_selection_off_the_contract_is_refused_by_the_round() -> None:
    class Greedy(Uniform):
        def select(self, state, round_idx, stats, rng):  # type: ignore[no-untyped-def]
            selection, state = super().select(state, round_idx, stats, rng)
            return type(selection)(np.asarray([0, 0, 1])), state

    data = make_data(n_clients=6, clients_per_group=2)
    spec = RunSpec(Greedy(m=3), seed=0, run_id="greedy")
    config = SimConfig(rounds=1, batch_size=4, eval_every=1)
    with pytest.raises(SelectionError, match="greedy at round 0 must select 3 distinct"):
        LoopRuntime(data, config, spec).run()


class _Recorder:
    """A gatherer that records whether the round asked it for features."""

    def __init__(self) -> None:
        self.asked: list[bool] = []

    def losses(self, clients: np.ndarray, source: LossSource) -> dict[int, float | str]:
        raise AssertionError("Uniform probes no loss")

    def updates(self, clients: np.ndarray, features: bool = True) -> dict[int, Trained | str]:
        self.asked.append(features)
        update = np.ones(3, dtype=np.float32) if features else None
        return {int(c): Trained(update, 0.0, 1.0) for c in clients}


def test_a_round_asks_for_the_updates_only_where_it_looks_at_them() -> None:
    """A scheduler that does not observe updates, with no aggregation rule, has its clients
    trained without features (the Flower wrapper then flattens no reply); a rule needs them."""
    for aggregator, want in ((None, False), (RobustAggregation(Robust.MEDIAN), True)):
        scheduler = Uniform(m=2)
        rules = RoundRules(scheduler, aggregator=aggregator)
        gatherer = _Recorder()
        rng = np.random.default_rng(0)
        played = play(rules, scheduler.init(4, None), 0, np.ones(4, dtype=bool), rng, gatherer, 3)
        assert gatherer.asked == [want]
        assert played.record.aggregated.size == 2


class _Tagged:
    """A wrapper that is no dataclass: it declares itself (`SchedulerWrapper`)."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    @property
    def m(self) -> int:
        return int(self.scheduler.m)

    def around(self, scheduler: Any) -> _Tagged:
        return _Tagged(scheduler)


def test_a_declared_wrapper_is_rebuilt_around_the_resized_scheduler() -> None:
    from types import SimpleNamespace

    from adcs.adversary import Attack, Defence, Defended, Lie, Lying
    from adcs.round.adapt import SchedulerWrapper

    seconds = np.ones(6)
    clock = RoundClock(SimpleNamespace(update=seconds, loss=seconds, full_loss=seconds))
    tagged = _Tagged(Uniform(m=2))
    asked = scheduler_to_ask(tagged, "r", clock, invited=3)  # type: ignore[arg-type]
    assert isinstance(asked, _Tagged) and asked.scheduler == Uniform(m=3)
    assert tagged.scheduler == Uniform(m=2)  # rebuilt, not changed
    attacked = Lying(Defended(Uniform(m=2), Defence()), Attack(clients=(0,), lie=(Lie.LOSS,)))
    assert isinstance(attacked, SchedulerWrapper)
    assert isinstance(attacked.scheduler, SchedulerWrapper)  # the attack around the defences
    assert not isinstance(Uniform(m=2), SchedulerWrapper)
    resized = scheduler_to_ask(attacked, "r", clock, invited=3)
    assert resized.scheduler.scheduler == Uniform(m=3) and resized.m == 3
