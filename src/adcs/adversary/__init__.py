"""Clients that game the scheduler, and defences that compose with every scheduler (docs/design.md §7).

* `attack` — the adversary model: malicious clients that lie in what the
  scheduler sees (`Lying`) and/or poison what is aggregated (`Poisoned`);
* `defence` — screens between the runtime and any scheduler
  (`Defended`) and robust aggregation (`adcs.aggregation`);
* `crafted` — clients that *send* what they report (`Crafted`);
* `liars` — the lies as a configuration writes them (`Liars`);
* `kinds` — the ``[sim.attack]`` and ``[sim.defence]`` kinds
  (`ATTACKS`, `DEFENCES`);
* `bound` — bounds by construction: the sliding-window cap, the span screen;
* `capture` — selection rates and honest clients' accuracy.

`adversarial` builds a run's scheduler and aggregation hook from an attack and a defence.
"""

from __future__ import annotations

from adcs.adversary.attack import (
    Attack,
    Direction,
    Lie,
    Lying,
    LyingState,
    Poison,
    Poisoned,
    adversarial,
    lie_directions,
    poison_updates,
    tell_lies,
)
from adcs.adversary.bound import Window, cap_budget, capped_availability, outside_span
from adcs.adversary.capture import (
    HonestAccuracy,
    capture_ratio,
    honest_accuracy,
    rates_of,
    selection_rates,
)
from adcs.adversary.crafted import (
    Crafted,
    Crafting,
    CraftingState,
    Sending,
    Target,
    crafted_directions,
)
from adcs.adversary.defence import Defence, Received, Screening, screen
from adcs.adversary.defended import Defended, DefendedState
from adcs.adversary.kinds import ATTACKS, DEFENCES
from adcs.adversary.liars import Liars
from adcs.adversary.members import malicious_clients

__all__ = [
    "ATTACKS",
    "DEFENCES",
    "Attack",
    "Crafted",
    "Crafting",
    "CraftingState",
    "Defence",
    "Defended",
    "DefendedState",
    "Direction",
    "HonestAccuracy",
    "Liars",
    "Lie",
    "Lying",
    "LyingState",
    "Poison",
    "Poisoned",
    "Received",
    "Screening",
    "Sending",
    "Target",
    "Window",
    "adversarial",
    "cap_budget",
    "capped_availability",
    "capture_ratio",
    "crafted_directions",
    "honest_accuracy",
    "lie_directions",
    "malicious_clients",
    "outside_span",
    "poison_updates",
    "rates_of",
    "screen",
    "selection_rates",
    "tell_lies",
]
