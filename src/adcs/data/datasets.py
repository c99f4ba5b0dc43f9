"""Data sets by name (docs/design.md §7): the table behind ``[data] dataset = "..."``.

=================  ===========================================================================
``fashion-mnist``  the paper's data (`adcs.data.load_fashion_mnist`: lookup, download, MD5)
``digits``         scikit-learn's bundled 8×8 digits (1 797 images; the ``adcs[sklearn]`` extra)
``arrays``         a user ``.npz`` with ``x_train, y_train, x_test, y_test`` (inputs of any shape)
``cifar10``        the official ``cifar-10-python.tar.gz`` from a user path, MD5-checked
``femnist``        LEAF's JSON shards (``train/*.json``, ``test/*.json``), one client per writer
``synthetic``      Synthetic(α, β), any number of clients generated on demand
                   (`adcs.data.synthetic`)
``huggingface``    a Hugging Face data set saved with ``save_to_disk`` or from the Hub
                   (`adcs.data.huggingface`; the ``adcs[huggingface]`` extra)
=================  ===========================================================================

A loader returns a `Dataset` (samples in memory, split among clients by a partition of
`adcs.data.partition.PARTITIONS`) or, for ``synthetic``, a `Synthetic`
whose only partition is its own clients. Missing files raise ``FileNotFoundError``, files with the
wrong checksum `ChecksumError`, malformed files `DataError` — each naming
the file and what is wrong.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import pickle
import tarfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import (
    check_client_count,
    check_non_negative,
    check_number,
    check_string,
)
from adcs.data.base import DataError, Dataset
from adcs.data.fashion_mnist import ChecksumError, FashionMNIST, load_fashion_mnist
from adcs.data.fashion_mnist import data_folders as fashion_mnist_folders
from adcs.data.synthetic import Synthetic
from adcs.registry import Table

__all__ = [
    "CIFAR10_ARCHIVE",
    "CIFAR10_MD5",
    "DATASETS",
    "DataError",
    "Dataset",
    "DatasetEntry",
    "load_arrays",
    "load_cifar10",
    "load_dataset",
    "load_digits",
    "load_fashion_mnist_dataset",
    "load_femnist",
]

logger = logging.getLogger(__name__)

IntArray = NDArray[np.intp]

CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
"""MD5 of the official archive (the CIFAR-10 page, Krizhevsky 2009)."""
_CIFAR10_MEMBERS = tuple(f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6))
_CIFAR10_TEST = "cifar-10-batches-py/test_batch"
_CIFAR10_SHAPE = (3, 32, 32)
FEMNIST_CLASSES = 62
DIGITS_TEST_FRACTION = 0.25
_DIGITS_SPLIT_SEED = 0
"""The digits have no official split: a fixed stratified one (the same for every experiment)."""


def _md5_file(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _inputs(name: str, array: NDArray[Any]) -> NDArray[Any]:
    """uint8 kept; other numbers as finite float32."""
    if array.dtype == np.uint8:
        return array
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise DataError(f"{name} must hold numbers, got dtype {array.dtype}")
    out = np.asarray(array, dtype=np.float32)
    if not np.isfinite(out).all():
        raise DataError(f"{name} holds non-finite values")
    return out


def _class_labels(name: str, array: NDArray[Any]) -> IntArray:
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise DataError(f"{name} must be a 1-D integer array, got {array.dtype} {array.shape}")
    if array.size and array.min() < 0:
        raise DataError(f"{name} must be non-negative class labels")
    return array.astype(np.intp)


# --------------------------------------------------------------------------------------------
# the loaders
# --------------------------------------------------------------------------------------------


def load_fashion_mnist_dataset(path: str | os.PathLike[str] | None = None) -> Dataset:
    """Fashion-MNIST through `adcs.data.load_fashion_mnist` (lookup, download, MD5)."""
    fm = load_fashion_mnist(path)
    return Dataset(
        "fashion-mnist", fm.train_images, fm.train_labels, fm.test_images, fm.test_labels,
        n_classes=10, source=fm.source, is_subset=fm.is_subset, checksums=dict(fm.checksums),
    )  # fmt: skip


def load_digits(test_fraction: float = DIGITS_TEST_FRACTION) -> Dataset:
    """scikit-learn's bundled 8×8 digits (no download), inputs scaled to [0, 1], shape (64,).

    The set has no official split: a fixed stratified split (the same on every call) keeps
    ``test_fraction`` of each class for testing.
    """
    check_number("test_fraction", test_fraction, 0.0, 1.0, low_open=True, high_open=True)
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as exc:
        raise FileNotFoundError(
            "the digits dataset needs scikit-learn: pip install 'adcs[sklearn]'"
        ) from exc
    bunch = sklearn_digits()
    x = (np.asarray(bunch.data, dtype=np.float32) / np.float32(16.0)).astype(np.float32)
    y = np.asarray(bunch.target, dtype=np.intp)
    rng = np.random.default_rng(_DIGITS_SPLIT_SEED)
    test = np.zeros(y.size, dtype=bool)
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        test[members[: round(test_fraction * members.size)]] = True
    return Dataset(
        "digits", x[~test], y[~test], x[test], y[test], n_classes=10,
        source=f"scikit-learn's bundled digits ({int((~test).sum())} train / {int(test.sum())} "
        "test, fixed stratified split)",
    )  # fmt: skip


def load_arrays(path: str | os.PathLike[str]) -> Dataset:
    """A user ``.npz`` with ``x_train, y_train, x_test, y_test`` (inputs of any shape).

    Inputs may be uint8 pixels (scaled to [0, 1] when used) or numbers (used as float32), alike in
    both splits; labels integers from 0; the number of classes is one more than the largest label.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"arrays: no such file {file} (a .npz with x_train, y_train, ...)")
    try:
        archive = zipfile.is_zipfile(file)
    except OSError as exc:
        raise DataError(f"{file} cannot be read: {exc.strerror or exc}") from None
    if not archive:  # np.load would read a .npy, or call any other file pickled data
        raise DataError(
            f"{file} is not a .npz archive (as np.savez writes) of x_train, y_train, ..."
        )
    try:
        with np.load(file, allow_pickle=False) as npz:
            missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in npz]
            if missing:
                raise DataError(f"{file} lacks the array(s) {', '.join(missing)}")
            arrays = {k: np.asarray(npz[k]) for k in ("x_train", "y_train", "x_test", "y_test")}
    except DataError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"{file} is not a readable .npz file: {exc}") from None
    y_train = _class_labels(f"{file}: y_train", arrays["y_train"])
    y_test = _class_labels(f"{file}: y_test", arrays["y_test"])
    n_classes = int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
    absent = np.flatnonzero(np.bincount(y_train, minlength=n_classes) == 0).tolist()
    if absent:  # they still count: partitions and per-group columns see n_classes classes
        logger.warning(
            "%s: class(es) %s have no training sample (labels run 0 … %d)",
            file, absent, n_classes - 1,
        )  # fmt: skip
    return Dataset(
        "arrays", _inputs(f"{file}: x_train", arrays["x_train"]), y_train,
        _inputs(f"{file}: x_test", arrays["x_test"]), y_test, n_classes=max(n_classes, 2),
        source=f"arrays from {file}", checksums={file.name: _md5_file(file)},
    )  # fmt: skip


