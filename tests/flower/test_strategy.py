"""SchedulerStrategy: a real Flower simulation (Ray) and fast in-process runs of the same protocol.

The simulation test starts Flower's Simulation Engine once (module fixture, ~15 s of Ray start-up)
and runs three strategies one after the other on the same 10 nodes: ADCS with probe rounds, Uniform
with crashing and corrupt clients, and PowerOfChoice with loss queries. The clients log every
message they receive, so who trained is checked against the clients' own record, and every round's
model is checked against adcs's computation of the same rounds (conftest.reference_run).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.task_identity import TaskIdentity

from adcs.aggregation import Robust, RobustAggregation, coordinate_median
from adcs.columns import COLUMNS, Column
from adcs.flower import (
    LocalData,
    SchedulerStrategy,
    Settings,
    make_client_app,
    minibatch_indices,
)
from adcs.schedulers import ADCS, OCS, PowerOfChoice, Uniform
from adcs.schedulers.base import Probe, ProbeKind, Selection

from .conftest import (
    TIMEOUT_S,
    TRAIN_CONFIG,
    client_update,
    grid_of,
    instrumented_app,
    read_log,
    reference_run,
    simulate_flower,
    small_model,
    synthetic_clients,
)

N = 10
SEED = 7
REPO = Path(__file__).resolve().parents[2]


def initial_arrays() -> ArrayRecord:
    return ArrayRecord({"params": Array(small_model().init_params(1)[0])})


def plain_app(clients: list[LocalData]) -> ClientApp:
    return make_client_app(lambda pid, context: clients[pid], model=small_model())


@pytest.fixture(scope="module")
def clients() -> list[LocalData]:
    return synthetic_clients(N, seed=1)


@pytest.fixture
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Flower sets in a ServerApp process before messages can be created."""
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


def run_inprocess(
    scheduler: Any, clients: list[LocalData], rounds: int, apps: Any = None, **settings: Any
) -> tuple[SchedulerStrategy, Any, Any]:
    apps = apps or (lambda k: plain_app(clients))
    grid = grid_of(apps, len(clients))
    strategy = SchedulerStrategy(scheduler, len(clients), seed=SEED, **settings)
    result = strategy.start(
        grid, initial_arrays(), num_rounds=rounds, train_config=ConfigRecord(dict(TRAIN_CONFIG))
    )
    return strategy, result, grid


# --------------------------------------------------------------------------- real Flower simulation

PHASES: dict[str, tuple[Any, int]] = {
    "adcs": (ADCS(m=4, theta=0.8, refresh_every=3), 6),
    "faulty": (Uniform(m=6), 5),
    "poc": (PowerOfChoice(m=4), 5),
}
FAULTY = {2: "raise", 5: "nan", 7: "no-loss"}


