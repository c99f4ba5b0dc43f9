"""Run the app in-process on Flower's Simulation Engine (``flwr.simulation.run_simulation``).

``flwr run .`` is the normal way (see README.md); this entry point needs no SuperLink and lets the
benchmark and the tests drive the same ServerApp and ClientApp::

    python -m adcs_flower_app.local --rounds 20 --data-dir /path/to/fashion-mnist
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from adcs.flower import SchedulerStrategy
from adcs_flower_app.client_app import app as client_app
from adcs_flower_app.server_app import run
from adcs_flower_app.task import N_CLIENTS, run_config


def simulate(
    overrides: Mapping[str, Any] | None = None, num_cpus: int = 2, data_dir: str | None = None
) -> SchedulerStrategy:
    """Run the app on ``N_CLIENTS`` simulated nodes; returns the strategy with its records.

    Parameters
    ----------
    overrides : mapping, optional
        Run-config entries over the defaults (same keys as pyproject.toml's [tool.flwr.app.config]).
    num_cpus : int
        CPUs Ray may use; each ClientApp actor takes one.
    data_dir : str, optional
        Fashion-MNIST folder, handed to the client processes as ``ADCS_DATA_DIR`` (a run started by
        ``run_simulation`` has no run config of its own).
    """
    config = run_config(dict(overrides or {}))
    if data_dir:
        os.environ["ADCS_DATA_DIR"] = os.path.abspath(data_dir)
    out: dict[str, SchedulerStrategy] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        out["strategy"] = run(grid, config)

    backend: dict[str, dict[str, Any]] = {
        "client_resources": {"num_cpus": 1},
        "init_args": {"num_cpus": num_cpus},
    }
    run_simulation(server_app, client_app, num_supernodes=N_CLIENTS, backend_config=backend)
    return out["strategy"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="number of server rounds")
    parser.add_argument("--scheduler", default="adcs", help="a name of adcs.schedulers.SCHEDULERS")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs for Ray (one per actor)")
    parser.add_argument("--data-dir", default=None, help="Fashion-MNIST folder (default: lookup)")
    parser.add_argument("--evaluate-every", type=int, default=10)
    args = parser.parse_args(argv)
    strategy = simulate(
        {
            "num-server-rounds": args.rounds,
            "scheduler": args.scheduler,
            "evaluate-every": args.evaluate_every,
        },
        num_cpus=args.num_cpus,
        data_dir=args.data_dir,
    )
    for record in strategy.evaluations:
        print(
            f"round {record.server_round:4d}: worst client accuracy {record.worst_accuracy:.4f}, "
            f"average {record.average_accuracy:.4f}"
        )
    updates = sum(r.client_updates for r in strategy.history)
    print(f"{len(strategy.history)} rounds, {updates} client updates")


if __name__ == "__main__":
    main()
