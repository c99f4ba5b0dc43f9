"""Flower vs adcs's simulator on the same workload, side by side.

The workload is the paper's (Sec. 6): Fashion-MNIST in 10 groups × 3 clients, logistic regression,
E = 1, B = 16, η_ℓ = 0.001, one scheduler (default ADCS, θ = 0.8, R = 20, m = 18). It runs

* in Flower's Simulation Engine (Ray): the example app of ``examples/flower-app`` — a
  :class:`adcs.flower.SchedulerStrategy` ServerApp and 30 ClientApps computing
  :func:`adcs.sim.model.local_update` — and
* in :func:`adcs.sim.engine.simulate`, one run.

Printed per engine: wall time, rounds/s and client updates/s, and the simulator/Flower ratio. For
Flower, "steady" leaves out round 1 (Ray's start-up, the node handshake and ADCS's first probe).
Neither side evaluates during the timed rounds (the simulator evaluates at rounds 0 and T).

Run: ``python benchmarks/bench_flower.py [--rounds 20] [--num-cpus 2] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
APP_DIR = REPO / "examples" / "flower-app"


@dataclass(frozen=True)
class Figures:
    """Throughput of one engine."""

    engine: str
    rounds: int
    wall_s: float
    client_updates: int
    steady_rounds: int
    steady_s: float
    steady_updates: int

    @property
    def rounds_per_s(self) -> float:
        return self.steady_rounds / self.steady_s if self.steady_s > 0 else float("nan")

    @property
    def updates_per_s(self) -> float:
        return self.steady_updates / self.steady_s if self.steady_s > 0 else float("nan")


def _use_example_app() -> None:
    """Make the example app importable (and, through Ray's PYTHONPATH, in the client workers)."""
    if str(APP_DIR) not in sys.path:
        sys.path.insert(0, str(APP_DIR))


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "num-server-rounds": args.rounds,
        "scheduler": args.scheduler,
        "m": args.m,
        "evaluate-every": 0,
        "seed": args.seed,
        "partition-seed": args.partition_seed,
    }


def run_simulator(args: argparse.Namespace, data_dir: str | None) -> Figures:
    """The workload in :func:`adcs.sim.engine.simulate` (one run)."""
    from adcs.data import load_fashion_mnist, paper_groups
    from adcs.sim import FederatedData, RunSpec, SimConfig, simulate

    _use_example_app()
    from adcs_flower_app.task import make_scheduler, run_config

    dataset = load_fashion_mnist(data_dir)
    partition = paper_groups(
        dataset.train_labels, dataset.test_labels, np.random.default_rng(args.partition_seed)
    )
    data = FederatedData.from_partition(dataset, partition)
    scheduler = make_scheduler(run_config(_overrides(args)))
    config = SimConfig(rounds=args.rounds, eval_every=args.rounds)
    start = time.perf_counter()
    (result,) = simulate([RunSpec(scheduler, args.seed, "bench-flower")], data, config)
    wall = time.perf_counter() - start
    return Figures(
        "adcs.sim",
        args.rounds,
        wall,
        result.client_updates,
        args.rounds,
        wall,
        result.client_updates,
    )


def run_flower(args: argparse.Namespace, data_dir: str | None) -> Figures:
    """The workload in Flower's Simulation Engine (the example app, 30 nodes)."""
    _use_example_app()
    from adcs_flower_app.local import simulate as flower_simulate

    start = time.perf_counter()
    strategy = flower_simulate(_overrides(args), num_cpus=args.num_cpus, data_dir=data_dir)
    wall = time.perf_counter() - start
    history = strategy.history
    steady = history[1:]
    return Figures(
        "flower",
        len(history),
        wall,
        sum(r.client_updates for r in history),
        len(steady),
        sum(r.wall_s for r in steady),
        sum(r.client_updates for r in steady),
    )


def _table(rows: Sequence[Figures]) -> str:
    lines = [
        f"{'engine':<9} {'rounds':>6} {'wall s':>8} {'updates':>8} {'rounds/s':>10} "
        f"{'updates/s':>11}"
    ]
    for f in rows:
        lines.append(
            f"{f.engine:<9} {f.rounds:>6d} {f.wall_s:>8.2f} {f.client_updates:>8d} "
            f"{f.rounds_per_s:>10.2f} {f.updates_per_s:>11.1f}"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="server rounds T (default 20)")
    parser.add_argument("--scheduler", default="adcs", help="a name of adcs.schedulers.SCHEDULERS")
    parser.add_argument("--m", type=int, default=18, help="clients per round (default 18)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--partition-seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs Ray may use (default 2)")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="Fashion-MNIST folder (default: adcs's usual lookup)",
    )
    parser.add_argument("--skip-flower", action="store_true", help="time the simulator only")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (round 1 is left out of Flower's steady rate)")
    return args


def main(argv: Sequence[str] | None = None) -> list[Figures]:
    """Run both engines and print the comparison; returns the figures."""
    args = parse_args(argv)
    rows = [run_simulator(args, args.data_dir)]
    if not args.skip_flower:
        rows.append(run_flower(args, args.data_dir))
    print(f"workload: {args.scheduler}, N = 30, m = {args.m}, T = {args.rounds}, E = 1, B = 16")
    print(_table(rows))
    if len(rows) == 2:
        sim, flower = rows
        print(
            f"simulator / Flower (steady): {sim.rounds_per_s / flower.rounds_per_s:.0f}x rounds/s, "
            f"{sim.updates_per_s / flower.updates_per_s:.0f}x client updates/s; Flower's "
            f"start-up, round 1 and shut-down took {flower.wall_s - flower.steady_s:.1f} s"
        )
    return rows


if __name__ == "__main__":
    main()
