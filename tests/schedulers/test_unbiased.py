"""Unbiasedness where it is claimed: E[Σ_{i∈S} w_i g_i] = Σ_n p_n g_n, by Monte Carlo.

Fixed client statistics (30 clients of unequal data size, 24 of them available, clustered updates,
spread losses); each scheduler selects k = 6 clients ``DRAWS`` times from the same state, and the
mean of the weighted aggregate Σ_{i∈S} w_i g_i (g: three fixed random coordinates per client) must
lie within ``BOUND`` standard errors of the population average Σ_n p_n g_n over the available
clients (p ∝ data size), coordinate by coordinate. An unbiased scheduler fails this with
probability below 3·5·6e-7 ≈ 1e-5 (normal tails); the negative controls show that the test does
see a bias of the size that unequal inclusion probabilities cause.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from adcs.schedulers import DELTA, KDPP, MD, ClientStats, ClusteredSimilarity, ClusteredSize
from adcs.schedulers.base import Selection

N, K = 30, 6
DRAWS = {
    "md": 4000,
    "clustered_size": 4000,
    "clustered_similarity": 2000,
    "delta": 4000,
    "kdpp": 4000,
}
BOUND = 5.0


def fixture_stats(seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 80, size=N).astype(float)
    available = np.ones(N, dtype=bool)
    available[rng.choice(N, size=6, replace=False)] = False
    centres = rng.normal(size=(6, 8))
    updates = np.repeat(centres, 5, axis=0) + 0.3 * rng.normal(size=(N, 8))
    losses = rng.uniform(0.5, 2.5, size=N)
    g = rng.normal(size=(N, 3)) + updates[:, :3]  # correlated with the updates, as in FL
    p = np.where(available, sizes, 0.0)
    return sizes, available, updates, losses, g, p / p.sum()


@functools.cache
def selections(name: str, seed: int = 1) -> tuple[Selection, ...]:
    """``DRAWS[name]`` selections of the named scheduler from one fixed state."""
    sizes, available, updates, losses, _, _ = fixture_stats()
    clients = np.flatnonzero(available)
    probed = ClientStats(available, clients, losses[clients], updates[clients])
    blind = ClientStats.blind(available)
    scheduler = {
        "md": MD(K),
        "clustered_size": ClusteredSize(K),
        "clustered_similarity": ClusteredSimilarity(K),
        "delta": DELTA(K),
        "kdpp": KDPP(K, theta=0.8),
    }[name]
    rng = np.random.default_rng(seed)
    state = scheduler.init(N, sizes)
    everyone = ClientStats(np.ones(N, dtype=bool), np.arange(N), losses, updates)
    _, state = scheduler.select(
        state, 0, everyone if name == "clustered_similarity" else probed, rng
    )
    if name == "delta":  # a second probe gives the local-variance estimate something to use
        noisy = updates[clients] + 0.05 * rng.normal(size=(clients.size, 8))
        _, state = scheduler.select(
            state, 1, ClientStats(available, clients, losses[clients], noisy), rng
        )
    stats = probed if name == "delta" else blind
    out: list[Selection] = []
    for _ in range(DRAWS[name]):
        selection, _ = scheduler.select(state, 2, stats, rng)  # the state is not advanced
        out.append(selection)
    return tuple(out)


def aggregate_errors(
    chosen: list[Selection], weights: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """|mean estimate − Σ p g| and its standard error, per coordinate."""
    *_, g, p = fixture_stats()
    estimates = np.array([w @ g[s.clients] for s, w in zip(chosen, weights, strict=True)])
    error = np.abs(estimates.mean(axis=0) - p @ g)
    return error, estimates.std(axis=0, ddof=1) / np.sqrt(len(chosen))


@pytest.mark.parametrize("name", DRAWS)
def test_weighted_aggregate_is_unbiased(name):
    chosen = selections(name)
    _, available, *_ = fixture_stats()
    for s in chosen:
        assert s.clients.size == K and np.unique(s.clients).size == K
        assert available[s.clients].all() and s.weights is not None
    error, se = aggregate_errors(chosen, [s.weights for s in chosen])
    assert np.all(error <= BOUND * se), (error / se).round(2).tolist()


@pytest.mark.parametrize("name", ["kdpp", "delta"])
def test_negative_control_equal_weights_are_seen_biased(name):
    # the same samples aggregated with plain 1/k weights (what ADCS or a top-m rule would do):
    # their inclusion probabilities are not ∝ p, so the average is biased, and the test sees it
    # (clustered sampling's own weights are 1/k: the clusters, not the weights, carry p)
    chosen = selections(name)
    error, se = aggregate_errors(chosen, [np.full(K, 1.0 / K) for _ in chosen])
    assert np.any(error > BOUND * se)


def test_clustered_weights_sum_to_one_and_md_weights_to_one_on_average():
    for s in selections("clustered_size")[:200]:
        assert s.weights is not None and s.weights.sum() == pytest.approx(1.0)
    totals = [s.weights.sum() for s in selections("md") if s.weights is not None]
    assert abs(np.mean(totals) - 1.0) <= BOUND * np.std(totals) / np.sqrt(len(totals))
    assert np.std(totals) > 0.01  # MD's weights carry its multiplicities: their total varies
