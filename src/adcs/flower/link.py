"""Requests to Flower nodes and their replies, matched by the message they answer (DESIGN §7).

:class:`Link` is the only place where :class:`~adcs.flower.SchedulerStrategy` touches Flower's
``Grid``. One *exchange* pushes one request per node and waits until each is settled:

* a reply arrived — it is matched to its request by ``reply_to_message_id``, never by sender: the
  error reply Flower's SuperLink writes for a node that stopped sending heartbeats ("node
  unavailable") carries the SuperLink's node id, not the dead node's;
* its node disconnected — it left ``grid.get_node_ids()`` while the request was open;
* the reply timeout passed.

Flower's Grid has no blocking receive (its own ``send_and_receive`` polls ``pull_messages``,
every 3 s on the Deployment Runtime's HTTP grid), so the exchange polls too, with a short back-off
that restarts whenever a reply comes in: a round waits at most ~0.5 s longer than its slowest
reply.

Requests may also be left open *in the background* (the strategy's handshakes with nodes whose
answer is not needed at once): their replies are pulled along with every later exchange and kept
in :attr:`Link.late` until the strategy reads them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flwr.app import DEFAULT_TTL, Message
from flwr.serverapp import Grid

__all__ = ["Failure", "Link"]

logger = logging.getLogger(__name__)

SUPERLINK_NODE_ID = 1
"""The node id Flower's SuperLink writes its own error replies under (``flwr.common.constant``)."""
_POLL_MIN_S = 0.02
_POLL_MAX_S = 0.5
_LIVENESS_EVERY_S = 1.0


@dataclass(frozen=True)
class Failure:
    """A request that produced no usable reply, and why (in words, for the round's record)."""

    reason: str


Outcome = Message | Failure
"""What an exchange gives for each node: its reply (possibly an error reply) or a failure."""


