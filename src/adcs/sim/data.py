"""The clients' data as the simulator sees it.

The engine reads data only through [`ClientData`][adcs.sim.ClientData]: sizes and groups per client,
and the samples of *rows* — integers naming one client's sample — gathered in batches. Two
implementations: [`FederatedData`][adcs.sim.FederatedData] (one in-memory copy of the samples, index
arrays per client) and `adcs.data.synthetic.SyntheticClients` (samples generated on demand from
(seed, client, sample), so a population of 10⁶ clients costs nothing until its clients are used).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_int

if TYPE_CHECKING:
    from adcs.data import Dataset, FashionMNIST, Partition

__all__ = ["PIXEL_SCALE", "ClientData", "FederatedData", "to_unit_float"]

F32Array = NDArray[np.float32]
IntArray = NDArray[np.intp]

PIXEL_SCALE = np.float32(1.0 / 255.0)
"""uint8 pixel p becomes the float32 input ``p * PIXEL_SCALE`` in [0, 1]."""


def to_unit_float(images: NDArray[Any], out: F32Array | None = None) -> F32Array:
    """Model inputs from stored samples: uint8 pixels scaled by
    [`PIXEL_SCALE`][adcs.sim.PIXEL_SCALE], floats as float32.

    Parameters
    ----------
    images : ndarray of shape (..., *input_shape), uint8 or floating
    out : ndarray of float32 with the same shape, optional
        Where to write the result.

    Returns
    -------
    ndarray of float32, same shape as ``images``
    """
    if out is None:
        out = np.empty(images.shape, dtype=np.float32)
    np.copyto(out, images, casting="same_kind")
    if images.dtype == np.uint8:
        out *= PIXEL_SCALE  # the same value as float32(p) * PIXEL_SCALE, computed in two passes
    return out


@runtime_checkable
class ClientData(Protocol):
    """What the simulator reads of the clients' data (docs/design.md §4: cost follows the active clients).

    A *row* is an integer naming one sample of one client; its meaning is the implementation's.
    The engine asks for rows of the clients a round uses and gathers their inputs in blocks, so an
    implementation may hold its samples in memory or generate them on demand.

    Attributes
    ----------
    n_clients, n_classes, n_groups : int
    groups : ndarray of shape (n_clients,), int in [0, n_groups)
        The partition's client groups (else each client's majority label).
    data_sizes, test_sizes : ndarray of shape (n_clients,), int ≥ 1
        Training and test samples per client.
    input_shape : tuple of int
        Shape of one model input.
    """

    @property
    def n_clients(self) -> int: ...

    @property
    def n_classes(self) -> int: ...

    @property
    def n_groups(self) -> int: ...

    @property
    def groups(self) -> IntArray: ...

    @property
    def data_sizes(self) -> IntArray: ...

    @property
    def test_sizes(self) -> IntArray: ...

    @property
    def input_shape(self) -> tuple[int, ...]: ...

    def train_rows(self, clients: IntArray, local: NDArray[np.integer[Any]]) -> IntArray:
        """Rows of local training sample indices ``local`` (n, ...) of ``clients`` (n,)."""
        ...

    def train_batch(self, rows: IntArray) -> tuple[F32Array, IntArray]:
        """Inputs (*rows.shape, *input_shape), float32, and labels (rows.shape) of training rows."""
        ...

    def test_rows(self, clients: IntArray) -> IntArray:
        """The test rows of ``clients``, concatenated in order (client i's test_sizes[i] rows)."""
        ...

    def test_batch(self, rows: IntArray) -> tuple[F32Array, IntArray]:
        """Inputs and labels of test rows (as [`train_batch`][adcs.sim.ClientData.train_batch])."""
        ...


def _readonly(array: NDArray[Any]) -> NDArray[Any]:
    """A read-only view (the caller's own array keeps its flags)."""
    view = array.view()
    view.setflags(write=False)
    return view


def _index_arrays(name: str, arrays: Sequence[ArrayLike], n_rows: int) -> tuple[IntArray, ...]:
    out = []
    for i, values in enumerate(arrays):
        idx = np.asarray(values)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise ValueError(
                f"{name}[{i}] must be a 1-D integer array, got {idx.dtype} {idx.shape}"
            )
        if idx.size == 0:
            raise ValueError(f"{name}[{i}] is empty: every client needs at least one sample")
        if idx.min() < 0 or idx.max() >= n_rows:
            raise ValueError(f"{name}[{i}] holds an index outside [0, {n_rows})")
        out.append(_readonly(idx.astype(np.intp)))
    return tuple(out)


def _samples(name: str, samples: ArrayLike) -> NDArray[Any]:
    array = np.asarray(samples)
    if array.ndim < 2 or array.shape[0] == 0:
        raise ValueError(
            f"{name} must be a non-empty array (n, *input_shape) with at least one input "
            f"dimension, got shape {array.shape}"
        )
    if array.dtype == np.uint8:
        return _readonly(np.ascontiguousarray(array))
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"{name} must be uint8 pixels or floats, got dtype {array.dtype}")
    converted = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(converted).all():
        raise ValueError(f"{name} holds non-finite values")
    return _readonly(converted)


