"""Fixtures of the experiment tests."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.data import FashionMNIST


@pytest.fixture(scope="session")
def synthetic() -> FashionMNIST:
    """Small labelled data with a class signal (class c lights up pixels 78c … 78c+77)."""
    rng = np.random.default_rng(0)

    def split(n_per_class: int) -> tuple[np.ndarray, np.ndarray]:
        labels = np.repeat(np.arange(10, dtype=np.uint8), n_per_class)
        images = rng.integers(0, 60, size=(labels.size, 784), dtype=np.uint8)
        for c in range(10):
            images[labels == c, 78 * c : 78 * c + 78] += 150
        return images, labels

    train_x, train_y = split(100)
    test_x, test_y = split(30)
    return FashionMNIST(train_x, train_y, test_x, test_y, source="synthetic", is_subset=False)
