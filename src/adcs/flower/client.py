"""The client side of the adcs Flower protocol: a ClientApp computing what the simulator computes.

The strategy (`adcs.flower.strategy`) and a ClientApp talk through four message types. Every
request carries the global model as an ``ArrayRecord`` under ``"arrays"`` (one array, the model's
parameters w⁽ᵗ⁾) and a ``ConfigRecord`` under ``"config"`` holding at least ``"server-round"``
(Flower's round, from 1) and ``"adcs-seed"``. Every reply carries one ``MetricRecord`` with the
client's ``"partition-id"`` (its stable index in 0..N−1; Flower's node ids are random):

=====================  =====================================================================
message type           reply
=====================  =====================================================================
``query.adcs_hello``   metrics ``partition-id``, ``num-examples`` and, when the node's config
                       sets it, ``num-partitions`` (no arrays are sent)
``query.adcs_loss``    metrics ``partition-id``, ``num-examples``, ``loss`` (loss at w⁽ᵗ⁾)
``train``              one ArrayRecord holding the local update Δ = w^{(t,E)} − w⁽ᵗ⁾ under the
                       request's key; metrics ``partition-id``, ``num-examples``, ``loss``
                       (the loss at w⁽ᵗ⁾ on the first minibatch, the probe's free quality score)
``evaluate``           metrics ``partition-id``, ``num-examples``, ``loss``, ``accuracy``
=====================  =====================================================================

Each request's type, round and partition id is logged (logger ``adcs.flower.client``, INFO), so a
node's own log says what it was asked to do.

The local update is [`adcs.sim.model.local_update`][adcs.sim.local_update] (E local SGD steps, batch
B, rate η_ℓ; docs/design.md §2), on minibatches drawn by
[`minibatch_indices`][adcs.flower.minibatch_indices], a pure function of (``adcs-seed``, round,
partition id) shared with the simulator, so anyone holding the same data can recompute it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from numpy.typing import NDArray

from adcs import defaults, streams
from adcs._validate import check_int, check_number

if TYPE_CHECKING:
    from adcs.sim.model import Model

logger = logging.getLogger(__name__)

HELLO = "query.adcs_hello"
"""Message type of the handshake that maps a Flower node id to a client index."""
LOSS_PROBE = "query.adcs_loss"
"""Message type of a loss probe (PowerOfChoice)."""

ARRAYS_KEY = "arrays"
CONFIG_KEY = "config"
METRICS_KEY = "metrics"
PARTITION_ID = "partition-id"
NUM_EXAMPLES = "num-examples"
NUM_PARTITIONS = "num-partitions"
"""Node config: the number of partitions the node's partition id is one of (N)."""
LOSS = "loss"
ACCURACY = "accuracy"
SERVER_ROUND = "server-round"
SEED = "adcs-seed"
LOCAL_STEPS = "local-steps"
BATCH_SIZE = "batch-size"
LOCAL_LR = "local-lr"
LOSS_SOURCE = "loss-source"
"""Loss probes: ``"minibatch"`` (default, the first training minibatch) or ``"full"``."""


@dataclass(frozen=True, eq=False)
class LocalData:
    """One client's local data, as its ClientApp holds it (the simulator reads a whole
    population through another interface, the [`ClientData`][adcs.sim.ClientData] protocol).

    Attributes
    ----------
    x_train : ndarray of shape (n_train, n_features)
        Inputs in [0, 1]; stored as float32.
    y_train : ndarray of shape (n_train,)
        Labels; stored as intp.
    x_test : ndarray of shape (n_test, n_features)
    y_test : ndarray of shape (n_test,)
    """

    x_train: NDArray[Any]
    y_train: NDArray[Any]
    x_test: NDArray[Any]
    y_test: NDArray[Any]

    def __post_init__(self) -> None:
        for name in ("x_train", "x_test"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float32))
        for name in ("y_train", "y_test"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.intp))
        for x, y, part in (
            (self.x_train, self.y_train, "train"),
            (self.x_test, self.y_test, "test"),
        ):
            if x.ndim != 2 or y.shape != (x.shape[0],):
                raise ValueError(
                    f"{part} data must be x of shape (n, n_features) and y of shape (n,), "
                    f"got {x.shape} and {y.shape}"
                )
        if self.x_train.shape[0] == 0:
            raise ValueError("a client needs at least one training example")


