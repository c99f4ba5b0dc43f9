"""MAP inference for determinantal point processes (paper Sec. 3.2 and 4.2, eq. 8–9).

Every MAP function returns exactly ``m`` distinct integer indices in the order they were chosen.

The greedy algorithm is Chen, Zhang & Zhou (2018)'s incremental Cholesky, run in the log domain on
the *normalised* kernel. Write the L-ensemble as

    L = diag(e^{w/2}) C diag(e^{w/2}),   C_ii = 1 (or 0 for an item with zero diagonal),

so that log det L_S = Σ_{i∈S} w_i + log det C_S. Each greedy step adds the item maximising
w_i + log d_i², where d_i² is i's residual in the Cholesky factorisation of C restricted to the items
chosen so far (eq. 9). Because the weights never multiply the kernel, no weight however large can
overflow, and because C has a unit diagonal the tolerance below which a residual counts as zero is
relative (scale free). Once every remaining residual is below it (the kernel's rank is exhausted,
or items are exact duplicates) the remaining picks go to the highest-weight items (largest L_ii).
Ties go to the lowest index; an item whose diagonal is zero is only ever chosen by that last rule.

Besides the mode, the k-DPP itself — exact samples and marginals — is in
[`adcs.dpp_sampling`][adcs.dpp_sampling] (its names are still reachable from here).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_number, check_unit_interval

__all__ = [
    "PSD_RTOL",
    "alpha_of",
    "exact_map",
    "gram_matrix",
    "greedy_map",
    "greedy_map_features",
    "log_det",
    "naive_greedy_map",
    "power_of_two_scale",
    "row_norms",
    "unit_gram",
    "unit_rows",
]

FloatArray = NDArray[np.floating[Any]]
IntArray = NDArray[np.intp]

EXACT_MAP_MAX_N = 25
_TIE_RTOL = 1e-12
_FEATURE_CHUNK = 65_536
PSD_RTOL = 1e-6
"""A kernel whose smallest eigenvalue is below −PSD_RTOL · trace is not positive semi-definite
(rounding in a Gram matrix of float32 features stays far inside this)."""


# ---------------------------------------------------------------------------------------------
# kernels (eq. 5 and 7): the one home of the Gram matrix, the cosine kernel and α


def alpha_of(theta: float) -> float:
    """α = θ / (2(1 − θ)) (eq. 7), the log-weight scale of the quality term; +inf at θ = 1.

    Parameters
    ----------
    theta : float
        The quality–diversity trade-off θ ∈ [0, 1] of eq. 6.
    """
    theta = check_unit_interval("theta", theta)
    return math.inf if theta >= 1.0 else theta / (2.0 * (1.0 - theta))


def gram_matrix(features: ArrayLike, usable: ArrayLike | None = None) -> FloatArray:
    """G = F Fᵀ, returned in float64, shape (n, n), for ``features`` of shape (n, k).

    The product runs in the features' own precision (float32 stays float32, no copy). Rows and
    columns of items that are not ``usable`` (e.g. a failed probe, non-finite entries) are zero,
    so a non-finite row spoils only its own row and column.
    """
    f = np.asarray(features)
    if f.dtype not in (np.float32, np.float64):
        f = f.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        gram = (f @ f.T).astype(np.float64)
    if usable is not None:
        bad = ~np.asarray(usable, dtype=bool)
        gram[bad] = 0.0
        gram[:, bad] = 0.0
    return gram


def unit_gram(gram: ArrayLike) -> FloatArray:
    """C_ij = G_ij / (‖g_i‖‖g_j‖) = φ_iᵀφ_j (eq. 5) from G = U Uᵀ; rows of zero vectors stay zero."""
    g = np.asarray(gram, dtype=np.float64)
    norms = np.sqrt(np.maximum(np.diag(g), 0.0))
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    c = g * inv[:, None] * inv[None, :]
    np.fill_diagonal(c, (norms > 0).astype(np.float64))
    return c


def row_norms(features: ArrayLike) -> NDArray[np.float64]:
    """‖f_i‖ of every row, shape (n,), float64, for rows of any finite scale.

    Squares are summed in the features' own precision (float32 stays float32: fast, and as
    accurate as the features), in blocks of rows so no float64 copy of the matrix is made. A row
    whose sum overflowed or may have underflowed (finite entries of any size, 1e200 or 1e-200,
    are allowed) is recomputed in float64 after dividing it by its largest entry; a row with a
    NaN or infinite entry gets NaN or inf.
    """
    f = np.asarray(features)
    if f.dtype not in (np.float32, np.float64):
        f = f.astype(np.float64)
    out = np.empty(f.shape[0])
    rows = max(1, (1 << 22) // max(1, f.shape[1]))
    small = float(np.finfo(f.dtype).tiny) ** 0.5 * 1e3  # below it, squares lost digits
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, f.shape[0], rows):
            block = f[start : start + rows]
            out[start : start + block.shape[0]] = np.sqrt(np.einsum("ij,ij->i", block, block))
        suspect = np.flatnonzero(np.isinf(out) | (out < small))
        for start in range(0, suspect.size, rows):
            idx = suspect[start : start + rows]
            block = f[idx].astype(np.float64)
            peak = np.abs(block).max(axis=1, initial=0.0)
            fine = np.isfinite(peak) & (peak > 0)
            scaled = block[fine] / peak[fine, None]
            out[idx[fine]] = np.sqrt(np.einsum("ij,ij->i", scaled, scaled)) * peak[fine]
    return out


def power_of_two_scale(values: ArrayLike) -> float:
    """2^−e with e the binary exponent of max |values|: multiplying by it is exact and brings the
    largest magnitude into [0.5, 1) (1.0 for an all-zero or non-finite array)."""
    v = np.asarray(values)
    # max |v| as max(max v, −min v): two reductions, no |v| copy (NaN propagates through both)
    peak = max(float(np.max(v, initial=0.0)), -float(np.min(v, initial=0.0))) if v.size else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        return 1.0
    return math.ldexp(1.0, -math.frexp(peak)[1])


def unit_rows(features: ArrayLike, dtype: Any = np.float32) -> FloatArray:
    """φ_n = g_n / ‖g_n‖ (eq. 5), shape (n, k); zero rows stay zero.

    Each row is first divided by its largest magnitude, so rows of any finite size (even 1e200)
    are safe; the work runs in blocks of rows, in the features' precision (float32 stays float32),
    so no float64 copy of the whole matrix is made. Non-finite rows must be excluded by the caller.
    """
    f = np.asarray(features)
    if f.dtype not in (np.float32, np.float64):
        f = f.astype(np.float64)
    out = np.empty(f.shape, dtype=dtype)
    rows = max(1, (1 << 22) // max(1, f.shape[1] if f.ndim == 2 else 1))  # ≤ 4 Mi numbers
    for start in range(0, f.shape[0], rows):
        block = f[start : start + rows]
        peak = np.abs(block).max(axis=1, initial=0.0)
        scaled = block / np.where(peak > 0, peak, 1.0).astype(block.dtype)[:, None]
        norms = np.sqrt(np.einsum("ij,ij->i", scaled, scaled, dtype=np.float64))
        scaled /= np.where(norms > 0, norms, 1.0).astype(block.dtype)[:, None]
        out[start : start + block.shape[0]] = scaled
    return out


# ---------------------------------------------------------------------------------------------
# MAP inference


def _default_rtol(dtype: np.dtype[Any]) -> float:
    # float32 features lose ~1e-7 per inner product; residuals of exact duplicates then sit near 1e-6.
    return 1e-10 if dtype == np.float64 else 1e-5


def _check_m(m: int, n_items: int) -> None:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise ValueError(f"m must be an integer, got {m!r}")
    if not 1 <= m <= n_items:
        raise ValueError(f"m must satisfy 1 <= m <= N = {n_items}, got m={m}")


def _check_log_weights(log_weights: ArrayLike | None, n_items: int) -> NDArray[np.float64]:
    if log_weights is None:
        return np.zeros(n_items)
    w = np.asarray(log_weights, dtype=np.float64)
    if w.shape != (n_items,):
        raise ValueError(f"log_weights must have shape ({n_items},), got {w.shape}")
    if np.isnan(w).any():
        raise ValueError("log_weights contains NaN")
    if (w == np.inf).any():
        raise ValueError(
            "log_weights contains +inf; weights are relative: subtract their maximum first"
        )
    return w  # −inf is a weight of zero: such an item is chosen only to fill the subset


def _real(name: str, values: ArrayLike) -> NDArray[np.float64]:
    """``values`` as float64; complex input is refused, not cast (that would drop its imaginary
    part)."""
    array = np.asarray(values)
    if np.iscomplexobj(array):
        raise ValueError(f"{name} must be real, got a {array.dtype} array")
    return np.asarray(array, dtype=np.float64)


def _check_tolerance(name: str, value: float | None) -> None:
    if value is not None:
        check_number(name, value, 0.0)


def _check_group_cosine(value: float) -> float:
    return check_number("group_cosine", value, 0.0, 1.0, low_open=True)


def _check_kernel(kernel: ArrayLike) -> NDArray[np.float64]:
    k = _real("kernel", kernel)
    if k.ndim != 2 or k.shape[0] != k.shape[1] or k.shape[0] == 0:
        raise ValueError(f"kernel must be a non-empty square matrix, got shape {k.shape}")
    # checked in tiles, so validation never needs N×N temporaries
    n, tile = k.shape[0], 1024
    if not all(np.isfinite(k[i : i + tile]).all() for i in range(0, n, tile)):
        raise ValueError("kernel contains NaN or infinite values")
    scale = max(float(np.abs(k[i : i + tile]).max()) for i in range(0, n, tile))
    atol = 1e-10 * max(scale, np.finfo(np.float64).tiny)
    for i in range(0, n, tile):
        for j in range(i, n, tile):
            a, b = k[i : i + tile, j : j + tile], k[j : j + tile, i : i + tile].T
            if float(np.abs(a - b).max()) > atol + 1e-8 * float(np.abs(a).max()):
                raise ValueError("kernel must be symmetric")
    if (np.diag(k) < -atol).any():
        raise ValueError("kernel must be positive semi-definite: it has a negative diagonal entry")
    return k


def _check_psd(k: NDArray[np.float64], rtol: float) -> None:
    """Refuse a kernel with an eigenvalue below −rtol · trace (one shifted Cholesky, O(N³/3))."""
    n = k.shape[0]
    shift = rtol * max(float(np.trace(k)), np.finfo(np.float64).tiny)
    try:
        np.linalg.cholesky(k + shift * np.eye(n))
    except np.linalg.LinAlgError:
        smallest = float(np.linalg.eigvalsh(k)[0]) if n <= 2048 else math.nan
        raise ValueError(
            "kernel must be positive semi-definite: its smallest eigenvalue is "
            f"{smallest:.3g}, below −{rtol:g} × its trace ({float(np.trace(k)):.3g})"
        ) from None


def _pick(gains: NDArray[np.float64]) -> int:
    """Index of the largest gain; near-ties (relative 1e-12) go to the lowest index."""
    best = float(gains.max())
    return int(np.flatnonzero(gains >= best - _TIE_RTOL * max(1.0, abs(best)))[0])


def _greedy_core(
    new_row: Callable[[int, int, float], NDArray[np.floating[Any]]],
    log_weights: NDArray[np.float64],
    nonzero: NDArray[np.bool_],
    m: int,
    rtol: float,
    rank: int,
    group_of: Callable[[int], NDArray[np.bool_]] | None = None,
) -> IntArray:
    """Greedy MAP on L = diag(e^{w/2}) C diag(e^{w/2}) with unit-diagonal C (eq. 9).

    Parameters
    ----------
    new_row : callable
        ``new_row(j, t, d_j)`` returns the t-th row e of the incremental Cholesky factor of C once
        item j (residual d_j) joins as the t-th pick: e_i = (C_ji − Σ_{s<t} V_sj V_si) / d_j,
        ndarray of shape (N,). The dense and feature paths compute it differently.
    log_weights : ndarray of shape (N,)
        w = log L_ii (finite where ``nonzero``).
    nonzero : ndarray of bool, shape (N,)
        Items with a positive diagonal; the others have C_ii = 0.
    m : int
        Number of items to select.
    rtol : float
        Residuals d_i² ≤ rtol (C_ii = 1, so this is relative) count as zero.
    rank : int
        An upper bound on rank C: after that many picks every residual is zero.
    group_of : callable, optional
        ``group_of(j)``, ndarray of bool of shape (N,): the items of item j's group. When given,
        the greedy runs in passes: an item of the group of an item picked in the current pass
        is not picked while another item is still pickable; once none is, a new pass starts
        (so every group gets one pick before any gets a second). None (default): no groups.

    Returns
    -------
    ndarray of shape (m,)
        Distinct indices in selection order.
    """
    residual = nonzero.astype(np.float64)  # d_i², the squared Cholesky residual of C
    gains = np.empty_like(residual)
    chosen = np.zeros(log_weights.shape[0], dtype=bool)
    selected: list[int] = []
    covered = None if group_of is None else np.zeros(log_weights.shape[0], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        while len(selected) < min(m, rank):
            np.maximum(residual, 0.0, out=residual)  # rounding can dip below zero
            np.log(residual, out=gains)
            gains[residual <= rtol] = -np.inf  # chosen items have residual 0
            gains += log_weights
            if covered is not None:
                if np.isfinite(gains[~covered]).any():
                    gains[covered] = -np.inf
                else:
                    covered[:] = False  # every pickable item's group has a pick: a new pass
            if not np.isfinite(gains.max()):
                break
            j = _pick(gains)
            selected.append(j)
            chosen[j] = True
            if covered is not None and group_of is not None:
                covered |= group_of(j)
            if len(selected) == min(m, rank):
                break
            e = new_row(j, len(selected) - 1, math.sqrt(residual[j]))
            np.square(e, out=e)
            residual -= e
            residual[j] = 0.0
    if len(selected) < m:
        # Rank exhausted: the rest go to the heaviest remaining items, ties to the lowest index.
        rest = np.flatnonzero(~chosen)
        key = np.where(nonzero[rest], log_weights[rest], -np.inf)
        order = np.lexsort((rest, -key))
        selected.extend(int(i) for i in rest[order[: m - len(selected)]])
    return np.asarray(selected, dtype=np.intp)


def greedy_map(
    kernel: ArrayLike,
    m: int,
    log_weights: ArrayLike | None = None,
    *,
    rtol: float | None = None,
    psd_rtol: float = PSD_RTOL,
    validate: bool = True,
    group_cosine: float | None = None,
) -> IntArray:
    """Greedy MAP of an m-DPP with a dense kernel (eq. 8–9), O(m²N) after the kernel.

    Parameters
    ----------
    kernel : array_like of shape (N, N)
        Symmetric positive semi-definite L-ensemble kernel.
    m : int
        Subset size, 1 ≤ m ≤ N.
    log_weights : array_like of shape (N,), optional
        Extra per-item log weights w: the DPP is diag(e^{w/2}) kernel diag(e^{w/2}) (for ADCS,
        w = 2αq with the Gram matrix C as kernel, eq. 7). Applied in the log domain, so any size is safe.
    rtol : float, optional
        Relative residual below which an item is linearly dependent on those chosen (default 1e-10).
    psd_rtol : float
        The kernel is refused when an eigenvalue is below −psd_rtol · trace (not positive
        semi-definite, beyond rounding).
    validate : bool
        ``False`` skips the checks of the kernel (finite, symmetric, positive semi-definite), for
        a kernel valid by construction (a Gram matrix the caller built); ``m`` and the weights
        are checked always.
    group_cosine : float, optional
        τ ∈ (0, 1]: at most one pick per group per pass, the group of item j being the items i
        with cosine C_ij / √(C_ii C_jj) ≥ τ (``_greedy_core``'s passes: once every remaining
        item is in the group of a pick of the current pass, a new pass starts). None (default):
        no groups.

    Returns
    -------
    ndarray of shape (m,)
        Distinct indices in selection order.

    Raises
    ------
    ValueError
        The kernel is not square, finite, symmetric and positive semi-definite (within
        ``psd_rtol``); ``m`` is out of range; a log weight is NaN or +inf; a tolerance is
        negative or not finite.
    """
    _check_tolerance("rtol", rtol)
    _check_tolerance("psd_rtol", psd_rtol)
    if validate:
        k = _check_kernel(kernel)
        _check_psd(k, psd_rtol)
    else:
        k = np.asarray(kernel, dtype=np.float64)
    n = k.shape[0]
    _check_m(m, n)
    w = _check_log_weights(log_weights, n)
    diag = np.diag(k).copy()
    nonzero = diag > 0
    inv_sqrt = np.zeros(n)
    inv_sqrt[nonzero] = 1.0 / np.sqrt(diag[nonzero])
    with np.errstate(divide="ignore"):
        total_w = np.where(nonzero, w + np.log(np.where(nonzero, diag, 1.0)), -np.inf)

    factor = np.empty((m, n))  # rows of the incremental Cholesky factor (Chen et al. 2018)

    def new_row(j: int, t: int, d_j: float) -> NDArray[np.float64]:
        e = k[j] * inv_sqrt * inv_sqrt[j] - factor[:t, j] @ factor[:t]
        e /= d_j
        factor[t] = e
        return e

    tol = _default_rtol(np.dtype(np.float64)) if rtol is None else rtol
    group_of = None
    if group_cosine is not None:
        tau = _check_group_cosine(group_cosine)

        def group_of(j: int) -> NDArray[np.bool_]:
            return np.asarray(k[j] * inv_sqrt * inv_sqrt[j] >= tau)

    return _greedy_core(new_row, total_w, nonzero, m, tol, n, group_of)


def greedy_map_features(
    features: ArrayLike,
    m: int,
    log_weights: ArrayLike | None = None,
    *,
    rtol: float | None = None,
    group_cosine: float | None = None,
) -> IntArray:
    """Greedy MAP of the m-DPP L = diag(e^{w/2}) F Fᵀ diag(e^{w/2}), never forming the N×N kernel.

    The Cholesky rows are computed in feature space (Gram–Schmidt on the chosen items' features), so
    memory beyond the features is O(N + m·k) and time O(m·N·k), one pass over F per pick. For ADCS, F holds the normalised updates φ_n (eq. 5) and
    w = 2αq (eq. 7); the result is the same as [`greedy_map`][adcs.dpp.greedy_map] on the dense
    kernel.

    Parameters
    ----------
    features : array_like of shape (N, k)
        One feature row per item; float32 rows are multiplied in float32 (half the memory traffic),
        the Cholesky recursion always runs in float64.
    m : int
        Subset size, 1 ≤ m ≤ N.
    log_weights : array_like of shape (N,), optional
        Per-item log weights w (default 0).
    rtol : float, optional
        Relative residual treated as zero (default 1e-10 for float64 features, 1e-5 for float32).
    group_cosine : float, optional
        τ ∈ (0, 1]: at most one pick per group per pass, as for
        [`greedy_map`][adcs.dpp.greedy_map], the cosine being that of the feature rows (one
        more product with F per pick). None (default): no groups.

    Returns
    -------
    ndarray of shape (m,)
        Distinct indices in selection order.
    """
    _check_tolerance("rtol", rtol)
    f = np.asarray(features)
    if f.dtype not in (np.float32, np.float64):
        f = _real("features", f)
    if f.ndim != 2 or f.shape[0] == 0 or f.shape[1] == 0:
        raise ValueError(f"features must be a non-empty 2-D array (N, k), got shape {f.shape}")
    n = f.shape[0]
    _check_m(m, n)
    w = _check_log_weights(log_weights, n)
    norms = row_norms(f)
    if not np.isfinite(norms).all():
        if not all(
            np.isfinite(f[i : i + _FEATURE_CHUNK]).all() for i in range(0, n, _FEATURE_CHUNK)
        ):
            raise ValueError("features contain NaN or infinite values")
    limit = np.finfo(f.dtype).max / (4.0 * math.sqrt(f.shape[1]))
    peak = float(norms.max()) if math.isfinite(float(norms.max())) else math.inf
    if not (np.finfo(f.dtype).tiny * 1e6 < peak < limit):
        # features this large (or small) would overflow the products below: one exact
        # power-of-two rescaling; it adds the same constant to every weight, so MAP is unchanged
        f = f * np.asarray(power_of_two_scale(f), dtype=f.dtype)
        norms = row_norms(f)
    nonzero = norms > 0
    inv_norm = np.zeros(n)
    inv_norm[nonzero] = 1.0 / norms[nonzero]
    with np.errstate(divide="ignore"):
        total_w = np.where(nonzero, w + 2.0 * np.log(np.where(nonzero, norms, 1.0)), -np.inf)

    inv_norm_f = inv_norm.astype(f.dtype)
    # Gram–Schmidt in feature space: q_t spans the chosen items' unit features, and the Cholesky
    # row is e_i = φ_i · q_t. One product with F per step; no (m, N) factor is stored.
    basis = np.empty((min(m, f.shape[1]), f.shape[1]))

    def new_row(j: int, t: int, d_j: float) -> NDArray[np.floating[Any]]:
        q = f[j].astype(np.float64) * inv_norm[j]
        for _ in range(2):  # re-orthogonalise once: "twice is enough"
            q -= basis[:t].T @ (basis[:t] @ q)
        q /= np.linalg.norm(q)
        basis[t] = q
        e = f @ q.astype(f.dtype)
        e *= inv_norm_f
        return e

    tol = _default_rtol(f.dtype) if rtol is None else rtol
    group_of = None
    if group_cosine is not None:
        tau = _check_group_cosine(group_cosine)

        def group_of(j: int) -> NDArray[np.bool_]:
            return np.asarray((f @ f[j]) * inv_norm_f * inv_norm_f[j] >= tau)

    return _greedy_core(new_row, total_w, nonzero, m, tol, f.shape[1], group_of)


def log_det(
    kernel: ArrayLike, subset: Sequence[int] | ArrayLike, *, allow_singular: bool = False
) -> float:
    """log det of the principal submatrix kernel[subset, subset], which must be positive definite.

    Parameters
    ----------
    kernel : array_like of shape (N, N)
    subset : sequence of int
        Distinct indices; the empty set has log det 0.
    allow_singular : bool
        Return −inf for a submatrix that is not positive definite (singular, or with a negative
        eigenvalue) instead of raising — e.g. to score candidate subsets.

    Raises
    ------
    ValueError
        The submatrix is not positive definite (unless ``allow_singular``); the message says
        whether it is singular or has a negative eigenvalue.
    """
    k = _check_kernel(kernel)
    given = np.asarray(subset)
    if given.size and given.dtype.kind not in "iu":  # a float is not rounded, a mask not read
        raise ValueError(f"subset must hold integer indices, got a {given.dtype} array")
    idx = given.astype(np.intp).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= k.shape[0]):
        raise ValueError(f"subset indices must lie in [0, {k.shape[0]}), got {idx.tolist()}")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"subset indices must be distinct, got {idx.tolist()}")
    if idx.size == 0:
        return 0.0
    sub = k[np.ix_(idx, idx)]
    try:
        factor = np.linalg.cholesky(sub)
    except np.linalg.LinAlgError:
        factor = None
    if factor is not None and (np.diag(factor) > 0).all():
        return float(2.0 * np.log(np.diag(factor)).sum())
    if allow_singular:
        return -math.inf
    eig = np.linalg.eigvalsh(sub)
    scale = max(float(np.abs(eig).max()), np.finfo(np.float64).tiny)
    if eig[0] < -PSD_RTOL * scale * idx.size:
        raise ValueError(
            f"kernel[subset, subset] is not positive semi-definite (eigenvalue {eig[0]:.3g}): "
            "its log det is not real; pass allow_singular=True to score it −inf"
        )
    raise ValueError(
        "kernel[subset, subset] is singular (log det −inf); pass allow_singular=True to get −inf"
    )


def exact_map(
    kernel: ArrayLike, m: int, log_weights: ArrayLike | None = None, *, chunk: int = 8192
) -> IntArray:
    """Exact MAP of an m-DPP by exhaustive search (verification only; N ≤ 25).

    Returns the size-m subset maximising Σ_{i∈S} w_i + log det kernel_S, sorted ascending; among
    equal optima the lexicographically smallest. If every subset is singular, the heaviest items
    (largest w_i + log kernel_ii) are returned, as the greedy fallback would.

    Parameters
    ----------
    kernel : array_like of shape (N, N)
    m : int
    log_weights : array_like of shape (N,), optional
    chunk : int
        Subsets evaluated per batched determinant call.
    """
    k = _check_kernel(kernel)
    n = k.shape[0]
    _check_psd(k, PSD_RTOL)
    if n > EXACT_MAP_MAX_N:
        raise ValueError(
            f"exact_map enumerates all C(N, m) subsets and refuses N > {EXACT_MAP_MAX_N}; got N={n}"
        )
    _check_m(m, n)
    w = _check_log_weights(log_weights, n)
    best_value, best_subset = -math.inf, None
    combos = itertools.combinations(range(n), m)
    while True:
        block = np.array(list(itertools.islice(combos, chunk)), dtype=np.intp)
        if block.size == 0:
            break
        sub = k[block[:, :, None], block[:, None, :]]
        sign, value = np.linalg.slogdet(sub)
        score = np.where(sign > 0, value + w[block].sum(axis=1), -np.inf)
        i = int(np.argmax(score))
        improves = best_subset is None or score[i] > best_value + _TIE_RTOL * max(
            1.0, abs(best_value)
        )
        if np.isfinite(score[i]) and improves:
            best_value, best_subset = float(score[i]), block[i]
    if best_subset is None:
        diag = np.diag(k)
        with np.errstate(divide="ignore"):
            key = np.where(diag > 0, w + np.log(np.where(diag > 0, diag, 1.0)), -np.inf)
        best_subset = np.sort(np.lexsort((np.arange(n), -key))[:m])
    return np.asarray(best_subset, dtype=np.intp)


def naive_greedy_map(kernel: ArrayLike, m: int, log_weights: ArrayLike | None = None) -> IntArray:
    """Greedy MAP recomputing every candidate's log det with ``np.linalg.slogdet`` (O(m·N·m³)).

    A transparent reference for [`greedy_map`][adcs.dpp.greedy_map] in tests and benchmarks: same
    objective (Σ w + log det kernel_S), same tie rule (lowest index); it stops at the kernel's rank
    and then fills with the heaviest remaining items, as the fast path does.
    """
    k = _check_kernel(kernel)
    _check_psd(k, PSD_RTOL)
    n = k.shape[0]
    _check_m(m, n)
    w = _check_log_weights(log_weights, n)
    diag = np.diag(k)
    selected: list[int] = []
    current = 0.0
    while len(selected) < m:
        rest = [i for i in range(n) if i not in selected]
        gains = np.full(len(rest), -np.inf)
        for pos, i in enumerate(rest):
            idx = [*selected, i]
            sign, value = np.linalg.slogdet(k[np.ix_(idx, idx)])
            rel = value - current - math.log(diag[i]) if diag[i] > 0 else -np.inf
            # relative residual d_i² = det ratio / L_ii; below tolerance it counts as zero
            if sign > 0 and rel > math.log(1e-10):
                gains[pos] = value + w[i] - current
        if not np.isfinite(gains).any():
            break
        j = rest[_pick(gains)]
        selected.append(j)
        current += float(gains[rest.index(j)] - w[j])
    if len(selected) < m:
        rest_arr = np.array([i for i in range(n) if i not in selected], dtype=np.intp)
        with np.errstate(divide="ignore"):
            key = np.where(
                diag[rest_arr] > 0, w[rest_arr] + np.log(np.abs(diag[rest_arr])), -np.inf
            )
        selected.extend(int(i) for i in rest_arr[np.lexsort((rest_arr, -key))[: m - len(selected)]])
    return np.asarray(selected, dtype=np.intp)
