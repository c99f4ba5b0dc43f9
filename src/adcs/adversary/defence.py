"""Defences against clients that game the scheduler: a wrapper that composes with every scheduler.

A scheduler ranks clients by what they report — loss, update direction, update norm — so a client
that lies can capture it (`adcs.adversary.attack`). `Defended` stands between the
runtime and any scheduler and rewrites the `ClientStats` the scheduler
sees, using only what the server can check; it changes nothing when every client is honest and
consistent, up to the screens' small honest cost (measured in ``benchmarks/bench_attacks.py``).

Every defended round first refuses the reports outside their domain (a negative or non-finite
loss, a non-finite or zero update: `adcs.adversary.domain`); a refused report counts as no
report from that client this round. The screens (each optional, `Defence`):

* **received directions** (``received``). The server keeps, per client, the direction and norm of
  the last update it actually *received and aggregated* from that client (``observe``). A client
  the server has received from is scheduled on that update, not on its report: a lie about the
  update (direction or norm) that is not also sent for aggregation has no effect once the client
  has been selected once. ``consistency`` τ < 1 trusts a report whose cosine with the received
  update is at least τ instead (the variant that an adaptive liar exploits, see the benchmark).
* **corroborated quality** (``corroborate``). A client's reported loss, and its update norm, are
  capped at the median value of its ``peers`` nearest clients, nearness being the cosine of
  the clients' *identity* directions (the received one where the server has it, else the
  reported one): a client may claim to be as badly served as the clients whose data look like its
  own, no more. Without any direction (a loss-only probe of a client never received), the cap is
  the median reported loss. One report thus moves its own quality by at most its peers' spread —
  a bounded influence of any one report — and honest clients lose at most the spread between
  peers (the group's minibatch noise in the paper's setting). With a ``fence`` φ the median rule
  gives way to an outlier rule: a loss or norm is kept *as it is* unless it exceeds φ × max(its
  peers' smallest value, the round's median), and is then clipped to that fence
  (`adcs.adversary.screens.fenced`) — an honest claim its peers corroborate reaches the
  scheduler unchanged, a lie gains at most φ × its peers' claim, and peers that report 0 cannot
  pull a claim below φ × the round's median.
* **plausible directions** (``plausibility`` ρ). After the substitutions above, a client whose
  best cosine to any other client is below ρ × the median best cosine is left out of the round's
  statistics (non-finite row: the scheduler uses it only to fill a selection). In a loss-only
  probe the directions judged are those of the updates received, so a poisoner whose sent update
  has no peer (a sign flip, an orthogonal direction) is left out once it has sent one. An orthogonal or
  random direction has best cosine ≈ 0; honest clients with data-alike peers have ≥ 0.89 in the
  paper's setting. An adaptive liar can sit just above the threshold, but only while the server
  has received nothing from it (afterwards ``received`` decides).
* **uniform mixture** (``uniform_mix`` λ): with probability λ a round's selection is drawn
  uniformly from the available clients instead (counter-based on the run's seed), so every
  client's selection rate lies in [λ·m/N, λ·m/N + 1 − λ].
* **robust aggregation** (``aggregation``): a rule of `adcs.aggregation` in place of the mean
  (the runtime's aggregation hook; `adcs.adversary.adversarial` installs it).
* **the span screen** (``novelty``) and **the sliding-window cap** (``cap``, ``window``,
  ``any_interval``): the bounds by construction of `adcs.adversary.bound`, against clients that
  *send* what they report (docs/concepts/threat-model.md). With ``cap_uncorroborated`` the cap
  counts only the selections of rounds in which the client's claim exceeded its fence: a
  client the scheduler wants on claims its peers corroborate is never capped (no harm where
  nobody attacks), a client that keeps claiming more than its peers holds at most the budget of
  such selections in any W rounds.

``stale_after`` makes plausibility and novelty judge fresh evidence only (a screened client
comes back); ``peer_history`` chooses corroborating peers from received history
(`adcs.adversary.peers`).

Memory: the received directions are O(N_received · dim) per run (float32), like DivFL's stale
form; fine for cross-silo populations (a sketched store would bound it at scale).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_int, check_number, check_unit_interval
from adcs.adversary.domain import refuse
from adcs.adversary.screens import (
    best_cosines,
    cosines,
    fenced,
    nearest_peers,
    neighbourhood_medians,
    reported_directions,
    too_novel,
)
from adcs.aggregation import Aggregator, Robust, RobustAggregation
from adcs.dpp import row_norms
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
)

__all__ = [
    "Defence",
    "Received",
    "Screening",
    "best_cosines",
    "cosines",
    "nearest_peers",
    "neighbourhood_medians",
    "screen",
]

F32Array = NDArray[np.float32]


@dataclass(frozen=True)
class Defence:
    """The defences' options (all off by default: the scheduler is unchanged).

    Parameters
    ----------
    received : bool
        Schedule a client on the last update the server received from it (direction and norm)
        rather than on its report, once there is one.
    consistency : float
        τ ∈ [0, 1]: with ``received``, a report whose cosine with the received update is ≥ τ is
        used instead of it. τ = 1 (default): the received update always.
    corroborate : bool
        Set each reported loss and update norm to the median of the client's neighbourhood (it
        and its ``peers`` nearest clients by identity direction), or, with ``fence``, clip it
        at its fence where it exceeds it.
    peers : int
        ≥ 1, the number of nearest clients that corroborate a report.
    plausibility : float
        ρ ∈ [0, 1]: leave out of the round a direction whose best cosine to another client is
        below ρ × the median best cosine (0: off).
    uniform_mix : float
        λ ∈ [0, 1): probability that a round's selection is uniform instead.
    aggregation : Robust or str
        The aggregation rule (``Robust.MEAN``: the runtime's default mean), or its value.
    trim : float
        β for ``Robust.TRIMMED_MEAN``.
    novelty : float
        ν ≥ 1, or 0 (off): leave out of the round a direction whose part outside the span of the
        other clients' directions exceeds ν × the round's median part outside
        (`adcs.adversary.bound.outside_span`).
    cap : float
        c > 0, or 0 (off): no client holds more than max(1, ⌊c · window · m / N⌋) selections in
        any ``window`` consecutive rounds (`adcs.adversary.bound`).
    window : int
        W ≥ 1, the rounds of the cap's window.
    peer_history : bool
        With ``corroborate``: peers chosen from the received updates' affinities over the last
        W = ``window`` rounds, fixed for the next W, near-duplicates collapsed
        (`adcs.adversary.peers`), not from this round's reports. False (default): the nearest
        clients by this round's identity directions.
    any_interval : bool
        With ``cap``: also at most c · L · m / N selections in any L ≥ W consecutive rounds
        (`adcs.adversary.bound.Window.interval_ok`), not only b in any W. False (default): the
        W-round budget alone.
    stale_after : int
        E ≥ 0: plausibility and novelty judge only fresh evidence — a direction reported this
        round, or an update received in the last E rounds; a client whose received update is
        older is judged on this round's report, or, without one, passes (its way back: selected,
        it is received and judged afresh). 0 (default): every direction is judged, however old.
    fence : float
        φ ≥ 1, or 0 (default: the median rule). With ``corroborate``: a reported loss or norm is
        kept as it is unless it exceeds φ × max(its peers' smallest value, the round's median),
        and is then clipped to that fence (`adcs.adversary.screens.fenced`): only an outlier
        against its data-alike peers is moved, so honest claims the peers corroborate reach the
        scheduler unchanged.
    cap_uncorroborated : bool
        With ``cap`` and ``fence``: the cap counts only a client's selections while its loss or
        norm, when last judged (probed), was clipped at its fence, so no client holds more than b such
        selections in any W rounds (nor, with ``any_interval``, more than r · L in any L ≥ W),
        and a client whose claims its peers corroborate is never capped. False (default): every
        selection counts.
    """

    received: bool = False
    consistency: float = 1.0
    corroborate: bool = False
    peers: int = 2
    plausibility: float = 0.0
    uniform_mix: float = 0.0
    aggregation: Robust = Robust.MEAN
    trim: float = 0.2
    novelty: float = 0.0
    cap: float = 0.0
    window: int = 100
    written_when_set: ClassVar[frozenset[str]] = frozenset(
        {"peer_history", "any_interval", "stale_after", "fence", "cap_uncorroborated"}
    )
    """Keys added after the first manifests: written back only when set (`KindTable.to_dict`)."""
    peer_history: bool = False
    any_interval: bool = False
    stale_after: int = 0
    fence: float = 0.0
    cap_uncorroborated: bool = False

    needs: ClassVar[Mapping[str, tuple[str, Callable[[Defence], bool]]]] = {
        "consistency": ("received = true", lambda d: d.received),
        "peers": ("corroborate = true", lambda d: d.corroborate),
        "trim": ("aggregation = 'trimmed_mean'", lambda d: d.aggregation is Robust.TRIMMED_MEAN),
        "window": ("a cap (cap > 0)", lambda d: d.cap > 0),
        "fence": ("corroborate = true", lambda d: d.corroborate),
        "cap_uncorroborated": (
            "a cap (cap > 0) and a fence (fence > 0)",
            lambda d: d.cap > 0 and d.fence > 0,
        ),
    }
    """The keys that only matter beside another setting (a configuration setting one without
    it is refused, see `adcs.experiments.config.schema.KindTable`)."""

    def __post_init__(self) -> None:
        check_bool("received", self.received)
        check_unit_interval("consistency", self.consistency)
        check_bool("corroborate", self.corroborate)
        check_int("peers", self.peers)
        check_unit_interval("plausibility", self.plausibility)
        check_number("uniform_mix", self.uniform_mix, 0.0, 1.0, high_open=True)
        try:  # a configuration names the rule by its value
            object.__setattr__(self, "aggregation", Robust(self.aggregation))
        except ValueError:
            raise ValueError(
                f"aggregation must be one of {[r.value for r in Robust]}, got {self.aggregation!r}"
            ) from None
        check_number("trim", self.trim, 0.0, 0.5, high_open=True)
        if check_number("novelty", self.novelty, 0.0) != 0 and self.novelty < 1:
            raise ValueError(f"novelty must be 0 (off) or a number >= 1, got {self.novelty!r}")
        check_number("cap", self.cap, 0.0)
        check_int("window", self.window)
        check_bool("peer_history", self.peer_history)
        check_bool("any_interval", self.any_interval)
        check_int("stale_after", self.stale_after, minimum=0)
        if check_number("fence", self.fence, 0.0) != 0 and self.fence < 1:
            raise ValueError(f"fence must be 0 (off) or a number >= 1, got {self.fence!r}")
        check_bool("cap_uncorroborated", self.cap_uncorroborated)

    def build(self, seed: int, n_clients: int) -> Defence:
        """The defence of one run (of ``seed``, among ``n_clients``): this one, for every run.

        The ``[sim.defence]`` kinds' protocol (`adcs.adversary.DEFENCES`): a user's kind
        builds a `Defence` per run, a subclass may change `aggregator`.
        """
        return self

    @property
    def screens(self) -> bool:
        """Whether any screen rewrites what the scheduler sees (else no wrapper is needed)."""
        return (
            self.received
            or self.corroborate
            or self.plausibility > 0
            or self.uniform_mix > 0
            or self.novelty > 0
            or self.cap > 0
        )

    @property
    def remembers(self) -> bool:
        """Whether the server must keep the updates it receives."""
        return self.received or self.corroborate or self.peer_history

    def aggregator(self) -> Aggregator | None:
        """The robust aggregation rule, or None for the runtime's mean (a subclass may give
        its own `Aggregator`)."""
        if self.aggregation is Robust.MEAN:
            return None
        return RobustAggregation(self.aggregation, self.trim)

    def rule(self) -> Aggregator | None:
        """`aggregator`, checked (TypeError unless None or an Aggregator)."""
        rule = self.aggregator()
        if rule is not None and not isinstance(rule, Aggregator):
            raise TypeError(
                "a defence's aggregator() must give an adcs.aggregation Aggregator (with "
                f"aggregate()) or None, got {type(rule).__name__}"
            )
        return rule


# --------------------------------------------------------------------------------------------
# what the server received


@dataclass(frozen=True, eq=False)
class Received:
    """The last update the server received from each client.

    Attributes
    ----------
    known : ndarray of bool, shape (n_clients,)
    norms : ndarray of shape (n_clients,)
        ‖Δ‖ of the last received update (0 where not known).
    at : ndarray of shape (n_clients,), int
        Round of the last received update (−1 where not known).
    rows : mapping of int to ndarray of shape (dim,), float32
        The unit direction of each known client's last received update. Rows are never
        modified, only replaced, so a new ``Received`` shares the rows it did not change.
    """

    known: BoolArray
    norms: FloatArray
    at: IntArray
    rows: Mapping[int, F32Array]

    @classmethod
    def empty(cls, n_clients: int) -> Received:
        return cls(
            np.zeros(n_clients, dtype=bool),
            np.zeros(n_clients),
            np.full(n_clients, -1, dtype=np.intp),
            {},
        )

    @property
    def dim(self) -> int:
        """The length of the stored directions (the memory holds at least one)."""
        return int(next(iter(self.rows.values())).shape[0])

    def directions(self, clients: IntArray, dim: int) -> F32Array:
        """Unit directions of ``clients`` (n,), shape (n, dim); zero rows where not known."""
        out = np.zeros((clients.shape[0], dim), dtype=np.float32)
        for i, c in enumerate(clients.tolist()):
            row = self.rows.get(c)
            if row is not None:
                out[i] = row
        return out

    def updated(self, round_idx: int, clients: IntArray, updates: FloatArray) -> Received:
        """A copy holding these clients' updates (n, dim) (non-finite and zero ones are ignored)."""
        rows = np.asarray(updates)
        if rows.shape[0] == 0:
            return self
        norms = row_norms(rows)
        ok = np.isfinite(norms) & (norms > 0)
        clients = np.asarray(clients, dtype=np.intp)[ok]
        units = (rows[ok] / norms[ok, None].astype(rows.dtype)).astype(np.float32)
        known, at, all_norms = self.known.copy(), self.at.copy(), self.norms.copy()
        known[clients] = True
        at[clients] = round_idx
        all_norms[clients] = norms[ok]
        new_rows = dict(self.rows)
        new_rows.update(zip(clients.tolist(), units, strict=True))
        return Received(known, all_norms, at, new_rows)


