"""Tests of the client partitions (DESIGN §3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcs.data import load_subset
from adcs.data.partition import Partition, class_counts, dirichlet, iid, paper_groups

# Labels shaped like full Fashion-MNIST: 6000 per class in train, 1000 in test, shuffled.
_shuffle = np.random.default_rng(99)
FULL_TRAIN = _shuffle.permutation(np.repeat(np.arange(10, dtype=np.uint8), 6000))
FULL_TEST = _shuffle.permutation(np.repeat(np.arange(10, dtype=np.uint8), 1000))


def assert_disjoint_and_in_range(partition: Partition, n_train: int, n_test: int) -> None:
    for indices, n in ((partition.train_indices, n_train), (partition.test_indices, n_test)):
        pooled = np.concatenate(indices)
        assert len(np.unique(pooled)) == len(pooled), "clients share samples"
        assert pooled.min() >= 0 and pooled.max() < n


def same_partition(a: Partition, b: Partition) -> bool:
    return (
        all(np.array_equal(x, y) for x, y in zip(a.train_indices, b.train_indices, strict=True))
        and all(np.array_equal(x, y) for x, y in zip(a.test_indices, b.test_indices, strict=True))
        and np.array_equal(a.groups, b.groups)
        and a.n_groups == b.n_groups
    )


# --------------------------------------------------------------------------------------------
# paper_groups
# --------------------------------------------------------------------------------------------


def test_paper_preset_is_pure_label_skew_with_the_default_sizes() -> None:
    partition = paper_groups(FULL_TRAIN, FULL_TEST, np.random.default_rng(0))

    assert partition.n_clients == 30 and partition.n_groups == 10
    np.testing.assert_array_equal(partition.groups, np.repeat(np.arange(10), 3))
    assert partition.train_sizes.tolist() == [2000] * 30
    assert partition.test_sizes.tolist() == [333] * 30
    for i in range(30):
        assert set(FULL_TRAIN[partition.train_indices[i]].tolist()) == {i // 3}
        assert set(FULL_TEST[partition.test_indices[i]].tolist()) == {i // 3}
    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))


@pytest.mark.parametrize("dominance", [1.0, 0.8, 0.5, 0.3, 0.0])
def test_group_shares_follow_dominance(dominance: float) -> None:
    partition = paper_groups(FULL_TRAIN, FULL_TEST, np.random.default_rng(1), dominance=dominance)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    for indices, labels in (
        (partition.train_indices, FULL_TRAIN),
        (partition.test_indices, FULL_TEST),
    ):
        counts = class_counts(indices, labels, 10)
        size = counts.sum(axis=1)
        assert np.all(size == size[0])
        own = counts[np.arange(30), partition.groups]
        others = counts.copy()
        others[np.arange(30), partition.groups] = -1
        # Largest-remainder rounding: every count lies within one sample of its share.
        assert np.all(np.abs(own - dominance * size) < 1)
        other_share = (1 - dominance) / 9 * size[:, None]
        assert np.all(np.abs(others[others >= 0].reshape(30, 9) - other_share) < 1)


def test_half_dominance_counts_worked_by_hand() -> None:
    # 2000 · 0.5 = 1000 of the own class; 1000 / 9 = 111.1 of the others: nine 111s and one
    # sample left, which goes to the next class (k + 1). Each class then totals exactly 6000.
    partition = paper_groups(FULL_TRAIN, FULL_TEST, np.random.default_rng(2), dominance=0.5)
    counts = class_counts(partition.train_indices, FULL_TRAIN, 10)

    assert counts[0].tolist() == [1000, 112, 111, 111, 111, 111, 111, 111, 111, 111]
    assert counts[27].tolist() == [112, 111, 111, 111, 111, 111, 111, 111, 111, 1000]  # wraps
    assert counts.sum(axis=0).tolist() == [6000] * 10


def test_paper_groups_on_the_shipped_subset() -> None:
    subset = load_subset()

    partition = paper_groups(subset.train_labels, subset.test_labels, np.random.default_rng(0))

    assert partition.train_sizes.tolist() == [550 // 3] * 30
    assert partition.test_sizes.tolist() == [110 // 3] * 30
    assert_disjoint_and_in_range(partition, subset.n_train, subset.n_test)


def test_same_seed_same_partition_other_seed_other_partition() -> None:
    def make(seed: int) -> Partition:
        return paper_groups(FULL_TRAIN, FULL_TEST, np.random.default_rng(seed), dominance=0.7)

    assert same_partition(make(5), make(5))
    assert not same_partition(make(5), make(6))


def test_samples_of_a_class_are_drawn_uniformly() -> None:
    # 30 samples per class, one client per group taking 10 of its class: each sample should be
    # taken with probability 1/3. A draw that favoured low indices would show at once.
    labels = np.repeat(np.arange(10), 30)
    taken = np.zeros(len(labels))
    n_draws = 300
    for seed in range(n_draws):
        partition = paper_groups(
            labels, labels, np.random.default_rng(seed), clients_per_group=1, train_per_client=10
        )
        taken[np.concatenate(partition.train_indices)] += 1

    expected = n_draws / 3
    sd = np.sqrt(n_draws * (1 / 3) * (2 / 3))
    assert np.all(np.abs(taken - expected) < 5 * sd)
    assert abs(taken.mean() - expected) < 1e-9


def test_explicit_sizes_and_too_much_data() -> None:
    rng = np.random.default_rng(0)
    partition = paper_groups(FULL_TRAIN, FULL_TEST, rng, train_per_client=100, test_per_client=7)
    assert partition.train_sizes.tolist() == [100] * 30
    assert partition.test_sizes.tolist() == [7] * 30

    with pytest.raises(ValueError, match=r"train_per_client=2001 .* at most 2000"):
        paper_groups(FULL_TRAIN, FULL_TEST, rng, train_per_client=2001)
    with pytest.raises(ValueError, match=r"test_per_client=334 .* at most 333"):
        paper_groups(FULL_TRAIN, FULL_TEST, rng, test_per_client=334)


@settings(max_examples=60, deadline=None)
@given(
    available=st.lists(st.integers(0, 60), min_size=3, max_size=6),
    n_groups=st.integers(1, 3),
    clients_per_group=st.integers(1, 4),
    dominance=st.floats(0.0, 1.0),
)
def test_default_size_is_the_largest_that_fits(
    available: list[int], n_groups: int, clients_per_group: int, dominance: float
) -> None:
    labels = np.repeat(np.arange(len(available)), available)
    labels = np.concatenate([labels, np.arange(len(available))])  # every class present
    rng = np.random.default_rng(0)
    try:
        partition = paper_groups(labels, labels, rng, n_groups, clients_per_group, dominance)
    except ValueError as exc:  # not even one sample per client fits
        assert "even one sample" in str(exc)
        return
    size = int(partition.train_sizes[0])
    assert_disjoint_and_in_range(partition, len(labels), len(labels))
    with pytest.raises(ValueError, match="train_per_client"):
        paper_groups(labels, labels, rng, n_groups, clients_per_group, dominance, size + 1)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"dominance": -0.1}, "dominance"),
        ({"dominance": 1.5}, "dominance"),
        ({"dominance": float("nan")}, "dominance"),
        ({"n_groups": 0}, "n_groups"),
        ({"n_groups": 11}, "n_groups"),
        ({"n_groups": 2.5}, "n_groups"),
        ({"clients_per_group": 0}, "clients_per_group"),
        ({"train_per_client": 0}, "train_per_client"),
        ({"test_per_client": -3}, "test_per_client"),
    ],
)
def test_paper_groups_rejects_bad_arguments(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        paper_groups(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), **kwargs)


def test_bad_labels_and_rng_are_rejected() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="train_labels"):
        paper_groups(FULL_TRAIN.reshape(-1, 10), FULL_TEST, rng)
    with pytest.raises(ValueError, match="test_labels"):
        iid(FULL_TRAIN, FULL_TEST.astype(float), rng, 3)
    with pytest.raises(ValueError, match="train_labels"):
        dirichlet(np.array([], dtype=int), FULL_TEST, rng, 3, 1.0)
    with pytest.raises(TypeError, match="rng"):
        paper_groups(FULL_TRAIN, FULL_TEST, 0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# dirichlet
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.1, 1.0, 100.0])
def test_dirichlet_invariants(alpha: float) -> None:
    partition = dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(3), 20, alpha)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)
    test = class_counts(partition.test_indices, FULL_TEST, 10)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.n_clients == 20 and partition.n_groups == 10
    assert len(set(partition.train_sizes.tolist())) == 1
    assert len(set(partition.test_sizes.tolist())) == 1
    np.testing.assert_array_equal(partition.groups, np.argmax(train, axis=1))
    # Test sets follow the train sets' class proportions (up to one sample of rounding).
    n_train, n_test = train.sum(axis=1, keepdims=True), test.sum(axis=1, keepdims=True)
    assert np.all(np.abs(test - train / n_train * n_test) < 1)
    # Default size: one more sample per client does not fit.
    with pytest.raises(ValueError, match="train_per_client"):
        dirichlet(
            FULL_TRAIN, FULL_TEST, np.random.default_rng(3), 20, alpha, int(n_train[0, 0]) + 1
        )


def test_dirichlet_alpha_controls_the_skew() -> None:
    def mean_top_share(alpha: float) -> float:
        partition = dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(4), 30, alpha)
        counts = class_counts(partition.train_indices, FULL_TRAIN, 10)
        return float(np.mean(counts.max(axis=1) / counts.sum(axis=1)))

    assert mean_top_share(0.05) > 0.7
    assert mean_top_share(1000.0) < 0.15


def test_dirichlet_reproducible_and_validated() -> None:
    def make(seed: int) -> Partition:
        return dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(seed), 10, 0.5)

    assert same_partition(make(7), make(7))
    assert not same_partition(make(7), make(8))
    for alpha in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 10, alpha)
    with pytest.raises(ValueError, match="n_clients"):
        dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 0, 1.0)


# --------------------------------------------------------------------------------------------
# iid
# --------------------------------------------------------------------------------------------


def test_iid_invariants() -> None:
    partition = iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 7)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.train_sizes.tolist() == [60000 // 7] * 7
    assert partition.test_sizes.tolist() == [10000 // 7] * 7
    assert partition.n_groups == 1 and partition.groups.tolist() == [0] * 7
    shares = class_counts(partition.train_indices, FULL_TRAIN, 10) / (60000 // 7)
    assert np.all(np.abs(shares - 0.1) < 0.02)  # 6 sd of a binomial share at n = 8571


def test_iid_reproducible_and_validated() -> None:
    def make(seed: int) -> Partition:
        return iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(seed), 4, 50, 5)

    assert same_partition(make(1), make(1))
    assert not same_partition(make(1), make(2))
    assert make(1).train_sizes.tolist() == [50] * 4
    with pytest.raises(ValueError, match="n_clients"):
        iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match="train_per_client"):
        iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 4, 15001)
    with pytest.raises(ValueError, match="test_per_client"):
        iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 4, None, 2501)


# --------------------------------------------------------------------------------------------
# Partition
# --------------------------------------------------------------------------------------------


def test_partition_is_validated_and_read_only() -> None:
    train = (np.array([0, 1]), np.array([2]))
    test = (np.array([0]), np.array([1, 2]))
    partition = Partition(train, test, np.array([0, 1]), 2)

    assert partition.n_clients == 2
    assert partition.train_sizes.tolist() == [2, 1]
    assert partition.test_sizes.tolist() == [1, 2]
    with pytest.raises(ValueError, match="read-only"):
        partition.train_indices[0][0] = 5
    with pytest.raises(ValueError, match="read-only"):
        partition.groups[0] = 1

    with pytest.raises(ValueError, match="test_indices"):
        Partition(train, test[:1], np.array([0, 1]), 2)
    with pytest.raises(ValueError, match="groups"):
        Partition(train, test, np.array([0, 2]), 2)
    with pytest.raises(ValueError, match="groups"):
        Partition(train, test, np.array([0]), 2)
    with pytest.raises(ValueError, match="n_groups"):
        Partition(train, test, np.array([0, 0]), 0)
    with pytest.raises(ValueError, match=r"train_indices\[1\]"):
        Partition((np.array([0]), np.array([-1])), test, np.array([0, 0]), 1)
    with pytest.raises(ValueError, match=r"test_indices\[0\]"):
        Partition(train, (np.array([0.5]), np.array([1])), np.array([0, 0]), 1)
    with pytest.raises(ValueError, match="at least one client"):
        Partition((), (), np.array([], dtype=int), 1)
