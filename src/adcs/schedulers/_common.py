"""Pieces shared by the scheduler implementations (not part of the public API)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from adcs._validate import check_int
from adcs.dpp import (
    gram_matrix,
    greedy_map,
    greedy_map_features,
    row_norms,
    unit_gram,
    unit_rows,
)
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
)
from adcs.schedulers.variants import Variants


@dataclass(frozen=True, eq=False)
class BasicState:
    """Per-run state of a scheduler that remembers nothing between rounds.

    Attributes
    ----------
    n_clients : int
    data_sizes : ndarray of shape (n_clients,) or None
    """

    n_clients: int
    data_sizes: FloatArray | None = None


StateT = TypeVar("StateT", bound=BasicState)


@dataclass(frozen=True)
class SchedulerBase(Generic[StateT]):
    """Hyperparameter ``m`` (clients per round), its validation, and no-op protocol defaults."""

    m: int

    named_params: ClassVar[tuple[str, ...]] = ()
    """Hyperparameters that always appear in a run's name, even at their defaults (the ones a
    study varies first); any other appears when off its default."""
    random_baseline: ClassVar[bool] = False
    """Whether it is random selection, the baseline a leaderboard's targets are set from (what
    random selection reaches, as Oort sets its targets): Uniform."""
    leaderboard_variants: ClassVar[Variants | None] = None
    """The points the leaderboard runs in place of the defaults (`adcs.schedulers.variants`);
    None: the defaults alone."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.observe is not SchedulerBase.observe and (
            cls.observes_updates is SchedulerBase.observes_updates
        ):
            warnings.warn(
                f"{cls.__qualname__} overrides observe but not observes_updates, which is False: "
                "runtimes call observe only when it is True, so this observe would never run; "
                "define observes_updates (True to be observed)",
                stacklevel=2,
            )

    def __post_init__(self) -> None:
        check_int("m", self.m)

    @property
    def observes_updates(self) -> bool:
        """False: runtimes need not compute individual updates for rounds without a probe, and
        do not call `observe`. A subclass that overrides ``observe`` must say True."""
        return False

    def _check_init(self, n_clients: int, data_sizes: FloatArray | None) -> FloatArray | None:
        check_int("n_clients", n_clients)
        if n_clients < self.m:
            raise ValueError(f"n_clients={n_clients} is smaller than m={self.m}")
        if data_sizes is None:
            return None
        sizes = np.asarray(data_sizes, dtype=np.float64)
        if sizes.shape != (n_clients,) or not np.isfinite(sizes).all() or (sizes < 0).any():
            raise ValueError(f"data_sizes must be {n_clients} finite non-negative numbers")
        return sizes

    def probe(
        self, state: StateT, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        return NO_PROBE

    def observe(
        self,
        state: StateT,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> StateT:
        return state


UPDATES_OF_ALL = Probe(ProbeKind.UPDATES)
KERNEL_RTOL = 1e-5
"""Residual (squared sine of the angle to the span of the clients already chosen) below which a
client's update direction counts as dependent; float32 Gram matrices are accurate to about 1e-6."""
DENSE_KERNEL_MAX = 4096
"""Largest pool for which a scheduler may keep the dense kernel (n × n float64, ≤ 134 MB);
beyond it, the unit features and [`adcs.dpp.greedy_map_features`][adcs.dpp.greedy_map_features] (the
same picks)."""


def probed_updates(stats: ClientStats) -> tuple[FloatArray, BoolArray]:
    """The probed updates (n_probed, dim) and which of them are usable (available, finite)."""
    if stats.updates is None:
        raise ValueError("this scheduler needs probed client updates but stats.updates is None")
    updates = np.asarray(stats.updates)
    if updates.ndim != 2 or updates.shape[0] != stats.n_probed:
        raise ValueError(
            f"stats.updates must have shape ({stats.n_probed}, dim), got {updates.shape}"
        )
    return updates, stats.usable()


def data_weights(sizes: FloatArray | None, clients: IntArray) -> FloatArray:
    """p_i ∝ data size over ``clients``, shape (n,), Σ p = 1 (uniform when sizes are unknown or 0)."""
    if sizes is None or float(sizes[clients].sum()) <= 0.0:
        return np.full(clients.shape[0], 1.0 / max(clients.shape[0], 1))
    w = sizes[clients].astype(np.float64)
    return w / w.sum()


def fill_from(
    order: IntArray,
    available: BoolArray,
    k: int,
    rng: np.random.Generator,
    last: IntArray | None = None,
) -> IntArray:
    """The first ``k`` available clients of ``order``, topped up at random with other available ones.

    The top-up is needed when ``order`` — the clients the scheduler could rank: those probed, or a
    pool kept from the last refresh — holds fewer than ``k`` available clients, e.g. between
    refreshes under intermittent availability, where most of the pool may be away. The scheduler
    knows nothing of the other available clients, so they are drawn uniformly at random (from
    ``rng``; nothing is drawn when no top-up is needed); clients of ``last`` (e.g. those whose
    statistics were NaN or infinite) come after every other, in random order too. A top-up by
    index, as earlier versions did, favoured low-numbered clients — whole groups of them under the
    paper's partition.
    """
    order = np.asarray(order, dtype=np.intp)
    picked = order[available[order]][:k]
    if picked.size < k:
        rest = available.copy()
        rest[picked] = False
        fill = rng.permutation(np.flatnonzero(rest))
        if last is not None and last.size:
            bad = np.zeros(available.shape[0], dtype=bool)
            bad[last] = True
            fill = np.concatenate([fill[~bad[fill]], fill[bad[fill]]])
        picked = np.concatenate([picked, fill[: k - picked.size]])
    return picked.astype(np.intp)


@dataclass(frozen=True, eq=False)
class Pool:
    """Clients with a usable probed update, and their diversity kernel C = ΦᵀΦ (eq. 5).

    Attributes
    ----------
    clients : ndarray of shape (n,), int
        The pool's clients, ascending.
    kernel : ndarray of shape (n, n) or None
        C, kept while the pool is small (n ≤ `DENSE_KERNEL_MAX`).
    features : ndarray of shape (n, dim), float32, or None
        The unit updates φ, kept instead of the kernel for larger pools (no n × n array).
    """

    clients: IntArray
    kernel: FloatArray | None
    features: FloatArray | None

    @classmethod
    def from_updates(cls, clients: IntArray, updates: FloatArray, picks: int | None = None) -> Pool:
        """The pool of these clients (rows of ``updates``, all finite).

        ``picks`` is how many greedy steps the pool may serve before it is rebuilt (None: any
        number). The dense kernel costs n²·dim once and m²·n per MAP, the features path m·n·dim
        per MAP, so the kernel is formed only when n ≤ picks (and n ≤ `DENSE_KERNEL_MAX`).
        """
        phi = unit_rows(updates)
        limit = DENSE_KERNEL_MAX if picks is None else min(DENSE_KERNEL_MAX, picks)
        dense = phi.shape[0] <= limit
        kernel = unit_gram(gram_matrix(phi)) if dense else None
        return cls(np.asarray(clients, dtype=np.intp), kernel, None if dense else phi)

    @property
    def size(self) -> int:
        return int(self.clients.shape[0])

    def greedy_map(
        self,
        log_weights: FloatArray,
        eligible: BoolArray,
        k: int,
        group_cosine: float | None = None,
    ) -> IntArray:
        """Greedy MAP of min(k, n_eligible) eligible pool clients, as client indices.

        ``log_weights`` and ``eligible`` are over the pool, shape (n,). ``group_cosine`` τ: at
        most one client per group per pass, a group being the clients whose directions have
        cosine ≥ τ with a pick ([`adcs.dpp.greedy_map`][adcs.dpp.greedy_map]).
        """
        idx = np.flatnonzero(eligible)
        k = min(k, idx.size)
        if k == 0:
            return np.empty(0, dtype=np.intp)
        if self.kernel is not None:
            sub = self.kernel[np.ix_(idx, idx)]
            # a Gram matrix of finite unit rows: valid by construction, no O(n³) check
            picks = greedy_map(
                sub, k, log_weights[idx], rtol=KERNEL_RTOL, validate=False,
                group_cosine=group_cosine,
            )  # fmt: skip
        else:
            assert self.features is not None
            f = self.features if idx.size == self.size else self.features[idx]
            # the rows are unit vectors up to float32 rounding; remove that rounding from the
            # weights (the features path adds 2 log ‖f‖) so that ties break as on the kernel
            norms = row_norms(f)  # exactly the norms the features path uses
            w = log_weights[idx] - 2.0 * np.log(np.where(norms > 0, norms, 1.0))
            picks = greedy_map_features(f, k, w, rtol=KERNEL_RTOL, group_cosine=group_cosine)
        return self.clients[idx[picks]].astype(np.intp)


def candidate_probe(
    candidates: int | None, available: BoolArray, rng: np.random.Generator
) -> Probe:
    """The updates of every available client (``candidates=None``), or of a pool of d of them.

    The pool is d distinct available clients drawn uniformly (ascending), or every available
    client when fewer than d are: the ``candidates`` option of ADCS, DivFL and OCS.
    """
    if candidates is None:
        return UPDATES_OF_ALL
    pool = np.flatnonzero(available)
    if pool.size <= candidates:
        return UPDATES_OF_ALL
    chosen = rng.choice(pool, size=candidates, replace=False)
    return Probe(ProbeKind.UPDATES, clients=np.sort(chosen).astype(np.intp))