# --------------------------------------------------------------------------------------------
# the screens, as functions


@dataclass(frozen=True, eq=False)
class Screening:
    """What `screen` did to one round's statistics.

    Attributes
    ----------
    stats : ClientStats
        What the scheduler sees.
    corroborated : ndarray of bool, shape (n_probed,)
        Rows whose loss and norm are their neighbourhood's medians (the rest, without any
        direction, have their loss capped at the round's median loss).
    from_received : ndarray of bool, shape (n_probed,)
        Rows whose direction and norm are the received update's.
    dropped : ndarray of bool, shape (n_probed,)
        Rows left out as implausible.
    threshold : float or None
        The plausibility threshold ρ × median best cosine of this round.
    refused : ndarray of bool, shape (n_probed,) or None
        Rows whose report was outside its domain (`adcs.adversary.domain.refuse`); None: none.
    clipped : ndarray of bool, shape (n_probed,) or None
        With ``Defence.fence``: rows whose loss or norm exceeded its fence and was clipped
        (None: none).
    """

    stats: ClientStats
    corroborated: BoolArray
    from_received: BoolArray
    dropped: BoolArray
    threshold: float | None
    refused: BoolArray | None = None
    clipped: BoolArray | None = None


@dataclass(frozen=True, eq=False)
class _Known:
    """What the server knows of one round's probed clients, the input of `screen`'s steps.

    Attributes
    ----------
    reported : ndarray of float32, shape (n_probed, dim), or None
        Unit reported directions (zero rows where not finite; None: no update reported).
    reported_norms : ndarray of shape (n_probed,) or None
        Their norms (NaN where not finite).
    finite : ndarray of bool, shape (n_probed,)
        Rows whose reported update is finite.
    known : ndarray of bool, shape (n_probed,)
        Rows the server has received an update from.
    received : ndarray of float32, shape (n_probed, dim), or None
        Unit directions of the last received updates (zero rows where not known; None when no
        probed client is known).
    ident : ndarray of float32, shape (n_probed, dim), or None
        The direction by which the server knows each client: what it received, else the report.
    has_ident : ndarray of bool, shape (n_probed,)
        Rows with such a direction.
    """

    reported: F32Array | None
    reported_norms: FloatArray | None
    finite: BoolArray
    known: BoolArray
    received: F32Array | None
    ident: F32Array | None
    has_ident: BoolArray