def _labels(name: str, labels: ArrayLike, n_rows: int, n_classes: int) -> IntArray:
    array = np.asarray(labels)
    if array.shape != (n_rows,) or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array of shape ({n_rows},), got {array.shape}")
    if array.min() < 0 or array.max() >= n_classes:
        raise ValueError(f"{name} must lie in [0, n_classes={n_classes})")
    return _readonly(array.astype(np.intp))


@dataclass(frozen=True, eq=False)
class FederatedData:
    """The clients' data, held once in memory; clients own index arrays into it.

    Parameters
    ----------
    train_images : ndarray of shape (n_train, *input_shape), uint8 or floating
        uint8 pixels are kept as they are and scaled to [0, 1] when gathered
        ([`to_unit_float`][adcs.sim.to_unit_float]); floats are stored as float32 and used
        unchanged. ``input_shape`` is anything the model accepts: (784,) for Fashion-MNIST vectors,
        (28, 28, 1) for images.
    train_labels : ndarray of shape (n_train,), int in [0, n_classes)
    test_images : ndarray of shape (n_test, *input_shape)
    test_labels : ndarray of shape (n_test,)
    train_indices : tuple of ndarray, length n_clients
        Client n's training rows (non-empty).
    test_indices : tuple of ndarray, length n_clients
        Client n's test rows (non-empty; clients may share test rows).
    groups : ndarray of shape (n_clients,), int in [0, n_groups)
        The partition's client groups (the paper's 10 groups of 3).
    n_groups : int
    n_classes : int
    """

    train_images: NDArray[Any]
    train_labels: NDArray[np.integer[Any]]
    test_images: NDArray[Any]
    test_labels: NDArray[np.integer[Any]]
    train_indices: tuple[IntArray, ...]
    test_indices: tuple[IntArray, ...]
    groups: IntArray
    n_groups: int
    n_classes: int = 10
    data_sizes: IntArray = field(init=False, repr=False)
    test_sizes: IntArray = field(init=False, repr=False)
    _train_concat: IntArray = field(init=False, repr=False)
    _train_offsets: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_int("n_classes", self.n_classes, minimum=2)
        check_int("n_groups", self.n_groups)
        train_x = _samples("train_images", self.train_images)
        test_x = _samples("test_images", self.test_images)
        if train_x.shape[1:] != test_x.shape[1:]:
            raise ValueError(
                f"train_images has inputs of shape {train_x.shape[1:]} but test_images "
                f"{test_x.shape[1:]}"
            )
        n_train, n_test = train_x.shape[0], test_x.shape[0]
        train_idx = _index_arrays("train_indices", self.train_indices, n_train)
        test_idx = _index_arrays("test_indices", self.test_indices, n_test)
        if len(train_idx) == 0 or len(train_idx) != len(test_idx):
            raise ValueError(
                f"train_indices ({len(train_idx)} clients) and test_indices ({len(test_idx)}) "
                "must name the same, non-zero number of clients"
            )
        groups = np.asarray(self.groups)
        if groups.shape != (len(train_idx),) or not np.issubdtype(groups.dtype, np.integer):
            raise ValueError(f"groups must be an integer array of shape ({len(train_idx)},)")
        if groups.min() < 0 or groups.max() >= self.n_groups:
            raise ValueError(f"groups must lie in [0, n_groups={self.n_groups})")
        sizes = np.array([idx.size for idx in train_idx], dtype=np.intp)
        for name, value in (
            ("train_images", train_x),
            ("test_images", test_x),
            ("train_labels", _labels("train_labels", self.train_labels, n_train, self.n_classes)),
            ("test_labels", _labels("test_labels", self.test_labels, n_test, self.n_classes)),
            ("train_indices", train_idx),
            ("test_indices", test_idx),
            ("groups", _readonly(groups.astype(np.intp))),
            ("n_groups", int(self.n_groups)),
            ("n_classes", int(self.n_classes)),
            ("data_sizes", _readonly(sizes)),
            ("test_sizes", _readonly(np.array([i.size for i in test_idx], dtype=np.intp))),
            ("_train_concat", _readonly(np.concatenate(train_idx))),
            ("_train_offsets", _readonly(np.concatenate([[0], np.cumsum(sizes)[:-1]]))),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def from_partition(
        cls,
        dataset: Dataset | FashionMNIST,
        partition: Partition,
        n_classes: int | None = None,
    ) -> FederatedData:
        """Build from a data set (`adcs.data.Dataset` or `adcs.data.FashionMNIST`)
        and a `adcs.data.Partition`; ``n_classes`` defaults to the data set's (else 10)."""
        if n_classes is None:
            n_classes = int(getattr(dataset, "n_classes", 10))
        return cls(
            train_images=dataset.train_images,
            train_labels=dataset.train_labels,
            test_images=dataset.test_images,
            test_labels=dataset.test_labels,
            train_indices=tuple(partition.train_indices),
            test_indices=tuple(partition.test_indices),
            groups=partition.groups,
            n_groups=partition.n_groups,
            n_classes=n_classes,
        )

    @property
    def n_clients(self) -> int:
        """Number of clients N."""
        return len(self.train_indices)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one model input (e.g. (784,))."""
        return tuple(int(d) for d in self.train_images.shape[1:])

    def train_rows(self, clients: IntArray, local: NDArray[np.integer[Any]]) -> IntArray:
        """Global training rows of local sample indices: ``local`` (n, ...) of ``clients`` (n,)."""
        offsets = self._train_offsets[clients].reshape((-1,) + (1,) * (local.ndim - 1))
        return self._train_concat[local + offsets]

    def gather_train(
        self, rows: IntArray, out: F32Array | None = None, scratch: NDArray[Any] | None = None
    ) -> F32Array:
        """Model inputs of training rows, shape (*rows.shape, *input_shape), float32.

        ``out`` receives the result and ``scratch`` (same shape, the samples' dtype) the raw rows,
        so a caller can gather every round without allocating.
        """
        samples = np.take(self.train_images, rows, axis=0, out=scratch)
        return to_unit_float(samples, out=out)

    def train_batch(self, rows: IntArray) -> tuple[F32Array, IntArray]:
        """Inputs (*rows.shape, *input_shape), float32, and labels (rows.shape) of training rows."""
        return self.gather_train(rows), np.asarray(self.train_labels[rows], dtype=np.intp)

    def test_rows(self, clients: IntArray) -> IntArray:
        """The test rows of ``clients`` (indices into ``test_images``), concatenated in order."""
        if len(clients) == 0:
            return np.empty(0, dtype=np.intp)
        return np.concatenate([self.test_indices[c] for c in clients])

    def test_batch(self, rows: IntArray) -> tuple[F32Array, IntArray]:
        """Inputs and labels of test rows."""
        x = to_unit_float(np.take(self.test_images, rows, axis=0))
        return x, np.asarray(self.test_labels[rows], dtype=np.intp)
