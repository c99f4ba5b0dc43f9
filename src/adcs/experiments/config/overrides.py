"""Overrides: labelled edits of a configuration's document, applied before it is validated.

Every override reaches a configuration by one path (docs/design.md §6): the configuration's
document (`ExperimentConfig.document`) is edited by a list of `Edit` s — ``--quick``, ``--set``,
``--rounds``/``--seeds``/``--data``, `adcs.run`'s keywords and ``data``, each sweep point — whose
overlaps `check_edits` refuses once, and `edited` parses the result once into the library's
objects. The command line and `adcs.run` build the same edits, so the same override stores the
same configuration from either.

``--set KEY=VALUE`` edits any key.

An override is a dotted key and a TOML value: ``data.partition.alpha=0.1``,
``sim.availability={kind="bernoulli", p=0.5}``, ``seeds=[0, 1, 2]``. A bare word is a string
(``data.dataset=digits``), and so is a path (``data.path=/data/x.npz``, ``../x.npz``). Inside
``methods`` the second part names the methods an override applies to, by position
(``methods.0.theta=0.9``) or by scheduler name (``methods.adcs.theta=0.9``: every method of that
name; quote a name holding dots, ``methods."mypkg.sel:Mine".k=1``).

Setting a table's ``kind`` to another kind (``sim.server_optimizer.kind=fedadam`` where the file
names ``fedavgm``) starts that table afresh: the old kind's keys are dropped, and keys set after
it are the new kind's (``sim.server_optimizer.eta=0.02``).

The edited document is validated by `config_from_dict`, so an override meets exactly the checks
of the file it edits, and a bad key or value is refused naming its key. The result is an ordinary
configuration: the manifest records it, and ``--resume`` compares it.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcs.data import DATASETS
from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    sim_config,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "Assignment",
    "Edit",
    "apply_assignments",
    "apply_edits",
    "check_edits",
    "edited",
    "keyword_edits",
    "option_edits",
    "parse_assignment",
    "parse_key",
    "parse_value",
    "parse_values",
    "set_edits",
    "split_assignment",
    "split_items",
    "target_paths",
    "with_overrides",
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
        if head == "kind" and node.get("kind", value) != value:  # another kind: a fresh table
            node.clear()
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
    """``config`` with the ``KEY=VALUE`` overrides applied and validated like the file
    (`set_edits` through `edited`).

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
    return edited(config, set_edits(sets), base_dir=base_dir) if sets else config


EditKind = str
"""Where an edit comes from, in the order edits are applied: ``"preset"`` (``--quick``: later
edits may replace its keys), ``"set"`` (``--set``, `adcs.run`'s keywords: a later one wins),
``"option"`` (``--rounds``, ``--seeds``, ``--data``) and ``"sweep"`` (a sweep point)."""

_ORDER = {"preset": 0, "set": 1, "option": 2, "sweep": 3}


@dataclass(frozen=True)
class Edit:
    """One labelled override of a configuration document.

    Attributes
    ----------
    label : str
        Who asked, for messages: ``"--set sim.rounds"``, ``"--rounds"``, ``"sim__rounds"`` (a
        keyword of `adcs.run`, as written), ``"sweep m"``, ``"--quick"``.
    key : tuple of str
        The dotted key's parts (``("sim", "rounds")``; a method by position or scheduler name).
    value : object
        The TOML value it sets.
    kind : str
        One of `EditKind`.
    """

    label: str
    key: tuple[str, ...]
    value: Any
    kind: EditKind = "set"

    def __post_init__(self) -> None:
        if self.kind not in _ORDER:
            raise ValueError(f"Edit kind must be one of {list(_ORDER)}, got {self.kind!r}")


def set_edits(sets: Sequence[str]) -> list[Edit]:
    """The ``--set KEY=VALUE`` arguments as edits, in order."""
    return [Edit(f"--set {'.'.join(k)}", k, v) for k, v in map(parse_assignment, sets)]


def keyword_edits(keywords: Mapping[str, Any]) -> list[Edit]:
    """`adcs.run`'s keyword overrides as edits: ``sim__rounds=50`` sets ``sim.rounds``."""
    edits = []
    for name, value in keywords.items():
        edits.append(Edit(name, tuple(name.split("__")), value))
    return edits


def option_edits(
    *,
    rounds: int | None = None,
    seeds: int | None = None,
    data: str | Path | None = None,
    prefix: str = "--",
) -> list[Edit]:
    """The dedicated options as edits (``--rounds``, ``--seeds N``: seeds 0 … N-1, ``--data``:
    its absolute path), each labelled ``prefix`` + its name; None: not given."""
    edits = []
    if rounds is not None:
        edits.append(Edit(f"{prefix}rounds", ("sim", "rounds"), rounds, "option"))
    if seeds is not None:
        # a range: a huge count is refused (`check_plan`) before its seeds are listed
        edits.append(Edit(f"{prefix}seeds", ("seeds",), range(seeds), "option"))
    if data is not None:
        path = str(Path(data).expanduser().resolve())
        edits.append(Edit(f"{prefix}data", ("data", "path"), path, "option"))
    return edits


