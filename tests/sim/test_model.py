"""The batched logistic-regression model: loss values, gradients, shared and per-client passes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adcs.sim import LogisticRegression, local_update, to_unit_float
from adcs.sim.model import PIXEL_SCALE, Model, SharedInputs


def as_matrix(params: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A flat logistic-regression parameter vector as its (F + 1, C) matrix (matrices pass)."""
    if params.ndim == 2:
        return params
    f = x.shape[-1]
    return params.reshape(f + 1, params.size // (f + 1))


def reference_loss(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Mean softmax cross-entropy in float64, written directly from the definition."""
    params = as_matrix(params, x)
    f = x.shape[1]
    z = x.astype(np.float64) @ params[:f].astype(np.float64) + params[f].astype(np.float64)
    lse = np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1)) + z.max(axis=1)
    return float(np.mean(lse - z[np.arange(len(y)), y]))


def reference_sample_grads(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample gradients (S, F+1, C) in float64: [x_s; 1] ⊗ (softmax(z_s) − e_{y_s})."""
    params = as_matrix(params, x)
    f = x.shape[1]
    x64 = x.astype(np.float64)
    z = x64 @ params[:f].astype(np.float64) + params[f].astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    x1 = np.hstack([x64, np.ones((x.shape[0], 1))])
    return np.einsum("sf,sc->sfc", x1, p)


def random_problem(
    seed: int, r: int, b: int, f: int = 6, c: int = 5
) -> tuple[LogisticRegression, np.ndarray, np.ndarray, np.ndarray]:
    """A model, flat parameters (r, dim), inputs (r, b, f) and labels (r, b)."""
    rng = np.random.default_rng(seed)
    params = rng.normal(0, 0.5, size=(r, (f + 1) * c)).astype(np.float32)
    x = rng.random((r, b, f), dtype=np.float32)
    y = rng.integers(0, c, size=(r, b))
    return LogisticRegression(f, c), params, x, y


def test_loss_matches_hand_computation() -> None:
    model = LogisticRegression(n_features=2, n_classes=3)
    params = np.array([[0.0, 1.0, 2.0, 5.0, 5.0, 5.0, 0.0, 0.0, 1.0]], dtype=np.float32)
    x = np.array([[[1.0, 0.0]]], dtype=np.float32)  # logits z = (0, 1, 2) + (0, 0, 1) = (0, 1, 3)
    loss, _ = model.loss_and_grad(params, x, np.array([[1]]))
    expected = math.log(math.exp(0) + math.exp(1) + math.exp(3)) - 1.0
    assert loss[0] == pytest.approx(expected, rel=1e-6)


def test_gradient_equals_finite_differences() -> None:
    model, params, x, y = random_problem(seed=1, r=2, b=7)
    _, grad = model.loss_and_grad(params, x, y)
    eps = 1e-5
    for r in range(params.shape[0]):
        base = as_matrix(params[r], x).astype(np.float64)
        numeric = np.empty_like(base)
        for idx in np.ndindex(base.shape):
            up, down = base.copy(), base.copy()
            up[idx] += eps
            down[idx] -= eps
            numeric[idx] = (reference_loss(up, x[r], y[r]) - reference_loss(down, x[r], y[r])) / (
                2 * eps
            )
        np.testing.assert_allclose(grad[r], numeric.ravel(), rtol=1e-4, atol=1e-6)


def test_batched_problems_are_independent() -> None:
    model, params, x, y = random_problem(seed=2, r=3, b=4)
    loss, grad = model.loss_and_grad(params, x, y)
    for r in range(3):
        loss_r, grad_r = model.loss_and_grad(params[r : r + 1], x[r : r + 1], y[r : r + 1])
        assert loss[r] == pytest.approx(float(loss_r[0]), rel=1e-6)
        np.testing.assert_allclose(grad[r], grad_r[0], rtol=1e-5, atol=1e-7)
        assert loss[r] == pytest.approx(reference_loss(params[r], x[r], y[r]), rel=1e-5)


def test_shared_forward_and_backward_match_reference() -> None:
    model, params, x3, y3 = random_problem(seed=3, r=3, b=20)
    x, y = x3[0], y3[0]  # 20 samples shared by 3 models: 5 clients of B = 4
    forward = model.shared_forward(params, x, y)
    per_sample = [reference_sample_grads(params[j], x, y) for j in range(3)]
    for j in range(3):
        losses = [reference_loss(params[j], x[s : s + 1], y[s : s + 1]) for s in range(20)]
        np.testing.assert_allclose(forward.sample_loss[j], losses, rtol=1e-5)
    weights = np.random.default_rng(4).random((2, 20)).astype(np.float32)
    weighted = model.weighted_grads(forward, [2, 0], weights)
    for i, j in enumerate([2, 0]):
        expected = np.einsum("s,sfc->fc", weights[i], per_sample[j])
        np.testing.assert_allclose(weighted[i], expected.ravel(), rtol=1e-5, atol=1e-6)
    for j, blocks in ((1, np.arange(5)), (2, np.array([4, 1]))):  # all blocks, or some
        grouped = model.block_grads(forward, j, blocks, block_size=4, scale=-0.5)
        expected = -0.5 * per_sample[j].reshape(5, 4, 7, 5).mean(axis=1)[blocks]
        np.testing.assert_allclose(grouped, expected.reshape(len(blocks), -1), rtol=1e-5, atol=1e-6)


def test_inputs_of_any_shape_with_the_right_size_are_flattened() -> None:
    model, params, x, y = random_problem(seed=5, r=2, b=6, f=6)
    loss, grad = model.loss_and_grad(params, x, y)
    loss_2d, grad_2d = model.loss_and_grad(params, x.reshape(2, 6, 2, 3), y)
    np.testing.assert_array_equal(loss, loss_2d)
    np.testing.assert_array_equal(grad, grad_2d)
    with pytest.raises(ValueError, match="features"):
        model.loss_and_grad(params, x[..., :5], y)


def test_evaluate_counts_argmax_and_matches_loss() -> None:
    model, params, x3, y3 = random_problem(seed=6, r=2, b=30)
    loss, correct = model.evaluate(params, x3[0], y3[0])
    f = x3.shape[2]
    for j in range(2):
        w = as_matrix(params[j], x3[0])
        z = x3[0].astype(np.float64) @ w[:f] + w[f]
        np.testing.assert_array_equal(correct[j], z.argmax(axis=1) == y3[0])
        assert loss[j].mean() == pytest.approx(reference_loss(params[j], x3[0], y3[0]), rel=1e-5)


def test_local_update_one_step_is_minus_lr_times_gradient() -> None:
    model, params, x, y = random_problem(seed=7, r=2, b=5)
    update, first_loss = local_update(model, params, x[:, None], y[:, None], local_lr=0.1)
    loss, grad = model.loss_and_grad(params, x, y)
    np.testing.assert_array_equal(update, -np.float32(0.1) * grad)
    np.testing.assert_array_equal(first_loss, loss)


class _Fixed:
    """A model whose gradient is given: zeros of both signs, and its own array each call."""

    def __init__(self, grad: np.ndarray) -> None:
        self.grad, self.dim = grad, grad.shape[1]

    def loss_and_grad(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple:
        return np.zeros(len(params), np.float32), self.grad.copy()


def test_local_update_first_step_has_the_bits_of_zero_minus_lr_times_gradient() -> None:
    """The first step's Δ is computed without a zeroed array but keeps the bits of 0 − η∇:
    +0 where the gradient is ±0 (−η∇ would give −0 for +0), C order, float32."""
    grad = np.asfortranarray(np.array([[0.0, -0.0, 1.5], [-2.0, 0.0, 3e-39]], np.float32))
    params = np.zeros((2, 3), np.float32)
    x, y = np.zeros((2, 1, 1, 1), np.float32), np.zeros((2, 1, 1), np.int64)
    update, _ = local_update(_Fixed(grad), params, x, y, local_lr=0.1)
    expected = np.zeros((2, 3), np.float32)
    expected -= np.float32(0.1) * grad
    assert update.dtype == np.float32 and update.flags.c_contiguous
    assert update.tobytes() == expected.tobytes()
    assert not np.signbit(update[0, 0]) and not np.signbit(update[0, 1])


def test_local_update_runs_sequential_steps() -> None:
    model, params, x, y = random_problem(seed=8, r=2, b=12)
    xb, yb = x.reshape(2, 3, 4, -1), y.reshape(2, 3, 4)  # E = 3 minibatches of B = 4
    update, first_loss = local_update(model, params, xb, yb, local_lr=0.2)
    for r in range(2):
        w = as_matrix(params[r], x).astype(np.float64)
        for e in range(3):
            w = w - 0.2 * reference_sample_grads(w, xb[r, e], yb[r, e]).mean(axis=0)
        np.testing.assert_allclose(params[r] + update[r], w.ravel(), rtol=1e-5, atol=1e-6)
        assert first_loss[r] == pytest.approx(reference_loss(params[r], xb[r, 0], yb[r, 0]), 1e-5)


def test_local_update_rejects_mismatched_shapes() -> None:
    model, params, x, y = random_problem(seed=9, r=2, b=4)
    with pytest.raises(ValueError, match="x_batches"):
        local_update(model, params, x, y, local_lr=0.1)


def test_logistic_regression_follows_the_protocol_and_offers_shared_inputs() -> None:
    model = LogisticRegression()
    assert isinstance(model, Model) and isinstance(model, SharedInputs)


def test_init_params_are_zero_and_sized() -> None:
    model = LogisticRegression()
    params = model.init_params(3)
    assert params.shape == (3, 7850) and params.dtype == np.float32
    assert model.dim == 7850 and not params.any()


@pytest.mark.parametrize("kwargs", [{"n_features": 0}, {"n_classes": 1}, {"n_classes": 2.5}])
def test_invalid_hyperparameters_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LogisticRegression(**kwargs)  # type: ignore[arg-type]


def test_to_unit_float_scales_pixels() -> None:
    pixels = np.array([[0, 1, 128, 255]], dtype=np.uint8)
    out = to_unit_float(pixels)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, pixels.astype(np.float32) * PIXEL_SCALE)
    assert out[0, 3] == pytest.approx(1.0, abs=1e-7)
    floats = np.array([[0.25, 0.5]])
    assert to_unit_float(floats).dtype == np.float32
