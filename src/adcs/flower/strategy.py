"""A Flower strategy (Message API) that runs any adcs scheduler: DESIGN §1's round, over a Grid.

One round of :meth:`SchedulerStrategy.start` (Flower's loop: ``configure_train`` → send and
receive → ``aggregate_train``), t = server_round − 1:

1. map live Flower nodes to client indices (a ``query.adcs_hello`` to every node not seen before;
   the reply names its partition id), giving the availability mask of shape (n_clients,);
2. ``probe = scheduler.probe(state, t, available, rng)``:

   * nothing — ``select`` now, send ``train`` to the selected clients only;
   * losses — send ``query.adcs_loss`` to the probed clients, ``select`` on the losses, send
     ``train`` to the selected clients only (PowerOfChoice);
   * updates — send ``train`` to every probed client; ``select`` runs when the updates are back,
     in ``aggregate_train`` (ADCS refresh rounds, OCS, DivFL, StaticDPP's first round);

3. only the selected clients' updates are aggregated, with FedAvg's weighted average of the
   updates Δ_n (weights p_n: uniform or data size, or the scheduler's own), and the model steps
   w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{n∈S} (p_n / Σ_S p) Δ_n;
4. ``scheduler.observe`` gets the selected clients' updates, and the round is recorded in
   :attr:`SchedulerStrategy.history`.

Replies are untrusted: an error reply, a missing or non-integer partition id, a partition id other
than the node's, missing or non-finite loss, arrays of other keys, shapes or dtypes than the global
model's, or NaN/inf values exclude that reply with a logged reason; the round goes on with the rest.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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
from flwr.serverapp.strategy import FedAvg, Result
from numpy.typing import NDArray

from adcs._validate import check_int
from adcs.flower.client import (
    ACCURACY,
    ARRAYS_KEY,
    CONFIG_KEY,
    HELLO,
    LOSS,
    LOSS_PROBE,
    LOSS_SOURCE,
    NUM_EXAMPLES,
    PARTITION_ID,
    SEED,
    SERVER_ROUND,
)
from adcs.rounds import aggregation_weights, check_selection
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
)

logger = logging.getLogger(__name__)

_WEIGHT = "adcs-weight"
"""Metric key of the server-computed aggregation weight handed to FedAvg's weighted average."""
_POLL_S = 0.2


@dataclass(frozen=True)
class ServerSettings:
    """Server-side hyperparameters of :class:`SchedulerStrategy`, validated on construction.

    Attributes
    ----------
    n_clients : int
        N: client indices are 0..N−1 (the partition ids the nodes report).
    server_lr : float
        η_s > 0 in w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ p_n Δ_n (DESIGN §2; the paper uses 1).
    weighting : {"uniform", "data_size"}
        p_n: uniform, or the client's reported number of training examples.
    seed : int
        Seeds the scheduler's generator and is sent to clients as ``adcs-seed`` (their minibatch
        draw, :func:`adcs.flower.client.minibatch_indices`).
    wait_for_clients : int or None
        Before the first round, wait until this many clients are connected (default: all N).
    connect_timeout_s : float
        How long to wait for clients to connect before giving up (first round: proceed if at least
        m are there; later rounds: raise if fewer than m are).
    evaluate_every : int
        Federated evaluation (``evaluate`` to every node) every this many rounds and after the
        last; 0 turns it off.
    """

    n_clients: int
    server_lr: float = 1.0
    weighting: Literal["uniform", "data_size"] = "uniform"
    seed: int = 0
    wait_for_clients: int | None = None
    connect_timeout_s: float = 120.0
    evaluate_every: int = 0

    def __post_init__(self) -> None:
        check_int("n_clients", self.n_clients)
        if not (isinstance(self.server_lr, (int, float)) and 0 < self.server_lr < math.inf):
            raise ValueError(f"server_lr must be a finite number > 0, got {self.server_lr!r}")
        if self.weighting not in ("uniform", "data_size"):
            raise ValueError(f"weighting must be 'uniform' or 'data_size', got {self.weighting!r}")
        check_int("seed", self.seed, minimum=0)
        if self.wait_for_clients is not None:
            check_int("wait_for_clients", self.wait_for_clients)
            if self.wait_for_clients > self.n_clients:
                raise ValueError(
                    f"wait_for_clients must be in [1, n_clients={self.n_clients}], "
                    f"got {self.wait_for_clients}"
                )
        if not (isinstance(self.connect_timeout_s, (int, float)) and self.connect_timeout_s >= 0):
            raise ValueError(
                f"connect_timeout_s must be a number >= 0, got {self.connect_timeout_s!r}"
            )
        check_int("evaluate_every", self.evaluate_every, minimum=0)


