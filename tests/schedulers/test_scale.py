"""Schedulers at cross-device scale: no n × n array, the same picks, candidate pools."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from adcs.dpp import greedy_map_features, unit_rows
from adcs.schedulers import ADCS, OCS, DivFL, ProbeKind, StaticDPP
from adcs.schedulers import divfl as divfl_module
from adcs.schedulers._common import KERNEL_RTOL
from adcs.schedulers.divfl import (
    facility_location_blocked,
    facility_location_greedy,
    pairwise_distances,
)
from tests.schedulers.fake_runtime import gather


def _updates(kind: str, n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        return rng.normal(size=(n, dim))
    if kind == "clustered":
        centres = rng.normal(size=(7, dim)) * 3.0
        return centres[rng.integers(0, 7, size=n)] + 0.2 * rng.normal(size=(n, dim))
    # every update three times, on an integer grid so both forms compute every distance exactly
    # (duplicates at distance 0, not at float noise): exact ties everywhere
    base = rng.integers(-3, 4, size=(n // 3, dim)).astype(np.float64)
    return np.repeat(base, 3, axis=0)[rng.permutation(3 * (n // 3))]


@pytest.mark.parametrize("kind", ["gaussian", "clustered", "duplicates"])
@pytest.mark.parametrize("stochastic", [False, True])
def test_blocked_facility_location_picks_as_the_dense_form(
    kind: str, stochastic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(divfl_module, "_BLOCK_NUMBERS", 7 * 90)  # blocks of 7 columns
    updates = _updates(kind, 90, 5, seed=len(kind))
    candidates = np.random.default_rng(1).uniform(size=90) < 0.7
    sample = 12 if stochastic else None
    dense = facility_location_greedy(
        pairwise_distances(updates), 20, candidates.copy(), np.random.default_rng(3), sample
    )
    blocked = facility_location_blocked(
        updates, 20, candidates.copy(), np.random.default_rng(3), sample
    )
    assert_same_greedy(blocked, dense, updates)
    assert candidates[blocked].all() and len(set(blocked.tolist())) == 20


def assert_same_greedy(got: np.ndarray, want: np.ndarray, updates: np.ndarray) -> None:
    """``got`` picks as ``want`` does, up to a tie that rounding may break either way.

    The two forms compute the distances and the step costs Σ_k min(cover_k, D_kj) in different
    orders. In float64 a squared distance |a|² + |b|² − 2a·b is off by at most γ·4M, γ = (dim +
    2)·eps and M the largest squared norm, so a distance by at most √(4γM) (the worst case, at
    distance 0), and a sum of n terms adds n·eps·D_max. Each form judges two candidates' costs,
    so they may order candidates whose true costs differ by less than twice that, summed over
    the n rows: ``tol``. The picks must agree until a first difference; there the two picks'
    costs (from the dense distances, after the common earlier picks) must lie within ``tol``;
    after it the two runs cover different sets and are not compared.
    """
    n, dim = updates.shape
    dist = pairwise_distances(updates)
    gamma = (dim + 2) * np.finfo(np.float64).eps
    largest = float(np.einsum("ij,ij->i", updates, updates).max())
    per_row = np.sqrt(4.0 * gamma * largest) + n * np.finfo(np.float64).eps * float(dist.max())
    tol = 4.0 * n * per_row
    differ = np.flatnonzero(got != want)
    if differ.size == 0:
        return
    step = int(differ[0])
    cover = dist[:, want[:step]].min(axis=1) if step else np.full(n, np.inf)
    cost = np.minimum(cover[:, None], dist[:, [got[step], want[step]]]).sum(axis=0)
    assert abs(cost[0] - cost[1]) <= tol, (step, cost, tol)


def test_divfl_beyond_the_dense_limit_is_blockwise_with_the_same_picks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(divfl_module, "_BLOCK_NUMBERS", 1 << 16)  # blocks of 32 columns
    n, dim = 2500, 8  # 2000 available > DENSE_DISTANCES_MAX; their n² float64: 32 MB
    updates = _updates("clustered", n, dim, seed=4)
    available = np.ones(n, dtype=bool)
    available[::5] = False
    scheduler = DivFL(m=30)
    rng = np.random.default_rng(0)
    state = scheduler.init(n)
    stats = gather(scheduler, state, 0, available, updates, np.ones(n), rng)

    tracemalloc.start()
    selection, _ = scheduler.select(state, 0, stats, rng)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert peak < 2000 * 2000 * 8 / 10  # O(n · block), not O(n²)
    dense = facility_location_greedy(
        pairwise_distances(updates[available]), 30, np.ones(2000, bool)
    )
    np.testing.assert_array_equal(selection.clients, np.flatnonzero(available)[dense])


def test_adcs_and_static_dpp_on_a_large_pool_use_features_not_a_kernel() -> None:
    n, dim, m = 20_000, 24, 40
    rng = np.random.default_rng(5)
    updates = _updates("clustered", n, dim, seed=5).astype(np.float32)
    losses = rng.uniform(0.5, 2.0, size=n)
    available = np.ones(n, dtype=bool)
    adcs = ADCS(m=m, theta=0.6, refresh_every=1)
    state = adcs.init(n)
    stats = gather(adcs, state, 0, available, updates, losses, rng)

    tracemalloc.start()
    selection, state = adcs.select(state, 0, stats, rng)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert state.pool is not None and state.pool.kernel is None  # never the 3.2 GB n × n
    assert peak < 64 * n * dim + (1 << 24)  # a few copies of the features, nothing n × n
    phi = unit_rows(updates)
    norms = np.linalg.norm(phi.astype(np.float64), axis=1)
    weights = 2 * adcs.alpha * losses - 2 * np.log(norms)
    expected = greedy_map_features(phi, m, weights, rtol=KERNEL_RTOL)
    np.testing.assert_array_equal(selection.clients, expected)

    static = StaticDPP(m=m)
    s_state = static.init(n)
    s_stats = gather(static, s_state, 0, available, updates, losses, rng)
    s_sel, s_state = static.select(s_state, 0, s_stats, rng)
    assert s_state.pool is not None and s_state.pool.kernel is None
    assert len(set(s_sel.clients.tolist())) == m


@pytest.mark.parametrize("cls", [ADCS, DivFL, OCS])
def test_candidates_probe_a_uniform_pool_of_available_clients(cls: type) -> None:
    n, d = 200, 40
    scheduler = cls(m=10, candidates=d)
    state = scheduler.init(n)
    available = np.zeros(n, dtype=bool)
    available[50:] = True
    rng = np.random.default_rng(6)
    counts = np.zeros(n)
    for t in range(300):
        probe = scheduler.probe(state, t if cls is not ADCS else 0, available, rng)
        assert probe.kind is ProbeKind.UPDATES and probe.clients is not None
        clients = probe.clients
        assert clients.size == d and np.all(np.diff(clients) > 0) and available[clients].all()
        counts[clients] += 1
    # each available client is probed with probability d / 150: 80 times in 300 (sd ≈ 7.7)
    assert counts[:50].sum() == 0
    assert np.all(np.abs(counts[50:] - 300 * d / 150) < 5 * 7.7)
    few = np.zeros(n, dtype=bool)
    few[:20] = True  # fewer available than d: every available client
    assert scheduler.probe(state, 0, few, rng).targets(few).tolist() == list(range(20))


@pytest.mark.parametrize("cls", [ADCS, DivFL, OCS])
def test_candidates_select_only_among_the_pool(cls: type) -> None:
    n = 300
    rng = np.random.default_rng(7)
    updates = rng.normal(size=(n, 6))
    scheduler = cls(m=12, candidates=50)
    state = scheduler.init(n)
    available = np.ones(n, dtype=bool)
    stats = gather(scheduler, state, 0, available, updates, rng.uniform(size=n), rng)
    selection, _ = scheduler.select(state, 0, stats, rng)
    assert set(selection.clients.tolist()) <= set(stats.clients.tolist())
    assert len(set(selection.clients.tolist())) == 12
