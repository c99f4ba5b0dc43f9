"""Clustered sampling (Fraboni et al. 2021): the allocation, the distinct draw, Algorithms 1 and 2."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.schedulers import ClientStats, ClusteredSimilarity, ClusteredSize, Distance, ProbeKind
from adcs.schedulers._clustering import allocate, certain_clients, plan, sample_rows
from adcs.schedulers.clustered_similarity import refresh_representatives
from adcs.schedulers.clustered_size import size_rows


def column_sums(rows, n):
    total = np.zeros(n)
    for row in rows:
        np.add.at(total, row.clients, row.masses)
    return total


def test_algorithm_1_hand_worked_rows():
    # sizes 4, 3, 2, 1 and k = 2: masses 2p = 0.8, 0.6, 0.4, 0.2 poured in decreasing order
    p = np.array([4.0, 3.0, 2.0, 1.0]) / 10
    rows = plan(p, 2, size_rows).rows
    assert [r.clients.tolist() for r in rows] == [[0, 1], [1, 2, 3]]
    np.testing.assert_allclose(rows[0].masses, [0.8, 0.2])
    np.testing.assert_allclose(rows[1].masses, [0.4, 0.4, 0.2])


def test_a_client_worth_a_whole_row_is_taken_for_certain():
    p = np.array([10.0, 1, 1, 1, 1]) / 14
    certain, rows, rest = certain_clients(p, 2)
    assert certain.tolist() == [True, False, False, False, False]
    assert rows == 1 and rest == pytest.approx(4 / 14)
    chosen = plan(p, 2, size_rows)
    assert chosen.certain.tolist() == [0] and chosen.row_weight == pytest.approx(4 / 14)


def test_rows_add_up_to_the_shares_and_share_at_most_one_client_with_earlier_rows():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n, k = int(rng.integers(5, 40)), int(rng.integers(1, 5))
        p = rng.lognormal(0, 1, size=n)
        p /= p.sum()
        chosen = plan(p, k, size_rows)
        rest = np.setdiff1d(np.arange(n), chosen.certain)
        sums = column_sums(chosen.rows, n)
        np.testing.assert_allclose(sums[rest], len(chosen.rows) * p[rest] / p[rest].sum())
        seen: set[int] = set()
        for row in chosen.rows:
            assert row.masses.sum() == pytest.approx(1.0)
            assert len(seen & set(row.clients.tolist())) <= 1
            seen |= set(row.clients.tolist())


def test_the_draw_is_distinct_and_keeps_every_rows_marginal():
    # client 4 is poured across rows 0, 1 and 2 (row 1 has little room left) and client 5
    # across rows 2 and 3: the paper's independent draws could repeat either
    units = np.array([0.7, 0.9, 0.6, 0.6, 0.7, 0.5])
    kept = [np.array([0]), np.array([1]), np.array([2]), np.array([3])]
    rows = allocate([4, 5], units, 4, kept=kept)
    assert [r for r in range(4) if 4 in rows[r].clients] == [0, 1, 2]
    assert [r for r in range(4) if 5 in rows[r].clients] == [2, 3]
    rng = np.random.default_rng(1)
    draws = 10_000
    freq = [dict.fromkeys(r.clients.tolist(), 0) for r in rows]
    for _ in range(draws):
        picks = sample_rows(rows, rng)
        assert np.unique(picks).size == len(rows)
        for r, c in enumerate(picks):
            freq[r][int(c)] += 1
    for row, counts in zip(rows, freq, strict=True):
        for c, mass in zip(row.clients.tolist(), row.masses, strict=True):
            assert abs(counts[c] / draws - mass) <= 5 * np.sqrt(mass * (1 - mass) / draws) + 1e-9


def test_clustered_size_needs_no_probe_and_weights_sum_to_one():
    scheduler = ClusteredSize(5)
    state = scheduler.init(12, np.arange(1.0, 13.0))
    everyone = np.ones(12, dtype=bool)
    rng = np.random.default_rng(0)
    assert scheduler.probe(state, 0, everyone, rng).kind is ProbeKind.NONE
    selection, _ = scheduler.select(state, 0, ClientStats.blind(everyone), rng)
    assert selection.weights is not None and selection.weights.sum() == pytest.approx(1.0)


def grouped_representatives(rng, n_groups=6, per_group=5, dim=10, scale=None):
    centres = rng.normal(size=(n_groups, dim))
    reps = np.repeat(centres, per_group, axis=0) + 0.05 * rng.normal(
        size=(n_groups * per_group, dim)
    )
    if scale is not None:
        reps *= scale[:, None]
    return reps


@pytest.mark.parametrize("distance", list(Distance))
def test_similarity_clusters_give_one_client_of_each_group(distance):
    # 6 groups of 5 similar clients, equal sizes, k = 6: each cluster is a group and a row, so
    # every round draws exactly one client per group (clustered sampling's representativity)
    rng = np.random.default_rng(2)
    reps = grouped_representatives(rng)
    scheduler = ClusteredSimilarity(6, distance=distance)
    state = refresh_representatives(scheduler.init(30), np.arange(30), reps)
    everyone = ClientStats.blind(np.ones(30, dtype=bool))
    for _ in range(100):
        selection, _ = scheduler.select(state, 1, everyone, rng)
        assert sorted((selection.clients // 5).tolist()) == [0, 1, 2, 3, 4, 5]


def test_arccos_groups_by_direction_whatever_the_norm():
    rng = np.random.default_rng(3)
    reps = grouped_representatives(rng, scale=rng.uniform(0.1, 10.0, size=30))
    scheduler = ClusteredSimilarity(6)
    state = refresh_representatives(scheduler.init(30), np.arange(30), reps)
    selection, _ = scheduler.select(state, 1, ClientStats.blind(np.ones(30, bool)), rng)
    assert sorted((selection.clients // 5).tolist()) == [0, 1, 2, 3, 4, 5]


def test_representatives_are_probed_once_then_refreshed_by_observe():
    rng = np.random.default_rng(4)
    scheduler = ClusteredSimilarity(3)
    state = scheduler.init(10)
    mask = np.ones(10, dtype=bool)
    mask[[8, 9]] = False
    probe = scheduler.probe(state, 0, mask, rng)
    assert probe.kind is ProbeKind.UPDATES and probe.clients.tolist() == list(range(8))
    updates = rng.normal(size=(10, 4))
    stats = ClientStats(mask, np.arange(8), np.ones(8), updates[:8])
    selection, state = scheduler.select(state, 0, stats, rng)
    assert scheduler.probe(state, 1, mask, rng).kind is ProbeKind.NONE
    assert scheduler.probe(state, 1, np.ones(10, bool), rng).clients.tolist() == [8, 9]
    fresh = rng.normal(size=(3, 4))
    state = scheduler.observe(state, 0, selection.clients, fresh, None)
    assert state.representatives is not None and state.gram is not None and state.known is not None
    pos = np.searchsorted(state.known, selection.clients)
    np.testing.assert_allclose(state.representatives[pos], fresh, rtol=1e-6)
    reps = state.representatives.astype(np.float64)
    np.testing.assert_allclose(state.gram, reps @ reps.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("distance", list(Distance))
def test_similarity_clusters_a_huge_but_finite_update(distance):
    # a norm liar (x 1e30): its float32 inner products overflow, which broke the linkage
    rng = np.random.default_rng(5)
    reps = grouped_representatives(rng).astype(np.float32)
    reps[7] *= np.float32(1e30)
    scheduler = ClusteredSimilarity(6, distance=distance)
    state = refresh_representatives(scheduler.init(30), np.arange(30), reps)
    assert state.gram is not None and np.isfinite(state.gram).all()
    selection, _ = scheduler.select(state, 1, ClientStats.blind(np.ones(30, bool)), rng)
    assert selection.clients.size == 6
