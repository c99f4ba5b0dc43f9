"""One run's round, written once for every runtime (docs/design.md §1 and §8; paper Algorithm 1).

A round of one run is a small state machine, `RunRound`. A runtime creates it at the
round's start and answers what it asks; the round holds every rule, the runtime only computes or
fetches what the round names:

1. **probe** — creating the round calls ``scheduler.probe``; `RunRound.probe` and
   `RunRound.probed` say what to gather at w⁽ᵗ⁾ (minibatch or full losses, or local updates,
   of which clients). A *blind* round (``ProbeKind.NONE``) selects at once
   (`RunRound.selection`), before anything is computed;
2. **gather** — the runtime hands what came in to `RunRound.select` as
   `ClientStats`; the round counts the clients with non-finite
   statistics and shows the scheduler the updates sketched (``RoundRules.sketch``);
3. **select** — ``scheduler.select``, held to the contract of
   [`adcs.round.contract.check_selection`][adcs.round.contract.check_selection]; simulated dropouts
   (``RoundRules.dropout``) and, on a simulated clock (``RoundRules.clock``), the deadline and
   over-commitment decide who is aggregated. `RunRound.to_train` are then the selected clients whose
   update the runtime must still compute (returning, not probed);
4. **train and aggregate** — `RunRound.trained` takes which of them failed (a live runtime's
   own dropouts) and gives the coefficients c of w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R} c_i Δ_i
   ([`adcs.round.contract.aggregation_weights`][adcs.round.contract.aggregation_weights]); with an aggregation rule
   (``RoundRules.aggregator``: a robust rule, a poison) `RunRound.aggregate` turns the individual
   updates into the step;
5. **observe** — `RunRound.observe` shows a scheduler that learns from updates the delivered
   ones and returns the round's `PlayedRound` (who was probed, selected and aggregated,
   the weights, dropouts, client computations, non-finite clients, simulated seconds).

How the client work is executed is the runtime's: `adcs.round.play.play` drives one round over
any `adcs.round.play.Gatherer` (losses and updates of some clients, or why there is none) — the Flower
strategies (`adcs.flower.round`) over Flower's Grid, the tests' in-process runtime over a
plain loop; the simulator (`adcs.sim.lockstep`) drives many runs' rounds in lockstep and
computes their jobs in batched products (`adcs.sim.jobs`, `adcs.sim.lot`).

What a live runtime cannot offer: a simulated clock (``RoundRules.clock``: round durations,
deadline, over-commitment — a live runtime's clock is the wall clock) and simulated dropouts
(``RoundRules.dropout`` — a live runtime's dropouts are its clients' real failures, handed to
`RunRound.trained`).
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from adcs.aggregation import Aggregator, F32Array
from adcs.registry import PluginError, raised_in
from adcs.round.clock import RoundClock, locate
from adcs.round.contract import (
    BoolArray,
    F64Array,
    IntArray,
    SelectionError,
    aggregation_weights,
    check_selection,
    checked_probe,
)
from adcs.schedulers.base import (
    ClientStats,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
    check_scheduler,
)

__all__ = ["Available", "PlayedRound", "RoundRules", "RunRound"]

_NOBODY: IntArray = np.empty(0, dtype=np.intp)
_NOBODY.setflags(write=False)
_NONE_BACK: BoolArray = np.zeros(0, dtype=bool)
_NONE_BACK.setflags(write=False)
_NO_WEIGHTS: F64Array = np.zeros(0)
_NO_WEIGHTS.setflags(write=False)


@functools.lru_cache(maxsize=64)
def _all_back(k: int) -> BoolArray:
    """Every one of k selected clients returns (read-only, shared: no dropout and no clock)."""
    back = np.ones(k, dtype=bool)
    back.setflags(write=False)
    return back


@dataclass(frozen=True)
class Available:
    """A round's availability: the mask (n_clients,), the available clients (ascending) and the
    statistics of a blind round (nothing probed)."""

    mask: BoolArray
    clients: IntArray
    blind: ClientStats

    @staticmethod
    def of(mask: BoolArray) -> Available:
        """The availability of a mask of shape (n_clients,)."""
        mask = np.asarray(mask, dtype=bool)
        clients = np.flatnonzero(mask)
        return Available(mask, clients, ClientStats.blind(mask, clients))


# ---------------------------------------------------------------------- the round


@dataclass(frozen=True, eq=False)
class RoundRules:
    """What a run's rounds follow besides its scheduler's state (the same every round).

    Attributes
    ----------
    scheduler : Scheduler
        The scheduler the rounds ask (with over-commitment: the one asked for ⌈(1 + o)·m⌉).
    who : str
        Names the run in errors and logs (e.g. its run id).
    target : int or None
        Updates wanted per round (m; fewer than the invited with over-commitment); None: the
        scheduler's m.
    base_weights : ndarray of shape (n_clients,), callable, or None
        p_n of the aggregation weights (None: uniform); a callable is asked when the weights
        are formed (a live runtime learns its clients' data sizes from their replies).
    sketch : callable, optional
        Updates (n, dim) → what the scheduler sees of them (n, k) (``SimConfig.sketch_dim``).
    dropout : callable, optional
        ``dropout(t, clients)`` → which of the selected clients deliver: a simulated dropout.
    clock : RoundClock, optional
        A simulated clock (deadline, over-commitment, round seconds).
    aggregator : Aggregator, optional
        A rule in place of the weighted mean Σ c_i Δ_i (`adcs.aggregation`).
    """

    scheduler: Scheduler
    who: str = "the scheduler"
    target: int | None = None
    base_weights: F64Array | Callable[[], F64Array | None] | None = None
    sketch: Callable[[F32Array], F32Array] | None = None
    dropout: Callable[[int, IntArray], BoolArray] | None = None
    clock: RoundClock | None = None
    aggregator: Aggregator | None = None

    def __post_init__(self) -> None:
        check_scheduler(self.scheduler)
        if self.target is not None and not 1 <= self.target <= self.scheduler.m:
            raise ValueError(f"target must be in [1, {self.scheduler.m}], got {self.target!r}")
        if self.aggregator is not None and not isinstance(self.aggregator, Aggregator):
            raise ValueError(
                f"aggregator must follow the Aggregator protocol, got {type(self.aggregator).__name__}"
            )

    @functools.cached_property
    def observes(self) -> bool:
        """Whether the scheduler is shown the delivered updates (asked once)."""
        return bool(self.scheduler.observes_updates)

    def base(self) -> F64Array | None:
        """p_n now (None: uniform)."""
        return self.base_weights() if callable(self.base_weights) else self.base_weights


class _Aggregated:
    """Who of a round's selected clients was aggregated, with their coefficients (a played
    round's record, and the round itself once it has selected and trained)."""

    selected: IntArray
    returned: BoolArray
    coef: F64Array

    @property
    def aggregated(self) -> IntArray:
        """Selected clients whose update entered the aggregate, in selection order."""
        return self._of_returned(self.selected)

    @property
    def aggregated_coef(self) -> F64Array:
        """The coefficients c of `aggregated`, (n,)."""
        return self._of_returned(self.coef)

    def _of_returned(self, values: Any) -> Any:
        """``values[returned]`` (shape (k,) → (n,)); ``values`` itself when every selected
        client returned (no dropout and no clock: nothing to copy)."""
        return values if self.returned is _all_back(self.selected.size) else values[self.returned]


@dataclass(frozen=True, eq=False)
class PlayedRound(_Aggregated):
    """The record of one run's round (client indices throughout).

    Attributes
    ----------
    round_idx : int
        t, from 0.
    probe : Probe
    probed : ndarray of shape (n_probed,)
        The clients the probe named, ascending.
    selection : Selection
        The scheduler's choice (its weights, if any).
    selected : ndarray of shape (k,)
        The checked selection, in the scheduler's order.
    returned : ndarray of bool, shape (k,)
        Which selected clients' updates were aggregated.
    coef : ndarray of shape (k,)
        Their coefficients c (0 where not aggregated).
    failed : int
        Selected clients not aggregated: dropped out, failed, or late for the deadline (a
        client the over-commitment did not need is not failed).
    client_updates : int
        Local updates computed: the probe's and those of aggregated clients it did not hold.
    loss_evals : int
        Losses a loss probe returned.
    non_finite : ndarray of shape (n_bad,)
        Probed clients whose statistics held NaN or inf (excluded from ranking).
    round_s, busy_s : float or None
        Simulated seconds of the round and client-seconds spent (with a clock).
    state : Any
        The scheduler's state after the round.
    """

    round_idx: int
    probe: Probe
    probed: IntArray
    selection: Selection
    selected: IntArray
    returned: BoolArray
    coef: F64Array
    failed: int
    client_updates: int
    loss_evals: int
    non_finite: IntArray
    round_s: float | None
    busy_s: float | None
    state: Any


def _selected(
    rules: RoundRules, state: Any, t: int, stats: ClientStats, rng: np.random.Generator
) -> tuple[Selection, Any]:
    """``rules.scheduler.select(state, t, stats, rng)``, refused unless it is a
    ``(Selection, state)`` pair.

    Raises
    ------
    SelectionError
        Naming the run, the round and what the scheduler returned.
    PluginError
        The scheduler raised (naming it, the run and the round).
    """
    try:
        returned = rules.scheduler.select(state, t, stats, rng)
    except (SelectionError, PluginError, MemoryError):
        raise
    except Exception as exc:  # the scheduler's own failure: named, with the run and the round
        raise raised_in(
            "scheduler", rules.scheduler, f"select, run {rules.who} at round {t}", exc
        ) from exc
    pair = isinstance(returned, tuple) and len(returned) == 2
    if pair and isinstance(returned[0], Selection):
        return returned
    what = f"({type(returned[0]).__name__}, state)" if pair else type(returned).__name__
    raise SelectionError(
        f"{rules.who} at round {t} must return (Selection, state) from select, got {what}: "
        f"{reprlib.repr(returned[0] if pair else returned)}"
    )


class RunRound(_Aggregated):
    """One run's round t as a state machine (module docstring: create, select, trained, observe).

    Parameters
    ----------
    rules : RoundRules
    state : Any
        The scheduler's state before the round.
    t : int
        The round, from 0.
    available : Available
    rng : numpy.random.Generator
        The scheduler's stream (advanced by its calls).
    """

    def __init__(
        self,
        rules: RoundRules,
        state: Any,
        t: int,
        available: Available,
        rng: np.random.Generator,
    ) -> None:
        self.rules, self.t, self.rng = rules, t, rng
        scheduler = rules.scheduler
        asked = scheduler.probe(state, t, available.mask, rng)
        self.probe: Probe = checked_probe(asked, available.mask.shape[0], rules.who, t)
        self.probed: IntArray = _targets(self.probe, available)
        self.state = state
        self.selection: Selection | None = None
        self.non_finite: IntArray = _NOBODY
        self._blind_clients: IntArray | None = None
        if self.probe.kind is ProbeKind.NONE:
            blind = available.blind
            self.selection, self.state = _selected(rules, state, t, blind, rng)
            # checked now: the runtime plans this round's jobs from a blind selection
            self._blind_clients = self._checked(blind)
        self.stats = available.blind
        self.selected: IntArray = _NOBODY
        self.returned: BoolArray = _NONE_BACK
        self.coef: F64Array = _NO_WEIGHTS
        self.failed = 0
        self.round_s: float | None = None
        self.busy_s: float | None = None

    @property
    def round_idx(self) -> int:
        """t, from 0."""
        return self.t

    @property
    def observes(self) -> bool:
        """Whether the scheduler is shown the delivered updates (step 5)."""
        return self.rules.observes

    @property
    def held(self) -> IntArray:
        """Clients whose update the probe holds (ascending; reused if they are aggregated)."""
        return self.stats.clients if self.stats.updates is not None else _NOBODY

    def select(self, stats: ClientStats) -> None:
        """Steps 2–3: take the gathered ``stats`` and select; `to_train` then says whose
        update is still to be computed.

        ``stats.available`` is what may be selected (a live runtime drops the clients whose
        probe failed).
        """
        rules, t = self.rules, self.t
        blind, self.stats = self.stats, stats
        if self.selection is None:
            self.non_finite = stats.non_finite()
            seen = stats
            if rules.sketch is not None and stats.updates is not None:
                seen = dataclasses.replace(stats, updates=rules.sketch(stats.updates))
            self.selection, self.state = _selected(rules, self.state, t, seen, self.rng)
        clients = self._blind_clients  # checked at creation, against the same clients
        if clients is None or stats.available is not blind.available:
            clients = self._checked(stats)
        m = rules.scheduler.m
        if rules.dropout is None and rules.clock is None:  # everyone selected returns
            self.selected, self.returned = clients, _all_back(clients.size)
            return
        ok = _all_back(clients.size) if rules.dropout is None else rules.dropout(t, clients)
        if rules.clock is None:
            self.failed = clients.size - int(np.count_nonzero(ok))
        else:
            target = min(m if rules.target is None else rules.target, clients.size)
            ok, self.failed, self.round_s, self.busy_s = rules.clock.time(
                self.probe, self.probed, stats, clients, ok, target
            )
        self.selected, self.returned = clients, ok

    def _checked(self, stats: ClientStats) -> IntArray:
        """The selection's clients, shape (k,), after the selection contract's check."""
        assert self.selection is not None
        who, m = f"{self.rules.who} at round {self.t}", self.rules.scheduler.m
        return check_selection(
            self.selection.clients, stats.available, m, who=who, n_available=stats.n_available(),
            weights=self.selection.weights,
        )  # fmt: skip

    @property
    def to_train(self) -> IntArray:
        """Selected clients that return and whose update the probe does not hold, in order."""
        going = self.selected[self.returned]
        return going[~locate(self.held, going)[0]]

    @property
    def loss_evals(self) -> int:
        """Losses a loss probe returned."""
        return self.stats.n_probed if self.probe.kind is ProbeKind.LOSSES else 0

    @property
    def client_updates(self) -> int:
        """Local updates the round computed: the probe's, and those of delivered clients whose
        update the probe did not hold."""
        held, delivered = self.held, self.aggregated
        if held.size == self.stats.n_clients:  # the probe held every client's update
            return held.size
        fresh = delivered.size
        if held.size:
            fresh -= int(np.count_nonzero(locate(held, delivered)[0]))
        return held.size + fresh

    def trained(self, failed: Collection[int] = ()) -> F64Array:
        """Step 4: take which clients' training failed; the coefficients c of shape (k,)."""
        if failed:
            lost = np.fromiter(failed, dtype=np.intp)
            self.failed += int(np.count_nonzero(self.returned & np.isin(self.selected, lost)))
            self.returned = self.returned & ~np.isin(self.selected, lost)
        assert self.selection is not None
        self.coef = aggregation_weights(
            self.selected,
            self.returned,
            scheduler_weights=self.selection.weights,
            base=self.rules.base(),
        )
        return self.coef

    def aggregate(
        self, clients: IntArray, updates: F32Array, coef: F64Array
    ) -> tuple[F32Array, F32Array]:
        """The aggregation rule over the delivered clients' individual updates (n, dim).

        Returns what the server received (n, dim) and the step (dim,) before η_s.
        """
        aggregator = self.rules.aggregator
        assert aggregator is not None
        return aggregator.aggregate(self.state, self.t, clients, updates, coef, self.stats)

    def observe(self, updates: F32Array, losses: F64Array) -> PlayedRound:
        """Step 5: show the aggregated updates (n, dim) and losses (n,); the round's record."""
        rules = self.rules
        if self.observes:
            seen = updates if rules.sketch is None else rules.sketch(updates)
            self.state = rules.scheduler.observe(self.state, self.t, self.aggregated, seen, losses)
        return self.played()

    def played(self) -> PlayedRound:
        """The round's record, once it has selected and trained (and observed, for a scheduler
        that observes): the one shape every runtime and path keeps of a round."""
        assert self.selection is not None
        return PlayedRound(
            round_idx=self.t,
            probe=self.probe,
            probed=self.probed,
            selection=self.selection,
            selected=self.selected,
            returned=self.returned,
            coef=self.coef,
            failed=self.failed,
            client_updates=self.client_updates,
            loss_evals=self.loss_evals,
            non_finite=self.non_finite,
            round_s=self.round_s,
            busy_s=self.busy_s,
            state=self.state,
        )


def _targets(probe: Probe, available: Available) -> IntArray:
    """The clients to probe: distinct, available, ascending."""
    if probe.kind is ProbeKind.NONE:
        return _NOBODY
    if probe.clients is None:
        return available.clients
    return np.unique(probe.targets(available.mask)).astype(np.intp, copy=False)
