"""Flower Datasets' partitioners as adcs partitions (docs/design.md §7).

``[data.partition] kind = "flwr:DirichletPartitioner"`` (any partitioner of
``flwr_datasets.partitioner``) splits the training split with Flower Datasets' own code, with its
arguments as the table's keys (``alpha``, ``partition_by``, …; ``n_clients`` is its
``num_partitions``); each client's test set is then drawn from the test split with the class
proportions of its own training partition, as adcs's own label-skew partitions do.

It needs the ``huggingface`` extra (``flwr-datasets``, which brings ``datasets``), imported here only.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import numpy as np

from adcs.data.counts import _draw, _split_classes
from adcs.data.partition import Partition, PartitionKind

__all__ = ["FLWR_PREFIX", "flwr_partition_kind"]

FLWR_PREFIX = "flwr:"
"""A partition kind ``"flwr:NAME"`` names ``flwr_datasets.partitioner.NAME``."""

_ROW = "__adcs_row__"


@cache
def _partitioner_class(name: str) -> type:
    try:
        from flwr_datasets import partitioner
    except ImportError:
        raise ImportError(
            f"partition 'flwr:{name}' needs Flower Datasets: pip install \"adcs[huggingface]\""
        ) from None
    cls = getattr(partitioner, name, None)
    if not isinstance(cls, type) or not issubclass(cls, partitioner.Partitioner):
        known = sorted(
            n for n in dir(partitioner) if n.endswith("Partitioner") and n != "Partitioner"
        )
        raise ValueError(f"flwr_datasets.partitioner has no partitioner {name!r}; known: {known}")
    return cls


def flwr_partition_kind(kind: str) -> PartitionKind:
    """The `adcs.data.partition.PartitionKind` of ``"flwr:NAME"``.

    Its keys are the partitioner's constructor arguments, with ``n_clients`` for
    ``num_partitions`` (required); ``partition_by`` defaults to the label column; ``seed``, when
    the partitioner takes one and it is not given, comes from the partition's random stream.

    Raises
    ------
    ValueError
        No such partitioner (the known ones are named), or Flower Datasets is not installed.
    """
    name = kind.removeprefix(FLWR_PREFIX)
    try:
        cls = _partitioner_class(name)
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    arguments = set(inspect.signature(cls).parameters) - {"self", "num_partitions"}
    keys = frozenset(arguments | {"n_clients"})

    def split(data: Any, rng: np.random.Generator, **params: Any) -> Partition:
        return _flwr_split(cls, arguments, data, rng, **params)

    return PartitionKind(split, keys, frozenset({"n_clients"}))


def _flwr_split(
    cls: type, arguments: set[str], data: Any, rng: np.random.Generator, **params: Any
) -> Partition:
    import datasets  # flwr_datasets, found by _partitioner_class, depends on it

    n_clients = int(params.pop("n_clients"))
    kwargs = {"num_partitions": n_clients, **params}
    if "partition_by" in arguments:
        kwargs.setdefault("partition_by", "label")
    if "seed" in arguments and "seed" not in kwargs:
        kwargs["seed"] = int(rng.integers(2**31 - 1))
    train = np.asarray(data.train_labels)
    test = np.asarray(data.test_labels)
    table = datasets.Dataset.from_dict({"label": train, _ROW: np.arange(train.size)})
    try:
        partitioner = cls(**kwargs)
        partitioner.dataset = table
        indices = tuple(
            np.sort(np.asarray(partitioner.load_partition(i)[_ROW], dtype=np.intp))
            for i in range(n_clients)
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"flwr:{cls.__name__}({kwargs}): {exc}") from None
    n_classes = int(max(train.max(), test.max())) + 1
    counts = np.stack([np.bincount(train[ix], minlength=n_classes) for ix in indices])
    empty = np.flatnonzero(counts.sum(axis=1) == 0)
    if empty.size:
        raise ValueError(f"flwr:{cls.__name__} left client(s) {empty[:5].tolist()} without data")
    test_counts = _split_classes(np.bincount(test, minlength=n_classes), counts, "test")
    return Partition(
        train_indices=indices,
        test_indices=_draw(test, test_counts, rng),
        groups=np.argmax(counts, axis=1),
        n_groups=n_classes,
    )
