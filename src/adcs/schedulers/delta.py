"""DELTA (Wang et al., NeurIPS 2023): diverse client sampling, unbiased by importance weights.

DELTA samples client i with probability q_i ∝ p_i √(α ζ_i² + β σ_i²), where ζ_i = ‖∇F_i − ∇f‖ is
the client's *gradient diversity* (how far its gradient is from the population's) and σ_i² its
*local variance* (of its stochastic gradients), and aggregates Σ_{i∈S} p_i Δ_i / (m q_i): unbiased
for Σ_i p_i Δ_i, and of least variance among unbiased samplers of that form (the paper's Thm. 3.2).

In this form, every round probes the update Δ_i of every available client (as the paper's DELTA
and as OCS in its original form), and:

* ζ_i = ‖Δ_i − Σ_j p_j Δ_j‖, the distance of the client's probed update to the probed average
  (updates are −η × the local gradient sum, so ζ is in update units, like σ below);
* σ_i² — the probe is one local run on one minibatch stream, so the variance of a client's
  stochastic updates cannot be seen in one round. It is estimated from the client's probes in
  *consecutive* rounds: two independent minibatches at nearby models, E‖Δ_i^{(t)} − Δ_i^{(t−1)}‖²
  = 2σ_i² + ‖drift‖², so σ̂_i² ← ρ σ̂_i² + (1 − ρ) ½‖Δ_i^{(t)} − Δ_i^{(t−1)}‖² (an exponential
  average, ρ = ``variance_decay``; the one-round model drift is small at FL learning rates and is
  counted in). A client with no estimate yet gets the mean of the others' (0 in the first round,
  when q rests on ζ alone).
* The paper draws m clients *with* replacement and weights each draw p_i/(m q_i). Here exactly
  k = min(m, available) distinct clients are drawn, with inclusion probabilities π_i =
  min(1, c q_i), Σπ = k (systematic sampling, as OCS's unbiased form) and Horvitz–Thompson weights
  p_i/π_i — the same weights p_i/(k q_i) whenever no π_i is capped at 1, and unbiased always.

The authors' practical code updates q only for the sampled clients, from their returned updates;
this form uses the probe (the issue's "probed gradient diversity"), at the cost of one update per
available client per round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from adcs._validate import check_number
from adcs.schedulers._common import (
    UPDATES_OF_ALL,
    BasicState,
    SchedulerBase,
    data_weights,
    probed_updates,
)
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    Selection,
    check_available,
)
from adcs.schedulers.ocs import ocs_inclusion_probabilities, systematic_sample


@dataclass(frozen=True, eq=False)
class DELTAState(BasicState):
    """Per-run DELTA state.

    Attributes
    ----------
    last_clients : ndarray of shape (n_last,), int, or None
        The clients probed (with a finite update) in the previous round, ascending.
    last_updates : ndarray of shape (n_last, dim), float32, or None
        Their updates then, for the variance estimate.
    last_round : int
        The round of ``last_updates`` (−1 before the first).
    variance : ndarray of shape (n_clients,)
        σ̂_i², NaN while unknown.
    """

    last_clients: IntArray | None = None
    last_updates: FloatArray | None = None
    last_round: int = -1
    variance: FloatArray | None = None


def squared_norms(rows: FloatArray) -> FloatArray:
    """‖row‖² of every row, shape (n,), summed in float64 (the rows may be float32)."""
    return np.einsum("ij,ij->i", rows, rows, dtype=np.float64)


def delta_scores(
    p: FloatArray, updates: FloatArray, variance: FloatArray, alpha: float, beta: float
) -> FloatArray:
    """p_i √(α ζ_i² + β σ_i²) with ζ_i = ‖Δ_i − Σ_j p_j Δ_j‖, shape (n,).

    Parameters
    ----------
    p : ndarray of shape (n,)
        Aggregation weights of the clients (Σ p = 1 over them).
    updates : ndarray of shape (n, dim)
        Their probed updates (finite).
    variance : ndarray of shape (n,)
        σ_i² estimates (finite).
    """
    u = np.asarray(updates)
    if u.shape[0] == 0:
        return np.zeros(0)
    w = p / p.sum() if p.sum() > 0 else np.full(u.shape[0], 1.0 / u.shape[0])
    mean = (w @ u.astype(np.float64)).astype(u.dtype)
    diversity = squared_norms(u - mean)  # ζ_i²
    return p * np.sqrt(alpha * diversity + beta * variance)


@dataclass(frozen=True)
class DELTA(SchedulerBase[DELTAState]):
    """DELTA sampling on probed updates, with Horvitz–Thompson weights (module docstring).

    Parameters
    ----------
    m : int
        Clients per round.
    alpha : float
        α ≥ 0, the weight of the gradient diversity ζ² in q.
    beta : float
        β ≥ 0, the weight of the local variance σ² in q (α + β > 0). The paper's α, β come from
        its convergence bound and depend on the local steps and rates; both default to 1.
    variance_decay : float
        ρ ∈ [0, 1) of the exponential average of the variance estimate.

    Notes
    -----
    Clients whose probed update is missing or non-finite keep a positive inclusion probability
    (the mean score of the others), and every score is floored at 10⁻⁶ of the mean, so the
    estimate stays unbiased over every available client with data; p_i ∝ data size over the
    available clients (uniform when sizes are unknown).
    """

    alpha: float = 1.0
    beta: float = 1.0
    variance_decay: float = 0.9

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("alpha", self.alpha, 0.0)
        check_number("beta", self.beta, 0.0)
        if self.alpha + self.beta <= 0:
            raise ValueError(f"alpha + beta must be positive, got alpha={self.alpha}, beta=0")
        check_number("variance_decay", self.variance_decay, 0.0, 1.0, high_open=True)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> DELTAState:
        sizes = self._check_init(n_clients, data_sizes)
        return DELTAState(n_clients, sizes, variance=np.full(n_clients, np.nan))

    def probe(
        self, state: DELTAState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return UPDATES_OF_ALL

    def _update_variance(
        self, state: DELTAState, round_idx: int, clients: IntArray, updates: FloatArray
    ) -> DELTAState:
        assert state.variance is not None
        variance = state.variance.copy()
        if state.last_clients is not None and state.last_updates is not None:
            if state.last_round == round_idx - 1:
                both, now, before = np.intersect1d(clients, state.last_clients, return_indices=True)
                sample = 0.5 * squared_norms(updates[now] - state.last_updates[before])
                old = variance[both]
                rho = self.variance_decay
                variance[both] = np.where(np.isnan(old), sample, rho * old + (1 - rho) * sample)
        return replace(
            state,
            last_clients=clients,
            last_updates=np.asarray(updates, dtype=np.float32),
            last_round=round_idx,
            variance=variance,
        )

    def select(
        self, state: DELTAState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, DELTAState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        updates, usable = probed_updates(stats)
        clients = stats.clients[usable].astype(np.intp)
        state = self._update_variance(state, round_idx, clients, updates[usable])
        pool = np.flatnonzero(available).astype(np.intp)
        if k == 0:
            return Selection(pool), state
        p = data_weights(state.data_sizes, pool)
        assert state.variance is not None
        known = state.variance[clients]
        fallback = float(np.nanmean(known)) if np.isfinite(known).any() else 0.0
        variance = np.where(np.isnan(known), fallback, known)
        in_pool = np.searchsorted(pool, clients)
        scores = np.full(pool.size, np.nan)
        scores[in_pool] = delta_scores(p[in_pool], updates[usable], variance, self.alpha, self.beta)
        missing = np.isnan(scores)
        scores[missing] = float(scores[~missing].mean()) if (~missing).any() else 1.0
        # a zero score (an update equal to the mean, no variance) would give π_i = 0 and lose the
        # client's share of the average: a floor keeps every client with data in the sample space
        scores = np.maximum(scores, 1e-6 * max(float(scores.mean()), 1e-300) * (p > 0))
        pi = ocs_inclusion_probabilities(scores, k)
        picked = systematic_sample(pi, rng)
        return Selection(pool[picked], p[picked] / pi[picked]), state
