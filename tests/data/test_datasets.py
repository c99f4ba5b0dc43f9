"""The dataset table: each loader on small files written in the official formats."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from adcs.data import ChecksumError
from adcs.data.datasets import (
    CIFAR10_MD5,
    DATASETS,
    DataError,
    Dataset,
    load_arrays,
    load_cifar10,
    load_dataset,
    load_digits,
    load_femnist,
)
from adcs.data.synthetic import Synthetic


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------
# digits, arrays


def test_digits_are_the_bundled_set_split_by_class() -> None:
    pytest.importorskip("sklearn")
    data = load_digits()
    assert data.n_train + data.n_test == 1797 and data.n_classes == 10
    assert data.train_images.shape[1:] == (64,) and data.train_images.dtype == np.float32
    assert 0.0 <= data.train_images.min() and data.train_images.max() <= 1.0
    assert abs(data.n_test / 1797 - 0.25) < 0.01
    per_class = np.bincount(data.test_labels) / np.bincount(
        np.concatenate([data.train_labels, data.test_labels])
    )
    assert np.all(np.abs(per_class - 0.25) < 0.01)  # stratified
    again = load_digits()
    np.testing.assert_array_equal(again.test_labels, data.test_labels)  # a fixed split


def test_arrays_take_any_input_shape(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    file = tmp_path / "mine.npz"
    np.savez(
        file, x_train=rng.normal(size=(40, 4, 3)), y_train=rng.integers(0, 3, 40),
        x_test=rng.normal(size=(10, 4, 3)), y_test=rng.integers(0, 3, 10),
    )  # fmt: skip
    data = load_arrays(file)
    assert data.train_images.shape == (40, 4, 3) and data.train_images.dtype == np.float32
    assert data.n_classes == 3 and data.checksums == {"mine.npz": md5(file)}
    pixels = tmp_path / "pixels.npz"
    np.savez(pixels, x_train=np.zeros((5, 2), np.uint8), y_train=np.arange(5),
             x_test=np.zeros((2, 2), np.uint8), y_test=np.arange(2))  # fmt: skip
    assert load_arrays(pixels).train_images.dtype == np.uint8


def test_arrays_with_classes_missing_from_training_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "gaps.npz"
    np.savez(file, x_train=np.zeros((4, 2)), y_train=np.array([3, 7, 3, 7]),
             x_test=np.zeros((2, 2)), y_test=np.array([3, 7]))  # fmt: skip
    assert load_arrays(file).n_classes == 8
    assert "class(es) [0, 1, 2, 4, 5, 6] have no training sample (labels run 0 … 7)" in caplog.text


def test_arrays_errors_name_the_file_and_the_fault(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_arrays(tmp_path / "absent.npz")
    partial = tmp_path / "partial.npz"
    np.savez(partial, x_train=np.zeros((3, 2)), y_train=np.zeros(3, int))
    with pytest.raises(DataError, match=r"lacks the array\(s\) x_test, y_test"):
        load_arrays(partial)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(DataError, match=r"is not a \.npz archive"):
        load_arrays(junk)
    npy = tmp_path / "array.npz"  # a .npy under a .npz name: np.load gives an array
    with npy.open("wb") as fh:
        np.save(fh, np.zeros(3))
    with pytest.raises(DataError, match=r"is not a \.npz archive"):
        load_arrays(npy)
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.zeros((3, 2)), y_train=np.array([0.5, 1, 2]),
             x_test=np.zeros((1, 2)), y_test=np.zeros(1, int))  # fmt: skip
    with pytest.raises(DataError, match="y_train must be a 1-D integer array"):
        load_arrays(bad)
    nan = tmp_path / "nan.npz"
    np.savez(nan, x_train=np.full((3, 2), np.nan), y_train=np.zeros(3, int),
             x_test=np.zeros((1, 2)), y_test=np.zeros(1, int))  # fmt: skip
    with pytest.raises(DataError, match="non-finite"):
        load_arrays(nan)
    shape = tmp_path / "shape.npz"
    np.savez(shape, x_train=np.zeros((3, 2)), y_train=np.zeros(3, int),
             x_test=np.zeros((1, 5)), y_test=np.zeros(1, int))  # fmt: skip
    with pytest.raises(DataError, match="differ in shape"):
        load_arrays(shape)
    mixed = tmp_path / "mixed.npz"  # was: train scaled to [0, 1], test used in [0, 255]
    np.savez(mixed, x_train=np.zeros((3, 2), np.uint8), y_train=np.zeros(3, int),
             x_test=np.zeros((1, 2), np.float32), y_test=np.zeros(1, int))  # fmt: skip
    with pytest.raises(DataError, match="train inputs are uint8 and test inputs float32"):
        load_arrays(mixed)


# --------------------------------------------------------------------------------------------
# cifar10: the official archive layout, pickled batches of bytes keys


def write_cifar(path: Path, per_batch: int = 6, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    with tarfile.open(path, "w:gz") as archive:
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        for name in names:
            batch = {
                b"batch_label": name.encode(),
                b"labels": rng.integers(0, 10, per_batch).tolist(),
                b"data": rng.integers(0, 256, (per_batch, 3072)).astype(np.uint8),
                b"filenames": [f"{i}.png".encode() for i in range(per_batch)],
            }
            blob = pickle.dumps(batch, protocol=2)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            archive.addfile(info, io.BytesIO(blob))
    return path


def test_cifar10_reads_the_official_layout(tmp_path: Path) -> None:
    archive = write_cifar(tmp_path / "cifar-10-python.tar.gz")
    data = load_cifar10(tmp_path, expected_md5=md5(archive))  # the folder holding it
    assert data.n_train == 30 and data.n_test == 6
    assert data.train_images.shape == (30, 3, 32, 32) and data.train_images.dtype == np.uint8
    assert data.checksums == {"cifar-10-python.tar.gz": md5(archive)}
    batch = pickle.loads(  # the first image, channels first as stored
        tarfile.open(archive).extractfile("cifar-10-batches-py/data_batch_1").read()  # type: ignore[union-attr]
    )
    np.testing.assert_array_equal(data.train_images[0].ravel(), batch[b"data"][0])


def test_cifar10_checks_the_official_md5_and_refuses_foreign_pickles(tmp_path: Path) -> None:
    archive = write_cifar(tmp_path / "cifar-10-python.tar.gz")
    with pytest.raises(ChecksumError, match=CIFAR10_MD5):
        load_cifar10(archive)
    with pytest.raises(FileNotFoundError, match=r"cifar-10-python\.tar\.gz"):
        load_cifar10(tmp_path / "elsewhere")
    evil = tmp_path / "evil.tar.gz"

    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("executed",))

    with tarfile.open(evil, "w:gz") as out:
        blob = pickle.dumps({b"data": Boom(), b"labels": []})
        info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        info.size = len(blob)
        out.addfile(info, io.BytesIO(blob))
    with pytest.raises(DataError, match="unexpected object"):
        load_cifar10(evil, expected_md5=None)
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[:200])
    with pytest.raises(DataError, match=r"tar\.gz|CIFAR-10 batch|lacks"):
        load_cifar10(truncated, expected_md5=None)


# --------------------------------------------------------------------------------------------
# femnist: LEAF JSON shards


def write_leaf(root: Path, writers: dict[str, tuple[int, int]], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for split, column in (("train", 0), ("test", 1)):
        (root / split).mkdir(parents=True)
        names = list(writers)
        for shard, part in enumerate((names[::2], names[1::2])):
            doc = {"users": part, "num_samples": [], "user_data": {}}
            for name in part:
                n = writers[name][column]
                pixels = rng.integers(0, 256, (n, 784)) / 255.0
                doc["user_data"][name] = {"x": (1.0 - pixels).tolist(),
                                          "y": rng.integers(0, 62, n).tolist()}  # fmt: skip
                doc["num_samples"].append(n)
            (root / split / f"all_data_{shard}_niid_0_keep_0_{split}_9.json").write_text(
                json.dumps(doc)
            )


def test_femnist_keeps_each_writers_samples(tmp_path: Path) -> None:
    write_leaf(tmp_path, {"f_0001": (5, 2), "f_0002": (3, 1), "f_0003": (4, 2)})
    data = load_femnist(tmp_path)
    assert data.n_classes == 62 and data.n_train == 12 and data.n_test == 5
    assert data.train_images.dtype == np.uint8  # multiples of 1/255 are kept as pixels
    assert data.train_writers is not None and data.test_writers is not None
    assert np.bincount(data.train_writers).tolist() == [5, 3, 4]
    assert np.bincount(data.test_writers).tolist() == [2, 1, 2]
    assert len(data.checksums) == 4


def test_femnist_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="train/ and test/"):
        load_femnist(tmp_path)
    write_leaf(tmp_path, {"a": (2, 1), "b": (2, 1)})
    shard = next((tmp_path / "train").glob("*.json"))
    shard.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_femnist(tmp_path)
    shard.write_text(json.dumps({"users": ["a"]}))
    with pytest.raises(DataError, match="not a LEAF shard"):
        load_femnist(tmp_path)


# --------------------------------------------------------------------------------------------
# the table


def test_the_table_names_every_dataset_and_checks_options(tmp_path: Path) -> None:
    assert set(DATASETS) == {"fashion-mnist", "digits", "arrays", "cifar10", "femnist", "synthetic",
                             "huggingface"}  # fmt: skip
    assert isinstance(load_dataset("synthetic", n_clients=10), Synthetic)
    assert isinstance(load_dataset("fashion-mnist"), Dataset)  # offline: the shipped subset
    with pytest.raises(ValueError, match="dataset must be one of"):
        load_dataset("mnist")
    with pytest.raises(ValueError, match="takes no option"):
        load_dataset("digits", path="x")
    with pytest.raises(ValueError, match="needs the option"):
        load_dataset("arrays")
