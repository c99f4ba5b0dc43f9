"""Splitting a data set among federated clients (DESIGN §3).

Every partition gives each client a training set drawn from the train split and a test set drawn
from the test split; the clients' training sets are pairwise disjoint, and so are their test sets.
All clients get the same number of samples (the simulator's minibatches stay rectangular), by
default as many as the data allow.

Class counts are fixed, not sampled: a client of size n whose distribution puts share p_c on class
c gets round(n·p_c) samples of class c (largest-remainder rounding, so the counts add up to n and
each is within one of n·p_c); the samples of a class are then drawn uniformly without replacement.
This is i.i.d. sampling from the client's distribution with the label counts stratified.

* :func:`paper_groups` — the paper's experiment (Sec. 6): groups of clients sharing one
  distribution, group k dominated by class k (our reading; DESIGN §3).
* :func:`dirichlet` — Dirichlet(α) label skew (Hsu, Qi and Brown 2019).
* :func:`iid` — uniform random split.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_int

__all__ = ["Partition", "class_counts", "dirichlet", "iid", "paper_groups"]

IntArray = NDArray[np.intp]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Partition:
    """Which samples each client holds.

    Attributes
    ----------
    train_indices : tuple of ndarray of shape (n_train_i,), length n_clients
        Client i's training samples, as sorted indices into the train split. Read-only.
    test_indices : tuple of ndarray of shape (n_test_i,), length n_clients
        Client i's test samples, as sorted indices into the test split. Read-only.
    groups : ndarray of shape (n_clients,), int
        Client i's group in ``[0, n_groups)`` (clients of a group share a data distribution).
    n_groups : int
        Number of groups (some may be empty, e.g. for :func:`dirichlet`).

    Notes
    -----
    Construction checks shapes, types and ranges; it does not re-check disjointness (the
    partition functions guarantee it).
    """

    train_indices: tuple[IntArray, ...]
    test_indices: tuple[IntArray, ...]
    groups: IntArray
    n_groups: int

    def __post_init__(self) -> None:
        train = _index_arrays(self.train_indices, "train_indices")
        test = _index_arrays(self.test_indices, "test_indices")
        if len(train) < 1:
            raise ValueError("train_indices must hold at least one client")
        if len(test) != len(train):
            raise ValueError(
                f"test_indices has {len(test)} clients but train_indices has {len(train)}"
            )
        n_groups = check_int("n_groups", self.n_groups)
        groups = np.array(self.groups, copy=True)
        if groups.shape != (len(train),) or not np.issubdtype(groups.dtype, np.integer):
            raise ValueError(
                f"groups must be an integer array of shape ({len(train)},), "
                f"got {groups.dtype} {groups.shape}"
            )
        if groups.size and (groups.min() < 0 or groups.max() >= n_groups):
            raise ValueError(f"groups must lie in [0, n_groups={n_groups})")
        groups = groups.astype(np.intp)
        groups.setflags(write=False)
        object.__setattr__(self, "train_indices", train)
        object.__setattr__(self, "test_indices", test)
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "n_groups", n_groups)

    @property
    def n_clients(self) -> int:
        """Number of clients N."""
        return len(self.train_indices)

    @property
    def train_sizes(self) -> IntArray:
        """ndarray of shape (n_clients,): number of training samples of each client."""
        return np.array([len(a) for a in self.train_indices], dtype=np.intp)

    @property
    def test_sizes(self) -> IntArray:
        """ndarray of shape (n_clients,): number of test samples of each client."""
        return np.array([len(a) for a in self.test_indices], dtype=np.intp)


def class_counts(
    indices: Sequence[ArrayLike], labels: ArrayLike, n_classes: int | None = None
) -> IntArray:
    """Count each client's samples per class.

    Parameters
    ----------
    indices : sequence of n_clients index arrays
        E.g. ``partition.train_indices``.
    labels : ndarray of shape (n_samples,)
        Labels of the split the indices point into.
    n_classes : int, optional
        Number of classes; default ``labels.max() + 1``.

    Returns
    -------
    ndarray of shape (n_clients, n_classes)
    """
    labels_arr = _labels(labels, "labels")
    n_classes = int(labels_arr.max()) + 1 if n_classes is None else n_classes
    return np.stack(
        [np.bincount(labels_arr[np.asarray(ix)], minlength=n_classes) for ix in indices]
    ).astype(np.intp)


# --------------------------------------------------------------------------------------------
# The three partitions
# --------------------------------------------------------------------------------------------


def paper_groups(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_groups: int = 10,
    clients_per_group: int = 3,
    dominance: float = 1.0,
    train_per_client: int | None = None,
    test_per_client: int | None = None,
) -> Partition:
    """The paper's grouped label skew (Sec. 6; our reading, DESIGN §3).

    Group k's distribution puts share ρ = ``dominance`` on class k and (1 − ρ)/(C − 1) on each
    of the other C − 1 classes; ρ = 1 is pure label skew (the paper preset). Its
    ``clients_per_group`` clients draw from that distribution (see the module notes on rounding;
    ties in rounding go to classes k+1, k+2, ... in turn, so no class is favoured). Clients are
    numbered group by group: client i is in group ``i // clients_per_group``.

    Parameters
    ----------
    train_labels : ndarray of shape (n_train,), int
    test_labels : ndarray of shape (n_test,), int
        Labels of the two splits; C = 1 + the largest label found.
    rng : numpy.random.Generator
        Source of all randomness.
    n_groups : int
        Number of groups K, in [1, C].
    clients_per_group : int
        Clients per group (≥ 1); N = K · clients_per_group.
    dominance : float
        ρ in [0, 1].
    train_per_client, test_per_client : int, optional
        Samples per client; default the largest size the splits can give every client (with
        ρ = 1 on full Fashion-MNIST: 2000 train and 333 test).

    Returns
    -------
    Partition
        With ``groups[i] = i // clients_per_group`` and ``n_groups = K``.

    Raises
    ------
    ValueError
        An argument is out of range, or more data is asked for than the splits hold.
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_classes = _n_classes(train, test)
    n_groups = check_int("n_groups", n_groups)
    if n_groups > n_classes:
        raise ValueError(f"n_groups must be in [1, n_classes={n_classes}], got {n_groups}")
    clients_per_group = check_int("clients_per_group", clients_per_group)
    rho = _dominance(dominance, n_classes)

    group_shares = np.full((n_groups, n_classes), (1.0 - rho) / max(n_classes - 1, 1))
    group_shares[np.arange(n_groups), np.arange(n_groups)] = rho
    # Tie priority of class c in group k: c = k first, then k+1, k+2, ... (mod C).
    group_priority = (np.arange(n_classes)[None, :] - np.arange(n_groups)[:, None]) % n_classes
    shares = np.repeat(group_shares, clients_per_group, axis=0)
    priority = np.repeat(group_priority, clients_per_group, axis=0)

    train_counts = _equal_size_counts(train, shares, priority, train_per_client, "train_per_client")
    test_counts = _equal_size_counts(test, shares, priority, test_per_client, "test_per_client")
    return Partition(
        train_indices=_draw(train, train_counts, rng),
        test_indices=_draw(test, test_counts, rng),
        groups=np.repeat(np.arange(n_groups), clients_per_group),
        n_groups=n_groups,
    )


