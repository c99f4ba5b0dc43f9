"""Evaluation: per-client test accuracy and test loss of many runs' models, at bounded cost."""

from __future__ import annotations

import numpy as np

from adcs.sim.data import ClientData
from adcs.sim.model import Model
from adcs.sim.spec import F32Array, F64Array, IntArray
from adcs.streams import Domain, round_generator, stream_key

_EVAL_RUNS_PER_PRODUCT = 32

_EVAL_CACHE_BYTES = 1 << 28
"""Evaluation inputs kept in memory between evaluations (256 MB); beyond, generated in blocks."""

_EVAL_BLOCK_ROWS = 16_384
"""Test samples evaluated per product when the evaluation set is not kept (bounds memory)."""


class _Evaluator:
    """Per-client test accuracy and test loss of many runs, at bounded cost.

    The evaluated clients are all of them, or a fixed subset (``SimConfig.eval_clients``). Their
    test inputs are gathered once and kept when they fit `_EVAL_CACHE_BYTES`; otherwise
    they are gathered anew at every evaluation in blocks of `_EVAL_BLOCK_ROWS` samples, so
    memory stays bounded whatever the population (test data generated on demand included).
    """

    def __init__(self, data: ClientData, model: Model, eval_clients: int | None) -> None:
        self.clients = _eval_subset(data.n_clients, eval_clients)
        self.data = data
        self.model = model
        self.n_clients = int(self.clients.size)
        sizes = data.test_sizes[self.clients]
        self.sizes = sizes.astype(np.float64)
        self.rows = data.test_rows(self.clients)
        self.owner = np.repeat(np.arange(self.n_clients), sizes)
        values = int(np.prod(data.input_shape))
        self.x: F32Array | None = None
        if self.rows.size * values * 4 <= _EVAL_CACHE_BYTES:
            union, inverse = np.unique(self.rows, return_inverse=True)
            self.x, self.y = data.test_batch(union)
            self.inverse = inverse.reshape(-1)
            self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def __call__(self, params: F32Array) -> tuple[F64Array, F64Array]:
        """Client accuracies (R, n_eval_clients) and test losses (R,) of R models (R, dim)."""
        n_runs = params.shape[0]
        acc = np.empty((n_runs, self.n_clients))
        loss = np.empty(n_runs)
        for start in range(0, n_runs, _EVAL_RUNS_PER_PRODUCT):
            chunk = slice(start, start + _EVAL_RUNS_PER_PRODUCT)
            acc[chunk], loss[chunk] = (
                self._cached(params[chunk]) if self.x is not None else self._blocks(params[chunk])
            )
        return acc, loss

    def _cached(self, params: F32Array) -> tuple[F64Array, F64Array]:
        assert self.x is not None
        sample_loss, correct = self.model.evaluate(params, self.x, self.y)
        per_row = correct[:, self.inverse].astype(np.float64)
        acc = np.add.reduceat(per_row, self.starts, axis=1) / self.sizes
        return acc, sample_loss.mean(axis=1, dtype=np.float64)

    def _blocks(self, params: F32Array) -> tuple[F64Array, F64Array]:
        hits = np.zeros((params.shape[0], self.n_clients))
        total_loss = np.zeros(params.shape[0])
        for start in range(0, self.rows.size, _EVAL_BLOCK_ROWS):
            part = slice(start, start + _EVAL_BLOCK_ROWS)
            sample_loss, correct = self.model.evaluate(
                params, *self.data.test_batch(self.rows[part])
            )
            owner = self.owner[part]  # ascending: one segment per client of the block
            first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            hits[:, owner[first]] += np.add.reduceat(correct.astype(np.float64), first, axis=1)
            total_loss += sample_loss.sum(axis=1, dtype=np.float64)
        return hits / self.sizes, total_loss / self.rows.size


def _eval_subset(n_clients: int, eval_clients: int | None) -> IntArray:
    """The evaluated clients, ascending: all, or a fixed uniform subset of ``eval_clients``."""
    if eval_clients is None or eval_clients >= n_clients:
        return np.arange(n_clients, dtype=np.intp)
    # one fixed draw, the same for every seed and run, so their metrics compare like for like
    rng = round_generator(stream_key(0), Domain.EVALUATION, 0)
    return np.sort(rng.choice(n_clients, size=eval_clients, replace=False)).astype(np.intp)
