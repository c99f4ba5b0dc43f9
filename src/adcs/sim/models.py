"""The ``[model]`` kinds: which model every run trains (docs/design.md §4 "Models", §8).

Each row of `MODELS` is a small frozen class whose fields are the table's keys; it checks
them on construction (so a configuration fails before any work) and `build` makes the
simulator's [`Model`][adcs.sim.Model] once the data's input shape and classes are known.
The PyTorch kinds import `adcs.sim.torch` (the extra ``adcs[torch]``) only there.

A new model kind is one class with ``build(input_shape, n_classes)`` and ``describe()``, named in
a TOML file by import path (``kind = "mypkg.models:MyNet"``), by an entry point of the group
``adcs.models``, or by a row added here.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from adcs._validate import check_number
from adcs.registry import Registry
from adcs.sim.model import LogisticRegression, Model

__all__ = ["MLP", "MODELS", "CifarCNN", "LeNet5", "Logistic", "TorchFactory", "TorchLogistic"]

_DEVICE = re.compile(r"cpu|mps|cuda(:[0-9]+)?")
_PATHS = ("vmap", "shared", "auto")  # adcs.sim.torch_shared.PATHS (that module needs PyTorch)


@dataclass(frozen=True)
class Logistic:
    """The paper's multinomial logistic regression in NumPy (``kind = "logistic"``).

    Attributes
    ----------
    device : str
        "cpu" only (a PyTorch kind runs elsewhere).
    """

    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.device != "cpu":
            raise ValueError("kind = 'logistic' runs in NumPy on the CPU; use a PyTorch kind")

    @property
    def kind(self) -> str:
        return "logistic"

    def describe(self) -> str:
        """The model in words, for reports."""
        return "multinomial logistic regression"

    def build(self, input_shape: Sequence[int], n_classes: int) -> Model:
        """The model for inputs of ``input_shape`` (flattened) and ``n_classes`` classes."""
        return LogisticRegression(math.prod(input_shape), n_classes)


@dataclass(frozen=True)
class _Torch:
    """A PyTorch kind: the device it runs on, and the module `adcs.sim.torch` builds.

    Attributes
    ----------
    device : str
        "cpu" (default), "cuda", "cuda:N" or "mps".
    torch_path : str or None
        How the clients of a run at one w⁽ᵗ⁾ are computed (`adcs.sim.torch.TorchModel`'s
        ``path``): "vmap" (``torch.func.vmap``), "shared" (one shared-weight pass, per-client
        weight gradients; refused for a module it cannot run) or "auto" (shared where it can
        run, vmap elsewhere; None, the default, means it). The paths agree to float32 rounding,
        not bit for bit: a result made with "vmap" names it to stay reproducible.
    """

    device: str = "cpu"
    torch_path: str | None = None
    torch_kind: ClassVar[str] = ""
    text: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise ValueError(
                f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {self.device!r}"
            )
        if self.torch_path is not None and self.torch_path not in _PATHS:
            raise ValueError(f"torch_path must be one of {list(_PATHS)}, got {self.torch_path!r}")

    @property
    def kind(self) -> str:
        return self.torch_kind

    def describe(self) -> str:
        """The model in words, for reports."""
        return self.text + ("" if self.device == "cpu" else f" on {self.device}")

    def build(self, input_shape: Sequence[int], n_classes: int) -> Model:
        """The model for inputs of ``input_shape``, checked on one forward pass.

        Raises
        ------
        ImportError
            PyTorch is missing (the message says how to install it).
        ValueError
            The factory cannot be imported, or the module does not map a batch of inputs to
            (batch, n_classes).
        """
        try:
            torch_models = importlib.import_module("adcs.sim.torch")
        except ImportError:
            raise ImportError(
                f"kind = {self.kind!r} needs PyTorch: pip install 'adcs[torch]'"
            ) from None
        model: Model = torch_models.model_for(
            self.kind,
            input_shape,
            n_classes,
            factory=self._factory(),
            device=self.device,
            path=self.torch_path or "auto",
            **self._options(),
        )
        return model

    def _factory(self) -> str | None:
        return None

    def _options(self) -> dict[str, Any]:
        """Further keyword arguments of `adcs.sim.torch.model_for` for this kind."""
        return {}


@dataclass(frozen=True)
class TorchLogistic(_Torch):
    """The paper's logistic regression in PyTorch (``kind = "logistic-torch"``)."""

    torch_kind: ClassVar[str] = "logistic-torch"
    text: ClassVar[str] = "multinomial logistic regression (PyTorch)"


