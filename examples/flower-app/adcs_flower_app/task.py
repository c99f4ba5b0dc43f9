"""What the ServerApp and ClientApp share: the run configuration, and each node's data.

The run configuration (``[tool.flwr.app.config]`` in pyproject.toml, overridden with ``flwr run
--run-config``) sets the federation (``num-partitions`` = N, the partition scheme), the scheduler
and the timeouts. Each SuperNode's node configuration (``flower-supernode --node-config``) says
which client it is:

==================  ========================================================================
node config key     meaning
==================  ========================================================================
``partition-id``    the client index this node serves, in 0..N−1 (required)
``num-partitions``  N, checked against the run's (optional)
``data-dir``        where this node finds Fashion-MNIST (optional; else the run's ``data-dir``,
                    else adcs's lookup: ``$ADCS_DATA_DIR``, the user cache, …)
``cache-dir``       where this node keeps its partition (optional; else the user cache)
``reply-delay-s``   seconds this node waits before answering a ``train`` request: a straggler,
                    to watch the reply timeout and dropouts at work (optional; default 0)
==================  ========================================================================

Flower starts a new ClientApp process for every message, so a node's data is kept on disk: the
first message a node receives reads Fashion-MNIST, draws the run's partition and stores only this
node's share (uint8 pixels, a few MB) in its cache folder; every later message reads that file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs import defaults
from adcs.flower import LocalData

logger = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "num-server-rounds": 200,
    "num-partitions": 30,
    "partition": "paper_groups",
    "clients-per-group": 3,
    "dominance": 1.0,
    "dirichlet-alpha": 0.5,
    "train-per-client": 0,
    "test-per-client": 0,
    "partition-seed": 0,
    "data-dir": "",
    "data-download": True,
    "scheduler": "adcs",
    "scheduler-params": "theta = 0.8, refresh_every = 20",
    "m": 18,
    "local-steps": defaults.LOCAL_STEPS,  # the simulator's (adcs/defaults.py)
    "batch-size": defaults.BATCH_SIZE,
    "local-lr": defaults.LOCAL_LR,
    "server-lr": defaults.SERVER_LR,
    "weighting": "uniform",
    "seed": 0,
    "evaluate-every": 20,
    "connect-timeout-s": 120.0,
    "wait-for-all-s": 30.0,
    "reply-timeout-s": 600.0,
    "max-in-flight": 0,
    "save-to": "",
}
"""The run configuration of pyproject.toml's [tool.flwr.app.config] (kept equal by a test)."""

NODE_KEYS = frozenset({"partition-id", "num-partitions", "data-dir", "cache-dir", "reply-delay-s"})
_CACHE_FORMAT = 1


def run_config(given: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults overridden by the run's configuration; unknown keys are an error."""
    unknown = set(given) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown run-config keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    config = {**DEFAULTS, **given}
    for key, default in DEFAULTS.items():
        value = config[key]
        ok = isinstance(value, type(default)) or (
            isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool)
        )
        if not ok or (isinstance(value, bool) and not isinstance(default, bool)):
            raise ValueError(
                f"run-config {key!r} must be a {type(default).__name__}, got {value!r}"
            )
    return config


def data_config(config: Mapping[str, Any]) -> Any:
    """The partition the run configuration describes, as adcs's validated ``DataConfig``."""
    from adcs.experiments.config import DataConfig

    n, scheme = int(config["num-partitions"]), str(config["partition"])
    sizes = {
        key: value
        for key, value in (
            ("train_per_client", int(config["train-per-client"])),
            ("test_per_client", int(config["test-per-client"])),
        )
        if value  # 0: as many as the data allow
    }
    table: dict[str, Any] = {
        "partition": scheme, "partition_seed": int(config["partition-seed"]), **sizes,
    }  # fmt: skip
    if scheme == "paper_groups":
        per_group = int(config["clients-per-group"])
        if per_group < 1 or n % per_group:
            raise ValueError(
                f"num-partitions={n} must be a multiple of clients-per-group={per_group} "
                "for partition = 'paper_groups'"
            )
        table.update(
            n_groups=n // per_group,
            clients_per_group=per_group,
            dominance=float(config["dominance"]),
        )
    else:
        table["n_clients"] = n
        if scheme == "dirichlet":
            table["alpha"] = float(config["dirichlet-alpha"])
    return DataConfig.from_dict(table)


