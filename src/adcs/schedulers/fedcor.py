"""FedCor (Tang et al., CVPR 2022): correlation-based active client selection with a Gaussian process.

FedCor models the clients' loss changes in a round, Δℓ = ℓ(w⁽ᵗ⁺¹⁾) − ℓ(w⁽ᵗ⁾) over all N clients,
as a Gaussian process with covariance Σ, fitted to loss changes measured in rounds of *random*
selection. It then picks clients greedily: the next client k maximises
β_k (Σ_i p_i Σ_ik) / sqrt(Σ_kk) — the decrease of the weighted total loss it is expected to bring
about, through its correlation with everyone else — and the GP is conditioned on k
(Σ ← Σ − Σ_:k Σ_k: / Σ_kk) before the next pick. β_k is an annealing discount: each time client k
is selected it is multiplied by ``discount`` (0.9), and reset when the GP is refitted.

Schedule, as in the authors' code (their defaults): ``warmup`` rounds (25) of uniform selection
while the loss of every client is measured each round; then GP selection, except that every
``refit_every`` rounds (Δt = 5) one round is again uniform and measured, and the GP is refitted to
the last ``history`` (M = 10) measured loss changes, weighted γ^age (γ = 0.8).

The GP, in the form of the authors' code and its default kernel: Σ = XᵀX + σ_n² I, a linear
("Poly", order 1, not normalised) kernel on learned client embeddings X of dimension D = 15, with
zero prior mean, fitted by maximising the (γ-weighted) marginal likelihood of the measured loss
changes. Simplifications, stated:

* **Closed-form fit.** The authors fit X by 100 Adam steps on the marginal likelihood; here the
  maximiser is taken in closed form: for Σ = XᵀX + σ² I with rank(X) ≤ D it is the top-D
  eigenpairs of the weighted second-moment matrix S = Σ_e w_e Δℓ_e Δℓ_eᵀ, XᵀX = U_D (Λ_D − σ²)₊ U_Dᵀ
  (Tipping & Bishop 1999, probabilistic PCA) — the global optimum the Adam steps approach. S has
  rank ≤ M, so the fit is a thin SVD of the N × M data (O(N M²)) and Σ is never formed:
  the greedy picks work on its factor (O(k N (D + k)) a round), so FedCor here scales in N.
* **Noise.** σ_n is fixed, as in the authors' code (there 0.01 in their loss units, "only to
  avoid a singular covariance"); here it is relative, σ_n = ``noise`` × the RMS measured loss
  change, so that its meaning does not depend on the learning rate.
* **Measurement rounds.** The authors measure the refit data in an *extra*, counterfactual round
  of random selection on a copy of the model; the simulator has no such round, so the measured
  round is a real round of the run with uniform selection (same loss-evaluation cost, no extra
  training).
* **Losses** are each client's loss on its whole local training set (``LossSource.FULL``, as the
  authors evaluate) — ``MINIBATCH`` is an option, but one-minibatch noise swamps a round's change
  at small learning rates.
* **Availability.** Unavailable clients are not candidates but count in the total loss Σ_i p_i;
  a client whose loss is missing at either end of a measured round enters that round's data as
  a zero change (the prior mean).
* Their ε-greedy option is kept (``epsilon``, default 0); the "dynamic C" option is omitted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from adcs._validate import check_int, check_number
from adcs.schedulers._common import BasicState, SchedulerBase, data_weights
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    LossSource,
    Probe,
    ProbeKind,
    Selection,
    check_available,
)


@dataclass(frozen=True, eq=False)
class FedCorState(BasicState):
    """Per-run FedCor state.

    Attributes
    ----------
    losses : ndarray of shape (n_clients,) or None
        Losses measured at the last loss probe (NaN where not measured).
    losses_round : int
        Its round (−1 before the first).
    changes : ndarray of shape (n_measured, n_clients)
        The measured loss changes Δℓ (NaN where unknown), oldest first, at most ``history``.
    changes_rounds : ndarray of shape (n_measured,), int
        The round each change was caused by.
    factor : ndarray of shape (n_clients, r) or None
        X ᵀ of the fitted GP, Σ = factor factorᵀ + noise² I (None before the first fit).
    noise2 : float
        σ_n² of the fitted GP.
    discount : ndarray of shape (n_clients,)
        The annealing factors β_k.
    """

    losses: FloatArray | None = None
    losses_round: int = -1
    changes: FloatArray | None = None
    changes_rounds: IntArray | None = None
    factor: FloatArray | None = None
    noise2: float = 0.0
    discount: FloatArray | None = None


def fit_loss_change_gp(
    changes: FloatArray, ages: FloatArray, gamma: float, dimension: int, noise: float
) -> tuple[FloatArray, float]:
    """The maximum-likelihood Σ = F Fᵀ + σ² I (rank F ≤ D) of the weighted loss changes.

    Parameters
    ----------
    changes : ndarray of shape (M, N)
        Measured loss changes (NaN read as 0, the prior mean).
    ages : ndarray of shape (M,)
        Rounds since each was measured; weights γ^age, normalised.
    gamma, dimension, noise : float, int, float
        γ, D and the relative noise (σ = noise × RMS change).

    Returns
    -------
    factor : ndarray of shape (N, r), r ≤ min(D, M)
    noise2 : float
        σ².
    """
    w = gamma ** np.asarray(ages, dtype=np.float64)
    w /= w.sum()
    data = (np.nan_to_num(np.asarray(changes, dtype=np.float64)) * np.sqrt(w)[:, None]).T
    u, s, _ = np.linalg.svd(data, full_matrices=False)  # S = data dataᵀ = U diag(s²) Uᵀ
    lam = s[:dimension] ** 2
    scale = float((s**2).sum()) / data.shape[0]  # mean diagonal of S: the mean square change
    noise2 = max((noise**2) * scale, 1e-300)
    keep = lam > noise2
    return u[:, :dimension][:, keep] * np.sqrt(lam[keep] - noise2), noise2


def fedcor_greedy(
    factor: FloatArray,
    noise2: float,
    p: FloatArray,
    discount: FloatArray,
    candidates: BoolArray,
    k: int,
) -> IntArray:
    """FedCor's greedy picks under Σ = F Fᵀ + σ² I, conditioning Σ on each pick (module docstring).

    Each step takes the candidate maximising β_k (Σ p)_k / sqrt(Σ_kk) (ties to the lowest index)
    and conditions on it; only (Σ p), diag Σ and the picked columns are kept (an incremental
    Cholesky), never Σ itself.

    Returns
    -------
    ndarray of shape (k,)
        Picks in order (k ≤ number of candidates).
    """
    diag = np.einsum("ij,ij->i", factor, factor) + noise2
    spread = factor @ (factor.T @ p) + noise2 * p  # (Σ p)_k = Σ_i p_i Σ_ik
    remaining = np.asarray(candidates, dtype=bool).copy()
    rows: list[FloatArray] = []
    picks: list[int] = []
    for _ in range(k):
        score = np.where(remaining, spread * discount / np.sqrt(np.maximum(diag, 1e-300)), -np.inf)
        j = int(np.argmax(score))
        column = factor @ factor[j]
        column[j] += noise2
        for e in rows:
            column -= e * e[j]
        e = column / np.sqrt(max(column[j], 1e-300))
        spread -= e * float(p @ e)
        diag -= e**2
        rows.append(e)
        picks.append(j)
        remaining[j] = False
    return np.asarray(picks, dtype=np.intp)


@dataclass(frozen=True)
class FedCor(SchedulerBase[FedCorState]):
    """FedCor client selection (module docstring).

    Parameters
    ----------
    m : int
        Clients per round.
    warmup : int
        Rounds 0 … warmup of uniform selection with loss measurements (25), ≥ 0.
    refit_every : int
        Δt ≥ 1: after the warm-up, rounds t with t % Δt == 0 are uniform, measured, and refit (5).
    history : int
        M ≥ 1, measured loss changes kept for the fit (10).
    gamma : float
        γ ∈ (0, 1], weight decay of older measurements (0.8).
    dimension : int
        D ≥ 1, the rank of the GP kernel (15).
    noise : float
        σ_n > 0 relative to the RMS loss change (0.01).
    discount : float
        β ∈ (0, 1], the annealing factor of a selected client (0.9).
    epsilon : float
        ε ∈ [0, 1], probability of a uniform round instead of the GP's choice (0).
    loss_source : LossSource
        Where the measured losses are evaluated (``FULL``, as the authors).
    """

    warmup: int = 25
    refit_every: int = 5
    history: int = 10
    gamma: float = 0.8
    dimension: int = 15
    noise: float = 0.01
    discount: float = 0.9
    epsilon: float = 0.0
    loss_source: LossSource = LossSource.FULL

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("warmup", self.warmup, minimum=0)
        check_int("refit_every", self.refit_every)
        check_int("history", self.history)
        check_number("gamma", self.gamma, 0.0, 1.0, low_open=True)
        check_int("dimension", self.dimension)
        check_number("noise", self.noise, 0.0, low_open=True)
        check_number("discount", self.discount, 0.0, 1.0, low_open=True)
        check_number("epsilon", self.epsilon, 0.0, 1.0)
        if not isinstance(self.loss_source, LossSource):
            raise ValueError(f"loss_source must be a LossSource, got {self.loss_source!r}")

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> FedCorState:
        sizes = self._check_init(n_clients, data_sizes)
        return FedCorState(
            n_clients,
            sizes,
            changes=np.empty((0, n_clients)),
            changes_rounds=np.empty(0, dtype=np.intp),
            discount=np.ones(n_clients),
        )

    def measured(self, round_idx: int) -> bool:
        """Whether round ``round_idx`` selects uniformly and its loss change is measured."""
        if round_idx < 0:
            return False
        return round_idx <= self.warmup or round_idx % self.refit_every == 0

    def probe(
        self, state: FedCorState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        if self.measured(round_idx) or self.measured(round_idx - 1):
            return Probe(ProbeKind.LOSSES, loss_source=self.loss_source)
        return NO_PROBE

    def _record(self, state: FedCorState, round_idx: int, stats: ClientStats) -> FedCorState:
        """Store this round's losses; if the last round was measured, its loss change (and refit)."""
        if stats.losses is None or not (self.measured(round_idx) or self.measured(round_idx - 1)):
            return state
        losses = np.full(state.n_clients, np.nan)
        losses[stats.clients] = np.asarray(stats.losses, dtype=np.float64)
        if self.measured(round_idx - 1) and state.losses_round == round_idx - 1:
            assert state.losses is not None
            assert state.changes is not None and state.changes_rounds is not None
            changes = np.vstack([state.changes, losses - state.losses])[-self.history :]
            rounds = np.append(state.changes_rounds, round_idx - 1)[-self.history :]
            state = replace(state, changes=changes, changes_rounds=rounds)
            if round_idx > self.warmup:  # the warm-up is over or a measured round just ended
                factor, noise2 = fit_loss_change_gp(
                    changes, (round_idx - 1) - rounds, self.gamma, self.dimension, self.noise
                )
                state = replace(
                    state, factor=factor, noise2=noise2, discount=np.ones(state.n_clients)
                )
        return replace(state, losses=losses, losses_round=round_idx)

    def select(
        self, state: FedCorState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, FedCorState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        state = self._record(state, round_idx, stats)
        pool = np.flatnonzero(available).astype(np.intp)
        uniform = self.measured(round_idx) or state.factor is None
        if not uniform and self.epsilon > 0:
            uniform = bool(rng.random() < self.epsilon)
        if uniform or k == 0:
            return Selection(rng.choice(pool, size=k, replace=False).astype(np.intp)), state
        assert state.factor is not None and state.discount is not None
        p = data_weights(state.data_sizes, np.arange(state.n_clients))
        picks = fedcor_greedy(state.factor, state.noise2, p, state.discount, available, k)
        discount = state.discount.copy()
        discount[picks] *= self.discount
        return Selection(picks), replace(state, discount=discount)
