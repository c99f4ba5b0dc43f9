"""The ServerApp: an adcs scheduler (ADCS, θ = 0.8, R = 20 by default) choosing each round's clients.

The model is the paper's multinomial logistic regression (784 → 10 with bias), started at zero;
each round the scheduler picks ``m`` of the ``num-partitions`` clients (the paper: 18 of 30). Any
scheduler of ``adcs.schedulers.SCHEDULERS`` can be named with ``scheduler``, its hyperparameters
given in ``scheduler-params`` as the body of a TOML inline table (``"theta = 0.5, refresh_every =
5"``). Per-client test accuracy is gathered every ``evaluate-every`` rounds; with ``save-to`` the
round history and the final model are written to that folder when the run ends.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

from adcs.flower import SchedulerStrategy, history_dicts
from adcs.schedulers import SCHEDULERS, Scheduler
from adcs.sim.model import LogisticRegression
from adcs_flower_app.logs import show_adcs_logs
from adcs_flower_app.task import run_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

logger = logging.getLogger("adcs.flower_app")


def make_scheduler(config: Mapping[str, Any]) -> Scheduler:
    """The scheduler named by ``config["scheduler"]``, with ``m`` and ``scheduler-params``."""
    from adcs.experiments.config import MethodConfig

    name = str(config["scheduler"])
    SCHEDULERS.resolve(name)  # a built-in name, "package.module:Name" or an entry point
    text = str(config["scheduler-params"])
    try:
        params = tomllib.loads(f"params = {{{text}}}")["params"]
    except tomllib.TOMLDecodeError as err:
        raise ValueError(
            f"scheduler-params must be the body of a TOML inline table, such as "
            f"'theta = 0.8, refresh_every = 20'; got {text!r} ({err})"
        ) from err
    method = MethodConfig(name, tuple(params.items()))
    try:
        return method.build(int(config["m"]), params)
    except TypeError as err:  # an argument the scheduler does not take
        raise ValueError(f"scheduler-params {text!r} do not fit {name!r}: {err}") from err


def run(grid: Grid, config: Mapping[str, Any]) -> SchedulerStrategy:
    """Train for ``num-server-rounds`` rounds on ``grid``; the strategy holds the records."""
    strategy = SchedulerStrategy(
        make_scheduler(config),
        int(config["num-partitions"]),
        server_lr=float(config["server-lr"]),
        weighting=str(config["weighting"]),
        seed=int(config["seed"]),
        connect_timeout_s=float(config["connect-timeout-s"]),
        wait_for_all_s=float(config["wait-for-all-s"]),
        evaluate_every=int(config["evaluate-every"]),
        max_in_flight=int(config["max-in-flight"]),
    )
    params = LogisticRegression().init_params(1)[0]
    train_config = ConfigRecord(
        {
            "local-steps": int(config["local-steps"]),
            "batch-size": int(config["batch-size"]),
            "local-lr": float(config["local-lr"]),
        }
    )
    result = strategy.start(
        grid,
        ArrayRecord({"params": Array(np.ascontiguousarray(params))}),
        num_rounds=int(config["num-server-rounds"]),
        timeout=float(config["reply-timeout-s"]),
        train_config=train_config,
    )
    updates = sum(r.client_updates for r in strategy.history)
    losses = sum(r.loss_evals for r in strategy.history)
    logger.info("client computations: %d local updates, %d loss evaluations", updates, losses)
    for record in strategy.evaluations:
        logger.info(
            "round %d: worst client accuracy %.4f, average %.4f",
            record.server_round,
            record.worst_accuracy,
            record.average_accuracy,
        )
    if config["save-to"]:
        save(strategy, result.arrays["params"].numpy(), Path(str(config["save-to"])))
    return strategy


def save(strategy: SchedulerStrategy, params: Any, folder: Path) -> None:
    """``history.json`` (rounds and evaluations) and ``final_params.npy`` (w⁽ᵀ⁾) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    evaluations = [
        {
            "server_round": e.server_round,
            "accuracy": [None if np.isnan(a) else float(a) for a in e.accuracy],
            "worst_accuracy": e.worst_accuracy,
            "average_accuracy": e.average_accuracy,
        }
        for e in strategy.evaluations
    ]
    history = {"rounds": history_dicts(strategy.history), "evaluations": evaluations}
    (folder / "history.json").write_text(json.dumps(history, indent=1), encoding="utf-8")
    np.save(folder / "final_params.npy", params)
    logger.info("history and final model written to %s", folder)


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Entry point of ``flwr run``: the run config of pyproject.toml over task.DEFAULTS."""
    show_adcs_logs()
    run(grid, run_config(dict(context.run_config)))
