"""k-DPP sampling on ADCS's kernel, with Horvitz–Thompson weights.

ADCS schedules the *mode* of the m-DPP with kernel L = Q C Q, C = ΦᵀΦ the cosine kernel of the
probed updates (eq. 5) and Q = diag(e^{α q}), α = θ / (2(1 − θ)) (eq. 7). This scheduler draws an
exact *sample* of that k-DPP instead, P(S) ∝ det L_S over |S| = k = min(m, available)
([`adcs.dpp_sampling.sample_kdpp`][adcs.dpp_sampling.sample_kdpp]), and weights the selected clients
by p_i / π_i, with π_i = P(i ∈ S) the k-DPP's inclusion probabilities
([`adcs.dpp_sampling.kdpp_inclusion_probabilities`][adcs.dpp_sampling.kdpp_inclusion_probabilities]): the aggregate Σ_{i∈S} (p_i / π_i) Δ_i is then an unbiased (Horvitz–Thompson) estimate of Σ_i p_i Δ_i, while the
sample stays diverse and quality-weighted.

As ADCS, the kernel is refreshed every R rounds from a probe of every available client's update
and loss; between refreshes it is reused (no probe), and the eigendecomposition and marginals are
reused while the available part of the pool is unchanged, so a round costs one O(N k²) sample.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from adcs._validate import check_int, check_number
from adcs.dpp import alpha_of
from adcs.dpp_sampling import (
    KernelEigen,
    kdpp_eigen,
    kdpp_inclusion_probabilities,
    sample_kdpp,
)
from adcs.schedulers._common import (
    UPDATES_OF_ALL,
    BasicState,
    Pool,
    SchedulerBase,
    data_weights,
    fill_from,
    probed_updates,
)
from adcs.schedulers.adcs import Quality
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    Selection,
    check_available,
)


@dataclass(frozen=True, eq=False)
class KDPPState(BasicState):
    """Per-run k-DPP state.

    Attributes
    ----------
    pool : Pool or None
        The clients with a finite update and quality at the last refresh, and their kernel C.
    quality : ndarray of shape (n_pool,) or None
        Their q_n.
    refreshed_at : int
        Round of the last refresh (−1 before the first).
    cache : tuple or None
        (eligible mask bytes, k, eigendecomposition of L over the eligible pool clients,
        their inclusion probabilities), reused while the mask and k repeat.
    """

    pool: Pool | None = None
    quality: FloatArray | None = None
    refreshed_at: int = -1
    cache: tuple[bytes, int, KernelEigen, FloatArray] | None = None


QUALITY_RANGES = (10.0, 5.0, 2.5, 1.0, 0.0)
"""Caps on α(q_max − q_n) tried in turn when the full range is too wide
([`quality_kernel`][adcs.schedulers.kdpp.quality_kernel])."""


def quality_kernel(
    cosine: FloatArray, quality: FloatArray, alpha: float, jitter: float, cap: float = np.inf
) -> FloatArray:
    """L = Q (C + εI) Q, Q = diag(e^{α q}) (eq. 7), scaled by e^{−α max q} (a k-DPP is scale free).

    The jitter ε I keeps the k-DPP defined when rank C < k (fewer update directions than slots,
    or duplicates). ``cap`` bounds α(q_max − q_n): beyond a range of about e^{20} in L's entries
    an eigendecomposition in float64 no longer resolves the low-quality clients, and the k-DPP
    would be numerically rank deficient. The sampler and the marginals both use the L built
    here, so the Horvitz–Thompson weights are exact for it whatever the cap.
    """
    scale = np.exp(np.maximum(alpha * (quality - quality.max()), -cap))
    kernel = (cosine + jitter * np.eye(cosine.shape[0])) * scale[:, None] * scale[None, :]
    return (kernel + kernel.T) / 2


@dataclass(frozen=True)
class KDPP(SchedulerBase[KDPPState]):
    """Exact k-DPP sampling on ADCS's kernel L = Q C Q with Horvitz–Thompson weights.

    Parameters
    ----------
    m : int
        Clients per round.
    theta : float
        θ ∈ [0, 1), the quality–diversity trade-off of eq. 6 (θ = 1, top-m by quality, is not a
        distribution to sample).
    refresh_every : int
        R ≥ 1: the kernel is rebuilt from fresh probes every R rounds.
    quality : Quality
        q_n: the probe's minibatch loss (default) or the update norm.
    jitter : float
        ε > 0 added to C's diagonal (module function
        [`quality_kernel`][adcs.schedulers.kdpp.quality_kernel]), 1e-6.

    Notes
    -----
    The estimate is unbiased over the available clients of the pool (those with a usable probe
    at the last refresh), with p_i ∝ data size over them (uniform when sizes are unknown). Clients
    outside the pool (unavailable at the refresh, or a failed probe) are chosen only when the
    available pool has no more than k clients; then every selected client is taken for certain
    and weighted p_i over the selection (the exact average of what was selected). The kernel is
    dense over the pool and its eigendecomposition costs O(n³) at each refresh (or availability
    change): fine for thousands of clients. When the quality range is so wide (θ near 1, or an
    outlying loss) that float64 cannot resolve L, the range is compressed until it can
    ([`quality_kernel`][adcs.schedulers.kdpp.quality_kernel]); the weights stay exact for the kernel
    sampled.
    """

    display_name: ClassVar[str] = "k-DPP"
    """How tables and figures name it (its class name reads badly)."""
    named_params: ClassVar[tuple[str, ...]] = ("theta", "refresh_every")

    theta: float = 0.8
    refresh_every: int = 20
    quality: Quality = Quality.LOSS
    jitter: float = 1e-6

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("theta", self.theta, 0.0, 1.0, high_open=True)
        check_int("refresh_every", self.refresh_every)
        if not isinstance(self.quality, Quality):
            raise ValueError(
                f"quality must be a Quality ({[q.value for q in Quality]}), got {self.quality!r}"
            )
        check_number("jitter", self.jitter, 0.0, low_open=True)

    @property
    def alpha(self) -> float:
        """α = θ / (2(1 − θ)) (eq. 7)."""
        return alpha_of(self.theta)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> KDPPState:
        return KDPPState(n_clients, self._check_init(n_clients, data_sizes))

    def _due(self, state: KDPPState, round_idx: int) -> bool:
        return state.pool is None or round_idx - state.refreshed_at >= self.refresh_every

    def probe(
        self, state: KDPPState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return UPDATES_OF_ALL if self._due(state, round_idx) else NO_PROBE

    def _refresh(self, state: KDPPState, round_idx: int, stats: ClientStats) -> KDPPState:
        updates, usable = probed_updates(stats)
        if self.quality is Quality.LOSS:
            if stats.losses is None:
                raise ValueError("KDPP with quality=LOSS needs the probe's losses (stats.losses)")
            q = np.asarray(stats.losses, dtype=np.float64)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                q = np.linalg.norm(np.asarray(updates, dtype=np.float64), axis=1)
        usable = usable & np.isfinite(q)
        pool = Pool.from_updates(stats.clients[usable], updates[usable])
        return replace(state, pool=pool, quality=q[usable], refreshed_at=round_idx, cache=None)

    def _design(self, state: KDPPState, idx: IntArray, k: int) -> tuple[KernelEigen, FloatArray]:
        """The eigendecomposition of L over the pool positions ``idx`` and its k-DPP marginals.

        The quality range is used in full when float64 resolves the kernel, else compressed
        ([`QUALITY_RANGES`][adcs.schedulers.kdpp.QUALITY_RANGES]) until it does; with no range left,
        L = C + εI has every eigenvalue ≥ ε, so the loop always ends.
        """
        assert state.pool is not None and state.quality is not None
        if state.pool.kernel is not None:
            cosine = state.pool.kernel[np.ix_(idx, idx)]
        else:
            assert state.pool.features is not None
            f = state.pool.features[idx].astype(np.float64)
            cosine = f @ f.T
        quality = state.quality[idx]
        for cap in (np.inf, *QUALITY_RANGES):
            eig = kdpp_eigen(quality_kernel(cosine, quality, self.alpha, self.jitter, cap))
            try:
                return eig, kdpp_inclusion_probabilities(eig, k)
            except ValueError:  # numerically of rank < k: compress the quality range
                continue
        raise AssertionError("unreachable: C + εI has full rank")

    def select(
        self, state: KDPPState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, KDPPState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if self._due(state, round_idx):
            state = self._refresh(state, round_idx, stats)
        assert state.pool is not None
        eligible = available[state.pool.clients]
        idx = np.flatnonzero(eligible).astype(np.intp)
        if idx.size <= k:  # the whole available pool, topped up: all taken for certain
            chosen = fill_from(state.pool.clients[idx], available, k, rng, stats.non_finite())
            return Selection(chosen, data_weights(state.data_sizes, chosen)), state
        key = eligible.tobytes()
        if state.cache is None or state.cache[:2] != (key, k):
            state = replace(state, cache=(key, k, *self._design(state, idx, k)))
        assert state.cache is not None and state.pool is not None
        _, _, eig, pi = state.cache
        picks = sample_kdpp(eig, k, rng)
        clients = state.pool.clients[idx]
        p = data_weights(state.data_sizes, clients)
        return Selection(clients[picks].astype(np.intp), p[picks] / pi[picks]), state
