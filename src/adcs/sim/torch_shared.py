"""Shared-weight passes of a PyTorch model: all clients of a run at one w⁽ᵗ⁾ in one batch.

With E = 1 (the paper's setting), and at the first local step of every round, all the clients of
a run start from the same global weights w⁽ᵗ⁾ (docs/design.md §4, "Models"). Their forward pass
and their input-gradient pass are then one ordinary batched pass with shared weights — the
module's own kernels on J·B samples, convolutions (and the pooling and activations after them)
in channels-last layout. Only the weight gradients are per client. For a
``Linear`` layer with inputs a (J, B, in) and output gradients g (J, B, out), client j's weight
gradient is Σ_b g[j, b]ᵀ a[j, b] = g[j]ᵀ a[j], one GEMM per client, all in one ``torch.bmm``
over the clients that writes each product in place into the client's row of the flat gradient
(one call instead of J, and no (J, out, in) block to copy). For a
``Conv2d`` layer it is the same product of the unfolded input (im2col) and g; by default each
client's is computed by PyTorch's own convolution weight-gradient kernel on the client's rows
(oneDNN unfolds on the fly, without writing the patches out), and ``conv_weight_grad =
"unfold"`` writes the patches and takes one ``torch.bmm`` over the clients (slower on the CPU:
``adcs bench torch --paths shared-unfold`` measures it). A bias gradient is the client's sum of
g. A probe (the loss at w⁽ᵗ⁾) is the forward pass alone, and so is the evaluation of a model.

The backward pass is written by hand (`SharedPlan.output_grads`): from the loss's gradient at
the output (autograd through the per-sample loss alone), every layer's input gradient by the
kernel autograd would run for it — a convolution's or a linear layer's input gradient, a ReLU's
mask, a max-pooling's scatter through its argmax indices, a reshape — and autograd for a layer
alone where none is written. No graph is recorded, no summed weight gradient is computed, and
the first parameter layer's input gradient is skipped. A ReLU followed by a 2-d max-pooling runs
as the pooling and then the ReLU (the same values: both keep a window's largest value when it is
positive, and a window whose largest value is not has a zero gradient either way), so the ReLU,
its mask and the pooling's gradient ahead of the mask touch a quarter of the values (with 2 × 2
windows). On the CPU, a convolution whose channels are not a multiple of 8 and which a ReLU and
a max-pooling follow computes zero filters up to one, dropped after the pooling, where a check
finds the same bits (`SharedPlan._pooled_width`): the kernels vectorise over the channels.

`SharedPlan` is the plan of one module: which layers it runs and where each trainable
parameter sits in the flat vector. `plan_for` gives none (and why) for a module it cannot run
(anything but an ``nn.Sequential`` — nested ones are flattened — of ``Conv2d`` (zero padding,
one group), ``Linear``, pooling, activations, ``Flatten``/``Unflatten`` and ``Identity``, every
parameter trainable), which then keeps the ``vmap`` path of `adcs.sim.torch`.

The arithmetic differs from the ``vmap`` path in the order of its sums (float32 rounding). The
``[model]`` key ``torch_path`` (docs/guide.md) chooses the path; its default, ``"auto"``, takes
this one wherever `plan_for` gives a plan, and the ``vmap`` path elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["PATHS", "SharedPlan", "plan_for"]

PATHS = ("vmap", "shared", "auto")
"""Values of ``torch_path``: ``vmap`` (every job through ``torch.func.vmap``), ``shared`` (the
shared-weight pass; a module it cannot run is refused), ``auto`` (shared where it can run)."""

_ELEMENTWISE = (
    nn.ReLU,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Softplus,
    nn.Identity,
)
"""Parameterless layers that act on every sample alone, whatever their input's shape."""
_POOLING = (
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
)

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class _Param:
    """Where a layer's weight (and bias) sit in the flat parameter vector, [start, start + n),
    and the weight's shape."""

    weight: tuple[int, int]
    bias: tuple[int, int] | None
    shape: tuple[int, ...]


def _layers(module: nn.Module) -> list[nn.Module] | None:
    """The leaf layers of nested ``nn.Sequential`` containers, in order (None: not sequential)."""
    if type(module) is not nn.Sequential:
        return None
    out: list[nn.Module] = []
    for child in module.children():
        inner = _layers(child) if type(child) is nn.Sequential else [child]
        if inner is None:
            return None
        out += inner
    return out