class _CifarUnpickler(pickle.Unpickler):
    """Only what the official batches hold: dicts, lists, bytes, str, ints and NumPy arrays."""

    _ALLOWED = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("_codecs", "encode"),  # how protocol-2 pickles made by Python 3 store bytes
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR-10 batch")


def _cifar_batch(
    archive: tarfile.TarFile, member: str, file: Path
) -> tuple[NDArray[Any], IntArray]:
    try:
        handle = archive.extractfile(member)
    except KeyError:
        raise DataError(f"{file} lacks {member}: not the python version of CIFAR-10") from None
    if handle is None:
        raise DataError(f"{file}: {member} is not a file")
    try:
        batch = _CifarUnpickler(io.BytesIO(handle.read()), encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[b"labels"], dtype=np.intp)
    except (pickle.UnpicklingError, KeyError, TypeError, ValueError, EOFError) as exc:
        raise DataError(f"{file}: {member} is not a CIFAR-10 batch ({exc})") from None
    size = int(np.prod(_CIFAR10_SHAPE))
    if data.ndim != 2 or data.shape[1] != size or labels.shape != (data.shape[0],):
        raise DataError(f"{file}: {member} holds data {data.shape}, expected (n, {size})")
    return data.reshape(-1, *_CIFAR10_SHAPE), labels


