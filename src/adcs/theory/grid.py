"""The theory check's synthetic cases: cluster structures with known geometry, one case measured.

Each case (`CaseSpec`) places client updates around equicorrelated cluster centres, then
compares the bias of greedy MAP, exact MAP (N ≤ `EXACT_MAX_N`) and top-quality selection
with the paper's bounds (Theorem 1, eq. 14–15) and with uniform sampling; the check itself, its
real-data section and its report are in `adcs.theory.check`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs import theory
from adcs.dpp import exact_map, greedy_map_features

__all__ = [
    "DIM",
    "EXACT_MAX_N",
    "METHODS",
    "THETA",
    "CaseSpec",
    "clustered_updates",
    "equicorrelated_centers",
    "evaluate_selection",
    "run_case",
    "synthetic_grid",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

THETA = 0.8
"""θ of the paper's experiment (Sec. 6.1), so α = 2 and w_i = e^{4 q_i}."""

EXACT_MAX_N = 16
"""Exact MAP (exhaustive) is run only for N ≤ this."""

DIM = 32
"""Ambient dimension of the synthetic updates."""

METHODS = ("greedy", "exact", "quality")
"""Deterministic selections measured per case (Uniform is reported by its expectation)."""


@dataclass(frozen=True)
class CaseSpec:
    """One synthetic cluster structure of the grid.

    Attributes
    ----------
    cluster_sizes : tuple of int
        n_k for k = 0..K−1, each ≥ 1.
    m : int
        Clients selected, 1 ≤ m ≤ K.
    mu : float
        Pairwise cosine of the cluster centres, in [0, 1) (eq. 11 then equals it).
    r_ratio : float
        Cluster radius r (eq. 10) as a multiple of r_⋆ of the noiseless structure (≥ 0); when
        r_⋆ is undefined (eq. 12 fails) the reference radius is 0.05 κ instead.
    quality_spread : float
        q_i ~ quality_spread · U(0, 1), ≥ 0.
    norm_spread : float
        ‖c_k‖ ~ U(1, 1 + norm_spread), rescaled so that κ = 1; ≥ 0.
    replicate : int
        Index of the random draw, ≥ 0.
    """

    cluster_sizes: tuple[int, ...]
    m: int
    mu: float
    r_ratio: float
    quality_spread: float
    norm_spread: float = 0.5
    replicate: int = 0

    def __post_init__(self) -> None:
        if not self.cluster_sizes or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.cluster_sizes
        ):
            raise ValueError(
                f"cluster_sizes must be a non-empty tuple of ints >= 1, got {self.cluster_sizes}"
            )
        if isinstance(self.m, bool) or not isinstance(self.m, int):
            raise ValueError(f"m must be an integer, got {self.m!r}")
        if not 1 <= self.m <= len(self.cluster_sizes):
            raise ValueError(f"m must be in [1, K={len(self.cluster_sizes)}], got {self.m}")
        if not 0.0 <= self.mu < 1.0:
            raise ValueError(f"mu must be in [0, 1), got {self.mu}")
        for name in ("r_ratio", "quality_spread", "norm_spread"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {v}")
        if isinstance(self.replicate, bool) or self.replicate < 0:
            raise ValueError(f"replicate must be an integer >= 0, got {self.replicate!r}")

    @property
    def n_clusters(self) -> int:
        return len(self.cluster_sizes)

    @property
    def n_clients(self) -> int:
        return sum(self.cluster_sizes)


def _size_patterns(k: int, quick: bool) -> list[tuple[int, ...]]:
    """Cluster sizes tried for K = k: balanced (2 per cluster, small enough for the exact MAP),
    and in the full grid also balanced with 5 per cluster and imbalanced (1, 2, 4, 1, 2, 4, ...)."""
    if quick:
        return [(2,) * k]
    return [(2,) * k, (5,) * k, tuple((1, 2, 4)[i % 3] for i in range(k))]


def synthetic_grid(quick: bool) -> list[CaseSpec]:
    """The grid of synthetic cases: small for ``quick`` (seconds), larger otherwise (about a minute).

    Quick: (K, m) in {(3, 2), (3, 3), (4, 2), (4, 3)}, r/r_⋆ in {0, 0.5, 2, 16}, μ in {0, 0.3},
    quality spread in {0, 1}: 64 cases. Full: K in {3, 5, 8} with m in {2, 3, 5, 8} ≤ K, three
    size patterns, ten radii from 0 to 256 r_⋆, μ in {0, 0.15, 0.4}, spread in {0, 0.5, 2}, two
    replicates: 4860 cases.
    """
    if quick:
        km = [(3, 2), (3, 3), (4, 2), (4, 3)]
        ratios = [0.0, 0.5, 2.0, 16.0]
        mus, spreads, reps = [0.0, 0.3], [0.0, 1.0], 1
    else:
        km = [(3, 2), (3, 3), (5, 2), (5, 3), (5, 5), (8, 2), (8, 3), (8, 5), (8, 8)]
        ratios = [0.0, 0.25, 0.5, 0.9, 1.1, 2.0, 4.0, 16.0, 64.0, 256.0]
        mus, spreads, reps = [0.0, 0.15, 0.4], [0.0, 0.5, 2.0], 2
    return [
        CaseSpec(sizes, m, mu, ratio, spread, replicate=rep)
        for k, m in km
        for sizes in _size_patterns(k, quick)
        for mu in mus
        for spread in spreads
        for ratio in ratios
        for rep in range(reps)
    ]


def equicorrelated_centers(
    n_clusters: int, mu: float, dim: int, rng: np.random.Generator, norm_spread: float = 0.0
) -> FloatArray:
    """Cluster centres c_k with every pairwise cosine equal to ``mu`` and min norm κ = 1.

    Parameters
    ----------
    n_clusters : int
        K, with K ≤ dim.
    mu : float
        Pairwise cosine in [0, 1).
    dim : int
        Ambient dimension.
    rng : numpy.random.Generator
        Draws a random orthonormal embedding and the norms.
    norm_spread : float
        Norms ~ U(1, 1 + norm_spread), rescaled so the smallest is 1.

    Returns
    -------
    ndarray of shape (n_clusters, dim)
    """
    if not 1 <= n_clusters <= dim:
        raise ValueError(f"n_clusters must be in [1, dim={dim}], got {n_clusters}")
    if not 0.0 <= mu < 1.0:
        raise ValueError(f"mu must be in [0, 1), got {mu}")
    gram = (1.0 - mu) * np.eye(n_clusters) + mu
    factor = np.linalg.cholesky(gram)  # rows have the wanted inner products
    basis, _ = np.linalg.qr(rng.standard_normal((dim, n_clusters)))
    norms = 1.0 + norm_spread * rng.random(n_clusters)
    return np.asarray((factor @ basis.T) * (norms / norms.min())[:, None], dtype=np.float64)


def clustered_updates(
    centers: FloatArray, clusters: IntArray, radius: float, rng: np.random.Generator
) -> FloatArray:
    """Updates g_i = c_{z_i} + ε_i with max_i ‖ε_i‖ = ``radius`` exactly (eq. 10).

    Noise directions are uniform on the sphere, norms ~ radius · U(0.25, 1), the largest set to
    ``radius``. Returns an ndarray of shape (n_clients, dim).
    """
    n, d = clusters.shape[0], centers.shape[1]
    noise = rng.standard_normal((n, d))
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    scale = np.asarray(rng.uniform(0.25, 1.0, size=n), dtype=np.float64)
    scale[int(np.argmax(scale))] = 1.0
    return np.asarray(centers[clusters] + radius * scale[:, None] * noise, dtype=np.float64)


def _normalised(updates: FloatArray) -> FloatArray:
    norms = np.linalg.norm(updates, axis=1, keepdims=True)
    return np.asarray(updates / np.where(norms > 0, norms, 1.0), dtype=np.float64)


def _top_quality(quality: FloatArray, m: int) -> IntArray:
    order = np.lexsort((np.arange(quality.size), -quality))  # ties to the lowest index
    return order[:m].astype(np.intp)


def evaluate_selection(
    updates: FloatArray,
    clusters: IntArray,
    quality: FloatArray,
    m: int,
    *,
    theta: float,
    rng: np.random.Generator,
    centers: FloatArray | None = None,
    exact_max_n: int = EXACT_MAX_N,
) -> dict[str, Any]:
    """Geometry, bounds and each method's measured bias for one set of updates.

    Parameters
    ----------
    updates : ndarray of shape (n_clients, dim)
    clusters : ndarray of int, shape (n_clients,)
    quality : ndarray of shape (n_clients,)
    m : int
    theta : float
        θ of ADCS (eq. 6), in [0, 1).
    rng : numpy.random.Generator
        For the Monte Carlo estimate of Uniform's expected bias when C(N, m) is large.
    centers : ndarray of shape (n_clusters, dim), optional
        Representatives c_k (centroids by default).
    exact_max_n : int
        Run the exact MAP only when N is at most this.

    Returns
    -------
    dict
        Flat record: geometry (r, mu, kappa, r_star, ...), ``eq15``, and for each method in
        `METHODS` its ``*_bias``, ``*_distinct`` (number of distinct clusters taken) and
        ``*_eq14`` (eq. 14 for its set; NaN if m > K); ``uniform_mean``/``uniform_rms``.
    """
    geo = theory.cluster_geometry(updates, clusters, quality, m, theta=theta, centers=centers)
    n, k = geo.n_clients, geo.n_clusters
    feats = _normalised(updates)
    subsets: dict[str, IntArray | None] = {
        "greedy": greedy_map_features(feats, m, log_weights=geo.log_weights),
        "exact": (
            exact_map(feats @ feats.T, m, log_weights=geo.log_weights) if n <= exact_max_n else None
        ),
        "quality": _top_quality(np.asarray(quality, dtype=np.float64), m),
    }
    uni = theory.expected_uniform_bias(updates, m, rng=rng, n_draws=2000)
    rec: dict[str, Any] = {
        "n_clients": n,
        "n_clusters": k,
        "m": m,
        "r": geo.r,
        "mu": geo.mu,
        "kappa": geo.kappa,
        "r_star": geo.r_star,
        "r_rho": geo.r_rho,
        "rho": geo.rho,
        "log_q_m": geo.log_q_m,
        "log_w_bar": geo.log_w_bar,
        "eq12": geo.eq12_holds,
        "eq13": geo.eq13_holds,
        "assumption": geo.assumption_holds,
        "greedy_condition": geo.greedy_condition_holds,
        "eq15": theory.rayleigh_bound(theory.gram_matrix(updates), m),
        "uniform_mean": uni.mean,
        "uniform_rms": uni.rms,
        "uniform_exact": uni.exact,
    }
    for name, subset in subsets.items():
        if subset is None:
            rec.update({f"{name}_bias": math.nan, f"{name}_distinct": -1, f"{name}_eq14": math.nan})
            continue
        rec[f"{name}_bias"] = theory.selection_bias(updates, subset)
        rec[f"{name}_distinct"] = int(np.unique(clusters[subset]).size)
        rec[f"{name}_eq14"] = (
            theory.theorem1_bound(updates, clusters, subset, centers=geo.centers)
            if m <= k
            else math.nan
        )
    return rec


def run_case(spec: CaseSpec, seed: int, index: int) -> dict[str, Any]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
    k = spec.n_clusters
    clusters = np.repeat(np.arange(k), spec.cluster_sizes).astype(np.intp)
    centers = equicorrelated_centers(k, spec.mu, DIM, rng, spec.norm_spread)
    quality = spec.quality_spread * rng.random(clusters.size)
    noiseless = theory.cluster_geometry(
        centers[clusters], clusters, quality, spec.m, theta=THETA, centers=centers
    )
    r_ref = noiseless.r_star if math.isfinite(noiseless.r_star) else 0.05 * noiseless.kappa
    updates = clustered_updates(centers, clusters, spec.r_ratio * r_ref, rng)
    rec = evaluate_selection(
        updates, clusters, quality, spec.m, theta=THETA, rng=rng, centers=centers
    )
    return {
        "case": index,
        "sizes": "-".join(map(str, spec.cluster_sizes)),
        "mu_target": spec.mu,
        "r_ratio": spec.r_ratio,
        "r_ref": r_ref,
        "quality_spread": spec.quality_spread,
        "replicate": spec.replicate,
        **rec,
    }
