"""One run's round over a `Gatherer`: the runtimes that fetch each client's work one round at a
time (the Flower strategies over Flower's Grid, the tests' in-process loop) play the round of
`adcs.round.machine.RunRound` through `play` (docs/design.md §1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from adcs.aggregation import F32Array
from adcs.round.contract import BoolArray, IntArray
from adcs.round.machine import Available, PlayedRound, RoundRules, RunRound
from adcs.schedulers.base import ClientStats, LossSource, ProbeKind

__all__ = ["Gatherer", "Played", "Trained", "play"]


@dataclass(frozen=True, eq=False)
class Trained:
    """A client's valid training reply.

    Attributes
    ----------
    features : ndarray of shape (dim,), float32, or None
        What the round sees of the update Δ (the update itself, or its sketch); None where the
        gatherer was asked for none (``updates(..., features=False)``).
    loss : float
        The client's first-minibatch loss at w⁽ᵗ⁾ (NaN when the reply carries none).
    num_examples : float
        The client's reported number of training examples (NaN when it reports none).
    reply : Any
        What the runtime needs to aggregate it (e.g. the reply's arrays).
    """

    features: F32Array | None
    loss: float
    num_examples: float
    reply: Any = None


class Gatherer(Protocol):
    """How one runtime computes or fetches one round's client work at w⁽ᵗ⁾."""

    def losses(self, clients: IntArray, source: LossSource) -> dict[int, float | str]:
        """Each client's loss, or why there is none."""
        ...

    def updates(self, clients: IntArray, features: bool = True) -> dict[int, Trained | str]:
        """Each client's training, or why there is none; with ``features=False`` the round
        will not look at the updates (the scheduler does not observe them and no rule aggregates
        them), so a gatherer may leave `Trained.features` None."""
        ...


@dataclass(frozen=True, eq=False)
class Played:
    """One round played over a `Gatherer`: its record and what the runtime got.

    Attributes
    ----------
    record : PlayedRound
    held : dict of int to Trained
        Every valid training of the round (probed and/or selected).
    failed : dict of int to str
        Client → why its reply was excluded or never came.
    step : ndarray of shape (dim,), float32, or None
        With an aggregation rule (``RoundRules.aggregator``), its step before η_s; else None
        (the runtime forms Σ c_i Δ_i over the delivered clients with ``record.coef``).
    """

    record: PlayedRound
    held: dict[int, Trained]
    failed: dict[int, str]
    step: F32Array | None = None

    def rows(self, clients: Iterable[int], dim: int) -> F32Array:
        """The features of ``clients``' trainings, shape (n, dim)."""
        return _rows([self.held[int(c)].features for c in clients], dim)


def play(
    rules: RoundRules,
    state: Any,
    t: int,
    available: BoolArray,
    rng: np.random.Generator,
    gatherer: Gatherer,
    feature_dim: int,
) -> Played:
    """Steps 1–5 of one run's round (module docstring), the client work asked of ``gatherer``.

    A client whose probe fails is not selectable this round; a selected client whose training
    fails is a dropout (its update is not aggregated, the weights are renormalised). With an
    aggregation rule, the scheduler observes what the rule received (a poison's updates).

    Parameters
    ----------
    rules : RoundRules
    state : Any
        The scheduler's state before the round.
    t : int
        The round, from 0.
    available : ndarray of bool, shape (n_clients,)
    rng : numpy.random.Generator
        The scheduler's stream.
    gatherer : Gatherer
    feature_dim : int
        Length of `Trained.features` (for the empty matrix of a round without updates).
    """
    rnd = RunRound(rules, state, t, Available.of(available), rng)
    stats, held, failed = _gather(rnd, gatherer, feature_dim)
    rnd.select(stats)
    missing = rnd.to_train
    lost: dict[int, str] = {}
    seen = rnd.observes or rules.aggregator is not None
    if missing.size:
        more, lost = _split(gatherer.updates(missing, features=seen))
        held.update(more)
        failed.update(lost)
    coef = rnd.trained(lost)
    delivered = rnd.aggregated
    updates = _rows([held[int(c)].features for c in delivered] if seen else [], feature_dim)
    losses = np.asarray([held[int(c)].loss for c in delivered], dtype=np.float64)
    step = None
    if rules.aggregator is not None:  # the rule sees the updates one by one; may replace some
        updates, step = rnd.aggregate(delivered, updates, coef[rnd.returned])
    return Played(rnd.observe(updates, losses), held, failed, step)


def _gather(
    rnd: RunRound, gatherer: Gatherer, feature_dim: int
) -> tuple[ClientStats, dict[int, Trained], dict[int, str]]:
    """Step 2 over a gatherer: the statistics (clients whose probe failed made unavailable),
    the trainings held (an update probe's, reused for aggregation) and the failures."""
    probe, targets, available = rnd.probe, rnd.probed, rnd.stats.available
    if probe.kind is ProbeKind.NONE:
        return rnd.stats, {}, {}
    if probe.kind is ProbeKind.LOSSES:
        losses = gatherer.losses(targets, probe.loss_source)
        failed = {c: why for c, why in losses.items() if isinstance(why, str)}
        got = np.asarray([c for c in targets if int(c) not in failed], dtype=np.intp)
        values = np.asarray([losses[int(c)] for c in got], dtype=np.float64)
        return ClientStats(_without(available, failed), got, values), {}, failed
    held, failed = _split(gatherer.updates(targets))
    got = np.asarray(sorted(held), dtype=np.intp)
    stats = ClientStats(
        _without(available, failed),
        got,
        np.asarray([held[int(c)].loss for c in got], dtype=np.float64),
        _rows([held[int(c)].features for c in got], feature_dim),
    )
    return stats, held, failed


def _split(replies: Mapping[int, Trained | str]) -> tuple[dict[int, Trained], dict[int, str]]:
    held = {c: r for c, r in replies.items() if not isinstance(r, str)}
    return held, {c: r for c, r in replies.items() if isinstance(r, str)}


def _without(available: BoolArray, failed: Mapping[int, str]) -> BoolArray:
    """``available`` less the clients whose probe just failed (not selectable this round)."""
    out = available.copy()
    out[list(failed)] = False
    return out


def _rows(rows: list[F32Array | None], dim: int) -> F32Array:
    if not rows:
        return np.empty((0, dim), dtype=np.float32)
    if any(row is None for row in rows):
        raise RuntimeError("a gatherer asked for features returned none")
    return np.stack(rows)  # type: ignore[arg-type]
