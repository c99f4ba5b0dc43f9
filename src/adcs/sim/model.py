"""Batched models for the simulator: every array carries a leading axis of independent problems.

The paper's model (Sec. 6) is multinomial logistic regression, 784 → 10 with a bias, trained with the
softmax cross-entropy loss. Its parameters are one array of shape (785, 10): rows 0–783 are the
weights, row 784 the bias. The simulator advances many runs at once, so parameters come stacked,
shape (n_runs, 785, 10), and every function below works on the whole stack with a few matrix products.

Two kinds of batching are used:

* **independent problems** (:meth:`Model.loss_and_grad`, :func:`local_update`): problem r has its own
  parameters ``params[r]`` and its own minibatch ``x[r]``. Used for local SGD steps after the first
  and by single clients (the Flower client).
* **shared inputs** (:meth:`Model.shared_forward` and the two backward passes): k runs evaluate the
  *same* samples ``x`` (every client's minibatch of a round) at their own parameters. For logistic
  regression this is one product ``x @ [W_1 … W_k]``, which is much faster than k separate ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "PIXEL_SCALE",
    "LogisticRegression",
    "Model",
    "SharedForward",
    "local_update",
    "to_unit_float",
]

F32Array = NDArray[np.float32]
IntArray = NDArray[np.integer[Any]]
BoolArray = NDArray[np.bool_]

PIXEL_SCALE = np.float32(1.0 / 255.0)
"""uint8 pixel p becomes the float32 input ``p * PIXEL_SCALE`` in [0, 1]."""


def to_unit_float(images: NDArray[Any], out: F32Array | None = None) -> F32Array:
    """Model inputs from stored images: uint8 pixels scaled by :data:`PIXEL_SCALE`, floats as float32.

    Parameters
    ----------
    images : ndarray of shape (..., n_features), uint8 or floating
    out : ndarray of float32 with the same shape, optional
        Where to write the result.

    Returns
    -------
    ndarray of float32, same shape as ``images``
    """
    if out is None:
        out = np.empty(images.shape, dtype=np.float32)
    np.copyto(out, images, casting="same_kind")
    if images.dtype == np.uint8:
        out *= PIXEL_SCALE  # the same value as float32(p) * PIXEL_SCALE, computed in two passes
    return out


@dataclass(frozen=True, eq=False)
class SharedForward:
    """The forward pass of k runs over the same samples, kept for the backward passes.

    Attributes
    ----------
    x : ndarray of shape (n_samples, n_features), float32
        The shared inputs.
    sample_loss : ndarray of shape (k, n_samples), float32
        Loss of each sample under each run's parameters.
    cache : Any
        Model-specific intermediate values (for logistic regression: ∂loss/∂logits, shape
        (k, n_classes, n_samples)).
    """

    x: F32Array
    sample_loss: F32Array
    cache: Any


@runtime_checkable
class Model(Protocol):
    """What the simulator needs from a model; all methods are batched over a leading axis."""

    @property
    def param_shape(self) -> tuple[int, ...]:
        """Shape of one model's parameters."""
        ...

    @property
    def dim(self) -> int:
        """Number of parameters of one model (the length of a flattened update)."""
        ...

    def init_params(self, n_runs: int) -> F32Array:
        """Initial parameters w⁽⁰⁾, shape (n_runs, *param_shape), float32."""
        ...

    def loss_and_grad(
        self, params: F32Array, x: F32Array, y: IntArray
    ) -> tuple[F32Array, F32Array]:
        """Mean minibatch loss (R,) and its gradient (R, *param_shape) of R independent problems.

        ``params`` (R, *param_shape); ``x`` (R, B, n_features); ``y`` (R, B).
        """
        ...

    def evaluate(self, params: F32Array, x: F32Array, y: IntArray) -> tuple[F32Array, BoolArray]:
        """Per-sample loss (R, S) and correctness (R, S) of R models on shared samples x (S, F)."""
        ...

    def shared_forward(self, params: F32Array, x: F32Array, y: IntArray) -> SharedForward:
        """Forward pass of k models (k, *param_shape) on shared samples x (S, F), labels y (S,)."""
        ...

    def weighted_grads(
        self, forward: SharedForward, runs: Sequence[int], sample_weights: F32Array
    ) -> F32Array:
        """Σ_s sample_weights[j, s] ∇ℓ_s at model ``runs[j]``; shape (len(runs), *param_shape)."""
        ...

    def group_grads(
        self,
        forward: SharedForward,
        runs: Sequence[int],
        group_size: int,
        scale: float = 1.0,
        out: F32Array | None = None,
    ) -> F32Array:
        """``scale`` × mean-loss gradient of each block of ``group_size`` consecutive samples.

        Shape (len(runs), S // group_size, *param_shape).
        """
        ...


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _softmax_xent(logits: F32Array, y: IntArray) -> tuple[F32Array, F32Array]:
    """Softmax cross-entropy with classes on axis −2 and samples on axis −1, in place.

    Classes sit on the second-to-last axis so that every reduction over classes runs across the
    contiguous sample axis (vectorised), which is several times faster than reducing a last axis of
    length 10.

    Parameters
    ----------
    logits : ndarray of shape (..., n_classes, S), float32 — overwritten
    y : ndarray of int, shape (S,) or (..., S)
        Labels.

    Returns
    -------
    loss : ndarray of shape (..., S), float32
        ℓ = log Σ_c e^{z_c} − z_y.
    dlogits : ndarray of shape (..., n_classes, S), float32
        ∂ℓ/∂z = softmax(z) − onehot(y) (the same memory as ``logits``).
    """
    z = logits
    n_classes = z.shape[-2]
    z -= z.max(axis=-2, keepdims=True)
    onehot = (np.arange(n_classes)[:, None] == y[..., None, :]).astype(np.float32)
    z_true = (z * onehot).sum(axis=-2)
    np.exp(z, out=z)
    total = z.sum(axis=-2)
    loss = np.log(total)
    loss -= z_true
    z /= total[..., None, :]
    z -= onehot
    return loss, z