@dataclass(frozen=True, eq=False)
class RoundRecord:
    """What happened in one round (client indices, not Flower node ids).

    Attributes
    ----------
    server_round : int
        Flower's round (from 1); the scheduler saw round_idx = server_round − 1.
    probe_kind : ProbeKind
    available : ndarray of bool, shape (n_clients,)
        Clients with a live node when the round was configured.
    probed : ndarray of shape (n_probed,)
        Clients asked for a probe (losses or updates).
    selected : ndarray of shape (m,)
        The scheduler's choice, in its order.
    trained : ndarray of shape (n_trained,)
        Clients whose ``train`` reply held a valid update (probed and/or selected), sorted.
    aggregated : ndarray of shape (n_aggregated,)
        Selected clients whose update entered the aggregate, in selection order.
    failed : dict of int to str
        Client index → why its reply was excluded (or never came).
    client_updates : int
        Local updates computed and returned valid (the simulator's accounting: a probed update
        reused for aggregation counts once).
    loss_evals : int
        Losses evaluated separately from an update (loss probes) and returned valid.
    wall_s : float
        Seconds from ``configure_train`` to the end of ``aggregate_train``.
    """

    server_round: int
    probe_kind: ProbeKind
    available: BoolArray
    probed: IntArray
    selected: IntArray
    trained: IntArray
    aggregated: IntArray
    failed: dict[int, str]
    client_updates: int
    loss_evals: int
    wall_s: float


@dataclass(frozen=True, eq=False)
class EvaluationRecord:
    """Federated evaluation after one round.

    Attributes
    ----------
    server_round : int
    accuracy : ndarray of shape (n_clients,)
        Each client's test accuracy (NaN where it did not report).
    loss : ndarray of shape (n_clients,)
        Each client's test loss (NaN where it did not report).
    """

    server_round: int
    accuracy: FloatArray
    loss: FloatArray

    @property
    def worst_accuracy(self) -> float:
        """Minimum over the clients that reported."""
        return float(np.nanmin(self.accuracy)) if np.isfinite(self.accuracy).any() else math.nan

    @property
    def average_accuracy(self) -> float:
        """Mean over the clients that reported."""
        return float(np.nanmean(self.accuracy)) if np.isfinite(self.accuracy).any() else math.nan


class RejectedReply(ValueError):
    """A reply excluded from the round; the message says why."""


@dataclass(eq=False)
class _Valid:
    client: int
    loss: float
    num_examples: float
    arrays: ArrayRecord | None = None
    flat: NDArray[np.float64] | None = None


@dataclass(eq=False)
class _Round:
    server_round: int
    started: float
    available: BoolArray
    probe: Probe
    probed: IntArray
    selection: Selection | None = None
    sent_train: set[int] = field(default_factory=set)
    failed: dict[int, str] = field(default_factory=dict)
    loss_evals: int = 0


