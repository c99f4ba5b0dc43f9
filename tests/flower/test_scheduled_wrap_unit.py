"""``Scheduled(strategy)`` against an in-process Grid (no Ray): what it refuses, N inferred from
the connected nodes, Flower's output with node ids and partition ids, the evaluation columns."""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")
pytest.importorskip("torch", reason="the torch extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    FedAdam,
    FedAvg,
    FedMedian,
    FedTrimmedAvg,
)

from adcs.flower import Scheduled, ScheduledFedAvg
from adcs.schedulers import Uniform

from . import quickstart_app
from .conftest import grid_of

pytestmark = pytest.mark.usefixtures("task_identity")

N = 4
CONFIG = ConfigRecord({"lr": 0.3, "phase": "unit"})


def initial_arrays() -> ArrayRecord:
    return ArrayRecord(quickstart_app.initial_model().state_dict())


def with_partition_id(inner: ClientApp) -> ClientApp:
    """``inner`` whose train replies also carry the app's ``partition-id`` metric."""
    app = ClientApp()

    def handle(msg: Message, context: Context) -> Message:
        reply = inner(msg, context)
        if msg.metadata.message_type != "train":
            return reply
        metrics = dict(reply.content["metrics"])
        metrics["partition-id"] = int(context.node_config["partition-id"])
        content = RecordDict({"arrays": reply.content["arrays"], "metrics": MetricRecord(metrics)})
        return Message(content, reply_to=msg)

    app.train()(handle)
    app.evaluate()(handle)
    return app


