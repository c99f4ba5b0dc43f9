"""The kinds of ``[sim.attack]`` and ``[sim.defence]``: name → class registries (docs/design.md §8).

A kind is a built-in name, an import path ``"package.module:Name"`` or an entry point of the
group (``adcs.attacks``, ``adcs.defences``); the table's other keys are the class's constructor
arguments. Both protocols build one run's object:

* an attack kind has ``malicious(seed, n_clients)`` (the run's malicious clients) and
  ``build(seed, n_clients)``, giving an `Attack` or a
  `Crafted`;
* a defence kind has ``build(seed, n_clients)``, giving a `Defence` (a
  subclass may bring its own aggregation rule through ``aggregator()``).
"""

from __future__ import annotations

from typing import Any

from adcs.adversary.crafted import Crafted
from adcs.adversary.defence import Defence
from adcs.adversary.liars import Liars
from adcs.registry import Registry

__all__ = ["ATTACKS", "DEFENCES"]

ATTACKS: Registry[Any] = Registry(
    "attack",
    "adcs.attacks",
    {"lie": Liars, "crafted": Crafted},
    requires=("build", "malicious"),
)
"""``[sim.attack] kind`` → its class: ``"lie"`` (the default, `Liars`) or ``"crafted"``."""

DEFENCES: Registry[Any] = Registry(
    "defence",
    "adcs.defences",
    {"standard": Defence},
    requires=("build",),
)
"""``[sim.defence] kind`` → its class: ``"standard"`` (the default, `Defence`: the screens
and a robust rule of `adcs.aggregation`)."""
