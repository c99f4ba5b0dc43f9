"""Shared pieces of the Flower tests: synthetic clients, an in-process Grid, and adcs's reference run.

The reference run recomputes, without Flower, what a round must produce: the scheduler's choices
from the same generator, each client's update from :func:`adcs.sim.model.local_update` on the
minibatches :func:`adcs.flower.minibatch_indices` names, and the server step over the clients whose
updates were accepted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from adcs.flower import LocalData, minibatch_indices
from adcs.schedulers.base import ClientStats, ProbeKind, Scheduler
from adcs.sim.model import LogisticRegression, local_update
from adcs.streams import scheduler_rng

N_FEATURES = 6
N_CLASSES = 3
LOCAL_STEPS = 2
BATCH_SIZE = 4
LOCAL_LR = 0.5
TRAIN_CONFIG: dict[str, Any] = {
    "local-steps": LOCAL_STEPS,
    "batch-size": BATCH_SIZE,
    "local-lr": LOCAL_LR,
}


def synthetic_clients(n_clients: int, seed: int = 0) -> list[LocalData]:
    """Small label-skewed clients: client k mostly holds class k mod 3; sizes differ."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0.1, 0.9, size=(N_CLASSES, N_FEATURES))
    clients = []
    for k in range(n_clients):
        sizes = (10 + k, 6)
        parts = []
        for n in sizes:
            main = rng.random(n) < 0.7
            y = np.where(main, k % N_CLASSES, rng.integers(0, N_CLASSES, size=n))
            x = np.clip(centres[y] + 0.15 * rng.standard_normal((n, N_FEATURES)), 0.0, 1.0)
            parts.append((x.astype(np.float32), y.astype(np.intp)))
        (x_train, y_train), (x_test, y_test) = parts
        clients.append(LocalData(x_train, y_train, x_test, y_test))
    return clients


def small_model() -> LogisticRegression:
    return LogisticRegression(n_features=N_FEATURES, n_classes=N_CLASSES)


def client_update(
    model: LogisticRegression,
    params: np.ndarray,
    data: LocalData,
    seed: int,
    server_round: int,
    pid: int,
) -> tuple[np.ndarray, float]:
    """One client's update Δ and first-minibatch loss, computed as adcs's simulator would."""
    idx = minibatch_indices(seed, server_round, pid, len(data.y_train), LOCAL_STEPS, BATCH_SIZE)
    update, loss = local_update(
        model, params[None], data.x_train[idx][None], data.y_train[idx][None], LOCAL_LR
    )
    return update[0], float(loss[0])


@dataclass
class ReferenceRound:
    probe_kind: ProbeKind
    probed: np.ndarray
    selected: np.ndarray
    aggregated: np.ndarray
    params: np.ndarray


def reference_run(
    scheduler: Scheduler,
    clients: Sequence[LocalData],
    rounds: int,
    seed: int,
    broken: frozenset[int] = frozenset(),
    server_lr: float = 1.0,
) -> list[ReferenceRound]:
    """adcs's own computation of ``rounds`` rounds; ``broken`` clients never deliver an update."""
    model = small_model()
    n = len(clients)
    rng = scheduler_rng(seed, "flower")  # SchedulerStrategy's default run_id
    state = scheduler.init(n, np.asarray([len(c.y_train) for c in clients], dtype=float))
    params = model.init_params(1)[0]
    out = []
    everyone = np.ones(n, dtype=bool)
    for t in range(rounds):
        computed = [client_update(model, params, clients[k], seed, t + 1, k) for k in range(n)]
        updates = np.stack([u.astype(np.float64).ravel() for u, _ in computed])
        losses = np.asarray([loss for _, loss in computed])
        probe = scheduler.probe(state, t, everyone, rng)
        targets = probe.targets(everyone)
        ok = np.zeros(n, dtype=bool)
        ok[targets] = True
        ok[list(broken)] = False
        available = ~(np.isin(np.arange(n), targets) & ~ok)
        got = np.flatnonzero(ok)
        if probe.kind is ProbeKind.NONE:
            stats = ClientStats.blind(everyone)
        elif probe.kind is ProbeKind.LOSSES:
            stats = ClientStats(available, got, losses[got])
        else:
            stats = ClientStats(available, got, losses[got], updates[got])
        selection, state = scheduler.select(state, t, stats, rng)
        chosen = np.asarray(selection.clients, dtype=np.intp)
        aggregated = np.asarray([c for c in chosen if c not in broken], dtype=np.intp)
        if aggregated.size:
            mean = np.mean([computed[c][0].astype(np.float64) for c in aggregated], axis=0)
            params = (params + server_lr * mean).astype(params.dtype)
        state = scheduler.observe(state, t, aggregated, updates[aggregated], losses[aggregated])
        out.append(ReferenceRound(probe.kind, targets, chosen, aggregated, params.copy()))
    return out


