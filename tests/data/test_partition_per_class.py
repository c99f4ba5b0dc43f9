"""The per-class Dirichlet partition (PowerOfChoice's split): every sample used, sizes that differ,
the balance cap, the minimum size, and its row of the partition table."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.data.counts import _per_class_dirichlet_counts
from adcs.data.partition import class_counts, dirichlet_per_class
from adcs.data.partition_table import partition_data

from .test_partition import FULL_TEST, FULL_TRAIN, assert_disjoint_and_in_range, same_partition


class _Splits:
    train_labels = FULL_TRAIN
    test_labels = FULL_TEST


@pytest.mark.parametrize("alpha", [0.3, 2.0])
def test_every_sample_is_used_and_sizes_differ(alpha: float) -> None:
    partition = dirichlet_per_class(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 100, alpha)
    train = class_counts(partition.train_indices, FULL_TRAIN, 10)

    assert_disjoint_and_in_range(partition, len(FULL_TRAIN), len(FULL_TEST))
    assert partition.train_sizes.sum() == 60_000 and partition.test_sizes.sum() == 10_000
    assert partition.train_sizes.min() >= 10
    np.testing.assert_array_equal(partition.groups, np.argmax(train, axis=1))
    # the test set follows the training proportions (within rounding)
    test = class_counts(partition.test_indices, FULL_TEST, 10)
    expected = train / train.sum(axis=0) * 1000
    assert np.all(np.abs(test - expected) <= 2.0 + 1e-9)
    spread = partition.train_sizes.std() / partition.train_sizes.mean()
    assert spread > (0.3 if alpha < 1 else 0.05)


def test_small_alpha_gives_each_class_to_few_clients() -> None:
    def holders(alpha: float) -> float:
        partition = dirichlet_per_class(FULL_TRAIN, FULL_TEST, np.random.default_rng(1), 100, alpha)
        counts = class_counts(partition.train_indices, FULL_TRAIN, 10)
        return float((counts >= 60).sum(axis=0).mean())  # clients holding ≥ 1 % of a class

    assert holders(0.3) < 30 < holders(2.0)


def test_balance_gives_a_full_client_no_more_classes() -> None:
    totals = np.full(10, 6000)
    counts = _per_class_dirichlet_counts(totals, 100, 0.3, np.random.default_rng(2), True, 10)
    cap = 600
    before = np.cumsum(counts, axis=1) - counts  # held before class c was split
    assert np.all(counts[before >= cap] == 0)
    assert counts.sum() == 60_000 and np.array_equal(counts.sum(axis=0), totals)
    free = _per_class_dirichlet_counts(totals, 100, 0.3, np.random.default_rng(2), False, 1)
    assert free.sum(axis=1).max() > counts.sum(axis=1).max()


def test_reproducible_validated_and_in_the_table() -> None:
    def make(seed: int) -> object:
        return partition_data(
            "dirichlet_per_class", _Splits(), np.random.default_rng(seed), n_clients=20, alpha=0.5
        )

    assert same_partition(make(3), make(3))  # type: ignore[arg-type]
    assert not same_partition(make(3), make(4))  # type: ignore[arg-type]
    for kwargs, name in (
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0, "min_size": 0}, "min_size"),
        ({"alpha": 1.0, "balance": "yes"}, "balance"),
        ({"alpha": 1e-6, "min_size": 600}, "min_size"),
    ):
        with pytest.raises(ValueError, match=name):
            dirichlet_per_class(FULL_TRAIN, FULL_TEST, np.random.default_rng(0), 100, **kwargs)
