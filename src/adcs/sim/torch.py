"""PyTorch models in the simulator: any ``nn.Module`` behind the flat-parameter model protocol.

`TorchModel` wraps a module factory and implements [`adcs.sim.model.Model`][adcs.sim.Model]
(docs/design.md §4, "Models"): a run's parameters are one flat float32 vector (the module's
trainable parameters, concatenated in ``named_parameters()`` order), and the engine's batched
``loss_and_grad`` over J independent (run, client) jobs becomes a ``torch.func.vmap`` of
``torch.func.grad`` of the module called functionally (``torch.func.functional_call``) — one batched
forward and backward instead of J small ones. Jobs that share their parameters (the clients of one
run at w⁽ᵗ⁾, the usual case with E = 1) are mapped with the parameters unbatched, which folds the
clients into one large batch of every layer; jobs with their own parameters (E > 1 after the first
step) are mapped over the parameters too. With ``path = "shared"`` (or ``"auto"``), jobs that share
their parameters are instead one shared-weight pass with per-job weight gradients
(`adcs.sim.torch_shared`), and loss probes are a forward pass alone. Calls are cut into chunks of
at most ``samples_per_call`` samples, so memory stays bounded however many jobs a round holds.

The engine hands NumPy arrays; on the CPU they become tensors without a copy, on an accelerator
each call moves its minibatches and the distinct parameter rows once (a round's minibatches are
gathered fresh by the engine, so there is nothing to keep on the device between calls).

A module must be a pure function of its parameters and inputs: BatchNorm in training mode
(running statistics are buffers that change as it trains, and batch statistics mix a client's
samples with the evaluation batch), ``nn.Dropout`` in training mode (its masks would come from
PyTorch's global generator, not adcs's counter-based streams) and any buffer that changes in a
forward pass are refused. Dropout is `CounterDropout` in a `DropoutSequential` instead, whose
masks the simulator draws (`adcs.streams.dropout_keep`) and hands to ``loss_and_grad``. Buffers
that do not change, and frozen parameters (``requires_grad = False``), are constants.

Built-in factories: `logistic` (the paper's model, Sec. 6, as a module), `lenet5` (LeNet-5 for
28 × 28 × 1 inputs), `cifar_cnn` (a small CNN for 32 × 32 × 3 inputs) and `mlp` (fully connected
ReLU layers of given widths). Importing this module needs the extra ``adcs[torch]``; once it is
imported, every forked child process (the simulator's workers) starts with one PyTorch thread,
since the thread teams of its parent's MKL and OpenMP do not survive a fork.
"""

from __future__ import annotations

import copy
import functools
import importlib
import itertools
import logging
import math
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.func import functional_call, grad_and_value, vmap
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "adcs.sim.torch needs PyTorch: install the extra with `pip install 'adcs[torch]'`"
    ) from err

from adcs._validate import check_int
from adcs.sim.torch_modules import (
    CounterDropout,
    DropoutSequential,
    cifar_cnn,
    lenet5,
    logistic,
    mlp,
)
from adcs.sim.torch_shared import PATHS, SharedPlan, plan_for

__all__ = [
    "LOSSES",
    "MODEL_FACTORIES",
    "CounterDropout",
    "DropoutSequential",
    "TorchModel",
    "cifar_cnn",
    "lenet5",
    "load_factory",
    "logistic",
    "mlp",
    "model_for",
]

logger = logging.getLogger(__name__)

F32Array = NDArray[np.float32]
IntArray = NDArray[np.integer[Any]]
BoolArray = NDArray[np.bool_]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _one_thread_after_fork() -> None:
    # A forked child cannot use the thread teams its parent's MKL and OpenMP started: its first
    # parallel product waits forever for threads that were not copied. (The simulator's workers
    # are forked and are its parallelism, so one PyTorch thread each is also the fast choice;
    # PyTorch's DataLoader workers do the same.)
    torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_one_thread_after_fork)


def _cross_entropy(output: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, y, reduction="none")


