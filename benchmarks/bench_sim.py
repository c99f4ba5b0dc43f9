"""Speed of the vectorised simulator against a straightforward per-client NumPy loop (DESIGN §4).

The workload is the paper's Fig. 1 grid: six methods (Uniform, PowerOfChoice, OCS, DivFL, StaticDPP,
ADCS θ = 0.8, R = 20) × seeds, N = 30 clients in the paper's 10 groups of Fashion-MNIST, m = 18,
E = 1, B = 16, η_ℓ = 0.001. It is run two ways on the same rounds:

* **vectorised** — :func:`adcs.sim.simulate`: all runs together, one gather and a few matrix
  products per round and seed;
* **per-client loop** — what typical FL code does: each run on its own, one model copy per client,
  updated client by client with small NumPy products. It draws the same minibatches and scheduler
  random numbers, so both must end with the same selections and (up to float32 rounding) weights;
  the script checks that.

Printed: rounds/s (one round = every run of the grid advancing one round), client updates/s, the
ratio, the share of time spent inside scheduler calls (the same code in both), the Fig. 1 grid's
wall time (measured on a shorter T and extrapolated linearly, or run in full with ``--full``), and
a profile of the vectorised run (CPU time per function).

BLAS is kept to one thread (``threadpoolctl`` when installed, ``OPENBLAS_NUM_THREADS=1`` for a
direct run): multi-threaded BLAS on these small products is much slower on a busy machine.

Run: ``adcs bench sim [--quick|--full]`` or ``python benchmarks/bench_sim.py``.
"""

from __future__ import annotations

import os

# Before numpy loads (direct runs): one BLAS thread; `adcs bench sim` relies on threadpoolctl.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import cProfile
import io
import math
import pstats
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adcs.data import load_fashion_mnist, paper_groups
from adcs.schedulers import (
    ADCS,
    OCS,
    ClientStats,
    DivFL,
    LossSource,
    PowerOfChoice,
    ProbeKind,
    StaticDPP,
    Uniform,
)
from adcs.sim import (
    PIXEL_SCALE,
    FederatedData,
    MinibatchSampler,
    RunSpec,
    SimConfig,
    minibatch_seed_sequence,
    scheduler_rng,
    simulate,
)
from adcs.sim.engine import _observes_updates

PAPER_ROUNDS = 20_000
N_CLIENTS, M = 30, 18


# ----------------------------------------------------------------------------- workload


def load_data(path: str | None, partition_seed: int) -> tuple[FederatedData, str]:
    """Fashion-MNIST in the paper's 10 groups of 3 clients (pure label skew)."""
    dataset = load_fashion_mnist(path)
    rng = np.random.default_rng(partition_seed)
    partition = paper_groups(dataset.train_labels, dataset.test_labels, rng)
    return FederatedData.from_partition(dataset, partition), dataset.source


def fig1_specs(seeds: int) -> list[RunSpec]:
    """The six methods of Fig. 1 for each seed."""
    methods: list[tuple[str, Any]] = [
        ("uniform", Uniform(M)),
        ("powerofchoice", PowerOfChoice(M)),
        ("ocs", OCS(M)),
        ("divfl", DivFL(M)),
        ("staticdpp", StaticDPP(M)),
        ("adcs", ADCS(M, theta=0.8, refresh_every=20)),
    ]
    return [
        RunSpec(scheduler, seed, f"{name}/seed{seed}", {"method": name})
        for seed in range(seeds)
        for name, scheduler in methods
    ]


