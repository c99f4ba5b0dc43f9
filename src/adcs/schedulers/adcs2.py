"""ADCS-2: per-round determinantal scheduling over the clients available now (issue 23).

A successor to ADCS ([`adcs.schedulers.adcs`][adcs.schedulers.adcs]) that keeps its objective — the
greedy MAP of the m-DPP L = Q C Q, Q = diag(e^{α s}), α = θ / (2(1 − θ)) (paper eq. 6–9) — and
changes what the kernel and the quality are built from, one change per failure mode measured in
``results/successor/DIAGNOSIS.md``:

* **Availability** — the selection is a fresh MAP every round over the clients available *now*,
  never a subset frozen at a refresh and topped up at random. The diversity kernel C = ΦᵀΦ (eq. 5)
  is built from each client's *last known* update direction φ_n = Δ_n / ‖Δ_n‖, cached: a client's
  direction is refreshed whenever its update is seen — when it is selected (the protocol's
  ``observe`` hands over the selected clients' updates, which are computed anyway) or probed.
* **Stale quality** — the quality is the client's loss at the current model w⁽ᵗ⁾ on one minibatch,
  probed every round for every available client (PowerOfChoice's probe).
* **θ's scale** — the losses are put on a scale-free footing before α multiplies them: z-scores
  (default), normal scores of their ranks, or robust z-scores (median and MAD, clipped), over
  the clients available this round. Each is
  unchanged when every loss is multiplied by c > 0 or shifted, so θ weighs quality against
  diversity the same way on every workload and at every point of training.
* **Slots per group** — with standardised quality the quality term's spread no longer shrinks
  with the losses' scale: at the default θ = 0.7 one standard deviation of loss is worth
  2α = 2.33 in log weight, so a group 1.5–2 standard deviations above the rest outweighs what a
  second client of the same group costs in log det (about 3–4 in log d², diagnosis part 3) and
  can take several slots in one round.

Algorithm, round t (available clients A_t, |A_t| = n):

1. probe — the loss of every client of A_t at w⁽ᵗ⁾ on one minibatch; or, when a client of A_t has no
   cached direction yet (round 0; a client seen for the first time) or a periodic refresh is due
   (``refresh_every``), the update of every client of A_t (its loss comes free with it);
2. s = standardise(loss) over A_t; w_n = 2α (s_n − median s) (the log weights of eq. 7);
3. S = greedy MAP (`adcs.schedulers._common.Pool.greedy_map`, the incremental-Cholesky
   greedy of [`adcs.dpp`][adcs.dpp]) of size min(m, n) over A_t with the cached directions; at θ = 1
   the top m by loss (exactly PowerOfChoice);
4. observe — the returned clients' updates replace their cached directions.

Cost per round (client computations): n loss evaluations and m updates, as PowerOfChoice; in the
rounds of step 1's update probe, n updates instead of the n loss evaluations (a handful of rounds
at the start, when every client is seen for the first time, plus n every R rounds with
``refresh_every = R``). Server: O(m · n · dim) for the greedy (features path, no n × n matrix)
and O(n) for the z-scores (O(n log n) for ranks).

Ablation switches (issue 35). The four changes from the paper's ADCS can be turned off one at a
time; each switch's default is ADCS-2 as above, and each "off" value changes that one thing only:

1. **A fresh selection every round over the clients available now** — ``select_every = R_s > 1``
   turns it off. A selection is made only at the rounds t = t₀, t₀ + R_s, … (t₀ = 0): there the
   probe, standardised scores, cached directions and greedy are exactly the default's. In the
   R_s − 1 rounds between, nothing is probed and the selection is held as the paper's ADCS holds
   it between refreshes, by the same code
   ([`held_order`][adcs.schedulers.adcs.held_order] and `fill_from`): the held order while all
   of it is available; otherwise the greedy MAP over its pool's available part with the kernel
   (directions) and scores of the selection round, topped up uniformly at random from the other
   available clients. The quality is therefore as stale as ADCS's too (measured at the selection
   round); the directions cache still learns from the selected clients' updates, used at the next
   selection round. Cost: n loss evaluations every R_s rounds instead of every round.
2. **Standardised quality** — ``standardise_quality = False``: the quality is the raw probed
   loss, and the log weights are ADCS's 2α(loss − median loss) (the same
   [`log_weights`][adcs.schedulers.adcs.log_weights]) at the same θ, so α now multiplies losses
   whose scale drifts with the workload and with training.
3. **Cached directions refreshed whenever an update is seen** — ``observe_directions = False``
   (with ``refresh_every = R``, which it requires): the selected clients' updates no longer
   refresh the cache; a client's direction is that of the last update probe of all available
   clients (every R rounds, ADCS's kernel) — or of its first probe, for a client first seen
   between refreshes. The per-round loss probe and the selection every round stay. Cost: n
   updates instead of n loss evaluations every R rounds, as ADCS-2 with ``refresh_every = R``.
4. **Several slots per group** — ``group_cosine = τ``: the greedy gives at most one slot per
   group per pass, where the group of a picked client j is every client whose cached direction
   has cosine ≥ τ with φ_j; once every remaining client is in the group of a pick of the pass,
   a new pass starts, so exactly min(m, n) clients are still chosen and a group gets a second
   slot only when every group has one (`adcs.dpp.greedy_map`'s passes): with G groups a group
   gets at most ⌈m / G⌉ slots (one on m6, m = 6 < 10 groups; two on the paper's workload,
   m = 18 for 10 groups, where "one slot per group" cannot fill a round). The server cannot know
   the partition's groups; near-parallel update directions are the groups it can see. τ is
   therefore a definition, not a fact: a τ too high splits a true group (its clients' updates
   differ by minibatch noise), a τ too low merges neighbouring groups. Under the paper's pure
   label skew two clients of one group share a class and their updates are close to parallel,
   so the proxy follows the partition; on the Dirichlet and soft-skew workloads there are no
   crisp groups and τ defines "near-duplicate clients". Cost: one more product with the
   directions per pick (O(m · n · dim) in all, as the greedy).

Every switch is an ordinary parameter (``[[methods]]`` keys in a configuration); the defaults
(1, true, true, none) give ADCS-2 exactly as before them, selection for selection.

What it gives up: (i) memory of O(N · dim) for the cache of directions, against the design's
"O(active · dim)" rule (docs/design.md §4) — O(N · k) with the simulator's ``sketch_dim = k`` (the
scheduler then sees and caches k-dimensional sketches); (ii) a client rarely selected keeps an old
direction (the kernel is as stale as the client is unpopular); (iii) like PowerOfChoice it trusts
the clients' reported losses and is biased by design (no reweighting: the aggregate is not an
unbiased estimate of the full gradient); (iv) standardising amplifies noise when all clients' true
losses are equal (then the choice is close to random, as it should be).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from adcs._validate import check_bool, check_int, check_number, check_unit_interval
from adcs.dpp import alpha_of, unit_rows
from adcs.schedulers._common import UPDATES_OF_ALL, BasicState, Pool, SchedulerBase, fill_from
from adcs.schedulers.adcs import held_order, log_weights
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
    Selection,
    check_available,
    finite_rows,
    top_m,
)

LOSSES_OF_ALL = Probe(ProbeKind.LOSSES)


class QualityScale(enum.Enum):
    """How the probed losses are put on a scale-free footing before α multiplies them."""

    ZSCORE = "zscore"
    """(loss − mean) / standard deviation over the available clients (0 when all are equal)."""
    NORMAL_SCORES = "normal_scores"
    """Φ⁻¹((rank − ½) / n): the normal quantile of each loss's rank (ties share their mean rank).
    Bounded (|s| ≤ Φ⁻¹(1 − 1/(2n))) and blind to outliers."""
    ROBUST = "robust"
    """(loss − median) / (1.4826 · MAD), clipped to ±`ROBUST_CLIP`: a z-score whose centre and
    scale fewer than half the clients cannot move (`robust_scores`)."""


ROBUST_CLIP = 3.0
"""|s| ≤ 3 robust standard deviations: a reported loss far out (a liar's × 10⁶) counts as a
lead of three, as much as a group genuinely three deviations behind, and no more."""
_MAD_TO_SD = 1.482602218505602
"""1 / Φ⁻¹(3/4): the MAD of a normal sample times this is its standard deviation."""
_MEAN_AD_TO_SD = 1.2533141373155001
"""√(π/2): the mean absolute deviation of a normal sample times this is its standard deviation."""


def robust_scores(losses: FloatArray) -> FloatArray:
    """clip((x − median) / σ̂, ±`ROBUST_CLIP`), σ̂ = 1.4826 · MAD, shape (n,), float64.

    The median and the MAD have a breakdown point of ½: k < n/2 reporters, whatever they report,
    move the honest clients' scores by at most what k honest-looking values would (they shift the
    median and MAD by at most k order statistics), unlike the mean and standard deviation, which
    two reports of × 10⁶ flatten to zero for everyone else. Where more than half the losses tie
    (MAD = 0) the scale is √(π/2) × the mean absolute deviation from the median; where every loss
    ties, every score is 0. Invariant to ``losses`` ↦ a · losses + b for a > 0.
    """
    x = np.asarray(losses, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    deviation = x - np.median(x)
    scale = _MAD_TO_SD * float(np.median(np.abs(deviation)))
    tiny = 1e-12 * max(1.0, float(np.abs(x).max()))  # as for the z-score: rounding, not loss
    if scale <= tiny:
        scale = _MEAN_AD_TO_SD * float(np.mean(np.abs(deviation)))
    if scale <= tiny:
        return np.zeros_like(x)
    return np.asarray(np.clip(deviation / scale, -ROBUST_CLIP, ROBUST_CLIP))


def standardise(losses: FloatArray, scale: QualityScale) -> FloatArray:
    """Scale-free quality scores s of shape (n,) from losses of shape (n,) (all finite).

    Every form is invariant to ``losses`` ↦ a · losses + b for any a > 0 and b.

    Parameters
    ----------
    losses : ndarray of shape (n,)
    scale : QualityScale

    Returns
    -------
    ndarray of shape (n,), float64; all zeros when every loss is equal.
    """
    x = np.asarray(losses, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    if scale is QualityScale.ROBUST:
        return robust_scores(x)
    if scale is QualityScale.ZSCORE:
        centred = x - x.mean()
        sd = float(np.sqrt(np.mean(centred**2)))
        # below rounding of the mean, the differences are noise of the arithmetic, not of loss
        if sd <= 1e-12 * max(1.0, float(np.abs(x).max())):
            return np.zeros_like(x)
        return np.asarray(centred / sd)
    from scipy.special import ndtri  # here, not at import: scipy.special costs every `import adcs`

    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based mean rank of each value
    return np.asarray(ndtri((mean_rank[inverse] - 0.5) / x.size))


@dataclass(frozen=True, eq=False)
class ADCS2State(BasicState):
    """Per-run state: the cached update direction of every client seen so far.

    Attributes
    ----------
    directions : ndarray of shape (n_clients, dim), float32, or None
        Row n is φ_n = Δ_n / ‖Δ_n‖ of client n's last seen update (0 where none); ``None`` until
        the first update is seen.
    known : ndarray of bool, shape (n_clients,) or None
        Which rows of ``directions`` hold a direction.
    refreshed_at : int
        Round of the last update probe of every available client (−1 before the first).
    pool : Pool or None
        With ``select_every`` R > 1 only: the clients that had a direction at the last selection
        round, with those directions (the kernel held until the next selection round).
    pool_scores : ndarray of shape (pool.size,) or None
        Their quality scores at that round (standardised, or raw losses).
    order : ndarray of int or None
        The selection order made at that round (the MAP, then clients without a direction by
        loss), kept while it is available.
    selected_at : int
        The last selection round (−1 before the first).
    """

    directions: FloatArray | None = None
    known: BoolArray | None = None
    refreshed_at: int = -1
    pool: Pool | None = None
    pool_scores: FloatArray | None = None
    order: IntArray | None = None
    selected_at: int = -1


def _cache(state: ADCS2State, clients: IntArray, updates: FloatArray) -> ADCS2State:
    """``state`` with the directions of ``clients`` (rows of ``updates``) replaced.

    Rows that are not finite or are zero carry no direction and leave the cache as it was.
    """
    rows = np.asarray(updates)
    if rows.ndim != 2 or rows.shape[0] != clients.shape[0] or rows.shape[0] == 0:
        return state
    idx = np.flatnonzero(finite_rows(rows))
    if idx.size == 0:
        return state
    phi = unit_rows(rows[idx])
    nonzero = np.any(phi != 0, axis=1)
    target, phi = clients[idx[nonzero]], phi[nonzero]
    if state.directions is None or state.directions.shape[1] != rows.shape[1]:
        directions = np.zeros((state.n_clients, rows.shape[1]), dtype=np.float32)
        known = np.zeros(state.n_clients, dtype=bool)
    else:
        directions, known = state.directions.copy(), np.asarray(state.known).copy()
    directions[target] = phi
    known[target] = True
    return replace(state, directions=directions, known=known)


@dataclass(frozen=True)
class ADCS2(SchedulerBase[ADCS2State]):
    """ADCS-2: the m-DPP's greedy MAP every round over the available clients (module docstring).

    Parameters
    ----------
    m : int
        Clients per round.
    theta : float
        θ ∈ [0, 1], the quality–diversity trade-off of eq. 6 on standardised quality: the log
        weight of a client is 2α s_n with α = θ / (2(1 − θ)) and s_n its standardised loss. 0 is
        pure diversity; 1 is top-m by loss (PowerOfChoice).
    quality_scale : QualityScale
        How losses are standardised over the available clients: z-scores (default: a group
        far behind keeps the size of its lead, but two reports of × 10⁶ flatten every other
        score), normal scores of ranks (bounded, blind to outliers, but a lead counts at most
        about one standard deviation), or robust z-scores (median and MAD, clipped at ±3:
        robust to fewer than half the clients reporting anything; the recommended form where
        clients may lie, docs/concepts/threat-model.md).
    refresh_every : int or None
        R ≥ 1: every R rounds, probe the updates (not only the losses) of every available client
        and refresh all their cached directions (+n updates, −n loss evaluations that round).
        ``None`` (default): directions are refreshed only as clients are selected, and probed
        once when first seen — PowerOfChoice's cost.
    select_every : int
        Change 1's switch (module docstring, "Ablation switches"). 1 (default): a fresh
        selection every round. R_s > 1: a selection only every R_s rounds, held in between as
        the paper's ADCS holds it.
    standardise_quality : bool
        Change 2's switch. ``True`` (default): the losses are standardised by
        ``quality_scale``. ``False``: the raw losses are the quality (ADCS's log weights
        2α(q − median q)); ``quality_scale`` is then unused.
    observe_directions : bool
        Change 3's switch. ``True`` (default): the selected clients' updates refresh their
        cached directions. ``False``: directions come only from update probes (a client's
        first, and the probe of every available client every ``refresh_every`` rounds, which
        must then be set).
    group_cosine : float or None
        Change 4's switch. ``None`` (default): a group may take several slots. τ ∈ (0, 1]: at
        most one slot per group per pass of the greedy, a group being the clients whose cached
        directions have cosine ≥ τ with a client already picked.

    Notes
    -----
    Clients whose probed loss (or probed update) is missing or non-finite are chosen only to keep
    the selection full, after every usable client.
    """

    named_params: ClassVar[tuple[str, ...]] = ("theta",)

    theta: float = 0.7
    quality_scale: QualityScale = QualityScale.ZSCORE
    refresh_every: int | None = None
    select_every: int = 1
    standardise_quality: bool = True
    observe_directions: bool = True
    group_cosine: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_unit_interval("theta", self.theta)
        if not isinstance(self.quality_scale, QualityScale):
            raise ValueError(
                f"quality_scale must be a QualityScale ({[q.value for q in QualityScale]}), "
                f"got {self.quality_scale!r}"
            )
        if self.refresh_every is not None:
            check_int("refresh_every", self.refresh_every)
        check_int("select_every", self.select_every)
        check_bool("standardise_quality", self.standardise_quality)
        check_bool("observe_directions", self.observe_directions)
        if not self.observe_directions and self.refresh_every is None:
            raise ValueError(
                "observe_directions=false needs refresh_every (R ≥ 1): without the periodic "
                "update probe a client's direction would never change after its first probe"
            )
        if self.group_cosine is not None:
            check_number("group_cosine", self.group_cosine, 0.0, 1.0, low_open=True)

    @property
    def alpha(self) -> float:
        """α = θ / (2(1 − θ)) (eq. 7), applied to standardised quality."""
        return alpha_of(self.theta)

    @property
    def observes_updates(self) -> bool:
        """The selected clients' updates refresh their cached directions (none needed at θ = 1,
        none wanted with ``observe_directions=False``)."""
        return self.theta < 1.0 and self.observe_directions

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> ADCS2State:
        return ADCS2State(n_clients, self._check_init(n_clients, data_sizes))

    def _refresh_due(self, state: ADCS2State, round_idx: int) -> bool:
        return self.refresh_every is not None and (
            state.refreshed_at < 0 or round_idx - state.refreshed_at >= self.refresh_every
        )

    def _held(self, state: ADCS2State, round_idx: int) -> bool:
        """Whether this round keeps the last selection (``select_every`` R_s > 1, not yet due)."""
        return (
            self.select_every > 1
            and state.selected_at >= 0
            and round_idx - state.selected_at < self.select_every
        )

    def probe(
        self, state: ADCS2State, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        available, _ = check_available(available, state.n_clients, self.m)
        if self._held(state, round_idx):
            return NO_PROBE  # as ADCS between refreshes: nothing to choose, nothing to probe
        if self.theta >= 1.0:
            return LOSSES_OF_ALL  # top-m by loss needs no direction
        if state.known is None or (available & ~state.known).any():
            return UPDATES_OF_ALL
        return UPDATES_OF_ALL if self._refresh_due(state, round_idx) else LOSSES_OF_ALL

    def select(
        self, state: ADCS2State, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, ADCS2State]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if self._held(state, round_idx):
            return Selection(self._keep(state, available, k, stats, rng)), state
        if stats.losses is None:
            raise ValueError("ADCS2 needs probed losses but stats.losses is None")
        if stats.updates is not None and stats.n_probed:
            state = _cache(state, stats.clients, stats.updates)
            if self.refresh_every is not None:
                state = replace(state, refreshed_at=round_idx)
        usable = stats.usable()
        clients = stats.clients[usable].astype(np.intp)
        losses = np.asarray(stats.losses, dtype=np.float64)[usable]
        by_loss = clients[top_m(losses, clients.size)]
        if self.theta >= 1.0 or state.known is None or clients.size == 0:
            order = by_loss[:k]
        else:
            order = self._map(state, clients, losses, k)
            rest = by_loss[~np.isin(by_loss, order)]
            order = np.concatenate([order, rest])  # clients without a direction, by loss
        if self.select_every > 1:
            state = self._hold(state, round_idx, clients, losses, order)
        return Selection(fill_from(order, available, k, rng, stats.non_finite())), state

    def _scores(self, losses: FloatArray) -> FloatArray:
        """Quality scores of shape (n,): standardised losses, or the raw ones (change 2 off)."""
        if not self.standardise_quality:
            return np.asarray(losses, dtype=np.float64)
        return standardise(losses, self.quality_scale)

    def _pool(
        self, state: ADCS2State, clients: IntArray, losses: FloatArray
    ) -> tuple[Pool, FloatArray] | None:
        """The ``clients`` that have a direction, as a pool with their scores (None if none)."""
        assert state.directions is not None and state.known is not None
        scores = self._scores(losses)
        has_dir = state.known[clients]
        if not has_dir.any():
            return None
        return Pool(clients[has_dir], None, state.directions[clients[has_dir]]), scores[has_dir]

    def _pool_map(self, pool: Pool, scores: FloatArray, eligible: BoolArray, k: int) -> IntArray:
        """Greedy MAP of min(k, ·) eligible pool clients with log weights 2α(s − median s)."""
        weights = log_weights(self.alpha, scores, eligible)
        return pool.greedy_map(weights, eligible, k, self.group_cosine)

    def _map(self, state: ADCS2State, clients: IntArray, losses: FloatArray, k: int) -> IntArray:
        """Greedy MAP of min(k, ·) of ``clients`` that have a direction, as client indices."""
        found = self._pool(state, clients, losses)
        if found is None:
            return np.empty(0, dtype=np.intp)
        pool, scores = found
        return self._pool_map(pool, scores, np.ones(pool.size, dtype=bool), k)

    def _hold(
        self,
        state: ADCS2State,
        round_idx: int,
        clients: IntArray,
        losses: FloatArray,
        order: IntArray,
    ) -> ADCS2State:
        """``state`` holding this selection round's pool, scores and order (``select_every``)."""
        found = None
        if self.theta < 1.0 and state.known is not None and clients.size:
            found = self._pool(state, clients, losses)
        pool, scores = found if found is not None else (None, None)
        return replace(state, pool=pool, pool_scores=scores, order=order, selected_at=round_idx)

    def _keep(
        self,
        state: ADCS2State,
        available: BoolArray,
        k: int,
        stats: ClientStats,
        rng: np.random.Generator,
    ) -> IntArray:
        """Between selection rounds: the held order, re-mapped over the pool's available part
        and topped up at random when some of it is away — the paper's ADCS's rule (`held_order`).
        Without a pool (θ = 1, or no direction yet) the held order by loss, available first."""
        assert state.order is not None
        order = state.order
        if state.pool is not None and state.pool_scores is not None:
            pool, scores = state.pool, state.pool_scores
            order = held_order(
                order, pool, available, k, lambda e: self._pool_map(pool, scores, e, self.m)
            )
        return fill_from(order, available, k, rng, stats.non_finite())

    def observe(
        self,
        state: ADCS2State,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> ADCS2State:
        if not self.observes_updates:
            return state
        return _cache(state, np.asarray(clients, dtype=np.intp), updates)