def load_cifar10(
    path: str | os.PathLike[str], *, expected_md5: str | None = CIFAR10_MD5
) -> Dataset:
    """CIFAR-10 from the official python archive, MD5-checked before anything is read.

    Parameters
    ----------
    path : path
        ``cifar-10-python.tar.gz`` or a folder holding it.
    expected_md5 : str or None
        The archive's MD5 (default the official one); ``None`` skips the check.

    Returns
    -------
    Dataset
        Inputs of shape (3, 32, 32), uint8 (channels first, as in the archive); 50 000 train and
        10 000 test images, 10 classes.
    """
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / CIFAR10_ARCHIVE
    if not file.is_file():
        raise FileNotFoundError(
            f"cifar10: {file} not found; download {CIFAR10_ARCHIVE} (the python version) from "
            "https://www.cs.toronto.edu/~kriz/cifar.html and pass its path"
        )
    actual = _md5_file(file)
    if expected_md5 is not None and actual != expected_md5:
        raise ChecksumError(file, expected_md5, actual, "Not the official CIFAR-10 archive.")
    try:
        with tarfile.open(file, "r:gz") as archive:
            train = [_cifar_batch(archive, m, file) for m in _CIFAR10_MEMBERS]
            test_x, test_y = _cifar_batch(archive, _CIFAR10_TEST, file)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"{file} is not a readable tar.gz archive: {exc}") from None
    return Dataset(
        "cifar10", np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train]),
        test_x, test_y, n_classes=10, source=f"CIFAR-10 archive {file}",
        checksums={file.name: actual},
    )  # fmt: skip