def _known(memory: Received | None, stats: ClientStats) -> _Known:
    """The reported and received directions of the probed clients."""
    reported, reported_norms, finite = reported_directions(stats)
    if memory is None:
        known = np.zeros(stats.n_probed, dtype=bool)
    else:
        known = memory.known[stats.clients]
    if memory is None or not known.any():
        return _Known(reported, reported_norms, finite, known, None, reported, finite)
    dim = reported.shape[1] if reported is not None else memory.dim
    received = memory.directions(stats.clients, dim)
    ident = received if reported is None else np.where(known[:, None], received, reported)
    return _Known(reported, reported_norms, finite, known, received, ident, known | finite)


def _received_directions(
    defence: Defence, memory: Received | None, stats: ClientStats, known: _Known
) -> tuple[F32Array | None, FloatArray | None, BoolArray]:
    """Screen 1: each row's direction and norm, the received ones where a report is not trusted.

    Returns
    -------
    directions : ndarray of float32, shape (n_probed, dim), or None
    norms : ndarray of shape (n_probed,) or None
    from_received : ndarray of bool, shape (n_probed,)
        Rows whose direction and norm are the received update's.
    """
    none = np.zeros(stats.n_probed, dtype=bool)
    reported, received = known.reported, known.received
    if not (defence.received and received is not None and reported is not None):
        return reported, known.reported_norms, none
    assert memory is not None and known.reported_norms is not None
    trusted = none
    if defence.consistency < 1:
        agree = np.einsum("ij,ij->i", reported, received, dtype=np.float64)
        trusted = known.finite & (agree >= defence.consistency)
    from_received = known.known & ~trusted
    if not from_received.any():
        return reported, known.reported_norms, from_received
    same = bool((from_received == known.known).all())
    directions = known.ident if same else np.where(from_received[:, None], received, reported)
    norms = np.where(from_received, memory.norms[stats.clients], known.reported_norms)
    return directions, norms, from_received


