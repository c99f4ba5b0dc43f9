"""Models for the simulator: the narrow protocol the engine sees, and the paper's model.

The engine (docs/design.md §4) needs only [`Model`][adcs.sim.Model]: flat float32 parameters of
length ``dim`` per run, a batched ``loss_and_grad`` over independent (run, client) jobs, and
``evaluate``. Inputs may have any shape; a model flattens or reshapes them itself.

A model may also offer [`SharedInputs`][adcs.sim.SharedInputs]: the forward pass of k runs on the
*same* samples, with per-block and weighted backward passes. For logistic regression this is one
product ``x @ [W_1 … W_k]``, much faster than k separate ones, and the engine uses it when present
(and local training is one step); it never asks which model it runs.

The paper's model (Sec. 6) is multinomial logistic regression, 784 → 10 with a bias, trained with
the softmax cross-entropy loss: [`LogisticRegression`][adcs.sim.LogisticRegression].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int
from adcs.sim.data import PIXEL_SCALE, to_unit_float

__all__ = [
    "PIXEL_SCALE",
    "LogisticRegression",
    "MaskedTraining",
    "Model",
    "SharedForward",
    "SharedInputs",
    "local_update",
    "to_unit_float",
]

F32Array = NDArray[np.float32]
IntArray = NDArray[np.integer[Any]]
BoolArray = NDArray[np.bool_]


@runtime_checkable
class Model(Protocol):
    """What the simulator needs from a model; every array carries a leading axis of problems."""

    @property
    def dim(self) -> int:
        """Number of parameters of one model (the length of a flat parameter vector or update)."""
        ...

    def init_params(self, n_runs: int) -> F32Array:
        """Initial parameters w⁽⁰⁾, shape (n_runs, dim), float32 (the same for every run)."""
        ...

    def loss_and_grad(
        self, params: F32Array, x: F32Array, y: IntArray
    ) -> tuple[F32Array, F32Array]:
        """Mean minibatch loss (J,) and its gradient (J, dim) of J independent problems.

        ``params`` (J, dim); ``x`` (J, B, *input_shape); ``y`` (J, B).
        """
        ...

    def evaluate(self, params: F32Array, x: F32Array, y: IntArray) -> tuple[F32Array, BoolArray]:
        """Per-sample loss (R, S) and correctness (R, S) of R models on shared samples.

        ``params`` (R, dim); ``x`` (S, *input_shape); ``y`` (S,).
        """
        ...


@runtime_checkable
class MaskedTraining(Protocol):
    """An optional capability: dropout layers whose masks the simulator draws.

    A model with dropout names its dropout layers' widths; local training then passes, for
    each local step, one keep mask per layer (`adcs.streams.dropout_keep`: a pure function of
    the stream key, client, round, local step, sample and unit), and the model scales the kept
    units by 1/(1 − p) as ``torch.nn.Dropout`` does. Without masks (evaluation, loss probes)
    the model is deterministic, like a PyTorch module in ``eval()`` mode.
    """

    @property
    def dropout(self) -> float:
        """The drop probability p in (0, 1) of every dropout layer."""
        ...

    @property
    def dropout_widths(self) -> tuple[int, ...]:
        """Units per sample of each dropout layer, in forward order (empty: no dropout)."""
        ...

    def loss_and_grad(
        self,
        params: F32Array,
        x: F32Array,
        y: IntArray,
        masks: Sequence[BoolArray] | None = None,
    ) -> tuple[F32Array, F32Array]:
        """`Model.loss_and_grad` with the dropout layers' keep masks, each (J, B, width)."""
        ...


def dropout_widths(model: Model) -> tuple[int, ...]:
    """The widths of ``model``'s dropout layers (`MaskedTraining`), empty without any."""
    widths: tuple[int, ...] = getattr(model, "dropout_widths", ())
    return widths


@dataclass(frozen=True, eq=False)
class SharedForward:
    """The forward pass of k runs over the same samples, kept for the backward passes.

    Attributes
    ----------
    x : ndarray of shape (S, ...), float32
        The shared inputs.
    sample_loss : ndarray of shape (k, S), float32
        Loss of each sample under each run's parameters.
    cache : Any
        Model-specific intermediate values.
    """

    x: F32Array
    sample_loss: F32Array
    cache: Any


