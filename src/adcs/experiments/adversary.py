"""``[sim.attack]`` and ``[sim.defence]``: the adversary and the defences of an experiment.

Both apply to every method of the configuration (docs/design.md §7)::

    [sim.attack]
    clients = [0, 12, 24]     # or n_malicious = 3 (drawn from each seed, the same for every method)
    lie = ["loss"]            # any of "loss" (x factor), "direction", "norm" (x factor)
    direction = "orthogonal"  # or "random", or a cosine with the honest mean, e.g. 0.35
    factor = 10.0
    poison = "none"           # "none" | "direction" | "sign_flip" | "scaled"
    adaptive = false          # true: the liar adapts to the active defence

    [sim.attack]              # or: clients that send what they report (adcs.adversary.Crafted)
    kind = "crafted"          # "lie" (the default: the table above) or "crafted"
    n_malicious = 3
    cosine = 0.5              # with its own update (or the worst-served client's: target = "worst")
    shared = false            # a coalition sharing one novel direction, or spreading over k
    scale = 1.0               # sent norm / true norm (0.01: a free rider)
    factor = 1.0              # reported loss x factor
    start = 0                 # honest before this round (a sleeper)

    [sim.defence]
    received = true           # schedule on the updates the server received
    corroborate = true        # loss and norm: the median of the client's neighbourhood
    plausibility = 0.9        # leave out directions without a peer (x median best cosine)
    aggregation = "mean"      # or "median", "trimmed_mean" (with trim), "norm_clip"
    novelty = 3.0             # leave out directions mostly outside the others' span (x median)
    cap = 1.5                 # no client above 1.5 x its fair share m/N over any ...
    window = 100              # ... window of this many rounds

:func:`adversarial_runs` turns them into each run's scheduler and aggregation hook.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from adcs.adversary import (
    Attack,
    Crafted,
    Defence,
    Direction,
    Lie,
    Poison,
    adversarial,
    malicious_clients,
)
from adcs.aggregation import Aggregator, Robust
from adcs.experiments.schema import ConfigError, KindTable
from adcs.registry import Registry
from adcs.schedulers.base import Scheduler

__all__ = [
    "ATTACKS",
    "ATTACK_TABLE",
    "AttackSettings",
    "AttackTable",
    "DefenceSettings",
    "adversarial_run",
]


class _Error(ValueError):
    """Raised with a message naming the key; the config loader turns it into a ConfigError."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _choices(key: str, value: Any, allowed: list[str]) -> str:
    if value not in allowed:
        raise _Error(f"{key} must be one of {allowed}, got {value!r}")
    return str(value)


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Error(f"{key} must be true or false, got {value!r}")
    return value


def _unit(key: str, value: Any, *, high_open: bool = False) -> float:
    ok = _is_number(value) and math.isfinite(float(value)) and 0.0 <= float(value)
    ok = ok and (float(value) < 1.0 if high_open else float(value) <= 1.0)
    if not ok:
        raise _Error(f"{key} must be a number in [0, 1{')' if high_open else ']'}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class AttackSettings:
    """``[sim.attack]``: who is malicious and how they act (:class:`adcs.adversary.Attack`).

    Attributes
    ----------
    clients : tuple of int or None
        The malicious clients; or
    n_malicious : int or None
        how many to draw from each seed (:func:`adcs.adversary.malicious_clients`).
    lie : tuple of str
        Any of "loss", "direction", "norm" (may be empty with a poison).
    factor : float
        > 0, the multiplier of the loss and norm lies and of the "scaled" poison.
    direction : str or float
        "orthogonal", "random", or a cosine in [−1, 1] with the honest mean direction.
    poison : str
        "none", "direction", "sign_flip" or "scaled".
    adaptive : bool
    """

    clients: tuple[int, ...] | None = None
    n_malicious: int | None = None
    lie: tuple[str, ...] = ("loss",)
    factor: float = 10.0
    direction: str | float = "orthogonal"
    poison: str = "none"
    adaptive: bool = False

    def __post_init__(self) -> None:
        key = "sim.attack"
        if (self.clients is None) == (self.n_malicious is None):
            raise _Error(f"{key} needs exactly one of clients = [...] and n_malicious = k")
        if self.clients is not None:
            clients = self.clients
            if not isinstance(clients, (list, tuple)) or not clients:
                raise _Error(f"{key}.clients must be a non-empty array of client indices")
            if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in clients):
                raise _Error(f"{key}.clients must hold integers >= 0, got {list(clients)}")
            if len(set(clients)) != len(clients):
                raise _Error(f"{key}.clients repeats a client: {list(clients)}")
            object.__setattr__(self, "clients", tuple(int(c) for c in clients))
        if self.n_malicious is not None:
            n = self.n_malicious
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise _Error(f"{key}.n_malicious must be an integer >= 1, got {n!r}")
        if not isinstance(self.lie, (list, tuple)):
            raise _Error(f"{key}.lie must be an array of strings, got {self.lie!r}")
        allowed = [x.value for x in Lie]
        for x in self.lie:
            _choices(f"{key}.lie[]", x, allowed)
        if len(set(self.lie)) != len(self.lie):
            raise _Error(f"{key}.lie repeats a lie: {list(self.lie)}")
        object.__setattr__(self, "lie", tuple(self.lie))
        if not _is_number(self.factor) or not math.isfinite(self.factor) or self.factor <= 0:
            raise _Error(f"{key}.factor must be a number > 0, got {self.factor!r}")
        if _is_number(self.direction):
            if not -1.0 <= float(self.direction) <= 1.0:
                raise _Error(
                    f"{key}.direction as a cosine must lie in [-1, 1], got {self.direction}"
                )
        else:
            _choices(f"{key}.direction", self.direction, ["orthogonal", "random"])
        _choices(f"{key}.poison", self.poison, [p.value for p in Poison])
        if not self.lie and self.poison == "none":
            raise _Error(f"{key}: lie = [] and poison = 'none' is no attack; give one of them")
        _flag(f"{key}.adaptive", self.adaptive)

    def malicious(self, seed: int, n_clients: int) -> tuple[int, ...]:
        """The malicious clients of ``seed`` (refused when they do not exist)."""
        if self.clients is not None:
            if max(self.clients) >= n_clients:
                raise _Error(
                    f"sim.attack.clients {list(self.clients)} must lie in [0, {n_clients})"
                )
            return tuple(sorted(self.clients))
        assert self.n_malicious is not None
        if self.n_malicious > n_clients:
            raise _Error(f"sim.attack.n_malicious={self.n_malicious} exceeds N={n_clients}")
        return malicious_clients(seed, n_clients, self.n_malicious)

    def build(self, seed: int, n_clients: int) -> Attack:
        """The :class:`~adcs.adversary.Attack` of one seed."""
        if _is_number(self.direction):
            direction, cosine = Direction.COSINE, float(self.direction)
        else:
            direction, cosine = Direction(self.direction), 0.0
        return Attack(
            clients=self.malicious(seed, n_clients),
            lie=tuple(Lie(x) for x in self.lie),
            factor=float(self.factor),
            direction=direction,
            cosine=cosine,
            poison=Poison(self.poison),
            adaptive=self.adaptive,
            seed=seed,
        )

    def to_dict(self) -> dict[str, Any]:
        """The TOML table."""
        doc: dict[str, Any] = {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }
        for k in ("clients", "lie"):
            if k in doc:
                doc[k] = list(doc[k])
        return doc


