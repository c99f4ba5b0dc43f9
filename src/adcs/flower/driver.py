"""The driver of a scheduled Flower server: what every wire protocol shares (docs/design.md §7).

`Driver` owns the run: Flower's ``start`` loop and its console output (the start block,
``[ROUND r/T]``, the aggregated metric records, the final results block, as Flower's
``Strategy.start`` prints them), the wait for nodes, the round of `adcs.round.machine` (probe,
gather, select, train, observe) with its sketch of long updates, the federated evaluation's
record and result columns, centralised evaluation, and checkpoints with resume. An adapter —
`adcs.flower.Scheduled`, which lets a wrapped Flower strategy build the messages and
aggregate — supplies the wire protocol through four hooks: `Driver._exchanges` (the round's
gatherer), `Driver._aggregate`, `Driver._evaluate` and `Driver._summary`.

Clients are nodes: indices 0..N−1 in order of first appearance (`adcs.flower.nodes.
NodeIndex`); a client is available while its node is connected. With ``n_clients=None`` N is the
number of nodes connected when the first round starts.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result
from flwr.serverapp.strategy.strategy_utils import log_strategy_start_info
from numpy.typing import NDArray

from adcs._validate import check_int
from adcs.flower.checkpoint import ServerCheckpoint, load_checkpoint, restore_rng, save_checkpoint
from adcs.flower.dropin import Template
from adcs.flower.link import Link
from adcs.flower.nodes import NodeIndex, NodeMap
from adcs.flower.round import (
    EvaluationRecord,
    RejectedReply,
    RoundRecord,
    account,
    ask,
    settle,
)
from adcs.flower.settings import Settings
from adcs.round.contract import F64Array
from adcs.round.machine import RoundRules
from adcs.round.play import Gatherer, Played, play
from adcs.schedulers.base import BoolArray, Scheduler
from adcs.sketch import UpdateSketch
from adcs.streams import scheduler_rng, stream_key

__all__ = ["Driver", "EvaluateFn"]

# Under Flower's logger, as Flower's strategies log: its lines reach the console and `flwr log`.
logger = logging.getLogger("flwr").getChild("adcs")

EvaluateFn = Callable[[int, ArrayRecord], MetricRecord | None]
F32Array = NDArray[np.float32]
Nodes = NodeIndex | NodeMap
T = TypeVar("T")
_SLEEP_S = 0.2
_CONNECT_SLICE_S = 1.0


class Driver:
    """A scheduled Flower server's run, less its wire protocol (module docstring).

    Parameters
    ----------
    scheduler : Scheduler
        Chooses who is probed and who trains each round.
    settings : Settings

    Attributes
    ----------
    history : list of RoundRecord
        One record per round (resumed rounds included), in client indices.
    evaluations : list of EvaluationRecord
        One record per federated evaluation (resumed rounds' included).
    """

    name = "Driver"
    takes: frozenset[str] = frozenset()
    """The `adcs.flower.settings.Settings` fields the adapter takes."""
    quiet_accounts = False
    """Log no exchange without failures (the wrapped strategy prints its own count)."""

    def __init__(self, scheduler: Scheduler, settings: Settings) -> None:
        self.scheduler = scheduler
        self.settings = settings
        self.history: list[RoundRecord] = []
        self.evaluations: list[EvaluationRecord] = []
        self._nodes: Nodes | None = None
        self._partition_of: dict[int, int] = {}  # node id → the app's partition id
        self._n_clients = settings.n_clients
        self._num_rounds = 0

    @property
    def node_of(self) -> dict[int, int]:
        """Client index → Flower node id."""
        return {} if self._nodes is None else dict(self._nodes.node_of)

    @property
    def n_clients(self) -> int | None:
        """N: given, or inferred at the first round (None before)."""
        return self._n_clients

    # ------------------------------------------------------------------ the adapter's hooks

    def _min_available(self) -> int:
        """Nodes a round waits for (the wrapped strategy's ``min_available_nodes``)."""
        return 1

    def _exchanges(
        self, link: Link, template: Template, arrays: ArrayRecord, configs: _Configs, r: int
    ) -> Gatherer:
        raise NotImplementedError

    def _aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, server_round: int
    ) -> tuple[ArrayRecord, MetricRecord]:
        raise NotImplementedError

    def _evaluate(
        self, link: Link, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> MetricRecord | None:
        raise NotImplementedError

    def _summary(self) -> None:
        """Log the scheduler and the settings the adapter takes."""
        settings = {k: getattr(self.settings, k) for k in sorted(self.takes)}
        logger.info("\t└──> adcs: %r, settings %s", self.scheduler, settings)

    def _log_round(self, record: RoundRecord) -> None:
        """One line per round, in Flower node ids (and the app's partition ids where its
        replies carry them), that a reader or a test can parse from the ServerApp's log."""
        node_of = self._nodes_index().node_of
        logger.info(
            "adcs round %d: %d nodes available, probed (%s) %s, selected %s, aggregated %s, "
            "failed %s",
            record.server_round,
            int(record.available.sum()),
            record.probe_kind.name.lower(),
            self._names(record.probed),
            self._names(record.selected),
            self._names(record.aggregated),
            {node_of[c]: why for c, why in record.failed.items()},
        )

    def _names(self, clients: Iterable[int]) -> str:
        """Clients as Flower node ids, with the app's partition id where its replies carry it."""
        return "[" + ", ".join(self._name(int(c)) for c in clients) + "]"

    def _name(self, client: int) -> str:
        """A client as its users know it: its Flower node id (and the app's partition id)."""
        node = self._nodes_index().node_of[client]
        pid = self._partition_of.get(node)
        return f"node {node}" + ("" if pid is None else f" (partition {pid})")

    def _note_partition(self, node: int, metrics: Mapping[str, Any]) -> None:
        """Keep the partition id a reply's metrics carry (``partition_key``) for `_names`."""
        pid = metrics.get(self.settings.partition_key)
        if isinstance(pid, int) and not isinstance(pid, bool):
            self._partition_of[node] = pid

    def _strategy_state(self) -> dict[str, Any]:
        """What the adapter keeps across rounds beyond the model (saved in checkpoints)."""
        return {}

    def _restore_strategy_state(self, state: Mapping[str, Any]) -> None:
        """Take back `_strategy_state`'s value from a checkpoint."""

    def _identity(self) -> dict[str, Any]:
        s = self.settings
        return {"scheduler": repr(self.scheduler), "seed": s.seed, "run_id": s.run_id}

    # ------------------------------------------------------------------ the run

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: EvaluateFn | None = None,
    ) -> Result:
        """Run ``num_rounds`` rounds (continuing a checkpoint if there is one), as Flower's
        ``Strategy.start``.

        Parameters
        ----------
        grid : flwr.serverapp.Grid
        initial_arrays : ArrayRecord
            w⁽⁰⁾: any number of arrays, any dtypes (e.g. ``ArrayRecord(model.state_dict())``).
        num_rounds : int
            Rounds in all (a resumed run does the rounds its checkpoint has not).
        timeout : float
            Seconds each exchange waits for replies; a later reply is its client's failure.
        train_config, evaluate_config : ConfigRecord, optional
            Sent with every ``train`` / ``evaluate`` request (loss probes included), with
            ``server-round`` set.
        evaluate_fn : callable, optional
            ``evaluate_fn(server_round, arrays)``: centralised evaluation before the first round
            and after each (as in Flower).

        Returns
        -------
        flwr.serverapp.strategy.Result
        """
        check_int("num_rounds", num_rounds)
        template = self._check_initial(initial_arrays)
        self._num_rounds = num_rounds
        link = Link(grid, timeout, self.settings.max_in_flight)
        rng = scheduler_rng(self.settings.seed, self.settings.run_id)
        logger.info("Starting %s strategy:", self.name)
        log_strategy_start_info(num_rounds, initial_arrays, train_config, evaluate_config)
        self._summary()
        logger.info("")
        started_at = time.time()
        arrays, state, result, first = self._resume(template, initial_arrays, rng)
        rules = self._rules(template)
        if first == 1 and evaluate_fn is not None:
            _central(evaluate_fn, 0, arrays, result)
        for server_round in range(first, num_rounds + 1):
            logger.info("")
            logger.info("[ROUND %s/%s]", server_round, num_rounds)
            started = time.perf_counter()
            available = self._connect(link, first=server_round == first)
            if state is None:
                state = self.scheduler.init(self._nodes_index().n_clients, self._data_sizes())
            configs = self._configs(
                _Configs(
                    _with_round(train_config, server_round),
                    _with_round(evaluate_config, server_round),
                )
            )
            exchanges = self._exchanges(link, template, arrays, configs, server_round)
            played = play(rules, state, server_round - 1, available, rng, exchanges, template.size)
            state = played.record.state
            arrays, metrics = self._aggregate(played, arrays, template, server_round)
            wall_s = time.perf_counter() - started
            record = RoundRecord.of(played, server_round, available, wall_s, time.time())
            self.history.append(record)
            self._log_round(record)
            result.arrays = arrays
            result.train_metrics_clientapp[server_round] = metrics
            logger.info("\t└──> Aggregated MetricRecord: %s", metrics)
            evaluated = self._evaluate(link, server_round, arrays, configs.evaluate)
            if evaluated is not None:
                logger.info("\t└──> Aggregated MetricRecord: %s", evaluated)
                result.evaluate_metrics_clientapp[server_round] = evaluated
            if evaluate_fn is not None:
                _central(evaluate_fn, server_round, arrays, result)
            if self._checkpoint_due(server_round, num_rounds):
                self._save(server_round, arrays, state, rng, result)
        _final(result, time.time() - started_at)
        return result

    def _nodes_index(self) -> Nodes:
        if self._nodes is None:
            raise RuntimeError("no node is indexed before the first round")
        return self._nodes

    def _connect(self, link: Link, first: bool) -> BoolArray:
        """The availability mask at a round's start.

        The first round of a start waits for max(``min_available_nodes``, m) clients (then up
        to ``wait_for_all_s`` for all N; for more nodes when N is inferred), a later one for
        ``min_available_nodes``; a run that waits longer than ``connect_timeout_s`` fails with
        the count.
        """
        settings = self.settings
        need = max(self._min_available(), self.scheduler.m if first else 1)
        if self._n_clients is not None:
            need = min(need, self._n_clients)
        more_s = settings.wait_for_all_s if first else 0.0
        give_up = time.monotonic() + settings.connect_timeout_s
        enough_at: float | None = None
        while True:
            connected = self._connected(link)
            if self._nodes is not None:
                count = int(self._nodes.available(connected).sum())
            else:
                count = len(connected)
            now = time.monotonic()
            if count >= need and enough_at is None:
                enough_at = now
            if count == self._n_clients or (enough_at is not None and now >= enough_at + more_s):
                n = self._n_clients = self._n_clients or count
                if self._nodes is None:
                    self._nodes = self._new_nodes(n, ())
                if first and count < n:
                    logger.info("starting with %d of %d clients connected", count, n)
                return self._nodes.available(connected)
            if enough_at is None and now >= give_up:
                raise RuntimeError(
                    f"only {count} clients are connected after {settings.connect_timeout_s:g} s, "
                    f"but the {'first round needs' if first else 'round needs at least'} {need} "
                    f"(min_available_nodes={self._min_available()}, m={self.scheduler.m}, "
                    f"N={self._n_clients}); start more SuperNodes or raise connect_timeout_s"
                )
            until = give_up if enough_at is None else enough_at + more_s
            self._pause(link, min(until, now + _CONNECT_SLICE_S))

    def _connected(self, link: Link) -> set[int]:
        """The node ids connected now."""
        return link.connected()

    def _pause(self, link: Link, until: float) -> None:
        """Wait (at most until ``until``, a ``time.monotonic()``) before looking again."""
        time.sleep(max(0.0, min(_SLEEP_S, until - time.monotonic())))

    def _new_nodes(self, n_clients: int, saved: Sequence[int]) -> Nodes:
        """The client ↔ node map of a run (``saved``: a checkpoint's node ids in client order)."""
        return NodeIndex(n_clients, saved, logger)

    def _saved_nodes(self) -> list[int]:
        """What of the node map a checkpoint keeps (node ids in client order)."""
        nodes = self._nodes_index()
        return nodes.nodes if isinstance(nodes, NodeIndex) else []

    def _data_sizes(self) -> F64Array | None:
        """The clients' data sizes for ``scheduler.init`` (None: not known)."""
        return None

    def _unanswered(self, nodes: list[int]) -> None:
        """Nodes that did not answer a request at all (no reply, gone, the SuperLink's error)."""

    def _rule_extras(self) -> dict[str, Any]:
        """The adapter's `adcs.round.machine.RoundRules` fields (weights, a robust rule)."""
        return {}

    def _check_initial(self, arrays: ArrayRecord) -> Template:
        """The layout of ``initial_arrays`` (ValueError unless the adapter can send it)."""
        return Template.of(arrays)

    def _configs(self, configs: _Configs) -> _Configs:
        """The round's request configs (given with ``server-round`` set)."""
        return configs

    def _rules(self, template: Template) -> RoundRules:
        """The run's round rules: its scheduler, the adapter's extras, and the sketch the
        updates reach it through (``sketch_dim``, seeded by ``seed``) when the model is longer."""
        k = self.settings.sketch_dim
        sketch = None
        if k is not None and k < template.size:
            sketch = _LazySketch(template.size, k, stream_key(self.settings.seed))
        return RoundRules(
            self.scheduler, who=repr(self.scheduler), sketch=sketch, **self._rule_extras()
        )

    def _ask(
        self, link: Link, requests: Mapping[int, Message], server_round: int, phase: str
    ) -> dict[int, Message | str]:
        """Send ``requests`` (client → message, as built; they take the link's TTL) in one
        exchange: each client's reply, or why there is none."""
        nodes = self._nodes_index()
        for message in requests.values():
            message.metadata.ttl = link.ttl
        outcomes = link.exchange({nodes.node_of[c]: m for c, m in requests.items()})
        got, unanswered = settle(outcomes, nodes.client_of, phase)
        self._unanswered(unanswered)
        return got

    def _send(
        self,
        link: Link,
        groups: Iterable[tuple[str, RecordDict, Iterable[int]]],
        server_round: int,
        phase: str,
    ) -> dict[int, Message | str]:
        """One exchange per (message type, content, clients): each client's reply, or why there
        is none (phase-prefixed)."""
        nodes = self._nodes_index()
        out: dict[int, Message | str] = {}
        for message_type, content, clients in groups:
            got, unanswered = ask(
                link,
                nodes.node_of,
                nodes.client_of,
                clients,
                message_type,
                content,
                str(server_round),
                phase,
            )
            self._unanswered(unanswered)
            out.update(got)
        return out

    def _account(self, server_round: int, phase: str, replies: Mapping[int, Any]) -> None:
        account(server_round, phase, replies, self._name, logger, quiet=self.quiet_accounts)

    def _check(
        self,
        server_round: int,
        phase: str,
        replies: Mapping[int, Message | str],
        read: Callable[[int, Message], T],
    ) -> dict[int, T | str]:
        """Each reply as ``read(client, reply)`` gives it, or why there is none (a
        `adcs.flower.round.RejectedReply` is a malformed reply); accounted Flower's way."""
        out: dict[int, T | str] = {}
        for client, reply in replies.items():
            if isinstance(reply, str):
                out[client] = reply
                continue
            try:
                out[client] = read(client, reply)
            except RejectedReply as why:
                out[client] = f"{phase}: malformed reply: {why}"
        self._account(server_round, phase, out)
        return out

    def _record_evaluation(
        self, server_round: int, checked: Mapping[int, tuple[float, float] | str]
    ) -> EvaluationRecord:
        """Record each evaluated client's (loss, accuracy) (`_check`'s outcome)."""
        n = self._nodes_index().n_clients
        accuracy, loss = np.full(n, np.nan), np.full(n, np.nan)
        for client, value in checked.items():
            if not isinstance(value, str):
                loss[client], accuracy[client] = value
        record = EvaluationRecord(server_round, accuracy, loss)
        self.evaluations.append(record)
        return record

    # ------------------------------------------------------------------ checkpoints

    def _checkpoint_due(self, server_round: int, num_rounds: int) -> bool:
        every = self.settings.checkpoint_every
        if self.settings.checkpoint_path is None:
            return False
        return server_round % every == 0 or server_round == num_rounds

    def _save(
        self,
        server_round: int,
        arrays: ArrayRecord,
        state: Any,
        rng: np.random.Generator,
        result: Result,
    ) -> None:
        path = self.settings.checkpoint_path
        assert path is not None
        checkpoint = ServerCheckpoint(
            server_round=server_round,
            identity=self._identity(),
            arrays={k: arrays[k].numpy() for k in arrays.keys()},
            scheduler_state=state,
            rng_states={"scheduler": dict(rng.bit_generator.state)},
            nodes=self._saved_nodes(),
            metrics=_metrics_of(result),
            history=list(self.history),
            evaluations=tuple(self.evaluations),
            n_clients=self._n_clients,
            strategy_state=self._strategy_state(),
        )
        save_checkpoint(Path(path), checkpoint)
        logger.info("round %d: checkpoint saved to %s", server_round, path)

    def _resume(
        self, template: Template, initial_arrays: ArrayRecord, rng: np.random.Generator
    ) -> tuple[ArrayRecord, Any, Result, int]:
        """The arrays, scheduler state, Result and first round: a checkpoint's, or fresh ones."""
        path = self.settings.checkpoint_path
        checkpoint = None if path is None else load_checkpoint(Path(path), self._identity())
        if checkpoint is None:
            n = self._n_clients = self.settings.n_clients
            self._nodes = None if n is None else self._new_nodes(n, ())
            self.history, self.evaluations = [], []
            return initial_arrays, None, Result(arrays=initial_arrays), 1
        given = self.settings.n_clients
        if given is not None and checkpoint.n_clients not in (None, given):
            raise ValueError(
                f"checkpoint {path} belongs to another run (n_clients={checkpoint.n_clients} "
                f"there, {given} here); remove it or use another path"
            )
        arrays = template.restore(checkpoint.arrays, str(path))
        restore_rng(rng, checkpoint.rng_states["scheduler"])
        self._n_clients = checkpoint.n_clients or given or len(checkpoint.nodes)
        self._nodes = self._new_nodes(self._n_clients, checkpoint.nodes)
        self.history = list(checkpoint.history)
        self.evaluations = list(checkpoint.evaluations)
        self._restore_strategy_state(checkpoint.strategy_state)
        result = Result(arrays=arrays)
        for name, target in (
            ("train", result.train_metrics_clientapp),
            ("evaluate", result.evaluate_metrics_clientapp),
            ("server", result.evaluate_metrics_serverapp),
        ):
            for r, values in checkpoint.metrics[name].items():
                target[r] = MetricRecord(values)
        logger.info("resuming from %s after round %d", path, checkpoint.server_round)
        return arrays, checkpoint.scheduler_state, result, checkpoint.server_round + 1


class _LazySketch:
    """`adcs.sketch.UpdateSketch` ``(dim, k, key).apply``, its projection built at the
    first use (a run whose scheduler never sees an update never builds it)."""

    def __init__(self, dim: int, k: int, key: int) -> None:
        self.dim, self.k, self.key = dim, k, key
        self._sketch: UpdateSketch | None = None

    def __call__(self, updates: F32Array) -> F32Array:
        if self._sketch is None:
            self._sketch = UpdateSketch(self.dim, self.k, self.key)
        return self._sketch.apply(updates)


class _Configs:
    """A round's ``train`` and ``evaluate`` configs, with ``server-round`` set."""

    def __init__(self, train: ConfigRecord, evaluate: ConfigRecord) -> None:
        self.train, self.evaluate = train, evaluate


def _with_round(config: ConfigRecord | None, server_round: int) -> ConfigRecord:
    out = ConfigRecord(dict(config or {}))
    out["server-round"] = server_round
    return out


def _central(
    evaluate_fn: EvaluateFn, server_round: int, arrays: ArrayRecord, result: Result
) -> None:
    metrics = evaluate_fn(server_round, arrays)
    if server_round == 0:
        logger.info("Initial global evaluation results: %s", metrics)
    else:
        logger.info("Global evaluation")
        logger.info("\t└──> MetricRecord: %s", metrics)
    if metrics is not None:
        result.evaluate_metrics_serverapp[server_round] = metrics


def _final(result: Result, seconds: float) -> None:
    """Flower's closing block: the run's time and the Result."""
    logger.info("")
    logger.info("Strategy execution finished in %.2fs", seconds)
    logger.info("")
    logger.info("Final results:")
    logger.info("")
    for line in io.StringIO(str(result)):
        logger.info("\t%s", line.strip("\n"))
    logger.info("")


def _metrics_of(result: Result) -> dict[str, dict[int, dict[str, Any]]]:
    return {
        "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()},
        "evaluate": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
        "server": {r: dict(m) for r, m in result.evaluate_metrics_serverapp.items()},
    }