def _merged_peers(history: IntArray | None, stats: ClientStats, nearest: IntArray) -> IntArray:
    """Each probed row's history peers (n_probed, p) as row positions, where it has any among
    the probed clients; else its ``nearest`` peers by this round's directions (−1 pads)."""
    if history is None:
        return nearest
    n = stats.n_probed
    where = np.full(int(max(stats.clients.max(initial=0), history.max(initial=0))) + 2, -1)
    where[stats.clients] = np.arange(n)
    mine = history[stats.clients]
    mapped = np.where(mine >= 0, where[mine], -1)
    width = max(mapped.shape[1], nearest.shape[1])
    out = np.full((n, width), -1, dtype=np.intp)
    out[:, : nearest.shape[1]] = nearest
    has = (mapped >= 0).any(axis=1)
    out[has] = -1
    out[has, : mapped.shape[1]] = mapped[has]
    return out


def _corroborated(
    defence: Defence,
    stats: ClientStats,
    known: _Known,
    norms: FloatArray | None,
    history: IntArray | None = None,
) -> tuple[FloatArray | None, FloatArray | None, BoolArray, FloatArray | None, BoolArray]:
    """Screen 2: losses and norms set to their neighbourhood's medians, or losses capped — or,
    with a ``fence``, clipped at it where they exceed it (`adcs.adversary.screens.fenced`).

    Returns
    -------
    losses : ndarray of shape (n_probed,) or None
    norms : ndarray of shape (n_probed,) or None
    corroborated : ndarray of bool, shape (n_probed,)
        Rows whose loss and norm were judged against their neighbourhood (with the median rule:
        are its medians).
    ident_cos : ndarray of shape (n_probed, n_probed) or None
        Cosines of the identity directions (None: not computed).
    clipped : ndarray of bool, shape (n_probed,)
        With a fence: rows whose loss or norm exceeded its fence (an uncorroborated claim).
    """
    losses: FloatArray | None = (
        None if stats.losses is None else np.asarray(stats.losses, dtype=np.float64)
    )
    corroborated = np.zeros(stats.n_probed, dtype=bool)
    clipped = np.zeros(stats.n_probed, dtype=bool)
    if not defence.corroborate:
        return losses, norms, corroborated, None, clipped
    ident_cos = None
    peers = np.full((stats.n_probed, 1), -1, dtype=np.intp)
    if known.ident is not None:
        ident_cos = cosines(known.ident, known.has_ident)
        peers = nearest_peers(ident_cos, known.has_ident, defence.peers)
        peers = _merged_peers(history, stats, peers)
        corroborated = known.has_ident.copy()
    if defence.fence > 0:  # an outlier is clipped, a corroborated claim kept as it is
        if losses is not None:
            losses, clipped = fenced(losses, peers, defence.fence)
        if norms is not None:
            norms, clipped_norms = fenced(norms, peers, defence.fence)
            clipped = clipped | clipped_norms
        return losses, norms, corroborated, ident_cos, clipped
    if corroborated.any():
        if losses is not None:
            losses = np.where(corroborated, neighbourhood_medians(losses, peers), losses)
        if norms is not None:
            norms = np.where(corroborated, neighbourhood_medians(norms, peers), norms)
    if losses is not None and not corroborated.all():  # no one can vouch: ≤ the median
        finite_losses = np.isfinite(losses)
        if finite_losses.any():
            ceiling = float(np.median(np.asarray(stats.losses)[finite_losses]))
            alone = ~corroborated & finite_losses
            losses = np.where(alone, np.minimum(losses, ceiling), losses)
    return losses, norms, corroborated, ident_cos, clipped


