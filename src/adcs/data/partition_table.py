"""The partitions by name: `PartitionKind` rows of `PARTITIONS`, and
`partition_data`, which checks a configuration's parameters and splits the data.

The partitions themselves are in `adcs.data.partition`; a user's partition is a
`PartitionKind` given by import path or entry point (group ``adcs.partitions``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adcs.data.partition import (
    LabelledSplits,
    Partition,
    PartitionKind,
    classes_per_client,
    dirichlet,
    dirichlet_per_class,
    iid,
    natural,
    paper_groups,
    shards,
)
from adcs.registry import PluginError, Table, raised_in

__all__ = ["PARTITIONS", "partition_data", "partition_kind"]


def _labels_of(data: LabelledSplits) -> tuple[Any, Any]:
    return data.train_labels, data.test_labels


def _natural(data: Any, rng: np.random.Generator, n_clients: int | None = None) -> Partition:
    if getattr(data, "train_writers", None) is None:
        raise ValueError("the natural partition needs a data set with its own clients (femnist)")
    return natural(
        data.train_writers, data.test_writers, rng, data.train_labels, data.test_labels, n_clients
    )


_SIZES = frozenset({"train_per_client", "test_per_client"})
PARTITIONS: Table[PartitionKind] = Table("partition", "adcs.partitions", {
    "paper_groups": PartitionKind(
        lambda d, rng, **p: paper_groups(*_labels_of(d), rng, **p),
        frozenset({"n_groups", "clients_per_group", "dominance"}) | _SIZES,
        defaults={"n_groups": 10, "clients_per_group": 3, "dominance": 1.0},
    ),
    "iid": PartitionKind(
        lambda d, rng, **p: iid(*_labels_of(d), rng, **p),
        frozenset({"n_clients", "size_sigma"}) | _SIZES, frozenset({"n_clients"}),
    ),
    "dirichlet": PartitionKind(
        lambda d, rng, **p: dirichlet(*_labels_of(d), rng, **p),
        frozenset({"n_clients", "alpha", "size_sigma"}) | _SIZES, frozenset({"n_clients", "alpha"}),
    ),
    "dirichlet_per_class": PartitionKind(
        lambda d, rng, **p: dirichlet_per_class(*_labels_of(d), rng, **p),
        frozenset({"n_clients", "alpha", "balance", "min_size"}), frozenset({"n_clients", "alpha"}),
    ),
    "shards": PartitionKind(
        lambda d, rng, **p: shards(*_labels_of(d), rng, **p),
        frozenset({"n_clients", "shards_per_client", "ordered"}), frozenset({"n_clients"}),
    ),
    "classes_per_client": PartitionKind(
        lambda d, rng, **p: classes_per_client(*_labels_of(d), rng, **p),
        frozenset({"n_clients", "classes"}), frozenset({"n_clients"}),
    ),
    "natural": PartitionKind(_natural, frozenset({"n_clients"})),
}, row_type=PartitionKind)  # fmt: skip
"""The one name → partition table used by configurations."""


def partition_kind(kind: str) -> PartitionKind:
    """The partition named ``kind``: a row of `PARTITIONS`, or ``"flwr:NAME"`` for a
    partitioner of Flower Datasets (`adcs.data.flwr_partitions`).

    Raises
    ------
    ValueError
        Naming the known partitions.
    """
    if isinstance(kind, str) and kind.startswith("flwr:"):
        from adcs.data.flwr_partitions import flwr_partition_kind

        return flwr_partition_kind(kind)
    if not PARTITIONS.recognises(kind):
        raise ValueError(
            f"partition must be one of {sorted(PARTITIONS)}, 'flwr:NAME' (a partitioner of "
            f"Flower Datasets) or an import path 'package.module:NAME', got {kind!r}"
        )
    return PARTITIONS[kind]


def partition_data(
    kind: str, data: LabelledSplits, rng: np.random.Generator, **params: Any
) -> Partition:
    """Split ``data`` with the partition ``kind`` (`partition_kind`).

    Raises
    ------
    ValueError
        Unknown kind or parameter, a missing parameter, a split the data cannot give, or a split
        that returns no `Partition`.
    PluginError
        The split raised anything else (naming it).
    """
    entry = partition_kind(kind)
    unknown = sorted(set(params) - entry.keys)
    if unknown:
        raise ValueError(
            f"partition {kind!r} takes no parameter(s) {unknown}; allowed {sorted(entry.keys)}"
        )
    missing = sorted(entry.required - set(params))
    if missing:
        raise ValueError(f"partition {kind!r} needs the parameter(s) {missing}")
    try:
        partition = entry.split(data, rng, **params)
    except (ValueError, PluginError, MemoryError):
        raise
    except Exception as exc:  # the split's own failure: named
        raise raised_in("partition", entry.split, f"its split (partition = {kind!r})", exc) from exc
    if not isinstance(partition, Partition):  # a user's split (by import path) that broke it
        raise ValueError(f"the split returned {type(partition).__name__}, not a Partition")
    return partition
