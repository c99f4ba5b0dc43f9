"""``[sim.attack]`` and ``[sim.defence]``: the adversary and the defences of an experiment.

Both apply to every method of the configuration (docs/design.md §7). Each is a
`KindTable` onto a library registry — `adcs.adversary.ATTACKS`
and `adcs.adversary.DEFENCES` — so the table's keys are the constructor arguments of the
kind's class, which checks them itself::

    [sim.attack]              # kind = "lie" (the default): adcs.adversary.Liars
    clients = [0, 12, 24]     # or n_malicious = 3 (drawn from each seed, the same for every method)
    lie = ["loss"]            # any of "loss" (x factor), "direction", "norm" (x factor)
    direction = "orthogonal"  # or "random", or a cosine with the honest mean, e.g. 0.35
    factor = 10.0
    poison = "none"           # "none" | "direction" | "sign_flip" | "scaled"
    adaptive = false          # true: the liar adapts to the active defence

    [sim.attack]              # or: clients that send what they report (adcs.adversary.Crafted)
    kind = "crafted"
    n_malicious = 3
    cosine = 0.5              # with its own update (or the worst-served client's: target = "worst")
    shared = false            # a coalition sharing one novel direction, or spreading over k
    scale = 1.0               # sent norm / true norm (0.01: a free rider)
    factor = 1.0              # reported loss x factor
    start = 0                 # honest before this round (a sleeper)

    [sim.defence]             # kind = "standard" (the default): adcs.adversary.Defence
    received = true           # schedule on the updates the server received
    corroborate = true        # loss and norm: the median of the client's neighbourhood
    plausibility = 0.9        # leave out directions without a peer (x median best cosine)
    aggregation = "mean"      # or "median", "trimmed_mean" (with trim), "norm_clip"
    novelty = 3.0             # leave out directions mostly outside the others' span (x median)
    cap = 1.5                 # no client above 1.5 x its fair share m/N over any ...
    window = 100              # ... window of this many rounds

A user's kind is named by import path (``kind = "mypkg.attacks:Mine"``) or an entry point of
``adcs.attacks`` / ``adcs.defences`` (`adcs.adversary.kinds` gives the protocols). The
tables are written back without ``kind`` when it is the default, as earlier manifests have them.
`adversarial_run` turns them into each run's scheduler and aggregation hook.
"""

from __future__ import annotations

from typing import Any

from adcs.adversary import ATTACKS, DEFENCES, Attack, Crafted, Defence, adversarial
from adcs.aggregation import Aggregator
from adcs.experiments.config.schema import ConfigError, KindTable
from adcs.schedulers.base import Scheduler

__all__ = ["ATTACK_TABLE", "DEFENCE_TABLE", "adversarial_run"]

ATTACK_TABLE = KindTable(
    "sim.attack", ATTACKS, "lie", frozenset({"seed"}), sort_keys=False, write_default=False
)
"""``[sim.attack]``: a row of `adcs.adversary.ATTACKS` (``seed`` is set per run)."""
DEFENCE_TABLE = KindTable("sim.defence", DEFENCES, "standard", sort_keys=False, write_default=False)
"""``[sim.defence]``: a row of `adcs.adversary.DEFENCES`."""


def adversarial_run(
    scheduler: Scheduler, seed: int, n_clients: int, attack: Any, defence: Any
) -> tuple[Scheduler, Aggregator | None]:
    """One run's scheduler and aggregation hook (`adcs.adversary.adversarial`) under the
    configuration's attack and defence (either may be None)."""
    run_attack = None if attack is None else ATTACK_TABLE.build(attack, seed, n_clients)
    if isinstance(run_attack, Attack | Crafted) and run_attack.clients is not None:
        _check_attacked(attack, run_attack.clients, seed, n_clients)
    run_defence = None if defence is None else DEFENCE_TABLE.build(defence, seed, n_clients)
    if isinstance(run_defence, Defence):
        try:
            run_defence.rule()
        except TypeError as exc:  # a user's defence whose aggregator() gives no rule
            raise ConfigError(f"sim.defence.kind: {exc}") from None
    try:
        return adversarial(scheduler, attack=run_attack, defence=run_defence, seed=seed)
    except (TypeError, ValueError) as exc:  # a user's kind whose build the round cannot use
        table = "attack" if run_defence is None or isinstance(run_defence, Defence) else "defence"
        raise ConfigError(f"sim.{table}.kind: {exc}") from None


def _check_attacked(attack: Any, built: tuple[int, ...], seed: int, n_clients: int) -> None:
    """The clients a kind's ``build`` attacks with: ``malicious(seed, N)``'s, all in [0, N).

    A user's kind may build an attack of other clients than it names (the manifest and the
    honest clients' columns would then be wrong) or of clients the run does not have.
    """
    try:
        named = sorted(int(c) for c in attack.malicious(seed, n_clients))
    except ValueError as exc:
        raise ConfigError(f"sim.attack: {exc}") from None
    if max(built) >= n_clients:
        raise ConfigError(
            f"sim.attack.kind: the attack built for seed {seed} names clients {list(built)}, "
            f"not all in [0, {n_clients})"
        )
    if sorted(built) != named:
        raise ConfigError(
            f"sim.attack.kind: the attack built for seed {seed} attacks with clients "
            f"{list(built)}, but malicious() names {named}"
        )
