"""adcs's scheduler strategy in Flower's two runtimes, beside adcs's own simulator.

The workload is the paper's (Sec. 6) scaled to N clients: Fashion-MNIST in the paper's groups of 3
clients (N = 30: 10 groups), logistic regression, E = 1, B = 16, η_ℓ = 0.001, one scheduler
(default ADCS, θ = 0.8, R = 20) choosing m ≈ 0.6 N clients per round (18 of 30). It runs

* in :func:`adcs.sim.simulate`, one run (N = 30);
* in Flower's Simulation Runtime (Ray, in-process): the example app of ``examples/flower-app``
  — :class:`adcs.flower.SchedulerStrategy` and ClientApps computing
  :func:`adcs.sim.model.local_update` (N = 30);
* in Flower's Deployment Runtime with ``--supernodes`` N (e.g. ``6,30``): a real
  ``flower-superlink`` and N ``flower-supernode`` processes on 127.0.0.1
  (:class:`adcs.flower.testbed.LocalFederation`), the same app submitted with ``flwr run``.

Printed per engine: N, m, the first round's time (start-up, handshakes, ADCS's probe of all
clients) and the steady per-round time (the mean of rounds 2..T: m local updates each), and the
client updates per second. No engine evaluates during the timed rounds.

In the Deployment Runtime Flower starts a new ClientApp process for every message (about 2 s of
CPU for its imports), so a round costs about m · 2 s of CPU spread over the machine's cores, plus
the SuperNodes' polling (every 3 s when idle). ``--max-in-flight`` caps the requests open at
once, which keeps many SuperNodes on few CPUs inside Flower's 30 s ClientApp start window; the
default is the number of CPUs.

Run: ``python benchmarks/bench_flower.py [--rounds 20] [--supernodes 6,30] [--data DIR]``.
Timings are of this machine as it was: on a machine shared with other work they are upper
bounds, not properties of the code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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
    """What one engine did on the workload."""

    engine: str
    n_clients: int
    m: int
    rounds: int
    wall_s: float
    first_round_s: float
    steady_s: float
    client_updates: int
    steady_updates: int

    @property
    def per_round_s(self) -> float:
        """Mean time of rounds 2..T."""
        return self.steady_s / (self.rounds - 1)

    @property
    def updates_per_s(self) -> float:
        return self.steady_updates / self.steady_s if self.steady_s > 0 else float("nan")


def _use_example_app() -> None:
    """Make the example app importable (and, through Ray's PYTHONPATH, in the client workers)."""
    if str(APP_DIR) not in sys.path:
        sys.path.insert(0, str(APP_DIR))


def clients_selected(n_clients: int) -> int:
    """m for N clients: the paper's 18 of 30, the same share (rounded) for other N."""
    return max(1, round(0.6 * n_clients))


def _overrides(args: argparse.Namespace, n_clients: int) -> dict[str, Any]:
    params = args.scheduler_params
    if params is None:
        params = "theta = 0.8, refresh_every = 20" if args.scheduler == "adcs" else ""
    return {
        "num-server-rounds": args.rounds,
        "num-partitions": n_clients,
        "scheduler": args.scheduler,
        "scheduler-params": params,
        "m": clients_selected(n_clients),
        "evaluate-every": 0,
        "seed": args.seed,
        "partition-seed": args.partition_seed,
        "data-dir": args.data or "",
    }


def _from_history(engine: str, history: list[Any], wall: float, n: int, m: int) -> Figures:
    """Figures from round records (RoundRecord or the saved history's dicts)."""

    def get(record: Any, key: str) -> Any:
        return record[key] if isinstance(record, dict) else getattr(record, key)

    walls = [float(get(r, "wall_s")) for r in history]
    updates = [int(get(r, "client_updates")) for r in history]
    return Figures(
        engine, n, m, len(history), wall, walls[0], sum(walls[1:]), sum(updates), sum(updates[1:])
    )


def run_simulator(args: argparse.Namespace) -> Figures:
    """The workload in :func:`adcs.sim.simulate` (one run, N = 30)."""
    from adcs.data import load_fashion_mnist
    from adcs.experiments.run.runner import make_partition
    from adcs.sim import FederatedData, RunSpec, SimConfig, simulate

    _use_example_app()
    from adcs_flower_app.server_app import make_scheduler
    from adcs_flower_app.task import data_config, run_config

    config = run_config(_overrides(args, 30))
    dataset = load_fashion_mnist(args.data)
    data = data_config(config)
    partition = make_partition(dataset, data, np.random.default_rng(data.partition_seed))
    federated = FederatedData.from_partition(dataset, partition)
    scheduler = make_scheduler(config)
    sim_config = SimConfig(rounds=args.rounds, eval_every=args.rounds)
    start = time.perf_counter()
    (result,) = simulate([RunSpec(scheduler, args.seed, "flower")], federated, sim_config)
    wall = time.perf_counter() - start
    # timed as a whole (its rounds take microseconds): no first round apart
    steady = (args.rounds - 1) / args.rounds
    return Figures(
        "adcs.sim", 30, scheduler.m, args.rounds, wall, float("nan"), wall * steady,
        result.client_updates, round(result.client_updates * steady),
    )  # fmt: skip


def run_simulation_runtime(args: argparse.Namespace) -> Figures:
    """The workload in Flower's Simulation Runtime (the example app, 30 nodes)."""
    _use_example_app()
    from adcs_flower_app.local import simulate as flower_simulate

    overrides = _overrides(args, 30)
    start = time.perf_counter()
    strategy = flower_simulate(overrides, num_cpus=args.num_cpus)
    wall = time.perf_counter() - start
    return _from_history("simulation", strategy.history, wall, 30, int(overrides["m"]))


def run_deployment(args: argparse.Namespace, n_nodes: int) -> Figures:
    """The workload in Flower's Deployment Runtime: a SuperLink and ``n_nodes`` SuperNodes."""
    from adcs.flower.testbed import LocalFederation

    overrides = {
        **_overrides(args, n_nodes),
        "data-download": False,
        "connect-timeout-s": 600.0,
        "wait-for-all-s": 600.0,
        "max-in-flight": args.max_in_flight,
    }
    env = {"ADCS_DATA_DIR": os.path.abspath(args.data)} if args.data else {}
    with tempfile.TemporaryDirectory(prefix="adcs-bench-flower-") as folder:
        overrides["save-to"] = str(Path(folder) / "out")
        env["XDG_CACHE_HOME"] = str(Path(folder) / "cache")
        start = time.perf_counter()
        with LocalFederation.start(Path(folder) / "federation", n_nodes, env=env) as federation:
            run_id = federation.submit(APP_DIR, overrides)
            federation.wait(run_id, timeout_s=args.deployment_timeout)
            wall = time.perf_counter() - start
        saved = json.loads((Path(folder) / "out" / "history.json").read_text())
    return _from_history("deployment", saved["rounds"], wall, n_nodes, int(overrides["m"]))


def _table(rows: Sequence[Figures]) -> str:
    lines = [
        f"{'engine':<11} {'N':>3} {'m':>3} {'rounds':>6} {'wall s':>8} {'round 1 s':>9} "
        f"{'s/round':>8} {'updates/s':>10}"
    ]
    for f in rows:
        lines.append(
            f"{f.engine:<11} {f.n_clients:>3d} {f.m:>3d} {f.rounds:>6d} {f.wall_s:>8.2f} "
            f"{f.first_round_s:>9.2f} {f.per_round_s:>8.3f} {f.updates_per_s:>10.1f}"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="server rounds T (default 20)")
    parser.add_argument("--scheduler", default="adcs", help="a name of adcs.schedulers.SCHEDULERS")
    parser.add_argument(
        "--scheduler-params", default=None, help="its hyperparameters (TOML inline-table body)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--partition-seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs Ray may use (default 2)")
    parser.add_argument(
        "--data", default=None, help="Fashion-MNIST folder (default: adcs's usual lookup)"
    )
    parser.add_argument("--data-dir", dest="data", help=argparse.SUPPRESS)  # the former name
    parser.add_argument(
        "--engines",
        default="sim,simulation",
        help="comma-separated, of sim, simulation (default: both)",
    )
    parser.add_argument(
        "--supernodes",
        default="",
        help="Deployment Runtime federation sizes, e.g. 6,30 (default: none)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=os.cpu_count() or 2,
        help="requests open at once in the Deployment Runtime (default: the CPUs; 0: no limit)",
    )
    parser.add_argument(
        "--deployment-timeout", type=float, default=3600.0, help="seconds a deployment run may take"
    )
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (round 1 is timed apart)")
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = set(args.engines) - {"sim", "simulation"}
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from sim, simulation")
    try:
        args.supernodes = [int(n) for n in args.supernodes.split(",") if n]
    except ValueError:
        parser.error(f"--supernodes must be comma-separated integers, got {args.supernodes!r}")
    if any(n < 3 or n % 3 for n in args.supernodes):
        parser.error("--supernodes must be multiples of 3 (the paper's groups of 3 clients)")
    return args


def main(argv: Sequence[str] | None = None) -> list[Figures]:
    """Run the engines asked for and print the comparison; returns the figures."""
    args = parse_args(argv)
    if not APP_DIR.is_dir():
        raise SystemExit(
            f"error: bench flower runs the example Flower app, which is in the adcs source "
            f"checkout (examples/flower-app), not in an installed adcs: looked in {APP_DIR}"
        )
    rows = []
    if "sim" in args.engines:
        rows.append(run_simulator(args))
    if "simulation" in args.engines:
        rows.append(run_simulation_runtime(args))
    for n in args.supernodes:
        rows.append(run_deployment(args, n))
    print(f"workload: {args.scheduler}, T = {args.rounds}, E = 1, B = 16, m = 0.6 N")
    if args.supernodes:
        window = f"at most {args.max_in_flight}" if args.max_in_flight else "no limit on"
        print(f"Deployment Runtime: {window} requests in flight")
    print(_table(rows))
    print("(timings of this machine as it was; shared with other work, they are upper bounds)")
    return rows


if __name__ == "__main__":
    main()
