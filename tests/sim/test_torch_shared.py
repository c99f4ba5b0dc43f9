"""The shared-weight path of PyTorch models: the same numbers as the vmap path to float32
rounding, probes without a backward pass, modules it cannot run fall back (or are refused), and
the pass stays on the model's device in float32, moving its results to the CPU once per call."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from adcs.data import load_subset
from adcs.experiments.config import MODEL_TABLE, packaged_config
from adcs.experiments.config.overrides import with_overrides
from adcs.experiments.config.schema import ConfigError
from adcs.experiments.run.runner import run_experiment
from adcs.schedulers import OCS, PowerOfChoice, Uniform
from adcs.sim import RunSpec, SimConfig, local_update, simulate
from adcs.sim.models import MODELS
from adcs.sim.torch import TorchModel, cifar_cnn, lenet5, model_for
from adcs.sim.torch_shared import SharedPlan

from .conftest import N_CLASSES, N_FEATURES, as_images, make_data

EPS32 = float(np.finfo(np.float32).eps)


def conv_net(stride: int = 1, padding: int = 1, dilation: int = 1) -> nn.Module:
    """A conv net on 4×4×1 inputs (the synthetic data's 12 features, padded to 16)."""
    conv = nn.Conv2d(1, 3, kernel_size=3, stride=stride, padding=padding, dilation=dilation)
    with torch.no_grad():
        side = conv(torch.zeros(1, 1, 4, 4)).shape[-1]
    return nn.Sequential(
        nn.Unflatten(1, (1, 4, 4)),
        conv,
        nn.Tanh(),
        nn.Sequential(nn.Conv2d(3, 2, kernel_size=1), nn.ReLU()),  # nested: flattened
        nn.Flatten(),
        nn.Linear(2 * side * side, N_CLASSES),
    )


def pooled_net() -> nn.Module:
    return nn.Sequential(
        nn.Unflatten(1, (1, 4, 4)),
        nn.Conv2d(1, 4, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Conv2d(4, 4, kernel_size=1, bias=False),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4, N_CLASSES),
    )


def overlapping_net() -> nn.Module:
    """ReLU then max-pooling of overlapping, padded windows (ceil mode), and a Tanh."""
    return nn.Sequential(
        nn.Unflatten(1, (1, 4, 4)),
        nn.Conv2d(1, 4, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),  # 3 × 3
        nn.Conv2d(4, 3, kernel_size=2),  # 2 × 2
        nn.ReLU(),
        nn.MaxPool2d(1),
        nn.Flatten(),
        nn.Linear(12, 8),
        nn.Tanh(),
        nn.Linear(8, N_CLASSES),
    )


def pooled_rows() -> nn.Module:
    """A ReLU and max-pooling of 3-d tensors (N, 4, 4), which autograd records for the pass."""
    return nn.Sequential(
        nn.Linear(N_FEATURES, 16),
        nn.Unflatten(1, (4, 4)),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4, N_CLASSES),
    )


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(N_FEATURES, 16), nn.Tanh(), nn.Linear(16, N_CLASSES))


FACTORIES = {
    "lenet5": (lenet5, (784,), 10),
    "cifar-cnn": (cifar_cnn, (3, 32, 32), 10),
    "conv": (conv_net, (16,), N_CLASSES),
    "conv-stride-2": (lambda: conv_net(stride=2), (16,), N_CLASSES),
    "conv-dilation-2": (lambda: conv_net(padding=2, dilation=2), (16,), N_CLASSES),
    "pooled": (pooled_net, (16,), N_CLASSES),
    "overlapping": (overlapping_net, (16,), N_CLASSES),
    "pooled-rows": (pooled_rows, (N_FEATURES,), N_CLASSES),
    "mlp": (mlp, (N_FEATURES,), N_CLASSES),
}


