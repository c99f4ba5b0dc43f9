"""A Flower strategy that runs any adcs scheduler: the simulator's round, over Flower's Grid.

[`SchedulerStrategy.start`][adcs.flower.SchedulerStrategy.start] owns the round loop and all
messaging. Round t = server_round − 1 is the simulator's round, the same `adcs.roundplay` object
(docs/design.md §1, §7) played over the Grid (`adcs.roundplay.play`):

0. **availability** — the clients whose node is connected and responsive (`NodeMap`;
   new and unresponsive nodes are greeted with ``query.adcs_hello`` in the background, so a node
   that joins or comes back is available from the round after it answered). The first round
   waits until m clients are there, then up to ``wait_for_all_s`` longer for all N;
1. **probe** — ``probe = scheduler.probe(state, t, available, rng)``;
2. **gather** — ``query.adcs_loss`` (losses) or ``train`` (updates) to the probed clients;
   probes that fail make their client unselectable this round;
3. **select** — ``scheduler.select``, held to the one contract of
   [`adcs.rounds.check_selection`][adcs.rounds.check_selection] (min(m, available) distinct
   available clients);
4. **train and aggregate** — ``train`` to the selected clients not probed for their update; the
   updates Δ_i of those that returned are combined with
   [`adcs.rounds.aggregation_weights`][adcs.rounds.aggregation_weights]: w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R}
   c_i Δ_i, in float32 like the simulator — or by an aggregation rule (``aggregator``,
   `adcs.aggregation`);
5. **observe** — schedulers that learn from updates see the returned selected clients' ones; the
   round is recorded in `SchedulerStrategy.history`.

The model is one flat float32 array (the simulator's [`Model`][adcs.sim.Model] protocol),
sent as the only array of an ``ArrayRecord``. The scheduler's generator is
[`adcs.streams.scheduler_rng`][adcs.sim.scheduler_rng] of (seed, run_id) and clients draw their
minibatches from the seed's stream, so a run equals an [`adcs.sim.simulate`][adcs.sim.simulate] run
of the same seed and run id.

Replies are untrusted: an error reply, no reply within the timeout, a node that disconnects, a
missing or wrong partition id, a missing or non-finite loss, or an update of another key, shape or
dtype than the model, or with NaN/inf, excludes that client with its reason; the round goes on with
the rest. Each exchange is accounted as Flower's strategies do ("received r results and f
failures", each failure with its reason), and the failure count goes into the round's metrics.

It is not a subclass of Flower's ``Strategy``: a round here may need two exchanges (probe, then
train), which Flower's ``configure_*``/``aggregate_*`` hooks cannot express. ``start`` takes
Flower's arguments and returns Flower's ``Result``.

What the simulator's round has and Flower's runtime cannot offer: a simulated clock (round
seconds, deadline, over-commitment; `RoundRecord.wall_s` is the wall clock) and simulated
dropouts (here a dropout is a client's real failure). Non-finite statistics never reach the
scheduler: such replies are rejected as failures.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

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
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from numpy.typing import NDArray

from adcs import defaults
from adcs._validate import check_int, check_number
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
    SERVER_ROUND,
)
from adcs.flower.link import Link
from adcs.flower.nodes import NodeMap
from adcs.flower.round import (
    EvaluationRecord,
    RejectedReply,
    RoundRecord,
    account,
    ask,
    finite_metric,
    history_dicts,
    log_round,
    one_metric_record,
)
from adcs.roundplay import RoundRules, Trained, play
from adcs.rounds import F64Array
from adcs.schedulers.base import (
    BoolArray,
    FloatArray,
    IntArray,
    LossSource,
    Scheduler,
    check_scheduler,
)
from adcs.streams import scheduler_rng

__all__ = [
    "EvaluationRecord",
    "RejectedReply",
    "RoundRecord",
    "SchedulerStrategy",
    "ServerSettings",
    "history_dicts",
]

logger = logging.getLogger(__name__)

F32Array = NDArray[np.float32]
_WEIGHT = "adcs-weight"
"""Metric key of the weights handed to Flower's metric aggregation."""
_CONNECT_SLICE_S = 1.0


