"""Tests of adcs.dpp: greedy MAP against exhaustive search, the slogdet reference, and edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from adcs.dpp import (
    exact_map,
    greedy_map,
    greedy_map_features,
    log_det,
    naive_greedy_map,
    row_norms,
    unit_rows,
)
from adcs.dpp_sampling import (
    kdpp_eigen,
    kdpp_inclusion_probabilities,
    log_elementary_symmetric,
    sample_kdpp,
)


def weighted_logdet(kernel: np.ndarray, subset: np.ndarray, log_weights: np.ndarray) -> float:
    """Σ w + log det by slogdet, −inf unless det > 0: exact_map's own objective, to the bit."""
    sign, value = np.linalg.slogdet(kernel[np.ix_(subset, subset)])
    return float(value) + float(log_weights[subset].sum()) if sign > 0 else -math.inf


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


def test_features_of_any_finite_scale():
    rng = np.random.default_rng(6)
    features = rng.normal(size=(40, 8))
    base = greedy_map_features(features, 12)
    for scale in (1e200, 1e300, 1e-300):
        assert greedy_map_features(features * scale, 12).tolist() == base.tolist()
    as32 = (features * 1e37).astype(np.float32)  # the products would overflow float32
    assert greedy_map_features(as32, 12).tolist() == base.tolist()
    np.testing.assert_allclose(
        row_norms(features * 1e300), np.linalg.norm(features, axis=1) * 1e300
    )
    assert np.isnan(row_norms(np.array([[1.0, np.nan]])))[0]
    assert row_norms(np.array([[np.inf, 1.0]]))[0] == np.inf


def test_a_kernel_that_is_not_psd_is_refused():
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and −1
    with pytest.raises(ValueError, match="positive semi-definite: its smallest eigenvalue is -1"):
        greedy_map(indefinite, 1)
    with pytest.raises(ValueError, match="positive semi-definite"):
        exact_map(indefinite, 1)
    rng = np.random.default_rng(3)
    f = rng.normal(size=(30, 4)).astype(np.float32)
    rounded = (f @ f.T).astype(np.float64)  # rank 4, float32 rounding: PSD within tolerance
    assert greedy_map(rounded, 6).size == 6


