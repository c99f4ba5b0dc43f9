"""Screens judge fresh evidence, and a screened client has a way back (``Defence.stale_after``)."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.adversary import Defence, Received, screen
from adcs.schedulers.base import ClientStats
from tests.adversary.conftest import DIM, N, grouped_stats

ODD = 4  # the client whose received update has no peer


def memory_with_an_odd_update(at: int) -> tuple[ClientStats, Received]:
    """Honest grouped reports, and a memory whose update of client ODD (received at round ``at``)
    is orthogonal to every group (the others received at the same round)."""
    stats = grouped_stats()
    sent = np.array(stats.updates, dtype=np.float64)
    rng = np.random.default_rng(7)
    odd = rng.normal(size=DIM)
    basis, _ = np.linalg.qr(np.delete(sent, ODD, axis=0).T)
    odd -= basis @ (basis.T @ odd)  # no part along any other client's update
    sent[ODD] = odd
    received = Received.empty(N).updated(at, stats.clients, sent.astype(np.float32))
    return stats, received


def loss_probe(stats: ClientStats) -> ClientStats:
    return ClientStats(stats.available, stats.clients, stats.losses, None)


@pytest.mark.parametrize("now", [3, 5])
def test_fresh_received_evidence_is_judged(now):
    stats, received = memory_with_an_odd_update(at=0)
    seen = screen(Defence(plausibility=0.5, stale_after=5), received, loss_probe(stats), now)
    np.testing.assert_array_equal(np.flatnonzero(seen.dropped), [ODD])


def test_stale_received_evidence_is_not_judged_the_way_back():
    stats, received = memory_with_an_odd_update(at=0)
    probe = loss_probe(stats)
    # six rounds after its last receipt the verdict has lapsed: the client may be selected again
    seen = screen(Defence(plausibility=0.5, stale_after=5), received, probe, 6)
    assert not seen.dropped.any() and np.isfinite(seen.stats.losses).all()
    # without stale_after the verdict on round 0's update stands for good (the lock-out)
    for now in (6, 1000):
        old = screen(Defence(plausibility=0.5), received, probe, now)
        np.testing.assert_array_equal(np.flatnonzero(old.dropped), [ODD])
    # received afresh (it was selected and sent an update with a peer), it is judged again
    again = received.updated(7, np.array([ODD]), np.asarray(stats.updates)[[ODD]])
    assert not screen(Defence(plausibility=0.5, stale_after=5), again, probe, 8).dropped.any()


def test_a_stale_received_direction_is_judged_on_this_rounds_report():
    stats, received = memory_with_an_odd_update(at=0)
    defence = Defence(received=True, plausibility=0.5, stale_after=5)
    # an update probe: the report of ODD is its group's; its received update is the odd one
    fresh = screen(defence, received, stats, 2)  # the received update is fresh: it decides
    np.testing.assert_array_equal(np.flatnonzero(fresh.dropped), [ODD])
    stale = screen(defence, received, stats, 9)  # stale: this round's report decides
    assert not stale.dropped.any()
    reports = np.array(stats.updates)
    reports[ODD] = np.asarray(received.rows[ODD]) * 3.0  # and a report without a peer fails
    odd = ClientStats(stats.available, stats.clients, stats.losses, reports)
    np.testing.assert_array_equal(np.flatnonzero(screen(defence, received, odd, 9).dropped), [ODD])


def test_stale_after_is_validated():
    with pytest.raises(ValueError, match="stale_after"):
        Defence(stale_after=-1)