@dataclass(frozen=True)
class LogisticRegression:
    """Multinomial logistic regression with a bias (the paper's model, Sec. 6).

    Parameters
    ----------
    n_features : int
        Input dimension (784 for Fashion-MNIST).
    n_classes : int
        Number of classes (10).

    Notes
    -----
    Parameters of one model have shape (n_features + 1, n_classes): ``W = params[:n_features]``,
    ``b = params[n_features]``; logits z = x W + b; loss ℓ = log Σ_c e^{z_c} − z_y. Initial
    parameters are zero. All arithmetic is float32. Internally logits are laid out transposed,
    (classes, samples), which makes the softmax fast.
    """

    n_features: int = 784
    n_classes: int = 10

    def __post_init__(self) -> None:
        _check_positive("n_features", self.n_features)
        if isinstance(self.n_classes, bool) or not isinstance(self.n_classes, (int, np.integer)):
            raise ValueError(f"n_classes must be an integer >= 2, got {self.n_classes!r}")
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2, got {self.n_classes!r}")

    @property
    def param_shape(self) -> tuple[int, ...]:
        return (self.n_features + 1, self.n_classes)

    @property
    def dim(self) -> int:
        return (self.n_features + 1) * self.n_classes

    def init_params(self, n_runs: int) -> F32Array:
        _check_positive("n_runs", n_runs)
        return np.zeros((n_runs, *self.param_shape), dtype=np.float32)

    def _logits_shared(self, params: F32Array, x: F32Array) -> F32Array:
        """zᵀ of shape (k, C, S) for k models on shared x (S, F): one product [W_1 … W_k]ᵀ xᵀ."""
        k, f, c = params.shape[0], self.n_features, self.n_classes
        w_t = params[:, :f, :].transpose(0, 2, 1).reshape(k * c, f)
        z = (w_t @ x.T).reshape(k, c, x.shape[0])
        z += params[:, f, :, None]
        return z

    def loss_and_grad(
        self, params: F32Array, x: F32Array, y: IntArray
    ) -> tuple[F32Array, F32Array]:
        """Mean loss and gradient of R independent problems.

        Parameters
        ----------
        params : ndarray of shape (R, n_features + 1, n_classes), float32
        x : ndarray of shape (R, B, n_features), float32
        y : ndarray of shape (R, B), int

        Returns
        -------
        loss : ndarray of shape (R,), float32
            (1/B) Σ_b ℓ_b.
        grad : ndarray of shape (R, n_features + 1, n_classes), float32
            Its gradient: ∇_W = xᵀ(softmax(z) − onehot(y))/B, ∇_b = Σ_b (softmax(z_b) − onehot(y_b))/B.
        """
        f = self.n_features
        batch = x.shape[1]
        z = np.matmul(params[:, :f, :].transpose(0, 2, 1), x.transpose(0, 2, 1))  # (R, C, B)
        z += params[:, f, :, None]
        loss, d = _softmax_xent(z, y)
        d *= np.float32(1.0 / batch)
        grad = np.empty(params.shape, dtype=np.float32)
        np.matmul(x.transpose(0, 2, 1), d.transpose(0, 2, 1), out=grad[:, :f, :])
        d.sum(axis=2, out=grad[:, f, :])
        return loss.mean(axis=1, dtype=np.float32), grad

    def evaluate(self, params: F32Array, x: F32Array, y: IntArray) -> tuple[F32Array, BoolArray]:
        """Per-sample loss and correctness of R models on shared samples.

        Parameters
        ----------
        params : ndarray of shape (R, n_features + 1, n_classes)
        x : ndarray of shape (S, n_features), float32
        y : ndarray of shape (S,), int

        Returns
        -------
        loss : ndarray of shape (R, S), float32
        correct : ndarray of bool, shape (R, S)
            argmax_c z_c == y (ties go to the lowest class).
        """
        z = self._logits_shared(params, x)
        correct = z.argmax(axis=1) == y
        loss, _ = _softmax_xent(z, y)
        return loss, correct

    def shared_forward(self, params: F32Array, x: F32Array, y: IntArray) -> SharedForward:
        """Forward pass of k models on the same samples (one matrix product).

        Parameters
        ----------
        params : ndarray of shape (k, n_features + 1, n_classes)
        x : ndarray of shape (S, n_features), float32
        y : ndarray of shape (S,), int

        Returns
        -------
        SharedForward
            ``sample_loss`` of shape (k, S); ``cache`` holds ∂ℓ/∂z of shape (k, n_classes, S).
        """
        z = self._logits_shared(params, x)
        loss, dlogits = _softmax_xent(z, y)
        return SharedForward(x=x, sample_loss=loss, cache=dlogits)

    def weighted_grads(
        self, forward: SharedForward, runs: Sequence[int], sample_weights: F32Array
    ) -> F32Array:
        """Weighted sums of per-sample gradients, one product for all listed runs.

        Parameters
        ----------
        forward : SharedForward
        runs : sequence of int
            Which of the forward pass's k models, length r.
        sample_weights : ndarray of shape (r, S)
            Weight of each sample's gradient (zero drops it).

        Returns
        -------
        ndarray of shape (r, n_features + 1, n_classes), float32
            Σ_s sample_weights[j, s] ∇ℓ_s(params[runs[j]]).
        """
        f, c = self.n_features, self.n_classes
        r = len(runs)
        dlogits: F32Array = forward.cache
        weighted = dlogits[list(runs)] * sample_weights[:, None, :].astype(np.float32)
        grad = np.empty((r, f + 1, c), dtype=np.float32)
        product = weighted.reshape(r * c, -1) @ forward.x  # (r·C, F): ∇_Wᵀ of every run
        grad[:, :f, :] = product.reshape(r, c, f).transpose(0, 2, 1)
        grad[:, f, :] = weighted.sum(axis=2)
        return grad

    def group_grads(
        self,
        forward: SharedForward,
        runs: Sequence[int],
        group_size: int,
        scale: float = 1.0,
        out: F32Array | None = None,
    ) -> F32Array:
        """Mean-loss gradient of each block of ``group_size`` consecutive samples (each client).

        Parameters
        ----------
        forward : SharedForward
            Over S = n_groups · group_size samples, client by client.
        runs : sequence of int
            Which of the k models, length r.
        group_size : int
            Samples per block (the minibatch size B).
        scale : float
            Factor applied to every gradient (−η_ℓ turns gradients into SGD updates).
        out : ndarray of shape (r, n_groups, n_features + 1, n_classes), float32, optional
            Where to write the result.

        Returns
        -------
        ndarray of shape (r, n_groups, n_features + 1, n_classes), float32
            Entry [j, g] = (scale/B) Σ_{s in block g} ∇ℓ_s(params[runs[j]]).
        """
        f, c = self.n_features, self.n_classes
        n_samples = forward.x.shape[0]
        if n_samples % group_size:
            raise ValueError(f"{n_samples} samples do not split into blocks of {group_size}")
        n_groups = n_samples // group_size
        shape = (len(runs), n_groups, f + 1, c)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        elif out.shape != shape or out.dtype != np.float32:
            raise ValueError(f"out must be a float32 array of shape {shape}")
        xt = forward.x.reshape(n_groups, group_size, f).transpose(0, 2, 1)  # (G, F, B)
        dlogits: F32Array = forward.cache
        factor = np.float32(scale / group_size)
        for j, run in enumerate(runs):
            # contiguous (G, B, C) blocks: 1.6x faster products than a strided view
            d = np.ascontiguousarray(
                (dlogits[run] * factor).reshape(c, n_groups, group_size).transpose(1, 2, 0)
            )
            np.matmul(xt, d, out=out[j, :, :f, :])  # (G, F, B) @ (G, B, C)
            d.sum(axis=1, out=out[j, :, f, :])
        return out


