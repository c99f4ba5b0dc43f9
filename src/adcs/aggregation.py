"""Aggregation rules that need every returned client's update: the runtime's aggregation hook.

By default a runtime aggregates w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R} c_i Δ_i ([`adcs.round.contract`][adcs.round.contract]),
which the simulator computes without forming the individual updates when it can (one weighted
product). A run may instead carry an `Aggregator`: the runtime then computes each returned client's
update Δ_i individually and asks the aggregator for the step. Two kinds of aggregator use this:

* `RobustAggregation` — a robust rule in place of the weighted mean (Byzantine-robust FL):
  coordinate-wise median, coordinate-wise trimmed mean (Yin et al. 2018), or the weighted mean of
  updates clipped to the median norm (norm bounding, Sun et al. 2019);
* a poison (`adcs.adversary.Poisoned`), which replaces malicious clients' updates before an
  inner rule combines them.

An aggregator also says what the server *received* (the updates after any poison), which the
runtime hands to the scheduler's ``observe``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_number
from adcs.schedulers.base import ClientStats

__all__ = [
    "Aggregator",
    "Robust",
    "RobustAggregation",
    "coordinate_median",
    "norm_clipped_sum",
    "trimmed_mean",
    "weighted_sum",
]

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]
IntArray = NDArray[np.intp]


@runtime_checkable
class Aggregator(Protocol):
    """How one run turns its returned clients' individual updates into the server step."""

    def aggregate(
        self,
        state: Any,
        round_idx: int,
        clients: IntArray,
        updates: F32Array,
        coefs: F64Array,
        probed: ClientStats,
    ) -> tuple[F32Array, F32Array]:
        """The updates the server received and the step Σ-rule over them.

        Parameters
        ----------
        state : object
            The run's scheduler state after this round's ``select`` (before ``observe``).
        round_idx : int
        clients : ndarray of shape (n,), int
            The selected clients that returned an update.
        updates : ndarray of shape (n, dim), float32
            Their honest local updates Δ_i at w⁽ᵗ⁾.
        coefs : ndarray of shape (n,)
            Their coefficients c_i
            ([`adcs.round.contract.aggregation_weights`][adcs.round.contract.aggregation_weights]).
        probed : ClientStats
            What the runtime gathered for this round's probe (honest values).

        Returns
        -------
        received : ndarray of shape (n, dim), float32
            What the server received from each client (``updates`` unless poisoned).
        step : ndarray of shape (dim,), float32
            The aggregate the server adds (before η_s): Σ c_i Δ_i for the mean rule.
        """
        ...


def weighted_sum(updates: F32Array, coefs: F64Array) -> F32Array:
    """Σ_i c_i Δ_i, shape (dim,) (the rule of [`adcs.round.contract`][adcs.round.contract])."""
    return np.asarray(coefs, dtype=np.float32) @ np.asarray(updates, dtype=np.float32)


def _finite(updates: F32Array) -> F32Array:
    """The rows of ``updates`` (n, dim) without a NaN or inf, shape (n_finite, dim).

    The robust rules leave such an update out, as a server that checks what it received does
    (the Flower runtimes reject it): one non-finite row would make every rule's step NaN.
    """
    ok = np.isfinite(updates).all(axis=1)
    return updates if ok.all() else updates[ok]


def coordinate_median(updates: F32Array, coefs: F64Array) -> F32Array:
    """(Σ_i c_i) · median_i Δ_i coordinate by coordinate, shape (dim,).

    The median is unweighted (every returned client counts once), scaled by the total weight so
    that it takes the mean rule's place: with c_i = 1/n it is the plain coordinate-wise median.
    Non-finite updates are left out.
    """
    total = np.float32(np.sum(coefs))
    updates = _finite(updates)
    if updates.shape[0] == 0:
        return np.zeros(updates.shape[1], dtype=np.float32)
    return (np.median(updates, axis=0) * total).astype(np.float32)