def _nll(output: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.nll_loss(output, y, reduction="none")


LOSSES: dict[str, LossFn] = {"cross_entropy": _cross_entropy, "nll": _nll}
"""Per-sample losses of the module's output (batch, n_classes) and labels (batch,):
``cross_entropy`` for logits, ``nll`` for log-probabilities."""


def load_factory(spec: str) -> Callable[[], nn.Module]:
    """The callable named by ``"package.module:function"`` (the current folder is searched too).

    Raises
    ------
    ValueError
        The string is malformed, the module cannot be imported, or it has no such callable.
    """
    if not isinstance(spec, str):
        raise ValueError(f"factory must be a string 'package.module:function', got {spec!r}")
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise ValueError(f"factory must look like 'package.module:function', got {spec!r}")
    added = os.getcwd() not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the user's module is reported the same way
        raise ValueError(
            f"factory {spec!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        ) from None
    finally:
        if added:
            sys.path.remove(os.getcwd())
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"factory {spec!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"factory {spec!r} is not callable (got {type(target).__name__})")
    return target


MODEL_FACTORIES: dict[str, Callable[..., nn.Module]] = {
    "logistic-torch": logistic,
    "cnn": lenet5,
    "cnn-cifar": cifar_cnn,
    "mlp": mlp,
}
"""Built-in model kinds of the ``[model]`` table (besides ``logistic``, NumPy, and ``torch``)."""


def model_for(
    kind: str,
    input_shape: Sequence[int],
    n_classes: int,
    *,
    factory: str | None = None,
    device: str = "cpu",
    hidden: Sequence[int] = (64, 30),
    input_norm: tuple[float, float] | None = None,
    path: str = "auto",
    dropout: float = 0.0,
) -> TorchModel:
    """The `TorchModel` of a ``[model]`` kind for inputs of ``input_shape``, checked.

    ``kind`` is ``"logistic-torch"``, ``"cnn"`` (LeNet-5, inputs with 28 × 28 × 1 entries),
    ``"cnn-cifar"`` (`cifar_cnn`, inputs with 32 × 32 × 3 entries), ``"mlp"`` (`mlp` with
    ``hidden``, ``input_norm`` and ``dropout``) or ``"torch"`` (``factory`` names a zero-argument callable
    returning the module). ``path`` is `TorchModel`'s.
    """
    shape = tuple(int(d) for d in input_shape)
    n_features = math.prod(shape)
    module_factory: Callable[[], nn.Module]
    if kind == "logistic-torch":
        module_factory = functools.partial(logistic, n_features, n_classes)
    elif kind == "cnn":
        if n_features != 28 * 28:
            raise ValueError(
                f"kind 'cnn' is LeNet-5 for 28×28×1 inputs; the data's inputs have shape {shape}"
            )
        module_factory = functools.partial(lenet5, n_classes)
    elif kind == "cnn-cifar":
        if n_features != 32 * 32 * 3:
            raise ValueError(
                f"kind 'cnn-cifar' is a CNN for 32×32×3 inputs; the data's inputs have shape {shape}"
            )
        module_factory = functools.partial(cifar_cnn, n_classes)
    elif kind == "mlp":
        module_factory = functools.partial(
            mlp, n_features, n_classes, tuple(hidden), input_norm, dropout
        )
    elif kind == "torch":
        if factory is None:
            raise ValueError("kind 'torch' needs factory = 'package.module:function'")
        module_factory = load_factory(factory)
    else:
        raise ValueError(
            f"kind must be one of {['torch', *MODEL_FACTORIES]} for a PyTorch model, got {kind!r}"
        )
    return TorchModel(
        module_factory, device=device, input_shape=shape, n_classes=n_classes, path=path
    )


# ---------------------------------------------------------------------------------------------
# checks of a module


def _refuse_impure_layers(module: nn.Module) -> None:
    """Refuse layers whose output is not a pure function of parameters and inputs."""
    for name, sub in module.named_modules():
        where = f"{type(sub).__name__} at {name!r}" if name else type(sub).__name__
        lazy = isinstance(sub, nn.modules.lazy.LazyModuleMixin)
        if lazy and cast(Any, sub).has_uninitialized_params():
            raise ValueError(
                f"{where} has uninitialised (lazy) parameters; run one forward pass in the factory"
            )
        if isinstance(sub, nn.modules.batchnorm._BatchNorm) and sub.training:
            raise ValueError(
                f"{where} is in training mode: BatchNorm keeps running statistics in buffers that "
                "change as it trains and normalises with batch statistics, which flat "
                "per-client parameters cannot carry; use GroupNorm or LayerNorm instead (or "
                "call .eval() on it to normalise with fixed statistics)"
            )
        if (
            isinstance(sub, nn.modules.instancenorm._InstanceNorm)
            and sub.training
            and sub.track_running_stats
        ):
            raise ValueError(
                f"{where} tracks running statistics in training mode (buffers that change as it "
                "trains); set track_running_stats=False, or use GroupNorm or LayerNorm"
            )
        if isinstance(sub, nn.modules.dropout._DropoutNd) and sub.training and sub.p > 0:
            raise ValueError(
                f"{where} is in training mode: its random masks would come from PyTorch's "
                "global generator, not adcs's counter-based streams, so runs would not be "
                "reproducible; call .eval() on it or remove it"
            )


def _dropout_layers(module: nn.Module) -> tuple[CounterDropout, ...]:
    """The `CounterDropout` layers of ``module`` in forward order: each a direct child of a
    `DropoutSequential` module, which hands them their masks (anywhere else they would never
    get one); all of one p."""
    layers = tuple(sub for sub in module.modules() if isinstance(sub, CounterDropout))
    if not layers:
        return ()
    if not isinstance(module, DropoutSequential) or any(
        not any(layer is child for child in module.children()) for layer in layers
    ):
        raise ValueError(
            "CounterDropout layers must be direct children of the module, a DropoutSequential "
            "(which hands them their masks)"
        )
    if len({layer.p for layer in layers}) > 1:
        raise ValueError("every CounterDropout layer of a module must have the same p")
    return layers


def _check_output(output: Any, batch: int, n_classes: int | None) -> None:
    if not isinstance(output, torch.Tensor):
        raise ValueError(f"the module must return a tensor, got {type(output).__name__}")
    if not output.is_floating_point():
        raise ValueError(f"the module's output is {output.dtype}; expected floating-point logits")
    expected = f"(batch, {'n_classes' if n_classes is None else n_classes})"
    if (
        output.ndim != 2
        or output.shape[0] != batch
        or (n_classes is not None and output.shape[1] != n_classes)
    ):
        raise ValueError(
            f"the module's output has shape {tuple(output.shape)} for a batch of {batch} "
            f"inputs; expected {expected}"
        )


def _shared_runs(params: F32Array) -> Iterator[tuple[int, int]]:
    """Maximal runs [start, stop) of consecutive identical rows of ``params`` (J, dim)."""
    n = params.shape[0]
    if n == 0:
        return
    same = np.all(params[1:] == params[:-1], axis=1)
    breaks = np.concatenate([[0], np.flatnonzero(~same) + 1, [n]])
    for start, stop in itertools.pairwise(breaks):
        yield int(start), int(stop)


def _tensor(array: NDArray[Any], dtype: Any, device: torch.device) -> torch.Tensor:
    """``array`` as a tensor on ``device``: no copy on the CPU when dtype and layout allow."""
    contiguous = np.ascontiguousarray(array, dtype=dtype)
    with warnings.catch_warnings():
        # read-only arrays: nothing here ever writes into the tensor
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        tensor = torch.from_numpy(contiguous)
    return tensor.to(device) if device.type != "cpu" else tensor


def _device(device: str | torch.device) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must name a torch device such as 'cpu', got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available in this PyTorch build/machine")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r}: MPS is not available on this machine")
    return dev


# ---------------------------------------------------------------------------------------------
# the model


class TorchModel:
    """Any PyTorch module as a simulator model ([`adcs.sim.model.Model`][adcs.sim.Model]).

    Parameters
    ----------
    module_factory : callable
        ``module_factory() -> nn.Module``, called once (under ``torch.manual_seed(init_seed)``,
        leaving the global generator as it was) to build the module and w⁽⁰⁾. The module maps a
        batch of inputs (batch, *input_shape) to outputs (batch, n_classes).
    loss : {"cross_entropy", "nll"}
        Per-sample loss of `LOSSES`; a client's loss is its minibatch mean.
    device : str
        ``"cpu"`` (default), ``"cuda"``, ``"cuda:N"`` or ``"mps"``. All arithmetic is float32.
    input_shape : sequence of int, optional
        When given, the module is checked now on a batch of that shape: it must return finite
        floating-point (batch, n_classes), change no buffer and map under ``vmap``. (The output's
        shape and dtype are also checked at every call.) A factory that raises is a
        ``ValueError`` naming its exception.
    n_classes : int, optional
        The number of classes the output must have.
    init_seed : int
        Seed of PyTorch's generator while the factory builds the module (its initialisation).
    samples_per_call : int
        At most this many samples go through one mapped forward/backward pass (bounds memory:
        the activations of that many samples).
    path : {"vmap", "shared", "auto"}
        How jobs that share their parameters are computed: ``"vmap"`` maps them with
        ``torch.func.vmap``; ``"shared"`` runs them as one shared-weight pass with per-job
        weight gradients (`adcs.sim.torch_shared`; a module it cannot run is refused);
        ``"auto"`` (default) takes the shared pass where it can run the module, ``vmap``
        otherwise. The shared pass sums in another order (float32 rounding); ``evaluate`` runs
        the module's forward pass in the shared pass's layouts too.

    Notes
    -----
    Flat parameters are the trainable parameters in ``named_parameters()`` order, each
    flattened row-major. ``loss_and_grad`` computes, for each job j, the mean loss of the
    module's outputs on x[j] under params[j] and its gradient, with
    ``vmap(grad_and_value(functional_call(...)))``: in_dims (None, 0, 0) for a run of
    consecutive jobs with identical parameter rows, (0, 0, 0) otherwise. ``evaluate`` runs the
    R models one after another over the shared samples. The module is used through
    ``functional_call`` (which swaps its parameters temporarily), so each thread gets its own copy.
    """

    def __init__(
        self,
        module_factory: Callable[[], nn.Module],
        loss: str = "cross_entropy",
        device: str = "cpu",
        *,
        input_shape: Sequence[int] | None = None,
        n_classes: int | None = None,
        init_seed: int = 0,
        samples_per_call: int = 4096,
        path: str = "auto",
    ) -> None:
        if not callable(module_factory):
            raise ValueError(f"module_factory must be callable, got {module_factory!r}")
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
        if n_classes is not None:
            check_int("n_classes", n_classes, minimum=2)
        check_int("init_seed", init_seed, minimum=0)
        self.samples_per_call = check_int("samples_per_call", samples_per_call)
        if path not in PATHS:
            raise ValueError(f"path must be one of {list(PATHS)}, got {path!r}")
        self.loss = loss
        self.device = _device(device)
        self.n_classes = n_classes
        self.factory = module_factory
        self._loss_fn = LOSSES[loss]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            try:
                module = module_factory()
            except Exception as exc:  # the user's code: any failure is named, not a traceback
                raise ValueError(f"module_factory() failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(module, nn.Module):
            raise ValueError(
                f"module_factory must return a torch.nn.Module, got {type(module).__name__}"
            )
        _refuse_impure_layers(module)
        self._dropout_layers = _dropout_layers(module)
        module = module.to(device=self.device, dtype=torch.float32)
        trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not trainable:
            raise ValueError("the module has no trainable parameters")
        self._names = tuple(n for n, _ in trainable)
        self._shapes = tuple(p.shape for _, p in trainable)
        self._sizes = [p.numel() for _, p in trainable]
        init = torch.cat([p.detach().reshape(-1) for _, p in trainable]).cpu().numpy()
        self._init: F32Array = init.astype(np.float32)
        self._init.setflags(write=False)
        for p in module.parameters():
            p.requires_grad_(False)  # gradients come from torch.func, never from .grad
        self._template = module
        self._plan: SharedPlan | None = None
        if path != "vmap":
            self._plan, why = plan_for(module, self._names, self._sizes)
            if self._plan is None and path == "shared":
                raise ValueError(
                    f"path 'shared' cannot run this module: {why}; use path 'auto' (the shared "
                    "pass where it can run, vmap elsewhere) or 'vmap'"
                )
            if self._plan is None:
                logger.info("path 'auto': vmap for this module, since %s", why)
        self.path = "vmap" if self._plan is None else "shared"
        self._owner = threading.get_ident()
        self._pid = os.getpid()
        self._local = threading.local()
        self.input_shape: tuple[int, ...] | None = None
        if input_shape is not None:
            self.input_shape = tuple(check_int("input_shape[]", d) for d in input_shape)
            self._check_module(self.input_shape)

    def __repr__(self) -> str:
        name = getattr(self.factory, "__name__", None) or repr(self.factory)
        if isinstance(self.factory, functools.partial):
            name = getattr(self.factory.func, "__name__", repr(self.factory.func))
        return (
            f"TorchModel({name}, loss={self.loss!r}, device={str(self.device)!r}, dim={self.dim})"
        )

    # -- the Model protocol --------------------------------------------------------------------

    @property
    def dim(self) -> int:
        """Number of trainable parameters (the length of a flat parameter vector)."""
        return int(self._init.size)

    @property
    def dropout(self) -> float:
        """The drop probability of the module's `CounterDropout` layers (0: it has none)."""
        return self._dropout_layers[0].p if self._dropout_layers else 0.0

    @property
    def dropout_widths(self) -> tuple[int, ...]:
        """Units per sample of each `CounterDropout` layer, in forward order
        ([`MaskedTraining`][adcs.sim.model.MaskedTraining]; empty: no dropout)."""
        return tuple(layer.width for layer in self._dropout_layers)

    def init_params(self, n_runs: int) -> F32Array:
        """w⁽⁰⁾ of the module the factory built, shape (n_runs, dim), float32."""
        check_int("n_runs", n_runs)
        return np.tile(self._init, (n_runs, 1))

    def loss_and_grad(
        self,
        params: F32Array,
        x: F32Array,
        y: IntArray,
        masks: Sequence[BoolArray] | None = None,
    ) -> tuple[F32Array, F32Array]:
        """Mean minibatch loss (J,) and its gradient (J, dim) of J independent problems.

        Parameters
        ----------
        params : ndarray of shape (J, dim), float32
        x : ndarray of shape (J, B, *input_shape), float32
        y : ndarray of shape (J, B), int in [0, n_classes)
        masks : sequence of ndarray of shape (J, B, width), bool, optional
            The keep masks of the module's `CounterDropout` layers, one per layer in forward
            order (`dropout_widths`); kept units are divided by 1 − p. Jobs with masks run on
            the ``vmap`` path. None (default): no dropout.

        Returns
        -------
        loss : ndarray of shape (J,), float32
            (1/B) Σ_b ℓ(f(x_jb; w_j), y_jb).
        grad : ndarray of shape (J, dim), float32
            ∇_w of the loss at w_j.
        """
        params = self._params(params)
        x, y = np.asarray(x), np.asarray(y)
        n_jobs = params.shape[0]
        if x.ndim < 2 or x.shape[0] != n_jobs or y.shape != x.shape[:2]:
            raise ValueError(
                f"x must have shape (J={n_jobs}, B, *input_shape) and y (J, B), got {x.shape} "
                f"and {y.shape}"
            )
        if y.shape[1] == 0:
            raise ValueError("each job needs at least one sample (B >= 1)")
        if n_jobs == 0:
            return np.empty(0, np.float32), np.empty((0, self.dim), np.float32)
        xt = _tensor(x, np.float32, self.device)
        yt = _tensor(y, np.int64, self.device)
        per_call = max(1, self.samples_per_call // y.shape[1])
        module = self._module()
        shared = functools.partial(self._job_loss, module)
        keep = self._keep(masks, y.shape)
        plan = self._plan if keep is None else None  # masks: the vmap path
        more = () if keep is None else (0,)  # vmap's in_dims of the masks

        def part(lo: int, hi: int) -> tuple[tuple[torch.Tensor, ...], ...]:
            return () if keep is None else (tuple(m[lo:hi] for m in keep),)

        runs = list(_shared_runs(params))
        if (
            len(runs) == 1 and n_jobs > 1 and n_jobs <= per_call
        ):  # the usual call: one run's clients
            w = _tensor(params[0], np.float32, self.device)
            if plan is not None:
                value, g = self._shared(w, xt, yt)
                return value.cpu().numpy(), g.cpu().numpy()
            g, value = vmap(grad_and_value(shared), in_dims=(None, 0, 0, *more))(
                w, xt, yt, *part(0, n_jobs)
            )
            return value.cpu().numpy(), g.cpu().numpy()  # on the CPU: no copy
        loss = np.empty(n_jobs, dtype=np.float32)
        grad = np.empty((n_jobs, self.dim), dtype=np.float32)
        singles: list[int] = []
        for start, stop in runs:
            if stop - start == 1:
                singles.append(start)
                continue
            w = _tensor(params[start], np.float32, self.device)
            mapped = vmap(grad_and_value(shared), in_dims=(None, 0, 0, *more))
            for lo in range(start, stop, per_call):
                hi = min(lo + per_call, stop)
                if plan is not None:
                    value, g = self._shared(w, xt[lo:hi], yt[lo:hi])
                else:
                    g, value = mapped(w, xt[lo:hi], yt[lo:hi], *part(lo, hi))
                grad[lo:hi], loss[lo:hi] = g.cpu().numpy(), value.cpu().numpy()
        if singles:
            mapped = vmap(grad_and_value(shared), in_dims=(0, 0, 0, *more))
            for lo in range(0, len(singles), per_call):
                rows = np.asarray(singles[lo : lo + per_call])
                w = _tensor(params[rows], np.float32, self.device)
                index = torch.from_numpy(rows).to(self.device)
                picked = () if keep is None else (tuple(m[index] for m in keep),)
                g, value = mapped(w, xt[index], yt[index], *picked)
                grad[rows], loss[rows] = g.cpu().numpy(), value.cpu().numpy()
        return loss, grad

    def _keep(
        self, masks: Sequence[BoolArray] | None, shape: tuple[int, ...]
    ) -> tuple[torch.Tensor, ...] | None:
        """The dropout layers' multipliers (J, B, width): keep / (1 − p) as float32, as
        ``torch.nn.Dropout`` scales its mask (None: no masks)."""
        if masks is None:
            return None
        widths = self.dropout_widths
        if len(masks) != len(widths):
            raise ValueError(
                f"masks must hold one array per dropout layer ({len(widths)}), got {len(masks)}"
            )
        out = []
        for mask, width in zip(masks, widths, strict=True):
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (*shape, width):
                raise ValueError(
                    f"each mask must be a bool array of shape {(*shape, width)}, got "
                    f"{mask.dtype} {mask.shape}"
                )
            keep = _tensor(mask, np.float32, self.device)
            out.append(keep.div_(1.0 - self.dropout))
        return tuple(out)

    def minibatch_loss(self, params: F32Array, x: F32Array, y: IntArray) -> F32Array:
        """Mean minibatch loss (J,) of J jobs, without gradients (the engine's loss probes).

        Arguments as `loss_and_grad`. On the shared-weight path it is a forward pass of
        each run of jobs with identical parameters; on the ``vmap`` path it is
        ``loss_and_grad(...)[0]``, bit for bit.
        """
        if self._plan is None:
            return self.loss_and_grad(params, x, y)[0]
        params = self._params(params)
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim < 2 or x.shape[0] != params.shape[0] or y.shape != x.shape[:2] or not y.size:
            return self.loss_and_grad(params, x, y)[0]  # its message names the bad shapes
        xt = _tensor(x, np.float32, self.device)
        yt = _tensor(y, np.int64, self.device)
        per_call = max(1, self.samples_per_call // y.shape[1])
        loss = torch.empty(params.shape[0], dtype=torch.float32, device=self.device)
        for start, stop in _shared_runs(params):
            w = _tensor(params[start], np.float32, self.device)
            for lo in range(start, stop, per_call):
                hi = min(lo + per_call, stop)
                xs, ys = xt[lo:hi].flatten(0, 1), yt[lo:hi].flatten()
                check = functools.partial(self._check_shared, batch=xs.shape[0])
                loss[lo:hi] = self._plan.loss(w, xs, ys, self._loss_fn, hi - lo, check)
        return loss.cpu().numpy()

    def evaluate(self, params: F32Array, x: F32Array, y: IntArray) -> tuple[F32Array, BoolArray]:
        """Per-sample loss (R, S) and correctness (R, S) of R models on shared samples.

        ``params`` (R, dim); ``x`` (S, *input_shape); ``y`` (S,). A sample is correct when the
        argmax of the output is its label (ties go to the lowest class).
        """
        params = self._params(params)
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim < 1 or y.shape != x.shape[:1]:
            raise ValueError(
                f"x must have shape (S, *input_shape) and y (S,), got {x.shape}, {y.shape}"
            )
        n_runs, n_samples = params.shape[0], x.shape[0]
        xt = _tensor(x, np.float32, self.device)
        yt = _tensor(y, np.int64, self.device)
        loss = torch.empty((n_runs, n_samples), dtype=torch.float32, device=self.device)
        correct = torch.empty((n_runs, n_samples), dtype=torch.bool, device=self.device)
        module = self._module()
        with torch.no_grad():
            for r in range(n_runs):
                flat = _tensor(params[r], np.float32, self.device)
                named = self._unflatten(flat)
                for lo in range(0, n_samples, self.samples_per_call):
                    hi = min(lo + self.samples_per_call, n_samples)
                    if self._plan is not None:  # its layouts (channels-last convolutions)
                        out = self._plan.forward(flat, xt[lo:hi], keep=False)[0]
                    else:
                        out = functional_call(module, named, (xt[lo:hi],))
                    _check_output(out, hi - lo, self.n_classes)
                    loss[r, lo:hi] = self._loss_fn(out, yt[lo:hi])
                    correct[r, lo:hi] = out.argmax(dim=1) == yt[lo:hi]
        return loss.cpu().numpy(), correct.cpu().numpy()

    # -- internals -----------------------------------------------------------------------------

    def _params(self, params: F32Array) -> F32Array:
        params = np.asarray(params)
        if params.ndim != 2 or params.shape[1] != self.dim:
            raise ValueError(f"params must have shape (k, {self.dim}), got {params.shape}")
        return params.astype(np.float32, copy=False)

    def _module(self) -> nn.Module:
        """The module this thread may use (functional_call swaps its parameters for a moment)."""
        if self.device.type != "cpu" and os.getpid() != self._pid:
            raise RuntimeError(
                f"this TorchModel on {self.device} was built in another process: an accelerator "
                "context does not survive a fork, so simulate with workers=1"
            )
        if threading.get_ident() == self._owner:
            return self._template
        module: nn.Module | None = getattr(self._local, "module", None)
        if module is None:
            module = copy.deepcopy(self._template)
            self._local.module = module
        return module

    def _unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named parameter tensors (views) of one flat vector (dim,)."""
        pieces = torch.split(flat, self._sizes)
        return {n: t.view(s) for n, t, s in zip(self._names, pieces, self._shapes, strict=True)}

    def _shared(
        self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss (J,) and gradient (J, dim) of J jobs at one w (dim,): x (J, B, ...), y (J, B)."""
        assert self._plan is not None
        n_jobs = x.shape[0]
        xs, ys = x.flatten(0, 1), y.flatten()
        check = functools.partial(self._check_shared, batch=xs.shape[0])
        return self._plan.loss_and_grad(w, xs, ys, self._loss_fn, n_jobs, check)

    def _check_shared(self, out: torch.Tensor, batch: int) -> None:
        _check_output(out, batch, self.n_classes)

    def _job_loss(
        self,
        module: nn.Module,
        flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        keep: tuple[torch.Tensor, ...] | None = None,
    ) -> torch.Tensor:
        """Mean loss of one job (run under vmap): flat (dim,), x (B, *input_shape), y (B,);
        ``keep`` the dropout layers' multipliers (B, width) when it trains with dropout."""
        args = (x,) if keep is None else (x, keep)
        out = functional_call(module, self._unflatten(flat), args)
        _check_output(out, x.shape[0], self.n_classes)
        return self._loss_fn(out, y).mean()

    def _check_module(self, input_shape: tuple[int, ...]) -> None:
        """Run the module once on a small batch: output shape, unchanged buffers, vmap-able."""
        generator = torch.Generator().manual_seed(0)
        x = torch.rand((2, *input_shape), generator=generator).to(self.device)
        module = copy.deepcopy(self._template)
        before = {n: b.clone() for n, b in module.named_buffers()}
        try:
            with torch.no_grad():
                out = module(x)
        except Exception as exc:
            raise ValueError(
                f"the module cannot take inputs of shape (batch, {', '.join(map(str, input_shape))})"
                f": {type(exc).__name__}: {exc}"
            ) from None
        _check_output(out, 2, self.n_classes)
        if not bool(torch.isfinite(out).all()):
            raise ValueError("the module's output on a batch of 2 inputs is NaN or infinite")
        changed = [n for n, b in module.named_buffers() if not torch.equal(before[n], b)]
        if changed:
            raise ValueError(
                f"buffer(s) {changed} change in a forward pass; the simulator's flat parameters "
                "cannot carry state that trains (use GroupNorm or LayerNorm instead of BatchNorm)"
            )
        labels = np.zeros((1, 2), dtype=np.int64)
        try:
            self.loss_and_grad(self._init[None], x.cpu().numpy()[None], labels)
        except RuntimeError as exc:
            raise ValueError(
                f"the module cannot be mapped with torch.func.vmap ({exc}); it must be a pure "
                "function of its parameters and inputs (no randomness, no in-place state)"
            ) from None
