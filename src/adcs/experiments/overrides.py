"""``--set KEY=VALUE``: edit any key of a configuration before it is validated.

An override is a dotted key and a TOML value: ``data.partition.alpha=0.1``,
``sim.availability={kind="bernoulli", p=0.5}``, ``seeds=[0, 1, 2]``. A bare word is a string
(``data.dataset=digits``), and so is a path (``data.path=/data/x.npz``, ``../x.npz``). Inside
``methods`` the second part names the methods an override applies to, by position
(``methods.0.theta=0.9``) or by scheduler name (``methods.adcs.theta=0.9``: every method of that
name; quote a name holding dots, ``methods."mypkg.sel:Mine".k=1``).

The configuration is written back to its document (`config_to_dict`),
edited, and validated again by `config_from_dict`, so an override
meets exactly the checks of the file it edits, and a bad key or value is refused naming its key.
The result is an ordinary configuration: the manifest records it, and ``--resume`` compares it.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adcs.data import DATASETS
from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    config_to_dict,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "Assignment",
    "apply_assignments",
    "parse_assignment",
    "parse_key",
    "parse_value",
    "parse_values",
    "split_assignment",
    "split_items",
    "target_paths",
    "with_sets",
]

Assignment = tuple[tuple[str, ...], Any]
"""A parsed override: the dotted key's parts and the value."""

_BARE_WORD = re.compile(r"(?:[A-Za-z_]|/|~/|\.{1,2}/)[A-Za-z0-9_.:/+-]*")
"""A string without quotes: a word, or a path (``/data/x.npz``, ``~/x``, ``./x``, ``../x``)."""


def parse_assignment(text: str) -> Assignment:
    """``"data.partition.alpha=0.1"`` → ``(("data", "partition", "alpha"), 0.1)``.

    Raises
    ------
    ConfigError
        Without ``=``, with an empty or malformed key, or a value that is neither TOML nor a bare
        word.
    """
    key, sep, raw = split_assignment(text)
    parts = parse_key(key) if sep and key else None
    if parts is None:
        raise ConfigError(
            f"--set {text!r}: expected KEY=VALUE with a dotted key, e.g. data.partition.alpha=0.1"
        )
    if not raw:
        raise ConfigError(f"--set {key}: the value is missing (KEY=VALUE)")
    return parts, parse_value(raw, f"--set {key}")


def split_assignment(text: str) -> tuple[str, str, str]:
    """``KEY=VALUE`` at the first ``=`` outside a quoted part of the key."""
    quote = ""
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "=":
            return text[:i].strip(), "=", text[i + 1 :].strip()
    return text.strip(), "", ""


def parse_key(key: str) -> tuple[str, ...] | None:
    """A dotted key's parts as TOML reads them (``methods."pkg.mod:Name".m`` quotes a part that
    holds dots), or None when it is no TOML key."""
    try:
        node: Any = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError:
        return None
    parts = []
    while isinstance(node, dict) and len(node) == 1:
        ((name, node),) = node.items()
        parts.append(name)
    return tuple(parts) if parts and node == 0 and all(parts) else None


def parse_value(raw: str, where: str) -> Any:
    """A TOML value, or a bare word as a string; ``where`` names it in the error."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        if not _BARE_WORD.fullmatch(raw):
            raise ConfigError(
                f"{where}: {raw!r} is not a TOML value (quote a string with spaces: '\"...\"')"
            ) from None
        return raw


def _top_level_parts(raw: str) -> list[str]:
    """``raw`` split at its commas outside quotes, brackets and braces."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(raw):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    return [*parts, raw[start:]]


def split_items(raw: str, where: str, noun: str, instead: str) -> list[str]:
    """A comma-separated list's items, stripped; an empty item (``4,,6``, a comma at an end) or
    an empty list is refused: it would be dropped silently.

    ``where`` names the option in the error (``--sweep m``), ``noun`` what an item is
    (``workload``), ``instead`` what to do in place of an empty list.

    Raises
    ------
    ConfigError
    """
    items = [part.strip() for part in _top_level_parts(raw)]
    if not any(items):
        raise ConfigError(f"{where} {raw!r} names no {noun}; {instead}")
    empty = [i + 1 for i, item in enumerate(items) if not item]
    if empty:
        raise ConfigError(
            f"{where} {raw!r}: item {empty[0]} of {len(items)} is empty (two commas, or one at "
            "an end); give a value there or remove the comma"
        )
    return items


def parse_values(raw: str, where: str) -> list[Any]:
    """``V1,V2,…``: TOML values (a comma inside a quoted string or a table is kept), or, when
    they are not all TOML, each part a value or a bare word. An empty value is refused."""
    items = split_items(raw, where, "value", "give at least one")
    try:
        values: list[Any] = tomllib.loads(f"values = [{raw}]")["values"]
    except tomllib.TOMLDecodeError:
        return [parse_value(v, where) for v in items]
    return values


