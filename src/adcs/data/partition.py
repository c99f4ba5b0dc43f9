"""Splitting a data set among federated clients (docs/design.md §3 and §7).

Every partition gives each client a non-empty training set drawn from the train split and a
non-empty test set drawn from the test split; the clients' training sets are pairwise disjoint,
and so are their test sets. A client's test set follows its training set's class proportions.

Class counts are fixed, not sampled: a client of size n whose distribution puts share p_c on class
c gets round(n·p_c) samples of class c (largest-remainder rounding, so the counts add up to n and
each is within one of n·p_c); the samples of a class are then drawn uniformly without replacement.
This is i.i.d. sampling from the client's distribution with the label counts stratified.

* `paper_groups` — the paper's experiment (Sec. 6): groups of clients sharing one
  distribution, group k dominated by class k mod C (our reading; docs/design.md §3). Equal sizes.
* `iid` — uniform random split; equal sizes, or log-normal sizes (quantity skew).
* `dirichlet` — Dirichlet(α) label skew (Hsu, Qi and Brown 2019) over all the data, with
  optional quantity skew; or, given a size, equal sizes.
* `dirichlet_per_class` — each class split among the clients by Dirichlet(α·1_N) shares
  (Yurochkin et al. 2019; the split of PowerOfChoice's experiments): sizes differ widely.
* `shards` — McMahan et al.'s pathological split: the data sorted by label, cut into
  shards, k shards per client.
* `classes_per_client` — each client holds k classes, each class split evenly among its
  holders.
* `natural` — the data set's own clients (FEMNIST's writers).

A client's *group* is the partition's own where it has one (paper_groups, classes_per_client);
otherwise its majority training label (ties to the lowest class), so ``n_groups = C``.
`adcs.data.partition_table.PARTITIONS` is the name → partition table used by
configurations.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import (
    check_client_count,
    check_int,
    check_non_negative,
    check_number,
    check_positive,
    check_unit_interval,
)
from adcs.data.counts import (
    _apportion_1d,
    _check_rng,
    _dominance,
    _draw,
    _equal_size_counts,
    _index_arrays,
    _labels,
    _n_classes,
    _nonempty,
    _per_class_dirichlet_counts,
    _size_weights,
    _split_classes,
)

__all__ = [
    "PARAMETER_CHECKS",
    "LabelledSplits",
    "Partition",
    "PartitionKind",
    "class_counts",
    "classes_per_client",
    "dirichlet",
    "dirichlet_per_class",
    "iid",
    "majority_groups",
    "natural",
    "paper_groups",
    "shards",
]

IntArray = NDArray[np.intp]
FloatArray = NDArray[np.float64]


PARAMETER_CHECKS: Mapping[str, Callable[[str, Any], object]] = {
    "n_groups": check_int, "clients_per_group": check_int, "dominance": check_unit_interval,
    "n_clients": check_client_count, "alpha": check_positive, "size_sigma": check_non_negative,
    "train_per_client": check_int, "test_per_client": check_int,
    "shards_per_client": check_int, "classes": check_int,
}  # fmt: skip
"""Types and ranges of the built-in partitions' parameters (the data decide the rest)."""


