"""The ClientApp side of the protocol: validation, and replies that match adcs's computation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

from adcs.flower import LocalData, TrainDefaults, make_client_app

from .conftest import TRAIN_CONFIG, client_update, small_model, synthetic_clients


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


def ask(app: ClientApp, kind: str, config: dict[str, Any], node_config: dict[str, Any]) -> Message:
    params = small_model().init_params(1)[0] + 0.1
    content = RecordDict(
        {"arrays": ArrayRecord({"w": Array(params)}), "config": ConfigRecord(config)}
    )
    request = Message(content, 5, kind)
    request.metadata.__dict__["_message_id"] = "m1"
    context = Context(1, 5, node_config, RecordDict(), {})
    return app(request, context)


@pytest.fixture
def app() -> ClientApp:
    clients = synthetic_clients(4)
    return make_client_app(lambda pid, context: clients[pid], model=small_model())


def test_train_reply_is_local_update_under_the_request_key(app: ClientApp) -> None:
    config = {**TRAIN_CONFIG, "server-round": 3, "adcs-seed": 11}
    reply = ask(app, "train", config, {"partition-id": 2})
    metrics = reply.content.metric_records["metrics"]
    update = reply.content.array_records["arrays"]["w"].numpy()
    params = small_model().init_params(1)[0] + 0.1
    expected, loss = client_update(small_model(), params, synthetic_clients(4)[2], 11, 3, 2)
    np.testing.assert_array_equal(update, expected)
    assert metrics["partition-id"] == 2 and metrics["loss"] == pytest.approx(loss)
    assert metrics["num-examples"] == 12


def test_loss_probe_is_the_first_minibatch_loss(app: ClientApp) -> None:
    config = {**TRAIN_CONFIG, "server-round": 3, "adcs-seed": 11}
    reply = ask(app, "query.adcs_loss", config, {"partition-id": 1})
    params = small_model().init_params(1)[0] + 0.1
    _, loss = client_update(small_model(), params, synthetic_clients(4)[1], 11, 3, 1)
    assert reply.content.metric_records["metrics"]["loss"] == pytest.approx(loss, rel=1e-6)


@pytest.mark.parametrize(
    ("config", "node_config", "match"),
    [
        ({"server-round": 1, "local-steps": 0}, {"partition-id": 0}, "local-steps"),
        ({"server-round": 1, "local-lr": float("inf")}, {"partition-id": 0}, "local-lr"),
        ({}, {"partition-id": 0}, "server-round"),
        ({"server-round": 1}, {}, "partition-id"),
    ],
)
def test_bad_requests_raise_naming_the_problem(
    app: ClientApp, config: dict[str, Any], node_config: dict[str, Any], match: str
) -> None:
    with pytest.raises(Exception, match=match):
        ask(app, "train", config, node_config)


def test_client_data_and_defaults_are_validated() -> None:
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="train data"):
        LocalData(x, np.zeros(2, dtype=int), x, np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="at least one training example"):
        LocalData(x[:0], np.zeros(0, dtype=int), x, np.zeros(3, dtype=int))
    assert LocalData(x, np.zeros(3), x, np.zeros(3)).x_train.dtype == np.float32
    with pytest.raises(ValueError, match="local_lr"):
        TrainDefaults(local_lr=0.0)
    with pytest.raises(ValueError, match="batch_size"):
        TrainDefaults(batch_size=0)


def test_the_client_trains_on_the_simulators_minibatch_rows() -> None:
    from adcs.flower.client import minibatch_indices
    from adcs.sim import FederatedData, SimConfig
    from adcs.sim.engine import _Context
    from adcs.streams import stream_key

    clients = synthetic_clients(4)
    sizes = np.array([c.x_train.shape[0] for c in clients])
    x = np.concatenate([c.x_train for c in clients])
    y = np.concatenate([c.y_train for c in clients])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    data = FederatedData(
        x, y, x, y, tuple(np.arange(o, o + s) for o, s in zip(offsets, sizes, strict=True)),
        tuple(np.arange(o, o + s) for o, s in zip(offsets, sizes, strict=True)),
        np.zeros(4, dtype=np.intp), 1, int(y.max()) + 1,
    )  # fmt: skip
    ctx = _Context(data, SimConfig(rounds=1, local_steps=2, batch_size=3), small_model())
    for t in (0, 5):
        engine_rows = ctx.minibatch(stream_key(11), t, np.arange(4))
        for c in range(4):
            local = minibatch_indices(11, t + 1, c, int(sizes[c]), 2, 3)
            np.testing.assert_array_equal(engine_rows[c], offsets[c] + local.ravel())


def test_hello_names_the_partition_and_what_the_node_holds(app: ClientApp) -> None:
    reply = ask(app, "query.adcs_hello", {}, {"partition-id": 3, "num-partitions": 4})
    metrics = dict(reply.content.metric_records["metrics"])
    assert metrics == {"partition-id": 3, "num-examples": 13, "num-partitions": 4}
    bare = ask(app, "query.adcs_hello", {}, {"partition-id": 0})
    assert "num-partitions" not in bare.content.metric_records["metrics"]
