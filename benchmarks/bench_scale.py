"""Cross-device scale: round time split by part against N, MAP on 10⁶ candidates, sketch agreement.

Printed, each measured in this run:

1. **round time against N** — Synthetic(1, 1) populations of N ∈ {10³, 10⁴, 10⁵, 10⁶} clients
   (generated on demand), 5% available each round (Bernoulli), m = 100, B = 10, E = 1; three
   schedulers: Uniform; ADCS as in the paper (θ = 0.8, R = 20, every available client probed);
   ADCS with a pool (d = 500 candidates, R = 1, updates sketched to k = 128). Each (method, N)
   runs in a forked process (its own peak memory) and its time is split into **data** (the
   clients' samples, generated), **training** (the model's products: local updates, probed
   losses), **scheduling** (probe, select, observe), **evaluation** (a fixed sample of 1 000
   clients, once) and **other** (the engine: availability, minibatch draws, aggregation,
   records). Times are taken over rounds 50–250 of a 250-round run (between two of the
   engine's progress reports, after warm-up and with no evaluation in between); evaluation is
   timed apart. A log-log figure of round time and peak memory against N is written.
2. **MAP on N candidates** — greedy MAP over N = 10⁶ unit features of k = 128 dimensions, m = 100
   (:func:`adcs.dpp.greedy_map_features`), with its peak memory.
3. **sketch agreement** — the paper's workload (Fashion-MNIST, N = 30 in 10 groups, m = 18, ADCS
   θ = 0.8, R = 20): at every refresh of one run, the MAP on k-dimensional Johnson–Lindenstrauss
   sketches of the probed updates against the MAP on the updates, for k ∈ {64, 128, 512, 2048}.
4. the **targets**: Uniform's round at N = 10⁶ within 2× of N = 10³; MAP on 10⁶ candidates
   ≤ 7 s; ADCS's scheduling per refresh with a pool of 500 ≤ 50 ms.

Timings are wall-clock on whatever else the machine runs; CPU time is printed beside them.

Run: ``adcs bench scale [--quick]`` or ``python benchmarks/bench_scale.py``.
"""

from __future__ import annotations

import os

# Before numpy loads (direct runs): one BLAS thread; `adcs bench scale` relies on threadpoolctl.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import multiprocessing as mp
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from adcs.data.synthetic import Synthetic, SyntheticClients
from adcs.dpp import greedy_map_features, unit_rows
from adcs.schedulers import ADCS, Uniform
from adcs.schedulers.base import ClientStats
from adcs.sim import BernoulliAvailability, LogisticRegression, RunSpec, SimConfig, simulate
from adcs.sketch import UpdateSketch

SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
METHODS = ("uniform", "adcs", "adcs-pool")
PARTS = ("data", "training", "scheduling", "evaluation")
M, POOL, SKETCH, AVAILABLE = 100, 500, 128, 0.05
EVAL_CLIENTS = 1000
SKETCH_KS = (64, 128, 512, 2048)
TARGETS = {"uniform_ratio": 2.0, "map_s": 7.0, "pool_refresh_ms": 50.0, "same_at_2048": 0.95}


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread (when numpy was loaded before this module set OPENBLAS_NUM_THREADS):
    the products here are small, and spinning BLAS threads on a shared machine cost more."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# --------------------------------------------------------------------------------------------
# timing proxies: what the engine calls, attributed to a part


@dataclass
class Clock:
    """CPU seconds of this (single-threaded) process spent in each part.

    CPU time, not wall time: on a machine other jobs share, a part's wall time measures the
    others as much as the part.
    """

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        start = time.process_time()
        try:
            yield
        finally:
            self.seconds[name] += time.process_time() - start


class TimedData:
    """A :class:`adcs.sim.ClientData` whose sample gathering is timed (data; test: evaluation)."""

    def __init__(self, data: Any, clock: Clock) -> None:
        self._data, self._clock = data, clock
        for name in ("n_clients", "n_classes", "n_groups", "groups", "data_sizes", "test_sizes"):
            setattr(self, name, getattr(data, name))
        self.input_shape = data.input_shape

    def train_rows(self, clients: Any, local: Any) -> Any:
        with self._clock.part("data"):
            return self._data.train_rows(clients, local)

    def train_batch(self, rows: Any) -> Any:
        with self._clock.part("data"):
            return self._data.train_batch(rows)

    def test_rows(self, clients: Any) -> Any:
        with self._clock.part("evaluation"):
            return self._data.test_rows(clients)

    def test_batch(self, rows: Any) -> Any:
        with self._clock.part("evaluation"):
            return self._data.test_batch(rows)


