"""Reports outside their domain are refused at the protocol (`adcs.adversary.domain`)."""

from __future__ import annotations

import numpy as np

from adcs.adversary import Defence, screen
from adcs.adversary.domain import refuse
from adcs.schedulers.base import ClientStats
from tests.adversary.conftest import N, grouped_stats


def with_losses(stats: ClientStats, losses: np.ndarray) -> ClientStats:
    return ClientStats(stats.available, stats.clients, losses, stats.updates)


def test_out_of_domain_reports_are_refused_whole():
    stats = grouped_stats()
    losses = np.array(stats.losses, dtype=np.float64)
    updates = np.array(stats.updates)
    losses[0], losses[1], losses[2] = -1000.0, np.inf, -1e-12  # negative, infinite, just below 0
    updates[3, 5] = np.inf  # a non-finite entry
    updates[4] = 0.0  # no direction, no norm
    losses[5] = np.nan  # a failed probe: no report, not a refused one
    out, refused = refuse(ClientStats(stats.available, stats.clients, losses, updates))
    np.testing.assert_array_equal(np.flatnonzero(refused), [0, 1, 2, 3, 4])
    assert np.isnan(out.losses[:6]).all() and np.isnan(out.updates[:5]).all()
    assert np.isfinite(out.updates[5]).all()  # the failed probe keeps its update
    np.testing.assert_array_equal(out.losses[6:], losses[6:])
    np.testing.assert_array_equal(out.updates[6:], updates[6:])
    assert not out.usable()[:6].any()  # every scheduler treats them as no report


def test_an_honest_round_passes_unrefused_and_uncopied():
    stats = grouped_stats()
    out, refused = refuse(stats)
    assert out is stats and not refused.any()
    losses = np.array(stats.losses)
    losses[0] = 0.0  # a loss of exactly 0 is in the domain
    assert not refuse(with_losses(stats, losses))[1].any()


def test_a_negative_loss_cannot_pull_down_its_neighbourhood():
    # clients 0-2 are one group; 1 and 2 report -1000 (the red team's smother): without the
    # refusal client 0's corroborated loss is median(own, -1000, -1000) = -1000; refused, they
    # are no report, and every corroborated loss is a median of honest losses
    stats = grouped_stats()
    losses = np.array(stats.losses, dtype=np.float64)
    losses[1:3] = -1000.0
    seen = screen(Defence(corroborate=True, peers=2), None, with_losses(stats, losses))
    assert seen.refused is not None
    np.testing.assert_array_equal(np.flatnonzero(seen.refused), [1, 2])
    assert np.isnan(seen.stats.losses[1:3]).all()
    honest = np.delete(np.asarray(stats.losses), [1, 2])
    kept = np.delete(seen.stats.losses, [1, 2])
    assert kept.shape == (N - 2,)
    assert (kept >= honest.min()).all() and (kept <= honest.max()).all()
