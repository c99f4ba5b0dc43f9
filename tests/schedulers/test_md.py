"""MD sampling: its draws, its exact normaliser E[D], and its weights."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from adcs.schedulers import MD, ClientStats
from adcs.schedulers.md import draw_until_distinct, expected_draws


def coupon_collector(n: int, k: int) -> float:
    """E[D] for uniform p: the j-th new item takes n/(n − j) draws on average."""
    return sum(n / (n - j) for j in range(k))


def exact_by_subsets(p: np.ndarray, k: int) -> float:
    """E[D] by the Markov chain on the set of items seen (small n only).

    From a seen set S the next new item arrives after Geometric(1 − p(S)) draws and is i ∉ S
    with probability p_i / (1 − p(S)).
    """
    n = p.size
    value: dict[frozenset[int], float] = {}
    for size in range(k, -1, -1):
        for s in map(frozenset, itertools.combinations(range(n), size)):
            if size == k:
                value[s] = 0.0
                continue
            out = 1.0 - sum(p[i] for i in s)
            value[s] = 1.0 / out + sum(p[i] / out * value[s | {i}] for i in range(n) if i not in s)
    return value[frozenset()]


@pytest.mark.parametrize(("n", "k"), [(30, 18), (1000, 18), (50, 49), (6, 6), (300, 150), (30, 1)])
def test_expected_draws_is_the_coupon_collector_value_for_uniform_p(n, k):
    assert expected_draws(np.ones(n), k) == pytest.approx(coupon_collector(n, k), rel=1e-10)


@pytest.mark.parametrize(("n", "k"), [(6, 3), (7, 5), (7, 7)])
def test_expected_draws_is_exact_for_unequal_p(n, k):
    p = np.random.default_rng(n + k).lognormal(0.0, 1.2, size=n)
    p /= p.sum()
    assert expected_draws(p, k) == pytest.approx(exact_by_subsets(p, k), rel=1e-10)


def test_expected_draws_matches_the_mean_number_of_draws():
    rng = np.random.default_rng(0)
    p = rng.lognormal(0.0, 1.5, size=200)
    p /= p.sum()
    draws = [draw_until_distinct(p, 40, rng).size for _ in range(3000)]
    assert abs(np.mean(draws) - expected_draws(p, 40)) <= 5 * np.std(draws) / math.sqrt(3000)


def test_expected_draws_ignores_zero_probabilities_and_checks_k():
    assert expected_draws(np.array([0.0, 1.0, 1.0, 0.0]), 2) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="k must satisfy"):
        expected_draws(np.array([0.0, 1.0, 1.0]), 3)


def test_weights_are_multiplicities_over_the_expected_number_of_draws():
    n, m = 30, 18
    scheduler = MD(m)
    state = scheduler.init(n)
    rng = np.random.default_rng(1)
    everyone = np.ones(n, dtype=bool)
    for _ in range(50):
        selection, state = scheduler.select(state, 0, ClientStats.blind(everyone), rng)
        assert selection.weights is not None
        counts = selection.weights * coupon_collector(n, m)
        np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)  # integer multiplicities
        assert counts.min() >= 1 and counts.sum() >= m
    assert state.normaliser is not None and state.normaliser[1:] == (
        m,
        pytest.approx(26.7533, 1e-4),
    )


def test_heavier_clients_are_drawn_more_and_the_cache_follows_availability():
    sizes = np.array([40.0, 20, 10, 10, 5, 5, 5, 5])
    scheduler = MD(3)
    state = scheduler.init(8, sizes)
    rng = np.random.default_rng(2)
    freq = np.zeros(8)
    for _ in range(3000):
        selection, state = scheduler.select(state, 0, ClientStats.blind(np.ones(8, bool)), rng)
        freq[selection.clients] += 1
    assert freq[0] > freq[1] > freq[2] > freq[4]
    mask = np.ones(8, dtype=bool)
    mask[0] = False
    before = state.normaliser
    _, state = scheduler.select(state, 1, ClientStats.blind(mask), rng)
    assert state.normaliser is not None and before is not None
    assert state.normaliser[2] == pytest.approx(expected_draws(sizes[1:], 3))
    assert state.normaliser[2] != before[2]


def test_when_all_available_clients_are_needed_they_get_their_exact_weights():
    sizes = np.array([3.0, 1.0, 0.0, 4.0, 2.0])
    scheduler = MD(4)
    state = scheduler.init(5, sizes)
    mask = np.array([True, True, True, True, False])
    selection, _ = scheduler.select(state, 0, ClientStats.blind(mask), np.random.default_rng(0))
    assert selection.clients.tolist() == [0, 1, 3, 2]  # the client without data only fills
    assert selection.weights is not None
    np.testing.assert_allclose(selection.weights, [3 / 8, 1 / 8, 4 / 8, 0.0])
