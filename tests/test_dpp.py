"""Tests of adcs.dpp: greedy MAP against exhaustive search, the slogdet reference, and edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from adcs.dpp import exact_map, greedy_map, greedy_map_features, log_det, naive_greedy_map


def weighted_logdet(kernel: np.ndarray, subset: np.ndarray, log_weights: np.ndarray) -> float:
    return log_det(kernel, subset) + float(log_weights[subset].sum())


def random_problem(rng: np.random.Generator, n: int, k: int, weighted: bool):
    features = rng.normal(size=(n, k))
    log_weights = rng.normal(scale=2.0, size=n) if weighted else np.zeros(n)
    return features, features @ features.T, log_weights


# --- known values worked by hand -------------------------------------------------------------


def test_hand_worked_two_by_two():
    kernel = np.array([[2.0, 1.0], [1.0, 1.0]])
    assert greedy_map(kernel, 1).tolist() == [0]  # largest diagonal first
    assert log_det(kernel, [0, 1]) == pytest.approx(math.log(2 * 1 - 1 * 1))
    assert sorted(greedy_map(kernel, 2).tolist()) == [0, 1]


def test_duplicate_is_skipped_for_an_orthogonal_item():
    # items 0 and 1 are identical, item 2 is orthogonal but lighter: the second pick must be 2
    features = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 0.5]])
    assert greedy_map_features(features, 2).tolist() == [0, 2]
    assert greedy_map(features @ features.T, 2).tolist() == [0, 2]


def test_exact_map_hand_example():
    # det of {0,1} = 1*4 - 1.9^2 = 0.39; {0,2} = 1*1 = 1; {1,2} = 4*1 = 4 -> {1, 2}
    kernel = np.array([[1.0, 1.9, 0.0], [1.9, 4.0, 0.0], [0.0, 0.0, 1.0]])
    assert exact_map(kernel, 2).tolist() == [1, 2]


# --- greedy against exhaustive search and the slogdet reference ------------------------------


@pytest.mark.parametrize("weighted", [False, True])
def test_greedy_never_beats_exact_optimum(weighted):
    rng = np.random.default_rng(0)
    equal = 0
    for _ in range(150):
        n = int(rng.integers(3, 10))
        k = int(rng.integers(1, 10))
        m = int(rng.integers(1, n + 1))
        _, kernel, w = random_problem(rng, n, k, weighted)
        greedy = greedy_map(kernel, m, w)
        exact = exact_map(kernel, m, w)
        assert len(set(greedy.tolist())) == m
        g_val, e_val = weighted_logdet(kernel, greedy, w), weighted_logdet(kernel, exact, w)
        if m > k:
            continue  # rank below m: every subset is singular, determinants are rounding noise
        assert g_val <= e_val + 1e-9
        equal += math.isclose(g_val, e_val, rel_tol=1e-9, abs_tol=1e-9)
    assert equal > 0  # greedy often finds the optimum on small problems


@pytest.mark.parametrize("weighted", [False, True])
def test_dense_features_and_naive_agree(weighted):
    rng = np.random.default_rng(1)
    for _ in range(60):
        n = int(rng.integers(2, 25))
        k = int(rng.integers(1, 30))
        m = int(rng.integers(1, n + 1))
        features, kernel, w = random_problem(rng, n, k, weighted)
        dense = greedy_map(kernel, m, w)
        feat = greedy_map_features(features, m, w)
        naive = naive_greedy_map(kernel, m, w)
        assert dense.tolist() == feat.tolist()
        assert dense.tolist() == naive.tolist()


def test_float32_features_match_float64_on_well_separated_items():
    rng = np.random.default_rng(2)
    features = rng.normal(size=(500, 64))
    w = rng.normal(size=500)
    a = greedy_map_features(features, 40, w)
    b = greedy_map_features(features.astype(np.float32), 40, w)
    assert a.tolist() == b.tolist()


# --- rank deficiency, duplicates, weights, zeros, NaN ----------------------------------------


def test_duplicate_groups_cover_every_group_first():
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(10, 50))
    updates = np.repeat(centres, 3, axis=0)  # 10 groups x 3 identical clients
    groups = np.repeat(np.arange(10), 3)
    for picks in (greedy_map_features(updates, 18), greedy_map(updates @ updates.T, 18)):
        assert len(set(picks.tolist())) == 18
        assert sorted(groups[picks[:10]].tolist()) == list(range(10))
        assert ((picks >= 0) & (picks < 30)).all()


def test_rank_deficient_kernel_returns_m_distinct_by_weight():
    rng = np.random.default_rng(4)
    features = rng.normal(size=(12, 3))  # rank 3 < m
    w = np.arange(12, dtype=float)
    picks = greedy_map_features(features, 8, w)
    assert len(set(picks.tolist())) == 8
    # after the 3 independent picks, the rest are the heaviest remaining items
    rest = [i for i in range(12) if i not in picks[:3]]
    expected = sorted(rest, key=lambda i: (-(w[i] + 2 * np.log(np.linalg.norm(features[i]))), i))
    assert picks[3:].tolist() == expected[:5]


def test_huge_weights_do_not_overflow_and_follow_quality():
    theta = 0.999999
    alpha = theta / (2 * (1 - theta))
    rng = np.random.default_rng(5)
    quality = 10.0 + rng.normal(scale=0.01, size=30)
    features = np.eye(30)  # diversity ties: every subset has det C_S = 1
    picks = greedy_map_features(features, 18, 2 * alpha * quality)
    assert picks.tolist() == np.argsort(-quality, kind="stable")[:18].tolist()
    assert greedy_map(features, 18, 2 * alpha * quality).tolist() == picks.tolist()


def test_scale_free():
    rng = np.random.default_rng(6)
    features = rng.normal(size=(40, 8))
    base = greedy_map_features(features, 12)
    assert greedy_map_features(features * 1e150, 12).tolist() == base.tolist()
    assert greedy_map_features(features * 1e-150, 12).tolist() == base.tolist()
    kernel = features @ features.T
    assert greedy_map(kernel * 1e-200, 12).tolist() == base.tolist()


def test_zero_rows_are_picked_last_and_never_duplicated():
    features = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    picks = greedy_map_features(features, 4)
    assert picks.tolist() == [1, 3, 0, 2]
    kernel = features @ features.T
    assert greedy_map(kernel, 4).tolist() == [1, 3, 0, 2]


def test_ties_go_to_lowest_index():
    assert greedy_map_features(np.eye(5), 3).tolist() == [0, 1, 2]
    assert greedy_map(np.eye(5), 5).tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: greedy_map(np.eye(3), 0), "m must satisfy"),
        (lambda: greedy_map(np.eye(3), 4), "m must satisfy"),
        (lambda: greedy_map(np.eye(3), 1.5), "m must be an integer"),
        (lambda: greedy_map(np.ones((2, 3)), 1), "square"),
        (lambda: greedy_map(np.array([[1.0, np.nan], [np.nan, 1.0]]), 1), "NaN"),
        (lambda: greedy_map(np.array([[1.0, 2.0], [0.0, 1.0]]), 1), "symmetric"),
        (lambda: greedy_map(-np.eye(2), 1), "negative diagonal"),
        (lambda: greedy_map(np.eye(3), 2, [0.0, np.inf, 0.0]), "log_weights"),
        (lambda: greedy_map(np.eye(3), 2, [0.0, 1.0]), "log_weights must have shape"),
        (lambda: greedy_map_features(np.ones(3), 1), "2-D"),
        (lambda: greedy_map_features(np.array([[1.0], [np.nan]]), 1), "NaN"),
        (lambda: exact_map(np.eye(26), 2), "N > 25"),
        (lambda: log_det(np.eye(3), [0, 0]), "distinct"),
        (lambda: log_det(np.eye(3), [5]), r"\[0, 3\)"),
    ],
)
def test_bad_input_raises_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_inputs_are_not_modified():
    rng = np.random.default_rng(7)
    features = rng.normal(size=(20, 5))
    w = rng.normal(size=20)
    f0, w0 = features.copy(), w.copy()
    greedy_map_features(features, 7, w)
    kernel = features @ features.T
    k0 = kernel.copy()
    greedy_map(kernel, 7, w)
    exact_map(kernel[:10, :10], 3)
    np.testing.assert_array_equal(features, f0)
    np.testing.assert_array_equal(w, w0)
    np.testing.assert_array_equal(kernel, k0)


# --- Corollary 1 (strong cluster setting) ----------------------------------------------------


@pytest.mark.parametrize(("n_clusters", "per_cluster", "m"), [(10, 3, 10), (10, 3, 6), (8, 4, 3)])
def test_corollary_1_distinct_clusters_and_exact_bias(n_clusters, per_cluster, m):
    rng = np.random.default_rng(8)
    centres = np.linalg.qr(rng.normal(size=(40, n_clusters)))[0].T  # orthonormal rows
    updates = np.repeat(centres, per_cluster, axis=0)
    labels = np.repeat(np.arange(n_clusters), per_cluster)
    quality = rng.uniform(0.0, 1.0, size=updates.shape[0])
    picks = greedy_map_features(updates, m, 2 * 2.0 * quality)
    assert len(set(labels[picks].tolist())) == m
    bias = np.linalg.norm(updates[picks].mean(axis=0) - updates.mean(axis=0))
    assert bias == pytest.approx(math.sqrt(1 / m - 1 / n_clusters), rel=1e-12)


# --- properties ------------------------------------------------------------------------------


features_strategy = st.integers(2, 12).flatmap(
    lambda n: st.tuples(
        hnp.arrays(
            np.float64,
            st.tuples(st.just(n), st.integers(1, 6)),
            elements=st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e-3]),
        ),
        st.integers(1, n),
        hnp.arrays(np.float64, (n,), elements=st.floats(-50, 50)),
    )
)


@settings(max_examples=150, deadline=None)
@given(features_strategy)
def test_property_m_distinct_valid_and_paths_agree(problem):
    features, m, w = problem
    n = features.shape[0]
    feat = greedy_map_features(features, m, w)
    dense = greedy_map(features @ features.T, m, w)
    for picks in (feat, dense):
        assert picks.dtype == np.intp
        assert picks.shape == (m,)
        assert len(set(picks.tolist())) == m
        assert ((picks >= 0) & (picks < n)).all()
    assert set(feat.tolist()) == set(dense.tolist()) or np.isclose(
        weighted_logdet(features @ features.T, feat, w),
        weighted_logdet(features @ features.T, dense, w),
    )


@settings(max_examples=100, deadline=None)
@given(features_strategy)
def test_property_greedy_is_a_prefix_chain(problem):
    features, m, w = problem
    n = features.shape[0]
    full = greedy_map_features(features, n, w)
    assert greedy_map_features(features, m, w).tolist() == full[:m].tolist()


@settings(max_examples=60, deadline=None)
@given(features_strategy)
def test_property_greedy_below_exact(problem):
    features, m, w = problem
    assume(m <= np.linalg.matrix_rank(features))  # otherwise every determinant is rounding noise
    kernel = features @ features.T
    best = max(
        weighted_logdet(kernel, np.array(s), w) for s in itertools.combinations(range(len(w)), m)
    )
    exact = exact_map(kernel, m, w)
    assert weighted_logdet(kernel, exact, w) == pytest.approx(best, abs=1e-9) or math.isinf(best)
    greedy = greedy_map(kernel, m, w)
    assert weighted_logdet(kernel, greedy, w) <= best + 1e-9
