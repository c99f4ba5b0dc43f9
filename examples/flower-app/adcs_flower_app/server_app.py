"""The ServerApp: an adcs scheduler (ADCS, θ = 0.8, R = 20 by default) driving FedAvg.

The model is the paper's multinomial logistic regression (784 → 10 with bias), started at zero;
each round the scheduler picks m = 18 of the 30 clients (DESIGN §3). Per-client test accuracy is
gathered every ``evaluate-every`` rounds; the worst and average are logged at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from logging import INFO
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context
from flwr.common import log
from flwr.serverapp import Grid, ServerApp

from adcs.flower import SchedulerStrategy
from adcs.sim.model import LogisticRegression
from adcs_flower_app.task import N_CLIENTS, make_scheduler, run_config


def run(grid: Grid, config: Mapping[str, Any]) -> SchedulerStrategy:
    """Train for ``num-server-rounds`` rounds on ``grid``; the strategy holds the records."""
    strategy = SchedulerStrategy(
        make_scheduler(config),
        N_CLIENTS,
        server_lr=float(config["server-lr"]),
        seed=int(config["seed"]),
        evaluate_every=int(config["evaluate-every"]),
    )
    params = LogisticRegression().init_params(1)[0]
    train_config = ConfigRecord(
        {
            "local-steps": int(config["local-steps"]),
            "batch-size": int(config["batch-size"]),
            "local-lr": float(config["local-lr"]),
        }
    )
    strategy.start(
        grid,
        ArrayRecord({"params": Array(np.ascontiguousarray(params))}),
        num_rounds=int(config["num-server-rounds"]),
        train_config=train_config,
    )
    updates = sum(r.client_updates for r in strategy.history)
    losses = sum(r.loss_evals for r in strategy.history)
    log(INFO, "client computations: %d local updates, %d loss evaluations", updates, losses)
    for record in strategy.evaluations:
        log(
            INFO,
            "round %d: worst client accuracy %.4f, average %.4f",
            record.server_round,
            record.worst_accuracy,
            record.average_accuracy,
        )
    return strategy


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Entry point of ``flwr run``: the run config of pyproject.toml over task.DEFAULTS."""
    run(grid, run_config(dict(context.run_config)))
