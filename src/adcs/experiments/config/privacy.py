"""``[sim.privacy]``: every method's probes and updates made private (docs/concepts/privacy.md).

The table's keys are the arguments of `adcs.privacy.PrivateProbes`::

    [sim.privacy]
    epsilon = 4.0            # the budget per client over the run (omit: account only)
    delta = 1e-3             # omit: 1 / N^1.1
    probe_noise = 2.0        # noise multipliers σ / Δ of probe releases and of the aggregate ...
    update_noise = 1.0
    # ... or, with epsilon, a plan from which they are calibrated:
    # planned_probes = 400   # probe releases per client (an update probe's reply is two)
    # planned_updates = 40   # training updates per client
    # probe_share = 0.5      # the probes' share of the budget
    # by_method = {powerofchoice = {planned_probes = 4000}, ocs = {updates_as = "norm"}}
    loss_range = [0.0, 5.0]  # a probed loss is clipped to it
    updates_as = "direction" # or "norm": what an update probe releases
    sketch_dim = 64          # k of the direction's seeded sketch (at most the model's dim)
    direction_clip = 1.0     # C of the sketched direction, the norm, the training update
    norm_clip = 1.0
    update_clip = 1.0

`private_spec` wraps each run's scheduler in `adcs.privacy.Private` and sets the
DP-FedAvg aggregation hook. Without the table nothing changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from adcs.experiments.config.schema import ConfigError, as_table, check_known_keys, named_key
from adcs.privacy import PrivateProbes, private_run
from adcs.sim.spec import RunSpec

__all__ = ["PRIVACY_KEYS", "check_privacy_dim", "parse_privacy", "privacy_to_dict", "private_spec"]

PRIVACY_KEYS = frozenset(f.name for f in dataclasses.fields(PrivateProbes))
"""The keys of ``[sim.privacy]``: `adcs.privacy.PrivateProbes`'s arguments."""


def parse_privacy(raw: Any) -> PrivateProbes:
    """The ``[sim.privacy]`` table as `adcs.privacy.PrivateProbes`.

    Raises
    ------
    ConfigError
        Naming the key (``sim.privacy.epsilon must be ...``).
    """
    table = dict(as_table("sim.privacy", raw))
    check_known_keys("sim.privacy", table, PRIVACY_KEYS)
    if isinstance(table.get("loss_range"), list):
        table["loss_range"] = tuple(table["loss_range"])
    for own in (
        table.get("by_method", {}).values() if isinstance(table.get("by_method"), dict) else ()
    ):
        if isinstance(own, dict) and isinstance(own.get("loss_range"), list):
            own["loss_range"] = tuple(own["loss_range"])
    try:
        return PrivateProbes(**table)
    except ValueError as exc:
        raise ConfigError(named_key("sim.privacy", str(exc), PRIVACY_KEYS)) from None


def privacy_to_dict(probes: PrivateProbes) -> dict[str, Any]:
    """The table written back (its set keys; TOML has no null)."""
    doc = dataclasses.asdict(probes)
    doc["loss_range"] = list(probes.loss_range)
    if probes.by_method is not None:
        doc["by_method"] = {
            name: {k: list(v) if isinstance(v, tuple) else v for k, v in own}
            for name, own in probes.by_method
        }
    return {k: v for k, v in doc.items() if v is not None}


def private_spec(spec: RunSpec, probes: PrivateProbes | None, n_clients: int | None) -> RunSpec:
    """The run with its scheduler behind the private probe channel and DP-FedAvg's hook.

    Raises
    ------
    ConfigError
        The run already has an aggregation hook (a poison, a robust rule), or δ is left to the
        population's size and the configuration does not fix N.
    """
    if probes is None:
        return spec
    if spec.aggregator is not None:
        raise ConfigError(
            "[sim.privacy] aggregates by DP-FedAvg: it does not combine with the aggregation "
            "rule of [sim.attack] (a poison) or [sim.defence] (a robust rule)"
        )
    if n_clients is None and probes.delta is None:
        raise ConfigError(
            "sim.privacy.delta: give delta; the default 1/N^1.1 needs a configuration that fixes N"
        )
    try:
        probes = probes.for_method(str(spec.meta.get("method", "")))
        scheduler, aggregator = private_run(spec.scheduler, probes, spec.seed, n_clients or 1)
        scheduler.noise  # noqa: B018  (calibrated now: a refusal before any round)
    except ValueError as exc:
        raise ConfigError(f"sim.privacy: {exc}") from None
    return dataclasses.replace(spec, scheduler=scheduler, aggregator=aggregator)


def check_privacy_dim(probes: PrivateProbes | None, dim: int, sketch_dim: int | None) -> None:
    """Refuse a direction sketch longer than the model, or than ``sim.sketch_dim`` (the length
    of the updates the schedulers are shown), with a ``ConfigError`` naming the key."""
    if probes is None:
        return
    for name, own in probes.by_method or ():  # each method's own sketch, if it sets one
        if any(key in ("sketch_dim", "updates_as") for key, _ in own):
            mine = dataclasses.replace(probes, **dict(own), by_method=None)
            _check_dim(mine, dim, sketch_dim, f"sim.privacy.by_method.{name}")
    _check_dim(probes, dim, sketch_dim, "sim.privacy")


def _check_dim(probes: PrivateProbes, dim: int, sketch_dim: int | None, key: str) -> None:
    if sketch_dim is not None and sketch_dim < dim and probes.updates_as == "direction":
        if probes.sketch_dim > sketch_dim:
            raise ConfigError(
                f"{key}.sketch_dim {probes.sketch_dim} is larger than sim.sketch_dim "
                f"{sketch_dim}, the length of the updates the schedulers are shown"
            )
    try:
        probes.check_dim(dim)
    except ValueError as exc:
        raise ConfigError(f"{key}.{exc}") from None
