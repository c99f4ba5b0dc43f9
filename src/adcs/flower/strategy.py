"""A Flower strategy that runs any adcs scheduler: the simulator's round, over Flower's Grid.

`SchedulerStrategy.start` owns the round loop and all messaging. Round t = server_round − 1
is the simulator's round, the same `adcs.round.machine` object (docs/design.md §1, §7) played over
the Grid (`adcs.round.play.play`):

0. **availability** — the clients whose node is connected and responsive (`NodeMap`;
   new and unresponsive nodes are greeted with ``query.adcs_hello`` in the background, so a node
   that joins or comes back is available from the round after it answered). The first round
   waits until m clients are there, then up to ``wait_for_all_s`` longer for all N;
1. **probe** — ``probe = scheduler.probe(state, t, available, rng)``;
2. **gather** — ``query.adcs_loss`` (losses) or ``train`` (updates) to the probed clients;
   probes that fail make their client unselectable this round;
3. **select** — ``scheduler.select``, held to the one contract of
   `adcs.round.contract.check_selection` (min(m, available) distinct available clients);
4. **train and aggregate** — ``train`` to the selected clients not probed for their update; the
   updates Δ_i of those that returned are combined with `adcs.round.contract.aggregation_weights`:
   w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R} c_i Δ_i, in float32 like the simulator — or by an aggregation rule
   (``aggregator``, `adcs.aggregation`);
5. **observe** — schedulers that learn from updates see the returned selected clients' ones; the
   round is recorded in `SchedulerStrategy.history`.

The model is one flat float32 array (the simulator's `adcs.sim.model.Model` protocol),
sent as the only array of an ``ArrayRecord``. The scheduler's generator is
`adcs.streams.scheduler_rng` of (seed, run_id) and clients draw their minibatches from the
seed's stream, so a run equals an `adcs.sim.simulate` run of the same seed and run id.

Replies are untrusted: an error reply, no reply within the timeout, a node that disconnects, a
missing or wrong partition id, a missing or non-finite loss, or an update of another key, shape or
dtype than the model, or with NaN/inf, excludes that client with its reason; the round goes on with
the rest. Each exchange is accounted as Flower's strategies do ("received r results and f
failures", each failure with its reason), and the failure count goes into the round's metrics.

It is not a subclass of Flower's ``Strategy``: a round here may need two exchanges (probe, then
train), which Flower's ``configure_*``/``aggregate_*`` hooks cannot express. ``start`` takes
Flower's arguments and returns Flower's ``Result``. The run itself — the start loop and its
output, the wait for nodes, the round, evaluation records, checkpoints (``checkpoint_path``) and
resume — is `adcs.flower.driver.Driver`'s, shared with `adcs.flower.Scheduled`;
this module is the wire protocol of `adcs.flower.client`.

What the simulator's round has and Flower's runtime cannot offer: a simulated clock (round
seconds, deadline, over-commitment; `RoundRecord.wall_s` is the wall clock) and simulated
dropouts (here a dropout is a client's real failure). Non-finite statistics never reach the
scheduler: such replies are rejected as failures.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from numpy.typing import NDArray

from adcs.aggregation import Aggregator
from adcs.flower.client import (
    ACCURACY,
    ARRAYS_KEY,
    CONFIG_KEY,
    HELLO,
    LOSS,
    LOSS_PROBE,
    LOSS_SOURCE,
    METRICS_KEY,
    NUM_EXAMPLES,
    NUM_PARTITIONS,
    PARTITION_ID,
    SEED,
)
from adcs.flower.driver import Driver, Nodes, _Configs
from adcs.flower.dropin import Template
from adcs.flower.link import Link
from adcs.flower.nodes import NodeMap
from adcs.flower.round import (
    EvaluationRecord,
    RejectedReply,
    RoundRecord,
    finite_metric,
    history_dicts,
    log_round,
    one_metric_record,
)
from adcs.flower.settings import SIMULATOR_IDENTICAL, Settings, take
from adcs.round.contract import F64Array
from adcs.round.play import Played, Trained
from adcs.schedulers.base import FloatArray, IntArray, LossSource, Scheduler, check_scheduler

__all__ = [
    "EvaluationRecord",
    "RejectedReply",
    "RoundRecord",
    "SchedulerStrategy",
    "Settings",
    "history_dicts",
]

logger = logging.getLogger("flwr").getChild("adcs")

F32Array = NDArray[np.float32]
_WEIGHT = "adcs-weight"
"""Metric key of the weights handed to Flower's metric aggregation."""


