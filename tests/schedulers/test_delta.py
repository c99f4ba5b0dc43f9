"""DELTA: scores from gradient diversity and local variance, Horvitz–Thompson weights."""

from __future__ import annotations

import numpy as np

from adcs.schedulers import DELTA, ClientStats, ProbeKind
from adcs.schedulers.delta import delta_scores
from adcs.schedulers.ocs import ocs_inclusion_probabilities


def test_scores_hand_worked():
    p = np.array([0.5, 0.25, 0.25])
    updates = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])  # mean (0.5, 1)
    variance = np.array([1.0, 0.0, 3.0])
    zeta2 = np.array([0.25 + 1.0, 2.25 + 1.0, 0.25 + 9.0])
    expected = p * np.sqrt(2.0 * zeta2 + 0.5 * variance)
    np.testing.assert_allclose(delta_scores(p, updates, variance, 2.0, 0.5), expected)


def probed(updates, available=None):
    n = updates.shape[0]
    mask = np.ones(n, dtype=bool) if available is None else available
    clients = np.flatnonzero(mask)
    return ClientStats(mask, clients, np.ones(clients.size), updates[clients])


def test_variance_is_estimated_from_consecutive_probes_only():
    rng = np.random.default_rng(0)
    scheduler = DELTA(3, variance_decay=0.5)
    state = scheduler.init(6)
    assert scheduler.probe(state, 0, np.ones(6, bool), rng).kind is ProbeKind.UPDATES
    a, b, c = (rng.normal(size=(6, 4)) for _ in range(3))
    _, state = scheduler.select(state, 0, probed(a), rng)
    assert state.variance is not None and np.isnan(state.variance).all()
    _, state = scheduler.select(state, 1, probed(b), rng)
    first = 0.5 * ((b - a) ** 2).sum(axis=1)
    np.testing.assert_allclose(state.variance, first, rtol=1e-6)
    _, state = scheduler.select(state, 2, probed(c), rng)
    np.testing.assert_allclose(
        state.variance, 0.5 * first + 0.25 * ((c - b) ** 2).sum(1), rtol=1e-6
    )
    _, later = scheduler.select(state, 4, probed(a), rng)  # round 3 skipped: no new sample
    np.testing.assert_array_equal(later.variance, state.variance)


def test_weights_are_data_weight_over_inclusion_probability():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 30, size=10).astype(float)
    updates = rng.normal(size=(10, 5)) * rng.uniform(0.1, 3, size=(10, 1))
    scheduler = DELTA(4, beta=0.0)
    state = scheduler.init(10, sizes)
    selection, _ = scheduler.select(state, 0, probed(updates), rng)
    p = sizes / sizes.sum()
    pi = ocs_inclusion_probabilities(delta_scores(p, updates, np.zeros(10), 1.0, 0.0), 4)
    assert selection.weights is not None
    np.testing.assert_allclose(selection.weights, p[selection.clients] / pi[selection.clients])


def test_diverse_clients_are_sampled_more():
    rng = np.random.default_rng(2)
    updates = np.ones((20, 3)) + 0.01 * rng.normal(size=(20, 3))
    updates[:4] += np.array([5.0, -5.0, 0.0])  # four outliers carry the diversity
    scheduler = DELTA(4, beta=0.0)
    state = scheduler.init(20)
    counts = np.zeros(20)
    for _ in range(300):
        selection, _ = scheduler.select(state, 0, probed(updates), rng)
        counts[selection.clients] += 1
    assert counts[:4].min() > 2 * counts[4:].max()


def test_failed_probes_keep_a_positive_inclusion_probability():
    rng = np.random.default_rng(3)
    updates = rng.normal(size=(8, 3))
    updates[2] = np.nan
    scheduler = DELTA(3)
    state = scheduler.init(8)
    seen = np.zeros(8)
    for _ in range(400):
        selection, _ = scheduler.select(state, 0, probed(updates), rng)
        seen[selection.clients] += 1
        assert selection.weights is not None and np.isfinite(selection.weights).all()
    assert seen[2] > 0
