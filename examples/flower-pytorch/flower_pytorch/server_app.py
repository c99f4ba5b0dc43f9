"""The ServerApp, in the shape of Flower's PyTorch quickstart (see README.md for its twin)."""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

from adcs.flower import ScheduledFedAvg
from flower_pytorch.task import Net

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    n_clients, fraction_train = int(cfg["num-clients"]), float(cfg["fraction-train"])
    m = max(1, round(fraction_train * n_clients))
    torch.manual_seed(0)
    arrays = ArrayRecord(Net().state_dict())

    strategy = ScheduledFedAvg(
        scheduler="adcs",
        scheduler_params={"m": m, "theta": 0.8, "refresh_every": 5},
        n_clients=n_clients,
        fraction_evaluate=float(cfg["fraction-evaluate"]),
        checkpoint_path=str(cfg["checkpoint-path"]) or None,
    )

    result = strategy.start(
        grid=grid,
        initial_arrays=arrays,
        num_rounds=int(cfg["num-server-rounds"]),
        train_config=ConfigRecord({"lr": float(cfg["lr"])}),
    )
    if cfg["save-to"]:
        torch.save(result.arrays.to_torch_state_dict(), str(cfg["save-to"]))
