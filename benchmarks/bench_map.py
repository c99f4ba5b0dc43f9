"""Benchmark of greedy DPP MAP: features path vs dense path vs naive slogdet greedy, side by side.

Each measurement runs in a fresh process so its peak memory is its own. Printed per (N, m, k):
wall time of preparing the features (normalising raw updates), of the MAP call, peak memory traced
beyond the inputs, and the process's peak resident memory. Combinations that cannot fit the memory
budget, or whose naive run would take too long, are skipped with the reason.

Run: ``adcs bench map`` or ``python benchmarks/bench_map.py [--quick]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any

import numpy as np

GRID_N = (1_000, 30_000, 1_000_000)
GRID_M = (18, 100, 300)
GRID_K = (64, 128, 300)
QUICK_N = (500, 5_000)
QUICK_M = (18, 50)
QUICK_K = (32,)
METHODS = ("features", "dense", "naive")
# The targets on a 2-core machine: (N, m, k) -> (seconds, MB of memory).
TARGETS = {
    (30_000, 300, 300): (
        "prep + MAP ≤ 2 s, traced memory beyond the features < 200 MB",
        2.0,
        200.0,
    ),
    (1_000_000, 100, 128): ("MAP ≤ 10 s, process peak ≤ 2.5 GB", 10.0, 2500.0),
}


@dataclass(frozen=True)
class Measurement:
    method: str
    n: int
    m: int
    k: int
    prep_s: float = float("nan")
    map_s: float = float("nan")
    traced_mb: float = float("nan")
    peak_rss_mb: float = float("nan")
    skipped: str = ""


def estimate_skip(method: str, n: int, m: int, k: int, budget_gb: float, naive_s: float) -> str:
    """Why a combination is not run ("" when it is)."""
    if m > n:
        return "m > N"
    feature_gb = n * k * 4 / 1e9
    if method == "features":
        need = feature_gb * 2 + n * 8 * 6 / 1e9
    else:
        need = feature_gb + 2 * n * n * 8 / 1e9
    if need > budget_gb:
        return f"needs ~{need:.1f} GB > budget {budget_gb:g} GB"
    if method == "naive":
        est = n * m * (1.2e-4 + 1.5e-10 * (m / 2) ** 3)
        if est > naive_s:
            return f"naive greedy would take ~{est:.0f} s > limit {naive_s:g} s"
    return ""


def _measure(method: str, n: int, m: int, k: int, seed: int, threads: int, queue: Any) -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")  # this child's BLAS, whatever the parent set
    from adcs.dpp import greedy_map, greedy_map_features, naive_greedy_map

    rng = np.random.default_rng(seed)
    raw = rng.standard_normal((n, k), dtype=np.float32)
    t0 = time.perf_counter()
    features = raw / np.linalg.norm(raw, axis=1, keepdims=True)  # ADCS's φ_n = g_n / ‖g_n‖
    prep = time.perf_counter() - t0
    del raw
    kernel = None
    if method != "features":
        t0 = time.perf_counter()
        f64 = features.astype(np.float64)
        kernel = f64 @ f64.T
        del f64
        prep += time.perf_counter() - t0
    tracemalloc.start()
    t0 = time.perf_counter()
    if method == "features":
        greedy_map_features(features, m)
    elif method == "dense":
        greedy_map(kernel, m, validate=False)  # the algorithm, not the O(N³) PSD check
    else:
        naive_greedy_map(kernel, m)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    queue.put((prep, elapsed, peak / 1e6, rss_mb))


def measure(method: str, n: int, m: int, k: int, seed: int = 0, threads: int = 1) -> Measurement:
    # fork: the child inherits this module however it was loaded (``adcs bench`` loads it by path)
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_measure, args=(method, n, m, k, seed, threads, queue))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        return Measurement(method, n, m, k, skipped=f"failed (exit code {proc.exitcode})")
    prep, elapsed, traced, rss = queue.get()
    return Measurement(method, n, m, k, prep, elapsed, traced, rss)


def run(
    grid_n: tuple[int, ...],
    grid_m: tuple[int, ...],
    grid_k: tuple[int, ...],
    budget_gb: float,
    naive_s: float,
    threads: int = 1,
) -> list[Measurement]:
    results = []
    for n in grid_n:
        for m in grid_m:
            for k in grid_k:
                for method in METHODS:
                    reason = estimate_skip(method, n, m, k, budget_gb, naive_s)
                    results.append(
                        Measurement(method, n, m, k, skipped=reason)
                        if reason
                        else measure(method, n, m, k, threads=threads)
                    )
    return results


def render(results: list[Measurement]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(140, Console().width))
    table = Table(title="Greedy DPP MAP: features path vs dense path vs naive slogdet greedy")
    for col in (
        "N",
        "m",
        "k",
        "method",
        "prep s",
        "MAP s",
        "traced MB",
        "peak RSS MB",
        "× features",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("note")
    by_key = {(r.n, r.m, r.k, r.method): r for r in results}
    for r in results:
        base = by_key[(r.n, r.m, r.k, "features")]
        if r.skipped:
            table.add_row(
                str(r.n), str(r.m), str(r.k), r.method, *["—"] * 5, f"skipped: {r.skipped}"
            )
            continue
        ratio = "1.0" if r.method == "features" else f"{r.map_s / base.map_s:.1f}"
        if base.skipped:
            ratio = "—"
        table.add_row(
            str(r.n),
            str(r.m),
            str(r.k),
            r.method,
            f"{r.prep_s:.3f}",
            f"{r.map_s:.3f}",
            f"{r.traced_mb:.1f}",
            f"{r.peak_rss_mb:.0f}",
            ratio,
            "",
        )
    console.print(table)
    for key, (text, seconds, megabytes) in TARGETS.items():
        r = by_key.get((*key, "features"))
        if r is None or r.skipped:
            continue
        if key[0] == 30_000:
            t, mem = r.prep_s + r.map_s, r.traced_mb
        else:
            t, mem = r.map_s, r.peak_rss_mb
        verdict = "met" if t <= seconds and mem <= megabytes else "MISSED"
        console.print(
            f"target N={key[0]}, m={key[1]}, k={key[2]} ({text}): {t:.2f} s, {mem:.0f} MB -> {verdict}"
        )


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small grid (seconds)")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="BLAS threads (default: all CPUs)"
    )
    parser.add_argument("--sizes", type=_ints, help="N values, comma-separated (overrides)")
    parser.add_argument("--ms", type=_ints, help="m values, comma-separated (overrides)")
    parser.add_argument("--ks", type=_ints, help="k values, comma-separated (overrides)")
    parser.add_argument("--budget-gb", type=float, default=4.0, help="skip runs needing more")
    parser.add_argument("--naive-limit-s", type=float, default=60.0, help="skip slower naive runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.naive_limit_s = min(args.naive_limit_s, 5.0)
    grid_n, grid_m, grid_k = (QUICK_N, QUICK_M, QUICK_K) if args.quick else (GRID_N, GRID_M, GRID_K)
    grid = (args.sizes or grid_n, args.ms or grid_m, args.ks or grid_k)
    print(f"{os.cpu_count()} CPUs; BLAS threads per measurement: {args.threads}")
    render(run(*grid, budget_gb=args.budget_gb, naive_s=args.naive_limit_s, threads=args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