def _ordered(edits: Sequence[Edit]) -> list[Edit]:
    """``edits`` in the order they apply: by kind (`EditKind`), then as given."""
    return sorted(edits, key=lambda e: _ORDER[e.kind])


def check_edits(doc: Mapping[str, Any], edits: Sequence[Edit]) -> None:
    """Refuse an edit that silently drops another, once for all the overrides of a run.

    An edit applied after one of another kind may not replace that one's key whole (``--set
    sim.rounds`` and ``--rounds``; ``--set m`` and ``sweep m``), and two swept keys may not set
    one value at all; a preset's keys may be replaced, and of two ``--set`` the later wins.
    Keys are compared as the document ``doc`` writes them (`target_paths`: ``data.dominance``
    is ``data.partition.dominance``, a method by name is each method of that name).

    Raises
    ------
    ConfigError
        Naming both edits and the key they share.
    """
    seen: list[tuple[Edit, tuple[str, ...]]] = []
    for edit in _ordered(edits):
        paths = target_paths(doc, edit.key, edit.value)
        for (other, known), path in itertools.product(seen, paths):
            if other.kind == "preset" or (other.kind == edit.kind != "sweep"):
                continue
            shared = min(path, known, key=len)
            if path[: len(shared)] == known[: len(shared)] and (
                edit.kind == "sweep" == other.kind or shared == path
            ):
                raise ConfigError(
                    f"{other.label} and {edit.label} both set {'.'.join(shared)}: keep one"
                )
        seen += [(edit, path) for path in paths]


def apply_edits(doc: Mapping[str, Any], edits: Sequence[Edit]) -> dict[str, Any]:
    """A copy of the document ``doc`` with ``edits`` made, in the order they apply."""
    return apply_assignments(dict(doc), [(e.key, e.value) for e in _ordered(edits)])


def edited(
    config: ExperimentConfig,
    edits: Sequence[Edit],
    *,
    name: str | None = None,
    base_dir: Path | None = None,
) -> ExperimentConfig:
    """``config``'s document with ``edits`` made, parsed once into the library's objects.

    The result is named ``name`` when given; its source names the ``--set`` edits, keywords and
    sweep points (``c.toml (--set m)``), and an error every edit (``c.toml (--set m, --rounds)``). A relative path in an edit is resolved against
    ``base_dir`` (default: the working folder). ``eval_every`` is capped at ``rounds``, so a
    shortened run is still evaluated; the overlaps are not checked here (`check_edits`).

    Raises
    ------
    ConfigError
        A key or value the configuration refuses, named with the edits.
    """
    out = config
    if edits or name is not None:  # else the configuration as read (its keys named as written)
        doc = apply_edits(config.document, edits)
        if name is not None:
            doc["name"] = name
        source, named = _source(config.source, edits, recorded=True), _source(config.source, edits)
        try:
            out = config_from_dict(doc, source=source, base_dir=base_dir or Path.cwd())
        except ConfigError as exc:  # named with every edit, the options too
            raise ConfigError(named + str(exc).removeprefix(source)) from None
    if out.sim.eval_every > out.sim.rounds:
        out = dataclasses.replace(out, sim=sim_config(out.sim, eval_every=out.sim.rounds))
    return out


def _source(source: str, edits: Sequence[Edit], *, recorded: bool = False) -> str:
    """``source`` with the labels of ``edits`` (``c.toml (--set m, --rounds)``); ``recorded``:
    only those of ``--set``, keywords and sweep points, as the manifest's ``config_source`` has
    always recorded them (an option or a preset is recorded in the manifest otherwise)."""
    kinds = ("set", "sweep") if recorded else tuple(_ORDER)
    labels = ", ".join(dict.fromkeys(e.label for e in _ordered(edits) if e.kind in kinds))
    return f"{source} ({labels})" if labels else source


def with_overrides(
    config: ExperimentConfig,
    *,
    rounds: int | None = None,
    seeds: Sequence[int] | None = None,
    eval_every: int | None = None,
    data_path: str | None = None,
    name: str | None = None,
) -> ExperimentConfig:
    """A copy with these settings replaced, by the one path of every override (`edited`:
    edits of the document, parsed once).

    ``eval_every`` is capped at ``rounds`` so that a short run is still evaluated.
    """
    edits = option_edits(rounds=rounds, data=data_path, prefix="")
    if seeds is not None:
        edits.append(Edit("seeds", ("seeds",), list(seeds), "option"))
    if eval_every is not None:
        edits.append(Edit("eval_every", ("sim", "eval_every"), eval_every, "option"))
    return edited(config, edits, name=name)