class TimedModel:
    """The model, its products timed (training; ``evaluate``: evaluation)."""

    def __init__(self, model: LogisticRegression, clock: Clock) -> None:
        self._model, self._clock = model, clock
        self.dim = model.dim

    def init_params(self, n: int) -> Any:
        return self._model.init_params(n)

    def evaluate(self, *args: Any) -> Any:
        with self._clock.part("evaluation"):
            return self._model.evaluate(*args)

    def _timed(name: str) -> Callable[..., Any]:  # type: ignore[misc]
        def call(self: TimedModel, *args: Any) -> Any:
            with self._clock.part("training"):
                return getattr(self._model, name)(*args)

        return call

    loss_and_grad = _timed("loss_and_grad")
    shared_forward = _timed("shared_forward")
    block_grads = _timed("block_grads")
    weighted_grads = _timed("weighted_grads")


class TimedScheduler:
    """A scheduler whose protocol calls are timed (scheduling)."""

    def __init__(self, scheduler: Any, clock: Clock) -> None:
        self._s, self._clock = scheduler, clock
        self.m = scheduler.m
        self.observes_updates = scheduler.observes_updates

    def init(self, *args: Any) -> Any:
        return self._s.init(*args)

    def probe(self, *args: Any) -> Any:
        with self._clock.part("scheduling"):
            return self._s.probe(*args)

    def select(self, *args: Any) -> Any:
        with self._clock.part("scheduling"):
            return self._s.select(*args)

    def observe(self, *args: Any) -> Any:
        with self._clock.part("scheduling"):
            return self._s.observe(*args)


# --------------------------------------------------------------------------------------------
# 1. round time against N


@dataclass(frozen=True)
class RoundTiming:
    """One (method, N): the timed window of ``rounds`` rounds, and one evaluation."""

    method: str
    n: int
    rounds: int
    wall_s: float
    cpu_s: float
    parts: dict[str, float]
    refreshes: int
    peak_rss_mb: float
    mean_available: float
    eval_s: float

    @property
    def round_s(self) -> float:
        """Mean CPU time of a round over the window (no evaluation falls in it)."""
        return self.cpu_s / self.rounds

    @property
    def round_wall_s(self) -> float:
        return self.wall_s / self.rounds

    def per_round(self, part: str) -> float:
        return self.parts[part] / self.rounds

    @property
    def other_s(self) -> float:
        inner = sum(self.parts[p] for p in PARTS if p != "evaluation")
        return max(self.round_s - inner / self.rounds, 0.0)


def population(n: int) -> SyntheticClients:
    """Synthetic(1, 1) of n clients; its groups (a pass over every client) computed up front."""
    data = Synthetic(n).clients(np.random.default_rng(0))
    _ = data.groups
    return data


def scheduler_of(method: str) -> tuple[Any, int | None]:
    """The scheduler of a method and the sketch length it runs with."""
    if method == "uniform":
        return Uniform(m=M), None
    if method == "adcs":
        return ADCS(m=M, theta=0.8, refresh_every=20), None
    return ADCS(m=M, theta=0.8, refresh_every=1, candidates=POOL), SKETCH


WINDOW = (50, 250)
"""The engine reports progress every 50 rounds: the rounds timed lie between two reports."""
QUICK_WINDOW = (50, 100)
"""The rounds timed with ``--quick``."""