@dataclass(frozen=True)
class ServerSettings:
    """Server-side hyperparameters of [`SchedulerStrategy`][adcs.flower.SchedulerStrategy],
    validated on construction.

    Attributes
    ----------
    n_clients : int
        N: client indices are 0..N−1 (the partition ids the nodes report).
    server_lr : float
        η_s > 0 in w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ c_i Δ_i (docs/design.md §2; the paper uses 1).
    weighting : {"uniform", "data_size"}
        p_n: uniform, or the client's reported number of training examples.
    seed : int
        Seeds the scheduler's generator (with ``run_id``) and is sent to clients as ``adcs-seed``
        (their minibatch stream,
        [`adcs.flower.client.minibatch_indices`][adcs.flower.minibatch_indices]).
    run_id : str
        Names the scheduler's stream, [`adcs.streams.scheduler_rng`][adcs.sim.scheduler_rng] (seed,
        run_id): a simulator [`RunSpec`][adcs.sim.RunSpec] with the same seed and run id draws the
        same.
    connect_timeout_s : float
        How long the first round waits for m clients to connect (a later round: for one) before
        the run fails.
    wait_for_all_s : float
        Once m clients are connected, how much longer the first round waits for all N.
    evaluate_every : int
        Federated evaluation (``evaluate`` to every available client) every this many rounds and
        after the last; 0 turns it off.
    max_in_flight : int
        At most this many requests open at once, 0 for no limit (`adcs.flower.link`: a
        limit near the number of CPUs keeps many SuperNodes on one machine within Flower's 30 s
        ClientApp start window; a real deployment needs none).
    """

    n_clients: int
    server_lr: float = defaults.SERVER_LR
    weighting: Literal["uniform", "data_size"] = "uniform"
    seed: int = 0
    run_id: str = "flower"
    connect_timeout_s: float = 120.0
    wait_for_all_s: float = 0.0
    evaluate_every: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        check_int("n_clients", self.n_clients)
        check_number("server_lr", self.server_lr, 0.0, low_open=True)
        if self.weighting not in ("uniform", "data_size"):
            raise ValueError(f"weighting must be 'uniform' or 'data_size', got {self.weighting!r}")
        check_int("seed", self.seed, minimum=0)
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"run_id must be a non-empty string, got {self.run_id!r}")
        check_number("connect_timeout_s", self.connect_timeout_s, 0.0)
        check_number("wait_for_all_s", self.wait_for_all_s, 0.0)
        check_int("evaluate_every", self.evaluate_every, minimum=0)
        check_int("max_in_flight", self.max_in_flight, minimum=0)


@dataclass(frozen=True, eq=False)
class _Model:
    """The global model: the ArrayRecord key and the flat float32 parameters w of shape (dim,)."""

    key: str
    params: F32Array

    def record(self) -> ArrayRecord:
        return ArrayRecord({self.key: Array(self.params)})


