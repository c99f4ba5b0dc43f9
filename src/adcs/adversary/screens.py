"""The screens' building blocks as functions of one round's directions and values.

`adcs.adversary.defence` composes them (`screen`); they are kept here so each file stays
readable. Shapes: n probed clients, unit directions of shape (n, dim).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from adcs.adversary.bound import outside_span
from adcs.dpp import row_norms, unit_rows
from adcs.schedulers.base import BoolArray, ClientStats, FloatArray, IntArray, finite_rows

__all__ = [
    "best_cosines",
    "cosines",
    "fenced",
    "nearest_peers",
    "neighbourhood_medians",
    "reported_directions",
    "too_novel",
    "unit_and_norms",
]

F32Array = NDArray[np.float32]


def cosines(directions: FloatArray, usable: BoolArray) -> FloatArray:
    """cos(d_i, d_j) of unit ``directions`` (n, dim), shape (n, n), float64.

    −inf on the diagonal and in the rows and columns of rows that are not usable, so that a row's
    maximum is its best cosine to another usable row.
    """
    n = directions.shape[0]
    out = np.full((n, n), -np.inf)
    idx = np.flatnonzero(usable)
    if idx.size >= 2:
        d = directions[idx]
        block = (d @ d.T).astype(np.float64)
        np.fill_diagonal(block, -np.inf)
        out[np.ix_(idx, idx)] = block
    return out


def best_cosines(cos: FloatArray) -> FloatArray:
    """max_{j ≠ i} cos_ij of a `cosines` matrix, shape (n,) (−inf without another row)."""
    return cos.max(axis=1, initial=-np.inf)


def nearest_peers(cos: FloatArray, usable: BoolArray, peers: int) -> IntArray:
    """The ``peers`` usable rows nearest each usable row by a `cosines` matrix, shape (n, p).

    −1 pads rows with fewer candidates and the rows that are not usable (p is
    min(peers, n_usable − 1), at least 1 so the shape is never empty).
    """
    n = cos.shape[0]
    idx = np.flatnonzero(usable)
    p = max(1, min(peers, idx.size - 1))
    out = np.full((n, p), -1, dtype=np.intp)
    if idx.size < 2:
        return out
    order = np.argsort(-cos[np.ix_(idx, idx)], axis=1, kind="stable")[:, :p]
    out[idx] = idx[order]
    return out


def neighbourhood_medians(values: FloatArray, peers: IntArray) -> FloatArray:
    """median({v_i} ∪ {v_j : j ∈ peers_i}) for each row, shape (n,).

    ``peers`` (n, p) as `nearest_peers` returns (−1 padding); non-finite values are
    ignored (a row whose own value is not finite stays so).

    Why the median of the neighbourhood and not a cap at the peers' values: a liar's value is
    one of the values of its neighbourhood and of each of its peers', so with p = 2 the liar and
    its two peers all get the same median — it can move its neighbourhood's common value within
    its honest peers' range, but not rise above them. A cap (min of its own value and its peers'
    largest, or their median) leaves every honest peer its own noisy value while the liar always
    sits at the cap, so it would win the within-group comparison nearly every round.
    """
    vals = np.asarray(values, dtype=np.float64)
    padded = np.append(vals, np.nan)  # index −1 → NaN
    padded[~np.isfinite(padded)] = np.nan
    neighbourhood = np.sort(
        np.concatenate([vals[:, None], padded[peers]], axis=1), axis=1
    )  # NaN sorts last
    count = np.isfinite(neighbourhood).sum(axis=1)
    low = np.take_along_axis(neighbourhood, (np.maximum(count - 1, 0) // 2)[:, None], axis=1)
    high = np.take_along_axis(neighbourhood, (count // 2)[:, None], axis=1)
    medians = (low[:, 0] + high[:, 0]) / 2
    return np.where(np.isfinite(vals), medians, vals)


def fenced(values: FloatArray, peers: IntArray, fence: float) -> tuple[FloatArray, BoolArray]:
    """Each value clipped at its fence φ · max(its peers' smallest value, the round's median),
    and the rows clipped; shapes (n,).

    ``peers`` (n, p) as `nearest_peers` returns (−1 padding, non-finite values ignored); φ =
    ``fence`` ≥ 1. A value at or below its fence is kept *as it is* — an honest client whose
    claim its data-alike peers corroborate is left untouched (where nobody attacks and no one is
    clipped, the scheduler sees exactly the reports) — and only an outlier is moved, to its fence.

    Why the smallest peer value: a claim must be corroborated by *every* peer, so one colluding
    peer that claims as much (a Sybil beside an honest group-mate) does not lift the fence; to
    lift it, all p peers must be colluders, and near-duplicates count as one peer
    (`adcs.adversary.peers`). Why the floor at φ × the round's median: peers that report 0 (the
    smother) pull a client's fence down to φ × the median of all reports, not to 0, so a group in
    need keeps at least φ × the typical client's claim. Rows without a finite value are left as
    they are (not clipped); a row without a finite peer value is judged against the floor alone.
    """
    vals = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(vals)
    if not finite.any():
        return vals, np.zeros(vals.shape, dtype=bool)
    padded = np.append(vals, np.nan)  # index −1 → NaN
    padded[~np.isfinite(padded)] = np.nan
    mine = padded[peers]
    has_peer = np.isfinite(mine).any(axis=1)
    low = np.where(has_peer, np.nanmin(np.where(has_peer[:, None], mine, 0.0), axis=1), -np.inf)
    fences = fence * np.maximum(low, float(np.median(vals[finite])))
    clipped = finite & (vals > fences)
    return np.where(clipped, fences, vals), clipped


def unit_and_norms(rows: FloatArray) -> tuple[F32Array, FloatArray]:
    """Unit rows (float32) and norms of finite rows (n, dim)."""
    norms = row_norms(rows)
    if norms.max(initial=0.0) > 1e30:  # float32 division would overflow: the careful path
        return unit_rows(rows), norms
    safe = np.where(norms > 0, norms, 1.0)
    return (np.asarray(rows, dtype=np.float32) / safe.astype(np.float32)[:, None]), norms


def too_novel(novelty: float, directions: FloatArray, usable: BoolArray) -> BoolArray:
    """Usable rows whose part outside the others' span exceeds ν × its median, shape (n,)."""
    outside = outside_span(directions, usable)
    finite = np.isfinite(outside)
    if finite.sum() < 3:  # no median to speak of
        return np.zeros(usable.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        return np.asarray(outside > novelty * float(np.median(outside[finite])), dtype=bool)


def reported_directions(stats: ClientStats) -> tuple[F32Array | None, FloatArray | None, BoolArray]:
    """Unit reported directions (n_probed, dim), their norms (n_probed,) and which rows are finite
    (n_probed,); directions and norms are None when no update was reported."""
    n = stats.n_probed
    if stats.updates is None:
        return None, None, np.zeros(n, dtype=bool)
    finite = finite_rows(stats.updates)
    if finite.all():
        directions, norms = unit_and_norms(stats.updates)
        return directions, norms, finite
    directions = np.zeros(stats.updates.shape, dtype=np.float32)
    norms = np.full(n, np.nan)
    if finite.any():
        directions[finite], norms[finite] = unit_and_norms(stats.updates[finite])
    return directions, norms, finite