def _time_round(method: str, data: SyntheticClients, window: tuple[int, int], queue: Any) -> None:
    clock = Clock()
    scheduler, sketch = scheduler_of(method)
    config = SimConfig(
        rounds=window[1], batch_size=10, local_lr=0.01, eval_every=window[1],
        availability=BernoulliAvailability(AVAILABLE), sketch_dim=sketch,
        eval_clients=EVAL_CLIENTS,
    )  # fmt: skip
    model = TimedModel(LogisticRegression(int(np.prod(data.input_shape)), data.n_classes), clock)
    timed = TimedScheduler(scheduler, clock)
    marks: dict[int, tuple[float, float, dict[str, float]]] = {}

    def progress(done: int) -> None:
        marks.setdefault(done, (time.perf_counter(), time.process_time(), dict(clock.seconds)))

    result = simulate(  # type: ignore[arg-type]
        [RunSpec(timed, 0, method)], TimedData(data, clock), config, progress, model=model
    )[0]
    (t0, c0, p0), (t1, c1, p1) = marks[window[0]], marks[window[1]]
    parts = {k: p1[k] - p0[k] for k in PARTS}
    rounds = window[1] - window[0]
    refreshes = {"adcs-pool": rounds, "adcs": rounds // 20}.get(method, 0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(
        RoundTiming(
            method,
            data.n_clients,
            rounds,
            t1 - t0,
            c1 - c0,
            parts,
            refreshes,
            rss,
            float(result.n_available.mean()),
            eval_s=clock.seconds["evaluation"] / 2,
        )
    )


def _fork() -> Any:
    # fork: the child inherits this module however it was loaded (``adcs bench`` loads it by path)
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def _in_child(target: Callable[..., None], *args: Any) -> Any:
    ctx = _fork()
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    out = queue.get()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"measurement failed (exit code {proc.exitcode})")
    return out


def time_rounds(
    sizes: Sequence[int],
    methods: Sequence[str],
    log: Callable[[str], None] = print,
    window: tuple[int, int] = WINDOW,
) -> list[RoundTiming]:
    """Every (method, N) in its own forked process, timed over the rounds ``window``."""
    out = []
    for n in sizes:
        start = time.perf_counter()
        data = population(n)
        log(f"N = {n:,}: population set up in {time.perf_counter() - start:.1f} s")
        for method in methods:
            out.append(_in_child(_time_round, method, data, window))
    return out


# --------------------------------------------------------------------------------------------
# 2. MAP on N candidates


def _time_map(n: int, m: int, k: int, queue: Any) -> None:
    with one_blas_thread():
        _time_map_here(n, m, k, queue)