class SchedulerStrategy:
    """Flower's round loop with an adcs scheduler choosing the participants (module docstring).

    Parameters
    ----------
    scheduler : Scheduler
        Any scheduler of [`adcs.schedulers`][adcs.schedulers] (or one following its protocol).
    n_clients : int
        N; the nodes must report partition ids in 0..N−1.
    aggregator : Aggregator, optional
        A rule in place of the weighted mean (`adcs.aggregation`: a robust rule), given the
        delivered updates one by one, as in the simulator (``RunSpec.aggregator``).
    **settings
        The other fields of [`ServerSettings`][adcs.flower.ServerSettings].

    Attributes
    ----------
    history : list of RoundRecord
        One record per round of the last [`start`][adcs.flower.SchedulerStrategy.start].
    evaluations : list of EvaluationRecord
        One record per federated evaluation of the last
        [`start`][adcs.flower.SchedulerStrategy.start].
    node_of : dict of int to int
        Client index → the Flower node id that served it last.

    Notes
    -----
    The ClientApp must speak the protocol of `adcs.flower.client` (that module's
    [`make_client_app`][adcs.flower.make_client_app] does). Clients send updates Δ_n, not models.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        n_clients: int,
        *,
        aggregator: Aggregator | None = None,
        **settings: Any,
    ) -> None:
        self.settings = ServerSettings(n_clients=n_clients, **settings)
        check_scheduler(scheduler)
        if scheduler.m > n_clients:
            raise ValueError(f"scheduler.m={scheduler.m} exceeds n_clients={n_clients}")
        self.scheduler = scheduler
        self._rules = RoundRules(
            scheduler, who=repr(scheduler), base_weights=self._base, aggregator=aggregator
        )
        self.history: list[RoundRecord] = []
        self.evaluations: list[EvaluationRecord] = []
        self._nodes = NodeMap(n_clients)

    @property
    def node_of(self) -> dict[int, int]:
        return dict(self._nodes.node_of)

    def summary(self) -> None:
        """Log the scheduler and the server settings."""
        logger.info("SchedulerStrategy: %r, %r", self.scheduler, self.settings)

    # ------------------------------------------------------------------ the round loop

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float | None = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Run ``num_rounds`` rounds from a fresh scheduler state (Flower's ``Strategy.start``).

        Parameters
        ----------
        grid : flwr.serverapp.Grid
        initial_arrays : ArrayRecord
            w⁽⁰⁾: one flat float32 array.
        num_rounds : int
        timeout : float or None
            Seconds each exchange waits for replies (the reply timeout); replies later than that
            are failures of their client.
        train_config, evaluate_config : ConfigRecord, optional
            Sent with every ``train`` (and loss probe) / ``evaluate`` request, with
            ``server-round`` and ``adcs-seed`` added.
        evaluate_fn : callable, optional
            ``evaluate_fn(server_round, arrays)``: centralised evaluation before the first round
            and after each (as in Flower).

        Returns
        -------
        flwr.serverapp.strategy.Result
            The final model; per round, the train metrics (mean first-minibatch loss of the
            aggregated clients, ``results``, ``failures``) and the evaluation metrics.
        """
        check_int("num_rounds", num_rounds)
        model = _flat_model(initial_arrays)
        link = Link(grid, timeout, self.settings.max_in_flight)
        self._nodes = NodeMap(self.settings.n_clients)
        self.history, self.evaluations = [], []
        rng = scheduler_rng(self.settings.seed, self.settings.run_id)
        result = Result(arrays=model.record())
        self.summary()
        if evaluate_fn is not None:
            self._evaluate_centrally(evaluate_fn, 0, model, result)
        state: Any = None
        for server_round in range(1, num_rounds + 1):
            started = time.perf_counter()
            available = self._connect(link, first=server_round == 1)
            if state is None:
                state = self.scheduler.init(self.settings.n_clients, self._nodes.all_sizes())
            config = _request_config(train_config, server_round, self.settings.seed)
            record, model, state, metrics = self._round(
                link, server_round, started, available, model, state, rng, config
            )
            self.history.append(record)
            log_round(record, logger)
            result.arrays = model.record()
            result.train_metrics_clientapp[server_round] = metrics
            every = self.settings.evaluate_every
            if every and (server_round % every == 0 or server_round == num_rounds):
                config = _request_config(evaluate_config, server_round, self.settings.seed)
                evaluated = self._evaluate(link, server_round, model, config)
                if evaluated is not None:
                    result.evaluate_metrics_clientapp[server_round] = evaluated
            if evaluate_fn is not None:
                self._evaluate_centrally(evaluate_fn, server_round, model, result)
        return result

    def _round(
        self,
        link: Link,
        server_round: int,
        started: float,
        available: BoolArray,
        model: _Model,
        state: Any,
        rng: np.random.Generator,
        config: ConfigRecord,
    ) -> tuple[RoundRecord, _Model, Any, MetricRecord]:
        """One round's five steps (module docstring); returns its record, w⁽ᵗ⁺¹⁾ and state."""
        exchanges = _Exchanges(self, link, model, config, server_round)
        dim = model.params.size
        played = play(self._rules, state, server_round - 1, available, rng, exchanges, dim)
        done = played.record
        delivered = done.aggregated
        coef = done.aggregated_coef
        losses_back = np.asarray([played.held[int(c)].loss for c in delivered], dtype=np.float64)
        step = played.step
        if step is None and delivered.size:
            step = coef.astype(np.float32) @ played.rows(delivered, dim)
        model = _step(model, step if delivered.size else None, self.settings.server_lr)
        wall_s = time.perf_counter() - started
        record = RoundRecord.of(played, server_round, available, wall_s, time.time())
        metrics = _train_metrics(coef, losses_back, len(played.failed))
        return record, model, done.state, metrics

    def _base(self) -> F64Array | None:
        """p_n of the aggregation weights: the clients' reported data sizes, or uniform."""
        if self.settings.weighting == "data_size":
            return np.nan_to_num(self._nodes.sizes, nan=0.0)
        return None

    # ------------------------------------------------------------------ availability

    def _connect(self, link: Link, first: bool) -> BoolArray:
        """The availability mask at a round's start (module docstring, step 0).

        The first round needs m clients (then waits up to ``wait_for_all_s`` for all N); a later
        round needs one, and goes on with whoever is there.
        """
        settings = self.settings
        n, m = settings.n_clients, self.scheduler.m
        need = m if first else 1
        more_s = settings.wait_for_all_s if first else 0.0
        connected = self._greet(link)
        give_up = time.monotonic() + settings.connect_timeout_s
        enough_at: float | None = None
        while True:
            available = self._nodes.available(connected)
            count = int(available.sum())
            now = time.monotonic()
            if count >= need and enough_at is None:
                enough_at = now
            if count == n or (enough_at is not None and now >= enough_at + more_s):
                if first and count < n:
                    logger.info("starting with %d of %d clients connected", count, n)
                return available
            if enough_at is None and now >= give_up:
                raise RuntimeError(
                    f"only {count} clients are connected after {settings.connect_timeout_s:g} s, "
                    f"but the {'first round needs' if first else 'round needs at least'} "
                    f"{need} (m={m}, N={n}); start more SuperNodes or raise the connect timeout"
                )
            until = give_up if enough_at is None else enough_at + more_s
            link.wait_background(lambda: bool(link.late), min(until, now + _CONNECT_SLICE_S))
            connected = self._greet(link)

    def _greet(self, link: Link) -> set[int]:
        """Take in handshake outcomes; greet new and unresponsive nodes (in the background)."""
        nodes = self._nodes
        connected = link.connected()
        link.forget(link.background_nodes - connected)
        link.poll()
        self._take_greetings(link, connected)
        greet = [n for n in nodes.to_greet(connected) if n not in link.background_nodes]
        content = RecordDict(
            {
                CONFIG_KEY: ConfigRecord(
                    {SEED: self.settings.seed, NUM_PARTITIONS: self.settings.n_clients}
                )
            }
        )
        link.send_in_background(
            {n: Message(content, n, HELLO, ttl=link.ttl, group_id="hello") for n in greet}
        )
        link.poll()  # replies that are there at once (an in-process grid answers on push)
        self._take_greetings(link, connected)
        return connected

    def _take_greetings(self, link: Link, connected: set[int]) -> None:
        for node, outcome in link.late:
            self._nodes.greeted(node, outcome, connected)
        link.late.clear()

    # ------------------------------------------------------------------ exchanges

    def _ask(
        self,
        link: Link,
        clients: Iterable[int],
        message_type: str,
        content: RecordDict,
        group: str,
    ) -> dict[int, Message | str]:
        """One exchange with ``clients``: their replies, or why there is none (phase-prefixed)."""
        nodes = self._nodes
        phase = _PHASE.get(message_type, message_type)
        out, unanswered = ask(
            link, nodes.node_of, nodes.client_of, clients, message_type, content, group, phase
        )
        for node in unanswered:
            nodes.failed(node)
        return out

    def _account(self, server_round: int, phase: str, replies: Mapping[int, Any]) -> None:
        account(server_round, phase, replies, self._nodes.node_of, logger)

    def _train(
        self, link: Link, clients: IntArray, model: _Model, config: ConfigRecord, server_round: int
    ) -> dict[int, Trained | str]:
        """``train`` to ``clients``: their valid updates, or why there is none."""
        content = RecordDict({ARRAYS_KEY: model.record(), CONFIG_KEY: config})
        replies = self._ask(link, clients, MessageType.TRAIN, content, str(server_round))
        checked: dict[int, Trained | str] = {}
        for client, reply in replies.items():
            if isinstance(reply, str):
                checked[client] = reply
                continue
            try:
                got = _read_update(reply, client, model, self.settings.weighting)
            except RejectedReply as why:
                checked[client] = f"train: malformed reply: {why}"
                continue
            checked[client] = got
            if got.num_examples >= 0:
                self._nodes.sizes[client] = got.num_examples
        self._account(server_round, "train", checked)
        return checked

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
        replies = self._ask(link, clients, LOSS_PROBE, content, str(server_round))
        out: dict[int, float | str] = {}
        for client, reply in replies.items():
            if isinstance(reply, str):
                out[client] = reply
                continue
            try:
                out[client] = finite_metric(_read_metrics(reply, client), LOSS)
            except RejectedReply as why:
                out[client] = f"loss probe: malformed reply: {why}"
        self._account(server_round, "loss probe", out)
        return out

    # ------------------------------------------------------------------ evaluation

    def _evaluate(
        self, link: Link, server_round: int, model: _Model, config: ConfigRecord
    ) -> MetricRecord | None:
        """``evaluate`` to every available client; per-client accuracy and loss, and their mean."""
        connected = self._greet(link)
        clients = np.flatnonzero(self._nodes.available(connected))
        content = RecordDict({ARRAYS_KEY: model.record(), CONFIG_KEY: config})
        replies = self._ask(link, clients, MessageType.EVALUATE, content, str(server_round))
        n = self.settings.n_clients
        accuracy, loss = np.full(n, np.nan), np.full(n, np.nan)
        checked: dict[int, bool | str] = {}
        for client, reply in replies.items():
            if isinstance(reply, str):
                checked[client] = reply
                continue
            try:
                metrics = _read_metrics(reply, client)
                accuracy[client] = finite_metric(metrics, ACCURACY)
                loss[client] = finite_metric(metrics, LOSS)
                checked[client] = True
            except RejectedReply as why:
                checked[client] = f"evaluate: malformed reply: {why}"
        self._account(server_round, "evaluate", checked)
        record = EvaluationRecord(server_round, accuracy, loss)
        self.evaluations.append(record)
        reported = np.flatnonzero(np.isfinite(accuracy))
        if reported.size == 0:
            return None
        mean = aggregate_metricrecords(
            [
                RecordDict(
                    {
                        METRICS_KEY: MetricRecord(
                            {_WEIGHT: 1.0, ACCURACY: float(accuracy[c]), LOSS: float(loss[c])}
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

    def _evaluate_centrally(
        self,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None],
        server_round: int,
        model: _Model,
        result: Result,
    ) -> None:
        metrics = evaluate_fn(server_round, model.record())
        if metrics is not None:
            result.evaluate_metrics_serverapp[server_round] = metrics


_PHASE = {
    MessageType.TRAIN: "train",
    MessageType.EVALUATE: "evaluate",
    LOSS_PROBE: "loss probe",
}


@dataclass(frozen=True, eq=False)
class _Exchanges:
    """The `Gatherer` of one round of [`SchedulerStrategy`][adcs.flower.SchedulerStrategy]."""

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


def _request_config(config: ConfigRecord | None, server_round: int, seed: int) -> ConfigRecord:
    out = ConfigRecord(dict(config or {}))
    out[SERVER_ROUND] = server_round
    out[SEED] = seed
    return out


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