@dataclass(frozen=True)
class DefenceSettings:
    """``[sim.defence]``: the defences' options (:class:`adcs.adversary.Defence`), all off."""

    received: bool = False
    consistency: float = 1.0
    corroborate: bool = False
    peers: int = 2
    plausibility: float = 0.0
    uniform_mix: float = 0.0
    aggregation: str = "mean"
    trim: float = 0.2
    novelty: float = 0.0
    cap: float = 0.0
    window: int = 100

    def __post_init__(self) -> None:
        key = "sim.defence"
        _flag(f"{key}.received", self.received)
        _unit(f"{key}.consistency", self.consistency)
        _flag(f"{key}.corroborate", self.corroborate)
        if not isinstance(self.peers, int) or isinstance(self.peers, bool) or self.peers < 1:
            raise _Error(f"{key}.peers must be an integer >= 1, got {self.peers!r}")
        _unit(f"{key}.plausibility", self.plausibility)
        _unit(f"{key}.uniform_mix", self.uniform_mix, high_open=True)
        _choices(f"{key}.aggregation", self.aggregation, [r.value for r in Robust])
        if not _is_number(self.trim) or not 0.0 <= float(self.trim) < 0.5:
            raise _Error(f"{key}.trim must be a number in [0, 0.5), got {self.trim!r}")
        try:  # the library's own checks for the bounds (docs/concepts/threat-model.md)
            Defence(novelty=self.novelty, cap=self.cap, window=self.window)
        except ValueError as exc:
            raise _Error(f"{key}.{exc}") from None

    def build(self) -> Defence:
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        kwargs["aggregation"] = Robust(self.aggregation)
        return Defence(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


AttackTable = AttackSettings | Crafted
"""What ``[sim.attack]`` builds: the lies (``kind = "lie"``) or a crafted attack."""

ATTACKS: Registry[Any] = Registry(
    "attack",
    "adcs.attacks",
    {"lie": AttackSettings, "crafted": Crafted},
    requires=("build", "malicious"),
)
"""``[sim.attack] kind`` → the class whose constructor its other keys are."""
ATTACK_TABLE = KindTable("sim.attack", ATTACKS, "lie", frozenset({"seed"}))
"""``[sim.attack]`` (:mod:`adcs.experiments.schema`): the kind's class checks its own keys."""

KEYS = {
    "attack": frozenset(f.name for f in fields(AttackSettings)),
    "defence": frozenset(f.name for f in fields(DefenceSettings)),
}
"""The keys of ``[sim.attack]`` (kind "lie") and ``[sim.defence]``."""


def parse(table: str, raw: dict[str, Any]) -> AttackTable | DefenceSettings:
    """``[sim.attack]`` or ``[sim.defence]`` from its TOML table (ValueError naming the key)."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    if table == "attack":
        try:
            attack: AttackTable = ATTACK_TABLE.parse(values, None)
        except ConfigError as exc:  # the lies' own messages already name their key
            raise ConfigError(str(exc).replace("sim.attack: sim.attack.", "sim.attack.")) from None
        return attack
    unknown = sorted(set(values) - KEYS[table])
    if unknown:
        raise _Error(
            f"unknown key(s) {', '.join(f'sim.{table}.{k}' for k in unknown)}; "
            f"allowed: {sorted(KEYS[table])}"
        )
    return DefenceSettings(**values)


def adversarial_run(
    scheduler: Scheduler,
    seed: int,
    n_clients: int,
    attack: AttackTable | None,
    defence: DefenceSettings | None,
) -> tuple[Scheduler, Aggregator | None]:
    """One run's scheduler and aggregation hook (:func:`adcs.adversary.adversarial`)."""
    try:
        return adversarial(
            scheduler,
            attack=None if attack is None else attack.build(seed, n_clients),
            defence=None if defence is None else defence.build(),
            seed=seed,
        )
    except TypeError as exc:  # a user's attack kind whose build gives something else
        raise ConfigError(f"sim.attack.kind: {exc}") from None
