"""The model, the data and the training loop: plain PyTorch, nothing of adcs."""

from __future__ import annotations

import functools
import gzip
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


class Net(nn.Module):
    """LeNet-style CNN for 1 × 28 × 28 images, 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = x.flatten(1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


@functools.lru_cache(maxsize=4)
def _idx(path: Path) -> np.ndarray:
    """An IDX file's array (the format of the official Fashion-MNIST files)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_data(
    partition_id: int,
    num_partitions: int,
    data_dir: str,
    batch_size: int,
    examples_per_client: int = 0,
) -> tuple[DataLoader, DataLoader]:
    """This partition's train and test loaders: an IID split (seeded) of Fashion-MNIST."""
    folder = Path(data_dir or os.environ.get("FASHION_MNIST_DIR", ""))
    if not (folder / FILES["train"][0]).is_file():
        raise FileNotFoundError(f"no Fashion-MNIST files in {str(folder)!r}: set data-dir")
    loaders = []
    for split, (images, labels) in FILES.items():
        x, y = _idx(folder / images), _idx(folder / labels)
        order = np.random.default_rng(42).permutation(len(y))
        part = np.array_split(order, num_partitions)[partition_id]
        if examples_per_client and split == "train":
            part = part[:examples_per_client]
        tensors = TensorDataset(
            torch.from_numpy(x[part].astype(np.float32) / 255.0).unsqueeze(1),
            torch.from_numpy(y[part].astype(np.int64)),
        )
        shuffle = split == "train"
        generator = torch.Generator().manual_seed(partition_id)
        loaders.append(DataLoader(tensors, batch_size, shuffle=shuffle, generator=generator))
    return loaders[0], loaders[1]


def train(net: Net, loader: DataLoader, epochs: int, lr: float) -> float:
    """Local SGD; the mean training loss."""
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    net.train()
    total, batches = 0.0, 0
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(net(x), y)
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
    return total / max(batches, 1)


def test(net: Net, loader: DataLoader) -> tuple[float, float]:
    """Mean loss and accuracy on ``loader``."""
    criterion = nn.CrossEntropyLoss(reduction="sum")
    net.eval()
    loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = net(x)
            loss += criterion(out, y).item()
            correct += int((out.argmax(1) == y).sum())
            n += len(y)
    return loss / n, correct / n