def test_log_det_refuses_what_is_not_positive_definite():
    with pytest.raises(ValueError, match="not positive semi-definite"):
        log_det(np.array([[1.0, 2.0], [2.0, 1.0]]), [0, 1])
    singular = np.array([[1.0, 1.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="singular"):
        log_det(singular, [0, 1])
    assert log_det(singular, [0, 1], allow_singular=True) == -math.inf
    assert log_det(singular, [0]) == 0.0


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
        (lambda: greedy_map(np.eye(3), 2, [0.0, np.inf, 0.0]), r"\+inf"),
        (lambda: greedy_map(np.eye(3), 2, [0.0, np.nan, 0.0]), "log_weights contains NaN"),
        (lambda: greedy_map(np.eye(3), 2, [0.0, 1.0]), "log_weights must have shape"),
        (lambda: greedy_map_features(np.ones(3), 1), "2-D"),
        (lambda: greedy_map_features(np.array([[1.0], [np.nan]]), 1), "NaN"),
        (lambda: exact_map(np.eye(26), 2), "N > 25"),
        (lambda: log_det(np.eye(3), [0, 0]), "distinct"),
        (lambda: log_det(np.eye(3), [5]), r"\[0, 3\)"),
        # a float is not truncated to an index, nor a mask read as indices
        (lambda: log_det(np.eye(3), [0.7]), "subset must hold integer indices"),
        (lambda: log_det(np.eye(3), [True, False, True]), "subset must hold integer indices"),
        (lambda: greedy_map(np.eye(2, dtype=complex), 1), "kernel must be real"),
        (lambda: greedy_map_features(np.ones((2, 2), complex), 1), "features must be real"),
        (lambda: greedy_map_features(np.ones((3, 0)), 1), "non-empty 2-D"),
        (lambda: greedy_map(np.eye(3), 2, rtol=-1.0), "rtol must be a finite number >= 0"),
        (lambda: greedy_map(np.eye(3), 2, rtol=math.nan), "rtol must be a finite number >= 0"),
        (lambda: greedy_map(np.eye(3), 2, psd_rtol=-1.0), "psd_rtol must be a finite number"),
        (lambda: greedy_map_features(np.eye(3), 2, rtol=-1.0), "rtol must be a finite number"),
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


def logdet_rounding(kernel: np.ndarray, subset: np.ndarray, log_weights: np.ndarray) -> float:
    """A bound on the rounding of `weighted_logdet` for one subset S, |S| = m.

    slogdet factors K_S by LU, backward stable for a symmetric positive definite matrix: it gives
    log det(K_S + E) with ‖E‖₂ ≤ 2 m u ‖K_S‖₂ (u the unit roundoff), and
    |log det(K_S + E) − log det K_S| ≤ m ‖K_S⁻¹‖₂ ‖E‖₂ ≤ 2 m² κ₂(K_S) u to first order; the sum of
    the weights adds m u Σ|w_S|. Two orders of one subset differ by twice this at most, which is
    why a fixed tolerance fails where K_S is nearly singular (κ₂ ≈ 10⁷ in the example that did).
    """
    sub = kernel[np.ix_(subset, subset)]
    m = len(subset)
    u = np.finfo(np.float64).eps / 2
    return 2 * m * m * float(np.linalg.cond(sub)) * u + m * u * float(
        np.abs(log_weights[subset]).sum()
    )


@settings(max_examples=60, deadline=None)
@given(features_strategy)
def test_property_greedy_below_exact(problem):
    features, m, w = problem
    assume(m <= np.linalg.matrix_rank(features))  # otherwise every determinant is rounding noise
    kernel = features @ features.T
    subsets = [np.array(s) for s in itertools.combinations(range(len(w)), m)]
    values = [weighted_logdet(kernel, s, w) for s in subsets]
    best_at = int(np.argmax(values))
    best, best_set = values[best_at], subsets[best_at]
    if math.isinf(best):
        return
    exact = exact_map(kernel, m, w)
    tol = logdet_rounding(kernel, best_set, w) + logdet_rounding(kernel, exact, w)
    assert weighted_logdet(kernel, exact, w) == pytest.approx(best, abs=tol)
    greedy = greedy_map(kernel, m, w)
    found = weighted_logdet(kernel, greedy, w)
    assert found <= best + logdet_rounding(kernel, best_set, w) + logdet_rounding(kernel, greedy, w)


# --- k-DPP sampling and marginals: against exhaustive enumeration ------------------------------


def enumerate_kdpp(kernel: np.ndarray, k: int) -> dict[tuple[int, ...], float]:
    """P(S) = det L_S / Σ_{|T|=k} det L_T for every k-subset (the definition)."""
    dets = {
        s: max(float(np.linalg.det(kernel[np.ix_(s, s)])), 0.0)
        for s in itertools.combinations(range(kernel.shape[0]), k)
    }
    total = sum(dets.values())
    return {s: d / total for s, d in dets.items()}


def quality_diversity_kernel(rng: np.random.Generator, n: int, dim: int, alpha: float = 2.0):
    """L = Q C Q with C the cosine kernel of random updates and Q = diag(e^{αq}) (eq. 7)."""
    g = rng.normal(size=(n, dim))
    phi = g / np.linalg.norm(g, axis=1, keepdims=True)
    q = np.diag(np.exp(alpha * rng.uniform(0.5, 2.0, size=n)))
    return q @ (phi @ phi.T) @ q


def test_elementary_symmetric_polynomials_hand_worked():
    table = log_elementary_symmetric([1.0, 2.0, 3.0], 3)
    # e_1 = 6, e_2 = 1·2 + 1·3 + 2·3 = 11, e_3 = 6; prefixes too: e(1, 2) = (1, 3, 2, 0)
    np.testing.assert_allclose(np.exp(table[3]), [1.0, 6.0, 11.0, 6.0])
    np.testing.assert_allclose(np.exp(table[2]), [1.0, 3.0, 2.0, 0.0], atol=0)


@pytest.mark.parametrize(("n", "k", "dim"), [(6, 2, 6), (7, 3, 4), (8, 4, 8), (6, 5, 6)])
def test_kdpp_marginals_equal_exhaustive_enumeration(n, k, dim):
    kernel = quality_diversity_kernel(np.random.default_rng(n * 10 + k), n, dim)
    exact = np.zeros(n)
    for subset, p in enumerate_kdpp(kernel, k).items():
        exact[list(subset)] += p
    pi = kdpp_inclusion_probabilities(kernel, k)
    np.testing.assert_allclose(pi, exact, atol=1e-10)
    assert pi.sum() == pytest.approx(k, abs=1e-10)


def test_kdpp_of_a_diagonal_kernel_is_conditional_poisson_sampling():
    # L = diag(p): P(S) ∝ Π_{i∈S} p_i, so π_i = p_i e_{k−1}(p_{−i}) / e_k(p) (worked by hand)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    e2 = sum(p[i] * p[j] for i, j in itertools.combinations(range(4), 2))
    expected = [p[i] * (p.sum() - p[i]) / e2 for i in range(4)]
    np.testing.assert_allclose(kdpp_inclusion_probabilities(np.diag(p), 2), expected)


def test_kdpp_sampler_follows_the_enumerated_distribution():
    n, k, draws = 6, 3, 10_000
    kernel = quality_diversity_kernel(np.random.default_rng(5), n, 5)
    exact = enumerate_kdpp(kernel, k)
    eig = kdpp_eigen(kernel)
    rng = np.random.default_rng(6)
    counts = dict.fromkeys(exact, 0)
    for _ in range(draws):
        subset = sample_kdpp(eig, k, rng)
        assert subset.tolist() == sorted(set(subset.tolist())) and subset.size == k
        counts[tuple(subset.tolist())] += 1
    for subset, p in exact.items():  # each frequency within 5 binomial standard errors
        assert abs(counts[subset] / draws - p) <= 5 * math.sqrt(p * (1 - p) / draws) + 1e-9


def test_kdpp_empirical_inclusion_frequencies_match_the_marginals():
    n, k, draws = 40, 8, 3000
    kernel = quality_diversity_kernel(np.random.default_rng(7), n, 20, alpha=1.0)
    eig = kdpp_eigen(kernel)
    pi = kdpp_inclusion_probabilities(eig, k)
    rng = np.random.default_rng(8)
    freq = np.zeros(n)
    for _ in range(draws):
        freq[sample_kdpp(eig, k, rng)] += 1
    freq /= draws
    assert np.all(np.abs(freq - pi) <= 5 * np.sqrt(pi * (1 - pi) / draws) + 1e-9)
    assert pi.min() < 0.1 < 0.5 < pi.max()  # the kernel is far from uniform: the check has teeth


def test_kdpp_is_scale_free_in_the_log_domain():
    kernel = quality_diversity_kernel(np.random.default_rng(9), 10, 10)
    pi = kdpp_inclusion_probabilities(kernel, 4)
    huge = kernel * 1e250  # e_4 of these eigenvalues is far beyond float64
    np.testing.assert_allclose(kdpp_inclusion_probabilities(huge, 4), pi, rtol=1e-8)
    np.testing.assert_allclose(kdpp_inclusion_probabilities(kernel * 1e-250, 4), pi, rtol=1e-8)
    sample = sample_kdpp(huge, 4, np.random.default_rng(0))
    assert sample.size == 4 and np.unique(sample).size == 4


def test_kdpp_accepts_its_eigendecomposition():
    kernel = quality_diversity_kernel(np.random.default_rng(10), 9, 9)
    values, vectors = np.linalg.eigh(kernel)
    np.testing.assert_allclose(
        kdpp_inclusion_probabilities((values, vectors), 3), kdpp_inclusion_probabilities(kernel, 3)
    )
    a = sample_kdpp(kernel, 3, np.random.default_rng(1))
    b = sample_kdpp(kdpp_eigen(kernel), 3, np.random.default_rng(1))
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: kdpp_inclusion_probabilities(np.diag([1.0, 1.0, 0.0]), 3), "rank 2 < k = 3"),
        (lambda: sample_kdpp(np.eye(3), 4, np.random.default_rng(0)), "k must satisfy"),
        (lambda: sample_kdpp(np.eye(3), 0, np.random.default_rng(0)), "k must satisfy"),
        (lambda: kdpp_inclusion_probabilities(np.diag([1.0, -1.0]), 1), "positive semi-definite"),
        (lambda: kdpp_inclusion_probabilities((np.ones(2), np.eye(3)), 1), "eigendecomposition"),
        (lambda: kdpp_inclusion_probabilities(np.eye(2), 1.5), "k must be an integer"),
        # a positive diagonal, eigenvalues −1 and 3: refused as greedy_map refuses it
        (lambda: sample_kdpp(TWO_BY_TWO, 1, np.random.default_rng(0)), "semi-definite: its small"),
        (lambda: kdpp_inclusion_probabilities(TWO_BY_TWO, 1), "semi-definite: its smallest"),
        (lambda: log_elementary_symmetric([1.0, 2.0], -1), "k must be an integer >= 0"),
    ],
)
def test_kdpp_bad_input_raises_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


