"""Adaptive Determinantal Client Scheduling (ADCS), paper Sec. 4 and Algorithm 1.

Every R rounds the server probes every client's update g_n and loss at w⁽ᵗ⁾ (or, with
``candidates = d``, those of d clients drawn uniformly from the available ones), forms the normalised
updates φ_n = g_n/‖g_n‖ (Gram matrix C = ΦᵀΦ, eq. 5) and quality scores q_n, and schedules the
greedy MAP of the m-DPP with kernel L = Q C Q, Q = diag(e^{αq}), α = θ / (2(1 − θ)) (eq. 7–9), which
maximises (1 − θ) log det C_S + θ Σ_{n∈S} q_n (eq. 6). Between refreshes the kernel — and, MAP being
deterministic, the selection — is unchanged.

Option ``fresh_quality`` (not the paper's): the kernel C is still refreshed every R rounds, but the
quality q every round, from a loss probe of the pool's clients (PowerOfChoice's cost: one loss
evaluation per client, no update), so the selection can move between kernel refreshes.

The communication term (Sec. 4.1): q = (1 − γ) q_learn + γ q_comm, with q_comm given per client or,
with ``comm_score="speed"``, derived from the clients' expected round durations τ_n by
[`speed_score`][adcs.schedulers.adcs.speed_score] when the runtime knows them
([`UsesRoundTimes`][adcs.schedulers.base.UsesRoundTimes]).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from adcs._validate import check_bool, check_int, check_unit_interval
from adcs.dpp import alpha_of, row_norms
from adcs.schedulers._common import (
    BasicState,
    Pool,
    SchedulerBase,
    candidate_probe,
    fill_from,
    probed_updates,
)
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
    check_available,
    top_m,
)
from adcs.schedulers.variants import Extra, Variants

SPEED = "speed"
"""``comm_score`` value asking for q_comm derived from the clients' round durations."""


def speed_score(round_times: ArrayLike) -> FloatArray:
    """q_comm from expected round durations: the negative log duration, scaled to [0, 1].

    q_comm_n = (log τ_max − log τ_n) / (log τ_max − log τ_min): 1 for the fastest client, 0 for
    the slowest, linear in −log τ between (so a client twice as fast as another gains the same
    whatever the units or the median speed). All zeros when every τ_n is equal.

    Parameters
    ----------
    round_times : ndarray of shape (n_clients,)
        τ_n > 0, seconds of a full local round.

    Returns
    -------
    ndarray of shape (n_clients,), in [0, 1]
    """
    tau = np.asarray(round_times, dtype=np.float64)
    if tau.ndim != 1 or tau.size == 0 or not np.isfinite(tau).all() or (tau <= 0).any():
        raise ValueError("round_times must be a non-empty 1-D array of finite durations > 0")
    log_tau = np.log(tau)
    span = float(log_tau.max() - log_tau.min())
    if span == 0.0:
        return np.zeros(tau.size)
    return np.asarray((log_tau.max() - log_tau) / span)


_MAX_LOG_WEIGHT = 1e300
"""Log weights are clipped here: far beyond any log-det difference, and sums stay finite."""


def log_weights(alpha: float, quality: FloatArray, eligible: BoolArray) -> FloatArray:
    """w_n = 2α (q_n − median q) of the eligible clients (eq. 7 in the log domain), 0 elsewhere.

    MAP is unchanged by adding one constant to every log weight. The greedy compares sums
    w_n + log d_n² and never exponentiates, so the constant is chosen for resolution, not for
    exp: the median keeps the typical clients' weights small and exact however extreme an
    outlier is (q up to the float64 range, e.g. 1e308). An outlier whose weight still overflows
    is clipped to ±1e300 — above (or, at −inf, below: weight zero) every other client, which
    is its exact rank — so every weight stays usable.
    """
    q = np.asarray(quality, dtype=np.float64)
    if not eligible.any():
        return np.zeros_like(q)
    with np.errstate(over="ignore", invalid="ignore"):
        w = 2.0 * alpha * (q - float(np.median(q[eligible])))
    w = np.clip(np.nan_to_num(w, nan=0.0, posinf=_MAX_LOG_WEIGHT, neginf=-np.inf),
                -np.inf, _MAX_LOG_WEIGHT)  # fmt: skip
    return np.where(eligible, w, 0.0)


def held_order(
    order: IntArray,
    pool: Pool,
    available: BoolArray,
    k: int,
    remap: Callable[[BoolArray], IntArray],
) -> IntArray:
    """The selection between refreshes (Algorithm 1), before the random top-up of `fill_from`.

    ``order`` is the MAP order over the whole ``pool`` made at the last refresh: it is kept while
    at least ``k`` of it are there and all of it is available (the MAP over the whole pool is
    also the MAP over any available part that contains it); otherwise ``remap(eligible)``, the
    MAP over the pool's available part (``eligible``, bool of shape (pool.size,)) with the
    refresh's kernel and quality. Shared by ADCS and ADCS-2's ``select_every``.
    """
    if order.size < k or not available[order].all():
        return remap(available[pool.clients])
    return order


