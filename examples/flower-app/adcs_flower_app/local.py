"""Run the app in-process on Flower's Simulation Runtime (``flwr.simulation.run_simulation``).

``flwr run .`` is the normal way (see README.md); this entry point needs no SuperLink and lets the
benchmark and the tests drive the same ServerApp and ClientApp::

    python -m adcs_flower_app.local --rounds 20 --data /path/to/fashion-mnist
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from adcs.flower import SchedulerStrategy
from adcs_flower_app.client_app import client_app
from adcs_flower_app.server_app import run
from adcs_flower_app.task import run_config


def simulate(overrides: Mapping[str, Any] | None = None, num_cpus: int = 2) -> SchedulerStrategy:
    """Run the app on ``num-partitions`` simulated nodes; returns the strategy with its records.

    Parameters
    ----------
    overrides : mapping, optional
        Run-config entries over the defaults (same keys as pyproject.toml's [tool.flwr.app.config]).
    num_cpus : int
        CPUs Ray may use; each ClientApp actor takes one.
    """
    config = run_config(dict(overrides or {}))
    out: dict[str, SchedulerStrategy] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        out["strategy"] = run(grid, config)

    backend: dict[str, dict[str, Any]] = {
        "client_resources": {"num_cpus": 1},
        "init_args": {"num_cpus": num_cpus},
    }
    run_simulation(
        server_app,
        client_app(config),
        num_supernodes=int(config["num-partitions"]),
        backend_config=backend,
    )
    return out["strategy"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="number of server rounds")
    parser.add_argument("--scheduler", default="adcs", help="a name of adcs.schedulers.SCHEDULERS")
    parser.add_argument(
        "--scheduler-params", default=None, help="its hyperparameters, e.g. 'theta = 0.5'"
    )
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs for Ray (one per actor)")
    parser.add_argument(
        "--data", dest="data_dir", default="", help="Fashion-MNIST folder (default: lookup)"
    )
    parser.add_argument("--data-dir", dest="data_dir", help=argparse.SUPPRESS)  # the former name
    parser.add_argument("--evaluate-every", type=int, default=10)
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {
        "num-server-rounds": args.rounds,
        "scheduler": args.scheduler,
        "evaluate-every": args.evaluate_every,
        "data-dir": args.data_dir,
    }
    if args.scheduler_params is not None:
        overrides["scheduler-params"] = args.scheduler_params
    elif args.scheduler != "adcs":
        overrides["scheduler-params"] = ""
    strategy = simulate(overrides, num_cpus=args.num_cpus)
    for record in strategy.evaluations:
        print(
            f"round {record.server_round:4d}: worst client accuracy {record.worst_accuracy:.4f}, "
            f"average {record.average_accuracy:.4f}"
        )
    updates = sum(r.client_updates for r in strategy.history)
    print(f"{len(strategy.history)} rounds, {updates} client updates")


if __name__ == "__main__":
    main()
