"""Tests of adcs.theory: the paper's Sec. 5 quantities against constructions and hand-worked values."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcs import theory
from adcs.dpp import exact_map, greedy_map_features


def orthonormal_rows(k: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((dim, k)))
    return q.T.copy()


def equicorrelated(k: int, mu: float, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors with every pairwise cosine equal to mu."""
    factor = np.linalg.cholesky((1 - mu) * np.eye(k) + mu)
    return factor @ orthonormal_rows(k, dim, rng)


def add_noise(
    centers: np.ndarray, z: np.ndarray, radius: float, rng: np.random.Generator
) -> np.ndarray:
    """c_{z_i} + ε_i with max ‖ε_i‖ = radius exactly."""
    noise = rng.standard_normal((z.size, centers.shape[1]))
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    scale = rng.uniform(0.2, 1.0, z.size)
    scale[0] = 1.0
    return centers[z] + radius * scale[:, None] * noise


def normalised(g: np.ndarray) -> np.ndarray:
    return g / np.linalg.norm(g, axis=1, keepdims=True)


# --- Corollary 1: the strong cluster setting ---------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n_per", "m"), [(2, 3, 1), (3, 2, 2), (4, 3, 3), (5, 2, 5), (10, 3, 5)]
)
@pytest.mark.parametrize("spread", [0.0, 1.5])
def test_corollary1_met_with_equality_by_greedy(k: int, n_per: int, m: int, spread: float) -> None:
    rng = np.random.default_rng(100 * k + m)
    centers = orthonormal_rows(k, 2 * k + 3, rng)
    z = np.repeat(np.arange(k), n_per)
    rng.shuffle(z)
    g = centers[z]
    q = spread * rng.random(z.size)
    geo = theory.cluster_geometry(g, z, q, m, theta=0.8, centers=centers)

    chosen = greedy_map_features(normalised(g), m, log_weights=geo.log_weights)

    assert geo.r == 0.0 and geo.mu < 1e-12 and geo.kappa == pytest.approx(1.0)
    assert geo.assumption_holds and geo.greedy_condition_holds
    assert np.unique(z[chosen]).size == m
    expected = math.sqrt(1 / m - 1 / k)
    assert theory.corollary1_bound(k, m) == pytest.approx(expected, abs=1e-15)
    assert theory.selection_bias(g, chosen) == pytest.approx(expected, abs=1e-12)
    assert theory.theorem1_bound(g, z, chosen, centers=centers) == pytest.approx(
        expected, abs=1e-12
    )
    # eq. 17: the general bound in this setting, and it is what eq. 15 computes from the Gram matrix
    n = z.size
    eq17 = math.sqrt((n - m) / (k * m))
    assert theory.corollary1_rayleigh_bound(n, k, m) == pytest.approx(eq17, abs=1e-15)
    assert theory.rayleigh_bound(theory.gram_matrix(g), m) == pytest.approx(eq17, rel=1e-10)


# --- eq. 15 on every subset ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 7),
    d=st.integers(1, 6),
    offset=st.floats(0.0, 5.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_eq15_holds_for_every_subset(n: int, d: int, offset: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, d)) + offset  # a common offset makes λ_max large and data skewed
    gram = theory.gram_matrix(g)
    for m in range(1, n + 1):
        bound = theory.rayleigh_bound(gram, m)
        for subset in itertools.combinations(range(n), m):
            s = np.array(subset)
            bias = theory.selection_bias(g, s)
            v = np.zeros(n)
            v[s] = 1 / m
            v -= 1 / n
            assert bias**2 == pytest.approx(v @ gram @ v, rel=1e-9, abs=1e-12)  # eq. 15's identity
            assert bias <= bound * (1 + 1e-10) + 1e-12


# --- Theorem 1 under Assumption 1 ---------------------------------------------------------------


