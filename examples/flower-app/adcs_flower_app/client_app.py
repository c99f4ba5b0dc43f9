"""The ClientApp: adcs's protocol (:func:`adcs.flower.make_client_app`) on the paper's partition."""

from __future__ import annotations

from flwr.app import Context

from adcs.flower import ClientData, TrainDefaults, make_client_app
from adcs_flower_app.task import DEFAULTS, load_client_data


def _load(partition_id: int, context: Context) -> ClientData:
    data_dir = str(context.run_config.get("data-dir", DEFAULTS["data-dir"]))
    seed = int(context.run_config.get("partition-seed", DEFAULTS["partition-seed"]))
    return load_client_data(partition_id, data_dir, seed)


app = make_client_app(
    _load,
    defaults=TrainDefaults(
        local_steps=DEFAULTS["local-steps"],
        batch_size=DEFAULTS["batch-size"],
        local_lr=DEFAULTS["local-lr"],
    ),
)
