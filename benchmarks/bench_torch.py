"""PyTorch models in the simulator: a round broken down by part, against the per-client loop
and the shared-weight floor; and (``--end-to-end``) whole runs against the loop.

**By part** (the default). One round of the paper's workload shape (Sec. 6): m = 18 clients
(``--clients``) of a run, each one local step (E = 1) on a minibatch of B = 16 (``--batch``),
synthetic images (uint8, like Fashion-MNIST's) of the model's input shape; the model is LeNet-5
(``--model lenet5``, 28 × 28 × 1) or the small CIFAR-shaped CNN (``--model cifar-cnn``,
32 × 32 × 3), or both (``--model all``). Every figure is CPU
time of this process with one PyTorch thread, the least of ``--repeats`` repetitions (other work
on the machine slows a repetition, never speeds it up; the load average is printed).

The engine's round is measured inside ``simulate`` itself (`RoundClock`): one run of
``--rounds`` + 1 rounds per repetition, the engine's functions wrapped so that each call's CPU
time is added to its round's part, a round running from the start of one round's step to the
start of the next (so the evaluations before the first round and after the last fall outside).
The round reported is the mean of a repetition's rounds, the least of the repetitions (like the
loop's and the floors' passes), with its parts, which add up to it:

* data gather — the engine's gather of the round's minibatches (rows → float32 inputs);
* forward — the forward pass of the clients and their losses (the shared path: the plan's
  forward pass that keeps what the backward needs; ``vmap``: its forward pass alone, timed apart
  on the same shapes, since the one ``grad`` of that path cannot be split inside the engine);
* input gradient — the shared path's backward to every parameter layer's output, less forward;
* weight gradient — the rest of ``loss_and_grad``: the per-client weight gradients (``vmap``:
  input and weight gradients are one row);
* optimizer step — the local step Δ = −η∇ outside ``loss_and_grad`` and the model step
  (the weighted sum of the Δ, w += η_s·Σ) outside the local updates;
* Python and engine — the rest of the round: the scheduler, bookkeeping and Python between.

For each part: the FLOPs it computes (the products and convolutions of the model's own calls on
the round's shapes, counted with ``torch.utils.flop_counter``'s formulas, zero filters that the
shared path adds to a convolution included; the optimizer step's 4 per client and parameter plus
2 per parameter), the minimum (per sample and layer: forward
2·MACs, input gradient 2·MACs of every parameter layer but the first, weight gradient 2·MACs;
the optimizer step 3 per client and parameter plus 1 per parameter; pooling and activations are
not counted), and the achieved GFLOP/s (computed FLOPs / time).

Compared on the same shapes, one thread each: the per-client loop (``copy.deepcopy`` of the
global module, ``torch.optim.SGD``, one step per client, state dicts averaged; its gather
included) and the shared-weight floor (one plain batch of all clients' samples, forward and
backward through the module with shared weights, NCHW and channels-last: no gather, no step, no
per-client weight gradient). Client updates per CPU-second are clients / round time; the
engine's round is what is compared, and each path's ``loss_and_grad`` alone (on the round's
batch, outside the engine) is listed beside it. After one warm-up call of each (not kept), every
repetition times each of them once, in turn (the engine's runs, each path's ``loss_and_grad``,
the loop, the floors; one thread, the same round's shapes), so that a change of the machine's
load hits them alike. Two tables compare them: the first with each one's least time (ms per
round, updates per CPU-second, × loop = loop's least / least, time / floor = least / the
channels-last floor's least); the second pairs them repetition by repetition — for each
repetition, the loop's time / its time (× loop) and its time / the channels-last floor's time
(/ floor), an engine's time being the mean of that repetition's rounds — and gives the median of
the ``--repeats`` paired ratios and their least and largest: load that slows a whole repetition
cancels out of a paired ratio, while the least times may come from different repetitions.

**End to end** (``--end-to-end``). The paper's workload with LeNet-5 on Fashion-MNIST in 10
groups × 3 clients, m = 18 uniform, E = 1, B = 16, one run per seed (``--seeds``): adcs's
``simulate`` (``--workers`` forked processes, then one) against the per-client loop replaying the
clients adcs selected on the same rows (PyTorch's intra-op threads: ``--loop-threads``); wall
time, CPU time (this process and its workers), client updates per second and per CPU-second, the
ratio, and the largest difference between the two engines' final parameters.

Run: ``adcs bench torch [--model lenet5|cifar-cnn|all] [--paths vmap,shared] [--repeats 7]
[--rounds 5]``;
``adcs bench torch --end-to-end [--rounds 40] [--seeds N] [--workers N] [--loop-threads N]
[--data DIR] [--cpu-only]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import functools
import math
import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np

from adcs.data import load_fashion_mnist, paper_groups
from adcs.schedulers import Uniform
from adcs.sim import FederatedData, RunResult, RunSpec, SimConfig, simulate
from adcs.streams import minibatch_indices, stream_key

try:
    import torch
    from torch import nn
    from torch.func import vmap
    from torch.nn import functional as F
    from torch.nn.utils import parameters_to_vector, vector_to_parameters
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    from adcs.sim.torch import TorchModel, lenet5
except ImportError:  # `--help` still works; a run says what to install
    torch = None  # type: ignore[assignment]

NEEDS_TORCH = "error: adcs bench torch needs PyTorch: pip install 'adcs[torch]'"

M = 18
BATCH = 16
LR = 0.05


@dataclass(frozen=True)
class Row:
    """Throughput of one engine on one device."""

    engine: str
    device: str
    wall_s: float
    cpu_s: float
    client_updates: int
    max_param_diff: float = float("nan")

    @property
    def updates_per_s(self) -> float:
        return self.client_updates / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def updates_per_cpu_s(self) -> float:
        return self.client_updates / self.cpu_s if self.cpu_s > 0 else float("nan")


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the forked workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load_data(path: str | None) -> tuple[FederatedData, str]:
    dataset = load_fashion_mnist(path)
    partition = paper_groups(
        dataset.train_labels, dataset.test_labels, np.random.default_rng(0), test_per_client=10
    )
    return FederatedData.from_partition(dataset, partition), dataset.source


def run_adcs(
    data: FederatedData, seeds: int, rounds: int, workers: int, device: str
) -> tuple[Row, list[RunResult]]:
    model = TorchModel(lenet5, device=device, input_shape=data.input_shape, n_classes=10)
    config = SimConfig(rounds=rounds, batch_size=BATCH, local_lr=LR, eval_every=rounds)
    specs = [RunSpec(Uniform(m=M), seed, f"uniform-seed={seed}") for seed in range(seeds)]
    cpu, start = cpu_seconds(), time.perf_counter()
    results = simulate(specs, data, config, model=model, workers=workers)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    name = f"adcs, {workers} process{'es' if workers > 1 else ''}"
    return Row(name, device, wall, cpu, sum(r.client_updates for r in results)), results


def loop_round(
    global_model: nn.Module, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], lr: float
) -> None:
    """One FedAvg round as FL research code usually writes it (uniform weights, η_s = 1)."""
    states = []
    for x, y in batches:
        local = copy.deepcopy(global_model)
        optimiser = torch.optim.SGD(local.parameters(), lr=lr)
        optimiser.zero_grad()
        F.cross_entropy(local(x), y).backward()
        optimiser.step()
        states.append(local.state_dict())
    average = {k: torch.stack([s[k] for s in states]).mean(dim=0) for k in states[0]}
    global_model.load_state_dict(average)


def run_loop(data: FederatedData, reference: list[RunResult], device: str) -> Row:
    """The per-client loop over the same runs, clients and minibatch rows as ``reference``."""
    dev = torch.device(device)
    init = TorchModel(lenet5, input_shape=data.input_shape, n_classes=10).init_params(1)[0]
    updates, diffs = 0, []
    cpu, start = cpu_seconds(), time.perf_counter()
    for result in reference:
        model = lenet5().to(dev)
        vector_to_parameters(torch.from_numpy(init.copy()).to(dev), model.parameters())
        key = stream_key(result.spec.seed)
        for t, chosen in enumerate(result.selected):
            clients = chosen[chosen >= 0].astype(np.intp)
            local = minibatch_indices(key, clients, t, data.data_sizes[clients], 1, BATCH)
            rows = data.train_rows(clients, local[:, 0])
            batches = [
                (
                    torch.from_numpy(data.gather_train(r)).to(dev),
                    torch.from_numpy(data.train_labels[r]).to(dev),
                )
                for r in rows
            ]
            loop_round(model, batches, LR)
            updates += len(batches)
        final = parameters_to_vector(model.parameters()).detach().cpu().numpy()
        diffs.append(float(np.abs(final - result.final_params).max()))
    if dev.type == "cuda":
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    threads = torch.get_num_threads()
    name = f"loop, {threads} thread{'s' if threads > 1 else ''}" if dev.type == "cpu" else "loop"
    return Row(name, device, wall, cpu, updates, max(diffs))


def _table(rows: Sequence[Row]) -> str:
    lines = [
        f"{'engine':<20} {'device':<7} {'wall s':>8} {'updates':>8} {'updates/s':>10} "
        f"{'CPU s':>8} {'updates/CPU-s':>14}"
    ]
    for r in rows:
        lines.append(
            f"{r.engine:<20} {r.device:<7} {r.wall_s:>8.2f} {r.client_updates:>8d} "
            f"{r.updates_per_s:>10.1f} {r.cpu_s:>8.2f} {r.updates_per_cpu_s:>14.1f}"
        )
    return "\n".join(lines)


def compare(data: FederatedData, args: argparse.Namespace, device: str) -> list[Row]:
    """adcs (all workers, then one process) and the loop on one device; prints the ratio."""
    workers = args.workers if device == "cpu" else 1  # a CUDA context does not survive a fork
    rows = []
    fast, results = run_adcs(data, args.seeds, args.rounds, workers, device)
    rows.append(fast)
    if workers > 1:
        rows.append(run_adcs(data, args.seeds, args.rounds, 1, device)[0])
    threads = torch.get_num_threads()
    torch.set_num_threads(args.loop_threads)
    try:
        loop = run_loop(data, results, device)
    finally:
        torch.set_num_threads(threads)
    rows.append(loop)
    print(_table(rows))
    print(
        f"{device}: adcs / loop = {fast.updates_per_s / loop.updates_per_s:.1f}x client "
        f"updates/s ({fast.updates_per_cpu_s / loop.updates_per_cpu_s:.1f}x per CPU-second); "
        f"largest |w_adcs - w_loop| after {args.rounds} rounds: "
        f"{loop.max_param_diff:.1e}"
    )
    return rows


# ---------------------------------------------------------------------------------------------
# a round by part


MODELS: dict[str, tuple[str, tuple[int, ...]]] = {
    "lenet5": ("lenet5", (784,)),
    "cifar-cnn": ("cifar_cnn", (3, 32, 32)),
}
"""Benchmarked models: name → (factory in adcs.sim.torch, input shape of the synthetic data)."""


@dataclass(frozen=True)
class Part:
    """One part of a round: CPU seconds, FLOPs computed (NaN: none counted) and the minimum."""

    name: str
    seconds: float
    flops: float
    min_flops: float

    @property
    def gflops_per_s(self) -> float:
        ok = self.seconds > 0 and math.isfinite(self.flops) and self.flops > 0
        return self.flops / self.seconds / 1e9 if ok else float("nan")


def least_cpu(fn: Callable[[], object], repeats: int) -> float:
    """The least CPU time (this process) of ``repeats`` calls of ``fn``, after one warm-up call."""
    fn()
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def counted_flops(fn: Callable[[], object]) -> float:
    """FLOPs of the matrix products and convolutions ``fn`` runs, by the formulas of
    ``torch.utils.flop_counter`` (its FlopCounterMode's module hooks break ``torch.func.grad``)."""

    class Count(TorchDispatchMode):
        flops = 0

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                self.flops += formula(*args, **(kwargs or {}), out_val=out)
            return out

    with Count() as counter:
        fn()
    return float(counter.flops)


def layer_macs(module: nn.Module, input_shape: Sequence[int]) -> list[int]:
    """Multiply-adds per sample of every Conv2d and Linear layer, in the order they run."""
    macs: list[int] = []

    def hook(layer: nn.Module, _: Any, out: torch.Tensor) -> None:
        weight = layer.weight
        assert isinstance(weight, torch.Tensor)
        macs.append(out.numel() * math.prod(weight.shape[1:]))

    handles = [
        m.register_forward_hook(hook)
        for m in module.modules()
        if isinstance(m, nn.Conv2d | nn.Linear)
    ]
    with torch.no_grad():
        module(torch.zeros((1, *input_shape)))
    for handle in handles:
        handle.remove()
    return macs


def minimum_flops(macs: Sequence[int], samples: int, clients: int, dim: int) -> dict[str, float]:
    """The least FLOPs of each part of a round (see the module's docstring)."""
    forward = 2.0 * sum(macs) * samples
    return {
        "forward": forward,
        "input gradient": 2.0 * sum(macs[1:]) * samples,
        "weight gradient": forward,
        "optimizer step": 3.0 * clients * dim + dim,
    }


def synthetic_data(
    input_shape: tuple[int, ...], n_clients: int, per_client: int, seed: int = 0
) -> FederatedData:
    """Random uint8 images of ``input_shape`` and labels of 10 classes, per_client per client."""
    rng = np.random.default_rng(seed)

    def split(per: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        images = rng.integers(0, 256, size=(n_clients * per, *input_shape), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n_clients * per)
        return images, labels, tuple(np.arange(c * per, (c + 1) * per) for c in range(n_clients))

    train_x, train_y, train_idx = split(per_client)
    test_x, test_y, test_idx = split(10)
    return FederatedData(
        train_images=train_x,
        train_labels=train_y,
        test_images=test_x,
        test_labels=test_y,
        train_indices=train_idx,
        test_indices=test_idx,
        groups=np.arange(n_clients) % 10,
        n_groups=min(10, n_clients),
        n_classes=10,
    )


@dataclass(frozen=True)
class Workload:
    """One round's shapes and data: a model, its synthetic clients and the round's rows."""

    name: str
    factory: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    data: FederatedData
    rows: np.ndarray  # (clients, batch)

    @property
    def clients(self) -> int:
        return int(self.rows.shape[0])


def workload(name: str, clients: int, batch: int) -> Workload:
    """The round of ``clients`` × ``batch`` samples of model ``name`` on synthetic data."""
    import adcs.sim.torch as torch_models

    factory_name, shape = MODELS[name]
    factory = getattr(torch_models, factory_name)
    data = synthetic_data(shape, n_clients=max(30, clients), per_client=4 * batch)
    chosen = np.arange(clients)
    local = minibatch_indices(stream_key(0), chosen, 0, data.data_sizes[chosen], 1, batch)
    return Workload(name, factory, shape, data, data.train_rows(chosen, local[:, 0]))


def engine_run(w: Workload, model: TorchModel, rounds: int) -> Callable[[], object]:
    """``simulate`` of one run of ``rounds`` rounds of the workload (uniform selection, E = 1)."""
    config = SimConfig(rounds=rounds, batch_size=w.rows.shape[1], local_lr=LR, eval_every=rounds)
    spec = RunSpec(Uniform(m=w.clients), 0, "uniform")
    return functools.partial(simulate, [spec], w.data, config, model=model)


def vmap_forward(
    model: TorchModel, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor
) -> Callable[[], object]:
    """The vmap path's forward pass alone (``torch.func.vmap`` cannot split its backward into
    the input and the weight gradients: the one ``grad`` computes both)."""
    job = functools.partial(model._job_loss, model._module())

    def forward() -> object:
        with torch.no_grad():
            return vmap(job, in_dims=(None, 0, 0))(w, x, y)

    return forward


PATH_VARIANTS: dict[str, dict[str, Any]] = {
    "vmap": {},
    "shared": {},
    "shared-nchw": {"channels_last_from": 1 << 30},
    "shared-unfold": {"conv_weight_grad": "unfold"},
}
"""Benchmarked paths: TorchModel's ``path`` ("vmap" or "shared"), and variants of the shared
pass's plan (every convolution NCHW instead of channels-last; the written-out patches and one
bmm for convolutions' weight gradients)."""


def path_model(w: Workload, path: str) -> TorchModel:
    """The TorchModel of ``w`` on ``path`` (a variant of the shared pass is its plan's fields)."""
    model = TorchModel(
        w.factory,
        input_shape=w.input_shape,
        n_classes=10,
        path="vmap" if path == "vmap" else "shared",
    )
    if PATH_VARIANTS[path]:
        model._plan = dataclasses.replace(model._plan, **PATH_VARIANTS[path])
    return model


@dataclass(frozen=True)
class PassFlops:
    """FLOPs each part of a round computes on ``path`` (counted on the model's own calls on the
    round's shapes), the minimum of each, and the ``vmap`` path's forward time (its one
    ``grad`` cannot be timed apart inside the engine)."""

    computed: dict[str, float]
    least: dict[str, float]
    vmap_forward_s: float


def pass_flops(w: Workload, path: str, args: argparse.Namespace) -> PassFlops:
    """The FLOPs of the round's parts on ``path``, and (``vmap``) its forward pass's time."""
    model = path_model(w, path)
    params = model.init_params(w.clients)
    x, y = w.data.train_batch(w.rows)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    flat = torch.from_numpy(params[0].copy())
    model.loss_and_grad(params, x, y)  # the shared pass's checks, once per shape, fall outside
    whole = counted_flops(functools.partial(model.loss_and_grad, params, x, y))
    macs = layer_macs(w.factory(), w.input_shape)
    least = minimum_flops(macs, x.shape[0] * x.shape[1], w.clients, model.dim)
    # the engine's step: Δ_j = 0 − η·g_j (2 per client and parameter), the weighted sum of the
    # Δ_j (2), w += η_s·Σ (2 per parameter)
    computed = {"optimizer step": 4.0 * w.clients * model.dim + 2.0 * model.dim}
    plan = model._plan
    if plan is None:  # vmap: one grad, input and weight gradients together
        forward = vmap_forward(model, flat, xt, yt)
        t_fwd, f_fwd = least_cpu(forward, args.repeats), counted_flops(forward)
        computed |= {"forward": f_fwd, "input + weight grad": whole - f_fwd}
        least["input + weight grad"] = least["input gradient"] + least["weight gradient"]
        return PassFlops(computed, least, t_fwd)
    xs, ys = xt.flatten(0, 1), yt.flatten()
    loss_fn = model._loss_fn
    f_fwd = counted_flops(functools.partial(plan.loss, flat, xs, ys, loss_fn, w.clients))
    f_out = counted_flops(functools.partial(plan.output_grads, flat, xs, ys, loss_fn, w.clients))
    computed |= {
        "forward": f_fwd,
        "input gradient": f_out - f_fwd,
        "weight gradient": whole - f_out,
    }
    return PassFlops(computed, least, float("nan"))


class RoundClock:
    """CPU time of the engine's rounds and of their parts, inside ``simulate`` itself.

    While it runs one ``simulate`` (`run`), the engine's functions are wrapped so that each call
    adds its CPU time to the current round's total of its name: a stream's round
    (``_Stream.step``), the data gather (``FederatedData.train_batch``), the model's
    ``loss_and_grad`` and — on the shared path — the plan's forward pass and its forward and
    input-gradient pass (``output_grads``), the local steps (``local_update``,
    ``_Context.local_updates``) and the model step (``_Lot.step_models``). A round runs from the
    start of one ``_Stream.step`` to the start of the next (one stream, one run), so evaluations
    (before the first round and after the last) fall outside; `parts` splits a round into parts
    that add up to it. The benchmark's scheduler (uniform) probes nothing, so the plan's forward
    passes in a round are those of its training step.
    """

    def __init__(self, model: TorchModel) -> None:
        self.model = model
        self.runs: list[list[dict[str, float]]] = []
        """Per ``simulate``, its rounds: CPU seconds by name."""
        self._open: dict[str, float] = {}
        self._start: float | None = None
        self._stack = contextlib.ExitStack()

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self._open[name] = self._open.get(name, 0.0) + time.process_time() - start

        return timed

    def _step(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            now = time.process_time()
            if self._start is not None:
                self.runs[-1].append({**self._open, "round": now - self._start})
            self._open, self._start = {}, now
            return fn(*args, **kwargs)

        return step

    def run(self, simulate_run: Callable[[], object]) -> None:
        """One ``simulate`` (its last round, which no next round closes, is not kept)."""
        self._start, self._open = None, {}
        self.runs.append([])
        with self:
            simulate_run()

    def __enter__(self) -> RoundClock:
        from adcs.sim import context, data, lockstep, lot
        from adcs.sim.torch_shared import SharedPlan

        targets: list[tuple[Any, str, str]] = [
            (data.FederatedData, "train_batch", "data gather"),
            (context._Context, "local_updates", "local_updates"),
            (context, "local_update", "local_update"),
            (lot._Lot, "step_models", "step_models"),
            (SharedPlan, "forward", "forward"),
            (SharedPlan, "output_grads", "output_grads"),
            (self.model, "loss_and_grad", "loss_and_grad"),
        ]
        for owner, attr, name in targets:
            wrapped = self._timed(name, getattr(owner, attr))
            self._stack.enter_context(mock.patch.object(owner, attr, wrapped))
        step = self._step(lockstep._Stream.step)
        self._stack.enter_context(mock.patch.object(lockstep._Stream, "step", step))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def forget_first_run(self) -> None:
        """Drop the first ``simulate`` (a warm-up) from what the clock reports."""
        del self.runs[0]

    def round_means(self) -> list[float]:
        """Each run's round: the mean CPU seconds of its rounds (a run without one: none)."""
        return [sum(d["round"] for d in rounds) / len(rounds) for rounds in self.runs if rounds]

    def parts(self, vmap_forward_s: float) -> tuple[float, list[tuple[str, float]]]:
        """The round's CPU time and its parts (they add up to it) — the mean of a run's rounds,
        the least of the runs (each a repetition, so that it compares with the least of the
        loop's and the floors' repetitions): data gather, forward,
        input gradient and weight gradient (the ``vmap`` path: ``vmap_forward_s`` for the
        forward pass, the rest of ``loss_and_grad`` for the one ``grad``), optimizer step and
        Python and engine (what is left)."""
        means = [
            {k: sum(d.get(k, 0.0) for d in rounds) / len(rounds) for k in rounds[0]}
            for rounds in self.runs
            if rounds
        ]
        r = min(means, key=lambda d: d["round"])

        def get(name: str) -> float:
            return r.get(name, 0.0)

        model_call = get("loss_and_grad")
        step = (get("step_models") - get("local_updates")) + (get("local_update") - model_call)
        if "output_grads" in r:
            model_parts = [
                ("forward", get("forward")),
                ("input gradient", get("output_grads") - get("forward")),
                ("weight gradient", model_call - get("output_grads")),
            ]
        else:
            model_parts = [
                ("forward", vmap_forward_s),
                ("input + weight grad", model_call - vmap_forward_s),
            ]
        rest = r["round"] - get("data gather") - model_call - step
        parts = [("data gather", get("data gather")), *model_parts, ("optimizer step", step)]
        return r["round"], [*parts, ("Python and engine", rest)]


def loop_pass(w: Workload) -> Callable[[], object]:
    """One round of the per-client loop (its data gather included)."""
    global_model = w.factory()

    def one_round() -> None:
        batches = [
            (torch.from_numpy(w.data.gather_train(r)), torch.from_numpy(w.data.train_labels[r]))
            for r in w.rows
        ]
        loop_round(global_model, batches, LR)

    return one_round


def floor_pass(w: Workload, channels_last: bool) -> Callable[[], object]:
    """One plain batch of all the round's samples, forward and backward, shared weights."""
    module = w.factory()
    if channels_last:
        module = module.to(memory_format=torch.channels_last)
    x, y = w.data.train_batch(w.rows.reshape(-1))
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def one_pass() -> None:
        for p in module.parameters():
            p.grad = None
        F.cross_entropy(module(xt), yt).backward()

    return one_pass


def cpu_interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """The CPU time of each of ``fns`` in each of ``repeats`` repetitions that call each once
    in turn (after one warm-up call each, not timed): a change of the machine's load hits them
    alike."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return times


@dataclass(frozen=True)
class Paired:
    """The per-repetition ratios of two timings taken in the same repetitions: their median,
    least and largest."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, num: Sequence[float], den: Sequence[float]) -> Paired:
        """Ratios num[i] / den[i], one per repetition."""
        if len(num) != len(den) or not num:
            raise ValueError(
                f"paired timings need equal, non-empty repetitions: {len(num)}, {len(den)}"
            )
        ratios = [a / b for a, b in zip(num, den, strict=True)]
        return cls(float(np.median(ratios)), min(ratios), max(ratios))

    def __str__(self) -> str:
        return f"{self.median:.2f} [{self.low:.2f}–{self.high:.2f}]"


def _fmt(value: float, digits: int = 2) -> str:
    return "—" if not math.isfinite(value) else f"{value:.{digits}f}"


def parts_table(parts: Sequence[Part], total: float) -> str:
    """The breakdown of one path: ms per round, share, GFLOP computed and minimum, GFLOP/s."""
    lines = [
        f"{'part':<19} {'ms/round':>9} {'share':>6} {'GFLOP':>8} {'minimum':>8} {'GFLOP/s':>8}"
    ]
    for p in parts:
        lines.append(
            f"{p.name:<19} {p.seconds * 1e3:>9.2f} {p.seconds / total:>6.0%} "
            f"{_fmt(p.flops / 1e9, 4):>8} {_fmt(p.min_flops / 1e9, 4):>8} {_fmt(p.gflops_per_s, 1):>8}"
        )
    flops = sum(p.flops for p in parts if math.isfinite(p.flops))
    least = sum(p.min_flops for p in parts)
    lines.append(
        f"{'round':<19} {total * 1e3:>9.2f} {1:>6.0%} {flops / 1e9:>8.4f} {least / 1e9:>8.4f} "
        f"{flops / total / 1e9:>8.1f}"
    )
    return "\n".join(lines)


def compare_table(
    rows: Sequence[tuple[str, float]], clients: int, loop: float, floor: float
) -> str:
    """ms per round, client updates per CPU-second and the ratios to the loop and the floor."""
    lines = [
        f"{'engine':<42} {'ms/round':>9} {'updates/CPU-s':>14} {'x loop':>7} {'time / floor':>12}"
    ]
    for name, seconds in rows:
        lines.append(
            f"{name:<42} {seconds * 1e3:>9.2f} {clients / seconds:>14.1f} {loop / seconds:>7.2f} "
            f"{seconds / floor:>12.2f}"
        )
    return "\n".join(lines)


def paired_table(
    rows: Sequence[tuple[str, Sequence[float]]], loop: Sequence[float], floor: Sequence[float]
) -> str:
    """Per engine, the paired ratios over the repetitions: × loop and / floor, each the median
    [least–largest]."""
    lines = [f"{'engine':<42} {'x loop':>18} {'/ floor':>18}"]
    for name, seconds in rows:
        ratio_loop, ratio_floor = Paired.of(loop, seconds), Paired.of(seconds, floor)
        lines.append(f"{name:<42} {ratio_loop!s:>18} {ratio_floor!s:>18}")
    return "\n".join(lines)


FLOOR = "floor: one batch, channels-last"
LOOP = "per-client loop"


def bench_parts(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Print the breakdown and the comparisons for every model; return, per model and engine,
    the CPU seconds of its round in each repetition."""
    torch.set_num_threads(1)
    out: dict[str, dict[str, list[float]]] = {}
    names = list(MODELS) if args.model == "all" else [args.model]
    for name in names:
        w = workload(name, args.clients, args.batch)
        dim = TorchModel(w.factory).dim
        print(
            f"\n{name}: {dim:,} parameters, input {w.input_shape}; {w.clients} clients × batch "
            f"{w.rows.shape[1]}, E = 1; one thread; {args.repeats} repetitions, each timing every "
            f"engine once in turn; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
        flops = {path: pass_flops(w, path, args) for path in args.paths}
        clocks: dict[str, RoundClock] = {}
        fns: dict[str, Callable[[], object]] = {}
        calls: dict[str, Callable[[], object]] = {}
        for path in args.paths:
            model, (x, y) = path_model(w, path), w.data.train_batch(w.rows)
            clocks[path] = RoundClock(model)
            fns[f"engine {path}"] = functools.partial(
                clocks[path].run, engine_run(w, model, args.rounds + 1)
            )
            calls[f"adcs, path {path!r}: loss_and_grad alone"] = functools.partial(
                model.loss_and_grad, model.init_params(w.clients), x, y
            )
        passes = {
            **calls,
            LOOP: loop_pass(w),
            "floor: one batch, NCHW": floor_pass(w, False),
            FLOOR: floor_pass(w, True),
        }
        timed = cpu_interleaved({**fns, **passes}, args.repeats)
        times: dict[str, list[float]] = {}
        least: dict[str, float] = {}
        for path, clock in clocks.items():
            clock.forget_first_run()  # the warm-up
            total, split = clock.parts(flops[path].vmap_forward_s)
            parts = [
                Part(
                    part,
                    seconds,
                    flops[path].computed.get(part, float("nan")),
                    flops[path].least.get(part, 0.0),
                )
                for part, seconds in split
            ]
            print(
                f"\npath {path!r}, one engine round by part (the mean of {args.rounds}, the least "
                f"of {len(clock.round_means())} runs):"
            )
            print(parts_table(parts, total))
            key = f"adcs, path {path!r}: engine round"
            times[key], least[key] = clock.round_means(), total
        times.update({name: timed[name] for name in passes})
        least.update({name: min(timed[name]) for name in passes})
        print(
            f"\n{name}: against the loop and the channels-last floor (same shapes, one thread), "
            f"each one's least time of {args.repeats}"
        )
        print(compare_table(list(least.items()), w.clients, least[LOOP], least[FLOOR]))
        print(
            f"\n{name}: paired by repetition — per repetition, the loop's time / the engine's "
            f"(x loop) and the engine's / the channels-last floor's (/ floor); the median of "
            f"{args.repeats} [least–largest]"
        )
        print(paired_table(list(times.items()), times[LOOP], times[FLOOR]))
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        out[name] = times
    return out


# ---------------------------------------------------------------------------------------------
# command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    cpus = os.cpu_count() or 1
    parser = argparse.ArgumentParser(prog="adcs bench torch", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--end-to-end", action="store_true", help="whole runs on Fashion-MNIST against the loop"
    )
    parser.add_argument(
        "--model", default="lenet5", choices=[*MODELS, "all"], help="by part: the model"
    )
    parser.add_argument(
        "--clients", type=int, default=M, help=f"by part: clients per round (default {M})"
    )
    parser.add_argument(
        "--batch", type=int, default=BATCH, help=f"by part: minibatch size (default {BATCH})"
    )
    parser.add_argument(
        "--paths",
        default="vmap,shared",
        help="by part: comma-separated engine paths among "
        f"{', '.join(PATH_VARIANTS)} (default vmap,shared)",
    )
    parser.add_argument(
        "--repeats", type=int, default=7, help="by part: repetitions, least kept (default 7)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds T per run (end to end: default 40; by part: T + 1 rounds per repetition, "
        "the T that a next round closes timed, default 5)",
    )
    parser.add_argument(
        "--seeds", type=int, default=cpus, help=f"runs, one per seed (default: CPUs = {cpus})"
    )
    parser.add_argument(
        "--workers", type=int, default=cpus, help=f"adcs worker processes (default {cpus})"
    )
    parser.add_argument(
        "--loop-threads",
        type=int,
        default=cpus,
        help=f"PyTorch intra-op threads of the loop (default: CPUs = {cpus})",
    )
    parser.add_argument(
        "--data", default=None, help="Fashion-MNIST folder (default: adcs's usual lookup)"
    )
    parser.add_argument("--cpu-only", action="store_true", help="skip CUDA even when available")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 40 if args.end_to_end else 5
    args.paths = [p.strip() for p in args.paths.split(",")]
    unknown = [p for p in args.paths if p not in PATH_VARIANTS]
    if unknown:
        parser.error(f"--paths: unknown {unknown}; choose from {list(PATH_VARIANTS)}")
    for name in ("rounds", "seeds", "workers", "loop_threads", "clients", "batch", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> Any:
    """By part (default) or end to end (``--end-to-end``): measure and print."""
    args = parse_args(argv)
    if torch is None:
        raise SystemExit(NEEDS_TORCH)
    if not args.end_to_end:
        return bench_parts(args)
    data, source = load_data(args.data)
    print(
        f"workload: LeNet-5 ({TorchModel(lenet5).dim:,} parameters), Fashion-MNIST ({source}), "
        f"N = {data.n_clients}, m = {M} uniform, E = 1, B = {BATCH}, T = {args.rounds}, "
        f"{args.seeds} run(s); torch {torch.__version__}, {os.cpu_count()} CPUs"
    )
    rows: list[Any] = compare(data, args, "cpu")
    if torch.cuda.is_available() and not args.cpu_only:
        rows += compare(data, args, "cuda")
    return rows


if __name__ == "__main__":
    main()