@pytest.mark.parametrize(
    "strategy",
    [
        FedAvg(fraction_train=0.5),
        FedAdam(fraction_train=0.25),
        DifferentialPrivacyClientSideFixedClipping(FedMedian(fraction_train=0.8), 1.0, 1.0, 2),
    ],
    ids=["fedavg", "fedadam", "dp-wrapped"],
)
def test_a_strategy_that_samples_its_own_trainers_is_refused(strategy: Any) -> None:
    with pytest.raises(ValueError, match=r"fraction_train=0\.\d+\) samples its own training"):
        Scheduled(strategy, Uniform(m=2))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match=r"wraps a strategy of flwr\.serverapp\.strategy"):
        Scheduled("fedavg", Uniform(m=2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="m=5 exceeds n_clients=4"):
        Scheduled(FedAvg(), Uniform(m=5), n_clients=4)
    with pytest.raises(ValueError, match=r"FedAvg\.fraction_evaluate"):
        Scheduled(FedAvg(fraction_evaluate=1.5), Uniform(m=2))
    with pytest.raises(
        ValueError,
        match=r"Scheduled takes no setting 'fraction_train'.*a wrapped strategy's own arg",
    ):
        Scheduled(FedAvg(), Uniform(m=2), fraction_train=0.5)
    with pytest.raises(ValueError, match="Scheduled takes no setting 'server_lr'"):
        Scheduled(FedAvg(), Uniform(m=2), server_lr=0.5)


def test_n_is_the_connected_nodes_and_the_output_is_flowers(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = quickstart_app.make_app(str(tmp_path / "clients.jsonl"))
    grid = grid_of(lambda k: with_partition_id(app), N)
    strategy = Scheduled(FedTrimmedAvg(beta=0.25), Uniform(m=2))
    assert strategy.n_clients is None
    with caplog.at_level(logging.INFO, logger="flwr"):
        result = strategy.start(grid, initial_arrays(), 2, 5, CONFIG, CONFIG)
    assert strategy.n_clients == N
    assert sorted(strategy.node_of.values()) == sorted(grid.nodes)
    text = caplog.text
    assert "Starting Scheduled(FedTrimmedAvg) strategy:" in text
    assert "[ROUND 2/2]" in text and "Final results:" in text
    assert "Aggregated MetricRecord" in text
    for record in strategy.history:  # the selection line names nodes and partitions
        names = [
            f"node {strategy.node_of[int(c)]} (partition {grid.nodes[strategy.node_of[int(c)]][1]})"
            for c in record.selected
        ]
        assert f"selected [{', '.join(names)}], aggregated [" in text
        assert f"selected {record.selected.tolist()}" not in text  # never adcs's indices
    assert " is client " not in text
    metrics = result.evaluate_metrics_clientapp[2]
    accuracy = strategy.evaluations[-1].accuracy
    assert metrics["worst_acc"] == pytest.approx(accuracy.min())
    assert metrics["avg_acc"] == pytest.approx(accuracy.mean())
    assert metrics["p10_acc"] == pytest.approx(np.quantile(accuracy, 0.1))
    assert "eval_loss" in metrics and "train_loss" in result.train_metrics_clientapp[2]


def _shape(line: str) -> str:
    """A log line less its numbers and record contents, the strategy's name unwrapped."""
    line = re.sub(r"\{.*\}", "{}", line).replace("Scheduled(FedTrimmedAvg)", "FedTrimmedAvg")
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line)


def test_a_scheduled_app_prints_every_line_its_wrapped_strategy_prints(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Flower's usual output: each line plain ``FedTrimmedAvg.start`` prints (its summary, the
    round headers, its configure/aggregate lines, the aggregated records, the final results
    block), numbers and record contents aside, ``Scheduled(FedTrimmedAvg)`` prints too."""
    app = quickstart_app.make_app(str(tmp_path / "clients.jsonl"))
    printed = []
    for strategy in (FedTrimmedAvg(beta=0.25), Scheduled(FedTrimmedAvg(beta=0.25), Uniform(m=2))):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="flwr"):
            strategy.start(grid_of(lambda k: app, N), initial_arrays(), 2, 5, CONFIG, CONFIG)
        printed.append(
            {_shape(r.getMessage()) for r in caplog.records if r.name.startswith("flwr")}
        )
    plain, scheduled = printed
    assert len(plain) > 20 and "configure_train: Sampled # nodes (out of #)" in plain
    assert plain <= scheduled, sorted(plain - scheduled)


def test_scheduled_fedavg_is_scheduled_around_fedavg() -> None:
    strategy = ScheduledFedAvg(Uniform(m=2), fraction_evaluate=0.5, min_available_nodes=3)
    assert type(strategy.strategy) is FedAvg
    assert strategy.strategy.fraction_train == 1.0
    assert strategy.strategy.fraction_evaluate == 0.5
    assert strategy._min_available() == 3
    assert strategy.name == "Scheduled(FedAvg)"


@pytest.mark.parametrize(
    "value",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(6, dtype=np.int64),
        np.asarray(3.5, dtype=np.float64),  # 0-d
        np.zeros((0, 5), dtype=np.float16),
        np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),  # left to np.load
        np.asarray([True, False]),
    ],
    ids=["f32", "i64", "0d", "empty", "fortran", "bool"],
)
def test_a_replys_arrays_decode_as_flowers_own(value: np.ndarray) -> None:
    from flwr.app import Array

    from adcs.flower.dropin import decoded

    array = Array(value)
    got = decoded(array)
    want = array.numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_truncated_array_is_not_read_past_its_bytes() -> None:
    from flwr.app import Array

    from adcs.flower.dropin import decoded

    array = Array(np.arange(10, dtype=np.float32))
    array.data = array.data[:-4]  # one float short: np.load's own error, not a short view
    with pytest.raises(ValueError):
        decoded(array)


class _KeepsItsMessages(FedAvg):
    """FedAvg that remembers the train messages it built."""

    built: list[Message]

    def configure_train(self, *args: Any, **kwargs: Any) -> Any:
        messages = list(super().configure_train(*args, **kwargs))
        self.built = getattr(self, "built", []) + messages
        return messages


def test_the_train_messages_sent_are_the_wrapped_strategys_own(tmp_path: Any) -> None:
    """The wrapped strategy builds the messages: the very objects its configure_train returned
    are pushed, to the scheduler's picks only, with the link's TTL (the reply timeout)."""
    app = quickstart_app.make_app(str(tmp_path / "clients.jsonl"))
    grid = grid_of(lambda k: app, N)
    pushed: list[Message] = []
    push = grid.push_messages

    def recorded(messages: Any) -> Any:
        messages = list(messages)
        pushed.extend(messages)
        return push(messages)

    grid.push_messages = recorded  # type: ignore[method-assign]
    wrapped = _KeepsItsMessages(fraction_evaluate=0.0)
    strategy = Scheduled(wrapped, Uniform(m=2))
    strategy.start(grid, initial_arrays(), 2, 5, CONFIG, CONFIG)
    trains = [m for m in pushed if m.metadata.message_type == "train"]
    assert len(trains) == 4 and all(any(m is b for b in wrapped.built) for m in trains)
    assert all(m.metadata.ttl == 5 for m in trains)
    picked = [strategy.node_of[int(c)] for r in strategy.history for c in r.selected]
    assert sorted(m.metadata.dst_node_id for m in trains) == sorted(picked)
