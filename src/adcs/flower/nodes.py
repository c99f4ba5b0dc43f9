"""Which Flower node serves which client, and which clients are available (docs/design.md §7).

Flower's node ids are random and change when a SuperNode restarts; a client's index is the
partition id its node reports in the handshake (``query.adcs_hello``). `NodeMap` keeps
that mapping across reconnects and decides each round's availability mask:

* client c is **available** when its node is connected to the SuperLink and *responsive*;
* a node that fails to answer a request (timeout, disconnection, or an error the SuperLink
  writes for it) is **unresponsive** until it answers a new handshake;
* a new node claiming client c takes it over when c's node is gone or unresponsive — that is how
  a restarted SuperNode gets its client back — and is refused while c's node is connected and
  responsive (two nodes cannot serve one client).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence, Set

import numpy as np
from flwr.app import Message

from adcs.flower.client import NUM_EXAMPLES, NUM_PARTITIONS, PARTITION_ID
from adcs.flower.link import Failure, Outcome, describe_error
from adcs.round.contract import F64Array
from adcs.schedulers.base import BoolArray

__all__ = ["NodeIndex", "NodeMap"]

logger = logging.getLogger(__name__)


class NodeMap:
    """Client index ↔ Flower node id, data sizes, and responsiveness (module docstring).

    Parameters
    ----------
    n_clients : int
        N: valid partition ids are 0..N−1.

    Attributes
    ----------
    node_of : dict of int to int
        Client index → the node id serving it (kept while the node is away).
    client_of : dict of int to int
        The inverse map.
    sizes : ndarray of shape (n_clients,)
        Training examples each client reported (NaN until it has).
    unresponsive : set of int
        Node ids whose last request failed and that have not answered a handshake since.
    """

    def __init__(self, n_clients: int) -> None:
        self.n_clients = n_clients
        self.node_of: dict[int, int] = {}
        self.client_of: dict[int, int] = {}
        self.sizes: F64Array = np.full(n_clients, np.nan)
        self.unresponsive: set[int] = set()
        self._refused: dict[int, str] = {}  # node → why its last handshake was refused

    def available(self, connected: Set[int]) -> BoolArray:
        """Availability mask of shape (n_clients,): a connected, responsive node serves c."""
        mask = np.zeros(self.n_clients, dtype=bool)
        for client, node in self.node_of.items():
            mask[client] = node in connected and node not in self.unresponsive
        return mask

    def to_greet(self, connected: Set[int]) -> list[int]:
        """Connected nodes that need a handshake: unknown ones and unresponsive ones, ascending."""
        return sorted(n for n in connected if n not in self.client_of or n in self.unresponsive)

    def all_sizes(self) -> F64Array | None:
        """Every client's data size, or None while some client has not reported one."""
        return self.sizes.copy() if np.isfinite(self.sizes).all() else None

    def failed(self, node: int) -> None:
        """``node`` did not answer a request: unavailable until it answers a handshake."""
        self.unresponsive.add(node)

    def greeted(self, node: int, outcome: Outcome, connected: Set[int]) -> None:
        """Take in a handshake's outcome: map the node to its client, or say why not."""
        try:
            client, size = _claim(outcome, self.n_clients)
            holder = self.node_of.get(client)
            if (
                holder is not None
                and holder != node
                and holder in connected
                and holder not in self.unresponsive
            ):
                raise ValueError(f"client {client} is served by node {holder}, which is connected")
        except ValueError as why:
            self._refuse(node, str(why))
            return
        self._refused.pop(node, None)
        self.unresponsive.discard(node)
        previous = self.client_of.get(node)
        if previous is not None and previous != client:
            del self.node_of[previous]
        if holder is not None and holder != node:
            self.client_of.pop(holder, None)
            self.unresponsive.discard(holder)
            logger.info("node %d now serves client %d (it was node %d)", node, client, holder)
        elif holder is None:
            logger.info("node %d serves client %d", node, client)
        self.node_of[client] = node
        self.client_of[node] = client
        if size is not None:
            self.sizes[client] = size

    def _refuse(self, node: int, why: str) -> None:
        # A refused node is asked again every round; say why once, not every round.
        if self._refused.get(node) != why:
            logger.warning("node %d is not used: %s", node, why)
        self._refused[node] = why


