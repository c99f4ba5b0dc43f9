"""LeNet-5 client updates per second: adcs's vmap engine vs a plain per-client PyTorch loop.

The workload is the paper's (Sec. 6) with LeNet-5 instead of logistic regression: Fashion-MNIST in
10 groups × 3 clients, m = 18 clients per round chosen uniformly, E = 1 local step, B = 16, one
run per seed (``--seeds``, default: one per CPU). Two engines train the same clients on the same
minibatches:

* **adcs** — :func:`adcs.sim.simulate` with :class:`adcs.sim.torch.TorchModel` (the
  ``[model] kind = "cnn"`` of a configuration): each round's 18 client gradients are one
  ``torch.func.vmap`` of ``grad``; ``--workers`` forked processes advance the seeds' runs in
  parallel (default: one per CPU, one PyTorch thread each). A second row runs it in one process.
* **loop** — the way FL research code usually is: per round and selected client,
  ``copy.deepcopy`` of the global module, ``torch.optim.SGD``, one step on the client's minibatch,
  its ``state_dict`` kept; the state dicts are averaged into the global module. It replays the
  clients adcs selected, on the same rows, with PyTorch's intra-op threads on all CPUs
  (``--loop-threads``).

Printed per engine and device (CPU, and CUDA when available): wall time, client updates, client
updates per second, CPU time (this process and its workers; it includes the time PyTorch's
threads spend waiting for each other, and it is the steadier figure when other work shares the
machine) and updates per CPU-second, the adcs/loop ratio, and the largest difference between the
two engines' final parameters (they compute the same thing). Evaluation is kept out of the timing (each client
has 10 test samples, evaluated at rounds 0 and T only).

Run: ``adcs bench torch [--rounds 40] [--seeds N] [--workers N] [--loop-threads N] [--data DIR]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adcs.data import load_fashion_mnist, paper_groups
from adcs.schedulers import Uniform
from adcs.sim import FederatedData, RunResult, RunSpec, SimConfig, simulate
from adcs.streams import minibatch_indices, stream_key

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    cpus = os.cpu_count() or 1
    parser = argparse.ArgumentParser(prog="adcs bench torch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds T per run (default 40)")
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
    for name in ("rounds", "seeds", "workers", "loop_threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run both engines on the CPU (and CUDA when present) and print the comparison."""
    args = parse_args(argv)
    if torch is None:
        raise SystemExit(NEEDS_TORCH)
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
