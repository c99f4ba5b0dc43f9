"""Array helpers of the partitions (`adcs.data.partition`): class counts, draws, checks.

How many samples of each class each client gets (apportioning totals to shares, equal sizes,
quantity skew, splitting a class's samples), drawing those samples from the label arrays, and the
checks of the partitions' arguments. Pure functions of arrays; the partitions themselves, and
their name table, are in `adcs.data.partition`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_int

IntArray = NDArray[np.intp]
FloatArray = NDArray[np.float64]


def _apportion(total: int, shares: FloatArray, priority: NDArray[Any]) -> IntArray:
    """Largest-remainder rounding of ``total · shares`` (rows of shape (n_clients, C)).

    Each row's counts add up to ``total`` and each lies within one of ``total · share``; among
    equal remainders the class with the lower ``priority`` rounds up first.
    """
    # Rounding away float noise keeps exact products (e.g. 2000 · 0.7) from flooring low.
    exact = np.round(total * shares, 9)
    counts = np.floor(exact).astype(np.intp)
    shortfall = total - counts.sum(axis=1)
    order = np.lexsort((priority, -(exact - counts)), axis=1)
    rank = np.argsort(order, axis=1)
    counts += rank < shortfall[:, None]
    return counts


def _largest_feasible(available: IntArray, shares: FloatArray, priority: NDArray[Any]) -> int:
    """Largest n ≥ 0 whose apportioned counts, summed over clients, fit ``available``."""
    n_clients = shares.shape[0]
    rate = shares.sum(axis=0)
    needed = rate > 0
    # Rounding takes at most one sample per client and class below n·share, so any feasible n
    # satisfies n·rate_c − n_clients < available_c.
    size = int(available.sum()) // n_clients
    if np.any(needed):
        with np.errstate(over="ignore"):  # tiny rates bound nothing; the largest rate binds
            bound = np.floor((available[needed] + n_clients) / rate[needed]).min()
        size = min(size, int(bound))
    while size > 0 and np.any(_apportion(size, shares, priority).sum(axis=0) > available):
        size -= 1
    return size


def _equal_size_counts(
    labels: IntArray,
    shares: FloatArray,
    priority: NDArray[Any],
    size: int | None,
    name: str,
) -> IntArray:
    """Per-client class counts (n_clients, C) for clients of equal ``size``."""
    available = np.bincount(labels, minlength=shares.shape[1])
    largest = _largest_feasible(available, shares, priority)
    if size is None:
        if largest < 1:
            raise ValueError(
                f"n_clients={shares.shape[0]}: the split ({len(labels)} samples) cannot give "
                "every client even one sample with these class shares"
            )
        size = largest
    size = check_int(name, size)
    counts = _apportion(size, shares, priority)
    demand = counts.sum(axis=0)
    if np.any(demand > available):
        c = int(np.argmax(demand - available))
        raise ValueError(
            f"{name}={size} needs {demand[c]} samples of class {c} but the split holds "
            f"{available[c]}; at most {largest} per client fit"
        )
    return counts


def _size_weights(rng: np.random.Generator, n_clients: int, sigma: float) -> FloatArray:
    """w_i ~ LogNormal(0, σ²) (all ones for σ = 0, drawing nothing)."""
    if sigma == 0:
        return np.ones(n_clients)
    return rng.lognormal(0.0, sigma, size=n_clients)


def _apportion_1d(total: int, weights: FloatArray) -> IntArray:
    """Largest-remainder split of ``total`` in proportion to ``weights`` (n,), ties to low index."""
    shares = (weights / weights.sum())[None, :]
    return _apportion(int(total), shares, np.arange(weights.size)[None, :])[0]


def _nonempty(counts: IntArray, name: str) -> IntArray:
    """Give every client at least one sample, one at a time from the largest (counts (n,) or (n, C))."""
    counts = counts.copy()
    per_client = counts if counts.ndim == 1 else counts.sum(axis=1)
    if int(per_client.sum()) < per_client.size:
        raise ValueError(
            f"the {name} split ({int(per_client.sum())} samples) cannot give each of "
            f"{per_client.size} clients a sample"
        )
    taken = np.zeros(counts.shape, dtype=bool)  # a donor gives each class once before repeating
    for i in np.flatnonzero(per_client == 0).tolist():
        donor = int(np.argmax(per_client))
        if counts.ndim == 1:
            counts[donor] -= 1
            counts[i] += 1
        else:
            row = np.where(taken[donor] | (counts[donor] == 0), -1, counts[donor])
            if row.max() < 0:
                taken[donor] = False
                row = counts[donor]
            c = int(np.argmax(row))
            taken[donor, c] = True
            counts[donor, c] -= 1
            counts[i, c] += 1
        per_client[donor] -= 1
        per_client[i] += 1
    return counts


def _split_classes(available: IntArray, weights: NDArray[Any], name: str) -> IntArray:
    """Counts (n_clients, C): class c's ``available[c]`` samples split in proportion to
    ``weights[:, c]`` (a class nobody weights is left unused); every client gets a sample."""
    counts = np.zeros(weights.shape, dtype=np.intp)
    for c in range(weights.shape[1]):
        if available[c] and weights[:, c].sum() > 0:
            counts[:, c] = _apportion_1d(int(available[c]), weights[:, c])
    used, total, n_clients = int(counts.sum()), int(available.sum()), weights.shape[0]
    if used < n_clients <= total:  # the shares fell on classes that are absent or few
        absent = np.flatnonzero(available == 0).tolist()
        raise ValueError(
            f"the {name} split holds {total} samples, but the clients' class shares put only "
            f"{used} to use, fewer than one per client"
            + (f"; classes {absent} have no {name} samples (number the classes present 0, 1, "
               "…)" if absent else "")
        )  # fmt: skip
    return _nonempty(counts, name)


def _per_class_dirichlet_counts(
    available: IntArray,
    n_clients: int,
    alpha: float,
    rng: np.random.Generator,
    balance: bool,
    min_size: int,
    tries: int = 1000,
) -> IntArray:
    """Counts (n_clients, C): class c split among the clients by p_c ~ Dirichlet(α·1_N).

    Classes are split in order 0 … C − 1 (largest-remainder rounding). With ``balance``, a client
    that already holds at least total/N samples takes no share of the classes still to split.
    The whole draw is repeated until every client holds at least ``min_size`` samples (at most
    ``tries`` times; then ValueError).
    """
    n_classes = available.size
    cap = int(available.sum()) / n_clients
    for _ in range(tries):
        counts = np.zeros((n_clients, n_classes), dtype=np.intp)
        for c in range(n_classes):
            p = rng.dirichlet(np.full(n_clients, float(alpha)))
            if balance:
                p = p * (counts.sum(axis=1) < cap)
            if available[c] and p.sum() > 0:
                counts[:, c] = _apportion_1d(int(available[c]), p)
        if counts.sum(axis=1).min() >= min_size:
            return counts
    raise ValueError(
        f"no per-class Dirichlet(alpha={alpha}) split gave each of {n_clients} clients "
        f"{min_size} samples in {tries} draws; raise alpha or lower min_size"
    )


def _draw(labels: IntArray, counts: IntArray, rng: np.random.Generator) -> tuple[IntArray, ...]:
    """Draw disjoint index sets: client i gets ``counts[i, c]`` random samples of class c."""
    n_clients, n_classes = counts.shape
    parts: list[list[IntArray]] = [[] for _ in range(n_clients)]
    for c in range(n_classes):
        pool = rng.permutation(np.flatnonzero(labels == c))
        ends = np.cumsum(counts[:, c])
        for i, (start, end) in enumerate(zip(ends - counts[:, c], ends, strict=True)):
            parts[i].append(pool[start:end])
    return tuple(np.sort(np.concatenate(p)).astype(np.intp) for p in parts)


def _index_arrays(arrays: Sequence[ArrayLike], name: str) -> tuple[IntArray, ...]:
    out = []
    for i, a in enumerate(arrays):
        arr = np.array(a, copy=True)
        if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
            raise ValueError(
                f"{name}[{i}] must be a 1-D integer array, got {arr.dtype} {arr.shape}"
            )
        if arr.size and arr.min() < 0:
            raise ValueError(f"{name}[{i}] holds negative indices")
        arr = arr.astype(np.intp)
        arr.setflags(write=False)
        out.append(arr)
    return tuple(out)


def _labels(labels: ArrayLike, name: str) -> IntArray:
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name} must be a non-empty 1-D integer array, got {arr.dtype} {arr.shape}"
        )
    if arr.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return arr.astype(np.intp, copy=False)


def _n_classes(train: IntArray, test: IntArray) -> int:
    return int(max(train.max(), test.max())) + 1


def _dominance(value: Any, n_classes: int) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"dominance must be a number in [0, 1], got {value!r}")
    rho = float(value)
    if not 0.0 <= rho <= 1.0:  # also rejects NaN
        raise ValueError(f"dominance must be in [0, 1], got {value!r}")
    if rho < 1.0 and n_classes < 2:
        raise ValueError("dominance < 1 needs at least two classes in the labels")
    return rho


def _check_rng(rng: Any) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