@pytest.fixture(scope="module")
def simulation(
    clients: list[LocalData], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One Flower simulation (10 nodes, Ray backend) running the three phases in turn."""
    log_path = str(tmp_path_factory.mktemp("flower") / "clients.log")
    client_app = instrumented_app(plain_app(clients), log_path, FAULTY, fault_phase="faulty")
    out: dict[str, Any] = {"strategies": {}, "models": {}, "log": log_path}

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        for phase, (scheduler, rounds) in PHASES.items():
            strategy = SchedulerStrategy(
                scheduler, N, seed=SEED, connect_timeout_s=TIMEOUT_S, wait_for_all_s=TIMEOUT_S
            )

            def keep(server_round: int, arrays: ArrayRecord, phase: str = phase) -> None:
                out["models"][phase, server_round] = arrays["params"].numpy()

            config = ConfigRecord({**TRAIN_CONFIG, "phase": phase})
            strategy.start(grid, initial_arrays(), rounds, TIMEOUT_S, config, None, keep)
            out["strategies"][phase] = strategy

    simulate_flower(server_app, client_app, N)
    return out


@pytest.mark.parametrize("phase", list(PHASES))
def test_simulation_trains_exactly_the_scheduled_nodes(
    simulation: dict[str, Any], phase: str, clients: list[LocalData]
) -> None:
    scheduler, rounds = PHASES[phase]
    strategy: SchedulerStrategy = simulation["strategies"][phase]
    log = read_log(simulation["log"])
    broken = frozenset(FAULTY) if phase == "faulty" else frozenset()
    reference = reference_run(scheduler, clients, rounds, SEED, broken=broken)

    assert len(strategy.history) == rounds
    for record, ref in zip(strategy.history, reference, strict=True):
        r = record.server_round
        trained = {pid for ph, rnd, pid, kind in log if (ph, rnd, kind) == (phase, r, "train")}
        queried = {
            pid for ph, rnd, pid, kind in log if (ph, rnd, kind) == (phase, r, "query.adcs_loss")
        }
        np.testing.assert_array_equal(record.selected, ref.selected)
        if ref.probe_kind is ProbeKind.UPDATES:
            assert trained == set(range(N))
        else:
            assert trained == set(ref.selected.tolist())
        expected_queries = set(range(N)) if ref.probe_kind is ProbeKind.LOSSES else set()
        assert queried == expected_queries
        np.testing.assert_array_equal(record.aggregated, ref.aggregated)
        np.testing.assert_allclose(simulation["models"][phase, r], ref.params, rtol=1e-5, atol=1e-6)


def test_simulation_probe_rounds_and_accounting(simulation: dict[str, Any]) -> None:
    history = simulation["strategies"]["adcs"].history
    kinds = [r.probe_kind for r in history]
    assert kinds == [ProbeKind.UPDATES, ProbeKind.NONE, ProbeKind.NONE] * 2
    # ADCS's cost m·T + (N − m)·⌈T/R⌉ (docs/design.md §2): 4·6 + 6·2
    assert sum(r.client_updates for r in history) == 4 * 6 + 6 * 2
    poc = simulation["strategies"]["poc"].history
    assert [r.loss_evals for r in poc] == [N] * 5
    assert [r.client_updates for r in poc] == [4] * 5


def test_simulation_failed_nodes_are_excluded_and_rounds_complete(
    simulation: dict[str, Any],
) -> None:
    history = simulation["strategies"]["faulty"].history
    assert len(history) == 5
    hit = set()
    for record in history:
        chosen = set(record.selected.tolist())
        assert set(record.failed) == chosen & set(FAULTY)
        assert set(record.aggregated.tolist()) == chosen - set(FAULTY)
        hit |= set(record.failed)
    assert hit == set(FAULTY), "the test needs every kind of fault selected at least once"
    reasons = {c: why for r in history for c, why in r.failed.items()}
    assert "crashed on purpose" in reasons[2]
    assert "NaN" in reasons[5]
    assert "loss" in reasons[7]


# --------------------------------------------------------------------------- in-process runs


@pytest.mark.usefixtures("task_identity")
@pytest.mark.parametrize(
    "scheduler",
    [Uniform(m=4), ADCS(m=4, refresh_every=2), PowerOfChoice(m=3), OCS(m=5)],
    ids=lambda s: type(s).__name__,
)
def test_inprocess_matches_reference(scheduler: Any, clients: list[LocalData]) -> None:
    strategy, result, _grid = run_inprocess(scheduler, clients, 5)
    reference = reference_run(scheduler, clients, 5, SEED)
    for record, ref in zip(strategy.history, reference, strict=True):
        np.testing.assert_array_equal(record.selected, ref.selected)
        assert record.probe_kind is ref.probe_kind
    np.testing.assert_allclose(
        result.arrays["params"].numpy(), reference[-1].params, rtol=1e-5, atol=1e-6
    )


@pytest.mark.usefixtures("task_identity")
@pytest.mark.parametrize("fault", ["raise", "nan", "no-loss", "shape", "dtype", "pid", "extra-key"])
def test_bad_reply_is_excluded_with_reason(
    fault: str, clients: list[LocalData], caplog: pytest.LogCaptureFixture
) -> None:
    bad = 3

    def apps(k: int) -> ClientApp:
        return instrumented_app(plain_app(clients), faults={bad: fault})

    with caplog.at_level(logging.INFO, logger="adcs.flower.strategy"):
        strategy, result, _ = run_inprocess(Uniform(m=N), clients, 3, apps=apps)
    reference = reference_run(Uniform(m=N), clients, 3, SEED, broken=frozenset({bad}))
    for record in strategy.history:
        assert set(record.failed) == {bad}
        assert bad not in record.aggregated and len(record.aggregated) == N - 1
    np.testing.assert_allclose(
        result.arrays["params"].numpy(), reference[-1].params, rtol=1e-5, atol=1e-6
    )
    # Flower's own accounting of the exchange counts the bad reply as a failure, with its reason
    assert f"round 2 train: received {N - 1} results and 1 failures" in caplog.messages
    reasons = [m for m in caplog.messages if m.startswith(f"\t> client {bad} (node")]
    assert len(reasons) == 3 and reasons[0].endswith(strategy.history[0].failed[bad])
    assert [result.train_metrics_clientapp[r]["failures"] for r in (1, 2, 3)] == [1, 1, 1]


@pytest.mark.usefixtures("task_identity")
def test_failed_probe_is_not_selected(clients: list[LocalData]) -> None:
    def apps(k: int) -> ClientApp:
        return instrumented_app(plain_app(clients), faults={0: "nan", 1: "raise"})

    strategy, _, grid = run_inprocess(OCS(m=4), clients, 3, apps=apps)
    for record in strategy.history:
        assert record.probe_kind is ProbeKind.UPDATES
        assert not {0, 1} & set(record.selected.tolist())
        assert set(record.trained.tolist()) == set(range(2, N))
    assert sorted(grid.trained()) == sorted(list(range(N)) * 3)


@pytest.mark.usefixtures("task_identity")
def test_nodes_map_to_partitions_join_and_leave(clients: list[LocalData]) -> None:
    grid = grid_of(lambda k: plain_app(clients), N, first_node=5000)
    app, _ = grid.nodes[5000]
    grid.nodes[9999] = (app, 2)  # an impostor: partition 2 is served by node 5014
    grid.nodes[7777] = (app, N + 5)  # no such partition

    def churn(server_round: int, arrays: ArrayRecord) -> None:
        if server_round == 1:
            grid.nodes.pop(5000 + 7 * 4)  # partition 4's node leaves
        if server_round == 2:
            grid.nodes[8888] = (app, 4)  # and comes back under a new id

    strategy = SchedulerStrategy(Uniform(m=N - 1), N, seed=SEED)
    strategy.start(
        grid, initial_arrays(), 4, train_config=ConfigRecord(TRAIN_CONFIG), evaluate_fn=churn
    )
    first, second, third, _ = strategy.history
    assert first.available.all()
    assert not second.available[4] and 4 not in second.selected
    assert len(second.aggregated) == N - 1  # the other nine
    assert third.available.all()
    assert strategy.node_of == {k: (8888 if k == 4 else 5000 + 7 * k) for k in range(N)}
    trained = [
        (cfg["server-round"], node) for kind, _, cfg, node in grid.delivered if kind == "train"
    ]
    assert {r for r, node in trained if node == 5000 + 7 * 4} <= {1}
    assert {r for r, node in trained if node == 8888} <= {3, 4}
    trained_nodes = {node for _, node in trained}
    assert {9999, 7777}.isdisjoint(trained_nodes)


class _SubsetProbe(Uniform):
    """Probes the updates of clients 0–2 but selects 7, 8, 9 (not probed), weighted 1, 2, 3."""

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.UPDATES, clients=np.array([0, 1, 2]))

    def select(self, state: Any, round_idx: int, stats: Any, rng: Any) -> Any:
        assert stats.clients.tolist() == [0, 1, 2]
        return Selection(np.array([7, 8, 9]), weights=np.array([1.0, 2.0, 3.0])), state


@pytest.mark.usefixtures("task_identity")
def test_selected_but_unprobed_clients_train_and_weights_are_used(
    clients: list[LocalData],
) -> None:
    strategy, result, grid = run_inprocess(_SubsetProbe(m=3), clients, 1)
    assert sorted(grid.trained()) == [0, 1, 2, 7, 8, 9]
    record = strategy.history[0]
    assert record.client_updates == 6
    np.testing.assert_array_equal(record.aggregated, [7, 8, 9])
    params = small_model().init_params(1)[0]
    expected = sum(
        w * client_update(small_model(), params, clients[c], SEED, 1, c)[0]
        for c, w in zip([7, 8, 9], [1.0, 2.0, 3.0], strict=True)
    )
    np.testing.assert_allclose(result.arrays["params"].numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.usefixtures("task_identity")
def test_data_size_weighting_and_server_lr(clients: list[LocalData]) -> None:
    strategy, result, _ = run_inprocess(
        Uniform(m=4), clients, 1, weighting="data_size", server_lr=0.5
    )
    chosen = strategy.history[0].selected
    params = small_model().init_params(1)[0]
    sizes = np.asarray([len(clients[c].y_train) for c in chosen], dtype=float)
    updates = [client_update(small_model(), params, clients[c], SEED, 1, c)[0] for c in chosen]
    expected = 0.5 * sum(s * u for s, u in zip(sizes / sizes.sum(), updates, strict=True))
    np.testing.assert_allclose(result.arrays["params"].numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.usefixtures("task_identity")
def test_an_aggregation_rule_takes_the_updates_one_by_one(clients: list[LocalData]) -> None:
    rule = RobustAggregation(Robust.MEDIAN)
    strategy, result, _ = run_inprocess(Uniform(m=5), clients, 1, aggregator=rule)
    chosen = strategy.history[0].selected
    params = small_model().init_params(1)[0]
    updates = np.stack(
        [client_update(small_model(), params, clients[c], SEED, 1, c)[0] for c in chosen]
    )
    expected = params + coordinate_median(updates, np.full(5, 0.2))
    got = result.arrays["params"].numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert not np.allclose(got, params + updates.mean(axis=0), rtol=1e-3, atol=1e-5)


@pytest.mark.usefixtures("task_identity")
def test_evaluation_records_per_client_accuracy(clients: list[LocalData]) -> None:
    strategy, result, _grid = run_inprocess(Uniform(m=4), clients, 5, evaluate_every=2)
    assert [e.server_round for e in strategy.evaluations] == [2, 4, 5]
    last = strategy.evaluations[-1]
    assert np.isfinite(last.accuracy).all() and last.accuracy.shape == (N,)
    model = small_model()
    params = result.arrays["params"].numpy()[None]
    for k in (0, 5):
        _, correct = model.evaluate(params, clients[k].x_test, clients[k].y_test)
        assert last.accuracy[k] == pytest.approx(correct.mean())
    assert last.worst_accuracy == pytest.approx(last.accuracy.min())
    metrics: MetricRecord = result.evaluate_metrics_clientapp[5]
    assert metrics["accuracy"] == pytest.approx(last.accuracy.mean())
    assert metrics["worst-accuracy"] == pytest.approx(last.accuracy.min())
    assert metrics["p10_acc"] == pytest.approx(np.quantile(last.accuracy, 0.1))


@pytest.mark.usefixtures("task_identity")
def test_a_declared_result_column_is_in_the_evaluation_history(
    clients: list[LocalData],
) -> None:
    column = COLUMNS.add(
        Column("median_acc", "eval", of_eval=lambda e: float(np.median(e.accuracy)))
    )
    try:
        strategy, result, _grid = run_inprocess(Uniform(m=4), clients, 2, evaluate_every=2)
        last = strategy.evaluations[-1]
        assert last.columns["median_acc"] == pytest.approx(np.median(last.accuracy))
        assert last.columns["worst_acc"] == pytest.approx(last.worst_accuracy)
    finally:
        COLUMNS.remove(column.name)
    metrics: MetricRecord = result.evaluate_metrics_clientapp[2]
    assert metrics["median_acc"] == pytest.approx(np.median(last.accuracy))


@pytest.mark.usefixtures("task_identity")
def test_too_few_clients_raises(clients: list[LocalData]) -> None:
    grid = grid_of(lambda k: plain_app(clients), 3, n_partitions=N)
    strategy = SchedulerStrategy(Uniform(m=4), N, seed=SEED, connect_timeout_s=0.3)
    with pytest.raises(RuntimeError, match="only 3 clients are connected"):
        strategy.start(grid, initial_arrays(), num_rounds=1)


@pytest.mark.usefixtures("task_identity")
def test_later_rounds_go_on_with_fewer_than_m_but_not_with_none(
    clients: list[LocalData],
) -> None:
    grid = grid_of(lambda k: plain_app(clients), N)
    nodes = dict(grid.nodes)

    def leave(server_round: int, arrays: ArrayRecord) -> None:
        keep = {1: 2, 2: 0}.get(server_round)  # two nodes stay after round 1, none after round 2
        if keep is not None:
            grid.nodes = dict(list(nodes.items())[:keep])

    strategy = SchedulerStrategy(Uniform(m=4), N, seed=SEED, connect_timeout_s=0.3)
    with pytest.raises(RuntimeError, match="round needs at least 1"):
        strategy.start(grid, initial_arrays(), num_rounds=3, evaluate_fn=leave)
    first, second = strategy.history
    assert len(first.selected) == 4
    assert sorted(second.selected.tolist()) == [0, 1]  # min(m, available): all that are there


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_clients": 0}, "n_clients"),
        ({"n_clients": 5, "server_lr": 0.0}, "server_lr"),
        ({"n_clients": 5, "server_lr": float("nan")}, "server_lr"),
        ({"n_clients": 5, "weighting": "size"}, "weighting"),
        ({"n_clients": 5, "seed": -1}, "seed"),
        ({"n_clients": 5, "run_id": ""}, "run_id"),
        ({"n_clients": 5, "connect_timeout_s": -1}, "connect_timeout_s"),
        ({"n_clients": 5, "wait_for_all_s": float("nan")}, "wait_for_all_s"),
        ({"n_clients": 5, "evaluate_every": -2}, "evaluate_every"),
    ],
)
def test_settings_are_validated(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        Settings(**kwargs)


def test_scheduler_larger_than_federation_is_refused() -> None:
    with pytest.raises(ValueError, match="m=6 exceeds n_clients=5"):
        SchedulerStrategy(Uniform(m=6), 5)


def test_minibatch_draw_depends_only_on_seed_round_and_partition() -> None:
    a = minibatch_indices(3, 4, 5, n_examples=30, local_steps=2, batch_size=8)
    assert a.shape == (2, 8)
    np.testing.assert_array_equal(a, minibatch_indices(3, 4, 5, 30, 2, 8))
    assert all(len(set(row)) == 8 for row in a)  # distinct within a minibatch
    assert not np.array_equal(a, minibatch_indices(3, 5, 5, 30, 2, 8))
    assert not np.array_equal(a, minibatch_indices(3, 4, 6, 30, 2, 8))
    small = minibatch_indices(0, 1, 0, n_examples=3, local_steps=1, batch_size=8)
    assert small.shape == (1, 8) and set(small.ravel()) <= {0, 1, 2}


def test_adcs_imports_without_flower() -> None:
    code = (
        "import sys; sys.modules['flwr'] = None\n"
        "import adcs, adcs.schedulers\n"
        "try:\n    import adcs.flower\nexcept ImportError as err:\n    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "adcs[flower]" in out.stdout


@pytest.mark.usefixtures("task_identity")
def test_unanswering_nodes_are_dropouts_then_unavailable_until_they_answer_again(
    clients: list[LocalData],
) -> None:
    grid = grid_of(lambda k: plain_app(clients), N, first_node=3000)
    hung, dead = 3000 + 7 * 3, 3000 + 7 * 5  # partitions 3 and 5

    def trouble(server_round: int, arrays: ArrayRecord) -> None:
        if server_round == 1:
            grid.hung.add(hung)  # stops answering, stays connected
            grid.unavailable.add(dead)  # the SuperLink answers for it: heartbeat lost
        if server_round == 3:
            grid.hung.clear()
            grid.unavailable.clear()
            time.sleep(0.35)  # the handshake sent to the hung node in round 3 times out

    strategy = SchedulerStrategy(Uniform(m=N), N, seed=SEED)
    result = strategy.start(
        grid, initial_arrays(), 5, timeout=0.3, train_config=ConfigRecord(TRAIN_CONFIG),
        evaluate_fn=trouble,
    )  # fmt: skip
    first, second, third, fourth, fifth = strategy.history
    assert first.failed == {}
    assert second.failed == {
        3: "train: no reply within 0.3 s (the reply timeout)",
        5: "train: error reply from the SuperLink (code 5): Error: Node Unavailable (heartbeat)",
    }
    assert sorted(second.aggregated.tolist()) == [c for c in range(N) if c not in (3, 5)]
    # round 3: both are unresponsive, and their handshakes go unanswered too
    assert not third.available[[3, 5]].any() and third.available.sum() == N - 2
    assert len(third.selected) == N - 2 and third.failed == {}  # min(m, available)
    assert fourth.available.all() and fifth.available.all()  # they answered a handshake again
    assert sorted(fourth.aggregated.tolist()) == list(range(N))
    assert [result.train_metrics_clientapp[r]["failures"] for r in range(1, 6)] == [0, 2, 0, 0, 0]


@pytest.mark.usefixtures("task_identity")
def test_a_restarted_server_continues_from_its_checkpoint(
    clients: list[LocalData], tmp_path: Path
) -> None:
    # the driver's checkpoints serve SchedulerStrategy too: a run stopped after round 3 and
    # started again (fresh objects, as a restarted ServerApp) from its checkpoint of round 2
    # ends with the uninterrupted run's model, to the bit
    grid = grid_of(lambda k: plain_app(clients), len(clients))
    config = ConfigRecord(dict(TRAIN_CONFIG))

    def run(path: Path, stop_after: int | None = None) -> tuple[SchedulerStrategy, Any]:
        def stop(server_round: int, arrays: ArrayRecord) -> None:
            if server_round == stop_after:
                raise KeyboardInterrupt

        scheduler = ADCS(m=4, theta=0.8, refresh_every=3)
        strategy = SchedulerStrategy(
            scheduler, N, seed=SEED, checkpoint_path=str(path), checkpoint_every=2
        )
        return strategy, strategy.start(grid, initial_arrays(), 5, 5, config, None, stop)

    whole, uninterrupted = run(tmp_path / "whole.ckpt")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "stopped.ckpt", stop_after=3)
    before = len(grid.delivered)
    resumed, result = run(tmp_path / "stopped.ckpt")
    rounds = {c["server-round"] for kind, _, c, _ in grid.delivered[before:] if kind == "train"}
    assert min(rounds) == 3  # it went on after round 2, which it did not play again
    assert [r.server_round for r in resumed.history] == [1, 2, 3, 4, 5]
    for a, b in zip(resumed.history, whole.history, strict=True):
        np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_array_equal(
        result.arrays["params"].numpy(), uninterrupted.arrays["params"].numpy()
    )
    assert sorted(result.train_metrics_clientapp) == [1, 2, 3, 4, 5]