@st.composite
def cluster_problems(draw: st.DrawFn, max_frac: float) -> dict:
    k = draw(st.integers(2, 5))
    m = draw(st.integers(2, k))
    sizes = draw(st.lists(st.integers(1, 3), min_size=k, max_size=k))
    mu = draw(st.floats(0.0, 0.6 / (m - 1)))
    spread = draw(st.floats(0.0, 2.0))
    theta = draw(st.sampled_from([0.0, 0.5, 0.8, 0.9]))
    frac = draw(st.floats(0.0, max_frac))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    z = np.repeat(np.arange(k), sizes)
    centers = equicorrelated(k, mu, 12, rng) * rng.uniform(1.0, 2.0, k)[:, None]
    q = spread * rng.random(z.size)
    r_star = theory.cluster_geometry(centers[z], z, q, m, theta=theta, centers=centers).r_star
    g = add_noise(centers, z, frac * r_star, rng)
    return {"g": g, "z": z, "q": q, "m": m, "theta": theta, "centers": centers, "frac": frac}


def selections(p: dict, geo: theory.ClusterGeometry) -> dict[str, np.ndarray]:
    feats = normalised(p["g"])
    return {
        "exact": exact_map(feats @ feats.T, p["m"], log_weights=geo.log_weights),
        "greedy": greedy_map_features(feats, p["m"], log_weights=geo.log_weights),
    }


@settings(max_examples=120, deadline=None)
@given(p=cluster_problems(max_frac=0.995))
def test_theorem1_under_assumption1(p: dict) -> None:
    geo = theory.cluster_geometry(
        p["g"], p["z"], p["q"], p["m"], theta=p["theta"], centers=p["centers"]
    )
    assert geo.assumption_holds  # r = frac·r_⋆ < r_⋆ by construction
    # Assumption 1 implies the (weaker) greedy condition derived in cluster_geometry's notes
    assert geo.greedy_condition_holds
    for name, chosen in selections(p, geo).items():
        assert np.unique(p["z"][chosen]).size == p["m"], name
        bias = theory.selection_bias(p["g"], chosen)
        assert bias <= theory.theorem1_bound(p["g"], p["z"], chosen, centers=p["centers"]) + 1e-12


@settings(max_examples=120, deadline=None)
@given(p=cluster_problems(max_frac=6.0))
def test_greedy_condition_is_sufficient_for_greedy(p: dict) -> None:
    """Beyond Assumption 1: wherever the greedy condition holds, greedy MAP takes m clusters.

    This is the observed and proved behaviour of greedy (see cluster_geometry's notes); the exact
    MAP is only guaranteed it under Assumption 1, so it is not asserted here.
    """
    geo = theory.cluster_geometry(
        p["g"], p["z"], p["q"], p["m"], theta=p["theta"], centers=p["centers"]
    )
    if geo.assumption_holds:
        assert geo.greedy_condition_holds
    if geo.greedy_condition_holds:
        chosen = greedy_map_features(normalised(p["g"]), p["m"], log_weights=geo.log_weights)
        assert np.unique(p["z"][chosen]).size == p["m"]


def test_greedy_condition_is_weaker_than_assumption1() -> None:
    # m = 2, μ = 0, equal weights: r_⋆/κ ≈ 0.106, while greedy's condition 4δ² < ρ² reads
    # 4r/κ < 1 − 2√2 r/κ, i.e. r/κ < 1/(4 + 2√2) ≈ 0.146.
    rng = np.random.default_rng(3)
    centers = orthonormal_rows(2, 6, rng)
    z = np.array([0, 0, 1, 1])
    g = add_noise(centers, z, 0.13, rng)
    geo = theory.cluster_geometry(g, z, np.zeros(4), 2, alpha=0.0, centers=centers)
    assert not geo.assumption_holds
    assert geo.greedy_condition_holds


# --- r_⋆ -------------------------------------------------------------------------------------