@dataclass(frozen=True, eq=False)
class _Model:
    """The global model: the ArrayRecord key and the flat float32 parameters w of shape (dim,)."""

    key: str
    params: F32Array

    def record(self) -> ArrayRecord:
        return ArrayRecord({self.key: Array(self.params)})


class SchedulerStrategy(Driver):
    """Flower's round loop with an adcs scheduler choosing the participants (module docstring).

    Parameters
    ----------
    scheduler : Scheduler
        Any scheduler of `adcs.schedulers` (or one following its protocol).
    n_clients : int
        N; the nodes must report partition ids in 0..N−1.
    aggregator : Aggregator, optional
        A rule in place of the weighted mean (`adcs.aggregation`: a robust rule), given the
        delivered updates one by one, as in the simulator (``RunSpec.aggregator``).
    **settings
        The fields of `adcs.flower.settings.Settings` it takes
        (`adcs.flower.settings.SIMULATOR_IDENTICAL`: ``server_lr``, ``weighting``,
        ``seed``, ``run_id``, ``evaluate_every``, ``checkpoint_path``, ...).

    Attributes
    ----------
    history : list of RoundRecord
        One record per round of the last `start` (a resumed run's earlier rounds included).
    evaluations : list of EvaluationRecord
        One record per federated evaluation of the last `start`.
    node_of : dict of int to int
        Client index → the Flower node id that served it last.

    Notes
    -----
    The ClientApp must speak the protocol of `adcs.flower.client` (that module's
    `adcs.flower.client.make_client_app` does). Clients send updates Δ_n, not models.
    """

    name = "SchedulerStrategy"
    takes = SIMULATOR_IDENTICAL

    def __init__(
        self,
        scheduler: Scheduler,
        n_clients: int,
        *,
        aggregator: Aggregator | None = None,
        **settings: Any,
    ) -> None:
        settings_ = take("SchedulerStrategy", self.takes, {**settings, "n_clients": n_clients})
        check_scheduler(scheduler)
        if scheduler.m > n_clients:
            raise ValueError(f"scheduler.m={scheduler.m} exceeds n_clients={n_clients}")
        super().__init__(scheduler, settings_)
        self.aggregator = aggregator
        self._nodes = NodeMap(n_clients)

    def summary(self) -> None:
        """Log the scheduler and the server settings."""
        self._summary()

    # ------------------------------------------------------------------ the driver's hooks

    def _identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            **super()._identity(),
            "n_clients": s.n_clients,
            "server_lr": s.server_lr,
            "weighting": s.weighting,
            "aggregator": repr(self.aggregator),
        }

    def _new_nodes(self, n_clients: int, saved: Any) -> Nodes:
        return NodeMap(n_clients)  # each node tells its client again in the handshake

    def _node_map(self) -> NodeMap:
        nodes = self._nodes_index()
        assert isinstance(nodes, NodeMap)
        return nodes

    def _connected(self, link: Link) -> set[int]:
        return self._greet(link)

    def _pause(self, link: Link, until: float) -> None:
        link.wait_background(lambda: bool(link.late), until)

    def _data_sizes(self) -> F64Array | None:
        return self._node_map().all_sizes()

    def _unanswered(self, nodes: list[int]) -> None:
        for node in nodes:
            self._node_map().failed(node)

    def _rule_extras(self) -> dict[str, Any]:
        return {"base_weights": self._base, "aggregator": self.aggregator}

    def _check_initial(self, arrays: ArrayRecord) -> Template:
        _flat_model(arrays)
        return Template.of(arrays)

    def _configs(self, configs: _Configs) -> _Configs:
        for config in (configs.train, configs.evaluate):
            config[SEED] = self.settings.seed
        return configs

    def _exchanges(
        self, link: Link, template: Template, arrays: ArrayRecord, configs: _Configs, r: int
    ) -> _Exchanges:
        return _Exchanges(self, link, _flat_model(arrays), configs.train, r)

    def _aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, server_round: int
    ) -> tuple[ArrayRecord, MetricRecord]:
        """w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s · (Σ c_i Δ_i, or the aggregation rule's step), in float32."""
        model = _flat_model(arrays)
        dim = model.params.size
        done = played.record
        delivered = done.aggregated
        coef = done.aggregated_coef
        losses_back = np.asarray([played.held[int(c)].loss for c in delivered], dtype=np.float64)
        step = played.step
        if step is None and delivered.size:
            step = coef.astype(np.float32) @ played.rows(delivered, dim)
        model = _step(model, step if delivered.size else None, self.settings.server_lr)
        return model.record(), _train_metrics(coef, losses_back, len(played.failed))

    def _log_round(self, record: RoundRecord) -> None:
        log_round(record, logger)

    def _base(self) -> F64Array | None:
        """p_n of the aggregation weights: the clients' reported data sizes, or uniform."""
        if self.settings.weighting == "data_size":
            return np.nan_to_num(self._node_map().sizes, nan=0.0)
        return None

    # ------------------------------------------------------------------ handshakes

    def _greet(self, link: Link) -> set[int]:
        """Take in handshake outcomes; greet new and unresponsive nodes (in the background)."""
        nodes = self._node_map()
        connected = link.connected()
        link.forget(link.background_nodes - connected)
        link.poll()
        self._take_greetings(link, connected)
        greet = [n for n in nodes.to_greet(connected) if n not in link.background_nodes]
        content = RecordDict(
            {CONFIG_KEY: ConfigRecord({SEED: self.settings.seed, NUM_PARTITIONS: nodes.n_clients})}
        )
        link.send_in_background(
            {n: Message(content, n, HELLO, ttl=link.ttl, group_id="hello") for n in greet}
        )
        link.poll()  # replies that are there at once (an in-process grid answers on push)
        self._take_greetings(link, connected)
        return connected

    def _take_greetings(self, link: Link, connected: set[int]) -> None:
        for node, outcome in link.late:
            self._node_map().greeted(node, outcome, connected)
        link.late.clear()

    # ------------------------------------------------------------------ exchanges

    def _train(
        self, link: Link, clients: IntArray, model: _Model, config: ConfigRecord, server_round: int
    ) -> dict[int, Trained | str]:
        """``train`` to ``clients``: their valid updates, or why there is none."""
        content = RecordDict({ARRAYS_KEY: model.record(), CONFIG_KEY: config})
        replies = self._send(link, [(MessageType.TRAIN, content, clients)], server_round, "train")
        sizes = self._node_map().sizes

        def read(client: int, reply: Message) -> Trained:
            got = _read_update(reply, client, model, self.settings.weighting)
            if got.num_examples >= 0:
                sizes[client] = got.num_examples
            return got

        return self._check(server_round, "train", replies, read)

    def _probe_losses(
        self,
        link: Link,
        clients: IntArray,
        model: _Model,
        config: ConfigRecord,
        server_round: int,
        source: str,
    ) -> dict[int, float | str]:
        """``query.adcs_loss`` to ``clients``: each one's loss at w⁽ᵗ⁾, or why there is none."""
        probe_config = ConfigRecord(dict(config))
        probe_config[LOSS_SOURCE] = source
        content = RecordDict({ARRAYS_KEY: model.record(), CONFIG_KEY: probe_config})
        replies = self._send(link, [(LOSS_PROBE, content, clients)], server_round, "loss probe")
        return self._check(
            server_round,
            "loss probe",
            replies,
            lambda client, reply: finite_metric(_read_metrics(reply, client), LOSS),
        )

    # ------------------------------------------------------------------ evaluation

    def _evaluate(
        self, link: Link, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> MetricRecord | None:
        """``evaluate`` to every available client every ``evaluate_every`` rounds and after the
        last: per-client accuracy and loss, and their mean."""
        every = self.settings.evaluate_every
        if not every or (server_round % every and server_round != self._num_rounds):
            return None
        connected = self._greet(link)
        clients = np.flatnonzero(self._node_map().available(connected))
        content = RecordDict({ARRAYS_KEY: arrays, CONFIG_KEY: config})
        replies = self._send(
            link, [(MessageType.EVALUATE, content, clients)], server_round, "evaluate"
        )
        checked = self._check(server_round, "evaluate", replies, _read_evaluation)
        record = self._record_evaluation(server_round, checked)
        reported = np.flatnonzero(np.isfinite(record.accuracy))
        if reported.size == 0:
            return None
        mean = aggregate_metricrecords(
            [
                RecordDict(
                    {
                        METRICS_KEY: MetricRecord(
                            {
                                _WEIGHT: 1.0,
                                ACCURACY: float(record.accuracy[c]),
                                LOSS: float(record.loss[c]),
                            }
                        )
                    }
                )
                for c in reported
            ],
            _WEIGHT,
        )
        mean["worst-accuracy"] = record.worst_accuracy
        mean.update(record.columns)
        return mean


@dataclass(frozen=True, eq=False)
class _Exchanges:
    """The `adcs.flower.round.Gatherer` of one round of `SchedulerStrategy`."""

    strategy: SchedulerStrategy
    link: Link
    model: _Model
    config: ConfigRecord
    server_round: int

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        return self.strategy._probe_losses(
            self.link, clients, self.model, self.config, self.server_round, source.value
        )

    def updates(self, clients: IntArray) -> dict[int, Trained | str]:
        return self.strategy._train(self.link, clients, self.model, self.config, self.server_round)


def _step(model: _Model, step: F32Array | None, server_lr: float) -> _Model:
    """w + η_s · step (Σ c_i Δ_i, or the aggregation rule's), in float32 as `adcs.sim.lot`
    forms it; None: nobody delivered, the model is kept."""
    if step is None:
        logger.warning("no selected client returned a valid update; the model is kept")
        return model
    step = np.asarray(step, dtype=np.float32) * np.float32(server_lr)
    return _Model(model.key, model.params + step)


def _train_metrics(coef: FloatArray, losses: FloatArray, failures: int) -> MetricRecord:
    """The round's train metrics: the aggregated clients' loss (weighted by c), and the counts."""
    metrics = MetricRecord()
    if coef.size and float(np.abs(coef).sum()) > 0:
        metrics = aggregate_metricrecords(
            [
                RecordDict({METRICS_KEY: MetricRecord({_WEIGHT: abs(float(c)), LOSS: float(q)})})
                for c, q in zip(coef, losses, strict=True)
            ],
            _WEIGHT,
        )
    metrics["results"] = int(coef.size)
    metrics["failures"] = int(failures)
    return metrics


def _flat_model(arrays: ArrayRecord) -> _Model:
    """w⁽⁰⁾ from ``initial_arrays``: exactly one 1-D, finite float32 array."""
    if not isinstance(arrays, ArrayRecord) or len(arrays) != 1:
        raise ValueError(
            "initial_arrays must be an ArrayRecord holding one array, the model's flat float32 "
            "parameters (the Model protocol of adcs.sim.model)"
        )
    key = next(iter(arrays.keys()))
    params = arrays[key].numpy()
    if params.dtype != np.float32 or params.ndim != 1 or params.size == 0:
        raise ValueError(
            f"initial array {key!r} must be a non-empty 1-D float32 array, got "
            f"{params.dtype}{list(params.shape)}"
        )
    if not np.isfinite(params).all():
        raise ValueError(f"initial array {key!r} holds NaN or inf")
    return _Model(key, np.array(params, dtype=np.float32))


def _read_metrics(reply: Message, client: int) -> MetricRecord:
    """The reply's one MetricRecord, after checking it names the client asked."""
    metrics = one_metric_record(reply)
    pid = metrics.get(PARTITION_ID)
    if pid != client or isinstance(pid, (bool, float)):
        raise RejectedReply(f"reports {PARTITION_ID}={pid!r} but the node serves {client}")
    return metrics


def _read_evaluation(client: int, reply: Message) -> tuple[float, float]:
    """An ``evaluate`` reply's (loss, accuracy), after checking it names the client asked."""
    metrics = _read_metrics(reply, client)
    accuracy = finite_metric(metrics, ACCURACY)
    return finite_metric(metrics, LOSS), accuracy


def _read_update(reply: Message, client: int, model: _Model, weighting: str) -> Trained:
    """A ``train`` reply's update Δ (checked against the model), loss and data size."""
    metrics = _read_metrics(reply, client)
    loss = finite_metric(metrics, LOSS)
    size = metrics.get(NUM_EXAMPLES, math.nan)
    num_examples = float(size) if isinstance(size, (int, float)) else math.nan
    if weighting == "data_size" and not num_examples >= 0:
        raise RejectedReply(f"missing or invalid '{NUM_EXAMPLES}' (weighting by data size)")
    records = list(reply.content.array_records.values())
    if len(records) != 1 or list(records[0].keys()) != [model.key]:
        keys = [list(r.keys()) for r in records]
        raise RejectedReply(f"expected one array {model.key!r}, got {keys}")
    try:
        update = records[0][model.key].numpy()
    except Exception as err:  # any undecodable payload is a bad reply, whatever it raises
        raise RejectedReply(f"array {model.key!r} cannot be decoded: {err}") from err
    if update.shape != model.params.shape or update.dtype != np.float32:
        raise RejectedReply(
            f"update is {update.dtype}{list(update.shape)}, expected float32{[model.params.size]}"
        )
    if not np.isfinite(update).all():
        raise RejectedReply("update holds NaN or inf")
    return Trained(update, loss, num_examples)