class Quality(enum.Enum):
    """The learning-related quality score q_learn of a client."""

    LOSS = "loss"
    """Local loss at w⁽ᵗ⁾ on the minibatch the probed update was computed on (free)."""
    GRAD_NORM = "grad_norm"
    """Norm of the probed update ‖g_n‖."""


@dataclass(frozen=True, eq=False)
class ADCSState(BasicState):
    """Per-run ADCS state (everything is over the *pool*: the clients usable at the last refresh).

    Attributes
    ----------
    pool : Pool or None
        Clients that had a finite update and quality at the last refresh, with their kernel C
        (eq. 5).
    quality : ndarray of shape (n_pool,) or None
        q_n of the last refresh (with ``fresh_quality``, of the last loss probe).
    refreshed_at : int
        Round of the last refresh (−1 before the first).
    order : ndarray of shape (min(m, n_pool),) or None
        Greedy MAP order over the whole pool: the selection whenever all of it is available.
    """

    pool: Pool | None = None
    quality: FloatArray | None = None
    refreshed_at: int = -1
    order: IntArray | None = None


@dataclass(frozen=True)
class ADCS(SchedulerBase[ADCSState]):
    """Adaptive Determinantal Client Scheduling.

    Parameters
    ----------
    m : int
        Clients per round.
    theta : float
        Quality–diversity trade-off θ ∈ [0, 1] (eq. 6): 0 is pure diversity, 1 is top-m by quality.
    refresh_every : int
        R ≥ 1: the kernel is rebuilt from fresh probes every R rounds (Algorithm 1, line 2).
    quality : Quality
        q_learn: the probe's minibatch loss (default) or the update norm.
    gamma : float
        γ ∈ [0, 1]: q = (1 − γ) q_learn + γ q_comm (Sec. 4.1); needs ``comm_score`` when γ > 0.
    comm_score : tuple of float, "speed", optional
        Per-client communication score q_comm, one per client; or ``"speed"``: q_comm from the
        clients' expected round durations ([`speed_score`][adcs.schedulers.adcs.speed_score]), which
        the runtime hands over through
        [`with_round_times`][adcs.schedulers.adcs.ADCS.with_round_times] (the simulator does when it
        has a system profile).
    fresh_quality : bool
        ``False`` (default, the paper's): between refreshes nothing is probed and the selection
        stays. ``True``: every round between refreshes probes the loss of the pool's available
        clients on one minibatch and reruns the MAP on the cached kernel C with q from those
        losses (a client whose fresh loss is missing keeps its last q). Needs
        ``quality=Quality.LOSS``.
    candidates : int or None
        d ≥ m: each refresh probes d clients drawn uniformly from the available ones, and the DPP
        runs over that pool (cross-device scale: the probe costs d updates, not N). ``None``
        (default, the paper): every available client.

    Notes
    -----
    Clients whose probed update or quality is missing or non-finite are left out of the kernel and
    chosen only to keep the selection full. A zero update has no direction: it enters the DPP with
    zero weight, so it is chosen only after every client with a direction is exhausted. The kernel
    is built from the unit updates, so updates of any finite scale are safe.
    """

    named_params: ClassVar[tuple[str, ...]] = ("theta", "refresh_every")
    leaderboard_variants: ClassVar[Variants | None] = Variants(
        lever="theta",
        values=(0.6, 0.8, 0.9, 0.95),  # θ is the lever between diversity and quality (issue 11)
        published=0.8,  # the paper's (Sec. 6)
        fixed=(("refresh_every", 20),),  # the paper's R
        extras=(
            Extra(
                "fresh",
                (("fresh_quality", True),),
                label="fresh q",
                description="quality refreshed every round by a loss probe, kernel every R rounds",
            ),
        ),
        symbols=(("theta", "θ"), ("refresh_every", "R")),
    )
    """On the leaderboard: θ ∈ {0.6, 0.8, 0.9, 0.95} at R = 20, and fresh quality at θ = 0.8."""

    theta: float = 0.8
    refresh_every: int = 20
    quality: Quality = Quality.LOSS
    gamma: float = 0.0
    comm_score: tuple[float, ...] | str | None = None
    fresh_quality: bool = False
    candidates: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.candidates is not None:
            check_int("candidates", self.candidates, minimum=self.m)
        check_unit_interval("theta", self.theta)
        check_int("refresh_every", self.refresh_every)
        if not isinstance(self.quality, Quality):
            raise ValueError(
                f"quality must be a Quality ({[q.value for q in Quality]}), got {self.quality!r}"
            )
        check_unit_interval("gamma", self.gamma)
        if isinstance(self.comm_score, str):
            if self.comm_score != SPEED:
                raise ValueError(
                    f"comm_score must be per-client numbers or {SPEED!r}, got {self.comm_score!r}"
                )
        elif self.comm_score is not None:
            score = np.asarray(self.comm_score, dtype=np.float64)
            if score.ndim != 1 or not np.isfinite(score).all():
                raise ValueError("comm_score must be a sequence of finite numbers, one per client")
            object.__setattr__(self, "comm_score", tuple(float(x) for x in score))
        if self.gamma > 0 and self.comm_score is None:
            raise ValueError(
                "gamma > 0 needs comm_score (the per-client communication score q_comm)"
            )
        check_bool("fresh_quality", self.fresh_quality)
        if self.fresh_quality and self.quality is not Quality.LOSS:
            raise ValueError(
                "fresh_quality probes losses, so it needs quality=Quality.LOSS, "
                f"got quality={self.quality}"
            )

    @property
    def alpha(self) -> float:
        """α = θ / (2(1 − θ)) (eq. 7)."""
        return alpha_of(self.theta)

    @property
    def needs_round_times(self) -> bool:
        """``comm_score="speed"`` needs the clients' round durations before it can run."""
        return self.comm_score == SPEED

    def with_round_times(self, round_times: FloatArray) -> Scheduler:
        """With ``comm_score="speed"``, this scheduler with q_comm =
        [`speed_score`][adcs.schedulers.adcs.speed_score]."""
        if self.comm_score != SPEED:
            return self
        return replace(self, comm_score=tuple(speed_score(round_times).tolist()))

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> ADCSState:
        sizes = self._check_init(n_clients, data_sizes)
        if self.comm_score == SPEED:
            raise ValueError(
                "comm_score='speed' needs the clients' round durations: run with a system "
                "profile ([sim.system], SimConfig.system) or call with_round_times first"
            )
        if self.comm_score is not None and len(self.comm_score) != n_clients:
            raise ValueError(
                f"comm_score has {len(self.comm_score)} entries but there are {n_clients} clients"
            )
        return ADCSState(n_clients, sizes)

    def _due(self, state: ADCSState, round_idx: int) -> bool:
        return state.pool is None or round_idx - state.refreshed_at >= self.refresh_every

    def probe(
        self, state: ADCSState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        if self._due(state, round_idx):
            return candidate_probe(self.candidates, available, rng)
        if self.fresh_quality and state.pool is not None:
            return Probe(ProbeKind.LOSSES, clients=state.pool.clients)
        return NO_PROBE

    def quality_scores(self, stats: ClientStats) -> FloatArray:
        """q_n of every probed client, shape (n_probed,) (NaN where unknown)."""
        if self.quality is Quality.LOSS:
            if stats.losses is None:
                raise ValueError("ADCS with quality=LOSS needs the probe's losses (stats.losses)")
            q = np.asarray(stats.losses, dtype=np.float64)
        else:
            updates, usable = probed_updates(stats)
            q = np.full(stats.n_probed, np.nan)
            q[usable] = row_norms(updates if usable.all() else updates[usable])  # ‖g_n‖
        if self.comm_score is not None:
            q = (1.0 - self.gamma) * q + self.gamma * np.asarray(self.comm_score)[stats.clients]
        return q

    def _refresh(self, state: ADCSState, round_idx: int, stats: ClientStats) -> ADCSState:
        updates, usable = probed_updates(stats)
        quality = self.quality_scores(stats)
        usable = usable & np.isfinite(quality)
        rows = updates if usable.all() else updates[usable]
        # at most one MAP per round until the next refresh
        pool = Pool.from_updates(stats.clients[usable], rows, self.refresh_every * self.m)
        state = replace(
            state, pool=pool, quality=quality[usable], refreshed_at=round_idx, order=None
        )
        return replace(state, order=self._map(state, np.ones(pool.size, dtype=bool)))

    def _requality(self, state: ADCSState, stats: ClientStats) -> ADCSState:
        """q from this round's loss probe of the pool (``fresh_quality``), and the MAP order anew."""
        assert state.pool is not None and state.quality is not None
        fresh = self.quality_scores(stats)
        known = np.isfinite(fresh)
        pos = np.searchsorted(state.pool.clients, stats.clients[known])
        quality = state.quality.copy()
        quality[pos] = fresh[known]
        state = replace(state, quality=quality, order=None)
        return replace(state, order=self._map(state, np.ones(quality.size, dtype=bool)))

    def _map(self, state: ADCSState, eligible: BoolArray) -> IntArray:
        """The greedy MAP (or top-m at θ = 1) over the eligible pool positions, as client indices."""
        assert state.pool is not None and state.quality is not None
        if self.theta >= 1.0:
            scores = np.where(eligible, state.quality, np.nan)
            return state.pool.clients[top_m(scores, min(self.m, int(eligible.sum())))]
        return state.pool.greedy_map(
            log_weights(self.alpha, state.quality, eligible), eligible, self.m
        )

    def select(
        self, state: ADCSState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, ADCSState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if self._due(state, round_idx):
            state = self._refresh(state, round_idx, stats)
        elif self.fresh_quality and stats.losses is not None and stats.n_probed:
            state = self._requality(state, stats)
        assert state.pool is not None and state.order is not None
        order = held_order(
            state.order, state.pool, available, k, lambda eligible: self._map(state, eligible)
        )
        return Selection(fill_from(order, available, k, rng, stats.non_finite())), state
