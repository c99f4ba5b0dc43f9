"""Clients that game the scheduler: the adversary model (lies and poisons).

A set of malicious clients, fixed for a run (`malicious_clients` draws it from the seed, so
every method of a seed faces the same clients), acts on two channels:

* **the lie** — what the scheduler sees. `Lying` wraps any scheduler and rewrites only the
  malicious clients' rows of the round's `ClientStats` before the wrapped
  scheduler's ``select``: the reported loss × ``factor`` (``Lie.LOSS``), the reported update's
  norm × ``factor`` (``Lie.NORM``), and/or its direction (``Lie.DIRECTION``): orthogonal to every
  honest client's probed update, uniformly random, or at a given cosine with the honest mean
  direction (the rest orthogonal to every honest update). Nothing else changes: the runtime still
  aggregates the clients' true updates unless there is a poison.
* **the poison** — what is aggregated. `Poisoned` is the run's aggregation hook
  (`adcs.aggregation`): the malicious clients' returned updates are replaced by the direction
  they last reported scaled to the median honest norm (``Poison.DIRECTION``; a client that never
  reported one, or whose reports were sketches, sends the lie's direction against this round's
  honest updates), by their negation
  (``Poison.SIGN_FLIP``), or by ``factor`` × their update (``Poison.SCALED``), before the rule
  combines them.

**What an adaptive liar knows** (``adaptive=True``). Everything the server does: the defence and
its parameters (`Defence`); this round's reports of every client
(it colludes with, or eavesdrops on, the server's view); and what the server last received from
it (its own updates). It uses that to sit just inside each screen:

* against corroboration (its loss and norm become the median of its neighbourhood's), the naive
  lie is already its best report: a value above its peers' lifts the neighbourhood's median to
  their larger value, and no report lifts it further;
* against received directions with consistency τ < 1, its direction has cosine τ + 0.01 with its
  last received update, the rest orthogonal to every honest update;
* against the plausibility screen while the server has received nothing from it, its direction
  has cosine threshold + 0.02 with one honest client's — the highest-loss client when it also lies
  about its loss (so that corroboration by its new "peers" lets its loss through: impersonation),
  else its nearest honest peer — the rest orthogonal to every honest update;
* against received directions with τ = 1 (the update, never the report, once received) and
  against a uniform mixture, nothing in its report helps; it tells the naive lie.
Without a defence, the adaptive liar is the naive one.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_int, check_number
from adcs.adversary.crafted import Crafted, Crafting, Sending
from adcs.adversary.defence import Defence, Received, best_cosines, cosines
from adcs.adversary.defended import Defended, DefendedState
from adcs.adversary.members import malicious_clients
from adcs.adversary.wrapper import AttackerState, Wrapping, remember
from adcs.aggregation import Aggregator, RobustAggregation
from adcs.dpp import gram_matrix, row_norms, unit_rows
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Scheduler,
    Selection,
    finite_rows,
)
from adcs.streams import Domain, round_generator, stream_key

__all__ = [
    "Attack",
    "Direction",
    "Lie",
    "Lying",
    "LyingState",
    "Poison",
    "Poisoned",
    "adversarial",
    "lie_directions",
    "malicious_clients",
    "poison_updates",
    "tell_lies",
]

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]

_CONSISTENCY_MARGIN = 0.01
_PLAUSIBILITY_MARGIN = 0.02


class Lie(enum.Enum):
    """Which reported statistic a malicious client falsifies."""

    LOSS = "loss"
    """Reported loss × factor."""
    DIRECTION = "direction"
    """Reported update direction (norm kept), as `Direction` says."""
    NORM = "norm"
    """Reported update norm × factor (direction kept)."""


class Direction(enum.Enum):
    """The direction a direction liar reports."""

    ORTHOGONAL = "orthogonal"
    """Orthogonal to every honest client's probed update (the determinant's favourite)."""
    RANDOM = "random"
    """Uniformly random on the sphere (nearly orthogonal to everything in high dimension)."""
    COSINE = "cosine"
    """At cosine ``Attack.cosine`` with the honest clients' mean direction, the rest orthogonal to
    every honest update."""


class Poison(enum.Enum):
    """What a malicious client sends for aggregation."""

    NONE = "none"
    """Its true update (it trains honestly)."""
    DIRECTION = "direction"
    """Its reported direction, at the median norm of the honest updates aggregated with it."""
    SIGN_FLIP = "sign_flip"
    """The negation of its true update."""
    SCALED = "scaled"
    """factor × its true update."""


@dataclass(frozen=True)
class Attack:
    """The adversary of one run.

    Parameters
    ----------
    clients : tuple of int
        The malicious clients (distinct, ≥ 0; `malicious_clients` draws them from a seed).
    lie : tuple of Lie
        The statistics they falsify (may be empty when they only poison).
    factor : float
        > 0, the loss and norm multiplier of ``Lie.LOSS``, ``Lie.NORM`` and ``Poison.SCALED``.
    direction : Direction
        The direction of ``Lie.DIRECTION``.
    cosine : float
        In [−1, 1]: the cosine with the honest mean of ``Direction.COSINE``.
    poison : Poison
        What they send for aggregation.
    adaptive : bool
        Adapt the lie to the active defence (module docstring).
    seed : int
        ≥ 0, keys the random directions (counter-based: the same for every method of a seed).
    """

    clients: tuple[int, ...]
    lie: tuple[Lie, ...] = (Lie.LOSS,)
    factor: float = 10.0
    direction: Direction = Direction.ORTHOGONAL
    cosine: float = 0.0
    poison: Poison = Poison.NONE
    adaptive: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        clients = tuple(check_int("clients[]", c, minimum=0) for c in self.clients)
        if not clients:
            raise ValueError("clients must name at least one malicious client")
        if len(set(clients)) != len(clients):
            raise ValueError(f"clients must be distinct, got {list(clients)}")
        object.__setattr__(self, "clients", tuple(sorted(clients)))
        lies = tuple(self.lie)
        if not all(isinstance(x, Lie) for x in lies) or len(set(lies)) != len(lies):
            raise ValueError(
                f"lie must be distinct Lie members {[x.value for x in Lie]}, got {lies}"
            )
        object.__setattr__(self, "lie", lies)
        object.__setattr__(self, "factor", check_number("factor", self.factor, 0.0, low_open=True))
        if not isinstance(self.direction, Direction):
            raise ValueError(
                f"direction must be a Direction ({[d.value for d in Direction]}), "
                f"got {self.direction!r}"
            )
        object.__setattr__(self, "cosine", check_number("cosine", self.cosine, -1.0, 1.0))
        if not isinstance(self.poison, Poison):
            raise ValueError(
                f"poison must be a Poison ({[p.value for p in Poison]}), got {self.poison!r}"
            )
        if not lies and self.poison is Poison.NONE:
            raise ValueError("an attack needs a lie or a poison (lie is empty and poison is none)")
        check_bool("adaptive", self.adaptive)
        check_int("seed", self.seed, minimum=0)

    def rows(self, clients: IntArray) -> BoolArray:
        """Which of ``clients`` (shape (n,)) are malicious."""
        clients = np.asarray(clients)
        out = np.zeros(clients.shape, dtype=bool)
        for c in self.clients:  # a few malicious clients: cheaper than np.isin's sort
            out |= clients == c
        return out


# --------------------------------------------------------------------------------------------
# the lie


def _orthogonal_part(vectors: F64Array, reference: FloatArray | None) -> F64Array:
    """Rows of ``vectors`` (k, dim) less their projection on span(reference rows), unit length.

    The projection solves the normal equations on the Gram matrix of the reference (n × n,
    pseudo-inverse: the reference may be rank deficient), cheaper than a QR of (dim, n); the
    products run in the reference's precision (float32 updates stay float32).
    """
    out = vectors
    if reference is not None and reference.shape[0]:
        ref = np.asarray(reference)
        v = vectors.astype(ref.dtype)
        coef = np.linalg.pinv(gram_matrix(ref), hermitian=True) @ (ref @ v.T).astype(np.float64)
        out = vectors - (coef.T.astype(ref.dtype) @ ref).astype(np.float64)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


@functools.lru_cache(maxsize=8)
def _gaussian_draws(seed: int, round_idx: int, n: int, dim: int) -> F64Array:
    """n standard normal vectors of ``dim`` for (seed, round): shared by every run of a seed."""
    draws = round_generator(stream_key(seed), Domain.ATTACK, round_idx + 1).standard_normal(
        (n, dim)
    )
    draws.setflags(write=False)
    return draws


def _gaussian(attack: Attack, round_idx: int, clients: IntArray, dim: int) -> F64Array:
    """One standard normal vector per malicious client, a pure function of (seed, round, client)."""
    draws = _gaussian_draws(attack.seed, round_idx, len(attack.clients), dim)
    return np.asarray(draws[np.searchsorted(np.asarray(attack.clients), clients)])


def _unit_float(rows: FloatArray) -> F64Array:
    norms = row_norms(rows)
    return np.asarray(rows, dtype=np.float64) / np.where(norms > 0, norms, 1.0)[:, None]


def lie_directions(
    attack: Attack, reference: FloatArray, clients: IntArray, round_idx: int
) -> F64Array:
    """The unit directions malicious ``clients`` report (`Direction`), shape (k, dim).

    Parameters
    ----------
    attack : Attack
    reference : ndarray of shape (n_honest, dim)
        The honest clients' updates this round (the span to avoid, the mean to aim at).
    clients : ndarray of shape (k,), int
        Malicious clients (each gets its own random draw, so liars are mutually near-orthogonal).
    round_idx : int
    """
    dim = reference.shape[1]
    raw = _gaussian(attack, round_idx, clients, dim)
    if attack.direction is Direction.RANDOM:
        return _orthogonal_part(raw, None)
    free = _orthogonal_part(raw, reference if reference.shape[0] else None)
    if attack.direction is Direction.ORTHOGONAL or reference.shape[0] == 0:
        return free
    mean = _unit_float(reference).mean(axis=0)
    mean /= max(float(np.linalg.norm(mean)), 1e-300)
    c = attack.cosine
    return c * mean[None, :] + np.sqrt(1.0 - c * c) * free


def _toward(anchor: F64Array, free: F64Array, cosine: float) -> F64Array:
    """Unit vectors at ``cosine`` with the unit ``anchor`` rows, the rest along ``free`` ⊥ anchor."""
    free = free - np.einsum("ij,ij->i", free, anchor)[:, None] * anchor
    free /= np.maximum(np.linalg.norm(free, axis=1, keepdims=True), 1e-300)
    c = float(np.clip(cosine, -1.0, 1.0))
    return c * anchor + np.sqrt(1.0 - c * c) * free


def tell_lies(
    attack: Attack,
    stats: ClientStats,
    round_idx: int,
    defence: Defence | None = None,
    received: Received | None = None,
) -> ClientStats:
    """The statistics with the malicious clients' rows falsified (module docstring).

    Honest rows, the availability mask and the probed set are passed on untouched.

    Parameters
    ----------
    attack : Attack
    stats : ClientStats
        What the runtime gathered (honest values).
    round_idx : int
    defence : Defence, optional
        The server's defence, for an adaptive liar.
    received : Received, optional
        What the server last received from each client, for an adaptive liar.
    """
    if stats.n_probed == 0 or (stats.losses is None and stats.updates is None):
        return stats
    usable = stats.usable()
    mal = attack.rows(stats.clients) & usable
    if not mal.any():
        return stats
    rows = np.flatnonzero(mal)
    adaptive = attack.adaptive and defence is not None
    losses = stats.losses
    if losses is not None and Lie.LOSS in attack.lie:
        losses = np.array(losses, dtype=np.float64)
        losses[rows] *= attack.factor
    updates = stats.updates
    if updates is not None and (Lie.DIRECTION in attack.lie or Lie.NORM in attack.lie):
        honest = usable & ~attack.rows(stats.clients)
        reference = np.asarray(updates[honest])
        mine = np.asarray(updates[rows], dtype=np.float64)
        norms = np.linalg.norm(mine, axis=1)
        directions = mine / np.where(norms > 0, norms, 1.0)[:, None]
        if Lie.DIRECTION in attack.lie:
            directions = lie_directions(attack, reference, stats.clients[rows], round_idx)
            if adaptive:
                assert defence is not None
                directions = _adapted_directions(
                    attack, defence, received, stats, losses, rows, honest, directions, round_idx
                )
        if Lie.NORM in attack.lie:
            norms = norms * attack.factor
        updates = np.array(updates, dtype=np.float32)
        updates[rows] = (directions * norms[:, None]).astype(np.float32)
    return ClientStats(stats.available, stats.clients, losses, updates)


def _adapted_directions(
    attack: Attack,
    defence: Defence,
    received: Received | None,
    stats: ClientStats,
    losses: FloatArray | None,
    rows: IntArray,
    honest: BoolArray,
    naive: F64Array,
    round_idx: int,
) -> F64Array:
    """Directions just inside the consistency and plausibility screens (module docstring)."""
    assert stats.updates is not None
    clients = stats.clients[rows]
    out = naive.copy()
    known = (
        received.known[clients]
        if received is not None and defence.received
        else np.zeros(rows.size, dtype=bool)
    )
    if known.any() and defence.consistency < 1:
        assert received is not None
        anchor = received.directions(clients[known], naive.shape[1]).astype(np.float64)
        out[known] = _toward(anchor, naive[known], defence.consistency + _CONSISTENCY_MARGIN)
    unknown = ~known
    if unknown.any() and defence.plausibility > 0 and honest.any():
        honest_rows = np.flatnonzero(honest)
        ref = _unit_float(stats.updates[honest_rows])
        best = best_cosines(cosines(ref, np.ones(honest_rows.size, dtype=bool)))
        finite = np.isfinite(best)
        if finite.any():
            threshold = defence.plausibility * float(np.median(best[finite]))
            cosine = min(1.0, threshold + _PLAUSIBILITY_MARGIN)
            if Lie.LOSS in attack.lie and losses is not None and defence.corroborate:
                target = np.full(int(unknown.sum()), int(np.argmax(losses[honest_rows])))
            else:  # the nearest honest client to the liar's true direction
                own = unit_rows(stats.updates[rows[unknown]], np.float64)
                target = np.argmax(own @ ref.T, axis=1)
            out[unknown] = _toward(ref[target], naive[unknown], cosine)
    return out


# --------------------------------------------------------------------------------------------
# the wrapper


LyingState = AttackerState
"""Per-run state of `Lying` (`AttackerState`)."""


@dataclass(frozen=True)
class Lying(Wrapping):
    """Any scheduler whose malicious clients lie to it (the Scheduler protocol).

    Parameters
    ----------
    scheduler : Scheduler
        What the lies are told to: a plain scheduler, or a `Defended` one (whose defence
        and memory an adaptive liar then reads).
    attack : Attack
    """

    scheduler: Scheduler
    attack: Attack

    def __post_init__(self) -> None:
        self._check(self.attack, Attack, "an Attack")

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> LyingState:
        return self._initial(self.attack.clients, n_clients, data_sizes)

    def select(
        self, state: LyingState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, LyingState]:
        defence = received = None
        if isinstance(self.scheduler, Defended):
            defence = self.scheduler.defence
            assert isinstance(state.inner, DefendedState)
            received = state.inner.received
        lied = tell_lies(self.attack, stats, round_idx, defence, received)
        selection, inner = self.scheduler.select(state.inner, round_idx, lied, rng)
        return selection, self._remember(replace(state, inner=inner), lied)

    def _remember(self, state: LyingState, lied: ClientStats) -> LyingState:
        """Keep the directions the malicious clients reported (for ``Poison.DIRECTION``)."""
        if self.attack.poison is not Poison.DIRECTION or lied.updates is None:
            return state
        mal = np.flatnonzero(self.attack.rows(lied.clients) & finite_rows(lied.updates))
        if mal.size == 0:
            return state
        return remember(state, self.attack.clients, lied.clients[mal], unit_rows(lied.updates[mal]))


# --------------------------------------------------------------------------------------------
# the poison


def poison_updates(
    attack: Attack,
    state: Any,
    round_idx: int,
    clients: IntArray,
    updates: F32Array,
) -> F32Array:
    """The updates the server receives: malicious clients' rows replaced (`Poison`).

    Parameters
    ----------
    attack : Attack
    state : object
        The run's scheduler state (a `LyingState` holds the reported directions).
    round_idx : int
    clients : ndarray of shape (n,), int
        The returned clients.
    updates : ndarray of shape (n, dim), float32
        Their true updates.
    """
    mal = attack.rows(clients)
    if attack.poison is Poison.NONE or not mal.any():
        return updates
    out = np.array(updates, dtype=np.float32)
    if attack.poison is Poison.SIGN_FLIP:
        out[mal] = -updates[mal]
        return out
    if attack.poison is Poison.SCALED:
        out[mal] = updates[mal] * np.float32(attack.factor)
        return out
    honest = updates[~mal]
    own = row_norms(updates[mal])
    norm = float(np.median(row_norms(honest))) if honest.shape[0] else None
    malicious = clients[mal]
    if Lie.DIRECTION in attack.lie:
        directions = lie_directions(attack, honest, malicious, round_idx)
    else:  # the reported direction is the true one
        directions = np.asarray(unit_rows(updates[mal], np.float64), np.float64)
    # Reports made to a scheduler that sees sketches ([sim] sketch_dim) live in sketch space and
    # cannot be sent as a model update: there the lie's direction is drawn against this round's.
    reported = state.reported if isinstance(state, LyingState) else None
    if reported is not None and reported.shape[1] == out.shape[1]:
        where = np.searchsorted(np.asarray(attack.clients), malicious)
        has = state.has_reported[where]
        directions[has] = reported[where[has]]
    scale = own if norm is None else np.full(malicious.size, norm)
    out[mal] = (directions * scale[:, None]).astype(np.float32)
    return out


@dataclass(frozen=True)
class Poisoned:
    """The aggregation hook of an attacked run: the poison, then a rule (an `Aggregator`).

    Parameters
    ----------
    attack : Attack
    rule : Aggregator
        What the server does with the received updates: a robust rule (``Robust.MEAN`` by
        default) or a defence's own `Aggregator`.
    """

    attack: Attack
    rule: Aggregator = field(default_factory=RobustAggregation)

    def aggregate(
        self,
        state: Any,
        round_idx: int,
        clients: IntArray,
        updates: F32Array,
        coefs: F64Array,
        probed: ClientStats,
    ) -> tuple[F32Array, F32Array]:
        received = poison_updates(self.attack, state, round_idx, clients, updates)
        return self.rule.aggregate(state, round_idx, clients, received, coefs, probed)


def adversarial(
    scheduler: Scheduler,
    *,
    attack: Attack | Crafted | None = None,
    defence: Defence | None = None,
    seed: int = 0,
) -> tuple[Scheduler, Aggregator | None]:
    """A run's scheduler and aggregation hook under an attack and/or a defence.

    The scheduler is wrapped as ``Lying(Defended(scheduler))`` — the clients lie to a defended
    server — keeping only the layers that do something (``Crafting`` for a `Crafted`
    attack, whose hook `Sending` always sends the crafted updates); the hook is the poison followed
    by the defence's rule, the rule alone, or None (the runtime's mean). ``seed`` is the run's, for
    the defence's own draws.
    """
    if attack is not None and not isinstance(attack, Attack | Crafted):
        raise TypeError(
            f"an attack must be an adcs.adversary Attack or Crafted, got {type(attack).__name__}"
        )
    if defence is not None and not isinstance(defence, Defence):
        raise TypeError(
            f"a defence must be an adcs.adversary Defence, got {type(defence).__name__}"
        )
    run: Scheduler = scheduler
    if defence is not None and defence.screens:
        run = Defended(run, defence, seed)
    rule = defence.rule() if defence is not None else None
    hook: Aggregator | None = rule
    if isinstance(attack, Crafted):  # it sends what it reports: always through the hook
        screens = defence if defence is not None and defence.screens else None
        return Crafting(run, attack), Sending(
            attack, rule if rule is not None else RobustAggregation(), screens
        )
    if attack is not None:
        run = Lying(run, attack)
        if attack.poison is not Poison.NONE:
            hook = Poisoned(attack, rule if rule is not None else RobustAggregation())
    return run, hook
