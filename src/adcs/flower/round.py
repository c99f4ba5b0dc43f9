"""What both Flower strategies share around the round: reply checks, exchanges, the records.

The round itself is `adcs.round.machine`'s, the one the simulator plays: a strategy builds its
`RoundRules` and hands `adcs.round.play.play` a
`Gatherer` that asks clients for a loss or an update over the Grid and
checks their replies; the round decides whom to ask, what the scheduler sees, whom it selected,
whose update is reused and the aggregation weights, and the strategy aggregates what came back
its own way (docs/design.md §1, §7).

Replies are untrusted: whatever a gatherer could not use comes back as a string saying why
(``"train: no reply within 30 s"``, ``"loss probe: malformed reply: ..."``). A client whose probe
failed is not selectable this round; a selected client whose training failed is a dropout (its
update is not aggregated, [`adcs.round.contract.aggregation_weights`][adcs.round.contract.aggregation_weights]
renormalises over the others).

What Flower's runtime does not offer of the round: a simulated clock (round seconds, deadline,
over-commitment — `RoundRecord.wall_s` is the wall clock) and simulated dropouts (a
dropout is a client's real failure).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Message, MetricRecord, RecordDict

from adcs.columns import AVG_ACC, WORST_ACC, eval_values
from adcs.flower.link import SUPERLINK_NODE_ID, Failure, Link, Outcome, describe_error
from adcs.round.play import Gatherer, Played, Trained
from adcs.schedulers.base import BoolArray, FloatArray, IntArray, ProbeKind

__all__ = [
    "EvaluationRecord",
    "Gatherer",
    "RejectedReply",
    "RoundRecord",
    "Trained",
    "account",
    "ask",
    "finite_metric",
    "history_dicts",
    "is_unanswered",
    "log_round",
    "one_metric_record",
    "settle",
]

logger = logging.getLogger(__name__)


class RejectedReply(ValueError):
    """A reply excluded from the round; the message says why."""


# ---------------------------------------------------------------------- reply checks


def is_unanswered(outcome: Outcome) -> bool:
    """No reply, or an error the SuperLink wrote because the node did not answer."""
    if isinstance(outcome, Failure):
        return True
    return outcome.has_error() and outcome.metadata.src_node_id == SUPERLINK_NODE_ID


def finite_metric(metrics: Mapping[str, Any], key: str) -> float:
    """``metrics[key]`` as a float; [`RejectedReply`][adcs.flower.RejectedReply] unless it is a
    finite number."""
    value = metrics.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RejectedReply(f"missing or non-finite metric '{key}' (got {value!r})")
    return float(value)


def one_metric_record(reply: Message) -> Any:
    """The reply's one MetricRecord ([`RejectedReply`][adcs.flower.RejectedReply] unless there is
    exactly one)."""
    records = [r for r in reply.content.values() if isinstance(r, MetricRecord)]
    if len(records) != 1:
        raise RejectedReply(f"expected one MetricRecord, got {len(records)}")
    return records[0]


def account(
    server_round: int,
    phase: str,
    replies: Mapping[int, Any],
    name: Callable[[int], str],
    log: logging.Logger = logger,
    quiet: bool = False,
) -> None:
    """Flower's accounting of an exchange: results, failures and each failure's reason.

    Logged to ``log`` (the strategy's own logger, so its users see it where they look), each
    failed client as ``name(client)`` gives it; with ``quiet``, an exchange without failures is
    not logged (a wrapped Flower strategy prints its own count).
    """
    failures = {c: why for c, why in replies.items() if isinstance(why, str)}
    if quiet and not failures:
        return
    log.info(
        "round %d %s: received %d results and %d failures",
        server_round,
        phase,
        len(replies) - len(failures),
        len(failures),
    )
    for client, why in sorted(failures.items()):
        log.info("\t> %s: %s", name(client), why)


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
        played: Played,
        server_round: int,
        available: BoolArray,
        wall_s: float,
        ended_at: float,
    ) -> RoundRecord:
        """The record of a played round."""
        record = played.record
        return RoundRecord(
            server_round=server_round,
            probe_kind=record.probe.kind,
            available=available,
            probed=record.probed,
            selected=record.selected.copy(),
            trained=np.asarray(sorted(played.held), dtype=np.intp),
            aggregated=record.aggregated,
            failed=dict(sorted(played.failed.items())),
            client_updates=record.client_updates,
            loss_evals=record.loss_evals,
            wall_s=wall_s,
            ended_at=ended_at,
        )


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
        """Minimum over the clients that reported (`adcs.columns.WORST_ACC`)."""
        return float(WORST_ACC.over(self.accuracy))

    @property
    def average_accuracy(self) -> float:
        """Mean over the clients that reported (`adcs.columns.AVG_ACC`)."""
        return float(AVG_ACC.over(self.accuracy))

    @property
    def columns(self) -> dict[str, float]:
        """The per-evaluation result columns of `adcs.columns.COLUMNS` a runtime can give
        (those computed from the clients' accuracies), over the clients that reported."""
        return eval_values(self.accuracy)


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
    return settle(link.exchange(requests), client_of, phase)


def settle(
    outcomes: Mapping[int, Outcome], client_of: Mapping[int, int], phase: str
) -> tuple[dict[int, Message | str], list[int]]:
    """An exchange's outcomes (node → reply or failure) by client: each reply, or why there is
    none (phase-prefixed); and the nodes that did not answer at all (`is_unanswered`)."""
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
