"""Other layouts of the round's products, timed against the simulator's own on the same inputs.

Used by ``adcs bench sim`` (``benchmarks/bench_sim.py``) after its breakdown. Each row is a change
to the arithmetic's layout that would make a part of the round cheaper on some machines; the
simulator keeps its own layout unless the other one is faster *here* — and a layout that gives
different bits moves every committed result, so it has to be clearly faster to be worth that.
Printed per row: the least CPU time per call of each form, and whether the other form gives the
same bits (else the largest relative difference).

* **probe products, (classes, features)**: the per-client gradients of 30 clients as
  (C × B) · (B × F) products, then transposed into the flat (F + 1, C) layout of the parameters;
  and the product alone (what a model holding its weights as (C, F) would pay);
* **forward, x · W**: the shared forward pass as (S × F) · (F × kC), transposed into the
  (k, C, S) logits the softmax reads, instead of (kC × F) · (F × S);
* **gather in one pass**: the uint8 → float32 conversion as one ufunc call with a float32 loop
  instead of a copy and a scaling pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from adcs.sim import FederatedData, LogisticRegression
from adcs.sim.data import PIXEL_SCALE, to_unit_float

CALLS = 200
"""Calls per timing; the least of :data:`REPEATS` timings is reported."""

REPEATS = 5

PRODUCT_ALONE = "  the (C x B)(B x F) product alone"


def _least_ms(call: Callable[[], object]) -> float:
    best = np.inf
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(CALLS):
            call()
        best = min(best, time.process_time() - start)
    return float(best) / CALLS * 1e3


def _same(ours: np.ndarray, other: np.ndarray) -> str:
    if np.array_equal(ours, other):
        return "same bits"
    scale = float(np.abs(ours).max()) or 1.0
    return f"differs, max rel. {float(np.abs(ours - other).max()) / scale:.1e}"


def _inputs(data: FederatedData, runs: int, batch: int) -> tuple[Any, ...]:
    """A round's shared inputs: ``batch`` rows of every client, and ``runs`` models' weights."""
    clients = np.arange(data.n_clients)
    local = np.tile(np.arange(batch), (len(clients), 1))
    rows = data.train_rows(clients, local).reshape(-1)
    x, y = data.train_batch(rows)
    model = LogisticRegression(int(np.prod(data.input_shape)), data.n_classes)
    rng = np.random.default_rng(0)
    params = (0.01 * rng.standard_normal((runs, model.dim))).astype(np.float32)
    return model, params, x.reshape(len(rows), -1), y, rows


Pair = tuple[str, Callable[[], np.ndarray], Callable[[], np.ndarray]]


def alternatives(data: FederatedData, runs: int = 6, batch: int = 16) -> list[Pair]:
    """(name, the simulator's form, the other form) of each row, on one round's inputs.

    Both forms of a row compute the same numbers up to float32 rounding, except the product
    alone, which is only the other form's product (in its own layout).
    """
    model, params, x, y, rows = _inputs(data, runs, batch)
    f, c = model.n_features, model.n_classes
    forward = model.shared_forward(params, x, y)
    blocks = np.arange(data.n_clients)

    def probe_ours() -> np.ndarray:
        return model.block_grads(forward, 0, blocks, batch, 1.0)

    d_cb = np.ascontiguousarray(forward.cache[0].reshape(c, -1, batch).transpose(1, 0, 2))
    xb = x.reshape(-1, batch, f)

    def probe_product() -> np.ndarray:
        return np.matmul(d_cb * np.float32(1.0 / batch), xb)  # (G, C, F)

    def probe_other() -> np.ndarray:
        d = d_cb * np.float32(1.0 / batch)
        out = np.empty((len(blocks), f + 1, c), dtype=np.float32)
        out[:, :f, :] = np.matmul(d, xb).transpose(0, 2, 1)
        d.sum(axis=2, out=out[:, f, :])
        return out.reshape(len(blocks), model.dim)

    w = params.reshape(runs, f + 1, c)

    def forward_ours() -> np.ndarray:
        return model._logits_shared(w, x)

    def forward_other() -> np.ndarray:
        z = x @ w[:, :f, :].transpose(1, 0, 2).reshape(f, runs * c)  # (S, kC)
        z = np.ascontiguousarray(z.T).reshape(runs, c, -1)
        z += w[:, f, :, None]
        return z

    images = data.train_images
    scratch = np.empty((len(rows), *images.shape[1:]), dtype=images.dtype)
    out = np.empty(scratch.shape, dtype=np.float32)

    def gather_ours() -> np.ndarray:
        return to_unit_float(np.take(images, rows, axis=0, out=scratch), out=out).copy()

    def gather_other() -> np.ndarray:
        samples = np.take(images, rows, axis=0, out=scratch)
        return np.multiply(samples, PIXEL_SCALE, out=out, dtype=np.float32).copy()

    pairs: list[Pair] = [
        ("probe products, (classes, features)", probe_ours, probe_other),
        (PRODUCT_ALONE, probe_ours, probe_product),
        (f"forward x W ({runs} runs)", forward_ours, forward_other),
    ]
    if images.dtype == np.uint8:
        pairs.append(("gather in one pass", gather_ours, gather_other))
    return pairs


def layout_rows(data: FederatedData) -> list[str]:
    """The table's lines: each alternative timed against the simulator's form."""
    lines = [f"{'layout':38s} {'ours ms':>8s} {'other ms':>9s}  {'ours/other':>10s}  bits"]
    for name, ours, other in alternatives(data):
        ours_ms, other_ms = _least_ms(ours), _least_ms(other)
        bits = "(not comparable)" if name == PRODUCT_ALONE else _same(ours(), other())
        lines.append(
            f"{name:38s} {ours_ms:8.3f} {other_ms:9.3f}  {ours_ms / other_ms:10.2f}  {bits}"
        )
    return lines