def _why_not(layer: nn.Module) -> str | None:
    """Why the shared pass cannot run ``layer`` (None: it can)."""
    if isinstance(layer, nn.Conv2d):
        if layer.groups != 1 or layer.padding_mode != "zeros" or isinstance(layer.padding, str):
            return f"{layer} (groups, padding mode or string padding)"
        return None
    if isinstance(layer, nn.Linear):
        return None
    if isinstance(layer, nn.Flatten):
        return None if layer.start_dim >= 1 else f"{layer} (flattens the batch)"
    if isinstance(layer, nn.Unflatten):
        return None if isinstance(layer.dim, int) and layer.dim >= 1 else f"{layer}"
    if isinstance(layer, _ELEMENTWISE + _POOLING):
        return None
    return f"{type(layer).__name__} (not a layer the shared-weight pass knows)"


@dataclass(frozen=True)
class SharedPlan:
    """How the shared-weight pass runs a module (see `plan_for`).

    Attributes
    ----------
    layers : tuple of nn.Module
        The module's leaf layers in order.
    params : tuple of (_Param or None)
        For each layer, where its parameters sit in the flat vector (None: it has none).
    dim : int
        Length of the flat parameter vector.
    channels_last_from : int
        A convolution runs on channels-last tensors (input and weight) when it has at least
        this many output channels, NCHW otherwise (0, the default: every one). Channels-last
        kernels vectorise over the channels, and so do the pooling and activation layers after
        them: measured with ``adcs bench torch --paths shared,shared-nchw``, they pay on both
        LeNet-5 (max-pooling of NCHW tensors dominates its NCHW forward pass) and the
        CIFAR-shaped CNN.
    conv_weight_grad : {"kernel", "unfold"}
        A Conv2d's per-client weight gradients: PyTorch's weight-gradient kernel on each
        client's rows, or the written-out patches and one ``torch.bmm`` over the clients.
    pool_channels : int
        On the CPU, a channels-last convolution followed by a ReLU and a 2-d max-pooling
        computes its channels padded with zero filters to a multiple of this many, where that
        gives the same bits (`_pooled_width`; 8, the default, fills the AVX2 registers the
        kernels vectorise over; 1: never).
    """

    layers: tuple[nn.Module, ...]
    params: tuple[_Param | None, ...]
    dim: int
    channels_last_from: int = 0
    conv_weight_grad: str = "kernel"
    pool_channels: int = 8
    _exact: dict[tuple[Any, ...], bool] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def forward(
        self, flat: torch.Tensor, x: torch.Tensor, keep: bool
    ) -> tuple[torch.Tensor, list[tuple[int, str, Any]]]:
        """The module's output on x (N, *input_shape) at the flat parameters (dim,).

        With ``keep``, the returned tape holds, from the first parameter layer on, (layer index,
        kind, what `_backward` needs of the layer): ``"param"``, its input and weight; ``"relu"``,
        its output; ``"pool"``, a 2-d max-pooling's input and argmax indices; ``"relu-pool"``,
        a ReLU and the max-pooling after it, run as pooling then ReLU: the pooling's input, its
        indices and the ReLU's output; ``"reshape"``, the input's shape; ``"autograd"``, any
        other layer's input and output, recorded by autograd.
        """
        tape: list[tuple[int, str, Any]] = []
        h = x
        pooled_first = -1  # the max-pooling just run before the ReLU in front of it
        channels = 0  # the real channels of a convolution's output padded with zero filters
        for i, (layer, where) in enumerate(zip(self.layers, self.params, strict=True)):
            if i == pooled_first:
                continue
            if where is None:
                if self._relu_then_pool(i, h):
                    # max-pooling commutes with the ReLU in front of it (both keep the largest
                    # positive value, and the ReLU then runs on a quarter of the values); the
                    # gradient of a window whose maximum is not positive is zero either way
                    pool = cast(nn.MaxPool2d, self.layers[i + 1])
                    pooled_first = i + 1
                    if (keep and tape) or channels:
                        pooled, indices = torch.ops.aten.max_pool2d_with_indices(
                            h, *_pool_args(pool)
                        )
                        if channels:  # the zero filters' channels go
                            h, pooled, indices = (
                                h[:, :channels],
                                pooled[:, :channels],
                                indices[:, :channels],
                            )
                            out = F.relu(pooled).contiguous(memory_format=torch.channels_last)
                            channels = 0
                        else:
                            out = F.relu(pooled)
                        if keep and tape:
                            tape.append((i + 1, "relu-pool", (h, indices, out)))
                    else:
                        out = F.relu(pool(h))
                    h = out
                elif not (keep and tape):  # before the first parameter layer: nothing to keep
                    h = layer(h)
                elif isinstance(layer, nn.ReLU):
                    h = F.relu(h)
                    tape.append((i, "relu", h))
                elif isinstance(layer, nn.MaxPool2d) and h.ndim == 4:
                    h_in = h
                    h, indices = torch.ops.aten.max_pool2d_with_indices(h, *_pool_args(layer))
                    tape.append((i, "pool", (h_in, indices)))
                elif isinstance(layer, nn.Flatten | nn.Unflatten | nn.Identity):
                    tape.append((i, "reshape", h.shape))
                    h = layer(h)
                else:  # autograd records this one layer alone
                    h_in = h.detach().requires_grad_()
                    with torch.enable_grad():
                        out = layer(h_in)
                    tape.append((i, "autograd", (h_in, out)))
                    h = out.detach()
                continue
            w = flat[where.weight[0] : where.weight[1]]
            b = None if where.bias is None else flat[where.bias[0] : where.bias[1]]
            if isinstance(layer, nn.Conv2d):
                weight = w.view(where.shape)
                if layer.out_channels >= self.channels_last_from:
                    # the weight's strides too: with one input channel, an input's layout is
                    # ambiguous and the kernel would follow the weight's
                    h = h.contiguous(memory_format=torch.channels_last)
                    weight = weight.to(memory_format=torch.channels_last)
                else:
                    h = h.contiguous()
                wide = self._pooled_width(i, h)
                if wide:  # zero filters up to `wide` channels, dropped after the pooling
                    channels = layer.out_channels
                    out = F.conv2d(h, *_widened(weight, b, wide), *_conv_args(layer))
                else:
                    out = F.conv2d(h, weight, b, *_conv_args(layer))
            else:
                weight = w.view(where.shape)
                out = F.linear(h, weight, b)
            if keep:
                tape.append((i, "param", (h, weight)))
            h = out
        return h, tape

    def _pooled_width(self, i: int, h: torch.Tensor) -> int:
        """The channels convolution i computes on h (its input, as it runs): its own, or, where
        it pays and gives the same bits, its own padded with zero filters up to a multiple of
        ``pool_channels`` (0: its own).

        On the CPU, PyTorch's channels-last convolution and max-pooling vectorise over the
        channels, with slow tails for the rest: LeNet-5's first convolution (6 channels) and
        the ReLU and max-pooling after it (`forward` runs them as pooling, then ReLU) run
        faster with 8, the copy of the 6 channels the next layer takes included (``adcs bench
        torch`` times the forward pass). The zero filters' channels go after the pooling (a
        window's maximum and its argmax are per channel), so only a convolution that a ReLU
        and a 2-d max-pooling follow is padded, and only when the padded convolution gives the
        real channels bit for bit: a kernel's order of summation depends on the shapes and
        strides, not on the values, so it is checked once per input shape and strides, on
        random inputs and weights (`_pads_exactly`).
        """
        layer = self.layers[i]
        assert isinstance(layer, nn.Conv2d)
        multiple, out = self.pool_channels, layer.out_channels
        if (
            h.device.type != "cpu"
            or out % multiple == 0
            or out < self.channels_last_from
            or not self._relu_then_pool(i + 1, h)
        ):
            return 0
        wide = -(-out // multiple) * multiple
        key = (i, tuple(h.shape), h.stride(), h.dtype)
        exact = self._exact.get(key)
        if exact is None:
            exact = self._exact[key] = _pads_exactly(layer, h, wide)
        return wide if exact else 0

    def _relu_then_pool(self, i: int, h: torch.Tensor) -> bool:
        """Whether layer i is a ReLU followed by a 2-d max-pooling, on a batch of images."""
        return (
            h.ndim == 4
            and i + 1 < len(self.layers)
            and isinstance(self.layers[i], nn.ReLU)
            and isinstance(self.layers[i + 1], nn.MaxPool2d)
            and not cast(nn.MaxPool2d, self.layers[i + 1]).return_indices
        )

    def loss(
        self,
        flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        loss_fn: LossFn,
        n_jobs: int,
        check: Callable[[torch.Tensor], None] | None = None,
    ) -> torch.Tensor:
        """Mean loss (J,) of J jobs of B samples each at one w: x (J·B, ...), y (J·B,)."""
        with torch.no_grad():
            out, _ = self.forward(flat, x, keep=False)
            if check is not None:
                check(out)
            return loss_fn(out, y).view(n_jobs, -1).mean(dim=1)

    def output_grads(
        self,
        flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        loss_fn: LossFn,
        n_jobs: int,
        check: Callable[[torch.Tensor], None] | None = None,
    ) -> tuple[torch.Tensor, list[tuple[int, torch.Tensor, torch.Tensor]]]:
        """The forward pass and the input-gradient pass, shared by the J jobs (no weight
        gradient): the jobs' mean losses (J,) and, for every parameter layer, (its index, its
        input, the gradient of Σ_j (job j's mean loss) at its output).

        The backward pass is written by hand (`_backward`): the kernels autograd would run for
        each layer's input gradient, in the same order, and nothing else — no autograd graph,
        and no input gradient of the first parameter layer. Arguments as `loss_and_grad`.
        """
        with torch.no_grad():
            out, tape = self.forward(flat.detach(), x, keep=True)
            if check is not None:
                check(out)
        logits = out.requires_grad_()
        with torch.enable_grad():  # the loss alone through autograd: any per-sample loss
            per_sample = loss_fn(logits, y).view(n_jobs, -1)
            total = per_sample.sum() / per_sample.shape[1]  # Σ_j of job j's mean loss
            (g,) = torch.autograd.grad(total, [logits])
        with torch.no_grad():
            at_outputs = self._backward(tape, g)
        return per_sample.detach().mean(dim=1), at_outputs

    def _backward(
        self, tape: list[tuple[int, str, Any]], g: torch.Tensor
    ) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """From the gradient g at the module's output, back through the tape of `forward`:
        (index, input, gradient at the output) of every parameter layer, in forward order."""
        at_outputs: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        for k in range(len(tape) - 1, -1, -1):
            i, kind, saved = tape[k]
            layer = self.layers[i]
            if kind == "param":
                a, weight = saved
                at_outputs.append((i, a, g))
                if k == 0:
                    break  # the first parameter layer: no input gradient
                if isinstance(layer, nn.Conv2d):
                    g = torch.ops.aten.convolution_backward(
                        g,
                        a,
                        weight,
                        None,
                        layer.stride,
                        layer.padding,
                        layer.dilation,
                        False,
                        (0, 0),
                        1,
                        (True, False, False),
                    )[0]
                else:
                    g = g.matmul(weight)
            elif kind == "relu":
                g = torch.ops.aten.threshold_backward(g, saved, 0)
            elif kind in ("pool", "relu-pool"):
                if kind == "relu-pool":  # the ReLU ran after the pooling (`forward`)
                    h_in, indices, out = saved
                    g = torch.ops.aten.threshold_backward(g, out, 0)
                else:
                    h_in, indices = saved
                g = torch.ops.aten.max_pool2d_with_indices_backward(
                    g, h_in, *_pool_args(cast(nn.MaxPool2d, layer)), indices
                )
            elif kind == "reshape":
                g = g.reshape(saved)
            else:
                h_in, out = saved
                with torch.enable_grad():
                    (g,) = torch.autograd.grad(out, [h_in], g)
        at_outputs.reverse()
        return at_outputs

    def loss_and_grad(
        self,
        flat: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        loss_fn: LossFn,
        n_jobs: int,
        check: Callable[[torch.Tensor], None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean loss (J,) and its gradient (J, dim) of J jobs of B samples each at one w.

        Parameters
        ----------
        flat : tensor (dim,)
            The shared parameters (not modified; no gradient is taken through them).
        x : tensor (J·B, *input_shape); y : tensor (J·B,)
            Job j's samples are rows j·B … j·B + B − 1.
        loss_fn : callable
            Per-sample loss of (output, labels).
        n_jobs : int
            J.
        check : callable, optional
            Called on the module's output (its shape checks).
        """
        loss, at_outputs = self.output_grads(flat, x, y, loss_fn, n_jobs, check)
        grad = torch.empty((n_jobs, self.dim), dtype=flat.dtype, device=flat.device)
        for i, a, g in at_outputs:
            self.weight_grad(i, a, g, n_jobs, grad)
        return loss, grad

    def weight_grad(
        self, i: int, a: torch.Tensor, g: torch.Tensor, n_jobs: int, grad: torch.Tensor
    ) -> None:
        """Per-job weight and bias gradients of parameter layer ``i`` into ``grad`` (J, dim).

        ``a`` is the layer's input and ``g`` the gradient of the loss at its output, both with
        the J jobs' samples stacked along dimension 0.
        """
        layer, where = self.layers[i], self.params[i]
        assert where is not None
        w0, w1 = where.weight
        if isinstance(layer, nn.Conv2d) and self.conv_weight_grad == "kernel":
            _conv_weight_grads(layer, a, g, n_jobs, grad[:, w0:w1])
            # the bias apart: the kernel's own bias sum costs more per call than one sum of all
            g_rows = g.sum(dim=(2, 3)).view(n_jobs, -1, g.shape[1])
        elif isinstance(layer, nn.Conv2d):
            cols = _patches(a, layer)  # (N·L, C·kh·kw)
            g_rows = g.permute(0, 2, 3, 1).reshape(n_jobs, -1, g.shape[1])  # (J, B·L, O)
            cols = cols.view(n_jobs, -1, cols.shape[-1])  # (J, B·L, C·kh·kw)
            grad[:, w0:w1] = torch.bmm(g_rows.transpose(1, 2), cols).view(n_jobs, -1)
        else:  # Linear: one GEMM per job, all in one batched product into the jobs' rows
            g_rows = g.reshape(n_jobs, -1, g.shape[-1])  # (J, B·…, out)
            cols = a.reshape(n_jobs, -1, a.shape[-1])  # (J, B·…, in)
            rows = grad[:, w0:w1].view(n_jobs, g_rows.shape[-1], cols.shape[-1])
            torch.bmm(g_rows.transpose(1, 2), cols, out=rows)
        if where.bias is not None:
            grad[:, where.bias[0] : where.bias[1]] = g_rows.sum(dim=1)


def _conv_args(conv: nn.Conv2d) -> tuple[Any, Any, Any]:
    """(stride, padding, dilation) of a Conv2d, as ``F.conv2d`` takes them."""
    return conv.stride, conv.padding, conv.dilation


def _widened(
    weight: torch.Tensor, bias: torch.Tensor | None, wide: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A channels-last convolution's weight (O, C, kh, kw) and bias (O,) with zero filters
    appended up to ``wide`` output channels; the weight channels-last like `SharedPlan.forward`
    makes it (its strides too where one input channel leaves the layout ambiguous)."""
    extra = wide - weight.shape[0]
    zeros = weight.new_zeros((extra, *weight.shape[1:]))
    weight = torch.cat([weight, zeros]).to(memory_format=torch.channels_last)
    if bias is not None:
        bias = torch.cat([bias, bias.new_zeros(extra)])
    return weight, bias


def _pads_exactly(conv: nn.Conv2d, h: torch.Tensor, wide: int) -> bool:
    """Whether channels-last ``conv`` on inputs of h's shape, strides, dtype and device gives
    the same bits in its channels with zero filters appended up to ``wide`` channels as
    without: on random inputs, weights and bias (seeded), where a different order of summation
    would show."""
    generator = torch.Generator(device=h.device).manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=generator, dtype=h.dtype, device=h.device)

    x = torch.empty_strided(h.shape, h.stride(), dtype=h.dtype, device=h.device)
    x.copy_(rand(*h.shape))  # h's strides, which choose the kernel
    weight = rand(*conv.weight.shape).to(memory_format=torch.channels_last)  # as `forward`
    bias = rand(conv.out_channels) if conv.bias is not None else None
    with torch.no_grad():
        plain = F.conv2d(x, weight, bias, *_conv_args(conv))
        padded = F.conv2d(x, *_widened(weight, bias, wide), *_conv_args(conv))
    return torch.equal(plain, padded[:, : conv.out_channels])


def _pool_args(pool: nn.MaxPool2d) -> tuple[list[int], list[int], list[int], list[int], bool]:
    """(kernel size, stride, padding, dilation, ceil mode) of a 2-d max-pooling, as the aten
    max-pooling kernels take them."""

    def pair(v: Any) -> list[int]:
        return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]

    stride = pool.stride if pool.stride is not None else pool.kernel_size
    return (
        pair(pool.kernel_size),
        pair(stride),
        pair(pool.padding),
        pair(pool.dilation),
        bool(pool.ceil_mode),
    )


def _conv_weight_grads(
    conv: nn.Conv2d, a: torch.Tensor, g: torch.Tensor, n_jobs: int, out: torch.Tensor
) -> None:
    """Job j's weight gradient of ``conv`` into out[j] (J, O·C·kh·kw): PyTorch's own
    weight-gradient kernel on the job's rows of a and g, in a's memory layout."""
    layout = torch.channels_last if a.is_contiguous(memory_format=torch.channels_last) else None
    shape = conv.weight.shape
    weight = torch.empty(
        shape, dtype=a.dtype, device=a.device, memory_format=layout or torch.contiguous_format
    )
    rows = a.shape[0] // n_jobs
    for j in range(n_jobs):
        part = slice(j * rows, (j + 1) * rows)
        _, gw, _ = torch.ops.aten.convolution_backward(
            g[part],
            a[part],
            weight,
            None,
            conv.stride,
            conv.padding,
            conv.dilation,
            False,
            (0, 0),
            1,
            (False, True, False),
        )
        out[j].view(shape).copy_(gw)


def _patches(a: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """The im2col matrix of a Conv2d's input a (N, C, H, W): (N·Ho·Wo, C·kh·kw), rows ordered
    (n, ho, wo) and columns (c, i, j) like the flattened weight — one copy of the patches."""
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    ph, pw = cast(tuple[int, int], conv.padding)  # string padding is refused
    if ph or pw:
        a = F.pad(a, (pw, pw, ph, ph))
    # (N, C, Ho, Wo, span_h, span_w) views, then every dilation-th tap of the span
    view = a.unfold(2, (kh - 1) * dh + 1, sh).unfold(3, (kw - 1) * dw + 1, sw)
    view = view[..., ::dh, ::dw]
    n, c, ho, wo = view.shape[:4]
    return view.permute(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * kh * kw)


def plan_for(
    module: nn.Module, names: tuple[str, ...], sizes: list[int]
) -> tuple[SharedPlan | None, str]:
    """The shared-weight plan of ``module``, whose flat vector holds its trainable parameters
    ``names`` (of ``sizes`` entries) in order, or (None, why the pass cannot run it)."""
    layers = _layers(module)
    if layers is None:
        return None, f"{type(module).__name__} is not an nn.Sequential of known layers"
    offset, offsets = 0, {}
    for name, size in zip(names, sizes, strict=True):
        offsets[name] = (offset, offset + size)
        offset += size
    by_param = {id(p): n for n, p in module.named_parameters()}
    params: list[_Param | None] = []
    for layer in layers:
        why = _why_not(layer)
        if why is not None:
            return None, f"it cannot run {why}"
        own = dict(layer.named_parameters(recurse=False))
        if not own:
            params.append(None)
            continue
        spans = {k: offsets.get(by_param[id(p)]) for k, p in own.items()}
        weight, bias = spans.get("weight"), spans.get("bias")
        if weight is None or ("bias" in spans and bias is None) or set(spans) - {"weight", "bias"}:
            return None, f"{layer} has frozen parameters"
        params.append(_Param(weight, bias, tuple(own["weight"].shape)))
    return SharedPlan(tuple(layers), tuple(params), offset), ""
