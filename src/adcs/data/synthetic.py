"""Synthetic(α, β) (Shamir et al. 2014, as in FedProx and LEAF): any number of clients, on demand.

Client k of the population draws u_k ~ N(0, α²) and B_k ~ N(0, β²); its model is
W_k ~ N(u_k, 1)^{60×10}, b_k ~ N(u_k, 1)^{10}; its inputs are x ~ N(v_k, Σ) with v_k ~ N(B_k, 1)^{60}
and Σ = diag(j^{−1.2}); its labels are y = argmax(W_kᵀ x + b_k). It holds n_k = ⌊e^z⌋ + 50
samples with z ~ N(4, 2²) (a heavy-tailed, power-law-like spread of sizes), of which the first
⌊0.9 n_k⌋ are its training data and the rest its test data (the generators' 90/10 split). α sets
how much the clients' models differ, β how much their inputs do; Synthetic(1, 1) is the usual
heterogeneous setting. (The published generators draw u_k and B_k with standard deviation α and
β; so does this one.)

Every number is a counter-based function (`adcs.streams.counter_normal`) of the data key,
the client and the sample: a client's parameters of (key, k), sample i of (key, k, i). Nothing is
generated for a client until a round uses it, so a population of 10⁶ clients costs O(N) memory
(its sizes) and no time until then; the same client always holds the same data, whoever else is
asked and whatever N is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int, check_number
from adcs.streams import Domain, counter_normal

__all__ = ["INPUT_DIM", "N_CLASSES", "Synthetic", "SyntheticClients"]

F32Array = NDArray[np.float32]
IntArray = NDArray[np.intp]

INPUT_DIM = 60
N_CLASSES = 10
SIZE_MEAN_LOG, SIZE_STD_LOG, SIZE_MIN = 4.0, 2.0, 50
TRAIN_FRACTION = 0.9

# salts: the kinds of number a client owns, never sharing a counter
_SIZE, _PARAMS, _SAMPLE = 1, 2, 3
_N_PARAMS = 2 + INPUT_DIM + INPUT_DIM * N_CLASSES + N_CLASSES  # u, B, v, W, b
_SAMPLE_BITS = 32
_ROWS_PER_BLOCK = 4096
"""Samples generated together (each gathers its client's 60 × 10 model for the label product)."""
_CLIENTS_PER_BLOCK = 8192
_INPUT_STD = np.power(np.arange(1, INPUT_DIM + 1, dtype=np.float64), -0.6).astype(np.float32)
"""√Σ_jj = j^{−0.6}."""


@dataclass(frozen=True)
class Synthetic:
    """The Synthetic(α, β) data set of ``n_clients`` clients (the ``synthetic`` dataset).

    Parameters
    ----------
    n_clients : int
        N ≥ 1.
    alpha, beta : float
        α ≥ 0 (spread of the clients' models) and β ≥ 0 (spread of their inputs).

    Notes
    -----
    It has a natural partition only (each client's own data): see `clients`.
    """

    n_clients: int
    alpha: float = 1.0
    beta: float = 1.0

    def __post_init__(self) -> None:
        check_int("n_clients", self.n_clients, maximum=2**31 - 1)
        check_number("alpha", self.alpha, 0.0)
        check_number("beta", self.beta, 0.0)

    n_classes = N_CLASSES
    is_subset = False

    @property
    def source(self) -> str:
        return f"generated Synthetic({self.alpha:g}, {self.beta:g}), {self.n_clients} clients"

    @property
    def checksums(self) -> dict[str, str]:
        return {}

    def clients(self, rng: np.random.Generator) -> SyntheticClients:
        """The population, its data key drawn from ``rng`` (the partition's generator)."""
        key = int(rng.integers(0, 2**63 - 1))
        return SyntheticClients(self.n_clients, self.alpha, self.beta, key)


def _sizes(key: int, clients: IntArray) -> NDArray[np.int64]:
    z = counter_normal(key, Domain.DATA, 0, clients, 1, salt=_SIZE)[:, 0].astype(np.float64)
    return np.floor(np.exp(SIZE_MEAN_LOG + SIZE_STD_LOG * z)).astype(np.int64) + SIZE_MIN


def _offsets(sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    out = np.zeros(sizes.size, dtype=np.int64)
    np.cumsum(sizes[:-1], out=out[1:])
    return out


class SyntheticClients:
    """The clients of `Synthetic`, generated on demand (a
    [`adcs.sim.ClientData`][adcs.sim.ClientData]).

    Rows: training row ``train_offsets[k] + i`` is client k's training sample i; test row
    ``test_offsets[k] + j`` its test sample j (its sample ⌊0.9 n_k⌋ + j).

    Parameters
    ----------
    n_clients : int
    alpha, beta : float
    key : int
        The data key: every number is a function of (key, client, sample).
    """

    def __init__(self, n_clients: int, alpha: float, beta: float, key: int) -> None:
        self._spec = Synthetic(n_clients, alpha, beta)
        self.key = int(key)
        total = _sizes(self.key, np.arange(n_clients, dtype=np.intp))
        train = np.floor(TRAIN_FRACTION * total).astype(np.int64)
        self._train_sizes = _readonly(train.astype(np.intp))
        self._test_sizes = _readonly((total - train).astype(np.intp))
        self._train_offsets = _readonly(_offsets(train))
        self._test_offsets = _readonly(_offsets(total - train))
        self._groups: IntArray | None = None

    # -- ClientData ---------------------------------------------------------------------------

    @property
    def n_clients(self) -> int:
        return self._spec.n_clients

    @property
    def n_classes(self) -> int:
        return N_CLASSES

    @property
    def n_groups(self) -> int:
        return N_CLASSES

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (INPUT_DIM,)

    @property
    def data_sizes(self) -> IntArray:
        return self._train_sizes

    @property
    def test_sizes(self) -> IntArray:
        return self._test_sizes

    @property
    def groups(self) -> IntArray:
        """Each client's majority label, taken as the label of its mean input v_k.

        The inputs' spread around v_k is small beside v_k's (Σ_jj = j^{−1.2}), so this is the label
        most of the client's samples carry; it costs the client's parameters only (generated once
        for the whole population, in blocks, the first time the groups are asked for).
        """
        if self._groups is None:
            groups = np.empty(self.n_clients, dtype=np.intp)
            for start in range(0, self.n_clients, _CLIENTS_PER_BLOCK):
                block = np.arange(start, min(start + _CLIENTS_PER_BLOCK, self.n_clients))
                mean_x, weights, bias = self._parameters(block)
                logits = np.einsum("kj,kjc->kc", mean_x, weights) + bias
                groups[block] = np.argmax(logits, axis=1)
            self._groups = _readonly(groups)
        return self._groups

    def train_rows(self, clients: IntArray, local: NDArray[np.integer[Any]]) -> IntArray:
        offsets = self._train_offsets[clients].reshape((-1,) + (1,) * (local.ndim - 1))
        return np.asarray(local + offsets, dtype=np.intp)

    def train_batch(self, rows: IntArray) -> tuple[F32Array, IntArray]:
        flat = np.asarray(rows, dtype=np.int64).reshape(-1)
        client = _owners(self._train_offsets, self._train_sizes, np.asarray(rows, dtype=np.int64))
        x, y = self._samples(client, flat - self._train_offsets[client])
        return x.reshape(*np.shape(rows), INPUT_DIM), y.reshape(np.shape(rows))

    def test_rows(self, clients: IntArray) -> IntArray:
        clients = np.asarray(clients, dtype=np.intp)
        sizes = self._test_sizes[clients]
        starts = np.repeat(self._test_offsets[clients] - _offsets(sizes), sizes)
        return np.asarray(starts + np.arange(int(sizes.sum())), dtype=np.intp)

    def test_batch(self, rows: IntArray) -> tuple[F32Array, IntArray]:
        flat = np.asarray(rows, dtype=np.int64).reshape(-1)
        client = np.searchsorted(self._test_offsets, flat, side="right") - 1
        local = self._train_sizes[client] + (flat - self._test_offsets[client])
        x, y = self._samples(client, local)
        return x.reshape(*np.shape(rows), INPUT_DIM), y.reshape(np.shape(rows))

    # -- generation ---------------------------------------------------------------------------

    def _parameters(self, clients: IntArray) -> tuple[F32Array, F32Array, F32Array]:
        """v_k (n, 60), W_k (n, 60, 10) and b_k (n, 10) of distinct clients."""
        z = counter_normal(self.key, Domain.DATA, 0, clients, _N_PARAMS, salt=_PARAMS)
        u = np.float32(self._spec.alpha) * z[:, :1]
        shift = np.float32(self._spec.beta) * z[:, 1:2]
        d, c = INPUT_DIM, N_CLASSES
        mean_x = z[:, 2 : 2 + d] + shift
        weights = (z[:, 2 + d : 2 + d + d * c] + u).reshape(-1, d, c)
        bias = z[:, 2 + d + d * c :] + u
        return mean_x, weights, bias

    def _samples(
        self, client: NDArray[np.int64], local: NDArray[np.int64]
    ) -> tuple[F32Array, IntArray]:
        """Inputs (n, 60) and labels (n,) of samples ``local`` of ``client`` (both (n,))."""
        x = np.empty((client.size, INPUT_DIM), dtype=np.float32)
        y = np.empty(client.size, dtype=np.intp)
        if client.size == 0:
            return x, y
        owners, inverse, counts = np.unique(client, return_inverse=True, return_counts=True)
        mean_x, weights, bias = self._parameters(owners.astype(np.intp))
        ids = (client.astype(np.uint64) << np.uint64(_SAMPLE_BITS)) | local.astype(np.uint64)
        for start in range(0, client.size, _ROWS_PER_BLOCK):
            part = slice(start, start + _ROWS_PER_BLOCK)
            noise = counter_normal(self.key, Domain.DATA, 0, ids[part], INPUT_DIM, salt=_SAMPLE)
            noise *= _INPUT_STD
            noise += mean_x[inverse[part]]
            x[part] = noise
        if counts.min() == counts.max() and np.all(
            inverse.reshape(owners.size, -1) == np.arange(owners.size)[:, None]
        ):
            # rows grouped by client, equally many each (a round's minibatches): one batched
            # product per client, no per-row copy of its model
            logits = np.matmul(x.reshape(owners.size, -1, INPUT_DIM), weights) + bias[:, None]
            y[:] = np.argmax(logits, axis=2).reshape(-1)
            return x, y
        for start in range(0, client.size, _ROWS_PER_BLOCK):
            part = slice(start, start + _ROWS_PER_BLOCK)
            who = inverse[part]
            logits = np.matmul(x[part, None, :], weights[who])[:, 0] + bias[who]
            y[part] = np.argmax(logits, axis=1)
        return x, y


def _owners(
    offsets: NDArray[np.int64], sizes: NDArray[Any], rows: NDArray[np.int64]
) -> NDArray[np.int64]:
    """The client of each row (flattened), given the clients' first rows and sizes, (n,) each.

    A round's minibatches come one client per row of ``rows`` (n, E·B): the client of each
    row's first element is looked up, and used for the whole row when every element lies in
    that client's range (one search per client instead of per sample, which matters when the
    offsets do not fit in the cache: 10⁶ clients); otherwise every element is looked up.
    """
    flat = rows.reshape(-1)
    if rows.ndim == 2 and rows.shape[1] > 1:
        first = np.searchsorted(offsets, rows[:, 0], side="right") - 1
        start = offsets[first, None]
        if np.all((rows >= start) & (rows < start + sizes[first, None])):
            return np.repeat(first, rows.shape[1])
    return np.searchsorted(offsets, flat, side="right") - 1


def _readonly(array: NDArray[Any]) -> NDArray[Any]:
    array.setflags(write=False)
    return array
