"""Small synthetic federated data sets for the simulator tests (fast, learnable, non-IID)."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.sim import FederatedData

N_FEATURES = 12
N_CLASSES = 4


def make_data(
    seed: int = 0,
    n_clients: int = 8,
    clients_per_group: int = 2,
    train_per_client: int = 40,
    test_per_client: int = 15,
    uint8: bool = True,
) -> FederatedData:
    """Clients in groups; group g draws mostly class g % N_CLASSES; classes are separable blobs."""
    rng = np.random.default_rng(seed)
    n_groups = n_clients // clients_per_group
    centres = rng.uniform(0.1, 0.9, size=(N_CLASSES, N_FEATURES))

    def split(per_client: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        images, labels, owners = [], [], []
        for client in range(n_clients):
            main = (client // clients_per_group) % N_CLASSES
            y = np.where(rng.random(per_client) < 0.7, main, rng.integers(0, N_CLASSES, per_client))
            x = np.clip(centres[y] + rng.normal(0, 0.15, (per_client, N_FEATURES)), 0, 1)
            images.append(x)
            labels.append(y)
            owners.append(np.full(per_client, client))
        x_all = np.concatenate(images)
        order = rng.permutation(x_all.shape[0])  # clients' rows interleaved in the arrays
        owner = np.concatenate(owners)[order]
        indices = tuple(np.flatnonzero(owner == c) for c in range(n_clients))
        return x_all[order], np.concatenate(labels)[order], indices

    train_x, train_y, train_idx = split(train_per_client)
    test_x, test_y, test_idx = split(test_per_client)
    if uint8:
        train_x = np.round(train_x * 255).astype(np.uint8)
        test_x = np.round(test_x * 255).astype(np.uint8)
    return FederatedData(
        train_images=train_x,
        train_labels=train_y,
        test_images=test_x,
        test_labels=test_y,
        train_indices=train_idx,
        test_indices=test_idx,
        groups=np.arange(n_clients) // clients_per_group,
        n_groups=n_groups,
        n_classes=N_CLASSES,
    )


def as_images(data: FederatedData) -> FederatedData:
    """``data`` with its N_FEATURES = 12 features padded to 16, a 4 × 4 image per sample."""
    return FederatedData(
        train_images=np.pad(data.train_images, ((0, 0), (0, 4))),
        train_labels=data.train_labels,
        test_images=np.pad(data.test_images, ((0, 0), (0, 4))),
        test_labels=data.test_labels,
        train_indices=data.train_indices,
        test_indices=data.test_indices,
        groups=data.groups,
        n_groups=data.n_groups,
        n_classes=data.n_classes,
    )


@pytest.fixture(scope="session")
def data() -> FederatedData:
    return make_data()
