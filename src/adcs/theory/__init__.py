"""The paper's bias and convergence bounds (Sec. 5, Appendices A–C), computed from data.

Conventions. Client updates are rows: ``updates`` is an ndarray of shape (n_clients, dim), so the
paper's G (dim × N) is ``updates.T`` and its Gram matrix L = GᵀG is ``updates @ updates.T``
(n_clients × n_clients). Cluster labels are integers in ``[0, n_clusters)``; the cluster
representatives c_k default to the centroids. Qualities enter only through the log-weights
log w_i = 2 α q_i, with α = θ / (2(1 − θ)) (eq. 7), so nothing here overflows however large α q is.

Besides the paper's quantities, `ClusterGeometry` carries one condition derived for this
project (``greedy_condition_holds``): a sufficient condition under which the *greedy* MAP (eq. 9),
the algorithm ADCS actually runs, picks m distinct clusters. Assumption 1 implies it (see
`cluster_geometry`), so Theorem 1's bound also covers greedy ADCS, not only the exact MAP.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from adcs._validate import check_int
from adcs.dpp import alpha_of
from adcs.dpp import gram_matrix as dpp_gram_matrix

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

__all__ = [
    "ClusterGeometry",
    "Theorem2Bound",
    "UniformBias",
    "alpha_from_theta",
    "cluster_geometry",
    "cluster_radius",
    "corollary1_bound",
    "corollary1_rayleigh_bound",
    "expected_uniform_bias",
    "gram_matrix",
    "rayleigh_bound",
    "selection_bias",
    "theorem1_bound",
    "theorem2_bound",
]


# ---------------------------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------------------------


def _check_updates(updates: ArrayLike, name: str = "updates") -> FloatArray:
    arr = np.asarray(updates)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (n_clients, dim) with both >= 1, got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _check_clusters(clusters: ArrayLike, n_clients: int, n_clusters: int | None) -> IntArray:
    z = np.asarray(clusters)
    if z.shape != (n_clients,):
        raise ValueError(f"clusters must have shape ({n_clients},), got {z.shape}")
    if not np.issubdtype(z.dtype, np.integer) or z.dtype == np.bool_:
        raise ValueError(f"clusters must be integer labels, got dtype {z.dtype}")
    if z.size and z.min() < 0:
        raise ValueError(f"cluster labels must be >= 0, got {int(z.min())}")
    k = int(z.max()) + 1 if n_clusters is None else n_clusters
    if z.max() >= k:
        raise ValueError(f"cluster labels must be < n_clusters={k}, got {int(z.max())}")
    sizes = np.bincount(z, minlength=k)
    if (sizes == 0).any():
        raise ValueError(
            f"every cluster 0..{k - 1} needs at least one client; empty: "
            f"{np.flatnonzero(sizes == 0).tolist()}"
        )
    return z.astype(np.intp)


def _resolve_centers(
    updates: FloatArray, clusters: ArrayLike, centers: ArrayLike | None
) -> tuple[IntArray, FloatArray]:
    """Validated labels and representatives c_k, shape (n_clusters, dim); centroids by default."""
    n, d = updates.shape
    if centers is None:
        z = _check_clusters(clusters, n, None)
        k = int(z.max()) + 1
        sums = np.zeros((k, d))
        np.add.at(sums, z, updates)
        return z, sums / np.bincount(z, minlength=k)[:, None]
    c = _check_updates(centers, "centers")
    if c.shape[1] != d:
        raise ValueError(f"centers must have shape (n_clusters, {d}), got {c.shape}")
    return _check_clusters(clusters, n, c.shape[0]), c


def _check_subset(subset: ArrayLike, n_clients: int) -> IntArray:
    s = np.asarray(subset)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"subset must be a non-empty 1-D array of indices, got shape {s.shape}")
    if not np.issubdtype(s.dtype, np.integer) or s.dtype == np.bool_:
        raise ValueError(f"subset must hold integer indices, got dtype {s.dtype}")
    if s.min() < 0 or s.max() >= n_clients:
        raise ValueError(f"subset indices must lie in [0, {n_clients}), got {s.tolist()}")
    if np.unique(s).size != s.size:
        raise ValueError(f"subset indices must be distinct, got {s.tolist()}")
    return s.astype(np.intp)


def _check_nonneg(name: str, value: float, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        rng = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be finite and {rng}, got {value!r}")
    return v


def alpha_from_theta(theta: float) -> float:
    """α = θ / (2(1 − θ)) (eq. 7), for θ in
    [0, 1) (θ = 1 has no DPP form); see [`adcs.dpp.alpha_of`][adcs.dpp.alpha_of]."""
    if alpha_of(theta) == math.inf:
        raise ValueError(f"theta must be in [0, 1) (theta = 1 has no DPP form), got {theta!r}")
    return alpha_of(theta)


# ---------------------------------------------------------------------------------------------
# Assumption 1
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ClusterGeometry:
    """The quantities of Assumption 1 (Sec. 5.1) for one set of client updates.

    Attributes
    ----------
    n_clients, n_clusters, m : int
        N, K and the number of selected clients.
    alpha : float
        α of eq. 7.
    cluster_sizes : ndarray of int, shape (n_clusters,)
        n_k = |C_k|.
    centers : ndarray of shape (n_clusters, dim)
        The representatives c_k used.
    r : float
        max_i ‖g_i − c_{z_i}‖ (eq. 10).
    mu : float
        max_{k≠ℓ} |cos(c_k, c_ℓ)| (eq. 11); 0 when K = 1, NaN if some c_k = 0.
    kappa : float
        κ = min_k ‖c_k‖.
    log_weights : ndarray of shape (n_clients,)
        log w_i = 2 α q_i.
    log_w_bar : float
        log w̄ = max_i log w_i.
    log_w_bar_k : ndarray of shape (n_clusters,)
        log w̄_k = max_{i∈C_k} log w_i.
    log_q_m : float
        log Q_m = the sum of the m largest log w̄_k; −inf when m > K (no m distinct clusters).
    rho : float
        ρ = √(1 − (m−1)μ) − 2r√m/κ at the measured r; NaN when eq. 12 fails or κ = 0.
    r_rho : float
        (κ/2)·√((1 − (m−1)μ)/m), the radius at which ρ reaches 0 (third term of eq. 13).
    r_star : float
        r_⋆ of Assumption 1: the smallest r ≥ 0 with Q_m ρ(r)^{2m} = 16 r² w̄^m / κ²; NaN when
        eq. 12 fails or κ = 0 (ρ is then undefined or never positive).
    log_r_star : float
        log r_⋆ (r_⋆ itself may underflow to 0 when w̄^m ≫ Q_m).
    eq12_holds, eq13_holds : bool
        μ < 1/(m−1) (eq. 12); r < min(κ, r_⋆, r_rho) (eq. 13).
    greedy_condition_holds : bool
        Not in the paper: 16 r² w̄ / κ² < w_(m) ρ² with ρ > 0, m ≤ K and eq. 12, where w_(m) is
        the m-th largest w̄_k. Sufficient for greedy MAP (eq. 9) to pick m distinct clusters; see
        `cluster_geometry`.
    """

    n_clients: int
    n_clusters: int
    m: int
    alpha: float
    cluster_sizes: IntArray
    centers: FloatArray
    r: float
    mu: float
    kappa: float
    log_weights: FloatArray
    log_w_bar: float
    log_w_bar_k: FloatArray
    log_q_m: float
    rho: float
    r_rho: float
    r_star: float
    log_r_star: float
    eq12_holds: bool
    eq13_holds: bool
    greedy_condition_holds: bool

    @property
    def assumption_holds(self) -> bool:
        """Assumption 1: eq. 12 and eq. 13 both hold."""
        return self.eq12_holds and self.eq13_holds

    @property
    def theorem1_applies(self) -> bool:
        """Assumption 1 holds and m ≤ K, so Theorem 1 (eq. 14) applies to the exact MAP."""
        return self.assumption_holds and self.m <= self.n_clusters

    @property
    def weights(self) -> FloatArray:
        """w_i = e^{2αq_i}, shape (n_clients,); may be ``inf`` for huge α q (use log_weights)."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_weights)

    @property
    def w_bar(self) -> float:
        """w̄ = max_i w_i (may be ``inf``; use log_w_bar)."""
        with np.errstate(over="ignore"):
            return float(np.exp(self.log_w_bar))

    @property
    def w_bar_k(self) -> FloatArray:
        """w̄_k, shape (n_clusters,) (may be ``inf``; use log_w_bar_k)."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_w_bar_k)

    @property
    def q_m(self) -> float:
        """Q_m = max over m-subsets T of [K] of Π_{k∈T} w̄_k (may be ``inf``; use log_q_m)."""
        with np.errstate(over="ignore"):
            return float(np.exp(self.log_q_m))


def cluster_radius(
    updates: ArrayLike, clusters: ArrayLike, centers: ArrayLike | None = None
) -> float:
    """r = max_i ‖g_i − c_{z_i}‖ (eq. 10).

    Parameters
    ----------
    updates : ndarray of shape (n_clients, dim)
    clusters : ndarray of int, shape (n_clients,)
        Labels in [0, n_clusters), every cluster non-empty.
    centers : ndarray of shape (n_clusters, dim), optional
        Representatives c_k; the centroids by default.
    """
    g = _check_updates(updates)
    z, c = _resolve_centers(g, clusters, centers)
    return float(np.linalg.norm(g - c[z], axis=1).max())


def _mu(centers: FloatArray) -> float:
    """Eq. 11; 0 for a single cluster, NaN if a representative is zero."""
    k = centers.shape[0]
    if k == 1:
        return 0.0
    norms = np.linalg.norm(centers, axis=1)
    if (norms == 0).any():
        return float("nan")
    u = centers / norms[:, None]
    cos = np.abs(u @ u.T)
    return float(cos[~np.eye(k, dtype=bool)].max())


def _log_r_star(log_q_m: float, log_w_bar: float, m: int, mu: float, kappa: float) -> float:
    """log r_⋆ of Assumption 1, found numerically in the log domain.

    With r = x·r_rho (r_rho the root of ρ), ρ(r) = ρ₀(1 − x) and F(r) = 0 becomes
    log x − m·log(1 − x) = A/2,  A = log(Q_m/w̄^m) + 2(m−1) log ρ₀ + log(m/4).
    The left side increases strictly from −∞ to +∞ on (0, 1), so the root is unique there, and it is
    the smallest root of F on [0, ∞) because F(0) > 0 and F decreases on [0, r_rho]. Hence r_⋆ is
    finite (< r_rho) whenever it is defined: the paper's r_⋆ = +∞ case cannot occur for κ > 0.
    """
    if not (kappa > 0 and mu < (1.0 / (m - 1) if m > 1 else math.inf)):
        return float("nan")
    if log_q_m == -math.inf:
        return -math.inf
    rho0 = math.sqrt(1.0 - (m - 1) * mu)
    log_r_rho = math.log(kappa) + math.log(rho0) - math.log(2.0 * math.sqrt(m))
    half_a = 0.5 * (log_q_m - m * log_w_bar + 2 * (m - 1) * math.log(rho0) + math.log(m / 4.0))

    def h(t: float) -> float:  # t = log x < 0; log(1 − e^t) = log(−expm1(t)) stays accurate
        return t - m * math.log(-math.expm1(t)) - half_a

    lo = min(half_a, 0.0) - 1.0
    while h(lo) > 0:
        lo = 2.0 * lo - 1.0
    hi = -1.0
    while h(hi) < 0:
        hi /= 2.0
    t = brentq(h, lo, hi, xtol=1e-15, rtol=1e-14, maxiter=500)
    return float(t) + log_r_rho


def _resolve_alpha(theta: float | None, alpha: float | None) -> float:
    """α from exactly one of θ (eq. 7) and α."""
    if theta is not None and alpha is None:
        return alpha_from_theta(theta)
    if alpha is not None and theta is None:
        return _check_nonneg("alpha", alpha)
    raise ValueError("give exactly one of theta and alpha")


def _check_quality(quality: ArrayLike, n_clients: int) -> FloatArray:
    """Quality scores q_i as float64, shape (n_clients,); finite."""
    q = np.asarray(quality)
    if q.shape != (n_clients,) or not np.issubdtype(q.dtype, np.number):
        raise ValueError(f"quality must be a numeric array of shape ({n_clients},), got {q.shape}")
    q = q.astype(np.float64)
    if not np.isfinite(q).all():
        raise ValueError("quality contains NaN or infinite entries")
    return q


def _rho(eq12: bool, mu: float, kappa: float, r: float, m: int) -> tuple[float, float]:
    """ρ = ρ₀ − 2r√m/κ (ρ₀ = √(1 − (m−1)μ)) and its root r_ρ; NaN unless eq. 12 holds and κ > 0."""
    if not (eq12 and kappa > 0):
        return float("nan"), float("nan")
    rho0 = math.sqrt(1.0 - (m - 1) * mu)
    return rho0 - 2.0 * r * math.sqrt(m) / kappa, 0.5 * kappa * rho0 / math.sqrt(m)


def _greedy_condition(
    log_r: float, log_w_bar: float, log_w_m: float, kappa: float, r: float, rho: float
) -> bool:
    """The greedy sufficient condition 4δ² w̄ < w_(m) ρ² in the log domain (δ = 2r/κ).

    ``log_w_m`` is log w_(m), the m-th largest cluster weight; see `cluster_geometry`'s notes.
    Callers check eq. 12 and m ≤ K first.
    """
    if not (kappa > 0 and r < kappa and rho > 0):
        return False
    lhs = math.log(16.0) + 2.0 * log_r + log_w_bar - 2.0 * math.log(kappa)
    return bool(lhs < log_w_m + 2.0 * math.log(rho))


def _cluster_max(values: FloatArray, clusters: IntArray, n_clusters: int) -> FloatArray:
    """The largest value in each cluster, shape (n_clusters,) (−inf for an empty cluster)."""
    out = np.full(n_clusters, -np.inf)
    np.maximum.at(out, clusters, values)
    return out


def _geometry(
    g: FloatArray, z: IntArray, c: FloatArray, m: int, a: float, q: FloatArray
) -> ClusterGeometry:
    """Eqs. 10–13 and the greedy condition for checked input (see `cluster_geometry`).

    Parameters
    ----------
    g : ndarray of shape (n_clients, dim)
    z : ndarray of int, shape (n_clients,)
    c : ndarray of shape (n_clusters, dim)
    m : int
    a : float
        α.
    q : ndarray of shape (n_clients,)
    """
    n, k = g.shape[0], c.shape[0]
    log_w = 2.0 * a * q
    log_w_bar_k = _cluster_max(log_w, z, k)
    log_w_bar = float(log_w.max())
    top = np.sort(log_w_bar_k)[::-1]
    log_q_m = float(top[:m].sum()) if m <= k else -math.inf
    r = float(np.linalg.norm(g - c[z], axis=1).max())
    mu = _mu(c)
    kappa = float(np.linalg.norm(c, axis=1).min())
    eq12 = bool(mu < (1.0 / (m - 1) if m > 1 else math.inf))  # NaN compares False
    rho, r_rho = _rho(eq12, mu, kappa, r, m)
    log_r_star = _log_r_star(log_q_m, log_w_bar, m, mu, kappa)
    log_r = math.log(r) if r > 0 else -math.inf
    eq13 = bool(eq12 and kappa > 0 and r < kappa and r < r_rho and log_r < log_r_star)
    greedy_ok = (
        eq12 and m <= k and _greedy_condition(log_r, log_w_bar, float(top[m - 1]), kappa, r, rho)
    )
    return ClusterGeometry(
        n_clients=n,
        n_clusters=k,
        m=m,
        alpha=a,
        cluster_sizes=np.bincount(z, minlength=k).astype(np.intp),
        centers=c,
        r=r,
        mu=mu,
        kappa=kappa,
        log_weights=log_w,
        log_w_bar=log_w_bar,
        log_w_bar_k=log_w_bar_k,
        log_q_m=log_q_m,
        rho=float(rho),
        r_rho=float(r_rho),
        r_star=float(np.exp(log_r_star)),
        log_r_star=log_r_star,
        eq12_holds=eq12,
        eq13_holds=eq13,
        greedy_condition_holds=greedy_ok,
    )


def cluster_geometry(
    updates: ArrayLike,
    clusters: ArrayLike,
    quality: ArrayLike,
    m: int,
    *,
    theta: float | None = None,
    alpha: float | None = None,
    centers: ArrayLike | None = None,
) -> ClusterGeometry:
    """Compute every quantity of Assumption 1 (eqs. 10–13) and check it.

    Parameters
    ----------
    updates : ndarray of shape (n_clients, dim)
        Client updates g_i (rows).
    clusters : ndarray of int, shape (n_clients,)
        z_i in [0, n_clusters); every cluster non-empty.
    quality : ndarray of shape (n_clients,)
        Quality scores q_i.
    m : int
        Number of clients selected, 1 ≤ m ≤ n_clients (m > K is allowed; then Q_m = 0 and
        Assumption 1 fails, as no m distinct clusters exist).
    theta, alpha : float
        Give exactly one: θ in [0, 1), or α ≥ 0 directly (α = θ/(2(1−θ)), eq. 7).
    centers : ndarray of shape (n_clusters, dim), optional
        Representatives c_k; the cluster centroids by default.

    Returns
    -------
    ClusterGeometry

    Notes
    -----
    ``greedy_condition_holds`` (derived here, not in the paper). Let δ = 2r/κ and let S be a set
    of j < m clients from distinct clusters. A candidate from a cluster already in S lies within 2δ
    of a selected φ (eq. 22), so its greedy gain w_i·d_i² (eq. 9) is at most 4δ² w̄. A candidate i
    from a new cluster forms with S a distinct-cluster set whose σ_min is ≥ ρ (eqs. 29–31 for j+1 ≤
    m columns), so its residual distance d_i ≥ ρ; one of the m best clusters is still unused, so the
    best new gain is ≥ w_(m) ρ². Thus 4δ² w̄ < w_(m) ρ² (with ρ > 0) makes every greedy step pick
    a new cluster. Assumption 1 implies it: Q_m ≤ w̄^{m−1} w_(m) and ρ² ≥ ρ^{2m} (0 < ρ ≤ 1)
    turn eq. 34 into w_(m) ρ² > 4δ² w̄.
    """
    g = _check_updates(updates)
    n = g.shape[0]
    z, c = _resolve_centers(g, clusters, centers)
    m = check_int("m", m, 1)
    if m > n:
        raise ValueError(f"m must be <= n_clients={n}, got {m}")
    a = _resolve_alpha(theta, alpha)
    return _geometry(g, z, c, m, a, _check_quality(quality, n))


# ---------------------------------------------------------------------------------------------
# Theorem 1, eq. 15, Corollary 1
# ---------------------------------------------------------------------------------------------


def theorem1_bound(
    updates: ArrayLike,
    clusters: ArrayLike,
    subset: ArrayLike,
    *,
    centers: ArrayLike | None = None,
) -> float:
    """The right side of Theorem 1 (eq. 14) for a selected set S.

    ‖Σ_k (1{k∈T}/m − n_k/N) c_k‖ + 2r, with T the clusters of S and m = |S|.

    Parameters
    ----------
    updates : ndarray of shape (n_clients, dim)
    clusters : ndarray of int, shape (n_clients,)
    subset : ndarray of int, shape (m,)
        Distinct client indices, m ≤ n_clusters.
    centers : ndarray of shape (n_clusters, dim), optional
        Representatives c_k (centroids by default).

    Notes
    -----
    When S has m distinct clusters (what Theorem 1 proves for the exact MAP under Assumption 1)
    this is eq. 14 exactly. For any other S it uses the count s_k = |S ∩ C_k| in place of
    1{k∈T}; by eq. 38 and the triangle inequality that is still an upper bound on ‖ḡ_S − ḡ_N‖.
    """
    g = _check_updates(updates)
    z, c = _resolve_centers(g, clusters, centers)
    s = _check_subset(subset, g.shape[0])
    n, k, m = g.shape[0], c.shape[0], s.size
    if m > k:
        raise ValueError(f"Theorem 1 needs m <= K: m={m} selected but only K={k} clusters")
    counts = np.bincount(z[s], minlength=k)
    sizes = np.bincount(z, minlength=k)
    coef = counts / m - sizes / n
    r = float(np.linalg.norm(g - c[z], axis=1).max())
    return float(np.linalg.norm(coef @ c)) + 2.0 * r


def gram_matrix(updates: ArrayLike) -> FloatArray:
    """L = GᵀG of Sec. 5.1 with clients as rows, shape (N, N)
    ([`adcs.dpp.gram_matrix`][adcs.dpp.gram_matrix])."""
    return np.asarray(dpp_gram_matrix(_check_updates(updates)), dtype=np.float64)


def _check_gram(gram: ArrayLike) -> FloatArray:
    L = np.asarray(gram)
    if L.ndim != 2 or L.shape[0] != L.shape[1] or L.shape[0] < 1:
        raise ValueError(f"gram must be a square (N, N) matrix, got shape {L.shape}")
    L = _check_updates(L, "gram")
    scale = max(float(np.abs(L).max()), 1e-300)
    if not np.allclose(L, L.T, rtol=1e-8, atol=1e-10 * scale):
        raise ValueError("gram must be symmetric")
    return 0.5 * (L + L.T)


def rayleigh_bound(gram: ArrayLike, m: int) -> float:
    """The general bound of eq. 15: √(λ_max(L)(1/m − 1/N)), valid for every m-subset.

    Parameters
    ----------
    gram : ndarray of shape (n_clients, n_clients)
        Symmetric positive semi-definite Gram matrix L_ij = ⟨g_i, g_j⟩ (see `gram_matrix`).
    m : int
        Subset size, 1 ≤ m ≤ N.
    """
    L = _check_gram(gram)
    n = L.shape[0]
    m = check_int("m", m, 1)
    if m > n:
        raise ValueError(f"m must be <= N={n}, got {m}")
    lam = max(float(np.linalg.eigvalsh(L)[-1]), 0.0)
    return math.sqrt(lam * (1.0 / m - 1.0 / n))


def corollary1_bound(n_clusters: int, m: int) -> float:
    """Corollary 1 (eq. 16): √((K − m)/(K m)) = √(1/m − 1/K), for 1 ≤ m ≤ K."""
    k = check_int("n_clusters", n_clusters, 1)
    m = check_int("m", m, 1)
    if m > k:
        raise ValueError(f"Corollary 1 needs m <= K: got m={m}, K={k}")
    return math.sqrt((k - m) / (k * m))


def corollary1_rayleigh_bound(n_clients: int, n_clusters: int, m: int) -> float:
    """Eq. 17: the general bound (15) in the strong cluster setting, √((N − m)/(K m)).

    The strong cluster setting has balanced clusters, so K must divide N; 1 ≤ m ≤ N.
    """
    n = check_int("n_clients", n_clients, 1)
    k = check_int("n_clusters", n_clusters, 1)
    m = check_int("m", m, 1)
    if k > n or n % k:
        raise ValueError(f"n_clusters must divide n_clients (balanced clusters): N={n}, K={k}")
    if m > n:
        raise ValueError(f"m must be <= n_clients={n}, got {m}")
    return math.sqrt((n - m) / (k * m))


# ---------------------------------------------------------------------------------------------
# Theorem 2
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Theorem2Bound:
    """The four terms of eq. 19 and their sum (the bound on (1/T)Σ E‖∇f(w⁽ᵗ⁾)‖²)."""

    optimization: float
    """4(f(w₀) − f⋆)/(ηT)."""
    approximation: float
    """5ε²."""
    variance: float
    """16Lη(ν_sel + σ²/(mE))."""
    drift: float
    """(5/6)L²η_ℓ²G²(E − 1)(2E − 1)."""
    total: float


def theorem2_bound(
    *,
    initial_gap: float,
    local_lr: float,
    local_steps: int,
    rounds: int,
    smoothness: float,
    bias_bound: float,
    selection_variance: float,
    gradient_variance: float,
    second_moment: float,
    m: int,
) -> Theorem2Bound:
    """The right side of Theorem 2 (eq. 19).

    Parameters
    ----------
    initial_gap : float
        f(w₀) − f⋆ ≥ 0.
    local_lr : float
        η_ℓ > 0.
    local_steps : int
        E ≥ 1.
    rounds : int
        T ≥ 1.
    smoothness : float
        L > 0 (Assumption 2).
    bias_bound : float
        ε ≥ 0, a bound on the selection bias ‖b_t‖ (e.g. the right side of eq. 14).
    selection_variance : float
        ν_sel ≥ 0 (0 for a deterministic selection such as MAP).
    gradient_variance : float
        σ² ≥ 0 (Assumption 5).
    second_moment : float
        G ≥ 0 with E‖g‖² ≤ G² (Assumption 4).
    m : int
        Number of selected clients, ≥ 1.

    Raises
    ------
    ValueError
        On a bad input, or if η = E η_ℓ exceeds 1/(8L) (the step-size condition of Theorem 2).
    """
    gap = _check_nonneg("initial_gap", initial_gap)
    lr = _check_nonneg("local_lr", local_lr, positive=True)
    e = check_int("local_steps", local_steps, 1)
    t = check_int("rounds", rounds, 1)
    lsm = _check_nonneg("smoothness", smoothness, positive=True)
    eps = _check_nonneg("bias_bound", bias_bound)
    nu = _check_nonneg("selection_variance", selection_variance)
    sigma2 = _check_nonneg("gradient_variance", gradient_variance)
    gmax = _check_nonneg("second_moment", second_moment)
    m = check_int("m", m, 1)
    eta = e * lr
    if eta > (1.0 / (8.0 * lsm)) * (1.0 + 1e-12):
        raise ValueError(
            f"Theorem 2 needs eta = local_steps * local_lr <= 1/(8 L): eta={eta:g} > {1 / (8 * lsm):g}"
        )
    optimization = 4.0 * gap / (eta * t)
    approximation = 5.0 * eps**2
    variance = 16.0 * lsm * eta * (nu + sigma2 / (m * e))
    drift = (5.0 / 6.0) * lsm**2 * lr**2 * gmax**2 * (e - 1) * (2 * e - 1)
    return Theorem2Bound(
        optimization=optimization,
        approximation=approximation,
        variance=variance,
        drift=drift,
        total=optimization + approximation + variance + drift,
    )


# ---------------------------------------------------------------------------------------------
# measured bias
# ---------------------------------------------------------------------------------------------


def selection_bias(updates: ArrayLike, subset: ArrayLike) -> float:
    """‖ḡ_S − ḡ_N‖₂, the left side of eqs. 14–17.

    Parameters
    ----------
    updates : ndarray of shape (n_clients, dim)
    subset : ndarray of int, shape (m,)
        Distinct client indices.
    """
    g = _check_updates(updates)
    s = _check_subset(subset, g.shape[0])
    return float(np.linalg.norm(g[s].mean(axis=0) - g.mean(axis=0)))


@dataclass(frozen=True)
class UniformBias:
    """Bias of the Uniform scheduler: the selected average of m clients drawn without replacement."""

    rms: float
    """√E‖ḡ_S − ḡ_N‖², exact (closed form); an upper bound on ``mean`` by Jensen."""
    mean: float
    """E‖ḡ_S − ḡ_N‖: exact over all subsets when ``exact``, else a Monte Carlo mean."""
    mean_stderr: float
    """Standard error of ``mean`` (0 when exact)."""
    exact: bool
    """Whether ``mean`` enumerates every m-subset."""
    n_evaluated: int
    """Number of subsets enumerated, or of Monte Carlo draws."""


def _subset_bias(coords: FloatArray, subsets: IntArray) -> FloatArray:
    """‖ḡ_S − ḡ_N‖ for each row of ``subsets`` (n_sub, m), from centred coordinates (N, r)."""
    m, width = subsets.shape[1], coords.shape[1]
    step = max(1, (1 << 22) // (m * width))
    return np.concatenate(
        [
            np.linalg.norm(coords[subsets[i : i + step]].mean(axis=1), axis=1)
            for i in range(0, subsets.shape[0], step)
        ]
    )


def expected_uniform_bias(
    updates: ArrayLike,
    m: int,
    *,
    rng: np.random.Generator | None = None,
    n_draws: int = 4096,
    max_enumerate: int = 20_000,
) -> UniformBias:
    """Expected bias of Uniform selection of m of N clients.

    E‖ḡ_S − ḡ_N‖² has the closed form ((N − m)/(m(N − 1)))·(1/N)Σ_i‖g_i − ḡ_N‖² (sampling
    without replacement), reported as ``rms``. E‖ḡ_S − ḡ_N‖ has none: it is computed exactly by
    enumerating all C(N, m) subsets when that is at most ``max_enumerate``, else estimated by
    ``n_draws`` Monte Carlo draws from ``rng``.

    Parameters
    ----------
    updates : ndarray of shape (n_clients, dim)
    m : int
        1 ≤ m ≤ N.
    rng : numpy.random.Generator, optional
        Needed only when C(N, m) > ``max_enumerate``.
    n_draws : int
        Monte Carlo draws.
    max_enumerate : int
        Largest number of subsets to enumerate exactly.
    """
    g = _check_updates(updates)
    n = g.shape[0]
    m = check_int("m", m, 1)
    if m > n:
        raise ValueError(f"m must be <= n_clients={n}, got {m}")
    n_draws = check_int("n_draws", n_draws, 2)
    max_enumerate = check_int("max_enumerate", max_enumerate, 1)
    centred = g - g.mean(axis=0)
    spread = float((centred**2).sum(axis=1).mean())
    rms = math.sqrt((n - m) / (m * (n - 1)) * spread) if n > 1 else 0.0
    if centred.shape[1] > n:  # same norms in the N-dimensional row space: G = U S Vᵀ → U S
        u, sv, _ = np.linalg.svd(centred, full_matrices=False)
        centred = u * sv
    n_sub = math.comb(n, m)
    if n_sub <= max_enumerate:
        subsets = np.array(list(itertools.combinations(range(n), m)), dtype=np.intp)
        vals = _subset_bias(centred, subsets)
        return UniformBias(rms, float(vals.mean()), 0.0, True, n_sub)
    if rng is None:
        raise ValueError(
            f"C({n}, {m}) = {n_sub} subsets exceed max_enumerate={max_enumerate}: pass rng for "
            "a Monte Carlo estimate"
        )
    subsets = np.argsort(rng.random((n_draws, n)), axis=1)[:, :m].astype(np.intp)
    vals = _subset_bias(centred, subsets)
    return UniformBias(
        rms, float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(n_draws)), False, n_draws
    )
