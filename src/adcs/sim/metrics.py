"""Selection and accuracy metrics of the paper's experiment (Sec. 6.1 and 6.3, Table 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_unit_interval

__all__ = [
    "group_accuracy",
    "group_share",
    "percentile_accuracy",
    "selection_counts",
    "tv_distance",
    "tv_to_uniform",
    "uniform_group_share",
    "worst_and_average",
]

FloatArray = NDArray[np.float64]


def _int_array(name: str, values: ArrayLike) -> NDArray[np.intp]:
    array = np.asarray(values)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    return array.astype(np.intp, copy=False)


def selection_counts(selected: ArrayLike, n_clients: int) -> NDArray[np.intp]:
    """How many times each client was selected.

    Parameters
    ----------
    selected : ndarray of shape (rounds, m), int
        Client indices selected in each round; negative entries (−1: fewer than m were
        selected) are padding and not counted.
    n_clients : int

    Returns
    -------
    ndarray of shape (n_clients,), int
    """
    sel = _int_array("selected", selected).ravel()
    sel = sel[sel >= 0]
    if sel.size and (sel.min() < 0 or sel.max() >= n_clients):
        raise ValueError(f"selected holds a client index outside [0, {n_clients})")
    return np.bincount(sel, minlength=n_clients).astype(np.intp)


def group_share(selected: ArrayLike, groups: ArrayLike, n_groups: int) -> FloatArray:
    """Share of all selection slots that went to each group (paper Table 1).

    Parameters
    ----------
    selected : ndarray of shape (rounds, m), int
        Client indices selected in each round (−1 is padding).
    groups : ndarray of shape (n_clients,), int
        Group of each client, in [0, n_groups).
    n_groups : int

    Returns
    -------
    ndarray of shape (n_groups,)
        s_k = #{(t, i): groups[selected[t, i]] = k} / (number of selection slots filled); sums to
        1 (all zeros if nothing was selected).
    """
    grp = _int_array("groups", groups)
    if grp.size and (grp.min() < 0 or grp.max() >= n_groups):
        raise ValueError(f"groups must lie in [0, n_groups={n_groups})")
    counts = selection_counts(selected, grp.shape[0])
    per_group = np.bincount(grp, weights=counts, minlength=n_groups).astype(np.float64)
    total = per_group.sum()
    return per_group / total if total > 0 else per_group


def uniform_group_share(groups: ArrayLike, n_groups: int) -> FloatArray:
    """The group shares uniform client selection gives in expectation: |group k| / n_clients.

    With equally sized groups (the paper's 10 groups of 3) this is 1/n_groups for every group, the
    target distribution the paper measures the TV distance against (Sec. 6.3).
    """
    grp = _int_array("groups", groups)
    if grp.size == 0:
        raise ValueError("groups must name at least one client")
    return np.bincount(grp, minlength=n_groups) / grp.size


def tv_distance(p: ArrayLike, q: ArrayLike) -> float:
    """Total variation distance TV(p, q) = ½ Σ_k |p_k − q_k| (paper Sec. 6.3).

    Parameters
    ----------
    p, q : ndarray of shape (K,)
        Distributions on the same K outcomes.
    """
    a = np.asarray(p, dtype=np.float64)
    b = np.asarray(q, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"p and q must be 1-D of the same length, got {a.shape} and {b.shape}")
    return 0.5 * float(np.abs(a - b).sum())


def tv_to_uniform(share: ArrayLike, groups: ArrayLike, n_groups: int) -> float:
    """TV distance of a run's group shares to what uniform selection gives in expectation.

    The one definition used by the simulator, the report and Table 1: TV(share, |group k| / N),
    against the groups' real sizes (1/n_groups only when the groups are equal).

    Parameters
    ----------
    share : ndarray of shape (n_groups,)
        [`group_share`][adcs.sim.group_share] of the run.
    groups : ndarray of shape (n_clients,), int
        The run's partition groups.
    n_groups : int
    """
    return tv_distance(share, uniform_group_share(groups, n_groups))


def worst_and_average(client_acc: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Worst (min over clients) and average test accuracy (paper Fig. 1).

    Parameters
    ----------
    client_acc : ndarray of shape (..., n_clients)

    Returns
    -------
    worst, average : ndarrays of shape client_acc.shape[:-1]
    """
    acc = _accuracies(client_acc)
    return acc.min(axis=-1), acc.mean(axis=-1)


def _accuracies(client_acc: ArrayLike) -> NDArray[Any]:
    """``client_acc`` as float64 of shape (..., n_clients), n_clients ≥ 1."""
    acc: NDArray[Any] = np.asarray(client_acc, dtype=np.float64)
    if acc.ndim == 0 or acc.shape[-1] == 0:
        raise ValueError(f"client_acc must be of shape (..., n_clients ≥ 1), got {acc.shape}")
    return acc


def percentile_accuracy(client_acc: ArrayLike, q: float = 0.1) -> FloatArray:
    """The q-quantile of the per-client accuracy (default the 10th percentile).

    With thousands of clients the minimum is one client's noise; the worst decile is the view
    of fairness-oriented FL work. Linear interpolation between order statistics (NumPy's
    default), so q = 0 is the minimum and q = 0.5 the median.

    Parameters
    ----------
    client_acc : ndarray of shape (..., n_clients)
    q : float in [0, 1]

    Returns
    -------
    ndarray of shape client_acc.shape[:-1]
    """
    q = check_unit_interval("q", q)
    acc = _accuracies(client_acc)
    return np.asarray(np.quantile(acc, q, axis=-1), dtype=np.float64)


def group_accuracy(client_acc: ArrayLike, groups: ArrayLike, n_groups: int) -> FloatArray:
    """Mean accuracy of each group's clients.

    Parameters
    ----------
    client_acc : ndarray of shape (..., n_clients)
    groups : ndarray of shape (n_clients,), int in [0, n_groups)
        The group of each column's client.
    n_groups : int

    Returns
    -------
    ndarray of shape (..., n_groups)
        NaN for a group with no client among the columns.
    """
    acc: NDArray[Any] = np.asarray(client_acc, dtype=np.float64)
    grp = _int_array("groups", groups)
    if grp.shape != acc.shape[-1:]:
        raise ValueError(f"groups must have shape ({acc.shape[-1]},), got {grp.shape}")
    if grp.size and (grp.min() < 0 or grp.max() >= n_groups):
        raise ValueError(f"groups must lie in [0, n_groups={n_groups})")
    members = np.zeros((grp.size, n_groups))
    members[np.arange(grp.size), grp] = 1.0
    counts = members.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((acc @ members) / counts, dtype=np.float64)