@dataclass(frozen=True)
class TrainDefaults:
    """Local-training hyperparameters used when the server's config does not set them.

    The simulator's defaults ([`adcs.sim.SimConfig`][adcs.sim.SimConfig], the paper's Sec. 6): E = 1
    local step, B = 16, η_ℓ = 0.001.
    """

    local_steps: int = defaults.LOCAL_STEPS
    batch_size: int = defaults.BATCH_SIZE
    local_lr: float = defaults.LOCAL_LR

    def __post_init__(self) -> None:
        check_int("local_steps", self.local_steps)
        check_int("batch_size", self.batch_size)
        check_number("local_lr", self.local_lr, 0.0, low_open=True)


def minibatch_indices(
    seed: int,
    server_round: int,
    partition_id: int,
    n_examples: int,
    local_steps: int,
    batch_size: int,
) -> NDArray[np.intp]:
    """The minibatches a client trains on in one round, as indices into its training data.

    The simulator's own draw ([`adcs.streams.minibatch_indices`][adcs.sim.minibatch_indices] for the
    stream of ``seed``, at simulator round t = server_round − 1): E·B distinct examples (whole
    shuffles back to back when the client holds fewer), a pure function of (seed, round, partition
    id), so a Flower run and an ``adcs.sim`` run of the same seed train every client on the same
    rows.

    Returns
    -------
    ndarray of shape (local_steps, batch_size)
    """
    check_int("server_round", server_round, minimum=1)
    rows = streams.minibatch_indices(
        streams.stream_key(seed),
        [check_int("partition_id", partition_id, minimum=0)],
        server_round - 1,
        [check_int("n_examples", n_examples)],
        local_steps,
        batch_size,
    )
    return rows[0].astype(np.intp)


def _int_config(
    config: Mapping[str, Any], key: str, default: int | None = None, minimum: int = 0
) -> int:
    return check_int(f"config[{key!r}]", config.get(key, default), minimum=minimum)


def _float_config(config: Mapping[str, Any], key: str, default: float) -> float:
    return check_number(f"config[{key!r}]", config.get(key, default))


def partition_id_of(context: Context) -> int:
    """The client index this node serves: ``node_config["partition-id"]``."""
    value = context.node_config.get(PARTITION_ID)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"this node has no integer node_config['{PARTITION_ID}'] >= 0 (got {value!r}); start "
            f'the SuperNode with --node-config "{PARTITION_ID}=<index>"'
        )
    return value


def _received(message: Message, pid: int) -> Mapping[str, Any]:
    """The request's config record; logs what this node was asked to do."""
    config: Mapping[str, Any] = message.content.config_records.get(CONFIG_KEY, {})
    logger.info(
        "partition %d: %s, server round %s", pid, message.metadata.message_type,
        config.get(SERVER_ROUND, "-"),
    )  # fmt: skip
    return config


def _global_params(message: Message) -> tuple[str, NDArray[Any]]:
    record = message.content.array_records.get(ARRAYS_KEY)
    if record is None or len(record) != 1:
        raise ValueError(f"the request must hold one array under '{ARRAYS_KEY}'")
    key = next(iter(record.keys()))
    return key, record[key].numpy()


def _reply(message: Message, metrics: dict[str, Any], arrays: ArrayRecord | None = None) -> Message:
    content = RecordDict({METRICS_KEY: MetricRecord(metrics)})
    if arrays is not None:
        content[ARRAYS_KEY] = arrays
    return Message(content, reply_to=message)


_LoadData = Callable[[int, Context], LocalData]
"""``load_data(partition_id, context) -> LocalData``, as given to
[`make_client_app`][adcs.flower.make_client_app]."""


def _batches(
    data: LocalData, config: Mapping[str, Any], pid: int, hyper: TrainDefaults
) -> NDArray[np.intp]:
    """The request's minibatches ([`minibatch_indices`][adcs.flower.minibatch_indices]), shape
    (local_steps, batch_size)."""
    return minibatch_indices(
        _int_config(config, SEED, 0),
        _int_config(config, SERVER_ROUND),
        pid,
        data.x_train.shape[0],
        _int_config(config, LOCAL_STEPS, hyper.local_steps, minimum=1),
        _int_config(config, BATCH_SIZE, hyper.batch_size, minimum=1),
    )


def _model_request(
    message: Message, context: Context, load_data: _LoadData
) -> tuple[int, Mapping[str, Any], LocalData, str, NDArray[Any]]:
    """A request carrying the global model: partition id, config, client data, array key, w⁽ᵗ⁾."""
    pid = partition_id_of(context)
    config = _received(message, pid)
    data = load_data(pid, context)
    key, params = _global_params(message)
    return pid, config, data, key, params


