"""The round both Flower strategies drive, and the reply checks they share (docs/design.md §1, §7).

:func:`play_round` is steps 1–5 of a round with any adcs scheduler, written once for
:class:`~adcs.flower.SchedulerStrategy` (adcs's own ClientApp, the simulator-identical path) and
:class:`~adcs.flower.ScheduledFedAvg` (any Flower app, standard messages). A strategy hands it a
:class:`Gatherer`, which knows how to ask clients for a loss or an update over the Grid and how
to check their replies; the round decides whom to ask, what the scheduler sees, whom it selected
and whose update is reused, and the strategy aggregates what came back its own way.

Replies are untrusted: whatever a gatherer could not use comes back as a string saying why
(``"train: no reply within 30 s"``, ``"loss probe: malformed reply: ..."``). A client whose probe
failed is not selectable this round; a selected client whose training failed is a dropout (its
update is not aggregated, :func:`adcs.rounds.aggregation_weights` renormalises over the others).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from flwr.app import Message, RecordDict
from numpy.typing import NDArray

from adcs.flower.link import SUPERLINK_NODE_ID, Failure, Link, Outcome, describe_error
from adcs.rounds import check_selection
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    IntArray,
    LossSource,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
)

__all__ = [
    "Gatherer",
    "RejectedReply",
    "RoundOutcome",
    "RoundRecord",
    "Trained",
    "account",
    "ask",
    "finite_metric",
    "history_dicts",
    "is_unanswered",
    "log_round",
    "one_metric_record",
    "play_round",
]

logger = logging.getLogger(__name__)

F32Array = NDArray[np.float32]


class RejectedReply(ValueError):
    """A reply excluded from the round; the message says why."""


@dataclass(frozen=True, eq=False)
class Trained:
    """A valid ``train`` reply.

    Attributes
    ----------
    features : ndarray of shape (dim,), float32
        What the scheduler sees of the update Δ (the update itself, or its sketch).
    loss : float
        The client's training loss (NaN when the reply carries none).
    num_examples : float
        The client's reported number of training examples (NaN when it reports none).
    reply : Any
        What the strategy needs to aggregate it (the update, or the reply's arrays).
    """

    features: F32Array
    loss: float
    num_examples: float
    reply: Any = None


class Gatherer(Protocol):
    """One round's exchanges with the clients, as a strategy performs them over the Grid."""

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        """Each client's loss at w⁽ᵗ⁾, or why there is none."""
        ...

    def updates(self, clients: IntArray) -> dict[int, Trained | str]:
        """Each client's training at w⁽ᵗ⁾, or why there is none."""
        ...


@dataclass(frozen=True, eq=False)
class RoundOutcome:
    """What :func:`play_round` gathered and decided (client indices throughout).

    Attributes
    ----------
    probe : Probe
    probed : ndarray of shape (n_probed,)
        Clients asked for a probe, ascending.
    selection : Selection
        The scheduler's choice (its weights, if any).
    selected : ndarray of shape (k,)
        The checked selection, in the scheduler's order.
    returned : ndarray of bool, shape (k,)
        Which selected clients delivered a valid update.
    held : dict of int to Trained
        Every valid training of the round (probed and/or selected).
    failed : dict of int to str
        Client → why its reply was excluded or never came.
    loss_evals : int
        Valid losses returned by a loss probe.
    state : Any
        The scheduler's state after ``select`` (and ``observe``).
    """

    probe: Probe
    probed: IntArray
    selection: Selection
    selected: IntArray
    returned: BoolArray
    held: dict[int, Trained]
    failed: dict[int, str]
    loss_evals: int
    state: Any

    @property
    def delivered(self) -> IntArray:
        """Selected clients whose update enters the aggregate, in selection order."""
        return self.selected[self.returned]


def play_round(
    scheduler: Scheduler,
    state: Any,
    round_idx: int,
    available: BoolArray,
    rng: np.random.Generator,
    gatherer: Gatherer,
    feature_dim: int,
) -> RoundOutcome:
    """Steps 1–5 of one round (module docstring): probe, gather, select, train, observe.

    Parameters
    ----------
    scheduler : Scheduler
    state : Any
        The scheduler's state before the round.
    round_idx : int
        t, from 0.
    available : ndarray of bool, shape (n_clients,)
    rng : numpy.random.Generator
        The scheduler's stream.
    gatherer : Gatherer
    feature_dim : int
        Length of :attr:`Trained.features` (for the empty matrix of a round without updates).

    Returns
    -------
    RoundOutcome
    """
    probe = scheduler.probe(state, round_idx, available, rng)
    targets = np.unique(probe.targets(available)).astype(np.intp)
    stats, held, failed, loss_evals = _gather(probe, targets, available, gatherer, feature_dim)
    selection, state = scheduler.select(state, round_idx, stats, rng)
    who = f"{scheduler!r} at round {round_idx}"
    clients = check_selection(selection.clients, stats.available, scheduler.m, who=who)
    missing = np.asarray([c for c in clients if int(c) not in held], dtype=np.intp)
    if missing.size:
        more, why = _split(gatherer.updates(missing))
        held.update(more)
        failed.update(why)
    returned = np.asarray([int(c) in held for c in clients], dtype=bool)
    if scheduler.observes_updates:
        delivered = clients[returned]
        features = _rows([held[int(c)].features for c in delivered], feature_dim)
        losses = np.asarray([held[int(c)].loss for c in delivered], dtype=np.float64)
        state = scheduler.observe(state, round_idx, delivered, features, losses)
    return RoundOutcome(
        probe, targets, selection, clients, returned, held, failed, loss_evals, state
    )


def _gather(
    probe: Probe,
    targets: IntArray,
    available: BoolArray,
    gatherer: Gatherer,
    feature_dim: int,
) -> tuple[ClientStats, dict[int, Trained], dict[int, str], int]:
    """Step 2: what the probe asks, from ``targets``.

    Returns the scheduler's statistics (clients whose probe failed made unavailable), the
    trainings held (an update probe's, reused for aggregation), the failures, and the number of
    losses evaluated.
    """
    if probe.kind is ProbeKind.NONE:
        return ClientStats.blind(available), {}, {}, 0
    if probe.kind is ProbeKind.LOSSES:
        losses = gatherer.losses(targets, probe.loss_source)
        failed = {c: why for c, why in losses.items() if isinstance(why, str)}
        got = np.asarray([c for c in targets if int(c) not in failed], dtype=np.intp)
        values = np.asarray([losses[int(c)] for c in got], dtype=np.float64)
        return ClientStats(_without(available, failed), got, values), {}, failed, got.size
    held, failed = _split(gatherer.updates(targets))
    got = np.asarray(sorted(held), dtype=np.intp)
    stats = ClientStats(
        _without(available, failed),
        got,
        np.asarray([held[int(c)].loss for c in got], dtype=np.float64),
        _rows([held[int(c)].features for c in got], feature_dim),
    )
    return stats, held, failed, 0


def _split(replies: Mapping[int, Trained | str]) -> tuple[dict[int, Trained], dict[int, str]]:
    held = {c: r for c, r in replies.items() if not isinstance(r, str)}
    return held, {c: r for c, r in replies.items() if isinstance(r, str)}


def _without(available: BoolArray, failed: Mapping[int, str]) -> BoolArray:
    """``available`` less the clients whose probe just failed (not selectable this round)."""
    out = available.copy()
    out[list(failed)] = False
    return out


def _rows(rows: list[F32Array], dim: int) -> F32Array:
    return np.stack(rows) if rows else np.empty((0, dim), dtype=np.float32)


# ---------------------------------------------------------------------- reply checks


def is_unanswered(outcome: Outcome) -> bool:
    """No reply, or an error the SuperLink wrote because the node did not answer."""
    if isinstance(outcome, Failure):
        return True
    return outcome.has_error() and outcome.metadata.src_node_id == SUPERLINK_NODE_ID


def finite_metric(metrics: Mapping[str, Any], key: str) -> float:
    """``metrics[key]`` as a float; :class:`RejectedReply` unless it is a finite number."""
    value = metrics.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RejectedReply(f"missing or non-finite metric '{key}' (got {value!r})")
    return float(value)


def one_metric_record(reply: Message) -> Any:
    """The reply's one MetricRecord (:class:`RejectedReply` unless there is exactly one)."""
    records = list(reply.content.metric_records.values())
    if len(records) != 1:
        raise RejectedReply(f"expected one MetricRecord, got {len(records)}")
    return records[0]


def account(
    server_round: int,
    phase: str,
    replies: Mapping[int, Any],
    node_of: Mapping[int, int],
    log: logging.Logger = logger,
) -> None:
    """Flower's accounting of an exchange: results, failures and each failure's reason.

    Logged to ``log`` (the strategy's own logger, so its users see it where they look).
    """
    failures = {c: why for c, why in replies.items() if isinstance(why, str)}
    log.info(
        "round %d %s: received %d results and %d failures",
        server_round,
        phase,
        len(replies) - len(failures),
        len(failures),
    )
    for client, why in sorted(failures.items()):
        log.info("\t> client %d (node %d): %s", client, node_of[client], why)


# ---------------------------------------------------------------------- the round's record


@dataclass(frozen=True, eq=False)
class RoundRecord:
    """What happened in one round (client indices, not Flower node ids).

    Attributes
    ----------
    server_round : int
        Flower's round (from 1); the scheduler saw round_idx = server_round − 1.
    probe_kind : ProbeKind
    available : ndarray of bool, shape (n_clients,)
        Clients with a connected, responsive node when the round began.
    probed : ndarray of shape (n_probed,)
        Clients asked for a probe (losses or updates), ascending.
    selected : ndarray of shape (k,)
        The scheduler's choice, in its order (k = min(m, available after the probe)).
    trained : ndarray of shape (n_trained,)
        Clients whose ``train`` reply held a valid update (probed and/or selected), ascending.
    aggregated : ndarray of shape (n_aggregated,)
        Selected clients whose update entered the aggregate, in selection order.
    failed : dict of int to str
        Client index → why its reply was excluded or never came, e.g. ``"train: no reply within
        30 s (the reply timeout)"``.
    client_updates : int
        Local updates returned valid (a probed update reused for aggregation counts once).
    loss_evals : int
        Losses returned valid by loss probes.
    wall_s : float
        Seconds from the round's start (the availability check) to its aggregate, evaluation not
        included.
    ended_at : float
        When the round's aggregate was done (seconds since the epoch, ``time.time()``).
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
    ended_at: float

    @staticmethod
    def of(
        outcome: RoundOutcome,
        server_round: int,
        available: BoolArray,
        wall_s: float,
        ended_at: float,
    ) -> RoundRecord:
        """The record of a played round."""
        return RoundRecord(
            server_round=server_round,
            probe_kind=outcome.probe.kind,
            available=available,
            probed=outcome.probed,
            selected=outcome.selected.copy(),
            trained=np.asarray(sorted(outcome.held), dtype=np.intp),
            aggregated=outcome.delivered,
            failed=dict(sorted(outcome.failed.items())),
            client_updates=len(outcome.held),
            loss_evals=outcome.loss_evals,
            wall_s=wall_s,
            ended_at=ended_at,
        )


def log_round(record: RoundRecord, log: logging.Logger = logger) -> None:
    """One line per round that a reader (or a test) can parse from the ServerApp's log."""
    log.info(
        "adcs round %d: available %d, probed %s, selected %s, aggregated %s, failed %s, %.2f s",
        record.server_round,
        int(record.available.sum()),
        record.probed.tolist(),
        record.selected.tolist(),
        record.aggregated.tolist(),
        record.failed,
        record.wall_s,
    )


def history_dicts(history: Iterable[RoundRecord]) -> list[dict[str, Any]]:
    """The round records as JSON-ready dicts (client lists, reasons keyed by client)."""
    return [
        {
            "server_round": r.server_round,
            "probe_kind": r.probe_kind.name.lower(),
            "available": np.flatnonzero(r.available).tolist(),
            "probed": r.probed.tolist(),
            "selected": r.selected.tolist(),
            "trained": r.trained.tolist(),
            "aggregated": r.aggregated.tolist(),
            "failed": {str(c): why for c, why in r.failed.items()},
            "client_updates": r.client_updates,
            "loss_evals": r.loss_evals,
            "wall_s": r.wall_s,
            "ended_at": r.ended_at,
        }
        for r in history
    ]


def ask(
    link: Link,
    node_of: Mapping[int, int],
    client_of: Mapping[int, int],
    clients: Iterable[int],
    message_type: str,
    content: RecordDict,
    group: str,
    phase: str,
) -> tuple[dict[int, Message | str], list[int]]:
    """One exchange with ``clients``: their replies, or why there is none (phase-prefixed).

    Returns the outcome per client and the nodes that did not answer at all (no reply, gone, or
    an error the SuperLink wrote for them), which the caller may hold unresponsive.
    """
    requests = {
        node_of[int(c)]: Message(
            content, node_of[int(c)], message_type, ttl=link.ttl, group_id=group
        )
        for c in clients
    }
    outcomes = link.exchange(requests)
    out: dict[int, Message | str] = {}
    unanswered = []
    for node, outcome in outcomes.items():
        client = client_of[node]
        if is_unanswered(outcome):
            unanswered.append(node)
        if isinstance(outcome, Failure):
            out[client] = f"{phase}: {outcome.reason}"
        elif outcome.has_error():
            out[client] = f"{phase}: {describe_error(outcome)}"
        else:
            out[client] = outcome
    return out, unanswered
