"""ScheduledFedAvg against an in-process Grid (no Ray): untrusted replies, lost nodes, the
scheduler's weights, sketched updates, the evaluations' result columns, scheduler names and
checkpoints."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")
pytest.importorskip("torch", reason="the torch extra is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

from adcs.columns import COLUMNS, Column
from adcs.flower import ScheduledFedAvg
from adcs.schedulers import DivFL, Uniform
from adcs.schedulers.base import ClientStats, Probe, ProbeKind, Selection
from adcs.sketch import UpdateSketch
from adcs.streams import stream_key
from tests.plugins.my_selection import LowestIndex

from . import quickstart_app
from .conftest import grid_of

N = 4
CONFIG = ConfigRecord({"lr": 0.3, "phase": "unit"})


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Flower's runtime sets before a ServerApp makes Messages."""
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


def initial_arrays() -> ArrayRecord:
    return ArrayRecord(quickstart_app.initial_model().state_dict())


def faulty(inner: ClientApp, faults: dict[int, str]) -> ClientApp:
    """``inner`` whose ``train`` replies from the partitions in ``faults`` are broken."""
    app = ClientApp()

    def handle(msg: Message, context: Context) -> Message:
        fault = faults.get(int(context.node_config["partition-id"]))
        if msg.metadata.message_type == "train" and fault == "raise":
            raise RuntimeError("crashed on purpose")
        reply = inner(msg, context)
        if msg.metadata.message_type != "train" or fault is None:
            return reply
        arrays = {k: v.numpy() for k, v in reply.content["arrays"].items()}
        metrics = dict(reply.content["metrics"])
        if fault == "nan":
            arrays["fc.weight"] = np.full_like(arrays["fc.weight"], np.nan)
        elif fault == "shape":
            arrays["fc.bias"] = arrays["fc.bias"][:-1]
        elif fault == "dtype":
            arrays["fc.bias"] = arrays["fc.bias"].astype(np.float64)
        elif fault == "missing-key":
            del arrays["bn.running_var"]
        elif fault == "no-size":
            del metrics["num-examples"]
        record = ArrayRecord({k: Array(np.array(v)) for k, v in arrays.items()})
        content = RecordDict({"arrays": record, "metrics": MetricRecord(metrics)})
        return Message(content, reply_to=msg)

    app.train()(handle)
    app.evaluate()(handle)
    return app


def log_path(tmp_path: Any) -> str:
    return str(tmp_path / "clients.jsonl")


REASONS = {
    "raise": "crashed on purpose",
    "nan": "'fc.weight' holds NaN or inf",
    "shape": "'fc.bias' is float32[2], expected float32[3]",
    "dtype": "'fc.bias' is float64[3], expected float32[3]",
    "missing-key": "differ from the model's",
    "no-size": "'num-examples'",
}


