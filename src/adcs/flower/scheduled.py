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
anywhere in the wrapper chain) is refused. What is the wrapped strategy's — its chain, its
messages, its aggregates, its state — is `adcs.flower.wrapped.Wrapped`'s; the rest of the run —
the start loop and its output, the node wait, reply checks, the round, the selection line,
evaluation records, checkpoints — is `adcs.flower.driver.Driver`'s. This module is the wire
protocol between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp.strategy import Strategy

from adcs.flower.driver import Driver, _Configs
from adcs.flower.dropin import (
    F32Array,
    Template,
    read_evaluate_loss,
    read_evaluation,
    read_train_reply,
    resolve_scheduler,
)
from adcs.flower.link import Link
from adcs.flower.settings import WRAPPED, take
from adcs.flower.wrapped import Wrapped
from adcs.round.play import Played, Trained
from adcs.schedulers.base import IntArray, LossSource, Scheduler

__all__ = ["Scheduled"]


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
        wrapped = Wrapped(strategy)
        settings_ = take("Scheduled", self.takes, {"sketch_dim": 1024, **settings})
        resolved = resolve_scheduler(scheduler, scheduler_params, settings_.n_clients)
        super().__init__(resolved, settings_)
        self.wrapped, self.strategy, self.name = wrapped, strategy, wrapped.name

    def summary(self) -> None:
        """Log the wrapped strategy's summary and the scheduler."""
        self._summary()

    def _summary(self) -> None:
        self.strategy.summary()
        super()._summary()

    def _min_available(self) -> int:
        return self.wrapped.min_available()

    def _identity(self) -> dict[str, Any]:
        identity = {**super()._identity(), "strategy": self.name}
        if self.settings.n_clients is not None:
            identity["n_clients"] = self.settings.n_clients
        return identity

    def _exchanges(
        self, link: Link, template: Template, arrays: ArrayRecord, configs: _Configs, r: int
    ) -> _Exchanges:
        return _Exchanges(self, link, template, arrays, configs, r)

    def _requests(
        self, phase: str, clients: IntArray, arrays: ArrayRecord, config: ConfigRecord, r: int
    ) -> dict[int, Message]:
        """The wrapped strategy's ``train`` or ``evaluate`` messages to ``clients``, by client."""
        nodes = self._nodes_index()
        wanted = [nodes.node_of[int(c)] for c in clients]
        messages = self.wrapped.messages(phase, wanted, arrays, config, r)
        return {nodes.client_of[node]: message for node, message in messages.items()}

    def _aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, server_round: int
    ) -> tuple[ArrayRecord, MetricRecord]:
        return self.wrapped.aggregate(played, arrays, template, server_round, self.scheduler)

    def _evaluate(
        self, link: Link, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> MetricRecord | None:
        """The wrapped strategy's federated evaluation among the available clients."""
        clients = np.flatnonzero(self._nodes_index().available(link.connected()))
        requests = self._requests("evaluate", clients, arrays, config, server_round)
        if not requests:
            return None
        replies = self._ask(link, requests, server_round, "evaluate")
        key = self.wrapped.weight_key
        checked = self._check(
            server_round, "evaluate", replies, lambda _, m: read_evaluation(m, self.settings, key)
        )
        valid = [
            m
            for c, m in replies.items()
            if isinstance(m, Message) and not isinstance(checked[c], str)
        ]
        record = self._record_evaluation(server_round, checked)
        return self.wrapped.aggregate_evaluate(server_round, valid, record)

    def _strategy_state(self) -> dict[str, Any]:
        return self.wrapped.state()

    def _restore_strategy_state(self, state: Mapping[str, Any]) -> None:
        self.wrapped.restore(state)


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
        self._sent: F32Array | None = None  # w⁽ᵗ⁾ flattened, when an update is first asked for

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        """Loss probe = ``evaluate``: each client's ``loss_key`` at w⁽ᵗ⁾ (``source`` is the app's)."""
        owner, wrapped = self.owner, self.owner.wrapped
        content = RecordDict(
            {wrapped.array_key: self.arrays, wrapped.config_key: self.configs.evaluate}
        )
        node_of = owner._nodes_index().node_of
        group = str(self.server_round)
        requests = {
            int(c): Message(content, node_of[int(c)], MessageType.EVALUATE, group_id=group)
            for c in clients
        }
        replies = owner._ask(self.link, requests, self.server_round, "loss probe")
        return owner._check(
            self.server_round,
            "loss probe",
            replies,
            lambda _, reply: read_evaluate_loss(reply, owner.settings),
        )

    def updates(self, clients: IntArray, features: bool = True) -> dict[int, Trained | str]:
        """``train`` (the wrapped strategy's messages): each client's reply, checked, or why not
        (its update Δ flattened only with ``features``)."""
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
        if features and self._sent is None:
            self._sent = self.template.flat(self.arrays)
        sent = self._sent if features else None
        return owner._check(
            self.server_round, "train", replies, lambda c, reply: self._read(c, reply, sent)
        )

    def _read(self, client: int, reply: Message, sent: F32Array | None) -> Trained:
        owner = self.owner
        metrics, update, loss, size = read_train_reply(
            reply, self.template, sent, owner.settings, owner.wrapped.weight_key
        )
        owner._note_partition(owner._nodes_index().node_of[client], metrics)
        return Trained(update, loss, size, reply)
