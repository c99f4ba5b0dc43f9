"""The ``[data]`` table: which data set, and how it is split over clients (docs/design.md §3, §7).

A data set is a row of `adcs.data.DATASETS` and a partition a row of
`adcs.data.PARTITIONS`: each row names its keys and checks their values, so the
configuration layer holds no table of its own (docs/design.md §8, "A new dataset"). Two forms::

    [data]
    dataset = "fashion-mnist"    # digits, arrays, cifar10, femnist, synthetic; options beside it
    path = "data/fashion-mnist"  # for the file-based data sets

    [data.partition]
    kind = "dirichlet"           # paper_groups, iid, dirichlet, shards, classes_per_client, natural
    n_clients = 100
    alpha = 0.3
    seed = 0                     # the partition's draw
    resample_per_seed = false    # true: a new partition (or synthetic population) per seed

or flat: ``partition = "paper_groups"`` with the partition's keys, ``partition_seed`` and
``partition_per_seed`` in ``[data]`` (for data sets whose options do not clash with them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adcs.data.datasets import DATASETS, DatasetEntry
from adcs.data.partition import PartitionKind
from adcs.data.partition_table import partition_kind
from adcs.experiments.config.schema import (
    ConfigError,
    check_choice_key,
    check_int_key,
    check_known_keys,
    freeze,
    value_to_toml,
)

__all__ = ["DataConfig", "resolve_path"]

_FLAT_KEYS = frozenset(
    {"dataset", "path", "partition", "partition_seed", "partition_per_seed", "resample_per_seed"}
)
"""Keys of the flat ``[data]`` form besides the dataset's options and the partition's keys."""
_TABLE_KEYS = frozenset({"kind", "seed", "resample_per_seed"})
"""Keys of a ``[data.partition]`` table besides the partition's own."""


