"""adcs.flower.link: replies matched by the request they answer, timeouts, dropouts, the window."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import Error, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from adcs.flower.link import SUPERLINK_NODE_ID, Failure, Link, describe_error


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 1e-3)


@dataclass
class FakeGrid:
    """Nodes answer after ``delay[node]`` seconds of the fake clock (never if absent), through
    ``answer`` (default: a content reply from the node)."""

    clock: Clock
    nodes: set[int]
    delay: dict[int, float]
    answer: Callable[[Message], Message] | None = None
    pushed_at: dict[str, tuple[float, Message]] = field(default_factory=dict)
    max_open: int = 0
    pulled: set[str] = field(default_factory=set)

    def get_node_ids(self) -> Iterable[int]:
        return sorted(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg_id = f"m{len(self.pushed_at)}"
            msg.metadata.__dict__["_message_id"] = msg_id
            self.pushed_at[msg_id] = (self.clock.now, msg)
            ids.append(msg_id)
        self.max_open = max(self.max_open, len(self.pushed_at) - len(self.pulled))
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        out = []
        for msg_id in message_ids:
            at, msg = self.pushed_at[msg_id]
            node = msg.metadata.dst_node_id
            wait = self.delay.get(node)
            if msg_id in self.pulled or wait is None or self.clock.now < at + wait:
                continue
            self.pulled.add(msg_id)
            out.append(self.answer(msg) if self.answer else reply(msg, node))
        return out


def reply(msg: Message, node: int) -> Message:
    out = Message(RecordDict({"metrics": MetricRecord({"node": node})}), reply_to=msg)
    out.metadata.__dict__["_src_node_id"] = node
    return out


def request(node: int) -> Message:
    return Message(RecordDict(), node, "query.test")


def link_of(grid: FakeGrid, timeout: float | None = 5.0, window: int = 0) -> Link:
    return Link(grid, timeout, window, clock=grid.clock, sleep=grid.clock.sleep)  # type: ignore[arg-type]


def test_replies_are_matched_by_the_request_they_answer() -> None:
    clock = Clock()
    grid = FakeGrid(clock, {11, 12, 13}, {11: 0.5, 12: 0.1, 13: 1.0})
    outcomes = link_of(grid).exchange({n: request(n) for n in (11, 12, 13)})
    assert {n: o.content.metric_records["metrics"]["node"] for n, o in outcomes.items()} == {
        11: 11, 12: 12, 13: 13
    }  # fmt: skip
    assert clock.now < 1.6  # no waiting beyond the slowest reply and one back-off step


def test_the_superlinks_error_reply_for_a_dead_node_is_that_nodes_outcome() -> None:
    def unavailable(msg: Message) -> Message:
        error = Error(code=5, reason="Error: Node Unavailable - no heartbeat")
        out = Message(error, reply_to=msg)
        out.metadata.__dict__["_src_node_id"] = SUPERLINK_NODE_ID  # written by the SuperLink
        return out

    grid = FakeGrid(Clock(), {7}, {7: 2.0}, answer=unavailable)
    (outcome,) = link_of(grid).exchange({7: request(7)}).values()
    assert isinstance(outcome, Message) and outcome.has_error()
    assert describe_error(outcome) == (
        "error reply from the SuperLink (code 5): Error: Node Unavailable - no heartbeat"
    )


def test_a_reply_from_another_node_is_refused() -> None:
    grid = FakeGrid(Clock(), {7}, {7: 0.0}, answer=lambda msg: reply(msg, 8))
    (outcome,) = link_of(grid).exchange({7: request(7)}).values()
    assert outcome == Failure("reply came from node 8, not from the node asked (7)")


def test_timeouts_and_disconnections_settle_a_request() -> None:
    clock = Clock()
    grid = FakeGrid(clock, {1, 2, 3}, {1: 0.2})  # 2 and 3 never answer
    link = link_of(grid, timeout=5.0)

    def leave_soon(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now > 2.0:
            grid.nodes.discard(3)  # node 3 drops out mid-round

    link._sleep = leave_soon
    outcomes = link.exchange({n: request(n) for n in (1, 2, 3)})
    assert isinstance(outcomes[1], Message)
    assert outcomes[2] == Failure("no reply within 5 s (the reply timeout)")
    assert outcomes[3] == Failure("node disconnected during the round")
    assert 5.0 <= clock.now < 5.6


def test_the_window_caps_open_requests_and_background_ones_never_block() -> None:
    clock = Clock()
    nodes = set(range(1, 11))
    grid = FakeGrid(clock, nodes | {99}, {n: 0.3 * n for n in nodes})  # node 99 never answers
    link = link_of(grid, timeout=20.0, window=3)
    link.send_in_background({99: request(99)})  # a dead node's handshake, open until it times out
    outcomes = link.exchange({n: request(n) for n in nodes})
    assert set(outcomes) == nodes and all(isinstance(o, Message) for o in outcomes.values())
    assert grid.max_open <= 3 + 1  # the exchange's 3, and the stuck background request
    assert link.background_nodes == {99} and link.late == []
    link.forget({99})
    assert link.background_nodes == set()
    link.send_in_background({99: request(99)})
    link.wait_background(lambda: bool(link.late), deadline=clock.now + 30.0)
    assert link.late == [(99, Failure("no reply within 20 s (the reply timeout)"))]


def test_background_replies_arrive_in_late() -> None:
    clock = Clock()
    grid = FakeGrid(clock, {4, 5}, {4: 0.1, 5: 0.4})
    link = link_of(grid)
    link.send_in_background({4: request(4), 5: request(5)})
    link.wait_background(lambda: len(link.late) == 2, deadline=10.0)
    assert sorted(node for node, _ in link.late) == [4, 5]
    assert link.background_nodes == set()


def test_timeout_must_be_positive() -> None:
    grid: Any = FakeGrid(Clock(), set(), {})
    with pytest.raises(ValueError, match="timeout"):
        Link(grid, 0.0)


@dataclass
class PacedGrid(FakeGrid):
    """A grid that says how often to pull (Flower's in-memory grid: ``pull_interval``)."""

    pull_interval: float = 0.1
    pulls: list[float] = field(default_factory=list)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        self.pulls.append(self.clock.now)
        return super().pull_messages(message_ids)


def test_a_grid_with_a_pull_interval_is_pulled_as_often_as_flower_pulls_it() -> None:
    clock = Clock()
    grid = PacedGrid(clock, {11, 12}, {11: 0.25, 12: 0.55})
    outcomes = link_of(grid).exchange({n: request(n) for n in (11, 12)})
    assert set(outcomes) == {11, 12}
    gaps = [b - a for a, b in zip(grid.pulls, grid.pulls[1:], strict=False)]
    # one pull at once, then every 0.1 s (no back-off, no extra pull after a reply): 0, 0.1 … 0.6
    assert len(grid.pulls) == 7
    assert gaps == pytest.approx([0.1] * 6)