@dataclass(frozen=True)
class PartitionKind:
    """One row of the partitions' table (`adcs.data.partition_table.PARTITIONS`).

    Attributes
    ----------
    split : callable
        ``split(data, rng, **params)`` → `Partition`, with ``data`` the labelled splits.
    keys : frozenset of str
        Its parameters (the ``[data.partition]`` keys besides ``kind``).
    required : frozenset of str
        Parameters that must be given.
    """

    split: Callable[..., Partition]
    keys: frozenset[str]
    required: frozenset[str] = frozenset()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The values of parameters not given (the partition function's defaults)."""
    checks: Mapping[str, Callable[[str, Any], object]] = field(
        default_factory=lambda: PARAMETER_CHECKS
    )
    """``check(name, value)`` of a parameter (``ValueError`` naming it), run when a configuration
    is read; a parameter without one is checked by the split itself."""

    def check(self, params: Mapping[str, Any], prefix: str = "") -> None:
        """Check the parameters' values (``ValueError`` naming ``prefix + key``)."""
        for key, value in params.items():
            if key in self.checks:
                self.checks[key](prefix + key, value)

    def value(self, params: Mapping[str, Any], key: str) -> Any:
        """The parameter ``key`` as the partition will use it (None: unset, the data decide)."""
        return params.get(key, self.defaults.get(key))

    def n_clients(self, params: Mapping[str, Any]) -> int | None:
        """N for these parameters, when they fix it (None: the data decide, e.g. ``natural``)."""
        if "n_groups" in self.keys:
            return int(self.value(params, "n_groups")) * int(
                self.value(params, "clients_per_group")
            )
        value = params.get("n_clients")
        return None if value is None else int(value)


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
        Number of groups (some may be empty, e.g. for `dirichlet`).

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
    """The paper's grouped label skew (Sec. 6; our reading, docs/design.md §3).

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
        Number of groups K ≥ 1; with K > C the classes are used in turn (group k is dominated by
        class k mod C, so groups k and k + C share a distribution but not their samples).
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
    clients_per_group = check_int("clients_per_group", clients_per_group)
    rho = _dominance(dominance, n_classes)

    own = np.arange(n_groups) % n_classes  # group k's class
    group_shares = np.full((n_groups, n_classes), (1.0 - rho) / max(n_classes - 1, 1))
    group_shares[np.arange(n_groups), own] = rho
    # Tie priority of class c in group k: c = k first, then k+1, k+2, ... (mod C).
    group_priority = (np.arange(n_classes)[None, :] - own[:, None]) % n_classes
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
    size_sigma: float = 0.0,
) -> Partition:
    """Dirichlet label skew: client i's class shares q_i ~ Dirichlet(α·1_C).

    Small α gives clients dominated by few classes, large α approaches `iid`. Each client's
    test set has the class proportions of its training set; its group is its majority class.

    By default every sample is used and sizes differ: class c's samples are split among the
    clients in proportion to w_i q_ic, where w_i = 1, or, with quantity skew, a log-normal
    weight w_i ~ LogNormal(0, ``size_sigma``²). Given ``train_per_client``, every client instead
    holds exactly that many samples (distribution q_i; the rest of the data is unused).

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
        Equal sizes (``test_per_client`` defaults to the largest that fits); incompatible with
        ``size_sigma > 0``.
    size_sigma : float
        σ ≥ 0 of the log-normal size weights (0: no quantity skew).

    Returns
    -------
    Partition

    Raises
    ------
    ValueError
        An argument is out of range, or the data cannot give every client a sample.
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_classes = _n_classes(train, test)
    n_clients = check_int("n_clients", n_clients)
    if not isinstance(alpha, numbers.Real) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    sigma = check_number("size_sigma", size_sigma, 0.0)
    equal = train_per_client is not None or test_per_client is not None
    if equal and sigma > 0:
        raise ValueError(
            "size_sigma > 0 (quantity skew) needs train_per_client/test_per_client unset"
        )

    shares = rng.dirichlet(np.full(n_classes, float(alpha)), size=n_clients)
    if not np.all(np.isfinite(shares)) or np.any(shares.sum(axis=1) <= 0):
        raise ValueError(f"alpha={alpha!r} is too small for a numerically valid Dirichlet draw")
    if not equal:
        weights = shares * _size_weights(rng, n_clients, sigma)[:, None]
        train_counts = _split_classes(np.bincount(train, minlength=n_classes), weights, "train")
        return _from_counts(train, test, train_counts, rng, groups=None)
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


def dirichlet_per_class(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_clients: int,
    alpha: float,
    balance: bool = True,
    min_size: int = 10,
) -> Partition:
    """Each class split among the clients in shares p_c ~ Dirichlet(α·1_N), drawn per class.

    The split of Yurochkin et al. (2019) and of PowerOfChoice's experiments (Cho, Wang and Joshi
    2022): small α gives each class to few clients, and client sizes differ widely. Every training
    sample is used; each client's test set has its training class proportions (the union of the
    test sets is the whole test split); its group is its majority class.

    Parameters
    ----------
    train_labels, test_labels : ndarray of shape (n_train,) and (n_test,), int
    rng : numpy.random.Generator
    n_clients : int
        N ≥ 1.
    alpha : float
        Concentration α > 0.
    balance : bool
        A client already holding at least n_train/N samples takes no share of the classes split
        after (classes are split in label order), which caps how large a client grows.
    min_size : int
        The draw is repeated until every client holds at least this many training samples (≥ 1).
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_classes = _n_classes(train, test)
    n_clients = check_int("n_clients", n_clients)
    check_number("alpha", alpha, 0.0, low_open=True)
    if not isinstance(balance, bool):
        raise ValueError(f"balance must be true or false, got {balance!r}")
    min_size = check_int("min_size", min_size)
    totals = np.bincount(train, minlength=n_classes)
    counts = _per_class_dirichlet_counts(totals, n_clients, alpha, rng, balance, min_size)
    return _from_counts(train, test, counts, rng, groups=None)


def iid(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_clients: int,
    train_per_client: int | None = None,
    test_per_client: int | None = None,
    size_sigma: float = 0.0,
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
    size_sigma : float
        σ ≥ 0. With σ > 0 (quantity skew) every sample is used and client i's share of each split
        is proportional to w_i ~ LogNormal(0, σ²) (sizes unset then).

    Returns
    -------
    Partition
        Groups are the clients' majority labels (``n_groups = C``).

    Raises
    ------
    ValueError
        An argument is out of range, or more data is asked for than the splits hold.
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_clients = check_int("n_clients", n_clients)
    sigma = check_number("size_sigma", size_sigma, 0.0)
    if sigma > 0:
        if train_per_client is not None or test_per_client is not None:
            raise ValueError(
                "size_sigma > 0 (quantity skew) needs train_per_client/test_per_client unset"
            )
        weights = _size_weights(rng, n_clients, sigma)
        splits = []
        for labels, name in ((train, "train"), (test, "test")):
            sizes = _nonempty(_apportion_1d(labels.size, weights), name)
            order = rng.permutation(labels.size)
            ends = np.cumsum(sizes)
            splits.append(
                tuple(np.sort(order[e - n : e]) for e, n in zip(ends, sizes, strict=True))
            )
        return _with_majority_groups(
            Partition(splits[0], splits[1], np.zeros(n_clients, int), 1), train, test
        )
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
    return _with_majority_groups(
        Partition(splits[0], splits[1], np.zeros(n_clients, dtype=np.intp), 1), train, test
    )


def shards(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_clients: int,
    shards_per_client: int = 2,
    ordered: bool = False,
) -> Partition:
    """McMahan et al.'s (2017) pathological split: k label-sorted shards per client.

    The training samples, shuffled then sorted by label, are cut into N·k shards of (nearly)
    equal size; each client receives k shards at random, so it sees about k classes. Every
    training sample is used; each client's test samples follow its training class proportions
    (class c's test samples split among the clients in proportion to their training counts of c).

    Parameters
    ----------
    train_labels, test_labels : ndarray of int
    rng : numpy.random.Generator
    n_clients : int
        N ≥ 1.
    shards_per_client : int
        k ≥ 1.
    ordered : bool
        Shard s goes to client s mod N instead of at random, so the clients come in label order:
        with k = 1 and N a multiple of the classes (on classes of equal size), client i holds
        only label ⌊i·C/N⌋ — Fraboni et al.'s (ICML 2021) MNIST shard split, whose clustered
        sampling by size then groups the clients of one label. False (default): at random.

    Returns
    -------
    Partition
        Groups are the majority labels.
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_clients = check_int("n_clients", n_clients)
    k = check_int("shards_per_client", shards_per_client)
    n_shards = n_clients * k
    if n_shards > train.size:
        raise ValueError(
            f"n_clients × shards_per_client = {n_shards} shards exceed the {train.size} samples"
        )
    if not isinstance(ordered, bool):
        raise ValueError(f"ordered must be true or false, got {ordered!r}")
    shuffled = rng.permutation(train.size)
    by_label = shuffled[np.argsort(train[shuffled], kind="stable")]
    pieces = np.array_split(by_label, n_shards)
    # shard s goes to client owner[s]
    owner = (np.arange(n_shards) if ordered else rng.permutation(n_shards)) % n_clients
    train_idx = tuple(
        np.sort(np.concatenate([pieces[s] for s in np.flatnonzero(owner == i)]))
        for i in range(n_clients)
    )
    n_classes = _n_classes(train, test)
    counts = class_counts(train_idx, train, n_classes)
    test_idx = _draw(
        test, _split_classes(np.bincount(test, minlength=n_classes), counts, "test"), rng
    )
    return Partition(train_idx, test_idx, np.argmax(counts, axis=1), n_classes)


def classes_per_client(
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    rng: np.random.Generator,
    n_clients: int,
    classes: int = 2,
) -> Partition:
    """Each client holds k classes; each class's samples are split evenly among its holders.

    With π a random order of the C classes, client i holds classes π((i + j) mod C), j < k: each
    class is held by about N·k/C clients, and clients i and i + C hold the same classes (their
    group, i mod C). Every sample of a held class is used; test sets follow the same split.

    Parameters
    ----------
    train_labels, test_labels : ndarray of int
    rng : numpy.random.Generator
    n_clients : int
        N ≥ 1.
    classes : int
        k in [1, C].

    Returns
    -------
    Partition
        ``groups[i] = i mod C`` (one group when k = C: every client holds every class).
    """
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    _check_rng(rng)
    n_classes = _n_classes(train, test)
    n_clients = check_int("n_clients", n_clients)
    k = check_int("classes", classes, maximum=n_classes)
    order = rng.permutation(n_classes)
    offset = np.arange(n_clients) % n_classes
    held = np.zeros((n_clients, n_classes))
    for j in range(k):
        held[np.arange(n_clients), order[(offset + j) % n_classes]] = 1.0
    train_counts = _split_classes(np.bincount(train, minlength=n_classes), held, "train")
    groups = offset if k < n_classes else np.zeros(n_clients, dtype=np.intp)
    return _from_counts(train, test, train_counts, rng, groups=groups)


class LabelledSplits(Protocol):
    """What a partition reads of a data set: the labels of both splits (and writers, if any)."""

    @property
    def train_labels(self) -> NDArray[np.integer[Any]]: ...

    @property
    def test_labels(self) -> NDArray[np.integer[Any]]: ...


def natural(
    train_writers: ArrayLike,
    test_writers: ArrayLike,
    rng: np.random.Generator,
    train_labels: ArrayLike,
    test_labels: ArrayLike,
    n_clients: int | None = None,
) -> Partition:
    """The data set's own clients: client i holds writer i's samples (e.g. FEMNIST, LEAF).

    Parameters
    ----------
    train_writers, test_writers : ndarray of shape (n_train,) / (n_test,), int
        The writer of each sample.
    rng : numpy.random.Generator
        Draws the writers kept when ``n_clients`` is given.
    train_labels, test_labels : ndarray of int
        For the groups (majority labels).
    n_clients : int, optional
        Keep this many writers, drawn uniformly (in writer order); default all those with both
        training and test samples.
    """
    _check_rng(rng)
    train_w = _labels(train_writers, "train_writers")
    test_w = _labels(test_writers, "test_writers")
    train = _labels(train_labels, "train_labels")
    test = _labels(test_labels, "test_labels")
    if train_w.size != train.size or test_w.size != test.size:
        raise ValueError("every sample needs a writer (train_writers/test_writers)")
    n_writers = int(max(train_w.max(), test_w.max())) + 1
    both = np.flatnonzero(
        (np.bincount(train_w, minlength=n_writers) > 0)
        & (np.bincount(test_w, minlength=n_writers) > 0)
    )
    if n_clients is not None:
        n_clients = check_int("n_clients", n_clients, maximum=both.size)
        both = np.sort(rng.choice(both, size=n_clients, replace=False))
    train_by, test_by = _by_writer(train_w), _by_writer(test_w)
    partition = Partition(
        tuple(train_by[int(w)] for w in both), tuple(test_by[int(w)] for w in both),
        np.zeros(both.size, dtype=np.intp), 1,
    )  # fmt: skip
    return _with_majority_groups(partition, train, test)


def majority_groups(partition: Partition, train_labels: ArrayLike, n_classes: int) -> IntArray:
    """Each client's majority training label (ties to the lowest class), shape (n_clients,)."""
    counts = class_counts(partition.train_indices, train_labels, n_classes)
    return np.asarray(np.argmax(counts, axis=1), dtype=np.intp)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _from_counts(
    train: IntArray,
    test: IntArray,
    train_counts: IntArray,
    rng: np.random.Generator,
    groups: IntArray | None,
) -> Partition:
    """Draw a partition from training class counts; test sets split like the training sets."""
    n_classes = train_counts.shape[1]
    test_counts = _split_classes(np.bincount(test, minlength=n_classes), train_counts, "test")
    return Partition(
        train_indices=_draw(train, train_counts, rng),
        test_indices=_draw(test, test_counts, rng),
        groups=np.argmax(train_counts, axis=1) if groups is None else groups,
        n_groups=n_classes if groups is None else max(int(np.max(groups)) + 1, 1),
    )


def _with_majority_groups(partition: Partition, train: IntArray, test: IntArray) -> Partition:
    n_classes = _n_classes(train, test)
    return Partition(
        partition.train_indices, partition.test_indices,
        majority_groups(partition, train, n_classes), n_classes,
    )  # fmt: skip


def _by_writer(writers: IntArray) -> dict[int, IntArray]:
    order = np.argsort(writers, kind="stable")
    keys, starts = np.unique(writers[order], return_index=True)
    parts = np.split(order, starts[1:])
    return {int(k): np.sort(p) for k, p in zip(keys, parts, strict=True)}
