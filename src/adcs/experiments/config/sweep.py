"""Sweeps as configuration: the swept keys and their values (``--sweep KEY=V1,V2,…``, a file's
``[sweep]`` table, `adcs.run`'s ``sweep``), and a point's values as edits of the document
(`adcs.experiments.config.overrides`). `adcs.experiments.run.configure` makes each point's
configuration; `adcs.leaderboard.sweep` runs the points and writes the summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcs.experiments.config import ConfigError, ExperimentConfig, config_from_file, read_toml
from adcs.experiments.config.overrides import (
    Edit,
    parse_key,
    parse_value,
    parse_values,
    split_assignment,
)

__all__ = [
    "SweepAxis",
    "load_with_sweep",
    "parse_sweep",
    "point_edits",
    "sweep_axes",
    "value_label",
]


@dataclass(frozen=True)
class SweepAxis:
    """One swept key and its values, in order.

    Attributes
    ----------
    key : tuple of str
        The dotted key's parts (``("data", "partition", "alpha")``).
    values : tuple
    """

    key: tuple[str, ...]
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        name = ".".join(self.key)
        if not self.key or not all(self.key):
            raise ConfigError(f"sweep key {name!r} must be a dotted key, e.g. data.partition.alpha")
        if not self.values:
            raise ConfigError(f"sweep {name}: give at least one value")
        if len({repr(v) for v in self.values}) != len(self.values):
            raise ConfigError(f"sweep {name} repeats a value: {list(self.values)}")

    @property
    def name(self) -> str:
        return ".".join(self.key)


def parse_sweep(text: str) -> SweepAxis:
    """``"data.partition.alpha=0.1,0.3,1"`` (or ``KEY=[…]``, a TOML array) → `SweepAxis`."""
    key, sep, raw = split_assignment(text)
    parts = parse_key(key) if sep and raw else None
    if parts is None:
        raise ConfigError(f"--sweep {text!r}: expected KEY=V1,V2,… (or KEY=[V1, V2])")
    where = f"--sweep {key}"
    values = parse_value(raw, where) if raw.startswith("[") else parse_values(raw, where)
    return SweepAxis(parts, tuple(values))


def sweep_axes(table: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[SweepAxis]:
    """A ``[sweep]`` table as axes, in order: ``"data.partition.alpha" = [0.1, 0.3]``, or the
    same key written as nested tables (``data.partition.alpha = [...]`` unquoted)."""
    axes = []
    for key, values in table.items():
        parts = (*prefix, *key.split("."))
        if isinstance(values, Mapping):
            axes.extend(sweep_axes(values, parts))
        elif isinstance(values, list):
            axes.append(SweepAxis(parts, tuple(values)))
        else:
            raise ConfigError(f"sweep.{'.'.join(parts)} must be an array of values, got {values!r}")
    return axes


def load_with_sweep(
    path: str | Path, *, data_path: str | None = None
) -> tuple[ExperimentConfig, list[SweepAxis]]:
    """A configuration file and the axes of its ``[sweep]`` table (none without one);
    ``data_path`` as for `load_config`."""
    path = Path(path)
    raw = read_toml(path)
    table = raw.pop("sweep", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: sweep must be a table of arrays ([sweep])")
    try:
        axes = sweep_axes(table)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return config_from_file(raw, path, data_path=data_path), axes


def point_edits(
    axes: Sequence[SweepAxis], values: Sequence[Any], *, valued: bool = False
) -> list[Edit]:
    """The edits of one sweep point: each axis's key set to its value there, labelled
    ``sweep KEY`` (``valued``: ``sweep KEY=VALUE``)."""
    return [
        Edit(f"sweep {a.name}" + (f"={v!r}" if valued else ""), a.key, v, "sweep")
        for a, v in zip(axes, values, strict=True)
    ]


def value_label(value: Any) -> str:
    """A swept value as a point's name and ``sweep.csv`` write it (``0.1``, ``kind=iid``,
    ``true``)."""
    if isinstance(value, Mapping):
        return ",".join(f"{k}={value_label(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "+".join(value_label(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)