def _judged(
    defence: Defence,
    memory: Received | None,
    stats: ClientStats,
    known: _Known,
    directions: F32Array | None,
    has_direction: BoolArray,
    from_received: BoolArray,
    round_idx: int | None,
) -> tuple[F32Array | None, BoolArray, BoolArray]:
    """The directions the screens judge, the rows that have one, and the rows judged.

    The directions are those of the updates the scheduler sees, or, when it sees none (a loss
    probe), those the server received — a poisoner is judged by the update it sent. With
    ``stale_after`` E > 0 only fresh evidence is judged: a direction reported this round, or
    an update received in the last E rounds. A row whose received direction is older is judged on
    its report of this round where it has one, else not at all (it passes: its probation).

    Returns
    -------
    judged : ndarray of float32, shape (n_probed, dim), or None
    rows : ndarray of bool, shape (n_probed,)
        Rows with a direction (the cosines' candidates).
    fresh : ndarray of bool, shape (n_probed,)
        Rows whose verdict counts.
    """
    judged, rows = (
        (directions, has_direction) if directions is not None else (known.ident, known.has_ident)
    )
    if judged is None or defence.stale_after == 0 or round_idx is None or memory is None:
        return judged, rows, rows
    age = round_idx - memory.at[stats.clients]
    stale = known.known & (age > defence.stale_after)
    if directions is not None:  # the visible row is the received one only where substituted
        stale &= from_received
    retry = stale & known.finite
    if retry.any() and known.reported is not None:  # judged on this round's report instead
        judged = np.where(retry[:, None], known.reported, judged)
    return judged, rows, rows & ~(stale & ~retry)