def _answer_hello(message: Message, context: Context, load_data: _LoadData) -> Message:
    """The handshake's reply: partition id, number of examples and, if set, of partitions."""
    pid = partition_id_of(context)
    _received(message, pid)
    metrics: dict[str, Any] = {
        PARTITION_ID: pid,
        NUM_EXAMPLES: load_data(pid, context).x_train.shape[0],
    }
    partitions = context.node_config.get(NUM_PARTITIONS)
    if partitions is not None:
        metrics[NUM_PARTITIONS] = partitions
    return _reply(message, metrics)


def _answer_loss_probe(
    message: Message, context: Context, load_data: _LoadData, net: Model, hyper: TrainDefaults
) -> Message:
    """A loss probe's reply: the loss at w⁽ᵗ⁾ on the first minibatch (or all training data)."""
    pid, config, data, _, params = _model_request(message, context, load_data)
    if config.get(LOSS_SOURCE, "minibatch") == "full":
        x, y = data.x_train, data.y_train
    else:
        first = _batches(data, config, pid, hyper)[0]
        x, y = data.x_train[first], data.y_train[first]
    loss, _ = net.loss_and_grad(params[None], x[None], y[None])
    metrics = {PARTITION_ID: pid, NUM_EXAMPLES: data.x_train.shape[0], LOSS: float(loss[0])}
    return _reply(message, metrics)


def _answer_train(
    message: Message, context: Context, load_data: _LoadData, net: Model, hyper: TrainDefaults
) -> Message:
    """A training request's reply: the local update Δ and the first minibatch's loss."""
    from adcs.sim.model import local_update

    pid, config, data, key, params = _model_request(message, context, load_data)
    idx = _batches(data, config, pid, hyper)
    update, first_loss = local_update(
        net,
        params[None],
        data.x_train[idx][None],
        data.y_train[idx][None],
        _float_config(config, LOCAL_LR, hyper.local_lr),
    )
    metrics = {
        PARTITION_ID: pid,
        NUM_EXAMPLES: data.x_train.shape[0],
        LOSS: float(first_loss[0]),
    }
    return _reply(message, metrics, ArrayRecord({key: Array(np.ascontiguousarray(update[0]))}))


def _answer_evaluate(
    message: Message, context: Context, load_data: _LoadData, net: Model
) -> Message:
    """An evaluation request's reply: mean loss and accuracy on the client's test data."""
    pid, _, data, _, params = _model_request(message, context, load_data)
    loss, correct = net.evaluate(params[None], data.x_test, data.y_test)
    metrics = {
        PARTITION_ID: pid,
        NUM_EXAMPLES: data.x_test.shape[0],
        LOSS: float(loss[0].mean()) if loss.size else float("nan"),
        ACCURACY: float(correct[0].mean()) if correct.size else float("nan"),
    }
    return _reply(message, metrics)


def make_client_app(
    load_data: Callable[[int, Context], LocalData],
    model: Model | None = None,
    defaults: TrainDefaults | None = None,
) -> ClientApp:
    """A ClientApp answering the adcs strategy's messages (see the module docstring).

    Parameters
    ----------
    load_data : callable
        ``load_data(partition_id, context) -> LocalData`` (the context gives the run and node
        config). Called on every message. Flower's Deployment Runtime starts a new ClientApp
        process for every message, so a cache in memory never hits there: cache on disk when
        loading is costly (the example app keeps each node's partition in a file).
    model : Model, optional
        Any simulator model (default: the paper's 784 → 10 logistic regression), e.g. a PyTorch
        module as `adcs.sim.torch.TorchModel` (``adcs.sim.torch.model_for("cnn", (784,),
        10)`` is the ``[model] kind = "cnn"`` of an experiment configuration). The server's
        initial parameters must be that model's ``init_params(1)[0]``.
    defaults : TrainDefaults, optional
        E, B, η_ℓ when the server's config omits ``local-steps``, ``batch-size``, ``local-lr``.
    """
    from adcs.sim.model import LogisticRegression

    net: Model = model if model is not None else LogisticRegression()
    hyper = defaults if defaults is not None else TrainDefaults()
    app = ClientApp()

    @app.query("adcs_hello")
    def hello(message: Message, context: Context) -> Message:
        return _answer_hello(message, context, load_data)

    @app.query("adcs_loss")
    def loss_probe(message: Message, context: Context) -> Message:
        return _answer_loss_probe(message, context, load_data, net, hyper)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return _answer_train(message, context, load_data, net, hyper)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return _answer_evaluate(message, context, load_data, net)

    return app
