"""Fixtures for the data tests: no network, no real user folders, tiny IDX data sets."""

from __future__ import annotations

import gzip
import hashlib
import io
import struct
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from adcs.data import fashion_mnist as fm
from tests.paths import full_data_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_DATA_DIR = full_data_dir()  # $ADCS_DATA_DIR, else the shared copy


def _no_network(url: str) -> object:
    raise urllib.error.URLError(f"network disabled in tests (asked for {url})")


@pytest.fixture(autouse=True)
def isolated_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point every lookup location at empty temporary folders and cut the network."""
    monkeypatch.delenv(fm.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", tmp_path / "debian" / "fashion-mnist")
    monkeypatch.setattr(fm, "_default_opener", _no_network)
    yield


def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    """IDX serialisation of a uint8 array (header: magic, then each dimension, big-endian)."""
    return struct.pack(f">I{array.ndim}I", magic, *array.shape) + array.tobytes()


@dataclass(frozen=True)
class TinyData:
    """A tiny Fashion-MNIST look-alike: arrays, and the gzip bytes of each official file name."""

    train_images: np.ndarray  # (n_train, 28, 28) uint8
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    files: dict[str, bytes]

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name, blob in self.files.items():
            (directory / name).write_bytes(blob)
        return directory


@pytest.fixture
def tiny_data(monkeypatch: pytest.MonkeyPatch) -> TinyData:
    """Tiny data (30 train, 20 test images) whose MD5s replace the official ones."""
    rng = np.random.default_rng(1234)
    train_labels = np.tile(np.arange(10, dtype=np.uint8), 3)
    test_labels = np.tile(np.arange(10, dtype=np.uint8), 2)
    train_images = rng.integers(0, 256, size=(30, 28, 28), dtype=np.uint8)
    test_images = rng.integers(0, 256, size=(20, 28, 28), dtype=np.uint8)
    raw = {
        fm.TRAIN_IMAGES: idx_bytes(train_images, 2051),
        fm.TRAIN_LABELS: idx_bytes(train_labels, 2049),
        fm.TEST_IMAGES: idx_bytes(test_images, 2051),
        fm.TEST_LABELS: idx_bytes(test_labels, 2049),
    }
    files = {name: gzip.compress(content, mtime=1504176606) for name, content in raw.items()}
    md5 = {name: hashlib.md5(blob).hexdigest() for name, blob in files.items()}
    md5_raw = {name: hashlib.md5(content).hexdigest() for name, content in raw.items()}
    monkeypatch.setattr(fm, "OFFICIAL_MD5", md5)
    monkeypatch.setattr(fm, "OFFICIAL_MD5_UNCOMPRESSED", md5_raw)
    return TinyData(train_images, train_labels, test_images, test_labels, files)


class FakeOpener:
    """Serves bytes by URL from a table, records the URLs asked for."""

    def __init__(self, table: dict[str, bytes]) -> None:
        self.table = table
        self.urls: list[str] = []

    def __call__(self, url: str) -> io.BytesIO:
        self.urls.append(url)
        if url not in self.table:
            raise urllib.error.URLError(f"no such URL in the fake: {url}")
        return io.BytesIO(self.table[url])


@pytest.fixture
def fake_opener(tiny_data: TinyData) -> Callable[..., FakeOpener]:
    """Factory: a fake opener serving the tiny files at their official URLs (overrides allowed)."""

    def make(overrides: dict[str, bytes] | None = None) -> FakeOpener:
        table = {fm.BASE_URL + name: blob for name, blob in tiny_data.files.items()}
        table.update({fm.BASE_URL + name: blob for name, blob in (overrides or {}).items()})
        return FakeOpener(table)

    return make


@pytest.fixture(scope="session")
def real_data() -> fm.FashionMNIST:
    """The full official data from the shared folder, loaded once (skips when absent)."""
    if not all((REAL_DATA_DIR / name).is_file() for name in fm.FILES):
        pytest.skip(f"official Fashion-MNIST files not found in {REAL_DATA_DIR} ($ADCS_DATA_DIR)")
    return fm.load_fashion_mnist(REAL_DATA_DIR, download=False, allow_subset=False)