@dataclass
class TimedScheduler:
    """Forwards the scheduler protocol and adds up the seconds spent inside it."""

    inner: Any
    seconds: list[float] = field(default_factory=lambda: [0.0])

    @property
    def m(self) -> int:
        return int(self.inner.m)

    @property
    def observes_updates(self) -> bool:
        return _observes_updates(self.inner)

    def _timed(self, name: str, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return getattr(self.inner, name)(*args)
        finally:
            self.seconds[0] += time.perf_counter() - start

    def init(self, *args: Any) -> Any:
        return self._timed("init", *args)

    def probe(self, *args: Any) -> Any:
        return self._timed("probe", *args)

    def select(self, *args: Any) -> Any:
        return self._timed("select", *args)

    def observe(self, *args: Any) -> Any:
        return self._timed("observe", *args)


def timed(specs: Sequence[RunSpec]) -> tuple[list[RunSpec], list[float]]:
    """The same runs with every scheduler timed through one shared accumulator."""
    clock = [0.0]
    wrapped = [RunSpec(TimedScheduler(s.scheduler, clock), s.seed, s.run_id, s.meta) for s in specs]
    return wrapped, clock


# ----------------------------------------------------------------------------- the per-client loop


def client_update(
    w: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float
) -> tuple[np.ndarray, float]:
    """E local SGD steps on one client's minibatches x (E, B, F), y (E, B); returns Δ and loss."""
    local = w.copy()
    first_loss = math.nan
    for e in range(x.shape[0]):
        z = x[e] @ local[:-1] + local[-1]
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        rows = np.arange(y.shape[1])
        if e == 0:
            first_loss = float(-np.log(p[rows, y[e]]).mean())
        p[rows, y[e]] -= 1.0
        p /= y.shape[1]
        local[:-1] -= np.float32(lr) * (x[e].T @ p)
        local[-1] -= np.float32(lr) * p.sum(axis=0)
    return local - w, first_loss


def client_loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    z = x @ w[:-1] + w[-1]
    zmax = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - zmax).sum(axis=1)) + zmax[:, 0]
    return float((lse - z[np.arange(y.size), y]).mean())


def client_accuracy(w: np.ndarray, data: FederatedData) -> np.ndarray:
    acc = []
    for idx in data.test_indices:
        x = data.test_images[idx].astype(np.float32) * PIXEL_SCALE
        acc.append(np.mean((x @ w[:-1] + w[-1]).argmax(axis=1) == data.test_labels[idx]))
    return np.asarray(acc)


@dataclass
class LoopRun:
    spec: RunSpec
    state: Any
    rng: np.random.Generator
    w: np.ndarray
    selected: np.ndarray
    client_updates: int = 0
    loss_evals: int = 0
    client_acc: list[np.ndarray] = field(default_factory=list)


def per_client_loop(
    specs: Sequence[RunSpec], data: FederatedData, config: SimConfig
) -> list[LoopRun]:
    """Every run round by round, every client's update computed on its own model copy."""
    n, batch, steps = data.n_clients, config.batch_size, config.local_steps
    available = np.ones(n, dtype=bool)
    sizes = data.data_sizes.astype(np.float64)
    runs = [
        LoopRun(
            spec=s,
            state=s.scheduler.init(n, sizes.copy()),
            rng=scheduler_rng(s.seed, s.run_id),
            w=np.zeros((data.n_features + 1, data.n_classes), dtype=np.float32),
            selected=np.empty((config.rounds, s.scheduler.m), dtype=np.intp),
        )
        for s in specs
    ]
    samplers = {
        s.seed: MinibatchSampler(data, steps * batch, minibatch_seed_sequence(s.seed))
        for s in specs
    }

    def minibatches(rows: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        r = rows[c].reshape(steps, batch)
        return data.train_images[r].astype(np.float32) * PIXEL_SCALE, data.train_labels[r]

    for run in runs:
        run.client_acc.append(client_accuracy(run.w, data))
    for t in range(config.rounds):
        rows_of = {seed: sampler.rows(t) for seed, sampler in samplers.items()}
        for run in runs:
            rows, scheduler = rows_of[run.spec.seed], run.spec.scheduler
            probe = scheduler.probe(run.state, t, available, run.rng)
            targets = probe.targets(available)
            updates: dict[int, np.ndarray] = {}
            losses = np.full(n, np.nan)
            if probe.kind is ProbeKind.UPDATES:
                for c in targets:
                    updates[int(c)], losses[c] = client_update(
                        run.w, *minibatches(rows, c), config.local_lr
                    )
            elif probe.kind is ProbeKind.LOSSES:
                if probe.loss_source is LossSource.FULL:
                    raise NotImplementedError("the loop baseline only has minibatch loss probes")
                for c in targets:
                    x, y = minibatches(rows, c)
                    losses[c] = client_loss(run.w, x[0], y[0])
                run.loss_evals += targets.size
            stats = ClientStats.blind(available)
            if probe.kind is not ProbeKind.NONE:
                probed = np.zeros(n, dtype=bool)
                probed[targets] = True
                matrix = None
                if updates:
                    matrix = np.full((n, run.w.size), np.nan, dtype=np.float32)
                    for c, u in updates.items():
                        matrix[c] = u.ravel()
                stats = ClientStats(available, probed, losses, matrix)
            selection, run.state = scheduler.select(run.state, t, stats, run.rng)
            clients = np.asarray(selection.clients)
            for c in clients:
                if int(c) not in updates:
                    updates[int(c)], losses[c] = client_update(
                        run.w, *minibatches(rows, c), config.local_lr
                    )
            run.client_updates += len(updates)
            if selection.weights is not None:
                coef = np.asarray(selection.weights, dtype=np.float32)
            else:
                coef = np.full(clients.size, 1.0 / clients.size, dtype=np.float32)
            step = np.zeros_like(run.w)
            for a, c in zip(coef, clients, strict=True):
                step += a * updates[int(c)]
            run.w += np.float32(config.server_lr) * step
            if _observes_updates(scheduler):
                sel_updates = np.stack([updates[int(c)].ravel() for c in clients])
                run.state = scheduler.observe(run.state, t, clients, sel_updates, losses[clients])
            run.selected[t] = clients
    for run in runs:
        run.client_acc.append(client_accuracy(run.w, data))
    return runs


# ----------------------------------------------------------------------------- measurements


@contextlib.contextmanager
def one_blas_thread() -> Iterator[str]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} (no threadpoolctl)"
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield "1 (threadpoolctl)"


