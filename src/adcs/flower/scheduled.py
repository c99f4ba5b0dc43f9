"""ScheduledFedAvg: Flower's FedAvg with an adcs scheduler choosing who trains (docs/design.md §7).

A drop-in for ``flwr.serverapp.strategy.FedAvg`` in an unchanged Flower app: the ClientApp keeps
its ``@app.train()`` and ``@app.evaluate()`` handlers, its ``ArrayRecord`` of the model's
``state_dict()`` and its ``MetricRecord`` (``train_loss``, ``eval_loss``, ``num-examples``); the
ServerApp swaps ``FedAvg(...)`` for ``ScheduledFedAvg(scheduler=..., n_clients=N, ...)`` and calls
the same ``start(grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config,
evaluate_fn)``. Only Flower's two standard messages reach the clients, with the app's own keys:

* **clients are nodes**: indices 0..N−1 in order of first appearance
  (`NodeIndex`); a client is available while its node is connected;
  a node lost mid-round is a dropout;
* a **loss probe** (PowerOfChoice, Oort) is an ``evaluate`` message; the probed loss is the
  reply's ``loss_key`` (``eval_loss``, the app's evaluation loss at w⁽ᵗ⁾);
* an **update probe** (ADCS at a refresh, DivFL, OCS, StaticDPP) is a ``train`` message; the
  update is the returned arrays minus the sent ones, flattened in the ArrayRecord's key order,
  any number of arrays and dtypes; the scheduler sees it as float32, sketched to ``sketch_dim``
  numbers by a seeded Johnson–Lindenstrauss projection (`adcs.sketch.UpdateSketch`)
  when longer — the round's own sketch (``RoundRules.sketch``, as in the simulator), so a
  large model does not make the kernel cost O(n · dim); its quality loss is the reply's
  ``train_loss_key``. A probed client that is selected is not asked again: its training is
  reused in the aggregate;
* the **aggregate** is FedAvg's (Flower's ``aggregate_arrayrecords``, weighted by
  ``weighted_by_key``) over the selected clients that returned, or, when the scheduler gives its
  own weights (unbiased samplers), w + Σ c_i (w_i − w) with the c of
  [`adcs.rounds.aggregation_weights`][adcs.rounds.aggregation_weights];
* each **federated evaluation** (FedAvg's, on a ``fraction_evaluate`` sample) is recorded in
  `ScheduledFedAvg.evaluations`: each evaluated client's loss and accuracy (the reply's
  ``accuracy_key``), and the result columns of `adcs.columns.COLUMNS` computed from
  them ([`columns`][adcs.flower.EvaluationRecord.columns]: worst, 10th-percentile and
  average accuracy, and any column declared with ``of_eval``), also added to the round's
  evaluation metrics in the ``Result`` — the columns
  [`SchedulerStrategy`][adcs.flower.SchedulerStrategy] and the simulator give.

The round itself (probe, gather, select, train, observe) is `adcs.roundplay`'s, the one
[`SchedulerStrategy`][adcs.flower.SchedulerStrategy] and the simulator play too. Replies are
untrusted: an error reply, no reply within ``timeout``, a node that disconnects, a missing record or
key, an array of another key set, shape or dtype than the one sent, a NaN or inf, excludes that
client with its reason (logged as Flower's strategies do, counted in the round's ``failures`` metric
and in `ScheduledFedAvg.history`). With ``checkpoint_path`` the server saves its state
atomically every ``checkpoint_every`` rounds and a restarted ServerApp continues from it
(`adcs.flower.checkpoint`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.exception import InconsistentMessageReplies
from flwr.serverapp.strategy import Result, Strategy
from flwr.serverapp.strategy.strategy_utils import (
    aggregate_arrayrecords,
    aggregate_metricrecords,
)

from adcs._validate import check_int
from adcs.flower.checkpoint import (
    ServerCheckpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from adcs.flower.dropin import (
    DropInSettings,
    Template,
    read_evaluate_loss,
    read_evaluation,
    read_train_reply,
    resolve_scheduler,
)
from adcs.flower.link import Link
from adcs.flower.nodes import NodeIndex
from adcs.flower.round import (
    EvaluationRecord,
    RejectedReply,
    RoundRecord,
    account,
    ask,
    log_round,
)
from adcs.roundplay import Played, RoundRules, Trained, play
from adcs.schedulers.base import BoolArray, IntArray, LossSource, Scheduler
from adcs.sketch import UpdateSketch
from adcs.streams import scheduler_rng, stream_key

__all__ = ["ScheduledFedAvg"]

# Under Flower's logger, as FedAvg logs: its lines reach the console and `flwr log` like FedAvg's.
logger = logging.getLogger("flwr").getChild("adcs")

MetricsAggr = Callable[[list[RecordDict], str], MetricRecord]
_SLEEP_S = 0.2


class ScheduledFedAvg(Strategy):
    """FedAvg whose participants an adcs scheduler chooses (module docstring).

    Parameters
    ----------
    scheduler : Scheduler or str
        An adcs scheduler object, or a name of [`adcs.SCHEDULERS`][adcs.SCHEDULERS] (or
        ``"package.module:Class"``) built with ``scheduler_params`` (which must give ``m``).
    n_clients : int
        N: the first N nodes to appear are the clients (module docstring).
    scheduler_params : dict, optional
        Constructor arguments when ``scheduler`` is a name.
    fraction_evaluate, min_evaluate_nodes, min_available_nodes, weighted_by_key, \
