"""A labelled data set in memory (`Dataset`) and the error of a malformed data file.

The types every loader returns and raises (`adcs.data.datasets`, the Hugging Face loader), kept
below them so that no loader and the table that names them import one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int

__all__ = ["DataError", "Dataset"]

IntArray = NDArray[np.intp]


class DataError(ValueError):
    """A data file that is present but malformed; the message names the file and the fault."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A labelled data set in memory: a training split and a test split.

    Attributes
    ----------
    name : str
        The registry name (``"digits"``, ...).
    train_images : ndarray of shape (n_train, *input_shape), uint8 or float32
        Inputs; uint8 pixels are scaled to [0, 1] when gathered, floats used as they are (both
        splits uint8, or neither).
    train_labels : ndarray of shape (n_train,), int in [0, n_classes)
    test_images : ndarray of shape (n_test, *input_shape)
    test_labels : ndarray of shape (n_test,)
    n_classes : int
    source : str
        Where the data came from, in words.
    is_subset : bool
        A reduced stand-in for the full data set (Fashion-MNIST's shipped subset).
    checksums : dict of str to str
        File name → MD5 of what was read.
    train_writers, test_writers : ndarray of shape (n_train,) / (n_test,), int, or None
        The natural client of each sample (FEMNIST's writers), for the ``natural`` partition.
    """

    name: str
    train_images: NDArray[Any]
    train_labels: NDArray[np.integer[Any]]
    test_images: NDArray[Any]
    test_labels: NDArray[np.integer[Any]]
    n_classes: int
    source: str
    is_subset: bool = False
    checksums: dict[str, str] = field(default_factory=dict)
    train_writers: IntArray | None = None
    test_writers: IntArray | None = None

    def __post_init__(self) -> None:
        check_int("n_classes", self.n_classes, minimum=2)
        for split in ("train", "test"):
            x = np.asarray(getattr(self, f"{split}_images"))
            y = np.asarray(getattr(self, f"{split}_labels"))
            if x.ndim < 2 or x.shape[0] == 0:
                raise DataError(f"{self.name}: {split} inputs must be (n, ...), got {x.shape}")
            if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
                raise DataError(
                    f"{self.name}: {split} labels must be {x.shape[0]} integers, got "
                    f"{y.dtype} {y.shape}"
                )
            if y.min() < 0 or y.max() >= self.n_classes:
                raise DataError(f"{self.name}: {split} labels must lie in [0, {self.n_classes})")
            writers = getattr(self, f"{split}_writers")
            if writers is not None and np.shape(writers) != (x.shape[0],):
                raise DataError(f"{self.name}: {split}_writers must name one writer per sample")
        if self.train_images.shape[1:] != self.test_images.shape[1:]:
            raise DataError(
                f"{self.name}: train inputs {self.train_images.shape[1:]} and test inputs "
                f"{self.test_images.shape[1:]} differ in shape"
            )
        pixels = [np.asarray(x).dtype == np.uint8 for x in (self.train_images, self.test_images)]
        if pixels[0] != pixels[1]:  # one split would be scaled to [0, 1], the other not
            raise DataError(
                f"{self.name}: train inputs are {np.asarray(self.train_images).dtype} and test "
                f"inputs {np.asarray(self.test_images).dtype}; uint8 pixels are scaled to [0, 1] "
                "and numbers used as they are, so both splits must be uint8 or neither"
            )

    @property
    def n_train(self) -> int:
        return int(self.train_labels.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.test_labels.shape[0])