@dataclass
class Timing:
    wall: float
    cpu: float
    sched: float
    updates: int
    loss_evals: int
    rounds: int


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the simulator's forked workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def time_loop(
    specs: Sequence[RunSpec], data: FederatedData, config: SimConfig
) -> tuple[Timing, list[LoopRun]]:
    wrapped, clock = timed(specs)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    runs = per_client_loop(wrapped, data, config)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    updates = sum(r.client_updates for r in runs)
    evals = sum(r.loss_evals for r in runs)
    return Timing(wall, cpu, clock[0], updates, evals, config.rounds), runs


def time_vectorised(
    specs: Sequence[RunSpec], data: FederatedData, config: SimConfig, workers: int
) -> tuple[Timing, list[Any]]:
    wrapped, clock = timed(specs)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    results = simulate(wrapped, data, config, workers=workers)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    updates = sum(r.client_updates for r in results)
    evals = sum(r.loss_evals for r in results)
    # with several workers the scheduler clocks tick in forked processes, out of reach here
    sched = clock[0] if workers == 1 else math.nan
    return Timing(wall, cpu, sched, updates, evals, config.rounds), results


def describe(name: str, t: Timing) -> str:
    return (
        f"{name:<26} {t.rounds / t.wall:9.2f} rounds/s  {t.updates / t.wall:10.0f} updates/s  "
        f"wall {t.wall:7.2f} s  cpu {t.cpu:7.2f} s  in schedulers "
        + ("  n/a (in workers)" if math.isnan(t.sched) else f"{t.sched / t.wall:5.1%}")
    )