TWO_BY_TWO = np.array([[1.0, 2.0], [2.0, 1.0]])


def test_kdpp_sampler_names_a_missing_generator():
    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator, got NoneType"):
        sample_kdpp(np.eye(3), 2, None)  # type: ignore[arg-type]


def test_group_cosine_one_pick_per_group_per_pass_the_same_on_kernel_and_features():
    rng = np.random.default_rng(41)
    centres = np.linalg.qr(rng.normal(size=(20, 5)))[0].T
    f = centres[np.repeat(np.arange(5), 4)] + 0.1 * rng.normal(size=(20, 20))
    w = rng.normal(size=20)
    w[:4] += 8.0  # group 0 is heavy enough that the plain greedy gives it several picks
    phi = unit_rows(f).astype(np.float64)
    group = np.repeat(np.arange(5), 4)
    assert np.bincount(group[greedy_map(phi @ phi.T, 5, w)], minlength=5)[0] >= 2
    for tau in (0.5, 0.9):
        np.testing.assert_array_equal(
            greedy_map(phi @ phi.T, 8, w, group_cosine=tau),
            greedy_map_features(phi, 8, w, group_cosine=tau),
        )
    # in-group cosines are 0.8-0.9 here, cross-group ones below 0.2: τ = 0.5 finds the groups
    dense = greedy_map(phi @ phi.T, 8, w, group_cosine=0.5)
    assert np.bincount(group[dense[:5]], minlength=5).max() == 1
    assert dense[0] in range(4)  # the heavy group still goes first
    # a second pass only once every group has its pick: 8 picks of 5 groups, none thrice
    counts = np.bincount(group[dense], minlength=5)
    assert counts.min() == 1 and counts.max() == 2
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="group_cosine"):
            greedy_map_features(phi, 8, w, group_cosine=bad)