def _implausible(
    defence: Defence,
    known: _Known,
    judged: F32Array | None,
    judged_rows: BoolArray,
    fresh: BoolArray,
    ident_cos: FloatArray | None,
) -> tuple[BoolArray, float | None]:
    """Screens 3 and 4: rows dropped as implausible or too novel, and the plausibility threshold.

    ``judged`` (n_probed, dim) and ``judged_rows`` as `_judged` gives them; only the ``fresh``
    rows' verdicts count.
    """
    dropped, threshold = np.zeros(judged_rows.shape, dtype=bool), None
    if judged is None:
        return dropped, threshold
    if defence.plausibility > 0:
        same = judged is known.ident and bool((known.has_ident == judged_rows).all())
        cos = ident_cos if same and ident_cos is not None else cosines(judged, judged_rows)
        best = best_cosines(cos)
        if np.isfinite(best).any():
            threshold = defence.plausibility * float(np.median(best[np.isfinite(best)]))
            dropped = judged_rows & (best < threshold)
    if defence.novelty > 0:
        dropped = dropped | too_novel(defence.novelty, judged, judged_rows)
    return dropped & fresh, threshold


def _passed_on(
    stats: ClientStats,
    known: _Known,
    directions: F32Array | None,
    norms: FloatArray | None,
    has_direction: BoolArray,
    from_received: BoolArray,
    dropped: BoolArray,
) -> FloatArray | None:
    """The updates the scheduler sees: honest, consistent rows are passed on untouched.

    Rows whose direction or norm was replaced are rebuilt from them, dropped rows are NaN;
    shape (n_probed, dim), float32 when any row changed, else ``stats.updates`` itself.
    """
    if directions is None:
        return stats.updates
    reported_norms = known.reported_norms
    assert norms is not None and reported_norms is not None and stats.updates is not None
    with np.errstate(invalid="ignore"):
        rescaled = has_direction & ~np.isclose(norms, reported_norms, rtol=1e-6, atol=0.0)
    rebuilt = from_received | rescaled
    if not (rebuilt.any() or dropped.any()):
        return stats.updates
    updates = np.array(stats.updates, dtype=np.float32)
    updates[rebuilt] = directions[rebuilt] * norms[rebuilt, None].astype(np.float32)
    updates[dropped] = np.nan
    return updates


