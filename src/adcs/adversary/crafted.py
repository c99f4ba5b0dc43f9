"""Attackers that send what they report: crafted updates (docs/concepts/threat-model.md).

`Attack` lies in the statistics only, so a server that schedules on what it
*received* (``Defence.received``) sees through it. A `Crafted` attacker changes the update
it sends as well: each malicious client reports and sends

    dᵢ = c · aᵢ + √(1 − c²) · vᵢ,    ‖sent‖ = ``scale`` × ‖its true update‖,

where aᵢ is its *anchor* (its own update's direction, or — ``target = "worst"``, impersonation —
the direction of the honest client with the highest reported loss this round) and vᵢ is a
*novel* direction orthogonal to every honest client's update and to aᵢ: the part that a
determinant (ADCS) and a facility-location gain (DivFL) reward. vᵢ is a fixed draw per client
(``shared = false``: a coalition *spreading* over k directions) or one draw for the whole
coalition (``shared = true``), re-orthogonalised each round. Reported losses are × ``factor``.
Before round ``start`` every malicious client is honest (a sleeper).

The families of ``adcs bench attacks`` are settings of this one class: *consistent* (c < 1,
factor 1), *free riding* (``scale`` ≪ 1), *coalitions* (k > 1, shared or spread, factor > 1),
*impersonation* (``target = "worst"``), *sleepers* (``start`` > 0); and the red team's (issue
33): *the burst after an emptied window* (``quiet`` before ``start``), *Sybils at the cap* (a
shared direction at a low c, losses × 10, 1 % of the norm), *the smother* (``target =
"smother"``, c = 1, ``loss = 0``, 1 % of the norm), *flattening a standardised quality* (c = 1,
losses × 10⁶).

**What the adaptive form reads** (``adaptive = true``): the defence and this round's reports of
every client. It raises c to the least value that passes the screens — the best cosine of dᵢ to
an honest client at least the plausibility threshold (+0.02), and dᵢ's part outside the honest
span at most the span screen's threshold (−0.02) — so its novel part is the largest the defence
lets through. Nothing it reports or sends moves the sliding-window cap.

What the server receives is what the attacker reported last (consistent by construction): the
hook (`Sending`) replaces a malicious client's returned update by its last reported
direction at ``scale`` × its true norm, or, if it reported none (a loss probe), by the direction
crafted against this round's returned honest updates.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_int, check_number
from adcs.adversary.bound import outside_span
from adcs.adversary.defence import Defence, best_cosines, cosines
from adcs.adversary.defended import Defended
from adcs.adversary.members import check_members, members_of
from adcs.adversary.wrapper import AttackerState, Wrapping, remember
from adcs.aggregation import Aggregator, RobustAggregation
from adcs.dpp import row_norms, unit_rows
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

__all__ = ["Crafted", "Crafting", "CraftingState", "Sending", "Target", "crafted_directions"]

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]

_MARGIN = 0.02
_SHARED = 1 << 30
"""The novel direction's draw index of a coalition sharing one (beyond any client index)."""
_NOVEL = 1 << 40
"""Counter offset of the novel directions' draws (beyond any round of the lies' draws)."""


class Target(enum.Enum):
    """What a crafted direction is anchored to."""

    OWN = "own"
    """The client's own update (its true data)."""
    WORST = "worst"
    """The honest client with the highest reported loss (impersonating the worst-served group)."""
    SMOTHER = "smother"
    """The mean direction of a group: the honest client with the highest reported loss and its
    nearest honest clients (p + 1 of them against corroboration with p peers, else 3). Two
    colluders per group: the first two smother the worst group, the next two the next one
    (`smother_anchors`). With ``loss = 0`` they become the group's corroborating peers and
    report its loss away (issue 33)."""