def trimmed_mean(updates: F32Array, coefs: F64Array, trim: float) -> F32Array:
    """(Σ_i c_i) · the coordinate-wise β-trimmed mean of the Δ_i, shape (dim,).

    In each coordinate the ⌊β n⌋ largest and ⌊β n⌋ smallest values are dropped and the rest
    averaged (Yin et al. 2018); β = ``trim`` ∈ [0, 0.5). Unweighted, scaled as
    `coordinate_median`; non-finite updates are left out.
    """
    total = np.float32(np.sum(coefs))
    updates = _finite(updates)
    n = updates.shape[0]
    if n == 0:
        return np.zeros(updates.shape[1], dtype=np.float32)
    cut = int(np.floor(trim * n))
    if cut == 0:
        return (updates.mean(axis=0) * total).astype(np.float32)
    ordered = np.sort(updates, axis=0)
    return (ordered[cut : n - cut].mean(axis=0) * total).astype(np.float32)


def norm_clipped_sum(updates: F32Array, coefs: F64Array) -> F32Array:
    """Σ_i c_i Δ_i min(1, τ/‖Δ_i‖) with τ the median of the ‖Δ_i‖, shape (dim,).

    Norm bounding (Sun et al. 2019) at a threshold the clients cannot move while most are
    honest: no update weighs more than the median-norm update in its direction. A non-finite
    update has no direction to clip to: it is left out (τ is the median of the others).
    """
    ok = np.isfinite(updates).all(axis=1)
    if not ok.all():
        return norm_clipped_sum(updates[ok], np.asarray(coefs)[ok])
    if updates.shape[0] == 0:
        return np.zeros(updates.shape[1], dtype=np.float32)
    norms = np.linalg.norm(updates.astype(np.float64), axis=1)
    tau = float(np.median(norms))
    scale = np.where(norms > tau, tau / np.where(norms > 0, norms, 1.0), 1.0)
    return weighted_sum(updates, np.asarray(coefs, dtype=np.float64) * scale)


class Robust(enum.Enum):
    """A robust aggregation rule."""

    MEAN = "mean"
    """Σ c_i Δ_i, the default rule (no robustness; for comparison)."""
    MEDIAN = "median"
    """Coordinate-wise median."""
    TRIMMED_MEAN = "trimmed_mean"
    """Coordinate-wise trimmed mean."""
    NORM_CLIP = "norm_clip"
    """Mean of the updates clipped to the median norm."""


@dataclass(frozen=True)
class RobustAggregation:
    """A robust rule in place of the weighted mean (an `Aggregator`).

    Parameters
    ----------
    rule : Robust
    trim : float
        β ∈ [0, 0.5) for ``Robust.TRIMMED_MEAN``: the share cut at each end of each coordinate.
    """

    rule: Robust = Robust.MEAN
    trim: float = 0.2

    def __post_init__(self) -> None:
        if not isinstance(self.rule, Robust):
            raise ValueError(
                f"rule must be a Robust ({[r.value for r in Robust]}), got {self.rule!r}"
            )
        check_number("trim", self.trim, 0.0, 0.5, high_open=True)

    def combine(self, updates: F32Array, coefs: F64Array) -> F32Array:
        """The step of this rule over the received updates (n, dim) → (dim,)."""
        if self.rule is Robust.MEDIAN:
            return coordinate_median(updates, coefs)
        if self.rule is Robust.TRIMMED_MEAN:
            return trimmed_mean(updates, coefs, self.trim)
        if self.rule is Robust.NORM_CLIP:
            return norm_clipped_sum(updates, coefs)
        return weighted_sum(updates, coefs)

    def aggregate(
        self,
        state: Any,
        round_idx: int,
        clients: IntArray,
        updates: F32Array,
        coefs: F64Array,
        probed: ClientStats,
    ) -> tuple[F32Array, F32Array]:
        return updates, self.combine(updates, coefs)
