"""The k-DPP itself: exact samples and marginals (Kulesza & Taskar 2012, Sec. 5.2).

[`sample_kdpp`][adcs.dpp_sampling.sample_kdpp] draws an exact sample of the k-DPP P(S) ∝ det L_S,
|S| = k (Alg. 1 and 8), and
[`kdpp_inclusion_probabilities`][adcs.dpp_sampling.kdpp_inclusion_probabilities] gives its marginals
P(i ∈ S); both work from the eigendecomposition of L ([`kdpp_eigen`][adcs.dpp_sampling.kdpp_eigen])
and the elementary symmetric polynomials of its eigenvalues, which are computed in the log domain
([`log_elementary_symmetric`][adcs.dpp_sampling.log_elementary_symmetric]) so that no kernel scale
overflows. The mode (MAP inference) is [`adcs.dpp`][adcs.dpp].
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_int
from adcs.dpp import PSD_RTOL, IntArray, _check_kernel

__all__ = [
    "KernelEigen",
    "kdpp_eigen",
    "kdpp_inclusion_probabilities",
    "log_elementary_symmetric",
    "sample_kdpp",
]


class KernelEigen(NamedTuple):
    """The eigendecomposition L = V diag(λ) Vᵀ of an L-ensemble kernel.

    Attributes
    ----------
    values : ndarray of shape (r,)
        Eigenvalues λ ≥ 0.
    vectors : ndarray of shape (N, r)
        Orthonormal eigenvectors, one per column.
    """

    values: NDArray[np.float64]
    vectors: NDArray[np.float64]


def kdpp_eigen(
    kernel_or_eigen: ArrayLike | KernelEigen | tuple[ArrayLike, ArrayLike],
) -> KernelEigen:
    """The eigendecomposition of a symmetric PSD kernel of shape (N, N), or a given one, checked.

    Eigenvalues that rounding made slightly negative are set to zero; a kernel with an eigenvalue
    below −[`PSD_RTOL`][adcs.dpp.PSD_RTOL] · trace (as [`greedy_map`][adcs.greedy_map] refuses)
    raises ``ValueError``.
    """
    if isinstance(kernel_or_eigen, tuple):
        values, vectors = kernel_or_eigen
        lam = np.asarray(values, dtype=np.float64)
        vec = np.asarray(vectors, dtype=np.float64)
        if lam.ndim != 1 or vec.ndim != 2 or vec.shape[1] != lam.size or lam.size == 0:
            raise ValueError(
                "an eigendecomposition must be (values of shape (r,), vectors of shape (N, r)), "
                f"got shapes {lam.shape} and {vec.shape}"
            )
        if not (np.isfinite(lam).all() and np.isfinite(vec).all()):
            raise ValueError("the eigendecomposition contains NaN or infinite values")
        if (lam < -1e-9 * max(float(np.abs(lam).max()), np.finfo(np.float64).tiny)).any():
            raise ValueError("kernel must be positive semi-definite: it has a negative eigenvalue")
        return KernelEigen(np.maximum(lam, 0.0), vec)
    kernel = _check_kernel(kernel_or_eigen)
    lam, vec = np.linalg.eigh(kernel)
    trace = max(float(np.trace(kernel)), np.finfo(np.float64).tiny)
    if lam[0] < -PSD_RTOL * trace:  # the bound greedy_map's check applies
        raise ValueError(
            "kernel must be positive semi-definite: its smallest eigenvalue is "
            f"{lam[0]:.3g}, below −{PSD_RTOL:g} × its trace ({trace:.3g})"
        )
    return KernelEigen(np.maximum(lam, 0.0), vec)


def log_elementary_symmetric(values: ArrayLike, k: int) -> NDArray[np.float64]:
    """log e_l(λ_1, …, λ_n) of every prefix of ``values``, for l = 0 … k; shape (n + 1, k + 1).

    Row n holds the elementary symmetric polynomials of the first n values (row 0: e_0 = 1, the
    others 0), by the recursion e_l^n = e_l^{n−1} + λ_n e_{l−1}^{n−1}, summed with ``logaddexp``
    so that no product of eigenvalues overflows or underflows. Zeros give −inf.

    Parameters
    ----------
    values : array_like of shape (n,)
        Non-negative numbers (eigenvalues).
    k : int
        Highest degree, k ≥ 0.
    """
    k = check_int("k", k, minimum=0)
    lam = np.asarray(values, dtype=np.float64).reshape(-1)
    if (lam < 0).any() or not np.isfinite(lam).all():
        raise ValueError("elementary symmetric polynomials need finite non-negative values")
    with np.errstate(divide="ignore"):
        log_lam = np.log(lam)
    table = np.full((lam.size + 1, k + 1), -np.inf)
    table[:, 0] = 0.0
    for n in range(lam.size):
        table[n + 1, 1:] = np.logaddexp(table[n, 1:], log_lam[n] + table[n, :-1])
    return table


def _check_k(k: int, n_items: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if not 1 <= k <= n_items:
        raise ValueError(f"k must satisfy 1 <= k <= N = {n_items}, got k={k}")


def _log_normaliser(eig: KernelEigen, k: int) -> tuple[NDArray[np.float64], float]:
    """The prefix table of [`log_elementary_symmetric`][adcs.dpp_sampling.log_elementary_symmetric]
    and log e_k(λ); rank < k raises."""
    table = log_elementary_symmetric(eig.values, k)
    log_ek = float(table[-1, k])
    if not np.isfinite(log_ek):
        rank = int(np.count_nonzero(eig.values > 0))
        raise ValueError(
            f"the kernel has rank {rank} < k = {k}: no k-subset has positive probability"
        )
    return table, log_ek


def kdpp_inclusion_probabilities(
    kernel_or_eigen: ArrayLike | KernelEigen | tuple[ArrayLike, ArrayLike], k: int
) -> NDArray[np.float64]:
    """Marginals π_i = P(i ∈ S) of the k-DPP P(S) ∝ det L_S, |S| = k; shape (N,), Σπ = k.

    π_i = Σ_n V_in² λ_n e_{k−1}(λ_{−n}) / e_k(λ) (Kulesza & Taskar 2012, eq. 5.28 with the
    eigenvector-selection probabilities of their Alg. 8), where λ_{−n} leaves eigenvalue n out.
    The leave-one-out polynomials come from prefix and suffix tables, all in the log domain.

    Parameters
    ----------
    kernel_or_eigen : array_like of shape (N, N), or (values, vectors)
        The kernel L, or its eigendecomposition ([`KernelEigen`][adcs.dpp_sampling.KernelEigen]).
    k : int
        Subset size, 1 ≤ k ≤ N; the kernel's rank must be at least k.
    """
    from scipy.special import logsumexp  # here: scipy.special costs every `import adcs`

    eig = kdpp_eigen(kernel_or_eigen)
    _check_k(k, eig.vectors.shape[0])
    prefix, log_ek = _log_normaliser(eig, k)
    suffix = log_elementary_symmetric(eig.values[::-1], k)[::-1]  # row n: λ_n … λ_r
    # e_{k−1}(λ_{−n}) = Σ_j e_j(λ_{<n}) e_{k−1−j}(λ_{>n})
    leave_one_out = logsumexp(prefix[:-1, :k] + suffix[1:, :k][:, ::-1], axis=1)
    with np.errstate(divide="ignore"):
        log_select = np.log(eig.values) + leave_one_out - log_ek
    select = np.exp(log_select)  # P(eigenvector n is chosen), Σ = k
    return np.clip((eig.vectors**2) @ select, 0.0, 1.0)


def sample_kdpp(
    kernel_or_eigen: ArrayLike | KernelEigen | tuple[ArrayLike, ArrayLike],
    k: int,
    rng: np.random.Generator,
) -> IntArray:
    """An exact sample of the k-DPP P(S) ∝ det L_S over subsets of size k, ascending.

    Phase 1 chooses k eigenvectors, eigenvector n with probability λ_n e_{l−1}^{n−1} / e_l^n
    given l still to choose (Kulesza & Taskar 2012, Alg. 8); phase 2 samples the projection DPP
    K = V Vᵀ of the chosen vectors by the chain rule, P(i | S) ∝ K_ii − K_iS K_S⁻¹ K_Si, with the
    conditional variances kept by Gram–Schmidt in the k-dimensional span (O(N k²)).

    Parameters
    ----------
    kernel_or_eigen : array_like of shape (N, N), or (values, vectors)
        The kernel L, or its eigendecomposition (pass it to sample many times at O(N k²) each).
    k : int
        Subset size, 1 ≤ k ≤ N; the kernel's rank must be at least k.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (k,)
        Distinct indices, ascending.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    eig = kdpp_eigen(kernel_or_eigen)
    _check_k(k, eig.vectors.shape[0])
    table, _ = _log_normaliser(eig, k)
    with np.errstate(divide="ignore"):
        log_lam = np.log(eig.values)
    chosen: list[int] = []
    for n in range(eig.values.size, 0, -1):
        left = k - len(chosen)
        if left == 0:
            break
        log_p = log_lam[n - 1] + table[n - 1, left - 1] - table[n, left]
        if rng.random() < math.exp(min(log_p, 0.0)):
            chosen.append(n - 1)
    return _sample_projection_dpp(eig.vectors[:, chosen], rng)


def _sample_projection_dpp(basis: NDArray[np.float64], rng: np.random.Generator) -> IntArray:
    """Chain-rule sample of the projection DPP K = B Bᵀ (B of shape (N, k), orthonormal columns)."""
    n, k = basis.shape
    residual = np.einsum("ij,ij->i", basis, basis)  # K_ii = ‖B_i‖²
    directions = np.empty((k, k))
    picks: list[int] = []
    for t in range(k):
        weights = np.maximum(residual, 0.0)
        weights[picks] = 0.0
        cumulative = weights.cumsum()
        i = int(cumulative.searchsorted(rng.random() * cumulative[-1], side="right"))
        i = min(i, n - 1)
        picks.append(i)
        if t == k - 1:
            break
        d = basis[i].copy()
        for _ in range(2):  # re-orthogonalise once: "twice is enough"
            d -= directions[:t].T @ (directions[:t] @ d)
        d /= math.sqrt(float(d @ d))
        directions[t] = d
        residual -= np.square(basis @ d)
    return np.sort(np.asarray(picks, dtype=np.intp))
