"""Name → class tables that also resolve import paths and entry points (docs/design.md §8).

Every table the configuration reads from is a [`Table`][adcs.registry.Table]: the schedulers,
availability models, system profiles, models, attacks and defences are
[`Registry`][adcs.registry.Registry] tables of classes; the data sets and partitions are tables of
rows (`DatasetEntry`, ...). A name is resolved, in order, as

1. a built-in name of the table (``"adcs"``);
2. an import path ``"package.module:Name"`` (``"mypkg.selection:MyScheduler"``), imported on
   first use — so it resolves the same way in a TOML file, ``--set``, the leaderboard's entries,
   the Flower app's run configuration and on a Ray worker, wherever the package is importable;
   the current folder is searched too, as for a model factory (``"myrule:MyScheduler"`` for a
   ``myrule.py`` in the folder a run starts from, with the ``adcs`` command as with ``python -m``);
3. an entry point of the table's group (``adcs.schedulers``), which a package declares in its
   ``pyproject.toml``::

       [project.entry-points."adcs.schedulers"]
       myscheduler = "mypkg.selection:MyScheduler"

A name that resolves to nothing raises ``ValueError`` naming the table's built-in names and the
import-path form.
"""

from __future__ import annotations

import importlib
import numbers
import os
import re
import sys
import traceback
import types
import typing
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from importlib import metadata
from typing import Any, Generic, TypeVar

import numpy as np

__all__ = [
    "PluginError",
    "Registry",
    "Table",
    "check_annotation",
    "current_folder_on_path",
    "import_path",
    "plugin_name",
    "raised_in",
]

T = TypeVar("T")
V = TypeVar("V")

_IMPORT_PATH = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


@contextmanager
def current_folder_on_path() -> Iterator[None]:
    """The current folder on the module path while it lasts, as ``python -m`` puts it there (the
    ``adcs`` command's own path starts with its script's folder); removed again afterwards."""
    here = os.getcwd()
    added = here not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        yield
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


class PluginError(RuntimeError):
    """A plug-in (a scheduler, a partition: the user's or a built-in one) raised where the runtime
    called it. The message names the plug-in, what it was doing (the run and the round) and what
    it raised; the plug-in's traceback is the exception's ``__cause__`` and, as text that crosses
    process boundaries, its ``plugin_traceback``."""


def plugin_name(obj: Any) -> str:
    """The import path of ``obj``'s class (of ``obj`` itself when it is a class or function),
    through adcs's own wrappers (a defended or lied-to scheduler names the scheduler inside)."""
    for _ in range(8):  # adcs's wrappers hold what they wrap as .scheduler
        inner = getattr(obj, "scheduler", None)
        if inner is None or not type(obj).__module__.startswith("adcs."):
            break
        obj = inner
    target = obj if hasattr(obj, "__qualname__") else type(obj)  # a class, a function
    return f"{target.__module__}:{target.__qualname__}"