@runtime_checkable
class SharedInputs(Protocol):
    """An optional capability: many runs' passes over the same samples at once."""

    def shared_forward(self, params: F32Array, x: F32Array, y: IntArray) -> SharedForward:
        """Forward pass of k models (k, dim) on shared samples x (S, *input_shape), labels (S,)."""
        ...

    def block_grads(
        self, forward: SharedForward, run: int, blocks: IntArray, block_size: int, scale: float
    ) -> F32Array:
        """``scale`` × the mean-loss gradient of each listed block of ``block_size`` samples.

        Block b covers samples [b·block_size, (b+1)·block_size) (one client's minibatch), at the
        parameters of run ``run`` of the forward pass. Shape (len(blocks), dim).
        """
        ...

    def weighted_grads(
        self, forward: SharedForward, runs: Sequence[int], sample_weights: F32Array
    ) -> F32Array:
        """Σ_s sample_weights[j, s] ∇ℓ_s at model ``runs[j]``; shape (len(runs), dim)."""
        ...


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
        Input dimension (784 for Fashion-MNIST); inputs of any shape with that many entries are
        flattened.
    n_classes : int
        Number of classes (10).

    Notes
    -----
    A flat parameter vector of length (n_features + 1) · n_classes is the row-major (F + 1, C)
    matrix ``[W; b]``: logits z = x W + b; loss ℓ = log Σ_c e^{z_c} − z_y. Initial parameters are
    zero. All arithmetic is float32. Internally logits are laid out transposed, (classes,
    samples), which makes the softmax fast. Offers [`SharedInputs`][adcs.sim.SharedInputs].
    """

    n_features: int = 784
    n_classes: int = 10

    def __post_init__(self) -> None:
        check_int("n_features", self.n_features)
        check_int("n_classes", self.n_classes, minimum=2)

    @property
    def param_shape(self) -> tuple[int, int]:
        """(F + 1, C): the matrix a flat parameter vector is."""
        return (self.n_features + 1, self.n_classes)

    @property
    def dim(self) -> int:
        return (self.n_features + 1) * self.n_classes

    def init_params(self, n_runs: int) -> F32Array:
        check_int("n_runs", n_runs)
        return np.zeros((n_runs, self.dim), dtype=np.float32)

    def _matrices(self, params: F32Array) -> F32Array:
        params = np.asarray(params)
        if params.ndim != 2 or params.shape[1] != self.dim:
            raise ValueError(f"params must have shape (k, {self.dim}), got {params.shape}")
        return params.reshape(params.shape[0], self.n_features + 1, self.n_classes)

    def _flat_inputs(self, x: F32Array, lead: int) -> F32Array:
        """x reshaped to (*leading axes, n_features) (a view when possible)."""
        flat = x.reshape(*x.shape[:lead], -1)
        if flat.shape[-1] != self.n_features:
            raise ValueError(
                f"inputs have {flat.shape[-1]} features per sample, the model {self.n_features}"
            )
        return flat

    def _logits_shared(self, w: F32Array, x: F32Array) -> F32Array:
        """zᵀ of shape (k, C, S) for k models on shared x (S, F): one product [W_1 … W_k]ᵀ xᵀ."""
        k, f, c = w.shape[0], self.n_features, self.n_classes
        w_t = w[:, :f, :].transpose(0, 2, 1).reshape(k * c, f)
        z = (w_t @ x.T).reshape(k, c, x.shape[0])
        z += w[:, f, :, None]
        return z

    def loss_and_grad(
        self, params: F32Array, x: F32Array, y: IntArray
    ) -> tuple[F32Array, F32Array]:
        """Mean loss and gradient of J independent problems.

        Parameters
        ----------
        params : ndarray of shape (J, dim), float32
        x : ndarray of shape (J, B, *input_shape), float32
        y : ndarray of shape (J, B), int

        Returns
        -------
        loss : ndarray of shape (J,), float32
            (1/B) Σ_b ℓ_b.
        grad : ndarray of shape (J, dim), float32
            ∇_W = xᵀ(softmax(z) − onehot(y))/B, ∇_b = Σ_b (softmax(z_b) − onehot(y_b))/B.
        """
        w = self._matrices(params)
        xf = self._flat_inputs(x, 2)
        f = self.n_features
        batch = xf.shape[1]
        z = np.matmul(w[:, :f, :].transpose(0, 2, 1), xf.transpose(0, 2, 1))  # (J, C, B)
        z += w[:, f, :, None]
        loss, d = _softmax_xent(z, y)
        d *= np.float32(1.0 / batch)
        grad = np.empty(w.shape, dtype=np.float32)
        np.matmul(xf.transpose(0, 2, 1), d.transpose(0, 2, 1), out=grad[:, :f, :])
        d.sum(axis=2, out=grad[:, f, :])
        return loss.mean(axis=1, dtype=np.float32), grad.reshape(w.shape[0], self.dim)

    def evaluate(self, params: F32Array, x: F32Array, y: IntArray) -> tuple[F32Array, BoolArray]:
        """Per-sample loss (R, S) and correctness (R, S) of R models on shared samples x (S, ...).

        A sample is correct when argmax_c z_c == y (ties go to the lowest class).
        """
        z = self._logits_shared(self._matrices(params), self._flat_inputs(x, 1))
        correct = z.argmax(axis=1) == y
        loss, _ = _softmax_xent(z, y)
        return loss, correct

    # -- SharedInputs -------------------------------------------------------------------------

    def shared_forward(self, params: F32Array, x: F32Array, y: IntArray) -> SharedForward:
        """Forward pass of k models on the same samples (one matrix product).

        ``cache`` holds ∂ℓ/∂z of shape (k, n_classes, S).
        """
        xf = self._flat_inputs(x, 1)
        z = self._logits_shared(self._matrices(params), xf)
        loss, dlogits = _softmax_xent(z, y)
        return SharedForward(x=xf, sample_loss=loss, cache=dlogits)

    def block_grads(
        self, forward: SharedForward, run: int, blocks: IntArray, block_size: int, scale: float
    ) -> F32Array:
        """Per-client (block) mean-loss gradients of one run, times ``scale``, shape (n_blocks, dim).

        One batched product (n_blocks, F, B) @ (n_blocks, B, C).
        """
        f, c = self.n_features, self.n_classes
        n_blocks = len(blocks)
        x = forward.x.reshape(-1, block_size, f)  # (G, B, F)
        d = forward.cache[run].reshape(c, -1, block_size)  # (C, G, B)
        if (
            n_blocks != x.shape[0]
            or blocks[0] != 0
            or blocks[-1] != n_blocks - 1
            or (n_blocks > 2 and (np.diff(blocks) != 1).any())
        ):  # a subset (or reordering) of the blocks
            x, d = x[blocks], d[:, blocks]
        # contiguous (G, B, C) blocks: 1.6x faster products than a strided view
        d = np.ascontiguousarray(d.transpose(1, 2, 0))
        d *= np.float32(scale / block_size)
        out = np.empty((n_blocks, f + 1, c), dtype=np.float32)
        np.matmul(x.transpose(0, 2, 1), d, out=out[:, :f, :])
        d.sum(axis=1, out=out[:, f, :])
        return out.reshape(n_blocks, self.dim)

    def weighted_grads(
        self, forward: SharedForward, runs: Sequence[int], sample_weights: F32Array
    ) -> F32Array:
        """Σ_s sample_weights[j, s] ∇ℓ_s(params[runs[j]]), one product for all listed runs.

        Parameters
        ----------
        forward : SharedForward
        runs : sequence of int
            Which of the forward pass's k models, length r.
        sample_weights : ndarray of shape (r, S)
            Weight of each sample's gradient (zero drops it).

        Returns
        -------
        ndarray of shape (r, dim), float32
        """
        f, c = self.n_features, self.n_classes
        r = len(runs)
        dlogits: F32Array = forward.cache
        weighted = dlogits[list(runs)] * sample_weights[:, None, :].astype(np.float32)
        grad = np.empty((r, f + 1, c), dtype=np.float32)
        product = weighted.reshape(r * c, -1) @ forward.x  # (r·C, F): ∇_Wᵀ of every run
        grad[:, :f, :] = product.reshape(r, c, f).transpose(0, 2, 1)
        grad[:, f, :] = weighted.sum(axis=2)
        return grad.reshape(r, self.dim)


def local_update(
    model: Model,
    params: F32Array,
    x_batches: F32Array,
    y_batches: IntArray,
    local_lr: float,
    prox_mu: float = 0.0,
    weight_decay: float = 0.0,
    masks: Callable[[int], Sequence[BoolArray]] | None = None,
) -> tuple[F32Array, F32Array]:
    """E local SGD steps from ``params``, for J independent clients at once (docs/design.md §2).

    Parameters
    ----------
    model : Model
    params : ndarray of shape (J, dim), float32
        w⁽ᵗ⁾ of each client's run (not modified).
    x_batches : ndarray of shape (J, E, B, *input_shape), float32
        Minibatch e of client j is ``x_batches[j, e]``.
    y_batches : ndarray of shape (J, E, B), int
    local_lr : float
        η_ℓ.
    prox_mu : float
        μ ≥ 0 of FedProx (Li et al. 2020): each step descends ℓ(w) + (μ/2)‖w − w⁽ᵗ⁾‖², whose
        gradient adds μ (w − w⁽ᵗ⁾) = μ Δ — as Flower's FedProx client adds the term to its loss.
        0 (default): plain SGD.
    weight_decay : float
        λ ≥ 0: each step's gradient adds λ w at the step's point w = w⁽ᵗ⁾ + Δ, as
        ``torch.optim.SGD(weight_decay=λ)`` does (before the proximal term, like the optimiser of
        PowerOfChoice's authors); every parameter decays, biases included. 0 (default): none.
    masks : callable, optional
        ``masks(e)`` gives local step e's keep masks, one (J, B, width) bool array per dropout
        layer of a `MaskedTraining` model, passed to its ``loss_and_grad``. None (default): the
        model runs without dropout.

    Returns
    -------
    update : ndarray of shape (J, dim), float32
        Δ = w^{(t,E)} − w⁽ᵗ⁾, accumulated as Δ ← Δ − η_ℓ (∇ℓ(w) + λ w + μ Δ) at w = w⁽ᵗ⁾ + Δ
        (so E = 1 gives exactly −η_ℓ (∇ℓ(w⁽ᵗ⁾) + λ w⁽ᵗ⁾), whatever μ).
    first_loss : ndarray of shape (J,), float32
        The loss at w⁽ᵗ⁾ on the first minibatch (the free quality score q_n of ADCS, Sec. 4.1),
        with the first step's dropout masks when there are any (the training pass's loss).
    """
    if x_batches.ndim < 4 or y_batches.shape != x_batches.shape[:3]:
        raise ValueError(
            "x_batches must have shape (J, E, B, *input_shape) and y_batches (J, E, B), got "
            f"{x_batches.shape} and {y_batches.shape}"
        )
    if params.shape[0] != x_batches.shape[0]:
        raise ValueError(f"params has {params.shape[0]} rows but x_batches {x_batches.shape[0]}")
    lr = np.float32(local_lr)
    update = np.zeros_like(params, dtype=np.float32) if x_batches.shape[1] == 0 else None
    first_loss = np.empty(0, dtype=np.float32)
    for step in range(x_batches.shape[1]):
        point = params if update is None else params + update
        if masks is None:
            loss, grad = model.loss_and_grad(point, x_batches[:, step], y_batches[:, step])
        else:
            masked = cast(MaskedTraining, model)
            loss, grad = masked.loss_and_grad(
                point, x_batches[:, step], y_batches[:, step], masks=masks(step)
            )
        if weight_decay:  # torch.optim.SGD's weight decay: the gradient adds λ w
            grad = grad + np.float32(weight_decay) * point
        if update is None:  # Δ = 0 − η_ℓ∇, the bits of 0 −= η_ℓ∇, without the zeros
            first_loss = loss
            scaled = np.multiply(grad, lr, order="C")  # C order, like the zeros were
            if scaled.dtype == np.float32:
                update = np.subtract(np.float32(0), scaled, out=scaled)
            else:
                update = (np.float32(0) - scaled).astype(np.float32)
            continue
        if prox_mu:  # the proximal gradient μ Δ (Δ = 0 at the first step)
            grad = grad + np.float32(prox_mu) * update
        update -= lr * grad
    assert update is not None
    return update, first_loss