def screen(
    defence: Defence,
    memory: Received | None,
    stats: ClientStats,
    round_idx: int | None = None,
    history: IntArray | None = None,
) -> Screening:
    """Apply the defence's screens to one round's statistics (module docstring).

    The steps: reports outside their domain refused (`adcs.adversary.domain`), what the
    server knows of each client (reported and received directions), the
    received directions (screen 1), corroborated quality and norm (screen 2), plausible and
    not too novel directions (screens 3–4), and the updates the scheduler then sees.

    Parameters
    ----------
    defence : Defence
    memory : Received or None
        The last update received from each client (None: nothing received yet).
    stats : ClientStats
        What the clients reported.
    round_idx : int or None
        The round (what ``stale_after`` measures evidence's age from); None: every direction
        counts as fresh.
    history : ndarray of shape (n_clients, p), int, or None
        Each client's corroborating peers from history (`adcs.adversary.peers`; −1 where
        none); None: peers by this round's directions only.

    Returns
    -------
    Screening
    """
    n = stats.n_probed
    none = np.zeros(n, dtype=bool)
    if n == 0 or (stats.losses is None and stats.updates is None):
        return Screening(stats, none, none, none, None, None, none)
    stats, refused = refuse(stats)
    known = _known(memory, stats)
    directions, norms, from_received = _received_directions(defence, memory, stats, known)
    has_direction = known.finite | from_received
    losses, norms, corroborated, ident_cos, clipped = _corroborated(
        defence, stats, known, norms, history
    )
    judged, judged_rows, fresh = _judged(
        defence, memory, stats, known, directions, has_direction, from_received, round_idx
    )
    dropped, threshold = _implausible(defence, known, judged, judged_rows, fresh, ident_cos)
    if directions is None and losses is not None and dropped.any():
        losses = np.where(dropped, np.nan, losses)
    updates = _passed_on(stats, known, directions, norms, has_direction, from_received, dropped)
    out = ClientStats(stats.available, stats.clients, losses, updates)
    return Screening(out, corroborated, from_received, dropped, threshold, refused, clipped)
