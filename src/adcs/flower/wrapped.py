"""The wrapped strategy's side of `adcs.flower.Scheduled` (docs/design.md §7, §9).

`Wrapped` holds a strategy of ``flwr.serverapp.strategy`` and the strategies it wraps (a DP
wrapper's ``strategy``), refuses one whose own sampling would undo the scheduler's choice
(``fraction_train`` < 1 anywhere in the chain), builds its ``train`` / ``evaluate`` messages to
given nodes (its ``configure_*``, shown a Grid that lists only them) and aggregates their replies
(its ``aggregate_*``, its own arguments unchanged), and keeps what it builds across rounds for
checkpoints.
"""

from __future__ import annotations

import logging
import math
import pickle
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp.exception import InconsistentMessageReplies
from flwr.serverapp.strategy import FedAvg, Strategy

from adcs._validate import check_number
from adcs.flower.dropin import Template
from adcs.flower.round import EvaluationRecord
from adcs.round.play import Played

__all__ = ["AGGREGATION_ERRORS", "Wrapped"]

logger = logging.getLogger("flwr").getChild("adcs")

AGGREGATION_ERRORS = (
    InconsistentMessageReplies,
    TypeError,
    ValueError,
    KeyError,
    ZeroDivisionError,
)
"""What a strategy's ``aggregate_*`` raises on replies it cannot combine."""

_MINIMUMS = ("min_available_nodes", "min_train_nodes", "min_evaluate_nodes")


