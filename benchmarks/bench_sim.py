"""Speed of the simulator: side by side with plain loops, the Fig. 1 grid, and scaling in N.

The workload is the paper's Fig. 1 grid: six methods (Uniform, PowerOfChoice, OCS, DivFL, StaticDPP,
ADCS θ = 0.8, R = 20) × seeds, N = 30 clients in the paper's 10 groups of Fashion-MNIST, m = 18,
E = 1, B = 16, η_ℓ = 0.001. Printed, each measured in this run:

0. **where a seed-round goes** (``--parts-rounds``, one seed by default): the simulator's process
   CPU time per seed-round, split by part of the round (sampled, ``benchmarks/sim_breakdown.py``),
   the FLOPs of its products against the minimum and the GFLOP/s each achieves; then the per-run
   loop below — and, with ``--plain-loop FILE``, an outside plain per-run loop script — timed on
   the same rounds with the *same* evaluation cadence; and other layouts of the round's
   products timed against the simulator's own (``benchmarks/sim_layouts.py``);

1. **side by side** on the same rounds, three ways — all draw the same minibatches (counter-based,
   :mod:`adcs.streams`) and scheduler random numbers, so they must end with the same selections
   and (up to float32 rounding) the same models; the script checks that:

   * **per-client loop** — what typical FL code does: each run on its own, each client's update
     computed on its own model copy with small NumPy products;
   * **per-run loop** — a plain per-run NumPy loop that computes per run what it needs: one
     gather of the run's probed or selected clients, one product for their logits, one batched
     product for their gradients (the baseline "ahead of a plain per-run loop" is measured
     against);
   * **vectorised** — :func:`adcs.sim.simulate`: all runs together, one gather and a few matrix
     products per round and seed over the union of the clients the runs use;

2. the **Fig. 1 grid**'s wall time (30 runs × 20 000 rounds at the shipped evaluation frequency,
   measured on a shorter T and extrapolated linearly, or run in full with ``--full``) with 1 and 2
   worker processes;
3. a **scaling table**: the round time (evaluation excluded) of Uniform and ADCS run alone on IID
   Fashion-MNIST with N ∈ {30, 300, 3 000, 30 000} clients (m = 30 beyond N = 30): the cost of a
   blind round must follow m, not N.

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
import importlib.util
import math
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    RunSpec,
    SimConfig,
    minibatch_indices,
    scheduler_rng,
    simulate,
    stream_key,
)

PAPER_ROUNDS = 20_000
N_CLIENTS, M = 30, 18


# ----------------------------------------------------------------------------- workload


def load_data(path: str | None, partition_seed: int) -> tuple[Any, FederatedData]:
    """Fashion-MNIST, and its split into the paper's 10 groups of 3 clients (pure label skew)."""
    dataset = load_fashion_mnist(path)
    rng = np.random.default_rng(partition_seed)
    partition = paper_groups(dataset.train_labels, dataset.test_labels, rng)
    return dataset, FederatedData.from_partition(dataset, partition)


def iid_data(dataset: Any, n_clients: int, seed: int = 0) -> FederatedData:
    """An IID split of all training data over ``n_clients`` (whole shuffles for tiny clients).

    Test rows are split the same way; with more clients than test samples, clients share them.
    """
    rng = np.random.default_rng(seed)
    train = np.array_split(rng.permutation(dataset.train_labels.size), n_clients)
    n_test = dataset.test_labels.size
    tests = np.array_split(rng.permutation(n_test), min(n_clients, n_test))
    return FederatedData(
        dataset.train_images, dataset.train_labels, dataset.test_images, dataset.test_labels,
        tuple(train), tuple(tests[c % len(tests)] for c in range(n_clients)),
        np.zeros(n_clients, dtype=np.intp), 1, 10,
    )  # fmt: skip


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
        return bool(self.inner.observes_updates)

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


# ----------------------------------------------------------------------------- the two loops


@dataclass
class LoopRun:
    """One run of a loop baseline: its scheduler state and model, with what it recorded."""

    spec: RunSpec
    state: Any
    rng: np.random.Generator
    w: np.ndarray  # (F + 1, C) float32
    selected: np.ndarray
    client_updates: int = 0
    loss_evals: int = 0
    client_acc: list[np.ndarray] = field(default_factory=list)