class SchedulerStrategy(FedAvg):
    """FedAvg whose participants are chosen by an adcs scheduler (see the module docstring).

    Parameters
    ----------
    scheduler : Scheduler
        Any scheduler of :mod:`adcs.schedulers` (or one following its protocol).
    n_clients : int
        N; the nodes must report partition ids in 0..N−1.
    **settings
        The other fields of :class:`ServerSettings` (``server_lr``, ``weighting``, ``seed``,
        ``wait_for_clients``, ``connect_timeout_s``, ``evaluate_every``).

    Attributes
    ----------
    history : list of RoundRecord
        One record per round of the last :meth:`start`.
    evaluations : list of EvaluationRecord
        One record per federated evaluation of the last :meth:`start`.
    node_of : dict of int to int
        Client index → Flower node id currently serving it.

    Notes
    -----
    The ClientApp must speak the protocol of :mod:`adcs.flower.client` (that module's
    :func:`~adcs.flower.client.make_client_app` does). Clients send updates Δ_n, not models.
    """

    def __init__(self, scheduler: Scheduler, n_clients: int, **settings: Any) -> None:
        self.settings = ServerSettings(n_clients=n_clients, **settings)
        if not isinstance(scheduler, Scheduler):
            raise ValueError(f"scheduler must follow adcs's Scheduler protocol, got {scheduler!r}")
        if scheduler.m > n_clients:
            raise ValueError(f"scheduler.m={scheduler.m} exceeds n_clients={n_clients}")
        super().__init__(
            fraction_train=1.0,
            fraction_evaluate=1.0,  # unused: configure_evaluate is overridden
            min_train_nodes=1,
            min_evaluate_nodes=1,
            min_available_nodes=1,
            weighted_by_key=_WEIGHT,
        )
        self.scheduler = scheduler
        self._reset()

    # ------------------------------------------------------------------ lifecycle

    def _reset(self) -> None:
        self.history: list[RoundRecord] = []
        self.evaluations: list[EvaluationRecord] = []
        self.node_of: dict[int, int] = {}
        self._client_of_node: dict[int, int] = {}
        self._data_sizes = np.full(self.settings.n_clients, np.nan)
        self._rng = np.random.default_rng(self.settings.seed)
        self._state: Any = None
        self._round: _Round | None = None
        self._grid: Grid | None = None
        self._global: ArrayRecord | None = None
        self._timeout: float = 3600.0
        self._num_rounds = 0
        self._evaluating = 0
        self._train_config = ConfigRecord()

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Flower's round loop from a fresh scheduler state; see :meth:`flwr.serverapp.Strategy.start`."""
        self._reset()
        self._check_model(initial_arrays)
        self._timeout = float(timeout)
        self._num_rounds = num_rounds
        return super().start(
            grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config, evaluate_fn
        )

    def summary(self) -> None:
        """Log the scheduler and the server settings."""
        logger.info("SchedulerStrategy: %r, %r", self.scheduler, self.settings)

    # ------------------------------------------------------------------ training

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Map nodes, ask the scheduler what to probe, gather losses if asked, and send ``train``."""
        started = time.perf_counter()
        self._grid, self._global = grid, arrays
        self._train_config = self._request_config(config, server_round)
        available = self._wait_for_clients(first=self._state is None)
        if self._state is None:
            sizes = self._data_sizes if np.isfinite(self._data_sizes).all() else None
            self._state = self.scheduler.init(self.settings.n_clients, sizes)
        t = server_round - 1
        probe = self.scheduler.probe(self._state, t, available, self._rng)
        probed = probe.targets(available)
        rnd = _Round(server_round, started, available, probe, probed)
        self._round = rnd
        if probe.kind is ProbeKind.UPDATES:
            return self._train_messages(rnd, probed)
        stats = ClientStats.blind(available)
        if probe.kind is ProbeKind.LOSSES:
            stats = self._probe_losses(rnd, probed)
        rnd.selection, self._state = self.scheduler.select(self._state, t, stats, self._rng)
        self._check_selection(rnd.selection, stats.available)
        return self._train_messages(rnd, rnd.selection.clients)

    def _check_selection(self, selection: Selection, available: BoolArray) -> None:
        check_selection(selection.clients, available, self.scheduler.m, who=repr(self.scheduler))

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Validate replies, select (after an update probe), aggregate the selected updates."""
        rnd = self._round
        if rnd is None or rnd.server_round != server_round or self._global is None:
            raise RuntimeError("aggregate_train called without a matching configure_train")
        valid = self._collect_updates(rnd, replies)
        t = server_round - 1
        if rnd.selection is None:
            stats = self._update_stats(rnd, valid)
            rnd.selection, self._state = self.scheduler.select(self._state, t, stats, self._rng)
            self._check_selection(rnd.selection, stats.available)
            missing = [int(c) for c in rnd.selection.clients if int(c) not in rnd.sent_train]
            if missing:  # selected without having been probed: train them now
                assert self._grid is not None
                msgs = self._train_messages(rnd, np.asarray(missing, dtype=np.intp))
                more = self._grid.send_and_receive(msgs, timeout=self._timeout)
                valid.update(self._collect_updates(rnd, more))
        selection = rnd.selection
        chosen = [int(c) for c in selection.clients]
        for c in chosen:
            if c not in valid and c not in rnd.failed:
                rnd.failed[c] = "no reply"
        aggregated = [c for c in chosen if c in valid]
        arrays, metrics = self._aggregate(server_round, selection, valid, aggregated)
        self._observe(t, selection, valid)
        self._record(rnd, valid, aggregated)
        return arrays, metrics

    def _aggregate(
        self,
        server_round: int,
        selection: Selection,
        valid: Mapping[int, _Valid],
        aggregated: list[int],
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if not aggregated:
            logger.warning(
                "round %d: no selected client returned a valid update; model kept", server_round
            )
            return None, None
        weights, scale = self._weights(selection, valid, aggregated)
        records = []
        for c, w in zip(aggregated, weights, strict=True):
            arrays = valid[c].arrays
            assert arrays is not None
            weight = MetricRecord({_WEIGHT: float(w), LOSS: valid[c].loss})
            records.append(Message(RecordDict({"arrays": arrays, "metrics": weight}), 0, "train"))
        mean_update, metrics = super().aggregate_train(server_round, records)
        if mean_update is None:
            return None, metrics
        assert self._global is not None
        step = self.settings.server_lr * scale
        new = {}
        for key, array in self._global.items():
            w = array.numpy()
            new[key] = Array(np.asarray(w + step * mean_update[key].numpy(), dtype=w.dtype))
        return ArrayRecord(new), metrics

    def _weights(
        self, selection: Selection, valid: Mapping[int, _Valid], aggregated: list[int]
    ) -> tuple[NDArray[np.float64], float]:
        """Weights for FedAvg's normalised average, and the factor undoing the normalisation.

        The coefficients are :func:`adcs.rounds.aggregation_weights`, the simulator's rule.
        """
        clients = np.asarray(selection.clients, dtype=np.intp)
        returned = np.isin(clients, aggregated)
        base = None
        if selection.weights is None and self.settings.weighting == "data_size":
            base = np.zeros(self.settings.n_clients)
            for c in aggregated:
                base[c] = valid[c].num_examples
            if base.sum() <= 0:
                logger.warning("selected clients report no examples; averaging uniformly")
                base = None
        coef = aggregation_weights(
            clients, returned, scheduler_weights=selection.weights, base=base
        )
        given = dict(zip(clients.tolist(), coef, strict=True))
        w = np.asarray([given[c] for c in aggregated], dtype=np.float64)
        return w, float(w.sum())

    def _observe(self, t: int, selection: Selection, valid: Mapping[int, _Valid]) -> None:
        """``observe`` with the selected clients that delivered (as the simulator does)."""
        assert self._global is not None
        dim = sum(int(np.prod(a.shape)) for a in self._global.values())
        clients = np.asarray([c for c in selection.clients if int(c) in valid], dtype=np.intp)
        updates = np.empty((clients.size, dim))
        losses = np.empty(clients.size)
        for i, c in enumerate(clients):
            got = valid[int(c)]
            assert got.flat is not None
            updates[i], losses[i] = got.flat, got.loss
        self._state = self.scheduler.observe(self._state, t, clients, updates, losses)

    def _record(self, rnd: _Round, valid: Mapping[int, _Valid], aggregated: list[int]) -> None:
        assert rnd.selection is not None
        for c, reason in sorted(rnd.failed.items()):
            logger.warning("round %d: client %d excluded: %s", rnd.server_round, c, reason)
        self.history.append(
            RoundRecord(
                server_round=rnd.server_round,
                probe_kind=rnd.probe.kind,
                available=rnd.available,
                probed=rnd.probed,
                selected=np.asarray(rnd.selection.clients, dtype=np.intp).copy(),
                trained=np.asarray(sorted(valid), dtype=np.intp),
                aggregated=np.asarray(aggregated, dtype=np.intp),
                failed=dict(rnd.failed),
                client_updates=len(valid),
                loss_evals=rnd.loss_evals,
                wall_s=time.perf_counter() - rnd.started,
            )
        )

    # ------------------------------------------------------------------ probes and replies

    def _request_config(self, config: ConfigRecord, server_round: int) -> ConfigRecord:
        out = ConfigRecord(dict(config))
        out[SERVER_ROUND] = server_round
        out[SEED] = self.settings.seed
        return out

    def _message(self, client: int, message_type: str, content: RecordDict) -> Message:
        rnd = self._round
        group = str(rnd.server_round) if rnd is not None else ""
        return Message(content, self.node_of[client], message_type, group_id=group)

    def _train_messages(self, rnd: _Round, clients: IntArray) -> list[Message]:
        assert self._global is not None
        content = RecordDict({ARRAYS_KEY: self._global, CONFIG_KEY: self._train_config})
        reachable = []
        for c in (int(c) for c in clients):
            if rnd.available[c]:
                reachable.append(c)
            else:
                rnd.failed[c] = "selected while not connected"
        rnd.sent_train.update(reachable)
        return [self._message(c, MessageType.TRAIN, content) for c in reachable]

    def _probe_losses(self, rnd: _Round, clients: IntArray) -> ClientStats:
        assert self._grid is not None and self._global is not None
        config = ConfigRecord(dict(self._train_config))
        config[LOSS_SOURCE] = rnd.probe.loss_source.value
        content = RecordDict({ARRAYS_KEY: self._global, CONFIG_KEY: config})
        msgs = [self._message(int(c), LOSS_PROBE, content) for c in clients]
        replies = self._grid.send_and_receive(msgs, timeout=self._timeout)
        losses = np.full(self.settings.n_clients, np.nan)
        for msg in replies:
            try:
                client, metrics = self._check_origin(msg)
                losses[client] = _finite_metric(metrics, LOSS)
            except RejectedReply as why:
                self._reject(rnd, msg, why, "loss probe")
        probed = np.isfinite(losses)
        for c in clients:
            if not probed[c]:
                rnd.failed.setdefault(int(c), "no valid loss-probe reply")
        rnd.loss_evals = int(probed.sum())
        available = self._exclude_failed(rnd.available, probed, clients)
        got = np.flatnonzero(probed)
        return ClientStats(available=available, clients=got, losses=losses[got])

    def _update_stats(self, rnd: _Round, valid: Mapping[int, _Valid]) -> ClientStats:
        assert self._global is not None
        n = self.settings.n_clients
        dim = sum(int(np.prod(a.shape)) for a in self._global.values())
        clients = np.asarray(sorted(valid), dtype=np.intp)
        updates = np.zeros((clients.size, dim))
        losses = np.full(clients.size, np.nan)
        for i, c in enumerate(clients):
            got = valid[int(c)]
            assert got.flat is not None
            updates[i], losses[i] = got.flat, got.loss
        probed = np.zeros(n, dtype=bool)
        probed[clients] = True
        for c in rnd.probed:
            if not probed[c]:
                rnd.failed.setdefault(int(c), "no reply")
        available = self._exclude_failed(rnd.available, probed, rnd.probed)
        return ClientStats(available=available, clients=clients, losses=losses, updates=updates)

    def _exclude_failed(self, available: BoolArray, ok: BoolArray, asked: IntArray) -> BoolArray:
        """Clients whose probe just failed are not selectable this round."""
        failed = np.zeros_like(available)
        failed[asked] = ~ok[asked]
        return available & ~failed

    def _collect_updates(self, rnd: _Round, replies: Iterable[Message]) -> dict[int, _Valid]:
        valid: dict[int, _Valid] = {}
        for msg in replies:
            try:
                got = self._check_update(msg)
            except RejectedReply as why:
                self._reject(rnd, msg, why, "train")
                continue
            if got.client in valid or got.client not in rnd.sent_train:
                self._reject(rnd, msg, RejectedReply("unrequested or duplicate reply"), "train")
                continue
            rnd.failed.pop(got.client, None)
            valid[got.client] = got
        return valid

    def _reject(self, rnd: _Round, msg: Message, why: Exception, what: str) -> None:
        """Note why a reply is excluded; the round's summary logs it (unknown nodes: now)."""
        node = msg.metadata.src_node_id
        client = self._client_of_node.get(node)
        if client is None:
            logger.warning(
                "round %d: %s reply from unknown node %d rejected: %s",
                rnd.server_round,
                what,
                node,
                why,
            )
        else:
            rnd.failed[client] = f"{what} reply rejected: {why}"

    def _check_origin(self, msg: Message) -> tuple[int, MetricRecord]:
        """The client index behind a reply, checked against the node map, and its metrics."""
        if msg.has_error():
            raise RejectedReply(f"error reply: {msg.error.reason}")
        client = self._client_of_node.get(msg.metadata.src_node_id)
        if client is None:
            raise RejectedReply("reply from an unknown node")
        metric_records = list(msg.content.metric_records.values())
        if len(metric_records) != 1:
            raise RejectedReply(f"expected one MetricRecord, got {len(metric_records)}")
        metrics = metric_records[0]
        pid = metrics.get(PARTITION_ID)
        if pid != client or isinstance(pid, (bool, float)):
            raise RejectedReply(f"reports {PARTITION_ID}={pid!r} but the node serves {client}")
        return client, metrics

    def _check_update(self, msg: Message) -> _Valid:
        client, metrics = self._check_origin(msg)
        loss = _finite_metric(metrics, LOSS)
        size = metrics.get(NUM_EXAMPLES, math.nan)
        num_examples = float(size) if isinstance(size, (int, float)) else math.nan
        if self.settings.weighting == "data_size" and not (num_examples >= 0):
            raise RejectedReply(f"missing or invalid '{NUM_EXAMPLES}' (weighting by data size)")
        records = list(msg.content.array_records.values())
        if len(records) != 1:
            raise RejectedReply(f"expected one ArrayRecord, got {len(records)}")
        arrays = records[0]
        flat = self._check_arrays(arrays)
        return _Valid(client, loss, num_examples, arrays, flat)

    def _check_arrays(self, arrays: ArrayRecord) -> NDArray[np.float64]:
        """The reply's update flattened to shape (dim,), after checking it against the model."""
        assert self._global is not None
        if list(arrays.keys()) != list(self._global.keys()):
            raise RejectedReply(
                f"update has arrays {list(arrays.keys())}, model has {list(self._global.keys())}"
            )
        parts = []
        for key, reference in self._global.items():
            try:
                value = arrays[key].numpy()
            except Exception as err:  # any undecodable payload is a bad reply, whatever it raises
                raise RejectedReply(f"array {key!r} cannot be decoded: {err}") from err
            if value.shape != tuple(reference.shape) or value.dtype != np.dtype(reference.dtype):
                raise RejectedReply(
                    f"array {key!r} is {value.dtype}{list(value.shape)}, "
                    f"expected {reference.dtype}{list(reference.shape)}"
                )
            if not np.isfinite(value).all():
                raise RejectedReply(f"array {key!r} holds NaN or inf")
            parts.append(value.astype(np.float64).ravel())
        return np.concatenate(parts)

    # ------------------------------------------------------------------ nodes

    def _wait_for_clients(self, first: bool) -> BoolArray:
        """Map new nodes, then return the availability mask once enough clients are live.

        The first round waits for ``wait_for_clients`` (at least m); later rounds go on with
        whoever is connected (all of them are selected when fewer than m are, the rule of
        :mod:`adcs.rounds`) and wait only while no client is.
        """
        n, m = self.settings.n_clients, self.scheduler.m
        need = (self.settings.wait_for_clients or n) if first else 1
        deadline = time.monotonic() + self.settings.connect_timeout_s
        while True:
            available = self._refresh_nodes()
            count = int(available.sum())
            if count >= need:
                return available
            if time.monotonic() >= deadline:
                if count >= min(m, need):
                    logger.warning("only %d of %d clients connected; starting anyway", count, need)
                    return available
                raise RuntimeError(
                    f"only {count} clients are connected after {self.settings.connect_timeout_s}s "
                    f"but the scheduler selects m={m}"
                )
            time.sleep(_POLL_S)

    def _refresh_nodes(self) -> BoolArray:
        """Handshake with unseen nodes; availability mask of shape (n_clients,) from live nodes."""
        assert self._grid is not None
        live = {int(node) for node in self._grid.get_node_ids()}
        new = sorted(live - set(self._client_of_node))
        if new:
            content = RecordDict({CONFIG_KEY: ConfigRecord({SEED: self.settings.seed})})
            msgs = [Message(content, node, HELLO) for node in new]
            for msg in self._grid.send_and_receive(msgs, timeout=self._timeout):
                self._register(msg, live)
        available = np.zeros(self.settings.n_clients, dtype=bool)
        for client, node in self.node_of.items():
            available[client] = node in live
        return available

    def _register(self, msg: Message, live: set[int]) -> None:
        node = msg.metadata.src_node_id
        try:
            if msg.has_error():
                raise RejectedReply(f"error reply: {msg.error.reason}")
            metric_records = list(msg.content.metric_records.values())
            pid = metric_records[0].get(PARTITION_ID) if len(metric_records) == 1 else None
            if isinstance(pid, bool) or not isinstance(pid, int):
                raise RejectedReply(f"no integer '{PARTITION_ID}' in the reply")
            if not 0 <= pid < self.settings.n_clients:
                raise RejectedReply(f"{PARTITION_ID}={pid} outside [0, {self.settings.n_clients})")
            holder = self.node_of.get(pid)
            if holder is not None and holder != node and holder in live:
                raise RejectedReply(f"client {pid} is already served by live node {holder}")
        except RejectedReply as why:
            logger.warning("node %d not registered (will retry next round): %s", node, why)
            return
        if holder is not None:
            self._client_of_node.pop(holder, None)
        self.node_of[pid] = node
        self._client_of_node[node] = pid
        size = metric_records[0].get(NUM_EXAMPLES)
        if isinstance(size, (int, float)) and not isinstance(size, bool) and size >= 0:
            self._data_sizes[pid] = float(size)
        logger.info("node %d serves client %d", node, pid)

    def _check_model(self, arrays: ArrayRecord) -> None:
        if len(arrays) == 0:
            raise ValueError("initial_arrays holds no arrays")
        for key, array in arrays.items():
            value = array.numpy()
            if not np.issubdtype(value.dtype, np.floating) or not np.isfinite(value).all():
                raise ValueError(f"initial array {key!r} must be finite floats, got {value.dtype}")

    # ------------------------------------------------------------------ evaluation

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """``evaluate`` to every mapped live node every ``evaluate_every`` rounds and the last."""
        every = self.settings.evaluate_every
        if not every or (server_round % every and server_round != self._num_rounds):
            return []
        live = {int(node) for node in grid.get_node_ids()}
        self._evaluating = server_round
        content = RecordDict(
            {ARRAYS_KEY: arrays, CONFIG_KEY: self._request_config(config, server_round)}
        )
        return [
            Message(content, node, MessageType.EVALUATE, group_id=str(server_round))
            for client, node in sorted(self.node_of.items())
            if node in live
        ]

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """Per-client accuracy and loss into :attr:`evaluations`; their plain mean and minimum."""
        if self._evaluating != server_round:  # nothing was sent this round
            return None
        n = self.settings.n_clients
        accuracy, loss = np.full(n, np.nan), np.full(n, np.nan)
        for msg in replies:
            try:
                client, metrics = self._check_origin(msg)
                accuracy[client] = _finite_metric(metrics, ACCURACY)
                loss[client] = _finite_metric(metrics, LOSS)
            except RejectedReply as why:
                logger.warning(
                    "round %d: evaluate reply from node %d rejected: %s",
                    server_round,
                    msg.metadata.src_node_id,
                    why,
                )
        record = EvaluationRecord(server_round, accuracy, loss)
        self.evaluations.append(record)
        reported = np.flatnonzero(np.isfinite(accuracy) & np.isfinite(loss))
        if reported.size == 0:
            return None
        records = [
            Message(
                RecordDict(
                    {
                        "metrics": MetricRecord(
                            {_WEIGHT: 1.0, ACCURACY: float(accuracy[c]), LOSS: float(loss[c])}
                        )
                    }
                ),
                0,
                "evaluate",
            )
            for c in reported
        ]
        mean = super().aggregate_evaluate(server_round, records)
        if mean is not None:
            mean["worst-accuracy"] = record.worst_accuracy
        return mean


def _finite_metric(metrics: MetricRecord, key: str) -> float:
    value = metrics.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RejectedReply(f"missing or non-finite metric '{key}' (got {value!r})")
    return float(value)
