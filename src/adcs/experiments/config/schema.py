"""TOML tables ↔ the library's objects, through name → class registries (docs/design.md §8).

A table with a ``kind`` (``[sim.availability]``, ``[sim.system]``) is a `KindTable`: the
kind names a row of a [`Registry`][adcs.registry.Registry] (a built-in name,
``"package.module:Name"`` or an entry point of the registry's group), the other keys are the row's
constructor arguments, and the object built *is* the configuration: its own ``__post_init__`` checks
the values, and a ``ValueError`` it raises comes back as a `ConfigError` naming the dotted key. The
object writes itself back to the table (`KindTable.to_dict`) for ``manifest.json`` and for the
comparison ``--resume`` makes.

The small checkers below raise `ConfigError` naming the dotted key, for the keys the
configuration layer owns itself (``m``, ``seeds``, ``outputs``).
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcs.registry import Registry

__all__ = [
    "ConfigError",
    "KindTable",
    "as_table",
    "check_choice_key",
    "check_int_key",
    "check_known_keys",
    "freeze",
    "value_to_toml",
]


class ConfigError(ValueError):
    """A configuration that cannot be run; the message names the file, key and value."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_int_key(key: str, value: Any, minimum: int) -> int:
    if not _is_int(value) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_choice_key(key: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ConfigError(f"{key} must be one of {list(allowed)}, got {value!r}")
    return str(value)


def check_known_keys(section: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        where = f"{section}." if section else ""
        raise ConfigError(
            f"unknown key(s) {', '.join(where + k for k in unknown)}; allowed: {sorted(allowed)}"
        )


def as_table(key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a table, got {value!r}")
    return value


def freeze(value: Any) -> Any:
    """TOML arrays → tuples, so values are hashable and immutable."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def value_to_toml(value: Any) -> Any:
    """Tuples → TOML arrays (the inverse of `freeze`), enum members → their values."""
    if isinstance(value, tuple):
        return [value_to_toml(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


_NAMED = re.compile(r"(?:[a-z_]+\.)?([a-z_]\w*)([ :=].*)", re.DOTALL)
"""A library message that starts with the argument it is about (``availability.p must ...``,
``n_malicious=9 exceeds ...``, ``availability: ...``)."""


def named_key(key: str, message: str, names: Collection[str]) -> str:
    """A library's ``message`` naming the dotted key: ``<key>.<name> ...`` when it starts with
    one of ``names`` (an argument of the object under ``key``), else ``<key>: <message>``."""
    named = _NAMED.fullmatch(message)
    if named is not None and named.group(1) in names:
        return f"{key}.{named.group(1)}{named.group(2)}"
    return f"{key}: {message}"


@dataclass(frozen=True)
class KindTable:
    """A configuration table whose ``kind`` names a registered constructor.

    Attributes
    ----------
    key : str
        The table's dotted key (``"sim.availability"``), named in every message.
    registry : Registry
        Its kinds.
    default : str
        The kind of a table without one.
    hidden : frozenset of str
        Constructor arguments that are not keys of the table (``profile`` of
        `SystemConfig`, which a ``csv`` row reads).
    sort_keys : bool
        Write the table back with its keys sorted (else ``kind`` first, then the constructor's
        order), as the manifests of earlier versions have it.
    write_default : bool
        Write ``kind`` back when it is the default (the attack and defence tables of earlier
        manifests have none).
    """

    key: str
    registry: Registry[Any]
    default: str
    hidden: frozenset[str] = frozenset()
    sort_keys: bool = True
    write_default: bool = True

    def keys(self, cls: type[Any]) -> dict[str, inspect.Parameter]:
        """The table's keys for the row ``cls`` (besides ``kind``): its constructor arguments."""
        params = inspect.signature(cls).parameters
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return {n: p for n, p in params.items() if p.kind in kinds and n not in self.hidden}

    def resolve(self, kind: Any) -> type[Any]:
        """The row named ``kind`` (ConfigError naming ``<key>.kind``)."""
        table = self.registry
        if not table.recognises(kind):
            raise ConfigError(
                f"{self.key}.kind must be one of {sorted(table)} or an import path "
                f"'package.module:Name', got {kind!r}"
            )
        try:
            return table.resolve(kind)
        except ValueError as exc:
            raise ConfigError(f"{self.key}.kind: {exc}") from None

    def parse(self, raw: Any, base_dir: Path | None) -> Any:
        """The object a TOML table describes, checked by its own constructor.

        A relative ``path`` is resolved against ``base_dir`` (the configuration file's folder).
        """
        table = dict(as_table(self.key, raw))
        kind = table.pop("kind", self.default)
        cls = self.resolve(kind)
        keys = self.keys(cls)
        self._refuse_unknown(kind, table, keys)
        for name, param in keys.items():
            if param.default is inspect.Parameter.empty and name not in table:
                raise ConfigError(f"{self.key}.{name} is required for kind = {kind!r}")
        if isinstance(table.get("path"), str) and base_dir is not None:
            path = Path(table["path"]).expanduser()
            table["path"] = str(path if path.is_absolute() else base_dir / path)
        try:
            obj = cls(**table)
        except (TypeError, ValueError) as exc:
            raise ConfigError(self._message(str(exc), keys)) from None
        except Exception as exc:  # a user's row may raise anything: its message, named
            raise ConfigError(self._message(f"{type(exc).__name__}: {exc}", keys)) from None
        self._refuse_idle(obj, table, keys)
        return obj

    def _refuse_idle(self, obj: Any, table: Mapping[str, Any], keys: Mapping[str, Any]) -> None:
        """Refuse a key set to other than its default where it does nothing: the row's class
        declares, in ``needs``, the keys that only matter beside another setting (``window``
        only with a ``cap``) as ``{key: (the setting in words, obj → whether it is on)}``.

        A key at its default passes (the table written back holds every key)."""
        needs: Mapping[str, tuple[str, Any]] = getattr(type(obj), "needs", {})
        for name, (setting, on) in needs.items():
            if name in table and getattr(obj, name) != keys[name].default and not on(obj):
                raise ConfigError(
                    f"{self.key}.{name} = {table[name]!r} does nothing without {setting}: "
                    f"set {setting} or remove {name}"
                )

    def _refuse_unknown(self, kind: str, table: Mapping[str, Any], keys: Mapping[str, Any]) -> None:
        """Name a key of another kind as such (``model.factory is only for kind = 'torch'``)."""
        for name in sorted(set(table) - set(keys)):
            owners = [k for k, cls in self.registry.items() if name in self.keys(cls)]
            if owners:
                raise ConfigError(
                    f"{self.key}.{name} is only for kind = "
                    f"{' or '.join(map(repr, owners))}, not {kind!r}"
                )
        check_known_keys(self.key, {"kind": kind, **table}, frozenset(keys) | {"kind"})

    def _message(self, message: str, keys: Mapping[str, Any]) -> str:
        return named_key(self.key, message, {*keys, "kind"})

    def refusal(self, obj: Any, exc: Exception) -> ConfigError:
        """``exc``, raised by a method of ``obj`` (this table's object), naming the key."""
        return ConfigError(self._message(str(exc), self.keys(type(obj))))

    def kind_of(self, obj: Any) -> str:
        """The name that resolves to ``obj``'s class (its import path for a user's class)."""
        cls = type(obj)
        return self.registry.name_of(cls) or f"{cls.__module__}:{cls.__qualname__}"

    def to_dict(self, obj: Any) -> dict[str, Any]:
        """The TOML table of ``obj``: its kind and constructor arguments, none null (an enum as
        its value, a tuple as an array)."""
        kind = self.kind_of(obj)
        doc = {"kind": kind} if self.write_default or kind != self.default else {}
        # keys a class added after its tables were first written go back only when set, so a
        # configuration that does not use them is written as earlier manifests have it
        later: frozenset[str] = getattr(type(obj), "written_when_set", frozenset())
        doc.update(
            {
                k: value_to_toml(getattr(obj, k))
                for k, param in self.keys(type(obj)).items()
                if k not in later or getattr(obj, k) != param.default
            }
        )
        return {k: doc[k] for k in (sorted(doc) if self.sort_keys else doc) if doc[k] is not None}

    def build(self, obj: Any, *args: Any) -> Any:
        """``obj.build(*args)`` (a model for the data's shapes), its errors naming the table."""
        try:
            return obj.build(*args)
        except ImportError as exc:  # a missing extra: the row's message says which
            raise ConfigError(self._message(str(exc), {})) from None
        except ValueError as exc:
            raise ConfigError(f"{self.key}: {exc}") from None
