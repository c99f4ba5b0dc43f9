"""Hugging Face data sets (docs/design.md §7).

``[data] dataset = "huggingface"`` loads a data set from a folder written by
``datasets.DatasetDict.save_to_disk`` (``path``, offline) or from the Hub by ``name`` (online), with
its input and label columns named (``features``, ``label``) and its two splits (``train_split``,
``test_split``). Inputs become arrays of any shape (images as uint8 pixels). Flower Datasets'
partitioners are `adcs.data.flwr_partitions`.

It needs the ``huggingface`` extra (``datasets``), imported here only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from adcs.data.base import DataError, Dataset

__all__ = ["load_huggingface"]


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ImportError(
            'Hugging Face data sets need the huggingface extra: pip install "adcs[huggingface]"'
        ) from None
    return datasets


def _inputs(*splits: np.ndarray) -> list[np.ndarray]:
    """Integers in [0, 255] in every split as uint8 pixels (scaled when used), else float32."""
    pixels = all(
        np.issubdtype(x.dtype, np.integer) and (x.size == 0 or (x.min() >= 0 and x.max() <= 255))
        for x in splits
    )
    return [x.astype(np.uint8 if pixels else np.float32) for x in splits]


def _column(split: Any, column: str, where: str) -> np.ndarray:
    if column not in split.column_names:
        raise DataError(f"{where} has no column {column!r}; its columns: {split.column_names}")
    values = split.with_format("numpy")[column]
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values
    try:  # e.g. images of one size come back as a list of arrays
        return np.stack([np.asarray(v) for v in values])
    except ValueError as exc:
        raise DataError(f"{where}: column {column!r} holds inputs of different shapes") from exc


def load_huggingface(
    path: str | None = None,
    name: str | None = None,
    features: str = "image",
    label: str = "label",
    train_split: str = "train",
    test_split: str = "test",
) -> Dataset:
    """A Hugging Face data set as a `Dataset`.

    Parameters
    ----------
    path : str, optional
        A folder written by ``save_to_disk`` (a ``DatasetDict`` with both splits).
    name : str, optional
        A Hub data set (downloaded; needs the network). Give ``path`` or ``name``.
    features, label : str
        The input column (images, or arrays of numbers) and the integer label column.
    train_split, test_split : str

    Raises
    ------
    FileNotFoundError
        ``path`` holds no saved data set.
    DataError
        A split or column is missing, labels are not integers from 0, inputs differ in shape.
    """
    datasets = _datasets()
    if (path is None) == (name is None):
        raise ValueError("dataset 'huggingface' needs exactly one of path (a saved folder) or name")
    if path is not None:
        try:
            loaded = datasets.load_from_disk(path)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"huggingface: no data set saved in {path}: {exc}") from None
        source = f"Hugging Face data set saved in {path}"
    else:
        hub_log = logging.getLogger("huggingface_hub")  # one retry line per attempt, offline
        level = hub_log.level
        hub_log.setLevel(logging.ERROR)
        try:
            loaded = datasets.load_dataset(name)
        finally:
            hub_log.setLevel(level)
        source = f"Hugging Face Hub data set {name!r}"
    splits = {}
    for split in (train_split, test_split):
        if not isinstance(loaded, Mapping) or split not in loaded:
            have = list(loaded) if isinstance(loaded, Mapping) else "one split only"
            raise DataError(f"huggingface: {source} has no split {split!r} (it has {have})")
        x = _column(loaded[split], features, f"{source}, split {split!r},")
        y = _column(loaded[split], label, f"{source}, split {split!r},")
        if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1 or (y < 0).any():
            raise DataError(f"huggingface: {label!r} must hold integer labels from 0")
        if x.ndim == 1:
            x = x[:, None]
        if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
            raise DataError(f"huggingface: {features!r} must hold numbers, got {x.dtype}")
        splits[split] = (x, y.astype(np.int64))
        fingerprint = getattr(loaded[split], "_fingerprint", None)
        if fingerprint:
            splits[f"{split}#"] = fingerprint
    (x_train, y_train), (x_test, y_test) = splits[train_split], splits[test_split]
    x_train, x_test = _inputs(x_train, x_test)
    return Dataset(
        "huggingface", x_train, y_train, x_test, y_test,
        n_classes=int(max(y_train.max(), y_test.max())) + 1, source=source,
        checksums={k: str(v) for k, v in splits.items() if k.endswith("#")},
    )  # fmt: skip