@dataclass(frozen=True)
class LeNet5(_Torch):
    """LeNet-5 for 28×28×1 inputs (``kind = "cnn"``)."""

    torch_kind: ClassVar[str] = "cnn"
    text: ClassVar[str] = "LeNet-5 (PyTorch)"


@dataclass(frozen=True)
class CifarCNN(_Torch):
    """A small CNN for 32×32×3 inputs (``kind = "cnn-cifar"``; `adcs.sim.torch.cifar_cnn`)."""

    torch_kind: ClassVar[str] = "cnn-cifar"
    text: ClassVar[str] = "a small CNN for 32×32×3 images (PyTorch)"


@dataclass(frozen=True)
class MLP(_Torch):
    """Fully connected ReLU layers (``kind = "mlp"``; `adcs.sim.torch.mlp`).

    Attributes
    ----------
    hidden : tuple of int
        The hidden layers' widths, each ≥ 1 (default (64, 30), the MLP of PowerOfChoice's
        Fashion-MNIST experiments).
    input_norm : (float, float) or None
        Standardise inputs as (x − mean) / std first (std > 0), a fixed layer.
    dropout : float
        p in [0, 1): dropout on the last hidden layer's units during local training, as the
        PowerOfChoice authors' MLP (p = 0.5 there). Its masks come from adcs's counter-based
        streams (a pure function of the seed, client, round, local step, sample and unit), and
        evaluation and loss probes run without it (PyTorch's ``eval()`` mode). A model with
        dropout runs on the ``vmap`` path. Not the ``[sim]`` key ``dropout`` (clients that fail
        to return). 0 (default): none.
    """

    hidden: tuple[int, ...] = (64, 30)
    input_norm: tuple[float, float] | None = None
    dropout: float = 0.0
    torch_kind: ClassVar[str] = "mlp"
    written_when_set: ClassVar[frozenset[str]] = frozenset({"dropout"})

    def __post_init__(self) -> None:
        hidden = self.hidden
        if not isinstance(hidden, list | tuple) or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in hidden
        ):
            raise ValueError(f"hidden must be an array of integers ≥ 1, got {hidden!r}")
        object.__setattr__(self, "hidden", tuple(hidden))
        norm = self.input_norm
        if norm is not None:
            if not isinstance(norm, list | tuple) or len(norm) != 2:
                raise ValueError(f"input_norm must be [mean, std], got {norm!r}")
            mean, std = (float(v) for v in norm)
            if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
                raise ValueError(f"input_norm must be [mean, std] with std > 0, got {norm!r}")
            object.__setattr__(self, "input_norm", (mean, std))
        p = check_number("dropout", self.dropout, 0.0, 1.0, high_open=True)
        object.__setattr__(self, "dropout", p)
        if p and not hidden:
            raise ValueError(
                "dropout drops the last hidden layer's units: hidden must not be empty"
            )
        if p and self.torch_path == "shared":
            raise ValueError(
                "dropout runs on the vmap path (its masks enter each job's pass); torch_path "
                "must be 'auto' or 'vmap'"
            )
        super().__post_init__()

    def describe(self) -> str:
        on = "" if self.device == "cpu" else f" on {self.device}"
        drop = f", dropout {self.dropout:g}" if self.dropout else ""
        return f"an MLP with hidden layers {list(self.hidden)}{drop} (PyTorch){on}"

    def _options(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "input_norm": self.input_norm, "dropout": self.dropout}


@dataclass(frozen=True)
class TorchFactory(_Torch):
    """The module a user's factory returns (``kind = "torch"``).

    Attributes
    ----------
    factory : str
        ``"package.module:function"``, a zero-argument callable returning a
        ``torch.nn.Module`` (imported with the current folder on the module path).
    """

    factory: str | None = None
    torch_kind: ClassVar[str] = "torch"

    def __post_init__(self) -> None:
        if not isinstance(self.factory, str) or self.factory.count(":") != 1:
            raise ValueError(
                "factory = 'package.module:function' is required for kind = 'torch', "
                f"got {self.factory!r}"
            )
        super().__post_init__()

    def describe(self) -> str:
        on = "" if self.device == "cpu" else f" on {self.device}"
        return f"the PyTorch model {self.factory}{on}"

    def _factory(self) -> str | None:
        return self.factory


MODELS: Registry[Any] = Registry(
    "model",
    "adcs.models",
    {
        "logistic": Logistic,
        "logistic-torch": TorchLogistic,
        "cnn": LeNet5,
        "cnn-cifar": CifarCNN,
        "mlp": MLP,
        "torch": TorchFactory,
    },
    requires=("build", "describe"),
)
"""The ``[model]`` kinds; all but ``logistic`` need the extra ``adcs[torch]``."""