def test_r_star_hand_worked_m1() -> None:
    # m = 1: F(r) = w̄(1 − 2r/κ)² − 16r²w̄/κ² = 0  ⇔  1 − 2r/κ = 4r/κ  ⇔  r = κ/6
    centers = np.array([[3.0, 0.0], [0.0, 5.0]])
    z = np.array([0, 1, 1])
    geo = theory.cluster_geometry(
        centers[z], z, np.array([0.3, 1.0, 0.1]), 1, theta=0.5, centers=centers
    )
    assert geo.kappa == 3.0
    assert geo.r_star == pytest.approx(0.5, rel=1e-12)


def test_r_star_hand_worked_m2_equal_weights() -> None:
    # m = 2, μ = 0, w ≡ 1, κ = 1: (1 − 2√2 s)^4 = 16 s²  ⇔  2√2 u² + 2u − 1 = 0 with s = u²
    u = (-2 + math.sqrt(4 + 8 * math.sqrt(2))) / (4 * math.sqrt(2))
    centers = np.eye(3)
    z = np.array([0, 1, 2, 2])
    geo = theory.cluster_geometry(centers[z], z, np.zeros(4), 2, alpha=1.0, centers=centers)
    assert geo.r_star == pytest.approx(u * u, rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_r_star_is_the_root_and_the_threshold(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k, m = 4, 3
    centers = equicorrelated(k, 0.2, 10, rng) * rng.uniform(1, 3, k)[:, None]
    z = np.repeat(np.arange(k), 2)
    q = rng.random(z.size) * 3
    geo0 = theory.cluster_geometry(centers[z], z, q, m, theta=0.8, centers=centers)
    r = geo0.r_star
    rho = math.sqrt(1 - (m - 1) * geo0.mu) - 2 * r * math.sqrt(m) / geo0.kappa
    lhs = geo0.log_q_m + 2 * m * math.log(rho)
    rhs = math.log(16 * r**2 / geo0.kappa**2) + m * geo0.log_w_bar
    assert lhs == pytest.approx(rhs, abs=1e-9)
    assert 0 < r < geo0.r_rho < geo0.kappa
    below = theory.cluster_geometry(
        add_noise(centers, z, 0.999 * r, rng), z, q, m, theta=0.8, centers=centers
    )
    above = theory.cluster_geometry(
        add_noise(centers, z, 1.001 * r, rng), z, q, m, theta=0.8, centers=centers
    )
    assert below.assumption_holds and not above.assumption_holds
    assert above.eq12_holds and not above.eq13_holds


def test_huge_quality_stays_in_the_log_domain() -> None:
    centers = np.eye(3)
    z = np.array([0, 1, 2])
    q = np.array([0.0, 800.0, 1600.0])
    geo = theory.cluster_geometry(centers[z], z, q, 2, alpha=1.0, centers=centers)
    assert geo.log_q_m == pytest.approx(2 * 1600.0 + 2 * 800.0)
    assert math.isinf(geo.q_m) and math.isinf(geo.w_bar)
    # r_⋆ underflows but its log is exact: A/2 = (log(Q_m/w̄²) + log(1/2))/2, x ≈ e^{A/2}
    assert geo.r_star == 0.0 and geo.log_r_star == pytest.approx(
        0.5 * (-1600.0 + math.log(0.5)) + math.log(1 / (2 * math.sqrt(2))), abs=1e-9
    )
    assert geo.assumption_holds  # r = 0 is still below the tiny but positive r_⋆


def test_m_above_k_has_no_distinct_cluster_subset() -> None:
    centers = np.eye(2)
    z = np.array([0, 0, 1, 1])
    geo = theory.cluster_geometry(centers[z], z, np.zeros(4), 3, theta=0.0, centers=centers)
    assert geo.log_q_m == -math.inf and geo.r_star == 0.0
    assert not geo.assumption_holds and not geo.theorem1_applies and not geo.greedy_condition_holds


def test_eq12_failure() -> None:
    rng = np.random.default_rng(0)
    centers = equicorrelated(4, 0.6, 8, rng)
    z = np.arange(4)
    geo = theory.cluster_geometry(centers, z, np.zeros(4), 3, theta=0.0, centers=centers)
    assert geo.mu == pytest.approx(0.6)
    assert not geo.eq12_holds and not geo.assumption_holds
    assert math.isnan(geo.r_star) and math.isnan(geo.rho)


def test_centroids_are_the_default_representatives() -> None:
    g = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    z = np.array([0, 0, 1])
    geo = theory.cluster_geometry(g, z, np.zeros(3), 2, theta=0.0)
    np.testing.assert_allclose(geo.centers, [[2.0, 0.0], [0.0, 2.0]])
    assert geo.r == 1.0 and geo.kappa == 2.0 and geo.mu == 0.0
    assert theory.cluster_radius(g, z) == 1.0
    np.testing.assert_array_equal(geo.cluster_sizes, [2, 1])


# --- Theorem 1 bound (counts form) is an upper bound for any subset ------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_theorem1_counts_form_bounds_every_subset(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((7, 4)) * 2
    z = np.array([0, 0, 1, 1, 1, 2, 3])
    for m in range(1, 5):
        for subset in itertools.combinations(range(7), m):
            s = np.array(subset)
            assert theory.selection_bias(g, s) <= theory.theorem1_bound(g, z, s) + 1e-12


# --- Theorem 2 ---------------------------------------------------------------------------------


def test_theorem2_hand_worked() -> None:
    # η = 2·0.01 = 0.02 ≤ 1/(8·5) = 0.025.
    # 4·2/(0.02·100) = 4;  5·0.1² = 0.05;  16·5·0.02·(0.5 + 1/(4·2)) = 1.0;
    # (5/6)·25·1e-4·9·(2−1)(4−1) = 0.05625;  total 5.10625
    b = theory.theorem2_bound(
        initial_gap=2.0,
        local_lr=0.01,
        local_steps=2,
        rounds=100,
        smoothness=5.0,
        bias_bound=0.1,
        selection_variance=0.5,
        gradient_variance=1.0,
        second_moment=3.0,
        m=4,
    )
    assert b.optimization == pytest.approx(4.0)
    assert b.approximation == pytest.approx(0.05)
    assert b.variance == pytest.approx(1.0)
    assert b.drift == pytest.approx(0.05625)
    assert b.total == pytest.approx(5.10625)


THM2: dict[str, Any] = {
    "initial_gap": 1.0,
    "local_lr": 0.01,
    "local_steps": 1,
    "rounds": 10,
    "smoothness": 1.0,
    "bias_bound": 0.0,
    "selection_variance": 0.0,
    "gradient_variance": 1.0,
    "second_moment": 1.0,
    "m": 3,
}


def test_theorem2_single_local_step_has_no_drift() -> None:
    assert theory.theorem2_bound(**THM2).drift == 0.0


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("local_lr", 0.2, "eta"),  # η = 0.2 > 1/8
        ("local_steps", 13, "eta"),  # η = 0.13 > 1/8
        ("local_lr", 0.0, "local_lr"),
        ("local_lr", -0.01, "local_lr"),
        ("initial_gap", -1.0, "initial_gap"),
        ("initial_gap", math.nan, "initial_gap"),
        ("bias_bound", math.inf, "bias_bound"),
        ("smoothness", 0.0, "smoothness"),
        ("rounds", 0, "rounds"),
        ("rounds", 2.5, "rounds"),
        ("local_steps", 0, "local_steps"),
        ("m", 0, "m must"),
        ("gradient_variance", -0.1, "gradient_variance"),
        ("selection_variance", True, "selection_variance"),
    ],
)
def test_theorem2_bad_inputs_raise(key: str, value: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        theory.theorem2_bound(**{**THM2, key: value})


def test_theorem2_step_size_boundary_is_allowed() -> None:
    assert theory.theorem2_bound(**{**THM2, "local_lr": 0.125}).total > 0


# --- Uniform ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [5, 20])  # fewer and more dimensions than clients
def test_uniform_closed_form_and_exact_mean(dim: int) -> None:
    rng = np.random.default_rng(7)
    g = rng.standard_normal((8, dim)) + 1.0
    m = 3
    biases = np.array(
        [theory.selection_bias(g, np.array(s)) for s in itertools.combinations(range(8), m)]
    )
    ub = theory.expected_uniform_bias(g, m)
    assert ub.exact and ub.n_evaluated == math.comb(8, m)
    assert ub.rms**2 == pytest.approx(float((biases**2).mean()), rel=1e-12)
    assert ub.mean == pytest.approx(float(biases.mean()), rel=1e-12)
    assert ub.mean <= ub.rms
    mc = theory.expected_uniform_bias(
        g, m, rng=np.random.default_rng(0), n_draws=20_000, max_enumerate=1
    )
    assert not mc.exact
    assert abs(mc.mean - ub.mean) < 4 * mc.mean_stderr


def test_uniform_needs_rng_when_too_many_subsets() -> None:
    g = np.random.default_rng(0).standard_normal((30, 4))
    with pytest.raises(ValueError, match="rng"):
        theory.expected_uniform_bias(g, 15)


def test_uniform_all_clients_has_no_bias() -> None:
    g = np.random.default_rng(0).standard_normal((5, 3))
    ub = theory.expected_uniform_bias(g, 5)
    assert ub.rms == 0.0 and ub.mean == pytest.approx(0.0, abs=1e-12)


# --- validation --------------------------------------------------------------------------------

G3 = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
Z3 = np.array([0, 0, 1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"updates": np.array([[np.nan, 0.0], [1.0, 1.0], [0.0, 1.0]])}, "NaN"),
        ({"updates": np.zeros(3)}, "shape"),
        ({"clusters": np.array([0, 0])}, "clusters"),
        ({"clusters": np.array([0.0, 0.0, 1.0])}, "integer"),
        ({"clusters": np.array([0, 0, 2])}, "at least one client"),
        ({"clusters": np.array([0, -1, 1])}, ">= 0"),
        ({"quality": np.array([0.0, np.inf, 0.0])}, "quality"),
        ({"quality": np.zeros(2)}, "quality"),
        ({"m": 0}, "m must"),
        ({"m": 4}, "m must"),
        ({"theta": 1.0}, "theta"),
        ({"theta": None}, "exactly one"),
        ({"alpha": 1.0}, "exactly one"),
        ({"centers": np.eye(3)}, "centers"),
        ({"centers": np.eye(2)[:1]}, "n_clusters"),
    ],
)
def test_cluster_geometry_rejects_bad_input(kwargs: dict, match: str) -> None:
    args: dict[str, Any] = {
        "updates": G3,
        "clusters": Z3,
        "quality": np.zeros(3),
        "m": 2,
        "theta": 0.5,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        theory.cluster_geometry(**args)


def test_bound_functions_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="m <= K"):
        theory.theorem1_bound(G3, Z3, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="distinct"):
        theory.theorem1_bound(G3, Z3, np.array([0, 0]))
    with pytest.raises(ValueError, match="subset"):
        theory.selection_bias(G3, np.array([0, 3]))
    with pytest.raises(ValueError, match="symmetric"):
        theory.rayleigh_bound(np.array([[1.0, 0.5], [0.0, 1.0]]), 1)
    with pytest.raises(ValueError, match="m must"):
        theory.rayleigh_bound(np.eye(2), 3)
    with pytest.raises(ValueError, match="m <= K"):
        theory.corollary1_bound(3, 4)
    with pytest.raises(ValueError, match="divide"):
        theory.corollary1_rayleigh_bound(10, 3, 2)
    with pytest.raises(ValueError, match="theta"):
        theory.alpha_from_theta(-0.1)