def dirichlet(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_clients: int,
    alpha: float,
    train_per_client: int | None = None,
    test_per_client: int | None = None,
) -> Partition:
    """Dirichlet label skew: client i's class shares q_i ~ Dirichlet(α·1_C).

    Small α gives clients dominated by few classes, large α approaches :func:`iid`. Each client's
    test set has the class proportions of its training set. A client's group is its majority
    class (ties to the lowest class), so ``n_groups = C``.

    Parameters
    ----------
    train_labels : ndarray of shape (n_train,), int
    test_labels : ndarray of shape (n_test,), int
    rng : numpy.random.Generator
    n_clients : int
        N ≥ 1.
    alpha : float
        Concentration α > 0.
    train_per_client, test_per_client : int, optional
        Samples per client; default the largest size the splits can give every client under the
        drawn shares.

    Returns
    -------
    Partition

    Raises
    ------
    ValueError
        An argument is out of range, or the drawn shares need more of a class than exists.
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_classes = _n_classes(train, test)
    n_clients = check_int("n_clients", n_clients)
    if not isinstance(alpha, numbers.Real) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")

    shares = rng.dirichlet(np.full(n_classes, float(alpha)), size=n_clients)
    if not np.all(np.isfinite(shares)) or np.any(shares.sum(axis=1) <= 0):
        raise ValueError(f"alpha={alpha!r} is too small for a numerically valid Dirichlet draw")
    priority = np.broadcast_to(np.arange(n_classes), shares.shape)
    train_counts = _equal_size_counts(train, shares, priority, train_per_client, "train_per_client")
    test_shares = train_counts / train_counts.sum(axis=1, keepdims=True)
    test_counts = _equal_size_counts(
        test, test_shares, priority, test_per_client, "test_per_client"
    )
    return Partition(
        train_indices=_draw(train, train_counts, rng),
        test_indices=_draw(test, test_counts, rng),
        groups=np.argmax(train_counts, axis=1),
        n_groups=n_classes,
    )


def iid(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_clients: int,
    train_per_client: int | None = None,
    test_per_client: int | None = None,
) -> Partition:
    """Uniform random split: each client's samples are a uniform draw without replacement.

    Parameters
    ----------
    train_labels : ndarray of shape (n_train,), int
    test_labels : ndarray of shape (n_test,), int
    rng : numpy.random.Generator
    n_clients : int
        N ≥ 1.
    train_per_client, test_per_client : int, optional
        Samples per client; default ``n_train // N`` and ``n_test // N``.

    Returns
    -------
    Partition
        All clients in one group (``n_groups = 1``).

    Raises
    ------
    ValueError
        An argument is out of range, or more data is asked for than the splits hold.
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_clients = check_int("n_clients", n_clients)
    splits = []
    for labels, size, name in (
        (train, train_per_client, "train_per_client"),
        (test, test_per_client, "test_per_client"),
    ):
        largest = len(labels) // n_clients
        if size is None and largest < 1:
            raise ValueError(
                f"n_clients={n_clients}: the split holds {len(labels)} samples, fewer than one "
                "per client"
            )
        size = largest if size is None else check_int(name, size)
        if size < 1 or size > largest:
            raise ValueError(
                f"{name} must be in [1, {largest}] ({len(labels)} samples, {n_clients} clients), "
                f"got {size}"
            )
        chosen = rng.permutation(len(labels))[: size * n_clients].reshape(n_clients, size)
        splits.append(tuple(np.sort(row) for row in chosen))
    return Partition(
        train_indices=splits[0],
        test_indices=splits[1],
        groups=np.zeros(n_clients, dtype=np.intp),
        n_groups=1,
    )


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


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