arrayrecord_key, configrecord_key, train_metrics_aggr_fn, evaluate_metrics_aggr_fn
        As in Flower's ``FedAvg`` (training is the scheduler's: no ``fraction_train``).
    **settings
        The other fields of `DropInSettings` (``loss_key``,
        ``accuracy_key``, ``train_loss_key``, ``seed``, ``run_id``, ``sketch_dim``,
        ``checkpoint_path``, ``checkpoint_every``, ``connect_timeout_s``, ``wait_for_all_s``).

    Attributes
    ----------
    history : list of RoundRecord
        One record per round (of this run, resumed rounds included).
    evaluations : list of EvaluationRecord
        One record per federated evaluation (resumed rounds' included): the evaluated clients'
        accuracy and loss (NaN for the others) and the result columns.
    node_of : dict of int to int
        Client index → node id.

    Notes
    -----
    The scheduler is initialised before any client has replied, so it gets no data sizes
    (``data_sizes=None``): schedulers that weight clients by size treat them as equal. A loss
    probe's value is whatever the app's ``evaluate`` reports (its ``LossSource`` is the app's
    choice, not the scheduler's). ``configure_train`` is not used (a round may probe before it
    knows whom to train); every other hook is FedAvg's.
    """

    def __init__(
        self,
        scheduler: Scheduler | str,
        n_clients: int,
        *,
        scheduler_params: Mapping[str, Any] | None = None,
        fraction_evaluate: float = 1.0,
        min_evaluate_nodes: int = 2,
        min_available_nodes: int = 2,
        weighted_by_key: str = "num-examples",
        arrayrecord_key: str = "arrays",
        configrecord_key: str = "config",
        train_metrics_aggr_fn: MetricsAggr | None = None,
        evaluate_metrics_aggr_fn: MetricsAggr | None = None,
        **settings: Any,
    ) -> None:
        self.settings = DropInSettings(
            n_clients=n_clients,
            fraction_evaluate=fraction_evaluate,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
            weighted_by_key=weighted_by_key,
            arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key,
            **settings,
        )
        self.scheduler = resolve_scheduler(scheduler, scheduler_params, n_clients)
        self.train_metrics_aggr_fn = train_metrics_aggr_fn or aggregate_metricrecords
        self.evaluate_metrics_aggr_fn = evaluate_metrics_aggr_fn or aggregate_metricrecords
        self.history: list[RoundRecord] = []
        self.evaluations: list[EvaluationRecord] = []
        self._nodes = NodeIndex(n_clients, log=logger)
        self._eval_rng = scheduler_rng(self.settings.seed, self.settings.run_id + "/evaluate")

    @property
    def node_of(self) -> dict[int, int]:
        return dict(self._nodes.node_of)

    def summary(self) -> None:
        """Log the scheduler and the settings."""
        logger.info("ScheduledFedAvg: %r, %r", self.scheduler, self.settings)

    # ------------------------------------------------------------------ Flower's hooks

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Not used: a round may probe before it knows whom to train, so
        [`start`][adcs.flower.ScheduledFedAvg.start] runs it.

        Raises
        ------
        NotImplementedError
            Always; call [`start`][adcs.flower.ScheduledFedAvg.start], which sends the ``train``
            messages itself.
        """
        raise NotImplementedError(
            "ScheduledFedAvg chooses its clients inside start() (a round may probe them first); "
            "call start() instead of driving configure_train/aggregate_train yourself"
        )

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """FedAvg's aggregate of (already checked) train replies, weighted by ``weighted_by_key``.

        None when there is none, or when their weights sum to 0 (FedAvg's mean is undefined);
        metrics the aggregation function cannot combine (a key a list in one reply and a number
        in another) are left out with a warning.
        """
        contents = self._weighable(server_round, "train", replies)
        if not contents:
            return None, None
        key = self.settings.weighted_by_key
        metrics = self._metrics(server_round, "train", self.train_metrics_aggr_fn, contents)
        return aggregate_arrayrecords(contents, key), metrics or MetricRecord()

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """``evaluate`` to a ``fraction_evaluate`` share of the available clients (seeded draw)."""
        settings = self.settings
        if settings.fraction_evaluate == 0.0:
            return []
        connected = {int(n) for n in grid.get_node_ids()}
        clients = np.flatnonzero(self._nodes.available(connected))
        size = max(int(clients.size * settings.fraction_evaluate), settings.min_evaluate_nodes)
        size = min(size, clients.size)
        chosen = np.sort(self._eval_rng.choice(clients, size=size, replace=False))
        config = ConfigRecord(dict(config))
        config["server-round"] = server_round
        content = RecordDict({settings.arrayrecord_key: arrays, settings.configrecord_key: config})
        return [Message(content, self._nodes.node_of[int(c)], MessageType.EVALUATE) for c in chosen]

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """FedAvg's mean of the evaluate replies' metrics; inconsistent replies, or weights
        that sum to 0, give None."""
        contents = self._weighable(server_round, "evaluation", replies)
        if not contents:
            return None
        return self._metrics(server_round, "evaluation", self.evaluate_metrics_aggr_fn, contents)

    def _weighable(
        self, server_round: int, phase: str, replies: Iterable[Message]
    ) -> list[RecordDict]:
        """The replies' contents, none when their ``weighted_by_key`` values sum to 0 (each
        reply was checked to hold one finite value >= 0)."""
        contents = [msg.content for msg in replies if not msg.has_error()]
        key = self.settings.weighted_by_key
        if contents and sum(_weight(c, key) for c in contents) <= 0:
            logger.warning(
                "round %d: the %s replies' '%s' sum to 0: FedAvg cannot weigh them",
                server_round,
                phase,
                key,
            )
            return []
        return contents

    def _metrics(
        self, server_round: int, phase: str, aggregate: MetricsAggr, contents: list[RecordDict]
    ) -> MetricRecord | None:
        """``aggregate(contents, weighted_by_key)``, None when the replies' metrics disagree."""
        try:
            return aggregate(contents, self.settings.weighted_by_key)
        except (InconsistentMessageReplies, TypeError, ValueError) as why:
            logger.warning("round %d: %s metrics not aggregated: %s", server_round, phase, why)
            return None

    # ------------------------------------------------------------------ the run

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
        """Run ``num_rounds`` rounds (continuing a checkpoint if there is one), as FedAvg's.

        Parameters
        ----------
        grid : flwr.serverapp.Grid
        initial_arrays : ArrayRecord
            w⁽⁰⁾: any number of arrays, any dtypes (e.g. ``ArrayRecord(model.state_dict())``).
        num_rounds : int
            The run's last round (a resumed run does the rounds its checkpoint has not).
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
        template = Template.of(initial_arrays)
        link = Link(grid, timeout)
        rng = scheduler_rng(self.settings.seed, self.settings.run_id)
        self._eval_rng = scheduler_rng(self.settings.seed, self.settings.run_id + "/evaluate")
        self.summary()
        arrays, state, result, first = self._resume(template, initial_arrays, rng)
        rules = self._rules(template)
        if first == 1 and evaluate_fn is not None:
            _central(evaluate_fn, 0, arrays, result)
        for server_round in range(first, num_rounds + 1):
            started = time.perf_counter()
            available = self._connect(link, first=state is None)
            if state is None:
                state = self.scheduler.init(self.settings.n_clients, None)
            config = _with_round(train_config, server_round)
            exchanges = _Exchanges(self, link, template, arrays, config, server_round)
            exchanges.evaluate_config = _with_round(evaluate_config, server_round)
            played = play(rules, state, server_round - 1, available, rng, exchanges, template.size)
            state = played.record.state
            arrays, metrics = self._aggregate(played, arrays, template, server_round)
            wall_s = time.perf_counter() - started
            record = RoundRecord.of(played, server_round, available, wall_s, time.time())
            self.history.append(record)
            log_round(record, logger)
            result.arrays = arrays
            result.train_metrics_clientapp[server_round] = metrics
            self._evaluate(link, server_round, arrays, evaluate_config, result)
            if evaluate_fn is not None:
                _central(evaluate_fn, server_round, arrays, result)
            if self._checkpoint_due(server_round, num_rounds):
                self._save(server_round, arrays, state, rng, result)
        return result

    # ------------------------------------------------------------------ steps

    def _connect(self, link: Link, first: bool) -> BoolArray:
        """The availability mask at a round's start.

        The first round waits for max(``min_available_nodes``, m) clients (then up to
        ``wait_for_all_s`` for all N), a later one for ``min_available_nodes``; a run that waits
        longer than ``connect_timeout_s`` fails with the count.
        """
        settings = self.settings
        need = max(settings.min_available_nodes, self.scheduler.m if first else 1)
        need = min(need, settings.n_clients)
        give_up = time.monotonic() + settings.connect_timeout_s
        enough_at: float | None = None
        while True:
            available = self._nodes.available(link.connected())
            count, now = int(available.sum()), time.monotonic()
            if count >= need and enough_at is None:
                enough_at = now
            more_s = settings.wait_for_all_s if first else 0.0
            if count == settings.n_clients or (enough_at is not None and now >= enough_at + more_s):
                return available
            if enough_at is None and now >= give_up:
                raise RuntimeError(
                    f"only {count} clients are connected after {settings.connect_timeout_s:g} s, "
                    f"but the round needs {need} (min_available_nodes="
                    f"{settings.min_available_nodes}, m={self.scheduler.m}); start more "
                    "SuperNodes or raise connect_timeout_s"
                )
            time.sleep(_SLEEP_S)

    def _rules(self, template: Template) -> RoundRules:
        """The run's round rules: its scheduler, and the sketch the updates reach it through
        (``sketch_dim``, seeded by ``seed``) when the model is longer."""
        k = self.settings.sketch_dim
        sketch = None
        if k is not None and k < template.size:
            sketch = UpdateSketch(template.size, k, stream_key(self.settings.seed)).apply
        return RoundRules(self.scheduler, who=repr(self.scheduler), sketch=sketch)

    def _aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, server_round: int
    ) -> tuple[ArrayRecord, MetricRecord]:
        """FedAvg's aggregate over the delivered clients, or the scheduler's weighted step."""
        done = played.record
        replies = [played.held[int(c)].reply for c in done.aggregated]
        failures = len(played.failed)
        if not replies:
            logger.warning("no selected client returned a valid update; the model is kept")
            return arrays, MetricRecord({"results": 0, "failures": failures})
        new, metrics = self.aggregate_train(server_round, replies)
        metrics = metrics or MetricRecord()
        if done.selection.weights is not None:  # the round's c (its rules weigh uniformly)
            new = template.weighted_step(arrays, replies, done.aggregated_coef)
        elif new is None:  # FedAvg's weights sum to 0
            logger.warning("round %d: the model is kept", server_round)
            metrics.update({"results": 0, "failures": failures})
            return arrays, metrics
        else:
            new = template.conform(new)
        metrics["results"] = len(replies)
        metrics["failures"] = failures
        return new, metrics

    def _evaluate(
        self,
        link: Link,
        server_round: int,
        arrays: ArrayRecord,
        config: ConfigRecord | None,
        result: Result,
    ) -> None:
        """Federated evaluation after a round (FedAvg's, on a seeded sample)."""
        messages = list(
            self.configure_evaluate(server_round, arrays, config or ConfigRecord(), link.grid)
        )
        if not messages:
            return
        clients = [self._nodes.client_of[m.metadata.dst_node_id] for m in messages]
        content = messages[0].content
        out = self._ask(link, clients, MessageType.EVALUATE, content, server_round, "evaluate")
        n = self.settings.n_clients
        accuracy, loss = np.full(n, np.nan), np.full(n, np.nan)
        checked: dict[int, Message | str] = {}
        for client, reply in out.items():
            checked[client] = reply
            if not isinstance(reply, str):
                try:
                    loss[client], accuracy[client] = read_evaluation(reply, self.settings)
                except RejectedReply as why:
                    checked[client] = f"evaluate: malformed reply: {why}"
        account(server_round, "evaluate", checked, self._nodes.node_of, logger)
        record = EvaluationRecord(server_round, accuracy, loss)
        self.evaluations.append(record)
        valid = [r for r in checked.values() if not isinstance(r, str)]
        metrics = self.aggregate_evaluate(server_round, valid)
        if metrics is not None:
            if np.isfinite(accuracy).any():
                metrics.update(record.columns)
            result.evaluate_metrics_clientapp[server_round] = metrics

    def _ask(
        self,
        link: Link,
        clients: Iterable[int],
        message_type: str,
        content: RecordDict,
        server_round: int,
        phase: str,
    ) -> dict[int, Message | str]:
        nodes = self._nodes
        out, _ = ask(
            link,
            nodes.node_of,
            nodes.client_of,
            clients,
            message_type,
            content,
            str(server_round),
            phase,
        )
        return out

    # ------------------------------------------------------------------ checkpoints

    def _identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            "scheduler": repr(self.scheduler),
            "n_clients": s.n_clients,
            "seed": s.seed,
            "run_id": s.run_id,
        }

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
            rng_states={
                "scheduler": dict(rng.bit_generator.state),
                "evaluate": dict(self._eval_rng.bit_generator.state),
            },
            nodes=self._nodes.nodes,
            metrics=_metrics_of(result),
            history=list(self.history),
            evaluations=tuple(self.evaluations),
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
            self._nodes = NodeIndex(self.settings.n_clients, log=logger)
            self.history, self.evaluations = [], []
            return initial_arrays, None, Result(arrays=initial_arrays), 1
        arrays = template.restore(checkpoint.arrays, str(path))
        restore_rng(rng, checkpoint.rng_states["scheduler"])
        restore_rng(self._eval_rng, checkpoint.rng_states["evaluate"])
        self._nodes = NodeIndex(self.settings.n_clients, checkpoint.nodes, logger)
        self.history = list(checkpoint.history)
        self.evaluations = list(checkpoint.evaluations)
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


class _Exchanges:
    """The `Gatherer` of one round of [`ScheduledFedAvg`][adcs.flower.ScheduledFedAvg]."""

    def __init__(
        self,
        strategy: ScheduledFedAvg,
        link: Link,
        template: Template,
        arrays: ArrayRecord,
        config: ConfigRecord,
        server_round: int,
    ) -> None:
        self.strategy, self.link, self.template = strategy, link, template
        self.arrays, self.config, self.server_round = arrays, config, server_round
        self.evaluate_config = ConfigRecord()
        self._sent = template.flat(arrays)

    def _content(self, config: ConfigRecord) -> RecordDict:
        s = self.strategy.settings
        return RecordDict({s.arrayrecord_key: self.arrays, s.configrecord_key: config})

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        """Loss probe = ``evaluate``: each client's ``loss_key`` at w⁽ᵗ⁾ (``source`` is the app's)."""
        strategy = self.strategy
        content = self._content(self.evaluate_config)
        out: dict[int, float | str] = {}
        replies = strategy._ask(
            self.link, clients, MessageType.EVALUATE, content, self.server_round, "loss probe"
        )
        for client, reply in replies.items():
            try:
                out[client] = (
                    reply
                    if isinstance(reply, str)
                    else read_evaluate_loss(reply, strategy.settings)
                )
            except RejectedReply as why:
                out[client] = f"loss probe: malformed reply: {why}"
        account(self.server_round, "loss probe", out, strategy._nodes.node_of, logger)
        return out

    def updates(self, clients: IntArray) -> dict[int, Trained | str]:
        """``train``: each client's update (returned − sent arrays), checked, or why not."""
        strategy = self.strategy
        content = self._content(self.config)
        out: dict[int, Trained | str] = {}
        replies = strategy._ask(
            self.link, clients, MessageType.TRAIN, content, self.server_round, "train"
        )
        for client, reply in replies.items():
            if isinstance(reply, str):
                out[client] = reply
                continue
            try:
                update, loss, size = read_train_reply(
                    reply, self.template, self._sent, strategy.settings
                )
            except RejectedReply as why:
                out[client] = f"train: malformed reply: {why}"
                continue
            out[client] = Trained(update, loss, size, reply)
        account(self.server_round, "train", out, strategy._nodes.node_of, logger)
        return out


def _weight(content: RecordDict, key: str) -> float:
    """A checked reply's FedAvg weight: its one MetricRecord's ``key`` (a number)."""
    value = next(iter(content.metric_records.values()))[key]
    return float(value) if isinstance(value, int | float) else math.nan


def _with_round(config: ConfigRecord | None, server_round: int) -> ConfigRecord:
    out = ConfigRecord(dict(config or {}))
    out["server-round"] = server_round
    return out


def _central(
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None],
    server_round: int,
    arrays: ArrayRecord,
    result: Result,
) -> None:
    metrics = evaluate_fn(server_round, arrays)
    if metrics is not None:
        result.evaluate_metrics_serverapp[server_round] = metrics


def _metrics_of(result: Result) -> dict[str, dict[int, dict[str, Any]]]:
    return {
        "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()},
        "evaluate": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
        "server": {r: dict(m) for r, m in result.evaluate_metrics_serverapp.items()},
    }
