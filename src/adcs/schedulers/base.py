"""The scheduling protocol shared by every method (docs/design.md §1, Algorithm 1 generalised).

A scheduler is an immutable object holding validated hyperparameters. Its per-run state is a
separate value that the runtime (the simulator, or the Flower strategy) keeps and passes back in, so
one scheduler object can drive many independent runs at once; it must pickle (checkpoints and
workers copy it). One round is:

1. ``probe = scheduler.probe(state, round_idx, available, rng)`` — what must be gathered at the
   current model w⁽ᵗ⁾ before choosing: nothing, losses, or updates (with their losses, free).
2. the runtime gathers it and builds [`ClientStats`][adcs.schedulers.base.ClientStats].
3. ``selection, state = scheduler.select(state, round_idx, stats, rng)`` — exactly ``m`` distinct
   available clients.
4. the runtime trains the selected clients (reusing probed updates), aggregates, steps the model,
   then calls ``state = scheduler.observe(state, round_idx, selection.clients, updates, losses)``
   with the selected clients' updates (most methods ignore it).

A scheduler declares ``observes_updates``: ``False`` tells runtimes that
[`Scheduler.observe`][adcs.schedulers.base.Scheduler.observe] does not need individual updates, so
rounds without a probe can skip computing them — and they then do not call ``observe`` at all.
``observe`` receives the selected clients that returned their update (a dropped client is not
observed).

When fewer than ``m`` clients are available, ``select`` returns all of them (none when none is):
exactly min(m, available) distinct available clients, the contract of [`adcs.round.contract`][adcs.round.contract].
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
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

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ProbeKind):
            raise ValueError(f"kind must be a ProbeKind, got {self.kind!r}")
        if not isinstance(self.loss_source, LossSource):
            raise ValueError(f"loss_source must be a LossSource, got {self.loss_source!r}")
        if self.clients is None:
            return
        clients = np.asarray(self.clients)
        if clients.ndim != 1 or (clients.size and clients.dtype.kind not in "iu"):
            raise ValueError(
                f"clients must be a 1-D array of client indices, got a {clients.dtype} array "
                f"of shape {clients.shape}"
            )
        if clients.size and int(clients.min()) < 0:
            raise ValueError(f"clients must be client indices >= 0, got {int(clients.min())}")
        object.__setattr__(self, "clients", clients.astype(np.intp, copy=False))

    def targets(self, available: BoolArray) -> IntArray:
        """Indices the runtime must probe, given the availability mask of shape (n_clients,).

        Raises
        ------
        ValueError
            ``clients`` names a client outside [0, n_clients).
        """
        if self.kind is ProbeKind.NONE:
            return np.empty(0, dtype=np.intp)
        if self.clients is None:
            return np.flatnonzero(available).astype(np.intp)
        clients = self.clients
        if clients.size and int(clients.max()) >= available.shape[0]:
            raise ValueError(
                f"clients must be client indices in [0, {available.shape[0]}), "
                f"got {int(clients.max())}"
            )
        return clients[available[clients]]


NO_PROBE = Probe(ProbeKind.NONE)


@dataclass(frozen=True, eq=False)
class ClientStats:
    """What the runtime gathered for one round: the availability mask and the probed clients' data.

    Statistics are held for the probed clients only, so a round costs O(n_probed · dim) memory,
    never O(n_clients · dim).

    Attributes
    ----------
    available : ndarray of bool, shape (n_clients,)
        Which clients can be selected this round.
    clients : ndarray of shape (n_probed,), int
        The probed clients, distinct and ascending. Row i of ``losses`` and ``updates`` is client
        ``clients[i]``.
    losses : ndarray of shape (n_probed,) or None
        Probed losses (quality q_n); NaN where a client's probe failed.
    updates : ndarray of shape (n_probed, dim) or None
        Probed local updates Δ_n = w_n^{(t,E)} − w⁽ᵗ⁾; non-finite rows where a probe failed.
    """

    available: BoolArray
    clients: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    losses: FloatArray | None = None
    updates: FloatArray | None = None

    def __post_init__(self) -> None:
        available, clients = np.asarray(self.available), np.asarray(self.clients)
        if available.ndim != 1 or available.dtype != np.bool_:
            raise ValueError(
                f"available must be a bool array of shape (n_clients,), got a {available.dtype} "
                f"array of shape {available.shape}"
            )
        if clients.ndim != 1 or (clients.size and clients.dtype.kind not in "iu"):
            raise ValueError(
                f"clients must be a 1-D array of client indices, got a {clients.dtype} array "
                f"of shape {clients.shape}"
            )
        if clients.size and not (
            0 <= int(clients[0]) and int(clients[-1]) < available.shape[0]
            and (clients.size == 1 or bool((clients[1:] > clients[:-1]).all()))
        ):  # fmt: skip
            raise ValueError(
                f"clients must be distinct and ascending in [0, {available.shape[0]}), "
                f"got {clients!r:.120}"
            )
        n = clients.shape[0]
        if self.losses is not None and np.shape(self.losses) != (n,):
            raise ValueError(
                f"losses must have shape ({n},), one per probed client, got {np.shape(self.losses)}"
            )
        if self.updates is not None and (np.ndim(self.updates) != 2 or len(self.updates) != n):
            raise ValueError(
                f"updates must have shape ({n}, dim), one row per probed client, got "
                f"{np.shape(self.updates)}"
            )
        object.__setattr__(self, "available", available)
        object.__setattr__(self, "clients", clients.astype(np.intp, copy=False))

    @property
    def n_clients(self) -> int:
        return int(self.available.shape[0])

    @property
    def n_probed(self) -> int:
        return int(self.clients.shape[0])

    def n_available(self) -> int:
        """How many clients are available (from
        [`available_clients`][adcs.schedulers.base.ClientStats.available_clients] when the runtime
        gave them, so that a large population's mask is not scanned again)."""
        clients = self.__dict__.get("_available_clients")
        return int(np.count_nonzero(self.available)) if clients is None else int(clients.size)

    @staticmethod
    def blind(available: BoolArray, clients: IntArray | None = None) -> ClientStats:
        """Statistics of a round in which nothing was probed.

        ``clients``, when the runtime has them, are the available clients (ascending), so that
        [`available_clients`][adcs.schedulers.base.ClientStats.available_clients] need not scan the
        mask.
        """
        stats = ClientStats(available=np.asarray(available, dtype=bool))
        if clients is not None:
            stats.__dict__["_available_clients"] = clients  # seeds the cached property
        return stats

    def available_clients(self) -> IntArray:
        """The available clients, ascending, shape (n_available,) (computed once)."""
        return self._available_clients

    @functools.cached_property
    def _available_clients(self) -> IntArray:
        return np.flatnonzero(self.available).astype(np.intp)

    def finite(self) -> BoolArray:
        """Probed clients whose statistics (loss and update) are all finite, shape (n_probed,).

        Computed once per ``ClientStats`` (the runtime and the scheduler both ask).
        """
        return self._finite

    @functools.cached_property
    def _finite(self) -> BoolArray:
        ok = np.ones(self.n_probed, dtype=bool)
        if self.losses is not None:
            ok &= np.isfinite(self.losses)
        if self.updates is not None and self.updates.size:
            ok &= finite_rows(self.updates)
        return ok

    def usable(self) -> BoolArray:
        """Probed clients that are available and whose statistics are all finite, shape (n_probed,).

        Every scheduler ranks only these; the others are chosen only to keep a selection full,
        after every usable client.
        """
        return np.asarray(self.available[self.clients] & self.finite(), dtype=bool)

    def non_finite(self) -> IntArray:
        """Available probed clients with a NaN or infinite loss or update (client indices).

        The runtime counts and logs these (a scheduler never ranks them, see
        [`usable`][adcs.schedulers.base.ClientStats.usable]).
        """
        bad = self.available[self.clients] & ~self.finite()
        return np.asarray(self.clients[bad], dtype=np.intp)


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


def finite_rows(rows: FloatArray) -> BoolArray:
    """Which rows of a 2-D array hold only finite numbers, shape (n_rows,).

    A row sum is finite only if every entry is (NaN and ±inf propagate), so one fast product
    answers for almost every row; rows whose sum is not finite — a non-finite entry, or a sum
    that overflowed — are checked entry by entry.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.isfinite(rows @ np.ones(rows.shape[1], dtype=rows.dtype))
        if not ok.all():
            suspect = np.flatnonzero(~ok)
            ok[suspect] = np.isfinite(rows[suspect]).all(axis=1)
    return np.asarray(ok)


@runtime_checkable
class Scheduler(Protocol):
    """The protocol every scheduler implements; see the module docstring for the round order."""

    @property
    def m(self) -> int:
        """Clients selected per round."""
        ...

    @property
    def observes_updates(self) -> bool:
        """Whether [`observe`][adcs.schedulers.base.Scheduler.observe] needs the selected clients'
        individual updates.

        ``False`` lets a runtime skip computing them in rounds without an update probe.
        """
        ...

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> Any:
        """Fresh per-run state for ``n_clients`` clients (``data_sizes`` of shape (n_clients,))."""
        ...

    def probe(
        self, state: Any, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        """What to gather at the current model before
        [`select`][adcs.schedulers.base.Scheduler.select]."""
        ...

    def select(
        self, state: Any, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, Any]:
        """Exactly min(m, available) distinct available clients, and the new state."""
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


PROTOCOL_MEMBERS = ("m", "observes_updates", "init", "probe", "select", "observe")
"""The members every [`Scheduler`][adcs.schedulers.base.Scheduler] has (``m`` and
``observes_updates`` attributes, the others methods)."""


def check_scheduler(scheduler: object, name: str = "scheduler") -> Scheduler:
    """``scheduler``, checked to follow the [`Scheduler`][adcs.schedulers.base.Scheduler] protocol.

    Raises
    ------
    ValueError
        Naming ``name``, the object's class and the protocol members it lacks.
    """
    if isinstance(scheduler, Scheduler):
        return scheduler
    missing = [a for a in PROTOCOL_MEMBERS if not hasattr(scheduler, a)]
    raise ValueError(
        f"{name} must follow the Scheduler protocol (adcs.schedulers.base): "
        f"{type(scheduler).__qualname__} lacks {', '.join(missing)}"
    )


@runtime_checkable
class UsesRoundTimes(Protocol):
    """Optional capability: a scheduler that uses each client's expected round duration.

    A runtime that knows the clients' devices (the simulator with a system profile) calls
    [`with_round_times`][adcs.schedulers.base.UsesRoundTimes.with_round_times] once per run, before
    [`Scheduler.init`][adcs.schedulers.base.Scheduler.init], and runs the scheduler it returns.
    ``needs_round_times`` says the scheduler cannot run without them, so a runtime without durations
    refuses it up front.
    """

    @property
    def needs_round_times(self) -> bool:
        """Whether the scheduler cannot run until
        [`with_round_times`][adcs.schedulers.base.UsesRoundTimes.with_round_times] has been
        called."""
        ...

    def with_round_times(self, round_times: FloatArray) -> Scheduler:
        """The scheduler to run, given each client's expected full-round duration.

        ``round_times`` has shape (n_clients,), in seconds (> 0).
        """
        ...


def check_available(
    available: BoolArray | ClientStats, n_clients: int, m: int
) -> tuple[BoolArray, int]:
    """Validate an availability mask (or a round's statistics' mask); return it and the number
    of clients to select, min(m, #available)."""
    stats = available if isinstance(available, ClientStats) else None
    available = np.asarray(available if stats is None else stats.available)
    if available.shape != (n_clients,) or available.dtype != np.bool_:
        raise ValueError(
            f"available must be a bool array of shape ({n_clients},), "
            f"got {available.dtype} array of shape {available.shape}"
        )
    if stats is None:
        return available, n_to_select(m, available)
    return available, min(int(m), stats.n_available())


def n_to_select(m: int, available: BoolArray) -> int:
    """How many clients a round selects: min(m, number of available clients) (the selection
    contract, `adcs.round.contract.check_selection`)."""
    return min(int(m), int(np.count_nonzero(available)))


def top_m(scores: FloatArray, m: int) -> IntArray:
    """Positions of the ``m`` largest scores, best first (all of them when fewer than ``m``).

    Ties go to the lowest position; NaN scores rank below every number, −inf included.
    """
    s = np.asarray(scores, dtype=np.float64)
    nan = np.isnan(s)
    if not nan.any():  # a stable sort of −s keeps equal scores in position order
        return np.argsort(-s, kind="stable")[:m].astype(np.intp)
    # lexsort sorts by the last key first: NaN last, then descending score, then ascending position
    order = np.lexsort((np.arange(s.size), -np.where(nan, -np.inf, s), nan))
    return order[:m].astype(np.intp)