def _set_in(node: Any, parts: tuple[str, ...], value: Any, done: tuple[str, ...]) -> None:
    """Put ``value`` at ``parts`` below ``node`` (tables are created as needed)."""
    head, rest = parts[0], parts[1:]
    where = ".".join((*done, head))
    if isinstance(node, list):  # the methods: by position or by scheduler name
        if head.isdigit():
            index = int(head)
            if index >= len(node):
                raise ConfigError(f"--set {where}: there are {len(node)} methods (0-based)")
            targets = [node[index]]
        else:
            targets = [t for t in node if isinstance(t, dict) and t.get("name") == head]
            if not targets:
                names = sorted({str(t.get("name")) for t in node if isinstance(t, dict)})
                raise ConfigError(f"--set {where}: no method named {head!r} (methods: {names})")
        if not rest:
            raise ConfigError(f"--set {where}: name a parameter of the method, e.g. {where}.m")
        for target in targets:
            _set_in(target, rest, copy.deepcopy(value), (*done, head))
        return
    if not isinstance(node, dict):
        raise ConfigError(f"--set {where}: {'.'.join(done)} is a value, not a table")
    if not rest:
        node[head] = value
        return
    child = node.setdefault(head, {})
    _set_in(child, rest, value, (*done, head))


def _canonical(doc: Mapping[str, Any], parts: tuple[str, ...], value: Any) -> Assignment:
    """A key of the flat ``[data]`` form as the document writes it (``[data.partition]``).

    ``data.dominance`` is ``data.partition.dominance`` (a data set's own options, such as
    synthetic's ``alpha``, stay in ``[data]``), ``data.partition_seed`` is
    ``data.partition.seed``, and ``data.partition = "dirichlet"`` starts a new partition table.
    """
    data = doc.get("data")
    if parts[0] != "data" or len(parts) != 2 or not isinstance(data, Mapping):
        return parts, value
    key = parts[1]
    if key == "partition" and isinstance(value, str):
        return parts, {"kind": value}
    entry = DATASETS.get(str(data.get("dataset")))
    own = set(entry.keys) if entry is not None else set()
    if key in own or key in ("dataset", "partition", "path"):
        return parts, value
    if key in ("partition_seed", "partition_per_seed"):
        key = "seed" if key == "partition_seed" else "resample_per_seed"
    return ("data", "partition", key), value


def target_paths(
    doc: Mapping[str, Any], parts: tuple[str, ...], value: Any
) -> list[tuple[str, ...]]:
    """The keys an assignment sets, as the document writes them, a method by its position
    (``methods.adcs.theta`` on ``[adcs, uniform, adcs]`` → ``methods.0.theta``,
    ``methods.2.theta``): two assignments touch the same value when a key of one starts one of
    the other's."""
    parts = _canonical(doc, parts, value)[0]
    methods = doc.get("methods")
    if parts[0] != "methods" or len(parts) < 2 or not isinstance(methods, list):
        return [parts]
    head, rest = parts[1], parts[2:]
    found = [
        str(i) for i, t in enumerate(methods) if isinstance(t, Mapping) and t.get("name") == head
    ]
    return [("methods", i, *rest) for i in ([head] if head.isdigit() else found)]


def apply_assignments(doc: dict[str, Any], assignments: Sequence[Assignment]) -> dict[str, Any]:
    """A copy of the configuration document ``doc`` with the assignments made, in order.

    Keys of the flat ``[data]`` form are accepted too (`_canonical`).
    """
    out = copy.deepcopy(doc)
    for parts, value in assignments:
        _set_in(out, *_canonical(out, parts, value), ())
    return out


def with_sets(
    config: ExperimentConfig, sets: Sequence[str], *, base_dir: Path | None = None
) -> ExperimentConfig:
    """``config`` with the ``KEY=VALUE`` overrides applied and validated like the file.

    Parameters
    ----------
    config : ExperimentConfig
    sets : sequence of str
        The ``--set`` arguments, applied in order (a later one wins).
    base_dir : Path, optional
        Folder a relative path in an override is resolved against (default: the working folder).

    Raises
    ------
    ConfigError
        Naming the override's key and what is wrong with it.
    """
    if not sets:
        return config
    assignments = [parse_assignment(s) for s in sets]
    doc = apply_assignments(config_to_dict(config), assignments)
    keys = ", ".join(".".join(parts) for parts, _ in assignments)
    return config_from_dict(
        doc,
        source=f"{config.source} (--set {keys})",
        base_dir=Path.cwd() if base_dir is None else base_dir,
    )
