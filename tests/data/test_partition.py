"""Tests of the client partitions (docs/design.md §3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcs.data import load_subset
from adcs.data.partition import (
    Partition,
    class_counts,
    classes_per_client,
    dirichlet,
    iid,
    natural,
    paper_groups,
    shards,
)
from adcs.data.partition_table import PARTITIONS, partition_data

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


def test_more_groups_than_classes_cycle_through_the_classes() -> None:
    partition = paper_groups(FULL_TRAIN, FULL_TEST, np.random.default_rng(2), n_groups=25)

    assert partition.n_groups == 25 and partition.n_clients == 75
    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    for i in range(75):
        assert set(FULL_TRAIN[partition.train_indices[i]].tolist()) == {(i // 3) % 10}
    # groups 0, 10 and 20 share class 0: 9 clients split its 6000 samples, 666 each
    assert partition.train_sizes.tolist() == [666] * 75


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"dominance": -0.1}, "dominance"),
        ({"dominance": 1.5}, "dominance"),
        ({"dominance": float("nan")}, "dominance"),
        ({"n_groups": 0}, "n_groups"),
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


def assert_test_follows_train(partition: Partition) -> None:
    """Class c's test samples are split among the clients like its training samples (within
    one sample of rounding, and one of the top-up that gives an empty client a sample)."""
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)
    test = class_counts(partition.test_indices, FULL_TEST, 10)
    expected = train / train.sum(axis=0) * np.bincount(FULL_TEST, minlength=10)
    assert np.all(np.abs(test - expected) <= 2.0 + 1e-9)


@pytest.mark.parametrize("alpha", [0.1, 1.0, 100.0])
def test_dirichlet_uses_all_data_with_unequal_sizes(alpha: float) -> None:
    partition = dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(3), 20, alpha)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.n_clients == 20 and partition.n_groups == 10
    assert partition.train_sizes.sum() == 60_000 and partition.test_sizes.sum() == 10_000
    assert partition.train_sizes.min() >= 1 and partition.test_sizes.min() >= 1
    np.testing.assert_array_equal(partition.groups, np.argmax(train, axis=1))
    assert_test_follows_train(partition)
    if alpha < 1:
        assert len(set(partition.train_sizes.tolist())) > 1


@pytest.mark.parametrize("alpha", [0.1, 1.0, 100.0])
def test_dirichlet_with_a_size_gives_equal_clients(alpha: float) -> None:
    partition = dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(3), 20, alpha, 200)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)
    test = class_counts(partition.test_indices, FULL_TEST, 10)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.train_sizes.tolist() == [200] * 20
    assert len(set(partition.test_sizes.tolist())) == 1
    n_train, n_test = train.sum(axis=1, keepdims=True), test.sum(axis=1, keepdims=True)
    assert np.all(np.abs(test - train / n_train * n_test) < 1)
    with pytest.raises(ValueError, match="train_per_client"):
        dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(3), 20, alpha, 100_000)


def test_quantity_skew_spreads_the_sizes_log_normally() -> None:
    rng = np.random.default_rng(5)
    flat = dirichlet(FULL_TRAIN, FULL_TEST, rng, 200, 1000.0)
    skewed = dirichlet(FULL_TRAIN, FULL_TEST, np.random.default_rng(5), 200, 1000.0, size_sigma=1.0)
    assert skewed.train_sizes.sum() == 60_000
    # with α large the label shares are flat, so log sizes spread as the weights: sd ≈ σ
    assert np.std(np.log(flat.train_sizes)) < 0.1
    assert 0.8 < np.std(np.log(skewed.train_sizes)) < 1.2
    assert_test_follows_train(skewed)
    iid_skewed = iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(6), 200, size_sigma=1.0)
    assert iid_skewed.train_sizes.sum() == 60_000 and iid_skewed.test_sizes.sum() == 10_000
    assert 0.8 < np.std(np.log(iid_skewed.train_sizes)) < 1.2
    assert_disjoint_and_in_range(iid_skewed, len(FULL_TRAIN), len(FULL_TEST))
    with pytest.raises(ValueError, match="size_sigma"):
        iid(FULL_TRAIN, FULL_TEST, rng, 20, 10, size_sigma=1.0)
    with pytest.raises(ValueError, match="size_sigma"):
        dirichlet(FULL_TRAIN, FULL_TEST, rng, 20, 1.0, size_sigma=-1.0)


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


def test_dirichlet_shares_on_absent_classes_name_them() -> None:
    # labels 3 and 7 only: tiny alpha puts every client's share on one of 8 classes, mostly absent
    train = np.tile(np.array([3, 7]), 200)
    with pytest.raises(ValueError) as info:
        dirichlet(train, train[:100], np.random.default_rng(0), 10, 1e-6)
    assert str(info.value) == (  # was: "the train split (0 samples) cannot give each of 10 ..."
        "the train split holds 400 samples, but the clients' class shares put only 0 to use, "
        "fewer than one per client; classes [0, 1, 2, 4, 5, 6] have no train samples (number "
        "the classes present 0, 1, …)"
    )


# --------------------------------------------------------------------------------------------
# iid
# --------------------------------------------------------------------------------------------


def test_iid_invariants() -> None:
    partition = iid(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 7)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.train_sizes.tolist() == [60000 // 7] * 7
    assert partition.test_sizes.tolist() == [10000 // 7] * 7
    counts = class_counts(partition.train_indices, FULL_TRAIN, 10)
    assert partition.n_groups == 10 and partition.groups.tolist() == counts.argmax(1).tolist()
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
# shards, classes_per_client, natural
# --------------------------------------------------------------------------------------------


def test_shards_give_each_client_k_label_sorted_pieces() -> None:
    partition = shards(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 100, 2)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.train_sizes.tolist() == [600] * 100  # 200 shards of 300 samples
    # a shard of 300 never straddles classes of 6000 (6000 / 300 is whole): ≤ 2 classes each
    assert (np.count_nonzero(train, axis=1) <= 2).all()
    assert (np.count_nonzero(train, axis=1) == 1).any()  # two shards of one class happen
    np.testing.assert_array_equal(partition.groups, train.argmax(axis=1))
    assert_test_follows_train(partition)
    with pytest.raises(ValueError, match="shards"):
        shards(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 60_000, 2)


def test_ordered_shards_are_fraboni_et_als_one_label_clients() -> None:
    """k = 1, ordered: client i holds 600 samples of label i // 10 alone (Fraboni et al.'s MNIST
    shard split on Fashion-MNIST's class sizes), and its test samples are of that label too."""
    partition = shards(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 100, 1, ordered=True)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)
    test = class_counts(partition.test_indices, FULL_TEST, 10)
    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    expected = np.zeros((100, 10), dtype=train.dtype)
    expected[np.arange(100), np.arange(100) // 10] = 600
    np.testing.assert_array_equal(train, expected)
    np.testing.assert_array_equal(test, expected // 6)  # 1000 test samples a class, by 10
    np.testing.assert_array_equal(partition.groups, np.arange(100) // 10)
    # random assignment (the default) does not keep that order
    shuffled = shards(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 100, 1)
    assert not np.array_equal(shuffled.groups, partition.groups)
    # the configuration's key, checked
    got = partition_data("shards", _FullSplits(), np.random.default_rng(0), n_clients=100,
                         shards_per_client=1, ordered=True)  # fmt: skip
    assert same_partition(got, partition)
    with pytest.raises(ValueError, match="ordered"):
        shards(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 100, 1, ordered=1)  # type: ignore[arg-type]


class _FullSplits:
    train_labels = FULL_TRAIN
    test_labels = FULL_TEST


@pytest.mark.parametrize("k", [1, 3, 10])
def test_classes_per_client_holds_k_classes_split_evenly(k: int) -> None:
    partition = classes_per_client(FULL_TRAIN, FULL_TEST, np.random.default_rng(1), 40, k)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert (np.count_nonzero(train, axis=1) == k).all()
    # each class is held by 40·k/10 clients, who split its 6000 samples evenly
    holders = 40 * k // 10
    assert set(train[train > 0].tolist()) == {6000 // holders}
    assert partition.train_sizes.sum() == 60_000
    assert_test_follows_train(partition)
    if k < 10:
        np.testing.assert_array_equal(partition.groups, np.arange(40) % 10)
        for g in range(10):  # a group's clients hold the same classes
            members = np.flatnonzero(partition.groups == g)
            assert len({tuple(np.flatnonzero(train[i])) for i in members}) == 1
    else:
        assert partition.n_groups == 1
    with pytest.raises(ValueError, match="classes"):
        classes_per_client(FULL_TRAIN, FULL_TEST, np.random.default_rng(1), 40, 11)


def test_natural_partition_is_one_client_per_writer() -> None:
    rng = np.random.default_rng(2)
    train_w = rng.integers(0, 50, size=FULL_TRAIN.size)
    test_w = rng.integers(0, 50, size=FULL_TEST.size)
    test_w[test_w == 7] = 8  # writer 7 has no test data: left out

    partition = natural(train_w, test_w, rng, FULL_TRAIN, FULL_TEST)
    assert partition.n_clients == 49
    kept = [w for w in range(50) if w != 7]
    for client, w in enumerate(kept):
        np.testing.assert_array_equal(partition.train_indices[client], np.flatnonzero(train_w == w))
        np.testing.assert_array_equal(partition.test_indices[client], np.flatnonzero(test_w == w))
    counts = class_counts(partition.train_indices, FULL_TRAIN, 10)
    np.testing.assert_array_equal(partition.groups, counts.argmax(axis=1))

    some = natural(train_w, test_w, np.random.default_rng(0), FULL_TRAIN, FULL_TEST, 10)
    assert some.n_clients == 10
    with pytest.raises(ValueError, match="n_clients"):
        natural(train_w, test_w, rng, FULL_TRAIN, FULL_TEST, 50)


def test_the_partition_table_checks_its_parameters() -> None:
    class Splits:
        train_labels = FULL_TRAIN
        test_labels = FULL_TEST

    rng = np.random.default_rng(0)
    got = partition_data("shards", Splits(), rng, n_clients=10, shards_per_client=3)
    assert got.n_clients == 10
    assert PARTITIONS["paper_groups"].n_clients({"n_groups": 4}) == 12
    assert PARTITIONS["natural"].n_clients({}) is None
    with pytest.raises(ValueError, match="partition must be one of"):
        partition_data("nope", Splits(), rng)
    with pytest.raises(ValueError, match="takes no parameter"):
        partition_data("iid", Splits(), rng, n_clients=3, alpha=1.0)
    with pytest.raises(ValueError, match="needs the parameter"):
        partition_data("dirichlet", Splits(), rng, n_clients=3)
    with pytest.raises(ValueError, match="own clients"):
        partition_data("natural", Splits(), rng)


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


def test_a_user_split_that_returns_no_partition_is_refused_naming_what_it_returned() -> None:
    from tests.plugins.my_rows import load_blobs

    with pytest.raises(ValueError, match="the split returned str, not a Partition"):
        partition_data(
            "tests.plugins.my_rows:NO_PARTITION",
            load_blobs(),
            np.random.default_rng(0),
            n_clients=2,
        )