@pytest.mark.parametrize("fault", list(REASONS))
def test_untrusted_reply_is_excluded_with_its_reason(
    tmp_path: Any, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = quickstart_app.make_app(log_path(tmp_path))
    grid = grid_of(lambda k: faulty(app, {2: fault}), N)
    strategy = ScheduledFedAvg(Uniform(m=N), N, fraction_evaluate=0.0)
    with caplog.at_level(logging.INFO, logger="flwr"):
        result = strategy.start(grid, initial_arrays(), 1, 5, CONFIG, CONFIG)
    record = strategy.history[0]
    bad = [c for c, node in strategy.node_of.items() if grid.nodes[node][1] == 2]
    assert list(record.failed) == bad
    assert REASONS[fault] in record.failed[bad[0]]
    # the failure is printed under its node id, not adcs's client index
    line = f"\t> node {strategy.node_of[bad[0]]}: {record.failed[bad[0]]}"
    assert line in caplog.messages
    assert not any(m.startswith("\t> client") for m in caplog.messages)
    assert bad[0] not in record.aggregated and len(record.aggregated) == N - 1
    assert result.train_metrics_clientapp[1]["failures"] == 1


def with_metrics(inner: ClientApp, edits: dict[int, dict[str, Any]]) -> ClientApp:
    """``inner`` whose replies from the partitions in ``edits`` have those metrics set (None:
    removed)."""
    app = ClientApp()

    def handle(msg: Message, context: Context) -> Message:
        reply = inner(msg, context)
        edit = edits.get(int(context.node_config["partition-id"]))
        if edit is None:
            return reply
        metrics = {k: v for k, v in reply.content["metrics"].items() if k not in edit}
        metrics.update({k: v for k, v in edit.items() if v is not None})
        content = RecordDict({k: v for k, v in reply.content.items() if k != "metrics"})
        content["metrics"] = MetricRecord(metrics)
        return Message(content, reply_to=msg)

    app.train()(handle)
    app.evaluate()(handle)
    return app


@pytest.mark.parametrize("weights", [None, (0.7, 0.3)], ids=["fedavg", "scheduler"])
def test_replies_of_no_weight_in_all_do_not_stop_the_run(tmp_path: Any, weights: Any) -> None:
    # every client reports num-examples = 0: FedAvg's mean divided by 0 and the server stopped
    app = quickstart_app.make_app(log_path(tmp_path))
    grid = grid_of(lambda k: with_metrics(app, {k: {"num-examples": 0}}), N)
    strategy = ScheduledFedAvg(Fixed(weights=weights), N, min_evaluate_nodes=N)
    result = strategy.start(grid, initial_arrays(), 1, 5, CONFIG, CONFIG)
    kept = result.arrays["fc.weight"].numpy() == initial_arrays()["fc.weight"].numpy()
    assert kept.all() == (weights is None)  # the scheduler's own weights still step
    assert result.train_metrics_clientapp[1]["results"] == (0 if weights is None else 2)
    assert np.isfinite(strategy.evaluations[0].loss).all()
    assert 1 not in result.evaluate_metrics_clientapp  # FedAvg's mean of metrics is undefined


def test_an_evaluate_reply_without_weight_and_mixed_train_metrics(tmp_path: Any) -> None:
    # a missing num-examples in an evaluate reply, a metric a list in one train reply and a
    # number in another: both stopped the server (KeyError, TypeError in FedAvg's metric mean)
    app = quickstart_app.make_app(log_path(tmp_path))
    edits = {0: {"num-examples": None}, 1: {"extra": [1.0]}, 2: {"extra": 2.0}}
    grid = grid_of(lambda k: with_metrics(app, {k: edits[k]} if k in edits else {}), N)
    strategy = ScheduledFedAvg(Uniform(m=N), N, min_evaluate_nodes=N)
    result = strategy.start(grid, initial_arrays(), 1, 5, CONFIG, CONFIG)
    bad = next(c for c, node in strategy.node_of.items() if grid.nodes[node][1] == 0)
    assert bad in strategy.history[0].failed  # its train reply lacks the weight too
    loss = strategy.evaluations[0].loss
    assert np.isnan(loss[bad]) and np.isfinite(np.delete(loss, bad)).all()
    assert 1 not in result.evaluate_metrics_clientapp  # the evaluate replies' mixed metrics
    assert dict(result.train_metrics_clientapp[1]) == {"results": N - 1, "failures": 1}


def test_lost_node_is_a_dropout_and_leaves_the_available_clients(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    strategy = ScheduledFedAvg(Uniform(m=N), N, fraction_evaluate=0.0)
    lost = next(iter(grid.nodes))
    grid.hung.add(lost)  # connected, never answers: no reply within the timeout
    strategy.start(grid, initial_arrays(), 1, 0.3, CONFIG, CONFIG)
    client = next(c for c, n in strategy.node_of.items() if n == lost)
    assert "no reply within" in strategy.history[0].failed[client]
    del grid.nodes[lost]  # gone: not available in the next run's rounds
    grid.hung.clear()
    strategy = ScheduledFedAvg(Uniform(m=N - 1), N, fraction_evaluate=0.0)
    strategy.start(grid, initial_arrays(), 1, 5, CONFIG, CONFIG)
    assert int(strategy.history[0].available.sum()) == N - 1


@dataclass(frozen=True)
class Fixed:
    """A test scheduler: trains every available client, selects the first two with weights."""

    weights: tuple[float, float] | None = (0.7, 0.3)
    m: int = 2
    observes_updates: bool = False
    seen: list[tuple[int, ...]] = field(default_factory=list, compare=False, hash=False)
    updates: list[np.ndarray] = field(default_factory=list, compare=False, hash=False)

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.UPDATES)

    def select(
        self, state: Any, round_idx: int, stats: ClientStats, rng: Any
    ) -> tuple[Selection, Any]:
        assert stats.updates is not None
        self.seen.append(stats.updates.shape)
        self.updates.append(stats.updates.copy())
        w = None if self.weights is None else np.asarray(self.weights)
        return Selection(stats.clients[:2], w), state

    def observe(self, state: Any, *args: Any) -> Any:
        return state


def test_scheduler_weights_replace_fedavgs(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    strategy = ScheduledFedAvg(Fixed(), N, fraction_evaluate=0.0)
    replies: dict[int, dict[str, np.ndarray]] = {}

    result = strategy.start(grid, initial_arrays(), 1, 5, CONFIG, CONFIG)
    w0 = {k: v.numpy() for k, v in initial_arrays().items()}
    for c in (0, 1):
        node = strategy.node_of[c]
        app, pid = grid.nodes[node]
        context = Context(1, node, {"partition-id": pid}, RecordDict(), {})
        config = ConfigRecord({**CONFIG, "server-round": 1})
        content = RecordDict({"arrays": initial_arrays(), "config": config})
        reply = app(Message(content, node, "train"), context)
        replies[c] = {k: v.numpy() for k, v in reply.content["arrays"].items()}
    for key in ("fc.weight", "fc.bias", "bn.running_mean"):
        want = w0[key] + 0.7 * (replies[0][key] - w0[key]) + 0.3 * (replies[1][key] - w0[key])
        np.testing.assert_allclose(result.arrays[key].numpy(), want, rtol=1e-6, atol=1e-7)


def test_long_updates_reach_the_scheduler_sketched(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    dim = sum(v.numpy().size for v in initial_arrays().values())
    full, sketched = Fixed(weights=None), Fixed(weights=None)
    ScheduledFedAvg(full, N, fraction_evaluate=0.0).start(grid, initial_arrays(), 1, 5, CONFIG)
    ScheduledFedAvg(sketched, N, fraction_evaluate=0.0, sketch_dim=8).start(
        grid, initial_arrays(), 1, 5, CONFIG
    )
    assert full.seen == [(N, dim)] and sketched.seen == [(N, 8)]
    # the round's sketch (RoundRules.sketch) of the full updates, seeded by the strategy's seed
    want = UpdateSketch(dim, 8, stream_key(0)).apply(full.updates[0])
    np.testing.assert_allclose(sketched.updates[0], want, rtol=1e-5, atol=1e-6)


def evaluate_directly(grid: Any, node: int, arrays: ArrayRecord, server_round: int) -> float:
    """The accuracy the node's app reports for ``arrays`` (its evaluate handler, called here)."""
    app, pid = grid.nodes[node]
    context = Context(1, node, {"partition-id": pid}, RecordDict(), {})
    config = ConfigRecord({**CONFIG, "server-round": server_round})
    reply = app(
        Message(RecordDict({"arrays": arrays, "config": config}), node, "evaluate"), context
    )
    return float(reply.content["metrics"]["eval_acc"])


def test_a_declared_result_column_is_in_the_evaluation_history(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    column = COLUMNS.add(
        Column("median_acc", "eval", of_eval=lambda e: float(np.median(e.accuracy)))
    )
    try:
        strategy = ScheduledFedAvg(Uniform(m=2), N, min_evaluate_nodes=N)
        result = strategy.start(grid, initial_arrays(), 2, 5, CONFIG, CONFIG)
        last = strategy.evaluations[-1]
        assert last.columns["median_acc"] == pytest.approx(np.median(last.accuracy))
        assert last.columns["worst_acc"] == pytest.approx(last.worst_accuracy)
    finally:
        COLUMNS.remove(column.name)
    assert [e.server_round for e in strategy.evaluations] == [1, 2]
    for c, node in strategy.node_of.items():  # each client's accuracy is what its app reports
        want = evaluate_directly(grid, node, result.arrays, 2)
        assert last.accuracy[c] == pytest.approx(want)
    metrics: MetricRecord = result.evaluate_metrics_clientapp[2]
    assert metrics["median_acc"] == pytest.approx(np.median(last.accuracy))
    assert metrics["worst_acc"] == pytest.approx(last.accuracy.min())
    assert metrics["p10_acc"] == pytest.approx(np.quantile(last.accuracy, 0.1))
    assert "eval_acc" in metrics  # FedAvg's own aggregate stays


def test_a_resumed_server_keeps_the_evaluations(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    path = str(tmp_path / "server.ckpt")
    first = ScheduledFedAvg(Uniform(m=2), N, min_evaluate_nodes=N, checkpoint_path=path)
    first.start(grid, initial_arrays(), 2, 5, CONFIG, CONFIG)
    again = ScheduledFedAvg(Uniform(m=2), N, min_evaluate_nodes=N, checkpoint_path=path)
    again.start(grid, initial_arrays(), 3, 5, CONFIG, CONFIG)
    assert [e.server_round for e in again.evaluations] == [1, 2, 3]
    for a, b in zip(again.evaluations[:2], first.evaluations, strict=True):
        np.testing.assert_array_equal(a.accuracy, b.accuracy)


def test_an_app_without_accuracy_gives_no_columns(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    strategy = ScheduledFedAvg(Uniform(m=2), N, min_evaluate_nodes=N, accuracy_key="no_such")
    result = strategy.start(grid, initial_arrays(), 1, 5, CONFIG, CONFIG)
    assert np.isnan(strategy.evaluations[0].accuracy).all()
    assert np.isfinite(strategy.evaluations[0].loss).all()
    assert "worst_acc" not in result.evaluate_metrics_clientapp[1]


def test_divfl_by_name_and_bad_arguments() -> None:
    strategy = ScheduledFedAvg("divfl", N, scheduler_params={"m": 2})
    assert isinstance(strategy.scheduler, DivFL) and strategy.scheduler.m == 2
    with pytest.raises(ValueError, match="unknown scheduler 'nope'"):
        ScheduledFedAvg("nope", N, scheduler_params={"m": 2})
    own = ScheduledFedAvg(
        "tests.plugins.my_selection:LowestIndex", N, scheduler_params={"m": 2, "offset": 1}
    )
    assert own.scheduler == LowestIndex(m=2, offset=1)
    with pytest.raises(ValueError, match="m=5 exceeds n_clients=4"):
        ScheduledFedAvg(Uniform(m=5), N)
    with pytest.raises(ValueError, match="fraction_evaluate"):
        ScheduledFedAvg(Uniform(m=2), N, fraction_evaluate=2.0)
    with pytest.raises(ValueError, match="scheduler 'uniform'"):
        ScheduledFedAvg("uniform", N, scheduler_params={"m": 0})


def test_checkpoint_of_another_run_is_refused(tmp_path: Any) -> None:
    grid = grid_of(lambda k: quickstart_app.make_app(log_path(tmp_path)), N)
    path = str(tmp_path / "server.ckpt")
    ScheduledFedAvg(Uniform(m=2), N, fraction_evaluate=0.0, checkpoint_path=path).start(
        grid, initial_arrays(), 1, 5, CONFIG
    )
    other = ScheduledFedAvg(Uniform(m=3), N, fraction_evaluate=0.0, checkpoint_path=path)
    with pytest.raises(ValueError, match="belongs to another run \\(scheduler differ"):
        other.start(grid, initial_arrays(), 2, 5, CONFIG)


def test_the_example_differs_from_its_fedavg_twin_by_the_strategy_only() -> None:
    folder = Path(__file__).resolve().parents[2] / "examples" / "flower-pytorch" / "flower_pytorch"
    twin = (folder / "server_app_fedavg.py").read_text().splitlines()
    ours = (folder / "server_app.py").read_text().splitlines()
    removed = [line for line in twin if line not in ours]
    added = [line for line in ours if line not in twin]
    assert removed[0] == "from flwr.serverapp.strategy import FedAvg"
    assert added[0] == "from adcs.flower import ScheduledFedAvg"
    assert removed[1] == "    strategy = FedAvg(" and added[1] == "    strategy = ScheduledFedAvg("
    # every other changed line is an argument inside the strategy's constructor call
    start = ours.index("    strategy = ScheduledFedAvg(")
    call = ours[start : ours.index("    )", start)]
    assert all(line in call for line in added[1:])
    twin_start = twin.index("    strategy = FedAvg(")
    twin_call = twin[twin_start : twin.index("    )", twin_start)]
    assert all(line in twin_call for line in removed[1:])
    assert len(twin) - len(twin_call) == len(ours) - len(call)  # nothing else added or dropped
