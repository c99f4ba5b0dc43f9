"""Multinomial-distribution (MD) sampling (Li et al. 2020, FedProx; the "MD sampling" of Fraboni et al.).

MD draws m clients independently *with replacement*, client i with probability p_i ∝ its data size,
and averages the m drawn updates, (1/m) Σ_j Δ_{X_j}: an unbiased estimate of Σ_i p_i Δ_i, each
client counted with its multiplicity. The m draws often hold fewer than m distinct clients (at
N = 30, m = 18 and equal sizes, 13.5 on average), but a round here trains exactly
k = min(m, available) *distinct* clients (the selection contract of [`adcs.round.contract`][adcs.round.contract],
which every method meets so that they are compared at the same number of client updates). This form
therefore **keeps drawing**, i.i.d. from the same p, until k distinct clients have been drawn — D
draws in all, D ≥ k, the first m of them an ordinary MD sample — and weights client i by

    w_i = c_i / E[D],   c_i = how many of the D draws hit client i.

*Unbiased exactly* (Wald's identity): whether draw j happens, {D ≥ j}, depends only on draws
1 … j − 1, so E[Δ_{X_j} 1{D ≥ j}] = P(D ≥ j) Σ_i p_i Δ_i and E[Σ_{j ≤ D} Δ_{X_j}] = E[D] Σ_i p_i Δ_i.
E[D] is computed exactly ([`expected_draws`][adcs.schedulers.md.expected_draws]), not estimated. The
weights sum to D / E[D], 1 on average: like MD's multiplicities, they carry the sampling noise that
distinguishes MD from sampling without replacement ([`Uniform`][adcs.schedulers.uniform.Uniform],
[`ClusteredSize`][adcs.schedulers.clustered_size.ClusteredSize]). Dividing by D instead of E[D]
would make the weights sum to 1 but the estimate biased.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from adcs.schedulers._common import BasicState, SchedulerBase, data_weights
from adcs.schedulers.base import ClientStats, FloatArray, IntArray, Selection, check_available

_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(6)
_EPS = 1e-16


def _count_cdf(t: FloatArray, p: FloatArray, counts: IntArray, k: int) -> FloatArray:
    """P(fewer than k distinct items by time t) for each t, shape (G,).

    Item i has appeared by t with probability 1 − e^{−p_i t}, independently; ``counts[v]`` items
    share the rate ``p[v]``, so each group's number of appeared items is binomial. The count's
    distribution, truncated to 0 … k − 1, is built group by group (all terms positive: no
    cancellation, and nothing to overflow).
    """
    from scipy.special import gammaln, xlog1py, xlogy  # here: slow to import with `adcs`

    q = -np.expm1(-np.outer(p, t))  # (V, G)
    pmf = np.zeros((t.size, k))
    pmf[:, 0] = 1.0
    j = np.arange(k, dtype=np.float64)
    for v in range(p.size):
        if counts[v] == 1:
            tail = pmf[:, :-1] * q[v, :, None]
            pmf *= 1.0 - q[v, :, None]
            pmf[:, 1:] += tail
            continue
        c = float(counts[v])
        with np.errstate(divide="ignore", invalid="ignore"):
            log_pmf = (
                gammaln(c + 1)
                - gammaln(j + 1)
                - gammaln(np.maximum(c - j, 0) + 1)
                + xlogy(j, q[v, :, None])
                + xlog1py(c - j, -q[v, :, None])
            )
        group = np.where(j <= c, np.exp(log_pmf), 0.0)  # binomial pmf, (G, k)
        out = np.zeros_like(pmf)
        for i in range(min(int(c), k - 1) + 1):  # truncated product of the two distributions
            out[:, i:] += pmf[:, : k - i] * group[:, i : i + 1]
        pmf = out
    return np.clip(pmf.sum(axis=1), 0.0, 1.0)


def _bisect(f: Callable[[float], bool], lo: float, hi: float, iterations: int = 80) -> float:
    """The boundary of a monotone predicate f (True at ``lo``, False at ``hi``), geometric steps."""
    for _ in range(iterations):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2
        if f(mid):
            lo = mid
        else:
            hi = mid
    return hi


def expected_draws(p: FloatArray, k: int) -> float:
    """E[D], the expected number of i.i.d. draws from ``p`` until ``k`` distinct items have appeared.

    Poissonised: with draws at rate 1, item i first appears at an exponential time of rate p_i,
    independently of the others; the k-th distinct item appears at T_k, and since the draws are a
    rate-1 Poisson process stopped at T_k, E[D] = E[T_k] = ∫_0^∞ P(T_k > t) dt, where
    P(T_k > t) = P(fewer than k items appeared by t) (a Poisson-binomial tail). The integral runs
    over Gauss–Legendre panels where the integrand moves; Chernoff bounds cut its ends at a
    relative 1e-16 (below the accuracy of the quadrature, about 1e-12).

    Parameters
    ----------
    p : ndarray of shape (n,)
        Probabilities of the items with p > 0 (renormalised here).
    k : int
        1 ≤ k ≤ n.
    """
    p = np.asarray(p, dtype=np.float64)
    p = p[p > 0] / p[p > 0].sum()
    n = p.size
    if not 1 <= k <= n:
        raise ValueError(f"k must satisfy 1 <= k <= {n} (items with p > 0), got {k}")
    if k == 1:
        return 1.0
    rates, counts = np.unique(p, return_counts=True)

    def mean(t: float) -> float:  # expected number of items appeared by t
        return float(counts @ -np.expm1(-rates * t))

    hi = float(k)
    while mean(hi) < k - 0.5:
        hi *= 2.0
    centre = _bisect(lambda t: mean(t) < k - 0.5, 1e-300, hi)
    var = float(counts @ (-np.expm1(-rates * centre) * np.exp(-rates * centre)))
    slope = float(counts @ (rates * np.exp(-rates * centre)))
    width = max(math.sqrt(max(var, 1e-12)) / slope, centre * 1e-6)

    def chernoff_above(t: float) -> float:  # P(at least k appeared) ≤ e^{−μ} (eμ/k)^k, μ < k
        mu = mean(t)
        return math.exp(k - mu + k * math.log(mu / k)) if 0 < mu < k else 1.0

    def chernoff_below(t: float) -> float:  # P(fewer than k) ≤ e^{−μ} (eμ/(k−1))^{k−1}, μ > k − 1
        mu, a = mean(t), k - 1
        return math.exp(a - mu + a * math.log(mu / a)) if mu > a else 1.0

    # beyond `far`, P(T_k > t) ≤ Σ over the k likeliest items of e^{−p_i t} ≤ k e^{−p_(k) t}
    p_k = float(np.sort(p)[-k])
    far = max(centre, math.log(k / (p_k * _EPS * centre)) / p_k)
    start = _bisect(lambda t: chernoff_above(t) < _EPS, 1e-300, centre) if centre > 0 else 0.0
    start = start if chernoff_above(start) < _EPS else 0.0
    end = far
    if chernoff_below(far) * far < _EPS * centre:
        end = _bisect(lambda t: chernoff_below(t) * far >= _EPS * centre, centre, far)
    # panels: a geometric grid (20% steps resolve every client's e^{−p_i t} at its own scale),
    # refined to σ-wide panels around the centre where the integrand falls
    first = max(start, 1e-3 * centre)
    grid = first * 1.2 ** np.arange(math.ceil(math.log(end / first) / math.log(1.2)) + 1)
    near = np.arange(max(start, centre - 12 * width), min(end, centre + 12 * width), width)
    edges = np.unique(np.concatenate([[start, end], np.minimum(grid, end), near]))
    lo_e, hi_e = np.asarray(edges[:-1]), np.asarray(edges[1:])
    half = (hi_e - lo_e)[:, None] / 2
    nodes = ((lo_e + hi_e)[:, None] / 2 + half * _GAUSS_NODES[None, :]).ravel()
    weights = (half * _GAUSS_WEIGHTS[None, :]).ravel()
    return start + float(weights @ _count_cdf(nodes, rates, counts, k))


@dataclass(frozen=True, eq=False)
class MDState(BasicState):
    """Per-run MD state.

    Attributes
    ----------
    normaliser : tuple of (bytes, int, float) or None
        E[D] of the last availability mask and k (the mask's bytes), reused while they repeat.
    """

    normaliser: tuple[bytes, int, float] | None = None


def draw_until_distinct(p: FloatArray, k: int, rng: np.random.Generator) -> IntArray:
    """i.i.d. draws (positions) from ``p`` up to and including the one that makes k distinct."""
    draws = np.empty(0, dtype=np.intp)
    while True:
        draws = np.concatenate([draws, rng.choice(p.size, size=2 * k + 8, p=p)])
        first = np.zeros(draws.size, dtype=bool)
        first[np.unique(draws, return_index=True)[1]] = True
        reached = np.flatnonzero(np.cumsum(first) == k)
        if reached.size:
            return draws[: reached[0] + 1]


@dataclass(frozen=True)
class MD(SchedulerBase[MDState]):
    """MD sampling, kept drawing until min(m, available) distinct clients (module docstring).

    Parameters
    ----------
    m : int
        Clients per round; MD's first m draws are its ordinary sample.

    Notes
    -----
    Needs no probe. p_i ∝ data size over the available clients (uniform when sizes are unknown);
    the aggregate is an unbiased estimate of the available clients' Σ_i p_i Δ_i.
    ``Selection.weights`` are w_i = c_i / E[D] (module docstring); clients in order of first draw.
    When k is at least the number of available clients with data, all of them are selected with
    weight p_i, the exact average (clients without data fill with weight 0).
    """

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> MDState:
        return MDState(n_clients, self._check_init(n_clients, data_sizes))

    def select(
        self, state: MDState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, MDState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        pool = np.flatnonzero(available).astype(np.intp)
        if k == 0:
            return Selection(pool), state
        p = data_weights(state.data_sizes, pool)
        positive = np.flatnonzero(p > 0)
        if k >= positive.size:
            order = np.concatenate([positive, np.flatnonzero(p <= 0)])[:k]
            return Selection(pool[order], p[order]), state
        key = (available.tobytes(), k)
        if state.normaliser is None or state.normaliser[:2] != key:
            state = replace(state, normaliser=(*key, expected_draws(p[positive], k)))
        assert state.normaliser is not None
        draws = positive[draw_until_distinct(p[positive] / p[positive].sum(), k, rng)]
        chosen, first = np.unique(draws, return_index=True)
        chosen = chosen[np.argsort(first)]
        counts = np.bincount(draws, minlength=p.size)[chosen]
        return Selection(pool[chosen], counts / state.normaliser[2]), state
