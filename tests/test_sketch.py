"""Johnson–Lindenstrauss sketches: norms and inner products kept, seeded, failed rows kept failed."""

from __future__ import annotations

import numpy as np
import pytest

from adcs import sketch as sketch_module
from adcs.sketch import UpdateSketch


@pytest.mark.parametrize("dense", [True, False])
def test_sketch_keeps_norms_and_cosines_within_the_jl_error(dense: bool) -> None:
    rng = np.random.default_rng(0)
    dim, k = 3000, 512
    g = rng.normal(size=(60, dim)).astype(np.float32)
    g[1] = g[0] + 0.5 * g[1]  # a correlated pair: cosine ≈ 0.89
    sketch = UpdateSketch(dim, k, key=11, dense=dense)
    y = sketch.apply(g)

    assert y.shape == (60, k) and y.dtype == np.float32
    ratio = np.linalg.norm(y, axis=1) ** 2 / np.linalg.norm(g, axis=1) ** 2
    # ‖Sg‖²/‖g‖² has mean 1 and sd ≈ √(2/k) = 0.0625 for either projection
    assert abs(ratio.mean() - 1.0) < 0.03 and 0.04 < ratio.std() < 0.09
    unit_g = g / np.linalg.norm(g, axis=1, keepdims=True)
    unit_y = y / np.linalg.norm(y, axis=1, keepdims=True)
    cos_g, cos_y = unit_g @ unit_g.T, unit_y @ unit_y.T
    assert np.abs(cos_g - cos_y).max() < 5 / np.sqrt(k)
    assert abs(cos_y[0, 1] - cos_g[0, 1]) < 0.05


def test_sketch_is_a_pure_function_of_key_and_sizes() -> None:
    g = np.random.default_rng(1).normal(size=(4, 200)).astype(np.float32)
    a = UpdateSketch(200, 16, key=5).apply(g)
    np.testing.assert_array_equal(a, UpdateSketch(200, 16, key=5).apply(g))
    # a row's sketch does not depend on the other rows (up to float32 rounding in the product)
    np.testing.assert_allclose(a[2:], UpdateSketch(200, 16, key=5).apply(g[2:]), atol=1e-5)
    assert not np.allclose(a, UpdateSketch(200, 16, key=6).apply(g))


def test_sparse_projection_is_chosen_when_dense_is_too_big_and_is_sparse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sketch_module, "DENSE_MAX", 1 << 16)
    sketch = UpdateSketch(20_000, 64, key=2)  # 1.3 M numbers dense: above the limit
    assert sketch.dense is False
    assert sketch._matrix.nnz == 20_000 * 8  # s = 8 outputs per input coordinate
    e = np.zeros((1, 20_000), dtype=np.float32)
    e[0, 12345] = 1.0
    row = sketch.apply(e)[0]
    assert np.count_nonzero(row) == 8 and np.allclose(np.abs(row[row != 0]), 1 / np.sqrt(8))


def test_no_shorter_sketch_is_the_identity_and_bad_rows_stay_bad() -> None:
    g = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(UpdateSketch(4, 8, key=0).apply(g), g)
    bad = np.ones((2, 300), dtype=np.float32)
    bad[1, 7] = np.nan
    for dense in (True, False):
        y = UpdateSketch(300, 32, key=0, dense=dense).apply(bad)
        assert np.isfinite(y[0]).all() and not np.isfinite(y[1]).all()
    with pytest.raises(ValueError, match="shape"):
        UpdateSketch(300, 32, key=0).apply(np.ones((2, 299)))
    with pytest.raises(ValueError, match="k"):
        UpdateSketch(300, 0, key=0)