@dataclass(frozen=True)
class Crafted:
    """A coalition that reports and sends crafted updates (``[sim.attack] kind = "crafted"``).

    Parameters
    ----------
    clients : tuple of int, optional
        The malicious clients; or
    n_malicious : int, optional
        how many to draw from each seed (`adcs.adversary.malicious_clients`).
    cosine : float
        c ∈ [0, 1], the cosine of the crafted direction with its anchor (1: no novel part).
    target : Target or str
        ``"own"`` or ``"worst"`` (impersonation).
    shared : bool
        The coalition shares one novel direction (else each client has its own).
    scale : float
        > 0: the sent (and reported) norm over the client's true update norm (0.01: free riding).
    factor : float
        > 0: the reported loss multiplier (1: no loss lie).
    start : int
        ≥ 0: the round from which the clients attack (honest before: a sleeper).
    quiet : bool
        Before ``start``, report nothing (NaN loss and update) instead of honestly: the burst
        after an emptied window (a cap counts no selection of a client that is never usable).
    loss : float or None
        ≥ 0: report this loss instead of × ``factor`` (0: the smother). None (default): × factor.
    absent : bool
        From ``start`` on the clients take no part at all: unavailable every round, so never
        selected, probed or aggregated. Not an attack but the federation without them — the run
        against which an attack's harm *through selection* is measured (what a selection-side
        defence could at best undo), beside the no-attack run, where they train honestly.
    adaptive : bool
        Read the active defence (module docstring).
    seed : int
        ≥ 0, keys the novel directions (set per run by `build`).
    """

    clients: tuple[int, ...] | None = None
    n_malicious: int | None = None
    cosine: float = 0.5
    target: Target | str = Target.OWN
    shared: bool = False
    scale: float = 1.0
    factor: float = 1.0
    start: int = 0
    written_when_set: ClassVar[frozenset[str]] = frozenset({"quiet", "loss", "absent"})
    """Keys added after the first manifests: written back only when set (`KindTable.to_dict`)."""
    quiet: bool = False
    loss: float | None = None
    absent: bool = False
    adaptive: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        clients = check_members(self.clients, self.n_malicious)
        object.__setattr__(self, "clients", None if clients is None else tuple(sorted(clients)))
        check_number("cosine", self.cosine, 0.0, 1.0)
        try:
            object.__setattr__(self, "target", Target(self.target))
        except ValueError:
            raise ValueError(
                f"target must be one of {[t.value for t in Target]}, got {self.target!r}"
            ) from None
        check_bool("shared", self.shared)
        check_number("scale", self.scale, 0.0, low_open=True)
        check_number("factor", self.factor, 0.0, low_open=True)
        check_int("start", self.start, minimum=0)
        check_bool("quiet", self.quiet)
        if self.loss is not None:
            check_number("loss", self.loss, 0.0)
        check_bool("absent", self.absent)
        check_bool("adaptive", self.adaptive)
        check_int("seed", self.seed, minimum=0)

    def malicious(self, seed: int, n_clients: int) -> tuple[int, ...]:
        """The malicious clients of ``seed`` (ValueError when they do not exist)."""
        return members_of(self.clients, self.n_malicious, seed, n_clients)

    def build(self, seed: int, n_clients: int) -> Crafted:
        """This attack on one run: its clients fixed, its draws keyed by ``seed``."""
        return replace(self, clients=self.malicious(seed, n_clients), n_malicious=None, seed=seed)

    @property
    def members(self) -> tuple[int, ...]:
        """The malicious clients (after `build`)."""
        if self.clients is None:
            raise ValueError("a crafted attack drawn per seed must be built for a run first")
        return self.clients

    def rows(self, clients: IntArray) -> BoolArray:
        """Which of ``clients`` (shape (n,)) are malicious."""
        return np.isin(np.asarray(clients), np.asarray(self.members))


# --------------------------------------------------------------------------------------------
# the crafted directions


@functools.lru_cache(maxsize=16)
def _novel_draws(seed: int, index: int, dim: int) -> F64Array:
    """A fixed standard normal vector of ``dim`` for (seed, draw index): the same every round."""
    draws = round_generator(stream_key(seed), Domain.ATTACK, _NOVEL + index).standard_normal(dim)
    draws.setflags(write=False)
    return draws


