"""What every runtime does the same way in a round: the selection contract and aggregation weights.

The simulator ([`adcs.sim`][adcs.sim]) and the Flower strategy ([`adcs.flower`][adcs.flower]) both
call these, so a scheduler is held to one contract and a round's model step is computed by one rule
wherever it runs.

Selection contract (docs/design.md §4). With ``n_available`` clients available, a scheduler returns exactly
``min(m, n_available)`` distinct available client indices (all of them when fewer than ``m`` are
available; none when none is).

Aggregation (docs/design.md §2). The server step is w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R} c_i Δ_i over the selected
clients R that returned their update, with

* c_i = p_i / Σ_{j∈R} p_j by default (p uniform or ∝ data size), or
* c_i = w_i · Σ_{j∈S} w_j / Σ_{j∈R} w_j when the scheduler supplies its own weights w (unbiased
  samplers): the weights of those that returned are rescaled to the mass of all selected, so a
  dropout does not shrink the step. Without dropouts this is Σ_{i∈S} w_i Δ_i exactly.
"""

from __future__ import annotations

import reprlib

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs.schedulers.base import Probe, n_to_select

__all__ = [
    "SchedulerInitError",
    "SelectionError",
    "aggregation_weights",
    "check_selection",
    "check_weights",
    "checked_probe",
]

IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]
F64Array = NDArray[np.float64]


class SelectionError(RuntimeError):
    """A scheduler broke the selection contract (a bug in the scheduler, not in the input)."""


class SchedulerInitError(ValueError):
    """A scheduler refused a run's clients at ``init`` (e.g. more candidates than clients): the
    configuration does not fit the data."""


def check_selection(
    clients: ArrayLike,
    available: BoolArray,
    m: int,
    *,
    who: str = "the scheduler",
    n_available: int | None = None,
    weights: ArrayLike | None = None,
) -> IntArray:
    """The selected clients as an index array, after checking the contract.

    Parameters
    ----------
    clients : array of shape (k,), int
        What the scheduler returned.
    available : ndarray of bool, shape (n_clients,)
    m : int
        The scheduler's clients per round.
    who : str
        Named in the error (e.g. ``"run 'adcs/seed0'"``).
    n_available : int, optional
        The number of available clients when the caller knows it (``available`` is then not
        scanned again).
    weights : array of shape (k,), optional
        The selection's own aggregation weights (``Selection.weights``): k finite numbers ≥ 0.

    Raises
    ------
    SelectionError
        Unless ``clients`` holds exactly ``min(m, n_available)`` distinct available indices, and
        ``weights`` (when given) one finite, non-negative number per client.
    """
    idx = np.asarray(clients)
    n = available.shape[0]
    k = n_to_select(m, available) if n_available is None else min(int(m), n_available)
    ok = idx.shape == (k,) and (idx.size == 0 or idx.dtype.kind in "iu")
    if ok and idx.size:
        values = idx.tolist()  # Python's min, max and set beat NumPy's on a few hundred ints
        ok = min(values) >= 0 and max(values) < n and len(set(values)) == k
        ok = ok and bool(available[idx].all())
    if not ok:
        raise SelectionError(
            f"{who} must select {k} distinct available clients in [0, {n}) "
            f"(min(m={m}, {int(np.count_nonzero(available))} available)), got {clients!r}"
        )
    if weights is not None:
        check_weights(weights, k, who=who)
    return idx.astype(np.intp, copy=False)


def check_weights(weights: ArrayLike, k: int, *, who: str = "the scheduler") -> F64Array:
    """A selection's aggregation weights as float64, shape (k,), after the contract's check: one
    finite, non-negative number per selected client (a negative weight would step against a
    client's update: no unbiased sampler gives one).

    Raises
    ------
    SelectionError
        Naming ``who`` and the weights.
    """
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        w = np.full(0, np.nan)
    if w.shape != (k,) or not np.isfinite(w).all() or (w < 0).any():
        raise SelectionError(
            f"{who} must give {k} finite, non-negative selection weights (one per client), "
            f"got {weights!r}"
        )
    return w


def aggregation_weights(
    clients: IntArray,
    returned: BoolArray,
    *,
    scheduler_weights: ArrayLike | None = None,
    base: F64Array | None = None,
) -> F64Array:
    """The coefficients c of the selected clients in Σ c_i Δ_i (module docstring), shape (k,).

    Parameters
    ----------
    clients : ndarray of shape (k,), int
        The selected clients.
    returned : ndarray of bool, shape (k,)
        Which of them delivered an update (dropped ones get coefficient 0).
    scheduler_weights : array of shape (k,), optional
        The scheduler's own weights w (``Selection.weights``).
    base : ndarray of shape (n_clients,), optional
        p_n (``None``: uniform).

    Returns
    -------
    ndarray of shape (k,), float64
        Zero for clients that did not return; all zero when none returned.
    """
    returned = np.asarray(returned, dtype=bool)
    k = clients.shape[0]
    if scheduler_weights is None and base is None and k and returned.all():
        return np.full(k, 1.0 / k)  # the common case: uniform weights, nobody dropped
    coef = np.zeros(k)
    if not returned.any():
        return coef
    if scheduler_weights is not None:
        w = np.asarray(scheduler_weights, dtype=np.float64)
        if w.shape != clients.shape or not np.isfinite(w).all():
            raise SelectionError(
                f"selection weights must be {clients.shape[0]} finite numbers, got {w!r}"
            )
        kept = float(w[returned].sum())
        if kept == 0.0:
            raise SelectionError("the weights of the clients that returned sum to zero")
        coef[returned] = w[returned] * (float(w.sum()) / kept)
        return coef
    p = np.ones(clients.shape[0]) if base is None else np.asarray(base, np.float64)[clients]
    total = float(p[returned].sum())
    if total > 0:
        coef[returned] = p[returned] / total
    else:  # every returned client has p = 0 (e.g. no data): average them uniformly
        coef[returned] = 1.0 / int(returned.sum())
    return coef


def checked_probe(probe: object, n_clients: int, who: str, t: int) -> Probe:
    """What a scheduler's ``probe`` returned, checked: a [`Probe`][adcs.schedulers.base.Probe] of
    clients in [0, n_clients) (``who`` at round ``t`` names the run in the error).

    Raises
    ------
    SelectionError
        Naming the run, the round and what the scheduler returned.
    """
    if not isinstance(probe, Probe):
        raise SelectionError(
            f"{who} at round {t} must return a Probe from probe, got "
            f"{type(probe).__name__}: {reprlib.repr(probe)}"
        )
    clients = probe.clients
    if clients is not None and clients.size and int(clients.max()) >= n_clients:
        raise SelectionError(
            f"{who} at round {t}: its probe names client {int(clients.max())}, outside "
            f"[0, {n_clients})"
        )
    return probe
