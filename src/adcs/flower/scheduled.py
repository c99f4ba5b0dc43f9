"""``Scheduled(strategy)``: any Flower strategy, with an adcs scheduler choosing who trains.

It wraps a strategy of ``flwr.serverapp.strategy`` (FedAvg, FedAvgM, FedProx, FedAdam, FedYogi,
FedAdagrad, FedMedian, FedTrimmedAvg, Krum, MultiKrum, Bulyan, QFedAvg, and the
``DifferentialPrivacy*Clipping`` wrappers around any of them) the way Flower's DP wrappers do
(docs/design.md §7, §9): the scheduler chooses which nodes train, the wrapped strategy builds the
messages — its ``configure_train`` / ``configure_evaluate``, shown a Grid that lists only the
chosen nodes — and aggregates them with ``aggregate_train`` / ``aggregate_evaluate``, its own
arguments unchanged. The app stays as it was: its ClientApp keeps its ``@app.train()`` and
``@app.evaluate()`` handlers, its ArrayRecord of any arrays and dtypes, its MetricRecord;
the ServerApp swaps ``FedAdam(...)`` for ``Scheduled(FedAdam(...), scheduler=...)``.

* a **loss probe** (PowerOfChoice, Oort) is an ``evaluate`` message; its value is the reply's
  ``loss_key``;
* an **update probe** (ADCS at a refresh, DivFL, OCS, StaticDPP) is a ``train`` message built
  by the wrapped strategy; the update is the returned arrays minus the sent ones, flattened in
  the ArrayRecord's key order (sketched to ``sketch_dim`` when longer); a probed client that is
  selected is not asked again: its reply enters the aggregate;
* the **aggregate** is the wrapped strategy's ``aggregate_train`` over the selected clients'
  checked replies, its arrays passed on as it returns them (FedAdam's are float64, FedAvg's mean
  of an integer array is a float array, as in Flower). A scheduler that gives its own weights (an unbiased sampler) has them applied,
  w + Σ c_i (w_i − w), when the wrapped strategy is FedAvg; another strategy aggregates with its
  own weights (logged once);
* each **federated evaluation** is the wrapped strategy's; each evaluated client's loss and
  accuracy (``accuracy_key``) is kept in `Scheduled.evaluations`, and the worst, 10th
  percentile and average accuracy (`adcs.columns.COLUMNS`) join its aggregated metrics.

A strategy whose own sampling would undo the scheduler's choice (``fraction_train`` < 1
anywhere in the wrapper chain) is refused. The rest of the run — the start loop and its output,
the node wait, reply checks, the round, evaluation records, checkpoints — is
`adcs.flower.driver.Driver`'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp.exception import InconsistentMessageReplies
from flwr.serverapp.strategy import FedAvg, Strategy

from adcs._validate import check_number
from adcs.flower.driver import Driver, _Configs, picklable_changes, pickled_attributes
from adcs.flower.dropin import (
    Template,
    read_evaluate_loss,
    read_evaluation,
    read_train_reply,
    resolve_scheduler,
)
from adcs.flower.link import Link
from adcs.flower.round import RoundRecord
from adcs.flower.settings import WRAPPED, take
from adcs.round.play import Played, Trained
from adcs.schedulers.base import IntArray, LossSource, Scheduler

__all__ = ["Scheduled", "ScheduledFedAvg"]

logger = logging.getLogger("flwr").getChild("adcs")

_AGGREGATION_ERRORS = (
    InconsistentMessageReplies,
    TypeError,
    ValueError,
    KeyError,
    ZeroDivisionError,
)


class Scheduled(Driver):
    """A Flower strategy whose training nodes an adcs scheduler chooses (module docstring).

    Parameters
    ----------
    strategy : flwr.serverapp.strategy.Strategy
        The wrapped strategy, with ``fraction_train=1.0`` (the scheduler samples).
    scheduler : Scheduler or str
        An adcs scheduler object, or a name of `adcs.SCHEDULERS` (or
        ``"package.module:Class"``) built with ``scheduler_params`` (which must give ``m``).
    scheduler_params : dict, optional
        Constructor arguments when ``scheduler`` is a name.
    **settings
        The fields of `adcs.flower.settings.Settings` (``n_clients``, ``loss_key``,
        ``accuracy_key``, ``train_loss_key``, ``seed``, ``sketch_dim``, ``checkpoint_path``, ...).

    Attributes
    ----------
    strategy : Strategy
        The wrapped strategy.
    history : list of RoundRecord
    evaluations : list of EvaluationRecord
    node_of : dict of int to int
        Client index → node id.
    """

    takes = WRAPPED
    quiet_accounts = True

    def __init__(
        self,
        strategy: Strategy,
        scheduler: Scheduler | str,
        *,
        scheduler_params: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        chain = _chain(strategy)
        settings_ = take("Scheduled", self.takes, {"sketch_dim": 1024, **settings})
        super().__init__(
            resolve_scheduler(scheduler, scheduler_params, settings_.n_clients), settings_
        )
        _refuse_own_sampling(chain)
        self.strategy = strategy
        self._chain = chain
        inner = chain[-1]
        self.weight_key: str = getattr(inner, "weighted_by_key", "num-examples")
        self._keys = (
            getattr(inner, "arrayrecord_key", "arrays"),
            getattr(inner, "configrecord_key", "config"),
        )
        self.name = "Scheduled(" + "(".join(type(s).__name__ for s in chain) + ")" * len(chain)
        self._built = [pickled_attributes(s) for s in chain]
        self._partition_of: dict[int, int] = {}
        self._warned_weights = False

    def summary(self) -> None:
        """Log the wrapped strategy's summary and the scheduler."""
        self._summary()

    # ------------------------------------------------------------------ the hooks

    def _summary(self) -> None:
        self.strategy.summary()
        super()._summary()

    def _min_available(self) -> int:
        return max([int(getattr(s, "min_available_nodes", 1)) for s in self._chain])

    def _identity(self) -> dict[str, Any]:
        identity = super()._identity()
        identity["strategy"] = self.name
        if self.settings.n_clients is not None:
            identity["n_clients"] = self.settings.n_clients
        return identity

    def _exchanges(
        self, link: Link, template: Template, arrays: ArrayRecord, configs: _Configs, r: int
    ) -> _Exchanges:
        return _Exchanges(self, link, template, arrays, configs, r)

    def _requests(
        self, phase: str, clients: Iterable[int], arrays: ArrayRecord, config: ConfigRecord, r: int
    ) -> dict[int, Message]:
        """The wrapped strategy's ``train`` or ``evaluate`` messages to ``clients`` (a Grid that
        lists only their nodes, each more than once when the strategy wants more nodes)."""
        node_of = self._nodes_index().node_of
        nodes = [node_of[int(c)] for c in clients]
        if not nodes:
            return {}
        view = _GridView(nodes, self._padding())
        configure = (
            self.strategy.configure_train if phase == "train" else self.strategy.configure_evaluate
        )
        client_of = self._nodes_index().client_of
        out: dict[int, Message] = {}
        for message in configure(r, arrays, ConfigRecord(dict(config)), view):  # type: ignore[arg-type]
            client = client_of.get(message.metadata.dst_node_id)
            if client is not None and message.metadata.dst_node_id in nodes:
                out.setdefault(client, message)
        return out

    def _padding(self) -> int:
        names = ("min_available_nodes", "min_train_nodes", "min_evaluate_nodes")
        return max(int(getattr(s, n, 0)) for s in self._chain for n in names)

    def _aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, server_round: int
    ) -> tuple[ArrayRecord, MetricRecord]:
        """The wrapped strategy's aggregate over the delivered clients (or the scheduler's
        weighted step, module docstring)."""
        done = played.record
        replies = [played.held[int(c)].reply for c in done.aggregated]
        counts = {"results": len(replies), "failures": len(played.failed)}
        own_weights = done.selection.weights is not None
        if own_weights and not _is_fedavg(self.strategy) and not self._warned_weights:
            logger.warning(
                "%r gives its own aggregation weights; %s aggregates with its own",
                self.scheduler,
                type(self.strategy).__name__,
            )
            self._warned_weights = True
        if not replies:
            logger.warning("no selected client returned a valid update; the model is kept")
            return arrays, MetricRecord({**counts, "results": 0})
        weighable = sum(_weight(m.content, self.weight_key) for m in replies) > 0
        if own_weights and _is_fedavg(self.strategy):
            stepped = template.weighted_step(arrays, replies, done.aggregated_coef)
            metrics = self._train_metrics(server_round, replies) if weighable else None
            return stepped, MetricRecord({**(metrics or {}), **counts})
        if not weighable:
            logger.warning(
                "round %d: the train replies' '%s' sum to 0: the model is kept",
                server_round,
                self.weight_key,
            )
            return arrays, MetricRecord({**counts, "results": 0})
        new, metrics = self._aggregate_train(server_round, replies)
        if new is None:
            logger.warning("round %d: %s kept the model", server_round, self.name)
            return arrays, MetricRecord({**(metrics or {}), **counts, "results": 0})
        return new, MetricRecord({**(metrics or {}), **counts})

    def _aggregate_train(
        self, server_round: int, replies: list[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """``strategy.aggregate_train``; when the replies' metrics cannot be combined (a key a
        list in one reply and a number in another), again with their weight alone."""
        try:
            return self.strategy.aggregate_train(server_round, replies)
        except _AGGREGATION_ERRORS as why:
            logger.warning("round %d: train metrics not aggregated: %s", server_round, why)
        bare = [_weight_only(m, self.weight_key) for m in replies]
        arrays, _ = self.strategy.aggregate_train(server_round, bare)
        return arrays, None

    def _train_metrics(self, server_round: int, replies: list[Message]) -> MetricRecord | None:
        aggregate = getattr(self._chain[-1], "train_metrics_aggr_fn", None)
        if aggregate is None:
            return None
        try:
            metrics: MetricRecord = aggregate([m.content for m in replies], self.weight_key)
            return metrics
        except _AGGREGATION_ERRORS as why:
            logger.warning("round %d: train metrics not aggregated: %s", server_round, why)
            return None

    def _evaluate(
        self, link: Link, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> MetricRecord | None:
        """The wrapped strategy's federated evaluation among the available clients."""
        nodes = self._nodes_index()
        clients = np.flatnonzero(nodes.available(link.connected()))
        requests = self._requests("evaluate", clients, arrays, config, server_round)
        if not requests:
            return None
        replies = self._ask(link, requests, server_round, "evaluate")
        checked = self._check(
            server_round,
            "evaluate",
            replies,
            lambda _, reply: read_evaluation(reply, self.settings, self.weight_key),
        )
        valid = [
            m
            for c, m in replies.items()
            if isinstance(m, Message) and not isinstance(checked[c], str)
        ]
        record = self._record_evaluation(server_round, checked)
        if not valid:
            return None
        try:
            metrics = self.strategy.aggregate_evaluate(server_round, valid)
        except _AGGREGATION_ERRORS as why:
            logger.warning("round %d: evaluation metrics not aggregated: %s", server_round, why)
            return None
        if metrics is not None and np.isfinite(record.accuracy).any():
            metrics = MetricRecord({**metrics, **record.columns})
        return metrics

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

    def _names(self, clients: IntArray) -> str:
        """Clients as Flower node ids, with the app's partition id where its replies carry it."""
        node_of = self._nodes_index().node_of
        named = []
        for c in clients:
            node = node_of[int(c)]
            pid = self._partition_of.get(node)
            named.append(f"node {node}" + ("" if pid is None else f" (partition {pid})"))
        return "[" + ", ".join(named) + "]"

    def _note_partition(self, node: int, reply: Message) -> None:
        records = list(reply.content.metric_records.values())
        pid = records[0].get(self.settings.partition_key) if len(records) == 1 else None
        if isinstance(pid, int) and not isinstance(pid, bool):
            self._partition_of[node] = pid

    def _strategy_state(self) -> dict[str, Any]:
        out = {}
        for depth, (level, built) in enumerate(zip(self._chain, self._built, strict=True)):
            for name, value in picklable_changes(level, built).items():
                if name != "strategy":
                    out[".".join(["strategy"] * depth + [name])] = value
        return out

    def _restore_strategy_state(self, state: Mapping[str, Any]) -> None:
        for path, value in state.items():
            *parents, name = path.split(".")
            setattr(self._chain[len(parents)], name, value)


class ScheduledFedAvg(Scheduled):
    """``Scheduled(FedAvg(...), scheduler)``: Flower's FedAvg with an adcs scheduler choosing who
    trains (training is the scheduler's: no ``fraction_train``).

    Parameters
    ----------
    scheduler : Scheduler or str
    n_clients : int, optional
        N (None: the number of nodes connected at the first round).
    scheduler_params : dict, optional
    fraction_evaluate, min_evaluate_nodes, min_available_nodes, weighted_by_key, \
arrayrecord_key, configrecord_key, train_metrics_aggr_fn, evaluate_metrics_aggr_fn
        As in Flower's ``FedAvg``.
    **settings
        The other fields of `adcs.flower.settings.Settings`.
    """

    def __init__(
        self,
        scheduler: Scheduler | str,
        n_clients: int | None = None,
        *,
        scheduler_params: Mapping[str, Any] | None = None,
        fraction_evaluate: float = 1.0,
        min_evaluate_nodes: int = 2,
        min_available_nodes: int = 2,
        weighted_by_key: str = "num-examples",
        arrayrecord_key: str = "arrays",
        configrecord_key: str = "config",
        train_metrics_aggr_fn: Any = None,
        evaluate_metrics_aggr_fn: Any = None,
        **settings: Any,
    ) -> None:
        check_number("fraction_evaluate", fraction_evaluate, 0.0, 1.0)
        fedavg = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=1,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
            weighted_by_key=weighted_by_key,
            arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key,
            train_metrics_aggr_fn=train_metrics_aggr_fn,
            evaluate_metrics_aggr_fn=evaluate_metrics_aggr_fn,
        )
        super().__init__(
            fedavg,
            scheduler,
            scheduler_params=scheduler_params,
            n_clients=n_clients,
            **settings,
        )


class _Exchanges:
    """The `adcs.round.play.Gatherer` of one round of `Scheduled`."""

    def __init__(
        self,
        owner: Scheduled,
        link: Link,
        template: Template,
        arrays: ArrayRecord,
        configs: _Configs,
        server_round: int,
    ) -> None:
        self.owner, self.link, self.template = owner, link, template
        self.arrays, self.configs, self.server_round = arrays, configs, server_round
        self._sent = template.flat(arrays)

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        """Loss probe = ``evaluate``: each client's ``loss_key`` at w⁽ᵗ⁾ (``source`` is the app's)."""
        owner = self.owner
        array_key, config_key = owner._keys
        content = RecordDict({array_key: self.arrays, config_key: self.configs.evaluate})
        node_of = owner._nodes_index().node_of
        requests = {
            int(c): Message(content, node_of[int(c)], MessageType.EVALUATE) for c in clients
        }
        replies = owner._ask(self.link, requests, self.server_round, "loss probe")
        return owner._check(
            self.server_round,
            "loss probe",
            replies,
            lambda _, reply: read_evaluate_loss(reply, owner.settings),
        )

    def updates(self, clients: IntArray) -> dict[int, Trained | str]:
        """``train`` (the wrapped strategy's messages): each client's update, checked, or why not."""
        owner = self.owner
        requests = owner._requests(
            "train", clients, self.arrays, self.configs.train, self.server_round
        )
        replies: dict[int, Message | str] = {
            int(c): "train: the wrapped strategy sent it no message"
            for c in clients
            if int(c) not in requests
        }
        replies.update(owner._ask(self.link, requests, self.server_round, "train"))
        return owner._check(self.server_round, "train", replies, self._read)

    def _read(self, client: int, reply: Message) -> Trained:
        owner = self.owner
        update, loss, size = read_train_reply(
            reply, self.template, self._sent, owner.settings, owner.weight_key
        )
        owner._note_partition(owner._nodes_index().node_of[client], reply)
        return Trained(update, loss, size, reply)


class _GridView:
    """A Grid that lists only some nodes, each repeated until ``at_least`` are listed (so a
    strategy that samples every listed node, and wants a minimum, messages each of them)."""

    def __init__(self, nodes: list[int], at_least: int) -> None:
        repeats = max(1, math.ceil(at_least / len(nodes)))
        self._listed = (nodes * repeats)[: max(at_least, len(nodes))]

    def get_node_ids(self) -> list[int]:
        return list(self._listed)


def _chain(strategy: Any) -> list[Any]:
    """The strategy and those it wraps (a DP wrapper's ``strategy``), outermost first."""
    if not isinstance(strategy, Strategy):
        raise ValueError(
            f"Scheduled wraps a strategy of flwr.serverapp.strategy, got {type(strategy).__name__}"
        )
    chain: list[Any] = [strategy]
    while isinstance(getattr(chain[-1], "strategy", None), Strategy):
        chain.append(chain[-1].strategy)
    return chain


def _refuse_own_sampling(chain: list[Any]) -> None:
    """ValueError when a strategy in the chain would sample its own training nodes."""
    for level in chain:
        fraction = getattr(level, "fraction_train", 1.0)
        if fraction != 1.0:
            raise ValueError(
                f"{type(level).__name__}(fraction_train={fraction}) samples its own training "
                "nodes, which would undo the scheduler's choice: give it fraction_train=1.0 "
                "(the scheduler's m says how many train)"
            )
        fraction = getattr(level, "fraction_evaluate", 1.0)
        check_number(f"{type(level).__name__}.fraction_evaluate", fraction, 0.0, 1.0)


def _is_fedavg(strategy: Strategy) -> bool:
    return type(strategy) is FedAvg


def _weight(content: RecordDict, key: str) -> float:
    """A checked reply's weight: its one MetricRecord's ``key`` (a number)."""
    value = next(iter(content.metric_records.values()))[key]
    return float(value) if isinstance(value, int | float) else math.nan


def _weight_only(reply: Message, key: str) -> Message:
    """``reply`` with its MetricRecord cut to its weight alone (in place; arrays unchanged)."""
    for name, record in list(reply.content.metric_records.items()):
        reply.content[name] = MetricRecord({key: record[key]})
    return reply