def _orthogonal_to(vectors: F64Array, basis: FloatArray) -> F64Array:
    """Rows of ``vectors`` (k, dim) less their projection on span(basis rows), unit length.

    Through the basis' Gram matrix (n × n, pseudo-inverse: the rows may be dependent), O(n² dim).
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if basis.shape[0]:  # the products in the basis' precision (float32 updates stay float32)
        gram = (basis @ basis.T).astype(np.float64)
        coef = np.linalg.pinv(gram, hermitian=True) @ (basis @ vectors.T.astype(basis.dtype))
        vectors = vectors - (coef.T.astype(basis.dtype) @ basis).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _least_cosine(
    attack: Crafted, defence: Defence | None, anchor: F64Array, honest: FloatArray
) -> F64Array:
    """Per row, the cosine with its anchor that the adaptive form uses (module docstring)."""
    need = np.full(anchor.shape[0], attack.cosine)
    if defence is None or not attack.adaptive or honest.shape[0] < 2:
        return need
    if defence.plausibility > 0:
        best = best_cosines(cosines(honest, np.ones(honest.shape[0], dtype=bool)))
        threshold = defence.plausibility * float(np.median(best))
        to_honest = np.max(anchor @ honest.T, axis=1)  # the novel part adds no cosine
        need = np.maximum(need, (threshold + _MARGIN) / np.maximum(to_honest, 1e-12))
    if defence.novelty > 0:
        outside = outside_span(honest, np.ones(honest.shape[0], dtype=bool))
        limit = min(defence.novelty * float(np.median(outside)) - _MARGIN, 1.0)
        both = np.vstack([honest, anchor.astype(honest.dtype)])
        mine = outside_span(both, np.ones(both.shape[0], dtype=bool))[honest.shape[0] :]
        # ‖outside‖² of c·a + s·v is c²‖a_out‖² + s² (v ⊥ the honest span and a): solve for c
        a2 = np.minimum(mine**2, 1.0 - 1e-9)
        need = np.maximum(need, np.sqrt(np.clip((1.0 - max(limit, 0.0) ** 2) / (1.0 - a2), 0, 1)))
    return np.minimum(need, 1.0)


def smother_anchors(
    attack: Crafted,
    clients: IntArray,
    honest_units: F32Array,
    honest_losses: FloatArray | None,
    group: int,
) -> F64Array:
    """The anchor of each malicious client of ``clients`` under ``Target.SMOTHER``, (k, dim).

    The groups are found greedily: the honest client of highest reported loss (NaN last) and its
    ``group − 1`` nearest honest clients by cosine, then the highest-loss client outside them,
    and so on; member j of the coalition (ascending) smothers group ⌊j / 2⌋.
    """
    n = honest_units.shape[0]
    losses = np.zeros(n) if honest_losses is None else np.asarray(honest_losses, np.float64)
    order = np.argsort(-np.where(np.isfinite(losses), losses, -np.inf), kind="stable")
    cos = (honest_units @ honest_units.T).astype(np.float64)
    members = np.asarray(attack.members)
    wanted = (len(members) + 1) // 2
    taken, anchors = np.zeros(n, dtype=bool), []
    for t in order.tolist():
        if taken[t]:
            continue
        grp = np.argsort(-cos[t], kind="stable")[: max(1, group)]
        taken[grp] = True
        anchors.append(honest_units[grp].astype(np.float64).mean(axis=0))
        if len(anchors) == wanted:
            break
    rows = np.asarray(unit_rows(np.vstack(anchors), np.float64), dtype=np.float64)
    which = np.searchsorted(members, np.asarray(clients)) // 2
    return np.asarray(rows[np.minimum(which, rows.shape[0] - 1)])


def crafted_directions(
    attack: Crafted,
    clients: IntArray,
    own: FloatArray,
    honest: FloatArray,
    honest_losses: FloatArray | None,
    defence: Defence | None = None,
) -> F64Array:
    """The unit directions malicious ``clients`` report and send, shape (k, dim).

    Parameters
    ----------
    attack : Crafted
    clients : ndarray of shape (k,), int
    own : ndarray of shape (k, dim)
        Their true updates this round.
    honest : ndarray of shape (n_honest, dim)
        The honest clients' updates this round (the span to leave, the targets to impersonate).
    honest_losses : ndarray of shape (n_honest,), optional
        Their reported losses (the worst-served client is the target of impersonation).
    defence : Defence, optional
        Read by the adaptive form.
    """
    honest_units = np.asarray(unit_rows(honest), dtype=np.float32)
    anchor = np.asarray(unit_rows(own, np.float64), dtype=np.float64)
    impersonating = attack.target is not Target.OWN and honest_units.shape[0] > 0
    if impersonating and attack.target is Target.SMOTHER:
        group = defence.peers + 1 if defence is not None and defence.corroborate else 3
        anchor = smother_anchors(attack, clients, honest_units, honest_losses, group)
    elif impersonating:
        if honest_losses is not None and np.isfinite(honest_losses).any():
            worst = int(np.nanargmax(np.where(np.isfinite(honest_losses), honest_losses, np.nan)))
        else:
            worst = 0
        target = unit_rows(np.asarray(honest[worst : worst + 1], dtype=np.float64), np.float64)
        anchor = np.repeat(target, anchor.shape[0], axis=0)
    dim = anchor.shape[1]
    index = [_SHARED if attack.shared else int(c) for c in clients]
    novel = np.stack([_novel_draws(attack.seed, i, dim) for i in index])
    k = anchor.shape[0]
    if impersonating:
        # the anchor is an honest direction, inside the span: ⊥ the span, then exactly ⊥ the
        # anchor in float64 (its part outside the span is only the projection's rounding, whose
        # direction is noise), so the cosine with the impersonated client is c on any BLAS kernel
        free = _orthogonal_to(novel, honest_units)
        free -= np.einsum("ij,ij->i", free, anchor)[:, None] * anchor
    else:
        # ⊥ the honest span (one projection for all rows), then ⊥ each row's own anchor: its
        # part outside the honest span, since the rest of the anchor is already orthogonal
        both = _orthogonal_to(np.vstack([novel, anchor]), honest_units)
        free, outside = both[:k], both[k:]
        free -= np.einsum("ij,ij->i", free, outside)[:, None] * outside
    free /= np.maximum(np.linalg.norm(free, axis=1, keepdims=True), 1e-300)
    c = _least_cosine(attack, defence, anchor, honest_units)[:, None]
    return np.asarray(c * anchor + np.sqrt(1.0 - c * c) * free, dtype=np.float64)


def craft(
    attack: Crafted, stats: ClientStats, round_idx: int, defence: Defence | None = None
) -> tuple[ClientStats, IntArray, F64Array | None]:
    """The reported statistics, which probed rows were crafted, and their unit directions.

    Honest rows, the availability mask and the probed set are passed on untouched; before
    ``attack.start`` nothing changes.
    """
    none = np.zeros(0, dtype=np.intp)
    if attack.absent:
        return (_without(attack, stats) if round_idx >= attack.start else stats), none, None
    if round_idx < attack.start and attack.quiet and stats.n_probed:
        return _silenced(attack, stats), none, None
    if round_idx < attack.start or stats.n_probed == 0:
        return stats, none, None
    usable = stats.usable()
    mal = attack.rows(stats.clients) & usable
    if not mal.any():
        return stats, none, None
    rows = np.flatnonzero(mal)
    honest = usable & ~attack.rows(stats.clients)
    losses = stats.losses
    if losses is not None:
        losses = np.array(losses, dtype=np.float64)
        losses[rows] = losses[rows] * attack.factor if attack.loss is None else attack.loss
    if stats.updates is None:
        return ClientStats(stats.available, stats.clients, losses, None), rows, None
    updates = np.array(stats.updates, dtype=np.float32)
    honest_losses = None if losses is None else losses[honest]
    directions = crafted_directions(
        attack, stats.clients[rows], updates[rows], updates[honest], honest_losses, defence
    )
    norms = row_norms(updates[rows]) * attack.scale
    updates[rows] = (directions * norms[:, None]).astype(np.float32)
    return ClientStats(stats.available, stats.clients, losses, updates), rows, directions


def _without(attack: Crafted, stats: ClientStats) -> ClientStats:
    """``stats`` with the malicious clients unavailable and their probed rows removed."""
    available = np.asarray(stats.available) & ~attack.rows(np.arange(stats.n_clients))
    keep = ~attack.rows(stats.clients)
    return ClientStats(
        available,
        stats.clients[keep],
        None if stats.losses is None else np.asarray(stats.losses)[keep],
        None if stats.updates is None else np.asarray(stats.updates)[keep],
    )


def _silenced(attack: Crafted, stats: ClientStats) -> ClientStats:
    """``stats`` with the malicious rows reporting nothing (NaN loss and update row)."""
    mal = attack.rows(stats.clients)
    if not mal.any():
        return stats
    losses = None
    if stats.losses is not None:
        losses = np.where(mal, np.nan, np.asarray(stats.losses, dtype=np.float64))
    updates = None
    if stats.updates is not None:
        updates = np.array(stats.updates, dtype=np.float32)
        updates[mal] = np.nan
    return ClientStats(stats.available, stats.clients, losses, updates)


# --------------------------------------------------------------------------------------------
# the wrapper and the hook


CraftingState = AttackerState
"""Per-run state of `Crafting` (`AttackerState`)."""


@dataclass(frozen=True)
class Crafting(Wrapping):
    """Any scheduler told crafted reports (the Scheduler protocol); pair it with `Sending`.

    Parameters
    ----------
    scheduler : Scheduler
        A plain scheduler or a `Defended` one (read by the adaptive form).
    attack : Crafted
        Built for the run (`Crafted.build`).
    """

    scheduler: Scheduler
    attack: Crafted

    def __post_init__(self) -> None:
        self._check(self.attack, Crafted, "a Crafted")
        self.attack.members  # noqa: B018 — refuses an attack not built for a run

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> CraftingState:
        return self._initial(self.attack.members, n_clients, data_sizes)

    def select(
        self, state: CraftingState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, CraftingState]:
        defence = self.scheduler.defence if isinstance(self.scheduler, Defended) else None
        told, rows, directions = craft(self.attack, stats, round_idx, defence)
        selection, inner = self.scheduler.select(state.inner, round_idx, told, rng)
        state = replace(state, inner=inner)
        if directions is not None:
            clients = stats.clients[rows]
            state = remember(state, self.attack.members, clients, directions.astype(np.float32))
        return selection, state


def _losses_of(probed: ClientStats | None, clients: IntArray) -> FloatArray | None:
    """The probed losses of ``clients`` (NaN for those not probed), or None without a loss probe."""
    if probed is None or probed.losses is None or probed.n_probed == 0:
        return None
    order = np.argsort(probed.clients)
    pos = np.clip(np.searchsorted(probed.clients[order], clients), 0, order.size - 1)
    found = probed.clients[order][pos] == clients
    return np.where(found, np.asarray(probed.losses, dtype=np.float64)[order][pos], np.nan)


def sent_updates(
    attack: Crafted,
    state: Any,
    round_idx: int,
    clients: IntArray,
    updates: F32Array,
    probed: ClientStats | None = None,
    defence: Defence | None = None,
) -> F32Array:
    """What the server receives: malicious rows replaced by their crafted updates, (n, dim).

    ``probed`` (this round's probe, honest values) gives the losses that pick the target of an
    impersonator that reported no direction; ``defence`` is read by the adaptive form when it
    crafts a direction it did not report (a loss probe: the server judges what it receives).
    """
    mal = attack.rows(clients) & finite_rows(updates)
    if round_idx < attack.start or not mal.any():
        return updates
    out = np.array(updates, dtype=np.float32)
    malicious = clients[mal]
    directions = np.zeros((malicious.size, out.shape[1]))
    has = np.zeros(malicious.size, dtype=bool)
    reported = state.reported if isinstance(state, CraftingState) else None
    if reported is not None and reported.shape[1] == out.shape[1]:
        where = np.searchsorted(np.asarray(attack.members), malicious)
        has = state.has_reported[where]
        directions[has] = reported[where[has]]
    if not has.all():  # never reported a direction: crafted against the returned honest updates
        honest = ~attack.rows(clients) & finite_rows(updates)
        directions[~has] = crafted_directions(
            attack,
            malicious[~has],
            updates[mal][~has],
            updates[honest],
            _losses_of(probed, clients[honest]),
            defence,
        )
    norms = row_norms(updates[mal]) * attack.scale
    out[mal] = (directions * norms[:, None]).astype(np.float32)
    return out


@dataclass(frozen=True)
class Sending:
    """The aggregation hook of a crafted attack: the crafted updates, then a rule.

    Parameters
    ----------
    attack : Crafted
    rule : Aggregator
        What the server does with what it received (a robust rule, or a defence's own
        `Aggregator`).
    defence : Defence, optional
        The server's defence, read by the adaptive form.
    """

    attack: Crafted
    rule: Aggregator = field(default_factory=RobustAggregation)
    defence: Defence | None = None

    def aggregate(
        self,
        state: Any,
        round_idx: int,
        clients: IntArray,
        updates: F32Array,
        coefs: F64Array,
        probed: ClientStats,
    ) -> tuple[F32Array, F32Array]:
        received = sent_updates(
            self.attack, state, round_idx, clients, updates, probed, self.defence
        )
        return self.rule.aggregate(state, round_idx, clients, received, coefs, probed)