def profile_summary(
    specs: Sequence[RunSpec], data: FederatedData, config: SimConfig, top: int
) -> str:
    """CPU time of a vectorised run: by part of the code, then per function."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    simulate(specs, data, config)
    profiler.disable()
    stats = pstats.Stats(profiler)
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total = max(cum for (_, _, _, cum, _) in table.values())
    parts = {
        "scheduler calls (probe/select/observe, incl. dpp)": 0.0,
        "model: forward (one product + softmax)": 0.0,
        "model: backward (aggregated product)": 0.0,
        "model: per-client updates (batched products)": 0.0,
        "gather + uint8 -> float32": 0.0,
        "evaluation": 0.0,
    }
    keys = list(parts)
    for (filename, _, name), (_, _, _, cum, _) in table.items():
        path = filename.replace("\\", "/")
        if "adcs/schedulers" in path and name in ("probe", "select", "observe"):
            parts[keys[0]] += cum
        elif "adcs/sim/model" in path and name == "shared_forward":
            parts[keys[1]] += cum
        elif "adcs/sim/model" in path and name == "weighted_grads":
            parts[keys[2]] += cum
        elif "adcs/sim/model" in path and name == "group_grads":
            parts[keys[3]] += cum
        elif "adcs/sim/engine" in path and name == "gather_train":
            parts[keys[4]] += cum
        elif "adcs/sim/engine" in path and name == "__call__":  # the evaluator
            parts[keys[5]] += cum
    parts["round loop and bookkeeping (the rest)"] = total - sum(parts.values())
    out = io.StringIO()
    per_round = 1e3 / config.rounds
    print(f"CPU time by part ({total:.2f} s for {config.rounds} rounds):", file=out)
    for label, seconds in parts.items():
        print(
            f"  {label:<52} {seconds * per_round:7.2f} ms/round  {seconds / total:6.1%}",
            file=out,
        )
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def compare(loop_runs: list[LoopRun], results: list[Any]) -> str:
    same = sum(
        np.array_equal(lr.selected, r.selected) for lr, r in zip(loop_runs, results, strict=True)
    )
    dw = max(
        float(np.abs(lr.w - r.final_params).max() / max(np.abs(lr.w).max(), 1e-12))
        for lr, r in zip(loop_runs, results, strict=True)
    )
    dacc = max(
        float(np.abs(lr.client_acc[-1] - r.client_acc[-1]).max())
        for lr, r in zip(loop_runs, results, strict=True)
    )
    counts = all(
        (lr.client_updates, lr.loss_evals) == (r.client_updates, r.loss_evals)
        for lr, r in zip(loop_runs, results, strict=True)
    )
    return (
        f"check: identical selections in {same}/{len(results)} runs, max relative |Δw| {dw:.2e}, "
        f"max |Δ client acc| {dacc:.4f}, same computation counts: {counts}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="adcs bench sim", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", default=None, help="Fashion-MNIST folder (default: the usual lookup)"
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the grid (default 5)")
    parser.add_argument(
        "--loop-rounds", type=int, default=60, help="rounds of the side-by-side run"
    )
    parser.add_argument(
        "--grid-rounds", type=int, default=600, help="rounds measured for the grid estimate"
    )
    parser.add_argument("--workers", default="1,2", help="worker counts for the grid estimate")
    parser.add_argument(
        "--eval-every", type=int, default=100, help="evaluation period of the grid run"
    )
    parser.add_argument("--profile-rounds", type=int, default=100, help="0 to skip the profile")
    parser.add_argument(
        "--full", action="store_true", help=f"run the grid for all {PAPER_ROUNDS} rounds"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.loop_rounds, args.grid_rounds, args.profile_rounds = 1, 10, 40, 20
    workers = [int(w) for w in str(args.workers).split(",") if w]

    data, source = load_data(args.data, partition_seed=0)
    specs = fig1_specs(args.seeds)
    print(
        f"data: {source}; N={data.n_clients}, m={M}, runs={len(specs)} ({args.seeds} seeds x 6 methods)"
    )
    print(f"machine: {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f} at start")
    with one_blas_thread() as blas:
        print(f"BLAS threads: {blas}")
        side = SimConfig(rounds=args.loop_rounds, eval_every=args.loop_rounds)
        print(f"\n== side by side, {args.loop_rounds} rounds ==")
        loop_t, loop_runs = time_loop(specs, data, side)
        vec_t, results = time_vectorised(specs, data, side, workers=1)
        print(describe("per-client loop", loop_t))
        print(describe("vectorised (1 worker)", vec_t))
        own_loop, own_vec = loop_t.wall - loop_t.sched, vec_t.wall - vec_t.sched
        print(
            f"ratio (loop / vectorised): {loop_t.wall / vec_t.wall:.1f}x wall, "
            f"{own_loop / own_vec:.1f}x outside scheduler calls, {loop_t.cpu / vec_t.cpu:.1f}x CPU"
        )
        print(compare(loop_runs, results))

        rounds = PAPER_ROUNDS if args.full else args.grid_rounds
        grid = SimConfig(rounds=rounds, eval_every=args.eval_every)
        print(f"\n== Fig 1 grid: {len(specs)} runs x {PAPER_ROUNDS} rounds ==")
        for w in workers:
            t, _ = time_vectorised(specs, data, grid, workers=w)
            scale = PAPER_ROUNDS / rounds
            how = "measured" if args.full else f"extrapolated x{scale:.0f} from {rounds} rounds"
            print(describe(f"vectorised ({w} worker{'s' if w > 1 else ''})", t))
            print(
                f"  -> full grid wall time {t.wall * scale:7.0f} s ({how}); "
                f"CPU {t.cpu * scale:7.0f} s"
                + ("" if math.isnan(t.sched) else f"; scheduler calls {t.sched * scale:6.0f} s")
            )
        if args.profile_rounds > 0:
            print(
                f"\n== profile of the vectorised grid, {args.profile_rounds} rounds (CPU time) =="
            )
            config = SimConfig(rounds=args.profile_rounds, eval_every=args.eval_every)
            print(profile_summary(specs, data, config, top=25))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