@dataclass(frozen=True)
class NodeData:
    """Where one node's share comes from: the run's partition and the node's own settings."""

    partition_id: int
    config: Mapping[str, Any]
    data_dir: str
    cache_dir: Path

    @classmethod
    def of(cls, run: Mapping[str, Any], node: Mapping[str, Any]) -> NodeData:
        """From the run config (already through :func:`run_config`) and the node config."""
        pid = node.get("partition-id")
        n = int(run["num-partitions"])
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < n:
            raise ValueError(
                f"node config partition-id must be an integer in [0, {n}), got {pid!r}"
            )
        partitions = node.get("num-partitions", n)
        if partitions != n:
            raise ValueError(
                f"this node is configured for num-partitions={partitions}, the run has {n}"
            )
        data_dir = str(node.get("data-dir") or run["data-dir"])
        cache = node.get("cache-dir")
        cache_dir = Path(str(cache)).expanduser() if cache else _user_cache()
        return cls(pid, run, data_dir, cache_dir)

    def cache_file(self) -> Path:
        """This node's cache file; its name changes with anything that changes the share."""
        from adcs.data import find_fashion_mnist

        folder = find_fashion_mnist(self.data_dir or None)
        keys = ("num-partitions", "partition", "clients-per-group", "dominance",
                "dirichlet-alpha", "train-per-client", "test-per-client", "partition-seed")  # fmt: skip
        identity = {
            "format": _CACHE_FORMAT,
            "data": str(folder) if folder is not None else f"lookup of {self.data_dir!r}",
            "partition": {k: self.config[k] for k in keys},
        }
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
        n = self.config["num-partitions"]
        return self.cache_dir / f"client-{self.partition_id}-of-{n}-{digest}.npz"

    def load(self) -> LocalData:
        """This node's share: from its cache file, made on the first call."""
        path = self.cache_file()
        if not path.is_file():
            _store(path, self._draw())
        with np.load(path) as stored:
            arrays = {k: stored[k] for k in ("x_train", "y_train", "x_test", "y_test")}
        return _client_data(arrays)

    def _draw(self) -> dict[str, Any]:
        """Read the data set, draw the run's partition, keep this node's share."""
        from adcs.experiments.run.runner import make_partition

        dataset = _dataset(self.data_dir, bool(self.config["data-download"]))
        if dataset.is_subset:
            logger.warning("client %d uses %s", self.partition_id, dataset.source)
        data = data_config(self.config)
        partition = make_partition(dataset, data, np.random.default_rng(data.partition_seed))
        train = partition.train_indices[self.partition_id]
        test = partition.test_indices[self.partition_id]
        logger.info(
            "client %d: %d train / %d test examples of %s, cached",
            self.partition_id, train.size, test.size, dataset.source,
        )  # fmt: skip
        return {
            "x_train": dataset.train_images[train],
            "y_train": dataset.train_labels[train],
            "x_test": dataset.test_images[test],
            "y_test": dataset.test_labels[test],
        }


def load_client_data(run: Mapping[str, Any], node: Mapping[str, Any]) -> LocalData:
    """The share of the node configured by ``node`` in the run configured by ``run``."""
    return NodeData.of(run_config(run), node).load()


@functools.lru_cache(maxsize=1)
def _dataset(data_dir: str, download: bool) -> Any:
    """Fashion-MNIST, kept for a process that serves several nodes (the Simulation Runtime's
    workers, in-process runs); the Deployment Runtime's ClientApps each read it at most once."""
    from adcs.data import load_fashion_mnist

    return load_fashion_mnist(data_dir or None, download=download)


def _client_data(arrays: Mapping[str, Any]) -> LocalData:
    from adcs.sim.data import to_unit_float

    # the simulator's pixel scaling, so both compute on identical float32 inputs
    return LocalData(
        x_train=to_unit_float(arrays["x_train"]),
        y_train=arrays["y_train"].astype(np.intp),
        x_test=to_unit_float(arrays["x_test"]),
        y_test=arrays["y_test"].astype(np.intp),
    )


def _store(path: Path, arrays: Mapping[str, Any]) -> None:
    """Write atomically: concurrent ClientApps of one node never read a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(out, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _user_cache() -> Path:
    from adcs.data import cache_dir

    return cache_dir().parent / "flower-clients"
