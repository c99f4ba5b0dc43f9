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
this module is the wire protocol of `adcs.flower.client`, and `adcs.flower.flat` reads its
replies and steps its model.

What the simulator's round has and Flower's runtime cannot offer: a simulated clock (round
seconds, deadline, over-commitment; `RoundRecord.wall_s` is the wall clock) and simulated
dropouts (here a dropout is a client's real failure). Non-finite statistics never reach the
scheduler: such replies are rejected as failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from adcs.aggregation import Aggregator
from adcs.flower import flat
from adcs.flower.client import (
    ARRAYS_KEY,
    CONFIG_KEY,
    HELLO,
    LOSS,
    LOSS_PROBE,
    LOSS_SOURCE,
    NUM_PARTITIONS,
    SEED,
)
from adcs.flower.driver import Driver, Nodes, _Configs, logger
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
)
from adcs.flower.settings import SIMULATOR_IDENTICAL, Settings, take
from adcs.round.contract import F64Array
from adcs.round.play import Played, Trained
from adcs.schedulers.base import IntArray, LossSource, Scheduler, check_scheduler

__all__ = [
    "EvaluationRecord",
    "RejectedReply",
    "RoundRecord",
    "SchedulerStrategy",
    "Settings",
    "history_dicts",
]


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

    def _identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            **super()._identity(),
            **{"n_clients": s.n_clients, "server_lr": s.server_lr, "weighting": s.weighting},
            "aggregator": repr(self.aggregator),
        }

    def _new_nodes(self, n_clients: int, saved: Any) -> Nodes:
        return NodeMap(n_clients)  # each node tells its client again in the handshake

    def _node_map(self) -> NodeMap:
        nodes = self._nodes_index()
        assert isinstance(nodes, NodeMap)
        return nodes

    def _connected(self, link: Link) -> set[int]:
        """Take in handshake outcomes; greet new and unresponsive nodes (in the background)."""
        nodes = self._node_map()
        connected = link.connected()
        link.forget(link.background_nodes - connected)
        link.poll()
        self._take_greetings(link, connected)
        greet = [n for n in nodes.to_greet(connected) if n not in link.background_nodes]
        config = ConfigRecord({SEED: self.settings.seed, NUM_PARTITIONS: nodes.n_clients})
        content = RecordDict({CONFIG_KEY: config})
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

    def _pause(self, link: Link, until: float) -> None:
        link.wait_background(lambda: bool(link.late), until)

    def _data_sizes(self) -> F64Array | None:
        return self._node_map().all_sizes()

    def _unanswered(self, nodes: list[int]) -> None:
        for node in nodes:
            self._node_map().failed(node)

    def _rule_extras(self) -> dict[str, Any]:
        return {"base_weights": self._base, "aggregator": self.aggregator}

    def _base(self) -> F64Array | None:
        """p_n of the aggregation weights: the clients' reported data sizes, or uniform."""
        if self.settings.weighting == "data_size":
            return np.nan_to_num(self._node_map().sizes, nan=0.0)
        return None

    def _check_initial(self, arrays: ArrayRecord) -> Template:
        flat.flat_model(arrays)
        return Template.of(arrays)

    def _configs(self, configs: _Configs) -> _Configs:
        for config in (configs.train, configs.evaluate):
            config[SEED] = self.settings.seed
        return configs

    def _exchanges(
        self, link: Link, template: Template, arrays: ArrayRecord, configs: _Configs, r: int
    ) -> _Exchanges:
        return _Exchanges(self, link, flat.flat_model(arrays), configs.train, r)

    def _aggregate(
        self, played: Played, arrays: ArrayRecord, template: Template, server_round: int
    ) -> tuple[ArrayRecord, MetricRecord]:
        """w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s · (Σ c_i Δ_i, or the aggregation rule's step), in float32."""
        return flat.aggregate(played, flat.flat_model(arrays), self.settings.server_lr)

    def _log_round(self, record: RoundRecord) -> None:
        log_round(record, logger)

    def _name(self, client: int) -> str:
        return f"client {client} (node {self._node_map().node_of[client]})"  # its partition id

    def _evaluate(
        self, link: Link, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> MetricRecord | None:
        """``evaluate`` to every available client every ``evaluate_every`` rounds and after the
        last: per-client accuracy and loss, and their mean."""
        every = self.settings.evaluate_every
        if not every or (server_round % every and server_round != self._num_rounds):
            return None
        clients = np.flatnonzero(self._node_map().available(self._connected(link)))
        content = RecordDict({ARRAYS_KEY: arrays, CONFIG_KEY: config})
        group = [(MessageType.EVALUATE, content, clients)]
        replies = self._send(link, group, server_round, "evaluate")
        checked = self._check(server_round, "evaluate", replies, flat.read_evaluation)
        return flat.evaluation_metrics(self._record_evaluation(server_round, checked))


@dataclass(frozen=True, eq=False)
class _Exchanges:
    """The `adcs.round.play.Gatherer` of one round of `SchedulerStrategy`."""

    owner: SchedulerStrategy
    link: Link
    model: flat.FlatModel
    config: ConfigRecord
    server_round: int

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        """``query.adcs_loss`` to ``clients``: each one's loss at w⁽ᵗ⁾, or why there is none."""
        config = ConfigRecord({**self.config, LOSS_SOURCE: source.value})
        content = RecordDict({ARRAYS_KEY: self.model.record(), CONFIG_KEY: config})
        replies = self._send(LOSS_PROBE, content, clients, "loss probe")
        return self.owner._check(
            self.server_round,
            "loss probe",
            replies,
            lambda client, reply: finite_metric(flat.read_metrics(reply, client), LOSS),
        )

    def updates(self, clients: IntArray, features: bool = True) -> dict[int, Trained | str]:
        """``train`` to ``clients``: their valid updates (always read: they are aggregated here),
        or why there is none."""
        content = RecordDict({ARRAYS_KEY: self.model.record(), CONFIG_KEY: self.config})
        replies = self._send(MessageType.TRAIN, content, clients, "train")
        sizes = self.owner._node_map().sizes

        def read(client: int, reply: Message) -> Trained:
            got = flat.read_update(reply, client, self.model, self.owner.settings.weighting)
            if got.num_examples >= 0:
                sizes[client] = got.num_examples
            return got

        return self.owner._check(self.server_round, "train", replies, read)

    def _send(
        self, kind: str, content: RecordDict, clients: IntArray, phase: str
    ) -> dict[int, Message | str]:
        return self.owner._send(self.link, [(kind, content, clients)], self.server_round, phase)
