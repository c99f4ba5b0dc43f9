"""The built-in PyTorch modules of `adcs.sim.torch`: the paper's logistic regression, LeNet-5, a
small CIFAR-shaped CNN and an MLP, with the counter-based dropout an MLP may carry."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn

from adcs._validate import check_int

__all__ = ["CounterDropout", "DropoutSequential", "cifar_cnn", "lenet5", "logistic", "mlp"]


def logistic(n_features: int = 784, n_classes: int = 10) -> nn.Module:
    """Multinomial logistic regression z = x Wᵀ + b as a module (the paper's model, Sec. 6).

    Zero-initialised like [`adcs.sim.model.LogisticRegression`][adcs.sim.LogisticRegression]; inputs
    of any shape with ``n_features`` entries are flattened. Its flat parameters are
    ``[W (C × F) row-major, b]``, a permutation of the NumPy model's ``[W; b]`` (F + 1) × C layout.
    """
    check_int("n_features", n_features)
    check_int("n_classes", n_classes, minimum=2)
    linear = nn.Linear(n_features, n_classes)
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    return nn.Sequential(nn.Flatten(), linear)


def lenet5(n_classes: int = 10) -> nn.Module:
    """LeNet-5 for 28 × 28 × 1 inputs (61 706 parameters with 10 classes).

    conv(1→6, 5×5, padding 2) → ReLU → max-pool 2 → conv(6→16, 5×5) → ReLU → max-pool 2 →
    flatten (400) → linear 120 → ReLU → linear 84 → ReLU → linear ``n_classes``. Inputs of any
    shape with 784 entries per sample — Fashion-MNIST's (784,) vectors, (28, 28) or (28, 28, 1)
    images — are reshaped to (1, 28, 28). PyTorch's default initialisation.
    """
    check_int("n_classes", n_classes, minimum=2)
    return nn.Sequential(
        nn.Flatten(),
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 6, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, n_classes),
    )


def cifar_cnn(n_classes: int = 10) -> nn.Module:
    """A small CNN for 32 × 32 × 3 inputs, of the size FL papers train on CIFAR-10 (878 538
    parameters with 10 classes; McMahan et al.'s FedAvg CNN, AISTATS 2017, without padding).

    conv(3→32, 5×5) → ReLU → max-pool 2 → conv(32→64, 5×5) → ReLU → max-pool 2 → flatten (1600)
    → linear 512 → ReLU → linear ``n_classes``. Inputs with 3 072 entries per sample are
    reshaped to (3, 32, 32), channels first (CIFAR-10's layout in adcs and torchvision).
    PyTorch's default initialisation.
    """
    check_int("n_classes", n_classes, minimum=2)
    return nn.Sequential(
        nn.Flatten(),
        nn.Unflatten(1, (3, 32, 32)),
        nn.Conv2d(3, 32, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(1600, 512),
        nn.ReLU(),
        nn.Linear(512, n_classes),
    )


class _Standardise(nn.Module):
    """x ↦ (x − mean) / std with fixed constants (no parameters, nothing that trains)."""

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.mean, self.std = float(mean), float(std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std

    def extra_repr(self) -> str:
        return f"mean={self.mean}, std={self.std}"


class CounterDropout(nn.Module):
    """Dropout whose masks the simulator draws from its counter-based streams.

    ``forward(x, keep)`` multiplies x (batch, width) by ``keep`` — the layer's keep mask
    already divided by 1 − p, as ``torch.nn.Dropout`` scales the kept units — and is the
    identity without one (evaluation and loss probes, like ``eval()`` mode). The masks come from
    `adcs.streams.dropout_keep` through `TorchModel.loss_and_grad`, never from PyTorch's global
    generator, so a run's training is a pure function of its counters.

    Parameters
    ----------
    p : float
        Drop probability in (0, 1).
    width : int
        Units per sample of the layer's input.
    """

    def __init__(self, p: float, width: int) -> None:
        super().__init__()
        if not (isinstance(p, int | float) and 0.0 < p < 1.0):
            raise ValueError(f"dropout must be in (0, 1), got {p!r}")
        self.p, self.width = float(p), check_int("width", width)

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        return x if keep is None else x * keep

    def extra_repr(self) -> str:
        return f"p={self.p}, width={self.width}"


class DropoutSequential(nn.Sequential):
    """An ``nn.Sequential`` with `CounterDropout` layers: ``forward(x, masks)`` hands the k-th
    such layer ``masks[k]`` (no masks: every one is the identity)."""

    def forward(self, x: torch.Tensor, masks: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        k = 0
        for layer in self:
            if isinstance(layer, CounterDropout):
                x = layer(x, None if masks is None else masks[k])
                k += 1
            else:
                x = layer(x)
        return x


def mlp(
    n_features: int = 784,
    n_classes: int = 10,
    hidden: Sequence[int] = (64, 30),
    input_norm: tuple[float, float] | None = None,
    dropout: float = 0.0,
) -> nn.Module:
    """A multi-layer perceptron: linear layers of widths ``hidden`` with ReLU between them.

    flatten → [standardise] → linear ``hidden[0]`` → ReLU → … → linear ``hidden[-1]`` → ReLU →
    [dropout] → linear ``n_classes`` (logits). The default widths (64, 30) are the MLP of
    PowerOfChoice's Fashion-MNIST experiments (Cho, Wang and Joshi, AISTATS 2022), whose code
    drops the last hidden layer's activations with p = 0.5 (``dropout = 0.5`` here; its second
    ReLU after the dropout changes nothing on non-negative values and is left out);
    ``hidden = ()`` is logistic regression with PyTorch's initialisation. PyTorch's default
    initialisation.

    Parameters
    ----------
    n_features, n_classes : int
        Inputs of any shape with ``n_features`` entries are flattened.
    hidden : sequence of int
        Widths of the hidden layers, each ≥ 1 (may be empty without dropout).
    input_norm : (mean, std), optional
        Standardise every input entry as (x − mean) / std first (std > 0), a fixed layer.
    dropout : float
        p in [0, 1): a `CounterDropout` layer on the last hidden layer's activations (the module
        is then a `DropoutSequential`, whose masks the simulator draws). 0 (default): none, a
        plain ``nn.Sequential``.
    """
    check_int("n_features", n_features)
    check_int("n_classes", n_classes, minimum=2)
    widths = [check_int("hidden[]", w) for w in hidden]
    if not (isinstance(dropout, int | float) and 0.0 <= dropout < 1.0):
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    if dropout and not widths:
        raise ValueError("dropout drops the last hidden layer's units: hidden must not be empty")
    layers: list[nn.Module] = [nn.Flatten()]
    if input_norm is not None:
        mean, std = (float(v) for v in input_norm)
        if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
            raise ValueError(f"input_norm must be (mean, std) with std > 0, got {input_norm!r}")
        layers.append(_Standardise(mean, std))
    for n_in, n_out in itertools.pairwise([n_features, *widths]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    if dropout:
        layers.append(CounterDropout(dropout, widths[-1]))
    layers.append(nn.Linear(widths[-1] if widths else n_features, n_classes))
    return DropoutSequential(*layers) if dropout else nn.Sequential(*layers)
