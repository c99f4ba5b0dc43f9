"""The parameter points a scheduler runs on the leaderboard, declared by the scheduler itself.

The leaderboard (`adcs.leaderboard.suite`) runs every row of
[`adcs.schedulers.SCHEDULERS`][adcs.schedulers.SCHEDULERS] at its defaults. A scheduler with a lever
worth seeing — a hyperparameter that trades one thing for another, like ADCS's θ between diversity
and quality — declares `Variants` as its class attribute ``leaderboard_variants``: the lever's
values, the one the method is published with, the hyperparameters held fixed, and *extras* (further
points at the published value, e.g. ADCS with fresh quality). The leaderboard then runs those
points in place of the defaults, names its entries from them, and its report gives, for every
scheduler that declares some, where its published point wins and loses, the best lever value per
workload and what each extra changes (docs/design.md §8). The declaration is optional: a
scheduler without one (``SchedulerBase`` gives ``None``) runs at its defaults only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Extra", "Params", "Variants"]

Params = tuple[tuple[str, Any], ...]
"""Hyperparameters as (name, value) pairs, in the order given."""


def _check_params(name: str, params: Any) -> None:
    if not isinstance(params, tuple) or not all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and p[0] for p in params
    ):
        raise ValueError(f"{name} must be a tuple of (name, value) pairs, got {params!r}")
    keys = [k for k, _ in params]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{name} names a hyperparameter twice: {keys}")


def _check_text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


def value_text(value: Any) -> str:
    """A hyperparameter's value as entry names and reports write it (numbers by ``:g``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{float(value):g}"


@dataclass(frozen=True)
class Extra:
    """One more leaderboard point of a scheduler: its published setting with ``params`` changed.

    Attributes
    ----------
    key : str
        Names the point in ``summary.json`` (``<key>_worst``).
    params : tuple of (str, value)
        The hyperparameters set beside the lever's published value and the fixed ones; a run
        whose hyperparameters hold all of them is this point.
    label : str
        Added to the entry's name (``"ADCS θ=0.8, fresh q"``).
    description : str
        What the point changes, in the report's words.
    """

    key: str
    params: Params
    label: str
    description: str

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.isidentifier():
            raise ValueError(f"key must be an identifier, got {self.key!r}")
        _check_params("params", self.params)
        if not self.params:
            raise ValueError("params must set at least one hyperparameter")
        _check_text("label", self.label)
        _check_text("description", self.description)

    def matches(self, params: Mapping[str, Any]) -> bool:
        """Whether a run with ``params`` is this point (it holds every one of its params)."""
        return all(k in params and params[k] == v for k, v in self.params)


@dataclass(frozen=True)
class Variants:
    """A scheduler's leaderboard points: a lever swept at fixed hyperparameters, and extras.

    Attributes
    ----------
    lever : str
        The hyperparameter swept (e.g. ``"theta"``).
    values : tuple
        Its values on the leaderboard, in order (the published one among them).
    published : value
        The lever's value the method is known by (its paper's); the scheduler's *reference* entry
        is the lever at it with the fixed hyperparameters and no extra.
    fixed : tuple of (str, value)
        Hyperparameters held in every point (e.g. ``(("refresh_every", 20),)``).
    extras : tuple of Extra
        Further points, each at the published lever value.
    symbols : tuple of (str, str)
        How entry names and reports write a hyperparameter (``("theta", "θ")``); default its
        name.

    Notes
    -----
    The points replace the scheduler's defaults on the leaderboard: list the defaults' values
    among them if the defaults should run (ADCS's θ = 0.8, R = 20 is its published point).
    """

    lever: str
    values: tuple[Any, ...]
    published: Any
    fixed: Params = ()
    extras: tuple[Extra, ...] = ()
    symbols: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _check_text("lever", self.lever)
        if not isinstance(self.values, tuple) or not self.values:
            raise ValueError(f"values must be a non-empty tuple, got {self.values!r}")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"values must be distinct, got {self.values!r}")
        if self.published not in self.values:
            raise ValueError(f"published={self.published!r} is not among values {self.values!r}")
        _check_params("fixed", self.fixed)
        if self.lever in dict(self.fixed):
            raise ValueError(f"the lever {self.lever!r} cannot also be fixed")
        if not all(isinstance(e, Extra) for e in self.extras):
            raise ValueError("extras must be Extra objects")
        keys = [e.key for e in self.extras]
        if len(set(keys)) != len(keys):
            raise ValueError(f"extras' keys must be distinct, got {keys}")
        for extra in self.extras:
            clash = {self.lever, *dict(self.fixed)} & set(dict(extra.params))
            if clash:
                raise ValueError(f"extra {extra.key!r} sets {sorted(clash)}, the lever or fixed")
        for pair in self.symbols:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(pair)):
                raise ValueError(f"symbols must be (name, symbol) pairs, got {pair!r}")

    def grids(self) -> tuple[tuple[Params, tuple[tuple[str, tuple[Any, ...]], ...]], ...]:
        """The points as (fixed params, sweep) grids: the lever swept, then each extra."""
        out: list[tuple[Params, tuple[tuple[str, tuple[Any, ...]], ...]]] = [
            (self.fixed, ((self.lever, self.values),))
        ]
        for extra in self.extras:
            out.append(((*self.fixed, (self.lever, self.published), *extra.params), ()))
        return tuple(out)

    def symbol(self, name: str) -> str:
        """How ``name`` is written (its symbol, else itself)."""
        return dict(self.symbols).get(name, name)

    def extra_of(self, params: Mapping[str, Any]) -> Extra | None:
        """The first extra a run with ``params`` is, else None."""
        return next((e for e in self.extras if e.matches(params)), None)

    def lever_at(self, params: Mapping[str, Any]) -> Any | None:
        """The lever's value of a plain point (the fixed hyperparameters, no extra), else None."""
        if self.lever not in params or self.extra_of(params) is not None:
            return None
        if any(params.get(k) != v for k, v in self.fixed):
            return None
        return params[self.lever]

    def is_reference(self, params: Mapping[str, Any]) -> bool:
        """Whether ``params`` are the reference entry's (the plain point at the published value)."""
        at = self.lever_at(params)
        return at is not None and bool(at == self.published)

    def label(self, display: str, params: Mapping[str, Any]) -> str | None:
        """The entry name of a run with ``params`` (None without the lever).

        ``"<display> <lever symbol>=<value>"``, then the extra's label, then each fixed
        hyperparameter off its value as ``<symbol>=<value>``: ``"ADCS θ=0.8, fresh q"``,
        ``"ADCS θ=0.6, R=5"``.
        """
        if self.lever not in params:
            return None
        text = f"{display} {self.symbol(self.lever)}={value_text(params[self.lever])}"
        extra = self.extra_of(params)
        if extra is not None:
            text += f", {extra.label}"
        for k, v in self.fixed:
            if params.get(k) != v:
                text += f", {self.symbol(k)}={params.get(k)}"
        return text

    def describe_fixed(self) -> str:
        """The fixed hyperparameters as ``"R = 20"`` (empty without any)."""
        return ", ".join(f"{self.symbol(k)} = {value_text(v)}" for k, v in self.fixed)