def longest_sum(factory: Any, shape: tuple[int, ...], batch: int) -> int:
    """The most terms any one float32 sum of a job's loss gradient adds: per parameter layer,
    the weight gradient's sum over the batch and output positions, the forward pass's fan-in and
    the input gradient's fan-out."""
    lengths = [batch]

    def hook(layer: nn.Module, _: Any, out: torch.Tensor) -> None:
        weight = layer.weight
        assert isinstance(weight, torch.Tensor)
        positions = math.prod(out.shape[2:]) if out.ndim > 2 else 1
        lengths.extend([batch * positions, math.prod(weight.shape[1:]), weight.shape[0]])

    module = factory()
    for sub in module.modules():
        if isinstance(sub, nn.Conv2d | nn.Linear):
            sub.register_forward_hook(hook)
    module(torch.zeros((1, *shape)))
    return max(lengths)


def random_jobs(
    model: TorchModel, n_jobs: int, batch: int, shape: tuple[int, ...], n_classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jobs in runs of 3, 1 and 2 identical parameter rows (and again), x (J, B, *shape), y."""
    rng = np.random.default_rng(seed)
    runs = np.resize([0, 0, 0, 1, 2, 2], n_jobs)
    noise = rng.normal(0, 0.05, size=(3, model.dim)).astype(np.float32)
    params = model.init_params(n_jobs) + noise[runs]
    x = rng.random((n_jobs, batch, *shape), dtype=np.float32)
    y = rng.integers(0, n_classes, size=(n_jobs, batch))
    return params, x, y


@pytest.mark.parametrize(
    ("name", "samples_per_call"),
    [(name, 4096) for name in FACTORIES] + [(name, 8) for name in FACTORIES if name != "cifar-cnn"],
)  # in chunks of two jobs too; the CIFAR-shaped CNN is slow on the vmap path, so once
def test_shared_pass_equals_the_vmap_path_to_float32_rounding(
    name: str, samples_per_call: int
) -> None:
    factory, shape, n_classes = FACTORIES[name]
    batch, n_jobs = (2, 6) if name == "cifar-cnn" else (4, 9)
    kwargs: dict[str, Any] = {"input_shape": shape, "n_classes": n_classes}
    vmapped = TorchModel(factory, samples_per_call=samples_per_call, path="vmap", **kwargs)
    shared = TorchModel(factory, samples_per_call=samples_per_call, path="shared", **kwargs)
    assert (vmapped.path, shared.path) == ("vmap", "shared")
    params, x, y = random_jobs(vmapped, n_jobs, batch, shape, n_classes, seed=3)
    loss, grad = vmapped.loss_and_grad(params, x, y)
    loss_s, grad_s = shared.loss_and_grad(params, x, y)
    assert grad_s.dtype == np.float32 and grad_s.shape == (n_jobs, vmapped.dim)
    # the worst-case rounding of a float32 sum of n terms is n·eps of the terms' magnitude
    n = longest_sum(factory, shape, batch)
    np.testing.assert_allclose(grad_s, grad, rtol=0, atol=n * EPS32 * np.abs(grad).max())
    np.testing.assert_allclose(loss_s, loss, rtol=0, atol=n * EPS32 * np.abs(loss).max())
    assert not np.array_equal(grad_s, np.zeros_like(grad_s))


@pytest.mark.parametrize("name", ["conv", "conv-stride-2", "conv-dilation-2", "pooled", "lenet5"])
@pytest.mark.parametrize(
    "variant", [{"channels_last_from": 0}, {"conv_weight_grad": "unfold"}], ids=["cl", "unfold"]
)
def test_the_plans_layouts_and_weight_gradients_give_the_same_numbers(
    name: str, variant: dict[str, Any]
) -> None:
    """Every convolution channels-last, and the written-out patches with one bmm."""
    factory, shape, n_classes = FACTORIES[name]
    model = TorchModel(factory, input_shape=shape, n_classes=n_classes, path="shared")
    params, x, y = random_jobs(model, 6, 3, shape, n_classes, seed=6)
    loss, grad = model.loss_and_grad(params, x, y)
    assert model._plan is not None
    model._plan = dataclasses.replace(model._plan, **variant)
    loss_v, grad_v = model.loss_and_grad(params, x, y)
    n = longest_sum(factory, shape, 3)
    np.testing.assert_allclose(grad_v, grad, rtol=0, atol=n * EPS32 * np.abs(grad).max())
    np.testing.assert_allclose(loss_v, loss, rtol=0, atol=n * EPS32 * np.abs(loss).max())


def padded_net() -> nn.Module:
    """Convolutions of 3 and 5 channels (padded to 8 before their ReLU and max-pooling) and
    one of 2 that no pooling follows."""
    return nn.Sequential(
        nn.Unflatten(1, (1, 4, 4)),
        nn.Conv2d(1, 3, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2, stride=1),  # 3 × 3
        nn.Conv2d(3, 5, kernel_size=2, padding=1),  # 4 × 4
        nn.ReLU(),
        nn.MaxPool2d(2),  # 2 × 2
        nn.Conv2d(5, 2, kernel_size=1),
        nn.Tanh(),
        nn.Flatten(),
        nn.Linear(8, N_CLASSES),
    )


@pytest.mark.parametrize("name", ["lenet5", "padded", "cifar-cnn"])
def test_convolutions_padded_with_zero_filters_give_the_same_bits(name: str) -> None:
    """A convolution followed by a ReLU and a 2-d max-pooling runs with its channels padded to
    a multiple of 8 where a check on random numbers finds the same bits; the loss, the
    gradient, a probe and an evaluation are then the same bits as unpadded (pool_channels = 1);
    LeNet-5's first convolution (6 channels) is padded, the CIFAR-shaped CNN's (32, 64) not."""
    factory, shape, n_classes = FACTORIES.get(name) or (padded_net, (16,), N_CLASSES)
    padded = TorchModel(factory, input_shape=shape, n_classes=n_classes, path="shared")
    plain = TorchModel(factory, input_shape=shape, n_classes=n_classes, path="shared")
    assert padded._plan is not None and plain._plan is not None
    plain._plan = dataclasses.replace(plain._plan, pool_channels=1)
    params, x, y = random_jobs(padded, 6, 4, shape, n_classes, seed=3)
    params[:3] = params[0]  # a run of three jobs at one w: the shared pass
    for a, b in zip(
        padded.loss_and_grad(params, x, y), plain.loss_and_grad(params, x, y), strict=True
    ):
        assert np.array_equal(a, b)
    assert np.array_equal(padded.minibatch_loss(params, x, y), plain.minibatch_loss(params, x, y))
    for a, b in zip(
        padded.evaluate(params, x[0], y[0]), plain.evaluate(params, x[0], y[0]), strict=True
    ):
        assert np.array_equal(a, b)
    checked = {(i, exact) for (i, *_), exact in padded._plan._exact.items()}
    first_conv = {"lenet5": 2, "padded": 1}.get(name)
    assert plain._plan._exact == {}
    if first_conv is None:
        assert checked == set()  # multiples of 8 channels already
    else:
        assert (first_conv, True) in checked
    if name == "padded":  # the 5-channel convolution too, not the one no pooling follows
        assert {i for i, _ in checked} == {1, 4}


def test_a_convolution_the_check_finds_inexact_is_not_padded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Zero filters that would change the real channels' bits (here: a widened weight whose
    first filter is nudged) fail the check, and the convolution runs unpadded."""
    from adcs.sim import torch_shared

    widened = torch_shared._widened

    def nudged(weight: torch.Tensor, bias: Any, wide: int) -> Any:
        w, b = widened(weight, bias, wide)
        w = w.clone()
        w[0] = w[0] * (1 + EPS32)
        return w, b

    model = TorchModel(lenet5, input_shape=(784,), n_classes=10, path="shared")
    params, x, y = random_jobs(model, 3, 4, (784,), 10, seed=3)
    params[:] = params[0]
    expected = model.loss_and_grad(params, x, y)
    model = TorchModel(lenet5, input_shape=(784,), n_classes=10, path="shared")
    assert model._plan is not None
    model._plan._exact.clear()
    monkeypatch.setattr(torch_shared, "_widened", nudged)
    for a, b in zip(model.loss_and_grad(params, x, y), expected, strict=True):
        assert np.array_equal(a, b)
    assert set(model._plan._exact.values()) == {False}


def autograd_output_grads(
    plan: SharedPlan, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, n_jobs: int
) -> list[torch.Tensor]:
    """The gradient of Σ_j (job j's mean loss) at every parameter layer's output, by autograd
    through the module's layers in their order (the plan's layouts)."""
    outputs = []
    h = x
    with torch.enable_grad():
        for layer, where in zip(plan.layers, plan.params, strict=True):
            if where is None:
                h = layer(h)
                continue
            weight = flat[where.weight[0] : where.weight[1]].view(where.shape)
            bias = None if where.bias is None else flat[where.bias[0] : where.bias[1]]
            if isinstance(layer, nn.Conv2d):
                h = h.contiguous(memory_format=torch.channels_last)
                weight = weight.to(memory_format=torch.channels_last)
                h = F.conv2d(h, weight, bias, layer.stride, layer.padding, layer.dilation)
            else:
                h = F.linear(h, weight, bias)
            if not h.requires_grad:
                h.requires_grad_()
            outputs.append(h)
        per_sample = F.cross_entropy(h, y, reduction="none").view(n_jobs, -1)
        return list(torch.autograd.grad(per_sample.sum() / per_sample.shape[1], outputs))


@pytest.mark.parametrize("name", ["lenet5", "conv", "pooled", "overlapping", "pooled-rows"])
def test_the_hand_written_backward_equals_autograd_to_float32_rounding(name: str) -> None:
    """The shared pass's input gradients (ReLU masks, max-pooling through its indices — after
    the ReLU in front of it, run as pooling then ReLU —, convolutions', linear layers',
    reshapes, and autograd for the other layers) against autograd through the module's layers;
    one channel's bias is pushed far below zero so that whole pooling windows are cut by the
    ReLU."""
    factory, shape, n_classes = FACTORIES[name]
    model = TorchModel(factory, input_shape=shape, n_classes=n_classes, path="shared")
    plan = model._plan
    assert plan is not None
    rng = np.random.default_rng(7)
    n_jobs, batch = 5, 3
    flat = torch.from_numpy(
        model.init_params(1)[0] + rng.normal(0, 0.05, model.dim).astype(np.float32)
    )
    first = next(w for w in plan.params if w is not None and w.bias is not None)
    assert first.bias is not None
    flat[first.bias[0]] = -10.0
    x = torch.from_numpy(rng.random((n_jobs * batch, *shape), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, n_classes, size=n_jobs * batch))
    loss, at_outputs = plan.output_grads(flat, x, y, model._loss_fn, n_jobs)
    expected = autograd_output_grads(plan, flat, x, y, n_jobs)
    assert [i for i, _, _ in at_outputs] == [i for i, w in enumerate(plan.params) if w is not None]
    # the gradient at a layer's output is a chain of sums through every parameter layer above
    # it, each of its fan-out terms (output channels × kernel taps, or output features)
    fan_outs = [
        where.shape[0] * math.prod(where.shape[2:]) for where in plan.params if where is not None
    ]
    for k, ((_, _, g), g_ref) in enumerate(zip(at_outputs, expected, strict=True)):
        n = sum(fan_outs[k + 1 :]) + batch
        np.testing.assert_allclose(
            g.numpy(), g_ref.numpy(), rtol=0, atol=n * EPS32 * float(g_ref.abs().max())
        )
    assert any(float(g.abs().max()) > 0 for _, _, g in at_outputs)
    # the forward pass that keeps its tape computes the same values as the one that does not
    mean = F.cross_entropy(plan.forward(flat, x, keep=False)[0], y, reduction="none")
    assert torch.equal(loss, mean.view(n_jobs, -1).mean(dim=1))


def test_one_run_of_many_clients_and_later_local_steps() -> None:
    """E = 3: the first step is the shared pass, later steps (distinct w) the vmap path."""
    kwargs: dict[str, Any] = {"input_shape": (16,), "n_classes": N_CLASSES}
    vmapped = TorchModel(conv_net, path="vmap", **kwargs)
    shared = TorchModel(conv_net, path="auto", **kwargs)
    rng = np.random.default_rng(0)
    params = vmapped.init_params(6)  # one run: every row equal
    x = rng.random((6, 3, 5, 16), dtype=np.float32)
    y = rng.integers(0, N_CLASSES, size=(6, 3, 5))
    update, first = local_update(vmapped, params, x, y, local_lr=0.5)
    update_s, first_s = local_update(shared, params, x, y, local_lr=0.5)
    n = 3 * longest_sum(conv_net, (16,), 5)  # three steps accumulate
    np.testing.assert_allclose(update_s, update, rtol=0, atol=n * EPS32 * np.abs(update).max())
    np.testing.assert_allclose(first_s, first, rtol=0, atol=n * EPS32 * np.abs(first).max())


def test_probes_are_a_forward_pass_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs: dict[str, Any] = {"input_shape": (784,), "n_classes": 10}
    vmapped = TorchModel(lenet5, path="vmap", **kwargs)
    shared = TorchModel(lenet5, path="shared", **kwargs)
    params, x, y = random_jobs(vmapped, 6, 4, (784,), 10, seed=1)
    # the vmap path's probe is its loss_and_grad's loss, bit for bit
    assert np.array_equal(
        vmapped.minibatch_loss(params, x, y), vmapped.loss_and_grad(params, x, y)[0]
    )
    expected = shared.loss_and_grad(params, x, y)[0]

    def no_backward(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a probe ran a backward pass")

    monkeypatch.setattr(torch.autograd, "grad", no_backward)
    monkeypatch.setattr(torch.Tensor, "backward", no_backward)
    probed = shared.minibatch_loss(params, x, y)
    n = longest_sum(lenet5, (784,), 4)
    np.testing.assert_allclose(probed, expected, rtol=0, atol=n * EPS32 * np.abs(expected).max())
    with pytest.raises(ValueError, match="x must have shape"):
        shared.minibatch_loss(params, x[:2], y[:2])


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(N_FEATURES, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + x[:, :N_CLASSES]


def frozen_bias() -> nn.Module:
    module = mlp()
    module[0].bias.requires_grad_(False)
    return module


@pytest.mark.parametrize(
    ("factory", "reason"),
    [
        (Residual, "not an nn.Sequential"),
        (lambda: nn.Sequential(nn.Linear(N_FEATURES, 8), nn.LayerNorm(8), nn.Linear(8, 4)),
         "LayerNorm"),
        (lambda: nn.Sequential(nn.Unflatten(1, (2, 2, 3)), nn.Conv2d(2, 2, 1, groups=2),
                               nn.Flatten(), nn.Linear(12, 4)), "groups"),
        (lambda: nn.Sequential(nn.Flatten(0), nn.Unflatten(0, (-1, N_FEATURES)),
                               nn.Linear(N_FEATURES, 4)), "flattens the batch"),
        (frozen_bias, "frozen"),
    ],
)  # fmt: skip
def test_modules_the_shared_pass_cannot_run_keep_vmap_or_are_refused(
    factory: Any, reason: str
) -> None:
    kwargs: dict[str, Any] = {"input_shape": (N_FEATURES,), "n_classes": N_CLASSES}
    auto = TorchModel(factory, path="auto", **kwargs)
    assert auto.path == "vmap"
    params, x, y = random_jobs(auto, 4, 3, (N_FEATURES,), N_CLASSES, seed=2)
    reference = TorchModel(factory, path="vmap", **kwargs).loss_and_grad(params, x, y)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(auto.loss_and_grad(params, x, y), reference, strict=True)
    )
    with pytest.raises(ValueError, match=f"path 'shared' cannot run this module: .*{reason}"):
        TorchModel(factory, path="shared", **kwargs)
    with pytest.raises(ValueError, match="path must be one of"):
        TorchModel(factory, path="fast", **kwargs)


class Calls(TorchFunctionMode):
    """Every torch function and tensor method called, with the devices and dtypes it returned."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.results: list[torch.Tensor] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.names.append(getattr(func, "__name__", repr(func)))
        for item in out if isinstance(out, tuple | list) else (out,):
            if isinstance(item, torch.Tensor):
                self.results.append(item)
        return out


@pytest.mark.parametrize("n_jobs", [3, 12])
def test_the_pass_stays_on_the_device_in_float32_and_leaves_it_once(n_jobs: int) -> None:
    """On CUDA every move to the host waits for the device: the pass moves its two results
    (loss and gradient) once per call, whatever the number of jobs and layers, and computes
    in float32 on the model's device."""
    model = TorchModel(lenet5, input_shape=(784,), n_classes=10, path="shared")
    rng = np.random.default_rng(4)
    params = model.init_params(n_jobs)
    x = rng.random((n_jobs, 4, 784), dtype=np.float32)
    y = rng.integers(0, 10, size=(n_jobs, 4))
    with Calls() as calls:
        model.loss_and_grad(params, x, y)
    host = [n for n in calls.names if n in ("cpu", "item", "tolist", "numpy", "__array__")]
    assert sorted(host) == ["cpu", "cpu", "numpy", "numpy"]
    assert {t.device for t in calls.results} == {model.device}
    floats = {t.dtype for t in calls.results if t.is_floating_point()}
    assert floats == {torch.float32}
    with Calls() as calls:
        model.minibatch_loss(params, x, y)
    host = [n for n in calls.names if n in ("cpu", "item", "tolist", "numpy", "__array__")]
    assert sorted(host) == ["cpu", "numpy"]
    with Calls() as calls:
        model.evaluate(params, x[0], y[0])
    host = [n for n in calls.names if n in ("cpu", "item", "tolist", "numpy", "__array__")]
    assert sorted(host) == ["cpu", "cpu", "numpy", "numpy"]
    assert {t.device for t in calls.results} == {model.device}


@pytest.mark.parametrize("path", ["shared", "vmap"])
def test_rounds_of_the_engine_compute_on_the_models_device_and_sync_only_its_results(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What of an accelerator can be tested on the CPU: whole rounds of the engine (E = 2: the
    first step shared, the second through vmap; loss probes; evaluations) with the model's
    module and device moved to PyTorch's "meta" device, whose tensors have shapes, dtypes and
    a device but no values. A tensor made on the CPU inside a pass would meet the model's
    tensors in some operation and raise; any read of values on the device (``.item()``,
    ``bool``, ``.tolist()``, ``.numpy()``; on CUDA, each a wait for the device) raises. The
    only way out is ``.cpu()``, counted here (and answered with zeros): two per
    ``loss_and_grad`` (loss and gradient, float32), one per probe (the vmap path's probe is
    its ``loss_and_grad``), two per evaluation (losses and correctness)."""
    data = as_images(make_data(seed=5, n_clients=12, clients_per_group=2, train_per_client=40))
    model = TorchModel(pooled_net, input_shape=(16,), n_classes=data.n_classes, path=path)
    model.device = torch.device("meta")
    model._template = model._template.to("meta")
    moved: list[tuple[str, torch.dtype, tuple[int, ...]]] = []
    calls = {"loss_and_grad": 0, "minibatch_loss": 0, "evaluate": 0}
    to_cpu = torch.Tensor.cpu

    def cpu(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.device.type != "meta":
            return to_cpu(self, *args, **kwargs)
        moved.append((self.device.type, self.dtype, tuple(self.shape)))
        return torch.zeros(self.shape, dtype=self.dtype)

    def counted(name: str) -> Any:
        method = getattr(model, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return method(*args, **kwargs)

        return call

    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    for name in calls:
        monkeypatch.setattr(model, name, counted(name))
    config = SimConfig(rounds=3, local_steps=2, batch_size=5, local_lr=0.5, eval_every=3)
    specs = [RunSpec(Uniform(m=4), 0, "uniform"), RunSpec(PowerOfChoice(m=4), 1, "probes")]
    results = simulate(specs, data, config, model=model, workers=1)
    assert [r.client_updates for r in results] == [3 * 4, 3 * 4]
    assert calls["loss_and_grad"] >= 3 * 2 and calls["minibatch_loss"] >= 3
    assert calls["evaluate"] >= 2
    # a probe on the vmap path is its loss_and_grad (counted there)
    probes = calls["minibatch_loss"] if path == "shared" else 0
    expected = 2 * calls["loss_and_grad"] + probes + 2 * calls["evaluate"]
    assert len(moved) == expected
    assert {dtype for _, dtype, _ in moved} == {torch.float32, torch.bool}
    assert sum(dtype == torch.bool for _, dtype, _ in moved) == calls["evaluate"]


@pytest.mark.parametrize("name", ["lenet5", "cifar-cnn", "pooled"])
def test_evaluation_on_the_shared_path_equals_the_vmap_path_to_float32_rounding(
    name: str,
) -> None:
    """``evaluate`` runs the shared pass's forward (channels-last convolutions): per-sample
    losses within float32 rounding of the module's own forward, the same correct samples."""
    factory, shape, n_classes = FACTORIES[name]
    kwargs: dict[str, Any] = {"input_shape": shape, "n_classes": n_classes}
    vmapped = TorchModel(factory, path="vmap", **kwargs)
    shared = TorchModel(factory, path="shared", **kwargs)
    params, x, y = random_jobs(vmapped, 3, 8, shape, n_classes, seed=6)
    loss_v, correct_v = vmapped.evaluate(params, x[0], y[0])
    loss, correct = shared.evaluate(params, x[0], y[0])
    # each layer's outputs are sums of its fan-in; their rounding errors add up layer by layer
    fan_ins = [math.prod(p.shape[1:]) for n, p in factory().named_parameters() if "weight" in n]
    n = sum(fan_ins)
    np.testing.assert_allclose(loss, loss_v, rtol=0, atol=n * EPS32 * np.abs(loss_v).max())
    assert np.array_equal(correct, correct_v)


def test_the_engine_on_the_shared_path_selects_and_scores_like_the_vmap_path() -> None:
    """The torch equivalence bar (tests/experiments/test_torch_equivalence.py): selections
    identical in at least 99 % of rounds (Uniform: all), accuracies equal to 1e-4."""
    data = as_images(make_data(seed=5, n_clients=12, clients_per_group=2, train_per_client=40))
    config = SimConfig(rounds=40, batch_size=5, local_lr=0.5, eval_every=10)
    specs = [
        RunSpec(Uniform(m=4), 0, "uniform"),
        RunSpec(PowerOfChoice(m=4), 1, "powerofchoice"),  # loss probes
        RunSpec(OCS(m=4), 2, "ocs"),  # update probes
    ]
    kwargs: dict[str, Any] = {"input_shape": (16,), "n_classes": data.n_classes}
    runs = {
        path: simulate(specs, data, config, model=TorchModel(conv_net, path=path, **kwargs))
        for path in ("vmap", "shared")
    }
    for a, b in zip(runs["vmap"], runs["shared"], strict=True):
        differ = int(np.any(a.selected != b.selected, axis=1).sum())
        allowed = 0 if a.spec.run_id == "uniform" else config.rounds // 100
        assert differ <= allowed, f"{a.spec.run_id}: {differ} rounds differ"
        np.testing.assert_allclose(b.client_acc, a.client_acc, rtol=0, atol=1e-4)
        assert a.client_updates == b.client_updates > 0


@pytest.mark.slow  # LeNet-5 in 6 methods × 2 paths × 100 rounds: minutes
def test_lenet5_on_the_shared_path_selects_like_vmap_on_the_quick_configuration(
    tmp_path: Path,
) -> None:
    """The torch equivalence bar on the committed CNN's model: the quick configuration (six
    methods, Fashion-MNIST's subset) with ``[model] kind = "cnn"`` on both paths."""
    dataset = load_subset()
    quick = with_overrides(packaged_config("quick"), rounds=100)
    folders = {}
    for path in ("vmap", "shared"):
        config = dataclasses.replace(quick, model=MODELS["cnn"](torch_path=path))
        folders[path] = run_experiment(config, tmp_path / path, dataset=dataset, workers=1).folder
    selections = [np.load(folders[p] / "selections.npz") for p in ("vmap", "shared")]
    runs = [k for k in selections[0].files if k.startswith("selected/")]
    assert len(runs) == 6
    for key in runs:
        differ = np.flatnonzero((selections[0][key] != selections[1][key]).any(axis=1))
        allowed = 0 if key.startswith("selected/uniform") else quick.sim.rounds // 100
        assert differ.size <= allowed, f"{key}: rounds that differ {differ[:10]}"
    accs = [np.load(folders[p] / "client_acc.npz") for p in ("vmap", "shared")]
    for key in accs[0].files:
        np.testing.assert_allclose(accs[1][key], accs[0][key], rtol=0, atol=1e-4)


def test_the_model_table_chooses_the_path_and_writes_it_only_when_set() -> None:
    default = MODEL_TABLE.parse({"kind": "cnn"}, None)
    assert MODEL_TABLE.to_dict(default) == {"kind": "cnn", "device": "cpu"}  # experiments/cnn.toml
    assert MODEL_TABLE.build(default, (784,), 10).path == "shared"  # "auto": LeNet-5 can
    pinned = MODEL_TABLE.parse({"kind": "cnn", "torch_path": "vmap"}, None)
    assert MODEL_TABLE.to_dict(pinned)["torch_path"] == "vmap"
    assert MODEL_TABLE.build(pinned, (784,), 10).path == "vmap"
    # "auto" keeps vmap for a module the shared pass cannot run (the fixed standardising layer)
    normed = MODEL_TABLE.parse({"kind": "mlp", "input_norm": [0.1307, 0.3081]}, None)
    assert MODEL_TABLE.build(normed, (784,), 10).path == "vmap"
    shared = MODEL_TABLE.parse({"kind": "cnn", "torch_path": "shared"}, None)
    assert MODEL_TABLE.to_dict(shared)["torch_path"] == "shared"
    assert MODEL_TABLE.build(shared, (784,), 10).path == "shared"
    with pytest.raises(ConfigError, match="torch_path must be one of"):
        MODEL_TABLE.parse({"kind": "cnn", "torch_path": "fast"}, None)


def test_the_cifar_shaped_cnn_is_registered_and_takes_the_shared_path() -> None:
    model = model_for("cnn-cifar", (3, 32, 32), 10, path="auto")
    assert model.path == "shared"
    # conv 3→32 (5×5), conv 32→64 (5×5), linear 1600→512, linear 512→10, with biases
    assert model.dim == (3 * 25 + 1) * 32 + (32 * 25 + 1) * 64 + 1601 * 512 + 513 * 10
    assert model_for("cnn-cifar", (3072,), 10).path == "shared"  # "auto", the default
    assert model_for("cnn-cifar", (3072,), 10, path="vmap").path == "vmap"
    with pytest.raises(ValueError, match="32×32×3 inputs; the data's inputs have shape"):
        model_for("cnn-cifar", (784,), 10)
    table = MODEL_TABLE.parse({"kind": "cnn-cifar", "torch_path": "shared"}, None)
    assert MODEL_TABLE.build(table, (3, 32, 32), 10).dim == model.dim
