"""Adaptive Determinantal Client Scheduling (ADCS), paper Sec. 4 and Algorithm 1.

Every R rounds the server probes every client's update g_n and loss at w⁽ᵗ⁾, forms the normalised
updates φ_n = g_n/‖g_n‖ (Gram matrix C = ΦᵀΦ, eq. 5) and quality scores q_n, and schedules the
greedy MAP of the m-DPP with kernel L = Q C Q, Q = diag(e^{αq}), α = θ / (2(1 − θ)) (eq. 7–9), which
maximises (1 − θ) log det C_S + θ Σ_{n∈S} q_n (eq. 6). Between refreshes the kernel — and, MAP being
deterministic, the selection — is unchanged.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import numpy as np

from adcs.schedulers._common import (
    UPDATES_OF_ALL,
    BasicState,
    SchedulerBase,
    fill_from,
    gram_matrix,
    map_subset,
    probed_updates,
    unit_gram,
)
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    Selection,
    check_available,
    check_positive_int,
    check_unit_interval,
    top_m,
)


class Quality(enum.Enum):
    """The learning-related quality score q_learn of a client."""

    LOSS = "loss"
    """Local loss at w⁽ᵗ⁾ on the minibatch the probed update was computed on (free)."""
    GRAD_NORM = "grad_norm"
    """Norm of the probed update ‖g_n‖."""


def alpha_of(theta: float) -> float:
    """α = θ / (2(1 − θ)) (eq. 7); +inf at θ = 1."""
    return math.inf if theta >= 1.0 else theta / (2.0 * (1.0 - theta))


@dataclass(frozen=True, eq=False)
class ADCSState(BasicState):
    """Per-run ADCS state.

    Attributes
    ----------
    kernel : ndarray of shape (n_clients, n_clients) or None
        C = ΦᵀΦ of the last refresh (eq. 5; zero rows for clients without a usable update).
    quality : ndarray of shape (n_clients,) or None
        q_n of the last refresh (NaN for clients without one).
    usable : ndarray of bool, shape (n_clients,) or None
        Clients that had a finite update and quality at the last refresh.
    refreshed_at : int
        Round of the last refresh (−1 before the first).
    selection : ndarray of shape (m,) or None
        The MAP subset of the current kernel when every client was available.
    """

    kernel: FloatArray | None = None
    quality: FloatArray | None = None
    usable: BoolArray | None = None
    refreshed_at: int = -1
    selection: IntArray | None = None


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
    comm_score : tuple of float, optional
        Per-client communication score q_comm, one per client.

    Notes
    -----
    Clients whose probed update or quality is missing or non-finite are left out of the kernel and
    chosen only to keep exactly ``m``. A zero update has no direction: it enters the DPP with zero
    weight, so it is chosen only after every client with a direction is exhausted.
    """

    theta: float = 0.8
    refresh_every: int = 20
    quality: Quality = Quality.LOSS
    gamma: float = 0.0
    comm_score: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_unit_interval("theta", self.theta)
        check_positive_int("refresh_every", self.refresh_every)
        if not isinstance(self.quality, Quality):
            raise ValueError(
                f"quality must be a Quality ({[q.value for q in Quality]}), got {self.quality!r}"
            )
        check_unit_interval("gamma", self.gamma)
        if self.comm_score is not None:
            score = np.asarray(self.comm_score, dtype=np.float64)
            if score.ndim != 1 or not np.isfinite(score).all():
                raise ValueError("comm_score must be a sequence of finite numbers, one per client")
            object.__setattr__(self, "comm_score", tuple(float(x) for x in score))
        if self.gamma > 0 and self.comm_score is None:
            raise ValueError(
                "gamma > 0 needs comm_score (the per-client communication score q_comm)"
            )

    @property
    def alpha(self) -> float:
        """α = θ / (2(1 − θ)) (eq. 7)."""
        return alpha_of(self.theta)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> ADCSState:
        sizes = self._check_init(n_clients, data_sizes)
        if self.comm_score is not None and len(self.comm_score) != n_clients:
            raise ValueError(
                f"comm_score has {len(self.comm_score)} entries but there are {n_clients} clients"
            )
        return ADCSState(n_clients, sizes)

    def _due(self, state: ADCSState, round_idx: int) -> bool:
        return state.kernel is None or round_idx - state.refreshed_at >= self.refresh_every

    def probe(
        self, state: ADCSState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return UPDATES_OF_ALL if self._due(state, round_idx) else NO_PROBE

    def quality_scores(self, stats: ClientStats, gram: FloatArray) -> FloatArray:
        """q_n for every client, shape (n_clients,) (NaN where unknown), given G = U Uᵀ."""
        usable = stats.usable()
        if self.quality is Quality.LOSS:
            if stats.losses is None:
                raise ValueError("ADCS with quality=LOSS needs the probe's losses (stats.losses)")
            q_learn = np.asarray(stats.losses, dtype=np.float64)
        else:
            q_learn = np.sqrt(np.maximum(np.diag(gram), 0.0))  # ‖g_n‖
        q = np.where(usable, q_learn, np.nan)
        if self.comm_score is not None:
            q = (1.0 - self.gamma) * q + self.gamma * np.asarray(self.comm_score)
        return q

    def _choose(self, state: ADCSState, available: BoolArray) -> IntArray:
        assert state.kernel is not None and state.quality is not None
        assert state.usable is not None
        eligible = state.usable & available
        if self.theta >= 1.0:
            return top_m(np.where(eligible, state.quality, np.nan), self.m, available)
        log_weights = np.where(eligible, 2.0 * self.alpha * state.quality, 0.0)
        order = map_subset(state.kernel, log_weights, eligible, self.m)
        return fill_from(order, available, self.m)

    def select(
        self, state: ADCSState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, ADCSState]:
        available = check_available(stats.available, state.n_clients, self.m)
        if self._due(state, round_idx):
            updates, usable = probed_updates(stats)
            gram = gram_matrix(updates, usable)
            quality = self.quality_scores(stats, gram)
            usable = usable & np.isfinite(quality)
            state = replace(
                state,
                kernel=unit_gram(np.where(np.outer(usable, usable), gram, 0.0)),
                quality=quality,
                usable=usable,
                refreshed_at=round_idx,
                selection=None,
            )
        if state.selection is not None and available[state.selection].all():
            return Selection(state.selection.copy()), state
        chosen = self._choose(state, available)
        if available.all():
            state = replace(state, selection=chosen)
        return Selection(chosen.copy()), state
