"""The partitions by name: :class:`PartitionKind` rows of :data:`PARTITIONS`, and
:func:`partition_data`, which checks a configuration's parameters and splits the data.

The partitions themselves are in :mod:`adcs.data.partition`; a user's partition is a
:class:`PartitionKind` given by import path or entry point (group ``adcs.partitions``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adcs._validate import (
    check_client_count,
    check_int,
    check_non_negative,
    check_positive,
    check_unit_interval,
)
from adcs.data.partition import (
    LabelledSplits,
    Partition,
    classes_per_client,
    dirichlet,
    dirichlet_per_class,
    iid,
    natural,
    paper_groups,
    shards,
)
from adcs.registry import PluginError, Table, raised_in

__all__ = ["PARAMETER_CHECKS", "PARTITIONS", "PartitionKind", "partition_data", "partition_kind"]


PARAMETER_CHECKS: Mapping[str, Callable[[str, Any], object]] = {
    "n_groups": check_int, "clients_per_group": check_int, "dominance": check_unit_interval,
    "n_clients": check_client_count, "alpha": check_positive, "size_sigma": check_non_negative,
    "train_per_client": check_int, "test_per_client": check_int,
    "shards_per_client": check_int, "classes": check_int,
}  # fmt: skip
"""Types and ranges of the built-in partitions' parameters (the data decide the rest)."""


@dataclass(frozen=True)
class PartitionKind:
    """One row of :data:`PARTITIONS`.

    Attributes
    ----------
    split : callable
        ``split(data, rng, **params)`` → :class:`Partition`, with ``data`` the labelled splits.
    keys : frozenset of str
        Its parameters (the ``[data.partition]`` keys besides ``kind``).
    required : frozenset of str
        Parameters that must be given.
    """

    split: Callable[..., Partition]
    keys: frozenset[str]
    required: frozenset[str] = frozenset()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The values of parameters not given (the partition function's defaults)."""
    checks: Mapping[str, Callable[[str, Any], object]] = field(
        default_factory=lambda: PARAMETER_CHECKS
    )
    """``check(name, value)`` of a parameter (``ValueError`` naming it), run when a configuration
    is read; a parameter without one is checked by the split itself."""

    def check(self, params: Mapping[str, Any], prefix: str = "") -> None:
        """Check the parameters' values (``ValueError`` naming ``prefix + key``)."""
        for key, value in params.items():
            if key in self.checks:
                self.checks[key](prefix + key, value)

    def value(self, params: Mapping[str, Any], key: str) -> Any:
        """The parameter ``key`` as the partition will use it (None: unset, the data decide)."""
        return params.get(key, self.defaults.get(key))

    def n_clients(self, params: Mapping[str, Any]) -> int | None:
        """N for these parameters, when they fix it (None: the data decide, e.g. ``natural``)."""
        if "n_groups" in self.keys:
            return int(self.value(params, "n_groups")) * int(
                self.value(params, "clients_per_group")
            )
        value = params.get("n_clients")
        return None if value is None else int(value)


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
        frozenset({"n_clients", "shards_per_client"}), frozenset({"n_clients"}),
    ),
    "classes_per_client": PartitionKind(
        lambda d, rng, **p: classes_per_client(*_labels_of(d), rng, **p),
        frozenset({"n_clients", "classes"}), frozenset({"n_clients"}),
    ),
    "natural": PartitionKind(_natural, frozenset({"n_clients"})),
}, row_type=PartitionKind)  # fmt: skip
"""The one name → partition table used by configurations."""


def partition_kind(kind: str) -> PartitionKind:
    """The partition named ``kind``: a row of :data:`PARTITIONS`, or ``"flwr:NAME"`` for a
    partitioner of Flower Datasets (:mod:`adcs.data.huggingface`).

    Raises
    ------
    ValueError
        Naming the known partitions.
    """
    if isinstance(kind, str) and kind.startswith("flwr:"):
        from adcs.data.huggingface import flwr_partition_kind

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
    """Split ``data`` with the partition ``kind`` (:func:`partition_kind`).

    Raises
    ------
    ValueError
        Unknown kind or parameter, a missing parameter, a split the data cannot give, or a split
        that returns no :class:`Partition`.
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
