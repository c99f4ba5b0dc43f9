"""Per-call ``select`` time of the rival schedulers (and ADCS's fresh-quality round), by N.

Each scheduler is brought to a steady state (past its first probe, warm-up or refresh), then the
round it runs most often is timed: ``select`` alone, on statistics gathered beforehand (the
probe's updates are dim = 7850, the paper's logistic regression). Rounds that recompute
something costly (MD when availability changes, FedCor's refit, k-DPP's refresh) are timed apart.
Prints the median of ``--repeats`` calls in milliseconds, wall and process CPU.

    python benchmarks/bench_select.py --clients 30 1000
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from adcs.schedulers import (
    ADCS,
    DELTA,
    KDPP,
    MD,
    ClientStats,
    ClusteredSimilarity,
    ClusteredSize,
    FedCor,
    Oort,
)
from adcs.schedulers.clustered_similarity import refresh_representatives


def median_ms(call: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall and process-CPU milliseconds of ``call`` (CPU time is steadier on a shared
    machine; it counts every BLAS thread, so it can exceed the wall time)."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return 1e3 * statistics.median(wall), 1e3 * statistics.median(cpu)


def cases(n: int, m: int, dim: int, rng: np.random.Generator) -> dict[str, Callable[[], object]]:
    """Name → a zero-argument call of one steady-state ``select``."""
    sizes = np.round(rng.lognormal(4.0, 1.0, size=n))
    updates = (rng.normal(size=(20, dim)) * 1e-3)[rng.integers(0, 20, size=n)]
    updates = (updates + 3e-4 * rng.normal(size=(n, dim))).astype(np.float32)
    losses = rng.uniform(0.5, 2.5, size=n)
    everyone = np.ones(n, dtype=bool)
    blind = ClientStats.blind(everyone)
    full = ClientStats(everyone, np.arange(n), losses, updates)
    loss_only = ClientStats(everyone, np.arange(n), losses)
    masks = [rng.random(n) < 0.9 for _ in range(8)]
    out: dict[str, Callable[[], object]] = {}

    def steady(scheduler, state, t, stats):  # type: ignore[no-untyped-def]
        return lambda: scheduler.select(state, t, stats, rng)

    md = MD(m)
    md_state = md.select(md.init(n, sizes), 0, blind, rng)[1]
    out["md"] = steady(md, md_state, 1, blind)
    it = iter(range(10**9))
    out["md (availability changes)"] = lambda: md.select(
        md.init(n, sizes), 0, ClientStats.blind(masks[next(it) % 8]), rng
    )
    size = ClusteredSize(m)
    out["clustered_size"] = steady(size, size.init(n, sizes), 1, blind)
    sim = ClusteredSimilarity(m)
    sim_state = refresh_representatives(sim.init(n, sizes), np.arange(n), updates)
    out["clustered_similarity"] = steady(sim, sim_state, 1, blind)
    chosen = np.arange(m)
    out["clustered_similarity observe"] = lambda: sim.observe(
        sim_state, 1, chosen, updates[chosen], None
    )
    delta = DELTA(m)
    delta_state = delta.select(delta.init(n, sizes), 0, full, rng)[1]
    out["delta"] = steady(delta, delta_state, 1, full)
    oort = Oort(m)
    oort_state = oort.observe(oort.init(n, sizes), 0, np.arange(n), updates, losses)
    out["oort"] = steady(oort, oort_state, 1, blind)
    fedcor = FedCor(m, warmup=10, refit_every=5)
    state = fedcor.init(n, sizes)
    for t in range(12):  # warm-up, then the refit at round 11
        stats = ClientStats(everyone, np.arange(n), losses + 0.01 * rng.normal(size=n))
        state = fedcor.select(state, t, stats, rng)[1]
    out["fedcor"] = steady(fedcor, state, 12, blind)
    out["fedcor refit round"] = lambda: fedcor.select(
        fedcor.select(state, 15, loss_only, rng)[1], 16, loss_only, rng
    )
    kdpp = KDPP(m)
    kdpp_state = kdpp.select(kdpp.init(n, sizes), 0, full, rng)[1]
    out["kdpp"] = steady(kdpp, kdpp_state, 1, blind)
    out["kdpp refresh round"] = steady(kdpp, kdpp.init(n, sizes), 0, full)
    adcs = ADCS(m, fresh_quality=True)
    adcs_state = adcs.select(adcs.init(n, sizes), 0, full, rng)[1]
    out["adcs fresh_quality round"] = steady(adcs, adcs_state, 1, loss_only)
    paper = ADCS(m)
    out["adcs refresh round"] = steady(paper, paper.init(n, sizes), 0, full)
    out["adcs paper round (cached)"] = steady(
        paper, paper.select(paper.init(n), 0, full, rng)[1], 1, blind
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[30, 1000])
    parser.add_argument("--m", type=int, default=18)
    parser.add_argument("--dim", type=int, default=7850)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    results = {n: cases(n, args.m, args.dim, np.random.default_rng(0)) for n in args.clients}
    names = list(results[args.clients[0]])
    header = "".join(f"N={n} wall / cpu (ms)".rjust(26) for n in args.clients)
    print("scheduler".ljust(30) + header)
    for name in names:
        row = [median_ms(results[n][name], args.repeats) for n in args.clients]
        print(name.ljust(30) + "".join(f"{w:13.3f} /{c:10.3f}" for w, c in row))


if __name__ == "__main__":
    main()
