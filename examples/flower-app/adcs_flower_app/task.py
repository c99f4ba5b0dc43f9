"""What the ServerApp and ClientApp share: the run configuration's defaults and the client data."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from adcs.data import load_fashion_mnist, paper_groups
from adcs.flower import ClientData
from adcs.schedulers import ADCS, SCHEDULERS, Scheduler

logger = logging.getLogger(__name__)

N_CLIENTS = 30
"""The paper's 10 groups × 3 clients."""

DEFAULTS: dict[str, Any] = {
    "num-server-rounds": 200,
    "scheduler": "adcs",
    "m": 18,
    "theta": 0.8,
    "refresh-every": 20,
    "local-steps": 1,
    "batch-size": 16,
    "local-lr": 0.001,
    "server-lr": 1.0,
    "seed": 0,
    "partition-seed": 0,
    "data-dir": "",
    "evaluate-every": 20,
}
"""The run configuration of pyproject.toml's [tool.flwr.app.config] (kept equal by a test)."""


def run_config(given: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults overridden by the run's configuration; unknown keys are an error."""
    unknown = set(given) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown run-config keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    return {**DEFAULTS, **given}


def make_scheduler(config: Mapping[str, Any]) -> Scheduler:
    """The scheduler named by ``config["scheduler"]`` with ``m`` (and θ, R for ADCS)."""
    name = str(config["scheduler"])
    if name not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {sorted(SCHEDULERS)}, got {name!r}")
    m = int(config["m"])
    if name == "adcs":
        return ADCS(m=m, theta=float(config["theta"]), refresh_every=int(config["refresh-every"]))
    scheduler: Scheduler = SCHEDULERS[name](m=m)
    return scheduler


@functools.lru_cache(maxsize=2)
def _partitioned(data_dir: str, partition_seed: int) -> tuple[Any, Any]:
    """Fashion-MNIST and the paper's partition, once per worker process."""
    dataset = load_fashion_mnist(data_dir or None)
    if dataset.is_subset:
        logger.warning(
            "using the small Fashion-MNIST subset shipped with adcs (%s)", dataset.source
        )
    rng = np.random.default_rng(partition_seed)
    partition = paper_groups(dataset.train_labels, dataset.test_labels, rng)
    return dataset, partition


def load_client_data(partition_id: int, data_dir: str = "", partition_seed: int = 0) -> ClientData:
    """Client ``partition_id``'s share of the paper's partition, pixels scaled to [0, 1]."""
    dataset, partition = _partitioned(data_dir, partition_seed)
    if not 0 <= partition_id < len(partition.train_indices):
        raise ValueError(f"partition-id {partition_id} outside [0, {len(partition.train_indices)})")
    train = partition.train_indices[partition_id]
    test = partition.test_indices[partition_id]
    return ClientData(
        x_train=dataset.train_images[train].astype(np.float32) / 255.0,
        y_train=dataset.train_labels[train].astype(np.intp),
        x_test=dataset.test_images[test].astype(np.float32) / 255.0,
        y_test=dataset.test_labels[test].astype(np.intp),
    )