@dataclass
class InProcessGrid(Grid):
    """A Grid that runs each node's ClientApp synchronously in this process (no Ray, no network).

    ``nodes`` maps a node id to its ClientApp and partition id; tests add and remove entries to
    make nodes join and vanish (a message to a vanished node is accepted and never answered, as
    by Flower's SuperLink). Nodes in ``hung`` stay connected but never answer; for nodes in
    ``unavailable`` the SuperLink answers, as Flower's does for a node whose heartbeat stopped
    (an error reply under the SuperLink's node id). Every delivered message is logged in
    ``delivered`` as (message type, partition id, config record, node id).
    """

    nodes: dict[int, tuple[ClientApp, int]]
    n_partitions: int
    hung: set[int] = field(default_factory=set)
    unavailable: set[int] = field(default_factory=set)
    delivered: list[tuple[str, int, dict[str, Any], int]] = field(default_factory=list)
    _replies: dict[str, Message] = field(default_factory=dict)

    def set_run(self, run: Any) -> None:
        raise NotImplementedError

    @property
    def run(self) -> Any:
        raise NotImplementedError

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg_id = uuid.uuid4().hex
            msg.metadata.__dict__["_message_id"] = msg_id
            ids.append(msg_id)
            node = msg.metadata.dst_node_id
            if node not in self.nodes or node in self.hung:
                continue  # a vanished or hung node never answers
            if node in self.unavailable:
                error = Error(code=5, reason="Error: Node Unavailable (heartbeat)")
                reply = Message(error, reply_to=msg)
                reply.metadata.__dict__["_src_node_id"] = 1  # the SuperLink's own node id
                self._replies[msg_id] = reply
                continue
            app, pid = self.nodes[node]
            context = Context(
                run_id=1,
                node_id=node,
                node_config={"partition-id": pid, "num-partitions": self.n_partitions},
                state=RecordDict(),
                run_config={},
            )
            config = dict(msg.content.config_records.get("config", {}))
            self.delivered.append((msg.metadata.message_type, pid, config, node))
            try:
                reply = app(msg, context)
            except Exception as err:  # what the simulation engine does with a raising ClientApp
                reply = Message(Error(code=0, reason=repr(err)), reply_to=msg)
            self._replies[msg_id] = reply
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))

    def trained(self, **config: Any) -> list[int]:
        """Partition ids that received ``train`` with the given config entries, in order."""
        return [
            pid
            for kind, pid, cfg, _ in self.delivered
            if kind == "train" and all(cfg.get(k) == v for k, v in config.items())
        ]


def grid_of(
    apps: Callable[[int], ClientApp],
    n_clients: int,
    first_node: int = 1000,
    n_partitions: int | None = None,
) -> InProcessGrid:
    """An in-process grid with nodes for partitions 0..n_clients−1 (of ``n_partitions``, default
    ``n_clients``), whose node ids are not their partition ids."""
    nodes = {first_node + 7 * k: (apps(k), k) for k in range(n_clients)}
    return InProcessGrid(nodes, n_partitions or n_clients)


FAULTS = ("raise", "nan", "no-loss", "shape", "dtype", "pid", "extra-key")