def raised_in(what: str, obj: Any, doing: str, exc: BaseException) -> PluginError:
    """The `PluginError` of ``exc``, raised by ``obj`` (a ``what``: ``"scheduler"``) while
    ``doing`` (``"select, run 'x' at round 3"``)."""
    said = str(exc).strip().splitlines()
    error = PluginError(
        f"{what} {plugin_name(obj)} raised {type(exc).__name__} in {doing}"
        + (f": {said[0]}" if said else "")
        + " (adcs --debug … shows its traceback)"
    )
    # the plug-in's traceback as text: it survives the pickling a worker process sends back
    error.plugin_traceback = "".join(  # type: ignore[attr-defined]
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    return error


_SCALARS: dict[Any, tuple[type, ...]] = {
    int: (numbers.Integral,),  # NumPy's integers too
    float: (numbers.Real,),
    str: (str,),
    bool: (bool, np.bool_),
}


def _fits(value: Any, hint: Any) -> bool | None:
    """Whether ``value`` fits the type hint ``hint`` (None: a hint not checked here)."""
    if hint in _SCALARS:
        return isinstance(value, _SCALARS[hint]) and (hint is bool or not isinstance(value, bool))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        found = [_fits(value, a) for a in args]
        return True if any(found) else None if None in found else False
    if hint is type(None):
        return value is None
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return False
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if args and len(items) != len(value):
            return False
        return all(_fits(v, a) is not False for v, a in zip(value, items, strict=False))
    return None


def check_annotation(cls: type, name: str, value: Any) -> None:
    """Refuse ``value`` for the constructor argument ``name`` of ``cls`` unless it fits the
    argument's annotation: ``int``, ``float`` (an int too), ``bool``, ``str``, a ``tuple`` of
    them (a list too), ``Literal``, ``X | None``; other annotations are the class's to check.

    Raises
    ------
    TypeError
        Naming the argument, its annotation and the value.
    """
    try:
        hint = typing.get_type_hints(cls).get(name)
    except Exception:  # unresolvable hints: the constructor will judge the value
        return
    if hint is not None and _fits(value, hint) is False:
        shown = getattr(hint, "__name__", None) if hint in _SCALARS else None
        raise TypeError(
            f"{name} must be {shown or str(hint).replace('typing.', '')} (its annotation), "
            f"got {value!r}"
        )


def import_path(path: str) -> Any:
    """The object at ``"package.module:Name"`` (``Name`` may be dotted: ``"mod:Outer.Inner"``),
    the current folder searched too
    ([`current_folder_on_path`][adcs.registry.current_folder_on_path]).

    Raises
    ------
    ValueError
        A malformed path, a module that cannot be imported (whatever its import raises), or a
        missing attribute — with the reason.
    """
    if not _IMPORT_PATH.fullmatch(path):
        raise ValueError(f"{path!r} is not an import path of the form 'package.module:Name'")
    module_name, _, attr = path.partition(":")
    try:
        with current_folder_on_path():
            obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the module's own failure (a syntax error, a raise) alike
        reason = str(exc) if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        raise ValueError(f"cannot import {module_name!r} (from {path!r}): {reason}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no {attr!r} (from {path!r})") from None
    return obj


def _distribution(ep: Any) -> str:
    """The name of the distribution that declares entry point ``ep`` ("an unknown one")."""
    dist = getattr(ep, "dist", None)
    return str(getattr(dist, "name", None) or "an unknown distribution")


class Table(MutableMapping[str, V], Generic[V]):
    """A table of built-in rows by name that also resolves import paths and entry points.

    Iterating, ``len`` and ``in`` see the table's own names only (the suites built from the
    table, e.g. the leaderboard's entries, stay what the project ships);
    [`resolve`][adcs.registry.Table.resolve] and ``[]`` accept the other two forms too.
    ``table[name] = row`` adds a name in this process. A row found by import path or entry point is
    checked by `_checked`: here it must be an instance of ``row_type`` (a data set's `DatasetEntry`,
    say); a [`Registry`][adcs.registry.Registry] of classes checks their protocol instead.

    Parameters
    ----------
    what : str
        What the table holds, for messages (``"dataset"``).
    group : str
        The entry-point group (``"adcs.datasets"``).
    builtins : mapping of str to row
    row_type : type, optional
        The type a row found by import path or entry point must have.
    """

    def __init__(
        self,
        what: str,
        group: str,
        builtins: Mapping[str, V],
        *,
        row_type: type | None = None,
    ) -> None:
        self.what = what
        self.group = group
        self._builtins = dict(builtins)
        self._row_type = row_type

    def __getitem__(self, name: str) -> V:
        return self.resolve(name)

    def get(self, name: str, default: Any = None) -> Any:
        """The row for ``name`` (any form [`resolve`][adcs.registry.Table.resolve] takes), or
        ``default``."""
        try:
            return self.resolve(name)
        except ValueError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self._builtins)

    def __len__(self) -> int:
        return len(self._builtins)

    def __contains__(self, name: object) -> bool:
        return name in self._builtins

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.what!r}, {sorted(self._builtins)})"

    def __setitem__(self, name: str, row: V) -> None:
        self._builtins[name] = row

    def __delitem__(self, name: str) -> None:
        del self._builtins[name]

    def entry_points(self) -> dict[str, str]:
        """The names this group's entry points declare, with their import paths."""
        return {ep.name: ep.value for ep in metadata.entry_points(group=self.group)}

    def recognises(self, name: object) -> bool:
        """Whether ``name`` has the form of a name [`resolve`][adcs.registry.Table.resolve] takes: a
        built-in name, an import path or an entry point's name (it may still fail to import)."""
        return isinstance(name, str) and (
            name in self._builtins or ":" in name or name in self.entry_points()
        )

    def name_of(self, row: object) -> str | None:
        """The built-in name of ``row`` (None when it is none of the table's own rows)."""
        return next((k for k, v in self._builtins.items() if v is row), None)

    def resolve(self, name: str) -> V:
        """The row for a built-in name, an import path or an entry point's name.

        Raises
        ------
        ValueError
            Naming the built-in names, the import-path form and why an import failed.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.what} name must be a non-empty string, got {name!r}")
        if name in self._builtins:
            return self._builtins[name]
        if ":" in name:
            return self._checked(import_path(name), name)
        declared = {
            ep.value: ep for ep in metadata.entry_points(group=self.group) if ep.name == name
        }
        if len(declared) > 1:  # two packages claim the name: neither wins silently
            said = ", ".join(f"{_distribution(ep)} ({ep.value})" for ep in declared.values())
            raise ValueError(
                f"the {self.what} entry point {name!r} is declared by {len(declared)} "
                f"distributions: {said}; uninstall one, or name the class by its import path"
            )
        for ep in declared.values():
            try:
                loaded = ep.load()
            except Exception as exc:
                raise ValueError(
                    f"the {self.what} entry point {name!r} ({ep.value}) cannot be loaded: {exc}"
                ) from None
            return self._checked(loaded, name)
        raise ValueError(
            f"unknown {self.what} {name!r}: use one of {sorted(self._builtins)}, an import path "
            f"'package.module:Name', or an entry point of the group {self.group!r}"
        )

    def _checked(self, obj: Any, name: str) -> V:
        if self._row_type is not None and not isinstance(obj, self._row_type):
            raise ValueError(f"{self.what} {name!r} is {obj!r}, not a {self._row_type.__name__}")
        return typing.cast(V, obj)


class Registry(Table[type[T]], Generic[T]):
    """A [`Table`][adcs.registry.Table] of classes: a class found by import path or entry point must
    have the protocol's methods.

    Parameters
    ----------
    what, group, builtins
        As for [`Table`][adcs.registry.Table] (``"scheduler"``, ``"adcs.schedulers"``, the built-in
        classes).
    requires : tuple of str
        Attributes a class found by import path or entry point must have (the protocol's
        methods; the built-ins are known to).
    """

    def __init__(
        self,
        what: str,
        group: str,
        builtins: Mapping[str, type[T]],
        *,
        requires: tuple[str, ...] = (),
    ) -> None:
        super().__init__(what, group, builtins)
        self._requires = requires

    def _checked(self, obj: Any, name: str) -> type[T]:
        if not isinstance(obj, type):
            raise ValueError(f"{self.what} {name!r} is {obj!r}, not a class")
        missing = [a for a in self._requires if not callable(getattr(obj, a, None))]
        if missing:
            raise ValueError(
                f"{self.what} {name!r} ({obj.__module__}.{obj.__qualname__}) lacks "
                f"{', '.join(missing)}: it does not implement the {self.what} protocol"
            )
        return obj
