"""Clients that lie in what they report, as a configuration writes them (``[sim.attack]``).

`Liars` is the ``kind = "lie"`` row of `adcs.adversary.ATTACKS`: the attack of every
seed, its clients named or drawn per seed, its values in a configuration's words (a lie by name,
a direction as ``"orthogonal"``, ``"random"`` or a cosine). `Liars.build` gives one run's
`Attack`, whose own checks are the ones that apply (docs/design.md §7).
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from adcs.adversary.attack import Attack, Direction, Lie, Poison
from adcs.adversary.members import check_members, members_of

__all__ = ["Liars"]

E = TypeVar("E", bound=enum.Enum)

_NAMED_DIRECTIONS = (Direction.ORTHOGONAL, Direction.RANDOM)


@dataclass(frozen=True)
class Liars:
    """Malicious clients that lie to the scheduler and/or poison the aggregate
    (``[sim.attack] kind = "lie"``, the default).

    Parameters
    ----------
    clients : tuple of int, optional
        The malicious clients (give exactly one of ``clients`` and ``n_malicious``); or
    n_malicious : int, optional
        how many of them `adcs.adversary.malicious_clients` draws from each seed.
    lie : tuple of Lie or str
        Any of "loss", "direction", "norm" (may be empty with a poison).
    factor : float
        > 0, the multiplier of the loss and norm lies and of the "scaled" poison.
    direction : Direction or str or float
        "orthogonal", "random", or a cosine in [−1, 1] with the honest mean direction.
    poison : Poison or str
        "none", "direction", "sign_flip" or "scaled".
    adaptive : bool
        Adapt the lie to the active defence (`adcs.adversary.attack`).
    """

    clients: tuple[int, ...] | None = None
    n_malicious: int | None = None
    lie: tuple[Lie, ...] = (Lie.LOSS,)
    factor: float = 10.0
    direction: Direction | float = Direction.ORTHOGONAL
    poison: Poison = Poison.NONE
    adaptive: bool = False

    needs: ClassVar[Mapping[str, tuple[str, Callable[[Liars], bool]]]] = {
        "factor": (
            "a loss or norm lie or poison = 'scaled'",
            lambda a: bool({Lie.LOSS, Lie.NORM} & set(a.lie)) or a.poison is Poison.SCALED,
        ),
        "direction": (
            "a direction lie or poison = 'direction'",
            lambda a: Lie.DIRECTION in a.lie or a.poison is Poison.DIRECTION,
        ),
    }
    """The keys that only matter beside another setting (a configuration setting one without
    it is refused, see `adcs.experiments.config.schema.KindTable`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "clients", check_members(self.clients, self.n_malicious))
        object.__setattr__(self, "lie", _lies(self.lie))
        object.__setattr__(self, "direction", _direction(self.direction))
        object.__setattr__(self, "poison", _member(Poison, "poison", self.poison))
        self._attack((0,), 0)  # the Attack's own checks of the rest

    def malicious(self, seed: int, n_clients: int) -> tuple[int, ...]:
        """The malicious clients of ``seed``, ascending (ValueError when they do not exist)."""
        return members_of(self.clients, self.n_malicious, seed, n_clients)

    def build(self, seed: int, n_clients: int) -> Attack:
        """The `Attack` of one run of ``seed`` among ``n_clients``."""
        return self._attack(self.malicious(seed, n_clients), seed)

    def _attack(self, clients: tuple[int, ...], seed: int) -> Attack:
        if isinstance(self.direction, Direction):
            direction, cosine = self.direction, 0.0
        else:
            direction, cosine = Direction.COSINE, self.direction
        return Attack(
            clients=clients,
            lie=self.lie,
            factor=self.factor,
            direction=direction,
            cosine=cosine,
            poison=self.poison,
            adaptive=self.adaptive,
            seed=seed,
        )


def _member(kind: type[E], key: str, value: Any) -> E:
    """``value`` as a member of ``kind`` (a member or its value)."""
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{key} must be one of {[x.value for x in kind]}, got {value!r}") from None


def _lies(value: Any) -> tuple[Lie, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"lie must be a list of {[x.value for x in Lie]}, got {value!r}")
    lies = tuple(_member(Lie, "lie", x) for x in value)
    if len(set(lies)) != len(lies):
        raise ValueError(f"lie repeats a lie: {[x.value for x in lies]}")
    return lies


def _direction(value: Any) -> Direction | float:
    """A named direction, or a cosine kept as given (so the table writes back unchanged)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not -1.0 <= float(value) <= 1.0:
            raise ValueError(f"direction as a cosine must lie in [-1, 1], got {value}")
        return value  # type: ignore[return-value]
    named = {d.value: d for d in _NAMED_DIRECTIONS}
    if value in _NAMED_DIRECTIONS or value in named:
        return Direction(value)
    raise ValueError(
        f"direction must be one of {list(named)} or a cosine in [-1, 1], got {value!r}"
    )
