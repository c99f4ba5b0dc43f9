"""The engine at cross-device scale: data on demand, bounded evaluation, sketched updates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from adcs.data.synthetic import Synthetic
from adcs.schedulers import ADCS, OCS, DivFL, PowerOfChoice, Uniform
from adcs.schedulers.base import ClientStats, Probe, ProbeKind, Selection
from adcs.sim import BernoulliAvailability, RunSpec, SimConfig, simulate
from adcs.sim import evaluate as evaluate_module

from .conftest import make_data

POPULATION = Synthetic(5000).clients(np.random.default_rng(0))


def cross_device_config(**kw: Any) -> SimConfig:
    base: dict[str, Any] = {
        "rounds": 30, "batch_size": 8, "local_lr": 0.01, "eval_every": 10,
        "availability": BernoulliAvailability(0.05), "dropout": 0.1, "eval_clients": 300,
    }  # fmt: skip
    return SimConfig(**{**base, **kw})


def test_a_generated_population_runs_every_pool_method_with_bounded_evaluation() -> None:
    specs = [
        RunSpec(Uniform(m=20), 0, "uniform"),
        RunSpec(PowerOfChoice(m=20, candidates=60), 0, "poc"),
        RunSpec(OCS(m=20, candidates=60), 0, "ocs"),
        RunSpec(DivFL(m=20, candidates=60), 0, "divfl"),
        RunSpec(ADCS(m=20, refresh_every=1, candidates=60), 0, "adcs"),
    ]
    results = simulate(specs, POPULATION, cross_device_config())
    for r in results:
        assert r.client_acc.shape == (4, 300)
        assert r.eval_clients.shape == (300,) and np.all(np.diff(r.eval_clients) > 0)
        assert np.all(r.worst_acc <= r.p10_acc) and np.all(r.p10_acc <= r.avg_acc + 1e-12)
        assert r.group_acc.shape == (4, 10)
        picked = r.selected[r.selected >= 0]
        assert picked.size and picked.max() < 5000
        # 5% of 5000 available: about 250 a round, so every round fills its 20 slots
        assert (r.selected >= 0).all() and 200 < r.n_available.mean() < 300
        assert np.isfinite(r.final_params).all() and np.abs(r.final_params).max() > 0
    adcs = results[-1]
    # a pool of 60 per refresh (every round) and 20 selected, of which the probed are reused
    assert adcs.client_updates == 30 * 60
    np.testing.assert_array_equal(results[0].eval_clients, adcs.eval_clients)
    groups = POPULATION.groups[adcs.eval_clients]
    acc = adcs.client_acc[-1]
    np.testing.assert_allclose(adcs.group_acc[-1, 3], acc[groups == 3].mean())


def test_a_run_alone_equals_the_same_run_batched_on_generated_data() -> None:
    config = cross_device_config(rounds=12)
    together = simulate(
        [
            RunSpec(Uniform(m=20), 1, "u"),
            RunSpec(ADCS(m=20, refresh_every=3, candidates=50), 1, "a"),
        ],
        POPULATION,
        config,
    )
    alone = simulate(
        [RunSpec(ADCS(m=20, refresh_every=3, candidates=50), 1, "a")], POPULATION, config
    )
    np.testing.assert_array_equal(together[1].selected, alone[0].selected)
    np.testing.assert_allclose(together[1].final_params, alone[0].final_params, atol=1e-5)


def test_blockwise_evaluation_equals_the_kept_one(monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_data(seed=3, n_clients=12)
    spec = [RunSpec(ADCS(m=4, refresh_every=2), 0, "a"), RunSpec(Uniform(m=4), 0, "u")]
    config = SimConfig(rounds=6, eval_every=3, local_lr=0.05)
    kept = simulate(spec, data, config)
    monkeypatch.setattr(evaluate_module, "_EVAL_CACHE_BYTES", 0)
    monkeypatch.setattr(evaluate_module, "_EVAL_BLOCK_ROWS", 17)  # blocks cut through clients
    blocks = simulate(spec, data, config)
    for a, b in zip(kept, blocks, strict=True):
        np.testing.assert_array_equal(a.client_acc, b.client_acc)
        np.testing.assert_allclose(a.test_loss, b.test_loss, rtol=1e-6)


def test_eval_clients_is_a_fixed_subset_shared_by_seeds() -> None:
    data = make_data(seed=4, n_clients=12)
    config = SimConfig(rounds=4, eval_every=2, eval_clients=5)
    a, b = simulate([RunSpec(Uniform(m=3), 0, "u"), RunSpec(Uniform(m=3), 7, "v")], data, config)
    assert a.eval_clients.size == 5 and np.array_equal(a.eval_clients, b.eval_clients)
    full = simulate([RunSpec(Uniform(m=3), 0, "u")], data, SimConfig(rounds=4, eval_every=2))[0]
    np.testing.assert_allclose(a.client_acc, full.client_acc[:, a.eval_clients])
    with pytest.raises(ValueError, match="eval_clients"):
        SimConfig(rounds=4, eval_clients=0)


@dataclass(frozen=True, eq=False)
class _Recorder:
    """Probes every update, selects the first m available, records what it was shown."""

    m: int
    seen: list[tuple[str, int]] = field(default_factory=list)

    @property
    def observes_updates(self) -> bool:
        return True

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, t: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.UPDATES)

    def select(self, state: Any, t: int, stats: ClientStats, rng: Any) -> tuple[Selection, Any]:
        assert stats.updates is not None
        self.seen.append(("select", stats.updates.shape[1]))
        return Selection(np.flatnonzero(stats.available)[: self.m]), state

    def observe(self, state: Any, t: int, clients: Any, updates: Any, losses: Any) -> Any:
        self.seen.append(("observe", updates.shape[1]))
        return state


def test_schedulers_see_sketches_while_aggregation_uses_the_true_updates() -> None:
    data = make_data(seed=5, n_clients=10)
    dim = (data.input_shape[0] + 1) * data.n_classes
    plain, sketched = _Recorder(m=4), _Recorder(m=4)
    config = SimConfig(rounds=3, local_lr=0.05)
    a = simulate([RunSpec(plain, 0, "r")], data, config)[0]
    b = simulate(
        [RunSpec(sketched, 0, "r")], data, SimConfig(rounds=3, local_lr=0.05, sketch_dim=8)
    )[0]
    assert set(plain.seen) == {("select", dim), ("observe", dim)}
    assert set(sketched.seen) == {("select", 8), ("observe", 8)}
    # the same clients trained, aggregated from their true updates: the same model
    np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_array_equal(a.final_params, b.final_params)
    # a sketch no shorter than the update changes nothing, for any scheduler
    spec = [RunSpec(ADCS(m=4, refresh_every=2), 0, "a")]
    same = simulate(spec, data, SimConfig(rounds=5, local_lr=0.05, sketch_dim=dim))[0]
    base = simulate(spec, data, SimConfig(rounds=5, local_lr=0.05))[0]
    np.testing.assert_array_equal(same.selected, base.selected)
    with pytest.raises(ValueError, match="sketch_dim"):
        SimConfig(rounds=3, sketch_dim=0)