def instrumented_app(
    inner: ClientApp,
    log_path: str | None = None,
    faults: dict[int, str] | None = None,
    fault_phase: str | None = None,
) -> ClientApp:
    """``inner`` with every delivered message logged and, optionally, faulty train replies.

    Each message appends ``"<phase> <server-round> <partition-id> <message type>"`` to
    ``log_path`` (the phase is the request config's ``"phase"``), so a test learns from the
    clients themselves who was asked to do what. ``faults`` maps a partition id to one of
    :data:`FAULTS`, applied to its ``train`` replies (only in ``fault_phase`` when given).
    """
    faults = dict(faults or {})
    app = ClientApp()

    def handle(message: Message, context: Context) -> Message:
        config: Mapping[str, Any] = message.content.config_records.get("config", {})
        pid = int(context.node_config["partition-id"])
        if log_path is not None:
            line = f"{config.get('phase', '-')} {config.get('server-round', 0)} {pid} "
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(line + message.metadata.message_type + "\n")
        fault = faults.get(pid)
        active = fault_phase is None or config.get("phase") == fault_phase
        is_train = message.metadata.message_type == "train"
        if is_train and active and fault == "raise":
            raise RuntimeError(f"client {pid} crashed on purpose")
        reply = inner(message, context)
        if not (is_train and active and fault):
            return reply
        return _corrupt(reply, message, fault)

    app.train()(handle)
    app.evaluate()(handle)
    app.query("adcs_hello")(handle)
    app.query("adcs_loss")(handle)
    return app


def _corrupt(reply: Message, request: Message, fault: str) -> Message:
    from flwr.app import Array, ArrayRecord, MetricRecord

    arrays = reply.content.array_records["arrays"]
    key = next(iter(arrays.keys()))
    update = arrays[key].numpy()
    metrics: dict[str, Any] = dict(reply.content.metric_records["metrics"])
    if fault == "nan":
        update = np.full_like(update, np.nan)
    elif fault == "shape":
        update = update[:-1]
    elif fault == "dtype":
        update = update.astype(np.float64)
    elif fault == "no-loss":
        metrics.pop("loss")
    elif fault == "pid":
        metrics["partition-id"] = (int(metrics["partition-id"]) + 1) % 1000
    new_arrays = {key: Array(np.ascontiguousarray(update))}
    if fault == "extra-key":
        new_arrays["extra"] = Array(np.zeros(3, dtype=np.float32))
    content = RecordDict({"arrays": ArrayRecord(new_arrays), "metrics": MetricRecord(metrics)})
    return Message(content, reply_to=request)


def read_log(path: str) -> list[tuple[str, int, int, str]]:
    """The lines written by :func:`instrumented_app`: (phase, round, partition id, type)."""
    with open(path, encoding="utf-8") as log:
        rows = [line.split() for line in log if line.strip()]
    return [(phase, int(rnd), int(pid), kind) for phase, rnd, pid, kind in rows]


@pytest.fixture
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Flower's runtime sets before a ServerApp makes Messages."""
    from flwr.supercore.task_identity import TaskIdentity

    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


TIMEOUT_S = 300.0
"""The simulations' connect, wait-for-all and reply timeouts: no test here waits one out (their
faults raise or reply at once), so only a slow machine meets them, where Ray's first actors can
take a minute to start."""


def simulate_flower(server_app: Any, client_app: ClientApp, n_nodes: int) -> None:
    """``flwr.simulation.run_simulation`` with one CPU per ClientApp actor and one for Ray, this
    process's ``PYTHONPATH`` restored after (Flower's Ray backend exports ``sys.path`` into it)."""
    import os
    import warnings

    from flwr.simulation import run_simulation

    backend: dict[str, dict[str, Any]] = {
        "client_resources": {"num_cpus": 1},
        "init_args": {"num_cpus": 1},
    }
    pythonpath = os.environ.get("PYTHONPATH")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Tip: In future versions of Ray")
            run_simulation(server_app, client_app, n_nodes, backend_config=backend)
    finally:
        if pythonpath is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = pythonpath