def _time_map_here(n: int, m: int, k: int, queue: Any) -> None:
    rng = np.random.default_rng(0)
    features = unit_rows(rng.standard_normal((n, k), dtype=np.float32))
    weights = rng.uniform(0.0, 2.0, size=n)
    start, cpu = time.perf_counter(), time.process_time()
    picks = greedy_map_features(features, m, weights)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(set(picks.tolist())) == m
    queue.put((wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def time_map(n: int, m: int = M, k: int = SKETCH) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one greedy MAP over n features of k dims."""
    return _in_child(_time_map, n, m, k)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# 3. sketch agreement on the paper workload


@dataclass
class RecordingADCS:
    """ADCS that keeps the statistics of every refresh (the probed updates and losses)."""

    inner: ADCS
    refreshes: list[ClientStats] = field(default_factory=list)

    @property
    def m(self) -> int:
        return self.inner.m

    @property
    def observes_updates(self) -> bool:
        return False

    def init(self, *args: Any) -> Any:
        return self.inner.init(*args)

    def probe(self, *args: Any) -> Any:
        return self.inner.probe(*args)

    def select(self, state: Any, t: int, stats: ClientStats, rng: Any) -> Any:
        if stats.updates is not None:
            self.refreshes.append(stats)
        return self.inner.select(state, t, stats, rng)

    def observe(self, state: Any, *args: Any) -> Any:
        return self.inner.observe(state, *args)


def paper_refreshes(rounds: int, data_path: str | None = None) -> tuple[list[ClientStats], str]:
    """The probed statistics of every refresh of one paper-workload ADCS run."""
    from adcs.data import load_fashion_mnist, paper_groups
    from adcs.sim import FederatedData

    dataset = load_fashion_mnist(data_path)
    partition = paper_groups(dataset.train_labels, dataset.test_labels, np.random.default_rng(0))
    data = FederatedData.from_partition(dataset, partition)
    recorder = RecordingADCS(ADCS(m=18, theta=0.8, refresh_every=20))
    simulate([RunSpec(recorder, 0, "adcs")], data, SimConfig(rounds=rounds, eval_every=rounds))  # type: ignore[arg-type]
    return recorder.refreshes, dataset.source


@dataclass(frozen=True)
class Agreement:
    """How the MAP on sketches compares with the MAP on the updates, over refreshes."""

    k: int
    same: float
    """Share of refreshes whose picks are the same set."""
    overlap: float
    """Mean share of the picks in common."""


def sketch_agreement(
    refreshes: Sequence[ClientStats], ks: Sequence[int], scheduler: ADCS | None = None
) -> list[Agreement]:
    """The MAP on k-dimensional sketches of each refresh's updates against the MAP on them."""
    with one_blas_thread():
        return _agreement(refreshes, ks, scheduler or ADCS(m=18, theta=0.8, refresh_every=20))


def _agreement(
    refreshes: Sequence[ClientStats], ks: Sequence[int], scheduler: ADCS
) -> list[Agreement]:
    n = refreshes[0].n_clients
    rng = np.random.default_rng(0)  # unused by ADCS's selection, which is deterministic

    def picks(stats: ClientStats) -> frozenset[int]:
        selection, _ = scheduler.select(scheduler.init(n), 0, stats, rng)
        return frozenset(selection.clients.tolist())

    truth = [picks(s) for s in refreshes]
    out = []
    for k in ks:
        assert refreshes[0].updates is not None
        sketch = UpdateSketch(refreshes[0].updates.shape[1], k, key=12345 + k)
        got = [picks(replace(s, updates=sketch.apply(np.asarray(s.updates)))) for s in refreshes]
        pairs = list(zip(got, truth, strict=True))
        out.append(
            Agreement(
                k,
                float(np.mean([a == t for a, t in pairs])),
                float(np.mean([len(a & t) / max(len(t), 1) for a, t in pairs])),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# output


def render(timings: Sequence[RoundTiming], log: Callable[[str], None] = print) -> None:
    head = (
        f"{'method':<10} {'N':>9} {'avail':>7} {'round ms':>9} {'data':>7} {'train':>7} "
        f"{'sched':>7} {'other':>7} {'eval s':>7} {'wall/rnd':>8} {'peak MB':>8}"
    )
    log(head)
    for t in timings:
        log(
            f"{t.method:<10} {t.n:>9,} {t.mean_available:>7.0f} {1e3 * t.round_s:>9.1f} "
            f"{1e3 * t.per_round('data'):>7.1f} {1e3 * t.per_round('training'):>7.1f} "
            f"{1e3 * t.per_round('scheduling'):>7.1f} {1e3 * t.other_s:>7.1f} "
            f"{t.eval_s:>7.2f} {1e3 * t.round_wall_s:>8.1f} "
            f"{t.peak_rss_mb:>8.0f}"
        )
    log(
        "(CPU ms per round, split by part; eval s = CPU s of one evaluation of the 1 000 "
        "sampled clients; wall/rnd = wall ms per round, others' load included)"
    )


def figure(timings: Sequence[RoundTiming], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for method in dict.fromkeys(t.method for t in timings):
        rows = [t for t in timings if t.method == method]
        n = [t.n for t in rows]
        axes[0].loglog(n, [1e3 * t.round_s for t in rows], marker="o", label=method)
        axes[1].loglog(n, [t.peak_rss_mb for t in rows], marker="o", label=method)
        if method == "adcs-pool":
            for part, style in (("data", ":"), ("training", "--"), ("scheduling", "-.")):
                axes[0].loglog(n, [1e3 * t.per_round(part) for t in rows], style, color="gray",
                               alpha=0.7, label=f"{method}: {part}")  # fmt: skip
    axes[0].set(xlabel="clients N", ylabel="round time (CPU ms, evaluation excluded)",
                title=f"Round time, m = {M}, {AVAILABLE:.0%} available")  # fmt: skip
    axes[1].set(xlabel="clients N", ylabel="peak resident memory (MB)", title="Peak memory")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def targets(
    timings: Sequence[RoundTiming],
    map_s: float | None,
    map_n: int,
    log: Callable[[str], None],
    agreement: Sequence[Agreement] = (),
) -> dict[str, bool]:
    verdicts: dict[str, bool] = {}
    for a in agreement:
        if a.k == 2048:
            verdicts["same_at_2048"] = a.same >= TARGETS["same_at_2048"]
            log(
                f"target: the same MAP picks at k = 2048 in ≥ 95% of refreshes: "
                f"{100 * a.same:.0f}% -> {'met' if verdicts['same_at_2048'] else 'MISSED'}"
            )
    uni = {t.n: t for t in timings if t.method == "uniform"}
    if uni:
        lo, hi = min(uni), max(uni)
        ratio = uni[hi].round_s / uni[lo].round_s
        verdicts["uniform_ratio"] = ratio <= TARGETS["uniform_ratio"]
        log(
            f"target: Uniform's round at N = {hi:,} within 2× of N = {lo:,}: "
            f"{1e3 * uni[hi].round_s:.1f} vs {1e3 * uni[lo].round_s:.1f} CPU ms = {ratio:.2f}× "
            f"-> {'met' if verdicts['uniform_ratio'] else 'MISSED'}"
        )
    pool = [t for t in timings if t.method == "adcs-pool" and t.refreshes]
    for t in pool:
        per = 1e3 * t.parts["scheduling"] / t.refreshes
        ok = per <= TARGETS["pool_refresh_ms"]
        verdicts[f"pool_refresh_ms@{t.n}"] = ok
        log(
            f"target: ADCS scheduling per refresh, pool of {min(POOL, round(t.mean_available))} "
            f"at N = {t.n:,}: {per:.1f} CPU ms (≤ 50) -> {'met' if ok else 'MISSED'}"
        )
    if map_s is not None:
        verdicts["map_s"] = map_s <= TARGETS["map_s"]
        log(
            f"target: MAP on {map_n:,} candidates (m = {M}, k = {SKETCH}) ≤ 7 s: {map_s:.2f} "
            f"CPU s, one thread -> {'met' if verdicts['map_s'] else 'MISSED'}"
        )
    return verdicts


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="adcs bench scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--sizes", type=_ints, help="N values, comma-separated")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="methods, comma-separated ('' skips the round times)")  # fmt: skip
    parser.add_argument("--map-n", type=int, default=1_000_000, help="candidates of the MAP")
    parser.add_argument("--sketch-rounds", type=int, default=2000,
                        help="rounds of the paper-workload run (refresh every 20)")  # fmt: skip
    parser.add_argument("--data", default=None, help="Fashion-MNIST folder (default: lookup)")
    parser.add_argument("--figure", type=Path, default=Path("bench_scale.png"),
                        help="where to write the log-log figure")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = args.sizes or QUICK_SIZES
        args.map_n = min(args.map_n, 20_000)
        args.sketch_rounds = min(args.sketch_rounds, 200)
    sizes = args.sizes or SIZES
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    print(f"{os.cpu_count()} CPUs; times are CPU seconds of one process (wall time beside)")

    timings: list[RoundTiming] = []
    if methods:
        window = QUICK_WINDOW if args.quick else WINDOW
        print(f"\n1. Round time against N (rounds {window[0]}–{window[1]} timed, m = {M})")
        timings = time_rounds(sizes, methods, window=window)
        render(timings)
        figure(timings, args.figure)
        print(f"figure: {args.figure}")

    map_s = None
    if args.map_n:
        print(f"\n2. Greedy MAP on {args.map_n:,} candidates (m = {M}, k = {SKETCH})")
        map_wall, map_s, map_rss = time_map(args.map_n)
        print(f"MAP: {map_s:.2f} s CPU ({map_wall:.2f} s wall), peak RSS {map_rss:.0f} MB")

    agreement: list[Agreement] = []
    if args.sketch_rounds:
        print(f"\n3. Sketch agreement on the paper workload ({args.sketch_rounds} rounds)")
        refreshes, source = paper_refreshes(args.sketch_rounds, args.data)
        agreement = sketch_agreement(refreshes, SKETCH_KS)
        print(f"data: {source}; {len(refreshes)} refreshes of ADCS θ = 0.8, R = 20")
        for a in agreement:
            print(
                f"k = {a.k:>5}: the same picks in {100 * a.same:5.1f}% of refreshes; "
                f"{100 * a.overlap:5.1f}% of the picks in common on average"
            )

    print("\n4. Targets")
    targets(timings, map_s, args.map_n, print, agreement)
    return 0


if __name__ == "__main__":
    sys.exit(main())
