"""The scheduling protocol shared by every method (DESIGN §1, Algorithm 1 generalised).

A scheduler is an immutable object holding validated hyperparameters. Its per-run state is a
separate value that the runtime (the simulator, or the Flower strategy) keeps and passes back in, so
one scheduler object can drive many independent runs at once. One round is:

1. ``probe = scheduler.probe(state, round_idx, available, rng)`` — what must be gathered at the
   current model w⁽ᵗ⁾ before choosing: nothing, losses, or updates (with their losses, free).
2. the runtime gathers it and builds :class:`ClientStats`.
3. ``selection, state = scheduler.select(state, round_idx, stats, rng)`` — exactly ``m`` distinct
   available clients.
4. the runtime trains the selected clients (reusing probed updates), aggregates, steps the model,
   then calls ``state = scheduler.observe(state, round_idx, selection.clients, updates, losses)``
   with the selected clients' updates (most methods ignore it).

A scheduler may declare ``observes_updates = False`` (the built-in ones do, except DivFL's stale
form) to tell runtimes that :meth:`Scheduler.observe` does not need individual updates, so rounds
without a probe can skip computing them; runtimes assume ``True`` when it is absent.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.floating[Any]]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]


class ProbeKind(enum.Enum):
    """What a scheduler needs gathered at w⁽ᵗ⁾ before it can choose."""

    NONE = "none"
    """Nothing: choose blind (Uniform, cached ADCS/StaticDPP rounds)."""
    LOSSES = "losses"
    """The loss of each probed client at w⁽ᵗ⁾ (PowerOfChoice)."""
    UPDATES = "updates"
    """The local update of each probed client at w⁽ᵗ⁾, with the minibatch loss it was computed on."""


class LossSource(enum.Enum):
    """Where a probed loss is measured."""

    MINIBATCH = "minibatch"
    """One minibatch of size B (the cheap estimate, Cho et al.'s cpow-d)."""
    FULL = "full"
    """The client's whole local training set."""


@dataclass(frozen=True)
class Probe:
    """A request for client statistics.

    Attributes
    ----------
    kind : ProbeKind
        What to gather.
    clients : ndarray of shape (n_probed,) or None
        Indices of the clients to probe; ``None`` means every available client.
    loss_source : LossSource
        For ``ProbeKind.LOSSES``: minibatch estimate or full local loss.
    """

    kind: ProbeKind
    clients: IntArray | None = None
    loss_source: LossSource = LossSource.MINIBATCH

    def targets(self, available: BoolArray) -> IntArray:
        """Indices the runtime must probe, given the availability mask of shape (n_clients,)."""
        if self.kind is ProbeKind.NONE:
            return np.empty(0, dtype=np.intp)
        if self.clients is None:
            return np.flatnonzero(available).astype(np.intp)
        clients = np.asarray(self.clients, dtype=np.intp)
        return clients[available[clients]]


NO_PROBE = Probe(ProbeKind.NONE)


@dataclass(frozen=True, eq=False)
class ClientStats:
    """What the runtime gathered for one round, on every client axis of length ``n_clients``.

    Attributes
    ----------
    available : ndarray of bool, shape (n_clients,)
        Which clients can be selected this round.
    probed : ndarray of bool, shape (n_clients,)
        Which clients' statistics below are valid.
    losses : ndarray of shape (n_clients,) or None
        Probed losses (quality q_n); entries of unprobed clients are NaN.
    updates : ndarray of shape (n_clients, dim) or None
        Probed local updates Δ_n = w_n^{(t,E)} − w⁽ᵗ⁾; rows of unprobed clients are ignored.
    """

    available: BoolArray
    probed: BoolArray
    losses: FloatArray | None = None
    updates: FloatArray | None = None

    @property
    def n_clients(self) -> int:
        return int(self.available.shape[0])

    @staticmethod
    def blind(available: BoolArray) -> ClientStats:
        """Statistics of a round in which nothing was probed."""
        available = np.asarray(available, dtype=bool)
        return ClientStats(available=available, probed=np.zeros_like(available))

    def usable(self) -> BoolArray:
        """Available clients whose probed statistics are all finite, shape (n_clients,)."""
        ok = self.available & self.probed
        if self.losses is not None:
            ok = ok & np.isfinite(self.losses)
        if self.updates is not None:
            ok = ok & np.isfinite(self.updates).all(axis=1)
        return ok


@dataclass(frozen=True, eq=False)
class Selection:
    """A scheduler's choice for one round.

    Attributes
    ----------
    clients : ndarray of shape (m,)
        Distinct client indices, in the order chosen.
    weights : ndarray of shape (m,) or None
        Aggregation weights overriding the runtime's normalised p_n (used by unbiased variants that
        reweight by inverse inclusion probability: the update is Σ_i weights_i Δ_i). ``None`` means
        the runtime's default p_n / Σ_S p.
    """

    clients: IntArray
    weights: FloatArray | None = None


@runtime_checkable
class Scheduler(Protocol):
    """The protocol every scheduler implements; see the module docstring for the round order."""

    @property
    def m(self) -> int:
        """Clients selected per round."""
        ...

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> Any:
        """Fresh per-run state for ``n_clients`` clients (``data_sizes`` of shape (n_clients,))."""
        ...

    def probe(
        self, state: Any, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        """What to gather at the current model before :meth:`select`."""
        ...

    def select(
        self, state: Any, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, Any]:
        """Exactly ``m`` distinct available clients, and the new state."""
        ...

    def observe(
        self,
        state: Any,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> Any:
        """Take the selected clients' updates (shape (m, dim)) after training; return new state."""
        ...


def check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is an int ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_unit_interval(name: str, value: float) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``0 <= value <= 1``."""
    if not isinstance(value, (int, float, np.floating)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")


def check_available(available: BoolArray, n_clients: int, m: int) -> BoolArray:
    """Validate an availability mask and that at least ``m`` clients are available."""
    available = np.asarray(available)
    if available.shape != (n_clients,) or available.dtype != np.bool_:
        raise ValueError(
            f"available must be a bool array of shape ({n_clients},), "
            f"got {available.dtype} array of shape {available.shape}"
        )
    n_avail = int(available.sum())
    if n_avail < m:
        raise ValueError(f"only {n_avail} clients are available but m={m} must be selected")
    return available


def top_m(scores: FloatArray, m: int, eligible: BoolArray) -> IntArray:
    """The ``m`` eligible indices with the largest scores, best first.

    Ties go to the lowest index; NaN scores rank below every number. Raises ``ValueError`` if fewer
    than ``m`` indices are eligible.
    """
    eligible = np.asarray(eligible, dtype=bool)
    if int(eligible.sum()) < m:
        raise ValueError(f"only {int(eligible.sum())} clients are eligible but m={m} are needed")
    key = np.where(np.isnan(scores), -np.inf, scores).astype(np.float64)
    idx = np.flatnonzero(eligible)
    # lexsort sorts by the last key first: descending score, then ascending index
    order = np.lexsort((idx, -key[idx]))
    nan_last = np.argsort(np.isnan(scores[idx][order]), kind="stable")
    return idx[order][nan_last][:m].astype(np.intp)