def _femnist_split(folder: Path) -> tuple[dict[str, tuple[list[Any], list[Any]]], dict[str, str]]:
    """Writer → (x rows, labels) over every JSON shard of a LEAF split folder."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"femnist: no .json shards in {folder}")
    users: dict[str, tuple[list[Any], list[Any]]] = {}
    sums: dict[str, str] = {}
    for file in files:
        sums[f"{folder.name}/{file.name}"] = _md5_file(file)
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
            shard = doc["user_data"]
            for user in doc["users"]:
                x, y = users.setdefault(str(user), ([], []))
                x.extend(shard[user]["x"])
                y.extend(shard[user]["y"])
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{file} is not valid JSON: {exc}") from None
        except (KeyError, TypeError) as exc:
            raise DataError(
                f"{file} is not a LEAF shard (users, user_data: {{x, y}}): missing {exc}"
            ) from None
    return users, sums


def _femnist_arrays(
    users: Mapping[str, tuple[list[Any], list[Any]]], names: list[str], where: Path
) -> tuple[NDArray[Any], IntArray, IntArray]:
    xs, ys, owners = [], [], []
    for i, name in enumerate(names):
        x, y = users[name]
        try:
            xs.append(np.asarray(x, dtype=np.float32).reshape(len(y), -1))
        except ValueError as exc:
            raise DataError(f"{where}: writer {name}'s x and y do not match ({exc})") from None
        ys.append(np.asarray(y))
        owners.append(np.full(len(y), i, dtype=np.intp))
    x_all = np.concatenate(xs)
    pixels = np.round(x_all * 255.0)
    # LEAF stores 1 − pixel/255: keep exact multiples of 1/255 as uint8 (4× less memory)
    if np.all(np.abs(pixels - x_all * 255.0) < 1e-3) and x_all.min() >= 0 and x_all.max() <= 1:
        x_out: NDArray[Any] = pixels.astype(np.uint8)
    else:
        x_out = _inputs(f"{where}: x", x_all)
    return x_out, _class_labels(f"{where}: y", np.concatenate(ys)), np.concatenate(owners)


def load_femnist(path: str | os.PathLike[str]) -> Dataset:
    """FEMNIST from LEAF's JSON shards: ``path/train/*.json`` and ``path/test/*.json``.

    Each shard is ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [[784
    floats]], "y": [labels]}}}``. Writers present in both splits are kept, in sorted order; each
    sample's writer is recorded for the ``natural`` partition. 62 classes, inputs (784,).
    """
    root = Path(path).expanduser()
    if not (root / "train").is_dir() or not (root / "test").is_dir():
        raise FileNotFoundError(
            f"femnist: {root} must hold LEAF's train/ and test/ folders of .json shards "
            "(LEAF's data/femnist/data after preprocess.sh)"
        )
    train, train_sums = _femnist_split(root / "train")
    test, test_sums = _femnist_split(root / "test")
    names = sorted(set(train) & set(test))
    if not names:
        raise DataError(f"femnist: no writer of {root}/train appears in {root}/test")
    dropped = len(set(train) | set(test)) - len(names)
    if dropped:
        logger.warning("femnist: %d writers are in only one split; they are left out", dropped)
    x_train, y_train, w_train = _femnist_arrays(train, names, root / "train")
    x_test, y_test, w_test = _femnist_arrays(test, names, root / "test")
    if max(int(y_train.max()), int(y_test.max())) >= FEMNIST_CLASSES:
        raise DataError(f"femnist: labels must lie in [0, {FEMNIST_CLASSES})")
    return Dataset(
        "femnist", x_train, y_train, x_test, y_test, n_classes=FEMNIST_CLASSES,
        source=f"FEMNIST (LEAF) from {root}, {len(names)} writers",
        checksums={**train_sums, **test_sums}, train_writers=w_train, test_writers=w_test,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetEntry:
    """One row of `DATASETS`: everything the configuration knows of a data set.

    Attributes
    ----------
    load : callable
        ``load(**options)`` → `Dataset` or `Synthetic`.
    keys : frozenset of str
        The options it takes (the ``[data]`` keys besides ``dataset``).
    required : frozenset of str
        Options that must be given.
    path : {"folder", "file", "either"} or None
        What its ``path`` option names (checked when a configuration is read).
    generated : bool
        Its clients come with it (``synthetic``): only the ``natural`` partition applies.
    title : str
        Its name in reports (default: the table's name).
    checks : mapping of str to callable
        ``check(name, value)`` of an option (`adcs._validate`; ``ValueError`` naming it),
        run when a configuration is read, before anything is loaded.
    folders : callable, optional
        ``folders(path)`` → every folder the loader may read (results folders are kept clear of
        them); default: ``path`` itself, a folder or a file (a file's own folder may hold results
        folders: a configuration names its data beside the TOML file).
    """

    load: Callable[..., Dataset | Synthetic]
    keys: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    path: str | None = None
    generated: bool = False
    title: str = ""
    checks: Mapping[str, Callable[[str, Any], object]] = field(default_factory=dict)
    folders: Callable[[str | None], list[Path]] | None = None

    def check(self, options: Mapping[str, Any], prefix: str = "") -> None:
        """Check the options' values (``ValueError`` naming ``prefix + key``)."""
        for key, value in options.items():
            if key in self.checks:
                self.checks[key](prefix + key, value)

    def data_folders(self, path: str | None) -> list[Path]:
        """The folders a load with ``path`` may read."""
        if self.folders is not None:
            return self.folders(path)
        if path is None:
            return []
        return [Path(path)]


def _open_unit(name: str, value: Any) -> float:
    return check_number(name, value, 0.0, 1.0, low_open=True, high_open=True)


def _load_huggingface(**options: Any) -> Dataset:
    from adcs.data.huggingface import load_huggingface  # the extra, imported only when used

    return load_huggingface(**options)


_SOURCE = {"name": check_string, "features": check_string, "label": check_string,
           "train_split": check_string, "test_split": check_string}  # fmt: skip
DATASETS: Table[DatasetEntry] = Table(
    "dataset",
    "adcs.datasets",
    {
        "fashion-mnist": DatasetEntry(
            load_fashion_mnist_dataset, frozenset({"path"}), path="folder",
            title="Fashion-MNIST", folders=fashion_mnist_folders,
        ),
        "digits": DatasetEntry(
            load_digits, frozenset({"test_fraction"}), title="Digits (8×8)",
            checks={"test_fraction": _open_unit},
        ),
        "arrays": DatasetEntry(
            load_arrays, frozenset({"path"}), frozenset({"path"}), "file", title="User arrays"
        ),
        "cifar10": DatasetEntry(
            load_cifar10, frozenset({"path"}), frozenset({"path"}), "either", title="CIFAR-10"
        ),
        "femnist": DatasetEntry(
            load_femnist, frozenset({"path"}), frozenset({"path"}), "folder", title="FEMNIST"
        ),
        "synthetic": DatasetEntry(
            Synthetic, frozenset({"n_clients", "alpha", "beta"}), frozenset({"n_clients"}),
            generated=True, title="Synthetic(α, β)",
            checks={"n_clients": check_client_count, "alpha": check_non_negative,
                    "beta": check_non_negative},
        ),
        "huggingface": DatasetEntry(
            _load_huggingface,
            frozenset({"path", "name", "features", "label", "train_split", "test_split"}),
            path="folder", checks=_SOURCE,
        ),
    },
    row_type=DatasetEntry,
)  # fmt: skip
"""The one name → loader table used by configurations."""


def load_dataset(name: str, /, **options: Any) -> Dataset | Synthetic:
    """Load the data set ``name`` of `DATASETS` with its options.

    Raises
    ------
    ValueError
        Unknown name, unknown or missing option.
    FileNotFoundError, ChecksumError, DataError
        From the loader; DataError also when it returns no data set.
    """
    if not DATASETS.recognises(name):
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    entry = DATASETS.resolve(name)
    unknown = sorted(set(options) - entry.keys)
    if unknown:
        raise ValueError(
            f"dataset {name!r} takes no option(s) {unknown}; allowed {sorted(entry.keys)}"
        )
    missing = sorted(entry.required - set(options))
    if missing:
        raise ValueError(f"dataset {name!r} needs the option(s) {missing}")
    loaded = entry.load(**options)
    if not isinstance(loaded, Dataset | FashionMNIST | Synthetic):  # a user's loader broke it
        raise DataError(
            f"dataset {name!r}: its loader returned {type(loaded).__name__}, not a Dataset"
        )
    return loaded
