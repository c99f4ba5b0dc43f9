"""Johnson–Lindenstrauss sketches of client updates (docs/design.md §7: schedulers at scale).

A scheduler that only compares update *directions* (ADCS's kernel C = ΦᵀΦ, eq. 5; DivFL's
distances; OCS's norms) can work on y = S g with S a random k × dim projection, k ≪ dim: for any
two updates, inner products, norms and so cosines are kept within ε with k = O(log(n)/ε²)
(Johnson and Lindenstrauss 1984). The simulator (``SimConfig.sketch_dim``) hands schedulers
sketched updates and aggregates the true ones; a Flower strategy can do the same with
`UpdateSketch`.

Two projections, both scaled so that E‖S g‖² = ‖g‖²:

* dense Gaussian, S_ij ~ N(0, 1/k), when dim · k is small enough to hold (≤ `DENSE_MAX`
  numbers, 128 MB);
* otherwise a sparse JL transform (Kane and Nelson 2014): every input coordinate goes to
  ``s`` = `SPARSE_NONZEROS` of the k outputs with random signs, scaled 1/√s — O(dim · s)
  memory, a product costs O(nnz).

The projection is a pure function of (key, dim, k): the same for every run of a seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int
from adcs.streams import Domain, round_generator

__all__ = ["DENSE_MAX", "SPARSE_NONZEROS", "UpdateSketch"]

F32Array = NDArray[np.float32]

DENSE_MAX = 1 << 25
"""Largest dim · k held as a dense float32 matrix (128 MB)."""
SPARSE_NONZEROS = 8
"""Outputs each input coordinate is sent to by the sparse transform (capped at k)."""


@dataclass(frozen=True, eq=False)
class UpdateSketch:
    """A seeded JL projection of updates of length ``dim`` to ``k`` numbers.

    Parameters
    ----------
    dim : int
        Length of an update (≥ 1).
    k : int
        Sketch length (≥ 1; a sketch no shorter than the update is the update itself).
    key : int
        Stream key (e.g. [`adcs.streams.stream_key`][adcs.sim.stream_key] of the seed).
    dense : bool, optional
        Force the dense (True) or sparse (False) projection; default by size (`DENSE_MAX`).
    """

    dim: int
    k: int
    key: int
    dense: bool | None = None
    _matrix: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_int("dim", self.dim)
        check_int("k", self.k)
        dense = self.dim * self.k <= DENSE_MAX if self.dense is None else bool(self.dense)
        object.__setattr__(self, "dense", dense)
        object.__setattr__(self, "_matrix", None if self.identity else self._build(dense))

    @property
    def identity(self) -> bool:
        """The sketch would be no shorter than the update: updates pass unchanged."""
        return self.k >= self.dim

    @property
    def out_dim(self) -> int:
        return self.dim if self.identity else self.k

    def _build(self, dense: bool) -> Any:
        rng = round_generator(self.key, Domain.SKETCH, 0)
        if dense:
            scale = np.float32(1.0 / np.sqrt(self.k))
            return rng.standard_normal((self.dim, self.k), dtype=np.float32) * scale
        from scipy import sparse

        s = min(SPARSE_NONZEROS, self.k)
        # s distinct outputs per input coordinate: the first s of a random permutation of k,
        # drawn as the argsort of uniform keys, in blocks to bound memory
        cols = np.empty((self.dim, s), dtype=np.int32)
        block = max(1, (1 << 22) // self.k)
        for start in range(0, self.dim, block):
            stop = min(start + block, self.dim)
            keys = rng.random((stop - start, self.k), dtype=np.float32)
            cols[start:stop] = np.argpartition(keys, s - 1, axis=1)[:, :s]
        signs = np.where(rng.random((self.dim, s)) < 0.5, -1.0, 1.0).astype(np.float32)
        signs *= np.float32(1.0 / np.sqrt(s))
        rows = np.repeat(np.arange(self.dim, dtype=np.int32), s)
        return sparse.csr_matrix(
            (signs.ravel(), (rows, cols.ravel())), shape=(self.dim, self.k), dtype=np.float32
        )

    def apply(self, updates: NDArray[np.floating[Any]]) -> F32Array:
        """Sketched updates y = g S, shape (n, k), float32, of ``updates`` (n, dim).

        Non-finite rows stay non-finite (so runtimes and schedulers still see a failed probe).
        """
        g = np.asarray(updates, dtype=np.float32)
        if g.ndim != 2 or g.shape[1] != self.dim:
            raise ValueError(f"updates must have shape (n, {self.dim}), got {g.shape}")
        if self.identity:
            return g
        if self.dense:
            return np.asarray(g @ self._matrix, dtype=np.float32)
        out = self._matrix.T @ g.T  # sparse (k, dim) @ dense (dim, n)
        return np.ascontiguousarray(np.asarray(out, dtype=np.float32).T)