class Wrapped:
    """A Flower strategy, wrapped (module docstring).

    Parameters
    ----------
    strategy : flwr.serverapp.strategy.Strategy
        With ``fraction_train=1.0`` everywhere in its chain (ValueError otherwise).

    Attributes
    ----------
    strategy : Strategy
    chain : list of Strategy
        The strategy and those it wraps, outermost first.
    name : str
        ``Scheduled(FedAdam)``, ``Scheduled(DifferentialPrivacyServerSideFixedClipping(FedAvg))``.
    weight_key, array_key, config_key : str
        The innermost strategy's ``weighted_by_key``, ``arrayrecord_key``, ``configrecord_key``.
    """

    def __init__(self, strategy: Strategy) -> None:
        self.chain = _chain(strategy)
        _refuse_own_sampling(self.chain)
        self.strategy = strategy
        inner = self.chain[-1]
        self.weight_key: str = getattr(inner, "weighted_by_key", "num-examples")
        self.array_key: str = getattr(inner, "arrayrecord_key", "arrays")
        self.config_key: str = getattr(inner, "configrecord_key", "config")
        names = "(".join(type(s).__name__ for s in self.chain)
        self.name = f"Scheduled({names}" + ")" * len(self.chain)
        self._built = [pickled_attributes(s) for s in self.chain]
        self._warned_weights = False

    def min_available(self) -> int:
        """The largest ``min_available_nodes`` in the chain."""
        return max([int(getattr(s, "min_available_nodes", 1)) for s in self.chain])

    def messages(
        self, phase: str, nodes: list[int], arrays: ArrayRecord, config: ConfigRecord, r: int
    ) -> dict[int, Message]:
        """The strategy's ``train`` or ``evaluate`` message to each of ``nodes`` (shown a Grid
        that lists each more than once when it wants more nodes), by node id."""
        if not nodes:
            return {}
        at_least = max(int(getattr(s, n, 0)) for s in self.chain for n in _MINIMUMS)
        view = _GridView(nodes, at_least)
        strategy = self.strategy
        configure = strategy.configure_train if phase == "train" else strategy.configure_evaluate
        out: dict[int, Message] = {}
        for message in configure(r, arrays, ConfigRecord(dict(config)), view):  # type: ignore[arg-type]
            node = message.metadata.dst_node_id
            if node in nodes:
                out.setdefault(node, message)
        return out

    def aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, r: int, scheduler: Any
    ) -> tuple[ArrayRecord, MetricRecord]:
        """The strategy's ``aggregate_train`` over the delivered clients' replies; a scheduler's
        own weights are applied, w + Σ c_i (w_i − w), when the strategy is FedAvg."""
        done = played.record
        held = [played.held[int(c)] for c in done.aggregated]
        replies = [trained.reply for trained in held]
        counts = {"results": len(replies), "failures": len(played.failed)}
        own_weights = done.selection.weights is not None
        fedavg = type(self.strategy) is FedAvg
        if own_weights and not fedavg and not self._warned_weights:
            logger.warning(
                "%r gives its own aggregation weights; %s aggregates with its own",
                scheduler,
                type(self.strategy).__name__,
            )
            self._warned_weights = True
        if not replies:
            logger.warning("no selected client returned a valid update; the model is kept")
            return arrays, MetricRecord({**counts, "results": 0})
        weighable = sum(trained.num_examples for trained in held) > 0
        if own_weights and fedavg:
            stepped = template.weighted_step(arrays, replies, done.aggregated_coef)
            metrics = self._train_metrics(r, replies) if weighable else None
            return stepped, MetricRecord({**(metrics or {}), **counts})
        if not weighable:
            logger.warning(
                "round %d: the train replies' '%s' sum to 0: the model is kept", r, self.weight_key
            )
            return arrays, MetricRecord({**counts, "results": 0})
        new, metrics = self._aggregate_train(r, replies)
        if new is None:
            logger.warning("round %d: %s kept the model", r, self.name)
            return arrays, MetricRecord({**(metrics or {}), **counts, "results": 0})
        return new, MetricRecord({**(metrics or {}), **counts})

    def aggregate_evaluate(
        self, r: int, replies: list[Message], record: EvaluationRecord
    ) -> MetricRecord | None:
        """The strategy's ``aggregate_evaluate``, with the evaluation's result columns."""
        if not replies:
            return None
        try:
            metrics = self.strategy.aggregate_evaluate(r, replies)
        except AGGREGATION_ERRORS as why:
            logger.warning("round %d: evaluation metrics not aggregated: %s", r, why)
            return None
        if metrics is not None and np.isfinite(record.accuracy).any():
            metrics = MetricRecord({**metrics, **record.columns})
        return metrics

    def state(self) -> dict[str, Any]:
        """What the chain built since it was wrapped (FedAdam's moments), by dotted path."""
        out = {}
        for depth, (level, built) in enumerate(zip(self.chain, self._built, strict=True)):
            for name, value in picklable_changes(level, built).items():
                if name != "strategy":
                    out[".".join(["strategy"] * depth + [name])] = value
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back `state`'s value (from a checkpoint)."""
        for path, value in state.items():
            *parents, name = path.split(".")
            setattr(self.chain[len(parents)], name, value)

    def _aggregate_train(
        self, r: int, replies: list[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """``aggregate_train``; when the replies' metrics cannot be combined (a key a list in
        one reply and a number in another), again with their weight alone."""
        try:
            return self.strategy.aggregate_train(r, replies)
        except AGGREGATION_ERRORS as why:
            logger.warning("round %d: train metrics not aggregated: %s", r, why)
        bare = [_weight_only(m, self.weight_key) for m in replies]
        arrays, _ = self.strategy.aggregate_train(r, bare)
        return arrays, None

    def _train_metrics(self, r: int, replies: list[Message]) -> MetricRecord | None:
        aggregate = getattr(self.chain[-1], "train_metrics_aggr_fn", None)
        if aggregate is None:
            return None
        try:
            metrics: MetricRecord = aggregate([m.content for m in replies], self.weight_key)
            return metrics
        except AGGREGATION_ERRORS as why:
            logger.warning("round %d: train metrics not aggregated: %s", r, why)
            return None


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


def _weight_only(reply: Message, key: str) -> Message:
    """``reply`` with its MetricRecord cut to its weight alone (in place; arrays unchanged)."""
    for name, record in list(reply.content.metric_records.items()):
        reply.content[name] = MetricRecord({key: record[key]})
    return reply


def picklable_changes(obj: Any, before: Mapping[str, bytes]) -> dict[str, Any]:
    """``obj``'s attributes whose pickle differs from ``before`` (or that are new): the state a
    strategy built since ``before`` was taken; attributes that do not pickle are left out."""
    now = pickled_attributes(obj)
    return {name: vars(obj)[name] for name, data in now.items() if before.get(name) != data}


def pickled_attributes(obj: Any) -> dict[str, bytes]:
    """Each picklable attribute of ``obj``, pickled (for `picklable_changes`)."""
    out = {}
    for name, value in vars(obj).items():
        try:
            out[name] = pickle.dumps(value, protocol=5)
        except Exception:  # callables, locks: not state a checkpoint can hold
            continue
    return out