class Link:
    """Push requests through a Flower ``Grid``; pull replies until each request is settled.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    timeout : float or None
        Seconds an exchange waits for replies (``None``: no limit; Flower's heartbeat still ends
        the wait for a node that dies). Requests also carry it as their TTL, so the SuperLink drops
        a request the strategy no longer waits for.
    clock : callable, optional
        Monotonic clock in seconds (tests give a fake one).
    sleep : callable, optional
        ``sleep(seconds)`` between polls.
    """

    def __init__(
        self,
        grid: Grid,
        timeout: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if timeout is not None and not (timeout > 0):
            raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
        self.grid = grid
        self.timeout = timeout
        self.ttl = float(DEFAULT_TTL if timeout is None else min(timeout, DEFAULT_TTL))
        self._clock = clock
        self._sleep = sleep
        self._background: dict[str, int] = {}  # message id → node, of requests nobody waits for
        self.late: list[tuple[int, Outcome]] = []
        """Settled background requests (node, outcome), in arrival order; the reader clears it."""

    # ------------------------------------------------------------------ nodes

    def connected(self) -> set[int]:
        """Node ids the SuperLink lists as connected now."""
        return {int(node) for node in self.grid.get_node_ids()}

    @property
    def background_nodes(self) -> set[int]:
        """Nodes with a background request still open."""
        return set(self._background.values())

    # ------------------------------------------------------------------ exchanges

    def exchange(self, requests: Mapping[int, Message]) -> dict[int, Outcome]:
        """Push ``requests`` (node id → message) and wait until each is settled (module notes).

        Returns
        -------
        dict of int to Message or Failure
            One entry per requested node: its reply (check ``has_error()``) or why there is none.
        """
        outcomes: dict[int, Outcome] = {}
        waiting = self._push(requests, outcomes)
        deadline = math.inf if self.timeout is None else self._clock() + self.timeout
        self._wait(waiting, outcomes, deadline)
        for node in waiting.values():
            outcomes[node] = Failure(f"no reply within {self.timeout:g} s (the reply timeout)")
        return outcomes

    def send_in_background(self, requests: Mapping[int, Message]) -> None:
        """Push ``requests`` without waiting; their outcomes arrive in :attr:`late`."""
        outcomes: dict[int, Outcome] = {}
        self._background.update(self._push(requests, outcomes))
        self.late.extend(outcomes.items())

    def forget(self, nodes: set[int]) -> None:
        """Stop pulling the background requests of ``nodes`` (for example, nodes that left)."""
        for msg_id, node in list(self._background.items()):
            if node in nodes:
                del self._background[msg_id]

    def poll(self) -> None:
        """One pull of the background requests, without waiting."""
        self._pull({}, {})

    def wait_background(self, until: Callable[[], bool], deadline: float) -> None:
        """Pull background replies until ``until()`` holds or the clock passes ``deadline``."""
        self._wait({}, {}, deadline, until)

    def _push(
        self, requests: Mapping[int, Message], outcomes: dict[int, Outcome]
    ) -> dict[str, int]:
        """Push; returns message id → node of the pushed ones, records the ones that failed."""
        messages = list(requests.values())
        if not messages:
            return {}
        pushed = set(self.grid.push_messages(messages))
        waiting: dict[str, int] = {}
        for node, message in requests.items():
            msg_id = message.metadata.message_id
            if msg_id and msg_id in pushed:
                waiting[msg_id] = node
            else:
                outcomes[node] = Failure("the SuperLink did not accept the request")
        return waiting

    def _wait(
        self,
        waiting: dict[str, int],
        outcomes: dict[int, Outcome],
        deadline: float,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Poll until ``waiting`` is empty (or ``until()`` holds), or the deadline passes."""
        pause = _POLL_MIN_S
        next_liveness = self._clock() + _LIVENESS_EVERY_S
        while True:
            done = not waiting if until is None else until()
            if done or self._clock() >= deadline:
                return
            if self._pull(waiting, outcomes):
                pause = _POLL_MIN_S
                continue
            if waiting and self._clock() >= next_liveness:
                next_liveness = self._clock() + _LIVENESS_EVERY_S
                self._settle_disconnected(waiting, outcomes)
                continue
            self._sleep(min(pause, max(0.0, deadline - self._clock())))
            pause = min(2 * pause, _POLL_MAX_S)

    def _pull(self, waiting: dict[str, int], outcomes: dict[int, Outcome]) -> bool:
        """One pull of every open request; True when anything was settled."""
        ids = list(waiting) + list(self._background)
        if not ids:
            return False
        settled = False
        for reply in self.grid.pull_messages(ids):
            msg_id = reply.metadata.reply_to_message_id
            if msg_id in waiting:
                node = waiting.pop(msg_id)
                outcomes[node] = _sender_checked(reply, node)
                settled = True
            elif msg_id in self._background:
                node = self._background.pop(msg_id)
                self.late.append((node, _sender_checked(reply, node)))
                settled = True
            else:
                logger.debug("ignoring a reply to message %r, which nobody waits for", msg_id)
        return settled

    def _settle_disconnected(self, waiting: dict[str, int], outcomes: dict[int, Outcome]) -> None:
        """Requests to nodes that left the federation are settled as dropouts.

        One more pull first, so the SuperLink's own error reply (with Flower's reason) wins when
        it is there.
        """
        connected = self.connected()
        if all(node in connected for node in waiting.values()):
            return
        self._pull(waiting, outcomes)
        for msg_id, node in list(waiting.items()):
            if node not in connected:
                del waiting[msg_id]
                outcomes[node] = Failure("node disconnected during the round")


def _sender_checked(reply: Message, node: int) -> Outcome:
    """A content reply must come from the node asked; error replies may come from the SuperLink."""
    src = int(reply.metadata.src_node_id)
    if reply.has_error() or src == node:
        return reply
    return Failure(f"reply came from node {src}, not from the node asked ({node})")


def describe_error(reply: Message) -> str:
    """An error reply in words: who wrote it, Flower's error code and reason."""
    who = "the SuperLink" if reply.metadata.src_node_id == SUPERLINK_NODE_ID else "the node"
    return f"error reply from {who} (code {reply.error.code}): {reply.error.reason}"