def _claim(outcome: Outcome, n_clients: int) -> tuple[int, float | None]:
    """The client index and data size a handshake reply claims; ValueError says what is wrong."""
    if isinstance(outcome, Failure):
        raise ValueError(f"no handshake reply: {outcome.reason}")
    reply: Message = outcome
    if reply.has_error():
        raise ValueError(f"handshake failed: {describe_error(reply)}")
    records = list(reply.content.metric_records.values())
    metrics = records[0] if len(records) == 1 else {}
    pid = metrics.get(PARTITION_ID)
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise ValueError(f"the handshake reply holds no integer '{PARTITION_ID}'")
    if not 0 <= pid < n_clients:
        raise ValueError(f"{PARTITION_ID}={pid} is outside [0, {n_clients})")
    partitions = metrics.get(NUM_PARTITIONS)
    if partitions is not None and partitions != n_clients:
        raise ValueError(
            f"the node holds partition {pid} of {partitions}, but this run has {n_clients} clients"
        )
    size = metrics.get(NUM_EXAMPLES)
    if isinstance(size, bool) or not isinstance(size, (int, float)):
        return pid, None
    return pid, float(size) if math.isfinite(size) and size >= 0 else None


class NodeIndex:
    """Client index = order of first appearance of a Flower node, up to N (no handshake).

    For apps that know nothing of adcs ([`ScheduledFedAvg`][adcs.flower.ScheduledFedAvg]): the first
    N node ids the Grid lists get indices 0..N−1 in the order they appear (nodes that appear
    together in ascending node id); later nodes are not used. A client is available while its node
    is connected. The mapping is saved with a checkpoint, so a restarted ServerApp on the same
    SuperNodes (their node ids survive a ServerApp restart) keeps every client's index.

    Parameters
    ----------
    n_clients : int
        N.
    nodes : sequence of int, optional
        Node ids already indexed, in index order (a checkpoint's).
    log : logging.Logger, optional
        Where to say which node became which client (the strategy's logger).

    Attributes
    ----------
    node_of : dict of int to int
        Client index → node id.
    client_of : dict of int to int
        Node id → client index.
    """

    def __init__(
        self, n_clients: int, nodes: Sequence[int] = (), log: logging.Logger = logger
    ) -> None:
        if len(nodes) > n_clients:
            raise ValueError(f"{len(nodes)} nodes indexed but n_clients={n_clients}")
        self.n_clients = n_clients
        self.node_of: dict[int, int] = {c: int(n) for c, n in enumerate(nodes)}
        self.client_of: dict[int, int] = {n: c for c, n in self.node_of.items()}
        self._ignored: set[int] = set()
        self._log = log

    @property
    def nodes(self) -> list[int]:
        """Indexed node ids, in index order."""
        return [self.node_of[c] for c in range(len(self.node_of))]

    def available(self, connected: Set[int]) -> BoolArray:
        """Index newly connected nodes; the availability mask of shape (n_clients,)."""
        for node in sorted(connected):
            if node in self.client_of or node in self._ignored:
                continue
            if len(self.node_of) < self.n_clients:
                client = len(self.node_of)
                self.node_of[client], self.client_of[node] = node, client
                self._log.debug("node %d is client %d", node, client)  # adcs's index: internal
            else:
                self._ignored.add(node)
                self._log.warning(
                    "node %d is not used: all %d clients are taken", node, len(self.node_of)
                )
        mask = np.zeros(self.n_clients, dtype=bool)
        for client, node in self.node_of.items():
            mask[client] = node in connected
        return mask
