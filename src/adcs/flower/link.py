"""Requests to Flower nodes and their replies, matched by the message they answer (docs/design.md §7).

`Link` is the only place where [`SchedulerStrategy`][adcs.flower.SchedulerStrategy] touches Flower's
``Grid``. One *exchange* pushes one request per node and waits until each is settled:

* a reply arrived — it is matched to its request by ``reply_to_message_id``, never by sender: the
  error reply Flower's SuperLink writes for a node that stopped sending heartbeats ("node
  unavailable") carries the SuperLink's node id, not the dead node's;
* its node disconnected — it left ``grid.get_node_ids()`` while the request was open;
* the reply timeout passed since the request was pushed.

Flower's Grid has no blocking receive (its own ``send_and_receive`` polls ``pull_messages``,
every 3 s on the Deployment Runtime's HTTP grid), so the exchange polls too. On a grid that says
how often to pull (``pull_interval``: the Simulation Runtime's in-memory grid, 0.1 s) it pulls as
often as Flower's own exchange does there; elsewhere with a short back-off that restarts whenever a
reply comes in: a round waits at most ~0.5 s longer than its slowest reply.

Requests may also be left open *in the background* (the strategy's handshakes with nodes whose
answer is not needed at once): their replies (or timeouts) are pulled along with every later
exchange and kept in `Link.late` until the strategy reads them.

``max_in_flight`` caps the requests open at once (further ones wait their turn). A real deployment needs no cap; many SuperNodes sharing a few CPUs do: Flower
starts a new ClientApp process for every message, and one that has not started within 30 s
(Flower's task heartbeat interval) is abandoned and started again, so launching more processes
than the CPUs can start in that window makes every one of them miss it.
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


@dataclass(frozen=True)
class _Open:
    """A pushed request: its node, when it times out, and whether it is a background one."""

    node: int
    deadline: float
    background: bool


class Link:
    """Push requests through a Flower ``Grid``; pull replies until each request is settled.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    timeout : float or None
        Seconds a request of an exchange waits for its reply after being pushed (``None``: no
        limit; Flower's heartbeat still settles a request to a node that dies). Requests also
        carry it as their TTL, so the SuperLink drops a request nobody waits for any more.
    max_in_flight : int
        At most this many requests open at once; 0: no limit (module docstring).
    clock : callable, optional
        Monotonic clock in seconds (tests give a fake one).
    sleep : callable, optional
        ``sleep(seconds)`` between polls.
    """

    def __init__(
        self,
        grid: Grid,
        timeout: float | None,
        max_in_flight: int = 0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if timeout is not None and not (timeout > 0):
            raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
        self.grid = grid
        self.timeout = timeout
        self.ttl = float(DEFAULT_TTL if timeout is None else min(timeout, DEFAULT_TTL))
        self.max_in_flight = max_in_flight
        self._clock = clock
        self._sleep = sleep
        interval = getattr(grid, "pull_interval", None)
        if isinstance(interval, int | float) and 0 < interval < math.inf:
            self._pause_min = self._pause_max = float(interval)  # as Flower's own exchange
        else:
            self._pause_min, self._pause_max = _POLL_MIN_S, _POLL_MAX_S
        self._open: dict[str, _Open] = {}  # message id → request
        self._earliest = math.inf  # no open request's deadline is earlier
        self._queued: list[tuple[int, Message]] = []  # background requests not yet pushed
        self.late: list[tuple[int, Outcome]] = []
        """Settled background requests (node, outcome), in arrival order; the reader clears it."""

    # ------------------------------------------------------------------ nodes

    def connected(self) -> set[int]:
        """Node ids the SuperLink lists as connected now."""
        return {int(node) for node in self.grid.get_node_ids()}

    @property
    def background_nodes(self) -> set[int]:
        """Nodes with a background request open or queued."""
        return {r.node for r in self._open.values() if r.background} | {
            node for node, _ in self._queued
        }

    def forget(self, nodes: set[int]) -> None:
        """Drop the background requests of ``nodes`` (for example, nodes that left)."""
        for msg_id, request in list(self._open.items()):
            if request.background and request.node in nodes:
                del self._open[msg_id]
        self._queued = [(node, msg) for node, msg in self._queued if node not in nodes]

    # ------------------------------------------------------------------ exchanges

    def exchange(self, requests: Mapping[int, Message]) -> dict[int, Outcome]:
        """Push ``requests`` (node id → message) and wait until each is settled (module notes).

        Returns
        -------
        dict of int to Message or Failure
            One entry per requested node: its reply (check ``has_error()``) or why there is none.
        """
        queue = list(requests.items())
        outcomes: dict[int, Outcome] = {}  # one per requested node once it is settled
        pause = self._pause_min
        next_liveness = self._clock() + _LIVENESS_EVERY_S
        while True:
            self._push(queue, outcomes)
            if len(outcomes) == len(requests):
                return outcomes
            if self._pull(outcomes):
                pause = self._pause_min
                if len(outcomes) == len(requests):
                    return outcomes
            self._expire(outcomes)
            now = self._clock()
            if now >= next_liveness:
                next_liveness = now + _LIVENESS_EVERY_S
                self._settle_disconnected(outcomes)
                continue
            self._sleep(max(0.0, min(pause, self._earliest - now)))
            pause = min(2 * pause, self._pause_max)

    def send_in_background(self, requests: Mapping[int, Message]) -> None:
        """Queue ``requests``; they are pushed as the window allows, their outcomes go to
        `late`."""
        self._queued.extend(requests.items())
        self._push([], {})

    def poll(self) -> None:
        """Push what the window allows and pull once, without waiting."""
        self._push([], {})
        self._pull({})
        self._expire({})

    def wait_background(self, until: Callable[[], bool], deadline: float) -> None:
        """Pull background replies until ``until()`` holds or the clock passes ``deadline``."""
        pause = self._pause_min
        while not until() and self._clock() < deadline:
            self._push([], {})
            if self._pull({}):
                pause = self._pause_min
                continue
            self._expire({})
            self._sleep(max(0.0, min(pause, deadline - self._clock())))
            pause = min(2 * pause, self._pause_max)

    def _push(self, queue: list[tuple[int, Message]], outcomes: dict[int, Outcome]) -> None:
        """Push from ``queue`` (the exchange's), then from the background queue, as slots allow.

        Open background requests (a dead node's handshake may stay open for a minute) never keep
        an exchange's requests waiting: they count against the window only for each other.
        """
        if not queue and not self._queued:
            return
        limit = math.inf if self.max_in_flight <= 0 else self.max_in_flight
        mine = sum(1 for r in self._open.values() if not r.background)
        batch: list[tuple[int, Message, bool]] = []
        while queue and mine + len(batch) < limit:
            node, message = queue.pop(0)
            batch.append((node, message, False))
        while self._queued and len(self._open) + len(batch) < limit:
            node, message = self._queued.pop(0)
            batch.append((node, message, True))
        if not batch:
            return
        pushed = set(self.grid.push_messages([message for _, message, _ in batch]))
        deadline = math.inf if self.timeout is None else self._clock() + self.timeout
        self._earliest = min(self._earliest, deadline)
        for node, message, background in batch:
            msg_id = message.metadata.message_id
            if msg_id and msg_id in pushed:
                self._open[msg_id] = _Open(node, deadline, background)
                continue
            failure = Failure("the SuperLink did not accept the request")
            if background:
                self.late.append((node, failure))
            else:
                outcomes[node] = failure

    def _pull(self, outcomes: dict[int, Outcome]) -> bool:
        """One pull of every open request; True when anything was settled."""
        if not self._open:
            return False
        settled = False
        for reply in self.grid.pull_messages(list(self._open)):
            request = self._open.pop(reply.metadata.reply_to_message_id, None)
            if request is None:
                logger.debug("ignoring a reply to a request nobody waits for")
                continue
            settled = True
            outcome = _sender_checked(reply, request.node)
            if request.background:
                self.late.append((request.node, outcome))
            else:
                outcomes[request.node] = outcome
        return settled

    def _expire(self, outcomes: dict[int, Outcome]) -> None:
        """Requests open for longer than the timeout are settled as failures."""
        now = self._clock()
        if now < self._earliest:
            return
        for msg_id, request in list(self._open.items()):
            if request.deadline <= now:
                del self._open[msg_id]
                failure = Failure(f"no reply within {self.timeout:g} s (the reply timeout)")
                if request.background:
                    self.late.append((request.node, failure))
                else:
                    outcomes[request.node] = failure
        self._earliest = min((r.deadline for r in self._open.values()), default=math.inf)

    def _settle_disconnected(self, outcomes: dict[int, Outcome]) -> None:
        """The exchange's requests to nodes that left the federation are settled as dropouts.

        One more pull first, so the SuperLink's own error reply (with Flower's reason) wins when
        it is there.
        """
        mine = {i: r for i, r in self._open.items() if not r.background}
        connected = self.connected()
        if all(r.node in connected for r in mine.values()):
            return
        self._pull(outcomes)
        for msg_id, request in mine.items():
            if msg_id in self._open and request.node not in connected:
                del self._open[msg_id]
                outcomes[request.node] = Failure("node disconnected during the round")


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