def _softmax_rows(z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample loss and ∂loss/∂z of softmax cross-entropy, z (S, C), y (S,)."""
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    total = p.sum(axis=1, keepdims=True)
    rows = np.arange(y.size)
    loss = np.log(total[:, 0]) - z[rows, y]
    p /= total
    p[rows, y] -= 1.0
    return loss, p


def client_update(
    w: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float
) -> tuple[np.ndarray, float]:
    """One client's E local SGD steps on its own model copy: x (E, B, F), y (E, B) → Δ, loss."""
    local = w.copy()
    first_loss = math.nan
    for e in range(x.shape[0]):
        loss, d = _softmax_rows(x[e] @ local[:-1] + local[-1], y[e])
        if e == 0:
            first_loss = float(loss.mean())
        d /= y.shape[1]
        local[:-1] -= np.float32(lr) * (x[e].T @ d)
        local[-1] -= np.float32(lr) * d.sum(axis=0)
    return local - w, first_loss


def per_run_updates(
    w: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float
) -> tuple[np.ndarray, np.ndarray]:
    """E = 1 updates of n clients of one run at once: x (n, B, F), y (n, B) → Δ (n, dim), loss (n,)."""
    n, batch, f = x.shape
    loss, d = _softmax_rows(x.reshape(n * batch, f) @ w[:-1] + w[-1], y.reshape(-1))
    d = (d * np.float32(-lr / batch)).reshape(n, batch, -1)
    out = np.empty((n, f + 1, w.shape[1]), dtype=np.float32)
    np.matmul(x.transpose(0, 2, 1), d, out=out[:, :f])
    out[:, f] = d.sum(axis=1)
    return out.reshape(n, -1), loss.reshape(n, batch).mean(axis=1)


def client_accuracy(w: np.ndarray, data: FederatedData) -> np.ndarray:
    acc = []
    for idx in data.test_indices:
        x = data.test_images[idx].astype(np.float32) * PIXEL_SCALE
        acc.append(np.mean((x @ w[:-1] + w[-1]).argmax(axis=1) == data.test_labels[idx]))
    return np.asarray(acc)


def run_loop(
    specs: Sequence[RunSpec], data: FederatedData, config: SimConfig, *, per_client: bool
) -> list[LoopRun]:
    """Every run on its own, round by round (E = 1 for the per-run form).

    ``per_client``: each client's update on its own model copy (the per-client loop); else one
    gather and a few batched products per run and round (the per-run loop).
    """
    n, batch, steps = data.n_clients, config.batch_size, config.local_steps
    everyone = np.ones(n, dtype=bool)
    clients_all = np.arange(n)
    sizes = data.data_sizes.astype(np.float64)
    f = int(np.prod(data.input_shape))
    runs = [
        LoopRun(
            spec=s,
            state=s.scheduler.init(n, sizes.copy()),
            rng=scheduler_rng(s.seed, s.run_id),
            w=np.zeros((f + 1, data.n_classes), dtype=np.float32),
            selected=np.empty((config.rounds, s.scheduler.m), dtype=np.intp),
        )
        for s in specs
    ]

    def minibatches(seed: int, t: int, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        local = minibatch_indices(
            stream_key(seed), clients, t, data.data_sizes[clients], steps, batch
        )
        rows = data.train_rows(clients, local)  # (n, E, B)
        x = data.train_images[rows].astype(np.float32) * PIXEL_SCALE
        return x, data.train_labels[rows]

    def updates_of(run: LoopRun, t: int, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = minibatches(run.spec.seed, t, clients)
        if not per_client:
            return per_run_updates(run.w, x[:, 0], y[:, 0], config.local_lr)
        pairs = [client_update(run.w, x[i], y[i], config.local_lr) for i in range(clients.size)]
        return np.stack([p[0].ravel() for p in pairs]), np.array([p[1] for p in pairs])

    points = set(config.eval_rounds.tolist())
    for run in runs:
        run.client_acc.append(client_accuracy(run.w, data))
    for t in range(config.rounds):
        for run in runs:
            scheduler = run.spec.scheduler
            probe = scheduler.probe(run.state, t, everyone, run.rng)
            targets = clients_all if probe.clients is None else np.unique(probe.targets(everyone))
            held: dict[int, np.ndarray] = {}
            stats = ClientStats.blind(everyone)
            if probe.kind is ProbeKind.UPDATES:
                upd, losses = updates_of(run, t, targets)
                held = {int(c): upd[i] for i, c in enumerate(targets)}
                stats = ClientStats(everyone, targets, losses.astype(np.float64), upd)
            elif probe.kind is ProbeKind.LOSSES:
                if probe.loss_source is LossSource.FULL:
                    raise NotImplementedError("the loop baselines have minibatch loss probes only")
                x, y = minibatches(run.spec.seed, t, targets)
                xf = x[:, 0].reshape(-1, f)
                loss, _ = _softmax_rows(xf @ run.w[:-1] + run.w[-1], y[:, 0].reshape(-1))
                losses = loss.reshape(targets.size, batch).mean(axis=1)
                stats = ClientStats(everyone, targets, losses.astype(np.float64))
                run.loss_evals += targets.size
            selection, run.state = scheduler.select(run.state, t, stats, run.rng)
            clients = np.asarray(selection.clients)
            missing = np.array([c for c in clients.tolist() if c not in held], dtype=np.intp)
            if missing.size:
                upd, _ = updates_of(run, t, missing)
                held.update({int(c): upd[i] for i, c in enumerate(missing)})
            run.client_updates += len(held)
            if selection.weights is not None:
                coef = np.asarray(selection.weights, dtype=np.float32)
            else:
                coef = np.full(clients.size, 1.0 / clients.size, dtype=np.float32)
            rows = np.stack([held[int(c)] for c in clients])
            run.w += np.float32(config.server_lr) * (coef @ rows).reshape(run.w.shape)
            if scheduler.observes_updates:
                run.state = scheduler.observe(run.state, t, clients, rows, None)
            run.selected[t] = clients
            if t + 1 in points:  # the simulator's evaluation cadence: 0, eval_every, ..., T
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


def _timed_call(
    specs: Sequence[RunSpec], call: Callable[[list[RunSpec]], list[Any]], rounds: int, sched: bool
) -> tuple[Timing, list[Any]]:
    wrapped, clock = timed(specs)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    out = call(wrapped)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    updates = sum(r.client_updates for r in out)
    evals = sum(r.loss_evals for r in out)
    # with several workers the scheduler clocks tick in forked processes, out of reach here
    return Timing(wall, cpu, clock[0] if sched else math.nan, updates, evals, rounds), out


def describe(name: str, t: Timing) -> str:
    return (
        f"{name:<24} {t.rounds / t.wall:8.1f} rounds/s {t.updates / t.wall:9.0f} updates/s  "
        f"wall {t.wall:7.2f} s  cpu {t.cpu:7.2f} s  in schedulers "
        + ("n/a (in workers)" if math.isnan(t.sched) else f"{t.sched / t.wall:5.1%}")
    )


def compare(name: str, loop_runs: list[LoopRun], results: list[Any]) -> str:
    pairs = list(zip(loop_runs, results, strict=True))
    same = sum(np.array_equal(lr.selected, r.selected) for lr, r in pairs)
    dw = max(
        float(np.abs(lr.w.ravel() - r.final_params).max() / max(np.abs(lr.w).max(), 1e-12))
        for lr, r in pairs
    )
    dacc = max(float(np.abs(lr.client_acc[-1] - r.client_acc[-1]).max()) for lr, r in pairs)
    counts = all(
        (lr.client_updates, lr.loss_evals) == (r.client_updates, r.loss_evals) for lr, r in pairs
    )
    return (
        f"check {name} vs vectorised: identical selections in {same}/{len(pairs)} runs, max "
        f"relative |Δw| {dw:.1e}, max |Δ client acc| {dacc:.4f}, same computation counts: {counts}"
    )


def side_by_side(specs: list[RunSpec], data: FederatedData, rounds: int, eval_every: int) -> None:
    config = SimConfig(rounds=rounds, eval_every=eval_every)
    print(
        f"\n== side by side: {len(specs)} runs x {rounds} rounds, evaluation every {eval_every} =="
    )
    timings = {}
    loops = {}
    for name, per_client in (("per-client loop", True), ("per-run loop", False)):
        timings[name], loops[name] = _timed_call(
            specs, lambda s, pc=per_client: run_loop(s, data, config, per_client=pc), rounds, True
        )
    timings["vectorised"], results = _timed_call(
        specs, lambda s: simulate(s, data, config), rounds, True
    )
    for name, t in timings.items():
        print(describe(name, t))
    vec = timings["vectorised"]
    for name in loops:
        t = timings[name]
        print(
            f"  {name} / vectorised: {t.wall / vec.wall:.2f}x wall, "
            f"{(t.wall - t.sched) / (vec.wall - vec.sched):.2f}x outside scheduler calls, "
            f"{t.cpu / vec.cpu:.2f}x CPU"
        )
    for name, runs in loops.items():
        print(compare(name, runs, results))


def grid(specs: list[RunSpec], data: FederatedData, rounds: int, eval_every: int,
         workers: Sequence[int], full: bool) -> None:  # fmt: skip
    config = SimConfig(rounds=PAPER_ROUNDS if full else rounds, eval_every=eval_every)
    print(f"\n== Fig 1 grid: {len(specs)} runs x {PAPER_ROUNDS} rounds, evaluation every "
          f"{eval_every} ==")  # fmt: skip
    for w in workers:
        t, _ = _timed_call(
            specs, lambda s, w=w: simulate(s, data, config, workers=w), config.rounds, w == 1
        )
        scale = PAPER_ROUNDS / config.rounds
        how = "measured" if full else f"extrapolated x{scale:.0f} from {config.rounds} rounds"
        print(describe(f"vectorised ({w} worker{'s' if w > 1 else ''})", t))
        print(
            f"  -> full grid wall time {t.wall * scale:7.0f} s ({how}); CPU {t.cpu * scale:7.0f} s"
        )


def _sibling(name: str) -> Any:
    """A module beside this script (the benchmarks are loaded by path, not as a package)."""
    key = f"adcs_bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def plain_reference(path: str, data_dir: str | None, seeds: int, rounds: int,
                    eval_every: int) -> float:  # fmt: skip
    """CPU seconds of an outside per-run loop script on the six methods, data loading excluded.

    The script (a plain NumPy loop, one run at a time) must offer ``run_one(method, seed, theta,
    R, T, eval_every)`` and build its data in a class ``Sim``, whose construction is not counted.
    """
    spec = importlib.util.spec_from_file_location("adcs_bench_plain_loop", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: --plain-loop {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if data_dir is not None:
        module.DATA = data_dir
    loading = [0.0]

    class Timed(module.Sim):  # type: ignore[name-defined,misc]
        def __init__(self, seed: int) -> None:
            start = time.process_time()
            super().__init__(seed)
            loading[0] += time.process_time() - start

    module.Sim = Timed
    start = time.process_time()
    for seed in range(seeds):
        for method in ("uniform", "poc", "ocs", "divfl", "staticdpp", "adcs"):
            module.run_one(method, seed, 0.8, 20, rounds, eval_every)
    return time.process_time() - start - loading[0]


TIMED_REPEATS = 3
"""The adcs and loop figures of the breakdown are each the least of this many calls: the first
pays for page faults and cold caches, and another process may take the CPU's cache at any time."""


def _least_ms(call: Callable[[], object]) -> float:
    """The least CPU milliseconds of :data:`TIMED_REPEATS` calls of ``call``."""
    best = math.inf
    for _ in range(TIMED_REPEATS):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best * 1e3


def parts(data: FederatedData, seeds: int, rounds: int, eval_every: int, plain: str | None,
          data_dir: str | None) -> None:  # fmt: skip
    """CPU per seed-round of the six methods by part, FLOPs, and the plain loops on equal terms."""
    bd = _sibling("sim_breakdown")
    config = SimConfig(rounds=rounds, eval_every=eval_every)
    seed_rounds = seeds * rounds
    print(f"\n== where a seed-round goes: the six methods, {seeds} seed(s) x {rounds} rounds, "
          f"evaluation every {eval_every}, one process, process CPU time ==")  # fmt: skip
    results: list[Any] = []
    cpu_ms = _least_ms(lambda: results.append(simulate(fig1_specs(seeds), data, config)))
    cpu_ms /= seed_rounds
    results = results[0]
    sampler, counter = bd.PartSampler(), bd.FlopCounter()
    with counter.installed():
        for _ in range(bd.SAMPLED_REPEATS):  # the kernel's timer ticks only every few ms
            with sampler.running():
                simulate(fig1_specs(seeds), data, config)
    counter.flops = Counter({k: v // bd.SAMPLED_REPEATS for k, v in counter.flops.items()})
    f, c = int(np.prod(data.input_shape)) + 1, data.n_classes
    gram = sum(  # DivFL's Gram of its probed updates each round (symmetric: half)
        rounds * (r.client_updates // rounds) * (r.client_updates // rounds + 1) // 2 * f * c
        for r in results
        if r.spec.meta.get("method") == "divfl"
    )
    counter.flops[bd.DIVFL] += 2 * gram
    for line in bd.breakdown_table(sampler.shares(), cpu_ms, counter.flops, seed_rounds):
        print(line)
    computed = sum(counter.flops.values()) / seed_rounds / 1e6
    least = bd.minimum_flops(results, f, c, config.batch_size, gram) / seed_rounds / 1e6
    print(f"FLOPs: {computed:.1f} MFLOP computed per seed-round, {least:.1f} at least "
          f"(shares from {sum(sampler.counts.values())} samples of CPU time)")  # fmt: skip
    print("other layouts of the products, on one round's inputs (least CPU per call):")
    for line in _sibling("sim_layouts").layout_rows(data):
        print(f"  {line}")
    loop_ms = _least_ms(lambda: run_loop(fig1_specs(seeds), data, config, per_client=False))
    loop_ms /= seed_rounds
    print(f"(each the least CPU time of {TIMED_REPEATS} calls in a row)")
    print(f"adcs (vectorised)        {cpu_ms:6.2f} ms CPU per seed-round")
    print(f"per-run loop (this file) {loop_ms:6.2f} ms CPU per seed-round: "
          f"adcs {loop_ms / cpu_ms:.2f}x faster")  # fmt: skip
    if plain is not None:
        ref = [
            plain_reference(plain, data_dir, seeds, rounds, eval_every)
            for _ in range(TIMED_REPEATS)
        ]
        ref_ms = min(ref) * 1e3 / seed_rounds
        print(f"plain loop ({Path(plain).name}) {ref_ms:6.2f} ms CPU per seed-round: "
              f"adcs {ref_ms / cpu_ms:.2f}x faster")  # fmt: skip


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_ms(scheduler: Any, data: FederatedData, rounds: int) -> float:
    """CPU milliseconds of ``rounds`` rounds of one run alone (best of two)."""
    config = SimConfig(rounds=rounds, eval_every=rounds)
    best = math.inf
    for _ in range(2):
        start = time.process_time()
        simulate([RunSpec(scheduler, 0, "s")], data, config)
        best = min(best, time.process_time() - start)
    return best * 1e3


def _round_ms(scheduler: Any, data: FederatedData, rounds: int) -> float:
    """CPU milliseconds per round of one run alone: the difference of two run lengths, so
    start-up (state, evaluator) cancels out; evaluation happens only at the first and last round.
    CPU time, not wall time, so that other work on the machine does not distort the table."""
    return (_cpu_ms(scheduler, data, 1 + rounds) - _cpu_ms(scheduler, data, 1)) / rounds


def scaling(dataset: Any, sizes: Sequence[int], rounds: int) -> None:
    print("\n== scaling: CPU time per round of one run alone, IID Fashion-MNIST, evaluation "
          "excluded ==")  # fmt: skip
    print(f"{'N':>8} {'m':>4} {'Uniform ms/round':>17} {'ADCS ms/round':>14} "
          f"{'ADCS refresh ms':>16} {'peak RSS MB':>12}")  # fmt: skip
    uniform_ms: dict[int, float] = {}
    for n in sizes:
        data = iid_data(dataset, n)
        m = M if n == N_CLIENTS else 30
        uniform_ms[n] = _round_ms(Uniform(m), data, rounds)
        adcs = _round_ms(ADCS(m, theta=0.8, refresh_every=20), data, max(rounds, 40))
        # the refresh alone: round 0 of ADCS (a probe of all N, the kernel, the MAP) minus a blind one
        refresh = _cpu_ms(ADCS(m), data, 1) - _cpu_ms(Uniform(m), data, 1)
        print(f"{n:>8} {m:>4} {uniform_ms[n]:>17.2f} {adcs:>14.2f} {refresh:>16.0f} "
              f"{_peak_mb():>12.0f}")  # fmt: skip
    if 300 in uniform_ms and max(sizes) > 300:
        top = max(sizes)
        print(f"Uniform round time at N={top} / N=300: {uniform_ms[top] / uniform_ms[300]:.2f}x "
              "(target <= 1.5x)")  # fmt: skip
    print("(ADCS, the paper's form, probes all N clients every R rounds: its refresh grows with N;")
    print(" 'peak RSS' is this process's high-water mark so far.)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="adcs bench sim", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", default=None, help="Fashion-MNIST folder (default: the usual lookup)"
    )
    parser.add_argument(
        "--seeds", type=int, default=2, help="seeds of the side-by-side run (default 2)"
    )
    parser.add_argument(
        "--loop-rounds", type=int, default=400, help="rounds of the side-by-side run"
    )
    parser.add_argument("--loop-eval-every", type=int, default=100,
                        help="evaluation period of the side-by-side run")  # fmt: skip
    parser.add_argument("--grid-seeds", type=int, default=5, help="seeds of the grid (default 5)")
    parser.add_argument(
        "--grid-rounds", type=int, default=1000, help="rounds measured for the grid estimate"
    )
    parser.add_argument("--workers", default="1,2", help="worker counts for the grid estimate")
    parser.add_argument(
        "--eval-every", type=int, default=100, help="evaluation period of the grid run"
    )
    parser.add_argument(
        "--full", action="store_true", help=f"run the grid for all {PAPER_ROUNDS} rounds"
    )
    parser.add_argument(
        "--scale", default="30,300,3000,30000", help="N of the scaling table ('' to skip)"
    )
    parser.add_argument(
        "--scale-rounds", type=int, default=60, help="rounds per scaling measurement"
    )
    parser.add_argument("--parts-seeds", type=int, default=1, help="seeds of the breakdown")
    parser.add_argument("--parts-rounds", type=int, default=1000,
                        help="rounds of the breakdown by part (0 to skip)")  # fmt: skip
    parser.add_argument("--plain-loop", default=None, metavar="FILE",
                        help="an outside plain per-run loop script to time on equal terms")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.loop_rounds, args.loop_eval_every = 1, 10, 5
        args.grid_seeds, args.grid_rounds, args.eval_every = 1, 20, 10
        args.scale, args.scale_rounds, args.workers = "30,300", 5, "1"
        args.parts_rounds = 20
    workers = [int(w) for w in str(args.workers).split(",") if w]
    if args.plain_loop is not None and not Path(args.plain_loop).is_file():
        raise SystemExit(f"error: --plain-loop {args.plain_loop}: no such file")

    dataset, data = load_data(args.data, partition_seed=0)
    print(f"data: {dataset.source}; N={data.n_clients}, m={M}")
    print(f"machine: {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f} at start")
    with one_blas_thread() as blas:
        print(f"BLAS threads: {blas}")
        if args.parts_rounds > 0:
            parts(data, args.parts_seeds, args.parts_rounds, args.eval_every, args.plain_loop,
                  args.data)  # fmt: skip
        if args.loop_rounds > 0:
            side_by_side(fig1_specs(args.seeds), data, args.loop_rounds, args.loop_eval_every)
        if args.grid_rounds > 0 or args.full:
            grid(fig1_specs(args.grid_seeds), data, args.grid_rounds, args.eval_every, workers,
                 args.full)  # fmt: skip
        sizes = [int(n) for n in str(args.scale).split(",") if n]
        if sizes:
            scaling(dataset, sizes, args.scale_rounds)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