def local_update(
    model: Model, params: F32Array, x_batches: F32Array, y_batches: IntArray, local_lr: float
) -> tuple[F32Array, F32Array]:
    """E local SGD steps from ``params``, for J independent clients at once (DESIGN §2).

    Parameters
    ----------
    model : Model
    params : ndarray of shape (J, *param_shape), float32
        w⁽ᵗ⁾ of each client's run (not modified).
    x_batches : ndarray of shape (J, E, B, n_features), float32
        Minibatch e of client j is ``x_batches[j, e]``.
    y_batches : ndarray of shape (J, E, B), int
    local_lr : float
        η_ℓ.

    Returns
    -------
    update : ndarray of shape (J, *param_shape), float32
        Δ = w^{(t,E)} − w⁽ᵗ⁾, accumulated as Δ ← Δ − η_ℓ ∇ℓ(w⁽ᵗ⁾ + Δ) (so E = 1 gives exactly
        −η_ℓ ∇ℓ(w⁽ᵗ⁾)).
    first_loss : ndarray of shape (J,), float32
        The loss at w⁽ᵗ⁾ on the first minibatch (the free quality score q_n of ADCS, Sec. 4.1).
    """
    if x_batches.ndim != 4 or y_batches.shape != x_batches.shape[:3]:
        raise ValueError(
            "x_batches must have shape (J, E, B, n_features) and y_batches (J, E, B), got "
            f"{x_batches.shape} and {y_batches.shape}"
        )
    if params.shape[0] != x_batches.shape[0]:
        raise ValueError(f"params has {params.shape[0]} rows but x_batches {x_batches.shape[0]}")
    lr = np.float32(local_lr)
    update = np.zeros_like(params, dtype=np.float32)
    first_loss = np.empty(0, dtype=np.float32)
    for step in range(x_batches.shape[1]):
        loss, grad = model.loss_and_grad(params + update, x_batches[:, step], y_batches[:, step])
        if step == 0:
            first_loss = loss
        update -= lr * grad
    return update, first_loss
