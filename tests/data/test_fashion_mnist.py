"""Tests of Fashion-MNIST lookup, download, verification and IDX parsing (docs/design.md §5)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from adcs.data import fashion_mnist as fm

from .conftest import REPO_ROOT, idx_bytes

if TYPE_CHECKING:
    from .conftest import FakeOpener, TinyData

MakeOpener = Callable[..., "FakeOpener"]


def _only_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


# --------------------------------------------------------------------------------------------
# IDX parsing
# --------------------------------------------------------------------------------------------


def test_read_idx_round_trips_gzip_and_plain(tmp_path: Path) -> None:
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "a.gz").write_bytes(gzip.compress(idx_bytes(images, 0x0803)))
    (tmp_path / "a").write_bytes(idx_bytes(images, 0x0803))

    for name in ("a.gz", "a"):
        out = fm.read_idx(tmp_path / name)
        assert out.dtype == np.uint8
        np.testing.assert_array_equal(out, images)


def test_read_idx_converts_big_endian_int32(tmp_path: Path) -> None:
    # Type code 0x0C is a big-endian int32: 258 is stored as 00 00 01 02.
    raw = bytes([0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFF])
    (tmp_path / "x.idx").write_bytes(raw)

    out = fm.read_idx(tmp_path / "x.idx")

    assert out.dtype.isnative
    assert out.tolist() == [258, -1]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\x01\x00\x08\x01\x00\x00\x00\x01\x07", "magic"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x07", "element type"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x03\x07", "announces shape"),
        (b"\x00\x00\x08\x02\x00\x00", "truncated"),
    ],
)
def test_read_idx_rejects_malformed_files(tmp_path: Path, raw: bytes, message: str) -> None:
    (tmp_path / "bad.idx").write_bytes(raw)

    with pytest.raises(ValueError, match=message):
        fm.read_idx(tmp_path / "bad.idx")


# --------------------------------------------------------------------------------------------
# Loading one folder, checksums
# --------------------------------------------------------------------------------------------


def test_explicit_path_loads_tiny_data(tmp_path: Path, tiny_data: TinyData) -> None:
    folder = tiny_data.write(tmp_path / "given")

    data = fm.load_fashion_mnist(folder, download=False, allow_subset=False)

    assert data.source == f"explicit path ({folder})"
    assert not data.is_subset
    np.testing.assert_array_equal(data.train_images, tiny_data.train_images.reshape(30, 784))
    np.testing.assert_array_equal(data.train_labels, tiny_data.train_labels)
    np.testing.assert_array_equal(data.test_images, tiny_data.test_images.reshape(20, 784))
    np.testing.assert_array_equal(data.test_labels, tiny_data.test_labels)
    assert data.train_images.dtype == np.uint8 and data.test_labels.dtype == np.uint8
    assert data.checksums == fm.OFFICIAL_MD5
    assert not data.train_images.flags.writeable


def test_corrupt_file_names_file_and_both_sums(tmp_path: Path, tiny_data: TinyData) -> None:
    folder = tiny_data.write(tmp_path / "given")
    bad = bytearray(tiny_data.files[fm.TEST_IMAGES])
    bad[-12] ^= 0xFF  # inside the deflate stream
    (folder / fm.TEST_IMAGES).write_bytes(bytes(bad))

    with pytest.raises(fm.ChecksumError) as info:
        fm.load_fashion_mnist(folder)

    message = str(info.value)
    assert fm.TEST_IMAGES in message
    assert fm.OFFICIAL_MD5[fm.TEST_IMAGES] in message
    assert hashlib.md5(bytes(bad)).hexdigest() in message


def test_recompressed_copy_is_accepted_by_content(tmp_path: Path, tiny_data: TinyData) -> None:
    # Debian's package rewrites the gzip header: the .gz MD5 differs, the IDX content does not.
    folder = tiny_data.write(tmp_path / "debian-like")
    content = gzip.decompress(tiny_data.files[fm.TRAIN_IMAGES])
    recompressed = gzip.compress(content, mtime=1591315200)
    (folder / fm.TRAIN_IMAGES).write_bytes(recompressed)
    assert hashlib.md5(recompressed).hexdigest() != fm.OFFICIAL_MD5[fm.TRAIN_IMAGES]

    data = fm.load_fashion_mnist(folder)

    np.testing.assert_array_equal(data.train_images, tiny_data.train_images.reshape(30, 784))
    assert data.checksums[fm.TRAIN_IMAGES] == hashlib.md5(recompressed).hexdigest()


def test_recompressed_copy_with_other_content_is_rejected(
    tmp_path: Path, tiny_data: TinyData
) -> None:
    folder = tiny_data.write(tmp_path / "given")
    content = bytearray(gzip.decompress(tiny_data.files[fm.TRAIN_IMAGES]))
    content[-1] ^= 0x01
    (folder / fm.TRAIN_IMAGES).write_bytes(gzip.compress(bytes(content)))

    with pytest.raises(fm.ChecksumError, match=fm.TRAIN_IMAGES):
        fm.load_fashion_mnist(folder)


def test_labels_not_matching_images_are_rejected(
    tmp_path: Path, tiny_data: TinyData, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_data.write(tmp_path / "given")
    short = gzip.compress(idx_bytes(tiny_data.train_labels[:29], 2049))
    (folder / fm.TRAIN_LABELS).write_bytes(short)
    monkeypatch.setitem(fm.OFFICIAL_MD5, fm.TRAIN_LABELS, hashlib.md5(short).hexdigest())

    with pytest.raises(ValueError, match=r"30 images but .* 29 labels"):
        fm.load_fashion_mnist(folder)


def test_images_file_with_labels_magic_is_rejected(
    tmp_path: Path, tiny_data: TinyData, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_data.write(tmp_path / "given")
    swapped = tiny_data.files[fm.TRAIN_LABELS]
    (folder / fm.TRAIN_IMAGES).write_bytes(swapped)
    monkeypatch.setitem(fm.OFFICIAL_MD5, fm.TRAIN_IMAGES, hashlib.md5(swapped).hexdigest())

    with pytest.raises(ValueError, match="magic 2051"):
        fm.load_fashion_mnist(folder)


@pytest.mark.parametrize("what", ["missing folder", "missing file"])
def test_explicit_path_without_data_is_an_error(
    tmp_path: Path, tiny_data: TinyData, fake_opener: MakeOpener, what: str
) -> None:
    folder = tmp_path / "given"
    if what == "missing file":
        tiny_data.write(folder)
        (folder / fm.TEST_LABELS).unlink()
    opener = fake_opener()

    with pytest.raises(FileNotFoundError) as info:
        fm.load_fashion_mnist(folder, opener=opener)

    message = str(info.value)
    assert str(folder) in message
    assert fm.ENV_VAR in message  # says how to get the data
    if what == "missing file":
        assert fm.TEST_LABELS in message
    assert opener.urls == []  # an explicit path never falls back to anything


def test_fashion_mnist_validates_shapes() -> None:
    images = np.zeros((3, 784), dtype=np.uint8)
    labels = np.zeros(3, dtype=np.uint8)

    with pytest.raises(ValueError, match="train_labels"):
        fm.FashionMNIST(images, labels[:2], images, labels, source="x", is_subset=False)
    with pytest.raises(ValueError, match="test_images"):
        fm.FashionMNIST(images, labels, images[:, :10], labels, source="x", is_subset=False)
    with pytest.raises(ValueError, match="train_labels must lie"):
        fm.FashionMNIST(images, labels + 10, images, labels, source="x", is_subset=False)


# --------------------------------------------------------------------------------------------
# Lookup order
# --------------------------------------------------------------------------------------------


def test_cache_dir_respects_xdg_and_falls_back_to_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fm.cache_dir() == tmp_path / "xdg" / "adcs" / "fashion-mnist"

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in ("", "relative/path"):  # empty or relative: ignored, as the XDG spec says
        monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert fm.cache_dir() == tmp_path / "home" / ".cache" / "adcs" / "fashion-mnist"


def test_lookup_order_explicit_env_cache_debian(
    tmp_path: Path, tiny_data: TinyData, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = tiny_data.write(tmp_path / "explicit")
    env = tiny_data.write(tmp_path / "env")
    cache = tiny_data.write(fm.cache_dir())
    debian = tiny_data.write(fm.DEBIAN_DIR)
    monkeypatch.setenv(fm.ENV_VAR, str(env))

    def source() -> str:
        return fm.load_fashion_mnist(download=False, allow_subset=False).source

    assert fm.find_fashion_mnist(explicit) == explicit
    assert fm.load_fashion_mnist(explicit).source == f"explicit path ({explicit})"
    assert fm.find_fashion_mnist() == env
    assert source() == f"${fm.ENV_VAR} ({env})"
    monkeypatch.delenv(fm.ENV_VAR)
    assert fm.find_fashion_mnist() == cache
    assert source() == f"user cache ({cache})"
    for name in fm.FILES:
        (cache / name).unlink()
    assert fm.find_fashion_mnist() == debian
    assert source() == f"Debian package dataset-fashion-mnist ({debian})"
    for name in fm.FILES:
        (debian / name).unlink()
    assert fm.find_fashion_mnist() is None


def test_an_incomplete_env_folder_is_refused_like_an_explicit_one(
    tmp_path: Path, tiny_data: TinyData, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tiny_data.write(tmp_path / "env")
    (env / fm.TRAIN_IMAGES).unlink()
    tiny_data.write(fm.cache_dir())  # a good cache must not hide the user's wrong setting
    monkeypatch.setenv(fm.ENV_VAR, str(env))

    with pytest.raises(FileNotFoundError) as info:
        fm.find_fashion_mnist()

    message = str(info.value)
    assert f"${fm.ENV_VAR} {env}" in message and f"{fm.TRAIN_IMAGES} is missing" in message


@pytest.mark.parametrize(
    "spoil, said",
    [
        (lambda p: p.mkdir(), "is a folder, not a file"),
        (lambda p: os.mkfifo(p), "is a named pipe (FIFO)"),
        (lambda p: p.with_suffix("").write_bytes(b"idx"), "there only decompressed"),
        (lambda p: None, "is missing"),
    ],
    ids=["folder", "fifo", "gunzipped", "missing"],
)
def test_a_file_that_cannot_be_read_is_named_with_what_is_wrong(
    tmp_path: Path, tiny_data: TinyData, spoil: Any, said: str
) -> None:
    folder = tiny_data.write(tmp_path / "data")
    (folder / fm.TEST_LABELS).unlink()
    spoil(folder / fm.TEST_LABELS)

    with pytest.raises(FileNotFoundError) as info:
        fm.load_fashion_mnist(folder)

    assert f"{fm.TEST_LABELS} {said}" in str(info.value) or said in str(info.value)
    assert fm.TEST_LABELS in str(info.value)


def test_an_empty_folder_is_called_empty(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="it is empty"):
        fm.load_fashion_mnist(tmp_path)


def test_corrupt_file_in_a_lookup_location_is_not_skipped(
    tmp_path: Path, tiny_data: TinyData, fake_opener: MakeOpener
) -> None:
    cache = tiny_data.write(fm.cache_dir())
    tiny_data.write(fm.DEBIAN_DIR)  # a good copy further down the order must not be used
    (cache / fm.TRAIN_LABELS).write_bytes(b"not the file")

    with pytest.raises(fm.ChecksumError, match=str(cache / fm.TRAIN_LABELS)):
        fm.load_fashion_mnist(opener=fake_opener())


# --------------------------------------------------------------------------------------------
# Download
# --------------------------------------------------------------------------------------------


def test_download_lands_verified_files_in_the_cache(
    tiny_data: TinyData, fake_opener: MakeOpener
) -> None:
    opener = fake_opener()

    data = fm.load_fashion_mnist(opener=opener)

    cache = fm.cache_dir()
    assert sorted(opener.urls) == sorted(fm.BASE_URL + name for name in fm.FILES)
    assert _only_files(cache) == sorted(fm.FILES)  # no temporary files left
    for name in fm.FILES:
        assert (cache / name).read_bytes() == tiny_data.files[name]
    assert data.source.startswith(f"downloaded from {fm.BASE_URL}")
    assert not data.is_subset
    np.testing.assert_array_equal(data.train_labels, tiny_data.train_labels)

    again = fm.load_fashion_mnist(opener=opener)  # now found in the cache: no new requests

    assert len(opener.urls) == len(fm.FILES)
    assert again.source == f"user cache ({cache})"


def test_download_fetches_only_missing_files(tiny_data: TinyData, fake_opener: MakeOpener) -> None:
    cache = fm.cache_dir()
    cache.mkdir(parents=True)
    (cache / fm.TRAIN_IMAGES).write_bytes(tiny_data.files[fm.TRAIN_IMAGES])
    opener = fake_opener()

    fm.download_fashion_mnist(opener=opener)

    assert fm.BASE_URL + fm.TRAIN_IMAGES not in opener.urls
    assert len(opener.urls) == 3
    assert _only_files(cache) == sorted(fm.FILES)


def test_corrupt_download_raises_and_leaves_no_file(
    tiny_data: TinyData, fake_opener: MakeOpener
) -> None:
    corrupt = tiny_data.files[fm.TEST_IMAGES][:-5] + b"xxxxx"
    opener = fake_opener({fm.TEST_IMAGES: corrupt})

    with pytest.raises(fm.ChecksumError) as info:
        fm.load_fashion_mnist(opener=opener)

    assert fm.BASE_URL + fm.TEST_IMAGES in str(info.value)
    assert hashlib.md5(corrupt).hexdigest() in str(info.value)
    left = _only_files(fm.cache_dir())
    assert fm.TEST_IMAGES not in left
    assert all(name in fm.FILES for name in left)  # no temporary file either
    # What did land was verified: a later load must not accept an incomplete or corrupt set.
    assert fm.find_fashion_mnist() is None


class _BrokenStream:
    """A response that delivers some bytes, then the connection drops."""

    def __init__(self, head: bytes) -> None:
        self.parts = [head]

    def read(self, size: int = -1) -> bytes:
        if self.parts:
            return self.parts.pop()
        raise ConnectionResetError("connection reset by peer")

    def __enter__(self) -> _BrokenStream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_interrupted_download_leaves_no_file_and_falls_back(
    tiny_data: TinyData, caplog: pytest.LogCaptureFixture
) -> None:
    def opener(url: str) -> _BrokenStream:
        return _BrokenStream(tiny_data.files[url.rsplit("/", 1)[1]][:100])

    with caplog.at_level(logging.WARNING, logger=fm.__name__):
        data = fm.load_fashion_mnist(opener=opener)  # type: ignore[arg-type]

    assert data.is_subset
    assert _only_files(fm.cache_dir()) == []
    assert "connection reset" in caplog.text


# --------------------------------------------------------------------------------------------
# Offline fallback to the shipped subset
# --------------------------------------------------------------------------------------------


def test_offline_falls_back_to_the_subset_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The autouse fixture makes every download fail like an offline machine.
    with caplog.at_level(logging.WARNING, logger=fm.__name__):
        data = fm.load_fashion_mnist()

    assert data.is_subset
    assert data.source.startswith("shipped subset (")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("shipped subset" in r.getMessage() for r in warnings)
    assert any("network disabled" in r.getMessage() for r in warnings)


def test_no_download_means_no_request(fake_opener: MakeOpener) -> None:
    opener = fake_opener()

    data = fm.load_fashion_mnist(download=False, opener=opener)

    assert data.is_subset
    assert opener.urls == []


def test_without_subset_fallback_nothing_found_is_an_error() -> None:
    with pytest.raises(FileNotFoundError) as info:
        fm.load_fashion_mnist(allow_subset=False)

    message = str(info.value)
    assert str(fm.cache_dir()) in message and str(fm.DEBIAN_DIR) in message
    assert "download" in message and fm.ENV_VAR in message


# --------------------------------------------------------------------------------------------
# The shipped subset
# --------------------------------------------------------------------------------------------


def test_subset_md5sums_verify_and_content_is_balanced() -> None:
    sums = fm._read_md5sums(fm.SUBSET_DIR / "MD5SUMS")
    assert sorted(sums) == sorted(fm.FILES)
    for name, digest in sums.items():
        assert hashlib.md5((fm.SUBSET_DIR / name).read_bytes()).hexdigest() == digest

    data = fm.load_subset()

    assert data.is_subset and data.source.startswith("shipped subset (")
    assert data.checksums == sums
    assert data.train_images.shape == (5500, 784) and data.test_images.shape == (1100, 784)
    assert np.bincount(data.train_labels).tolist() == [550] * 10
    assert np.bincount(data.test_labels).tolist() == [110] * 10


def test_subset_is_small_and_carries_the_licence() -> None:
    total = sum(p.stat().st_size for p in fm.SUBSET_DIR.iterdir() if p.is_file())
    licence = (fm.SUBSET_DIR / "LICENSE").read_text(encoding="utf-8")
    notice = (fm.SUBSET_DIR / "NOTICE").read_text(encoding="utf-8")

    assert total <= 3_000_000
    assert "MIT License" in licence and "2017 Zalando SE" in licence
    assert "Zalando SE" in notice and "make_subset.py" in notice


def test_subset_with_a_tampered_file_is_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "subset"
    copy.mkdir()
    for p in fm.SUBSET_DIR.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    (copy / fm.TEST_LABELS).write_bytes(gzip.compress(b"\x00" * 8))
    monkeypatch.setattr(fm, "SUBSET_DIR", copy)

    with pytest.raises(fm.ChecksumError, match=fm.TEST_LABELS):
        fm.load_subset()


# --------------------------------------------------------------------------------------------
# The real data (skipped when the official files are not next to the repository)
# --------------------------------------------------------------------------------------------


def test_real_data_counts_and_first_labels(real_data: fm.FashionMNIST) -> None:
    assert real_data.train_images.shape == (60000, 784)
    assert real_data.test_images.shape == (10000, 784)
    assert np.bincount(real_data.train_labels).tolist() == [6000] * 10
    assert np.bincount(real_data.test_labels).tolist() == [1000] * 10
    assert real_data.train_labels[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert real_data.checksums == fm.OFFICIAL_MD5
    # The usual normalisation constant: mean pixel 0.2860 of 255.
    assert abs(real_data.train_images.mean() / 255 - 0.2860) < 5e-4


def _make_subset_script() -> ModuleType:
    path = REPO_ROOT / "scripts" / "make_subset.py"
    spec = importlib.util.spec_from_file_location("make_subset", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_subset_is_the_first_images_of_each_class(real_data: fm.FashionMNIST) -> None:
    subset = fm.load_subset()
    for split in ("train", "test"):
        labels = getattr(real_data, f"{split}_labels")
        per_class = np.bincount(getattr(subset, f"{split}_labels"))[0]
        chosen = np.sort(
            np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(10)])
        )
        np.testing.assert_array_equal(getattr(subset, f"{split}_labels"), labels[chosen])
        np.testing.assert_array_equal(
            getattr(subset, f"{split}_images"), getattr(real_data, f"{split}_images")[chosen]
        )


def test_make_subset_script_is_deterministic(
    tmp_path: Path, tiny_data: TinyData, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _make_subset_script()
    data = fm.load_fashion_mnist(tiny_data.write(tmp_path / "full"))

    first = script.write_subset(data, tmp_path / "a", train_per_class=2, test_per_class=1)
    second = script.write_subset(data, tmp_path / "b", train_per_class=2, test_per_class=1)
    monkeypatch.setattr(fm, "SUBSET_DIR", tmp_path / "a")
    subset = fm.load_subset()

    assert first == second
    for name in (*fm.FILES, "MD5SUMS", "LICENSE", "NOTICE"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert subset.is_subset and subset.checksums == first
    assert np.bincount(subset.train_labels).tolist() == [2] * 10
    np.testing.assert_array_equal(subset.test_images, data.test_images[:10])


@pytest.mark.parametrize("sub", [("FashionMNIST", "raw"), ("raw",)])
def test_torchvisions_layout_is_found_under_the_given_folder(
    tmp_path: Path, sub: tuple[str, ...]
) -> None:
    from tests.paths import FILES, full_data_dir, has_full_data

    if not has_full_data():
        pytest.skip("the full Fashion-MNIST files are not in this workplace")
    raw = tmp_path.joinpath(*sub)
    raw.mkdir(parents=True)
    for name in FILES:  # what torchvision.datasets.FashionMNIST(root, download=True) leaves
        (raw / name).symlink_to(full_data_dir() / name)
    assert fm.find_fashion_mnist(tmp_path) == raw
    data = fm.load_fashion_mnist(tmp_path)
    assert data.train_images.shape == (60000, 784) and not data.is_subset
