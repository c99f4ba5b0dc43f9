"""k-DPP sampling on ADCS's kernel: the kernel it samples, its weights, its fallbacks."""

from __future__ import annotations

import numpy as np

from adcs.dpp import alpha_of
from adcs.dpp_sampling import kdpp_inclusion_probabilities
from adcs.schedulers import KDPP, ClientStats, ProbeKind


def full_stats(updates, losses):
    n = updates.shape[0]
    return ClientStats(np.ones(n, dtype=bool), np.arange(n), losses, updates)


def test_it_samples_the_adcs_kernel_and_weights_by_inclusion_probability():
    rng = np.random.default_rng(0)
    updates, losses = rng.normal(size=(12, 20)), rng.uniform(0.5, 2.0, size=12)
    sizes = rng.integers(1, 20, size=12).astype(float)
    theta, k = 0.6, 4
    scheduler = KDPP(k, theta=theta)
    selection, state = scheduler.select(
        scheduler.init(12, sizes), 0, full_stats(updates, losses), rng
    )
    phi = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    q = np.diag(np.exp(alpha_of(theta) * losses))
    kernel = q @ (phi @ phi.T + 1e-6 * np.eye(12)) @ q  # L = Q C Q (eq. 7), jittered
    pi = kdpp_inclusion_probabilities(kernel, k)
    assert state.cache is not None
    np.testing.assert_allclose(state.cache[3], pi, rtol=1e-6)
    p = sizes / sizes.sum()
    assert selection.weights is not None
    np.testing.assert_allclose(
        selection.weights, p[selection.clients] / pi[selection.clients], rtol=1e-6
    )


def test_probe_schedule_and_cache_follow_refreshes_and_availability():
    rng = np.random.default_rng(1)
    updates, losses = rng.normal(size=(10, 6)), rng.uniform(size=10)
    scheduler = KDPP(3, refresh_every=2)
    state = scheduler.init(10)
    everyone = np.ones(10, dtype=bool)
    assert scheduler.probe(state, 0, everyone, rng).kind is ProbeKind.UPDATES
    _, state = scheduler.select(state, 0, full_stats(updates, losses), rng)
    cached = state.cache
    assert scheduler.probe(state, 1, everyone, rng).kind is ProbeKind.NONE
    _, state = scheduler.select(state, 1, ClientStats.blind(everyone), rng)
    assert state.cache is cached  # same pool, same availability: nothing recomputed
    mask = everyone.copy()
    mask[0] = False
    selection, state = scheduler.select(state, 1, ClientStats.blind(mask), rng)
    assert 0 not in selection.clients and state.cache is not cached
    assert scheduler.probe(state, 2, everyone, rng).kind is ProbeKind.UPDATES


def test_fewer_update_directions_than_slots_and_outlying_losses_still_sample():
    rng = np.random.default_rng(2)
    updates = np.repeat(rng.normal(size=(3, 5)), 4, axis=0)  # rank 3, k = 6
    losses = rng.uniform(size=12)
    losses[0] = 1e8  # a kernel range no float64 eigendecomposition resolves
    scheduler = KDPP(6, theta=0.5)
    state = scheduler.init(12)
    for _ in range(20):
        selection, state = scheduler.select(state, 0, full_stats(updates, losses), rng)
        assert np.unique(selection.clients).size == 6
        assert selection.weights is not None and np.isfinite(selection.weights).all()
    assert state.cache is not None and abs(state.cache[3].sum() - 6) < 1e-8


def test_diversity_spreads_the_sample_over_groups():
    rng = np.random.default_rng(3)
    centres = np.eye(6)
    updates = np.repeat(centres, 5, axis=0) + 0.05 * rng.normal(size=(30, 6))
    scheduler = KDPP(6, theta=0.0, refresh_every=1000)
    state = scheduler.init(30)
    distinct_groups = []
    for t in range(200):
        stats = full_stats(updates, np.ones(30)) if t == 0 else ClientStats.blind(np.ones(30, bool))
        selection, state = scheduler.select(state, t, stats, rng)
        distinct_groups.append(np.unique(selection.clients // 5).size)
    assert np.mean(distinct_groups) > 5.5  # uniform sampling would average 4.2