def _partition(key: str, kind: Any) -> PartitionKind:
    """The partition ``kind`` (a built-in or ``flwr:NAME``), or a ConfigError naming ``key``."""
    if not isinstance(kind, str):
        raise ConfigError(f"{key} must be a string, got {kind!r}")
    try:
        return partition_kind(kind)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _dataset(key: str, name: Any) -> DatasetEntry:
    """The row of `adcs.data.DATASETS` named ``name``, or a ConfigError naming ``key``."""
    if not DATASETS.recognises(name):
        check_choice_key(key, name, sorted(DATASETS))
    try:
        return DATASETS.resolve(name)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _check(rows: Any, values: Mapping[str, Any], prefix: str) -> None:
    """A row's own checks of its options or parameters, as ConfigErrors naming the key."""
    try:
        rows.check(values, prefix)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class DataConfig:
    """Where the data come from and how they are split over clients (docs/design.md §3, §5, §7).

    Attributes
    ----------
    dataset : str
        A key of `adcs.data.DATASETS` (default ``fashion-mnist``, the paper's).
    path : str or None
        The data set's file or folder; ``None`` for Fashion-MNIST uses its lookup
        (`adcs.data.load_fashion_mnist`).
    options : tuple of (str, value)
        The data set's other options (``synthetic``: ``n_clients``, ``alpha``, ``beta``).
    partition : str
        A key of `adcs.data.PARTITIONS`; default ``paper_groups`` (``natural`` for a
        generated data set, whose clients come with it).
    params : tuple of (str, value)
        The partition's parameters (e.g. ``n_groups``, ``clients_per_group``, ``dominance`` of
        ``paper_groups``: the paper's setting is 10 × 3, dominance 1).
    partition_seed : int
        Seed of the partition's random draw (and of a generated population).
    resample_per_seed : bool
        ``False`` (default): one partition for every run, so the seeds vary the training only.
        ``True``: each training seed s gets its own partition, drawn from ``(s, partition_seed)``.
    """

    dataset: str = "fashion-mnist"
    path: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    partition: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    partition_seed: int = 0
    resample_per_seed: bool = False
    flat: bool = field(default=False, compare=False, repr=False)
    """Read from the flat ``[data]`` form (messages then name the keys as written there)."""

    def __post_init__(self) -> None:
        entry = _dataset("data.dataset", self.dataset)
        if self.partition is None:
            object.__setattr__(self, "partition", "natural" if entry.generated else "paper_groups")
        options = dict(self.options)
        check_known_keys("data", options, entry.keys - {"path"})
        _check(entry, options, "data.")
        missing = sorted(entry.required - set(options) - ({"path"} if self.path else set()))
        if missing:
            raise ConfigError(f"data.{missing[0]} is required for dataset = {self.dataset!r}")
        if self.path is not None and (not isinstance(self.path, str) or not self.path):
            raise ConfigError(f"data.path must be a non-empty string, got {self.path!r}")
        if self.path is not None and "path" not in entry.keys:
            raise ConfigError(f"data.path: dataset {self.dataset!r} reads no files")
        kind = _partition("data.partition", self.partition)
        if entry.generated and self.partition != "natural":
            raise ConfigError(
                f"data.partition: dataset {self.dataset!r} brings its own clients; only the "
                f"'natural' partition applies, got {self.partition!r}"
            )
        params = dict(self.params)
        where = "data" if self.flat else "data.partition"
        check_known_keys(where, params, kind.keys)
        _check(kind, params, f"{where}.")
        for key in sorted(kind.required - set(params)):
            raise ConfigError(f"{where}.{key} is required for partition = {self.partition!r}")
        if entry.generated and params:
            raise ConfigError(
                f"data.partition: the clients of {self.dataset!r} are set by its options "
                f"(data.n_clients); the natural partition takes no {sorted(params)}"
            )
        check_int_key(
            "data.partition_seed" if self.flat else "data.partition.seed", self.partition_seed, 0
        )
        if not isinstance(self.resample_per_seed, bool):
            raise ConfigError(
                f"{where}.resample_per_seed must be true or false, got {self.resample_per_seed!r}"
            )

    @classmethod
    def from_dict(cls, table: Mapping[str, Any], base_dir: Path | None = None) -> DataConfig:
        """The ``[data]`` table of a configuration (either form), validated.

        Raises
        ------
        ConfigError
            On an unknown key or an impossible value.
        """
        return _parse_data(table, base_dir)

    def value(self, key: str) -> Any:
        """A ``[data]`` setting by its key: a field, a data set option or a partition parameter
        (its default when not given; None when the data decide)."""
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        if key in dict(self.options):
            return dict(self.options)[key]
        return partition_kind(str(self.partition)).value(dict(self.params), key)

    @property
    def dataset_options(self) -> dict[str, Any]:
        """The loader's keyword arguments (``path`` included when given)."""
        out = dict(self.options)
        if self.path is not None:
            out["path"] = self.path
        return out

    @property
    def partition_params(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def total_clients(self) -> int | None:
        """N, when the configuration fixes it (None: the data decide, e.g. FEMNIST's writers)."""
        if DATASETS.resolve(self.dataset).generated:
            return int(dict(self.options)["n_clients"])
        return partition_kind(str(self.partition)).n_clients(dict(self.params))

    def to_dict(self) -> dict[str, Any]:
        """The ``[data]`` table, its partition as a ``[data.partition]`` table."""
        data: dict[str, Any] = {
            "dataset": self.dataset,
            **{k: value_to_toml(v) for k, v in self.options},
        }
        if self.path is not None:
            data["path"] = self.path
        data["partition"] = {
            "kind": self.partition,
            **{k: value_to_toml(v) for k, v in self.params},
            "seed": self.partition_seed,
            "resample_per_seed": self.resample_per_seed,
        }
        return data


def resolve_path(key: str, path: Any, kind: str | None, base_dir: Path | None) -> str:
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{key} must be a non-empty string, got {path!r}")
    resolved = Path(path).expanduser()
    if not resolved.is_absolute() and base_dir is not None:
        resolved = base_dir / resolved
    ok = {"folder": resolved.is_dir(), "file": resolved.is_file()}.get(
        kind or "", resolved.exists()
    )
    if not ok:
        what = {"folder": "a folder", "file": "a file"}.get(kind or "", "a file or folder")
        raise ConfigError(f"{key} {path!r} is not {what} (looked at {resolved})")
    return str(resolved)


def _parse_data(raw: Mapping[str, Any], base_dir: Path | None) -> DataConfig:
    dataset = raw.get("dataset", "fashion-mnist")
    entry = _dataset("data.dataset", dataset)
    option_keys = entry.keys - {"path"}
    table = raw.get("partition")
    kwargs: dict[str, Any] = {"dataset": dataset}
    if isinstance(table, Mapping):  # [data.partition]
        check_known_keys("data", raw, frozenset({"dataset", "path", "partition"}) | option_keys)
        kind = table.get("kind", "natural" if entry.generated else "paper_groups")
        check_known_keys(
            "data.partition", table, _TABLE_KEYS | _partition("data.partition.kind", kind).keys
        )
        params = {k: v for k, v in table.items() if k not in _TABLE_KEYS}
        kwargs["partition_seed"] = table.get("seed", 0)
        kwargs["resample_per_seed"] = table.get("resample_per_seed", False)
    else:  # the flat form: the partition's keys beside the data set's
        kind = table if table is not None else ("natural" if entry.generated else "paper_groups")
        found = _partition("data.partition", kind)
        # a generated data set's options make its clients: its natural partition takes no keys
        part_keys = frozenset() if entry.generated else found.keys
        clash = sorted(option_keys & part_keys)
        if clash:
            raise ConfigError(
                f"data: {clash} name both an option of dataset {dataset!r} and a key of "
                f"partition {kind!r}; put the partition in a [data.partition] table"
            )
        check_known_keys("data", raw, _FLAT_KEYS | option_keys | part_keys)
        params = {k: v for k, v in raw.items() if k in part_keys}
        kwargs["partition_seed"] = raw.get("partition_seed", 0)
        if "partition_per_seed" in raw and "resample_per_seed" in raw:
            raise ConfigError("data: give resample_per_seed or partition_per_seed, not both")
        kwargs["resample_per_seed"] = raw.get(
            "resample_per_seed", raw.get("partition_per_seed", False)
        )
        kwargs["flat"] = True
    kwargs["partition"] = kind
    kwargs["params"] = tuple(sorted((k, freeze(v)) for k, v in params.items()))
    kwargs["options"] = tuple(sorted((k, raw[k]) for k in option_keys if k in raw))
    if "path" in raw:
        if "path" not in entry.keys:
            raise ConfigError(f"data.path: dataset {dataset!r} reads no files")
        kwargs["path"] = resolve_path("data.path", raw["path"], entry.path, base_dir)
    return DataConfig(**kwargs)
