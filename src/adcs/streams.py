"""Counter-based random streams: every draw is a pure function of what it is about (docs/design.md §4).

A client's minibatch at round t depends only on (stream key, client, t); a dropout draw on
(stream key, client, t); a model's dropout mask entry on (stream key, client, t, local step,
sample of the minibatch, layer, unit); a round's availability mask on (stream key, t); a scheduler's generator on
(seed, run id). Nothing depends on who else is active, on a run's position in a batch, on the
number of workers, or on whether the simulator or a Flower client computes it — so the simulator
and a Flower deployment can be compared round by round, and methods of one seed are compared on
the same sample path (common random numbers).

Per-client draws use a SplitMix64-style hash of the counters (Steele, Lea & Flood 2014), vectorised
over clients; whole-population draws per round use NumPy's Philox keyed by the stream and counted
by the round.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs._validate import check_int

__all__ = [
    "Domain",
    "counter_normal",
    "counter_uniform",
    "dropout_keep",
    "minibatch_indices",
    "round_generator",
    "run_key",
    "scheduler_rng",
    "stream_key",
]

U64 = NDArray[np.uint64]
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


class Domain:
    """Distinct counter domains, so that no two kinds of draw ever share random numbers."""

    SCHEDULER = 0
    MINIBATCH = 1
    AVAILABILITY = 2
    DROPOUT = 3
    SHUFFLE = 4
    SYSTEM = 5
    SKETCH = 6
    EVALUATION = 7
    DATA = 8
    ATTACK = 9  # adversaries: a seed's malicious set, the directions liars report
    PRIVACY = 10  # the private probe channel's noise (adcs.privacy)
    UNITS = 11  # a model's dropout masks in local training (`dropout_keep`)


def _mix_int(z: int) -> int:
    z = (z + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


_GOLDEN_U = np.uint64(_GOLDEN)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_S11, _S32 = np.uint64(11), np.uint64(32)


def _mix(z: U64) -> U64:
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic; ``z`` is overwritten)."""
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return z


def _fold_int(key: int, *words: int) -> int:
    for word in words:
        key = _mix_int(key ^ _mix_int(word & _MASK))
    return key


def run_key(run_id: str) -> tuple[int, int, int, int]:
    """Four 32-bit words identifying ``run_id`` (its SHA-256 prefix)."""
    if not isinstance(run_id, str):
        raise ValueError(f"run_id must be a string, got {type(run_id).__name__} {run_id!r}")
    digest = hashlib.sha256(run_id.encode("utf-8")).digest()
    w = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return w[0], w[1], w[2], w[3]


def stream_key(seed: int, run_id: str | None = None) -> int:
    """The 64-bit key of a data stream: of ``seed`` alone (shared by its runs) or of (seed, run id)."""
    seed = check_int("seed", seed, minimum=0)
    words = () if run_id is None else run_key(run_id)
    return _fold_int(_mix_int(seed), *words)


def scheduler_rng(seed: int, run_id: str) -> np.random.Generator:
    """The scheduler's generator of run ``(seed, run_id)`` (independent of every other run)."""
    seed = check_int("seed", seed, minimum=0)
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=(Domain.SCHEDULER, *run_key(run_id)))
    )


def round_generator(key: int, domain: int, round_idx: int) -> np.random.Generator:
    """A generator for population-wide draws of one round (Philox keyed by stream and domain)."""
    k = _fold_int(key, domain)
    # The round is the counter's second word: a round's draws advance the first word only, so
    # two rounds never share random numbers.
    counter = np.array([0, round_idx, 0, 0], dtype=np.uint64)
    return np.random.Generator(
        np.random.Philox(key=np.array([k, _mix_int(k)], dtype=np.uint64), counter=counter)
    )


def counter_uniform(
    key: int,
    domain: int,
    round_idx: int,
    rows: ArrayLike,
    width: int | None = None,
    *,
    salt: int = 0,
) -> NDArray[np.float64]:
    """Uniform numbers in [0, 1) indexed by (domain, round, salt, row[, column]).

    Row r's numbers are a SplitMix64 stream seeded by a hash of (key, domain, round, salt, r), so
    ``counter_uniform(k, Domain.DROPOUT, t, clients)`` gives each client a number that does not
    depend on which other clients are asked for.

    Parameters
    ----------
    key : int
        Stream key ([`stream_key`][adcs.sim.stream_key]).
    domain, round_idx, salt : int
        Counters shared by all rows.
    rows : ndarray of shape (n,), int ≥ 0
        Row counters (e.g. client indices).
    width : int, optional
        Numbers per row.

    Returns
    -------
    ndarray of shape (n,) or (n, width), float64
    """
    h = _hash(key, domain, round_idx, salt, rows, width)
    return (h >> _S11).astype(np.float64) * 2.0**-53


_S40 = np.uint64(40)
_S8 = np.uint64(8)
_U24 = np.float32(2.0**-24)
_HALF = np.float32(0.5)
_TWO_PI_U24 = np.float32(2.0 * np.pi * 2.0**-24)


def counter_normal(
    key: int,
    domain: int,
    round_idx: int,
    rows: ArrayLike,
    width: int,
    *,
    salt: int = 0,
) -> NDArray[np.float32]:
    """Standard normal numbers indexed by (domain, round, salt, row, column), float32.

    The counter-based counterpart of `counter_uniform` for generated data (e.g. a synthetic
    client's parameters and samples as a pure function of the client): each 64-bit hash gives two
    24-bit uniforms and, by the Box–Muller transform, two normals. The 24-bit grid bounds the
    values by about 5.9 in absolute value (a tail of probability 4e-9 is cut).

    Parameters
    ----------
    key : int
        Stream key ([`stream_key`][adcs.sim.stream_key]).
    domain, round_idx, salt : int
        Counters shared by all rows.
    rows : ndarray of shape (n,), int ≥ 0
        Row counters (any 64-bit integers, e.g. ``client << 32 | sample``).
    width : int
        Numbers per row (≥ 1).

    Returns
    -------
    ndarray of shape (n, width), float32
    """
    width = check_int("width", width)
    pairs = (width + 1) // 2
    bits = _hash(key, domain, round_idx, salt, rows, pairs)
    u1 = (bits >> _S40).astype(np.float32)
    u1 += _HALF
    u1 *= _U24  # in (0, 1): the logarithm is finite
    theta = ((bits >> _S8) & np.uint64(0xFFFFFF)).astype(np.float32)
    theta *= _TWO_PI_U24
    radius = np.log(u1, out=u1)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    out = np.empty((bits.shape[0], 2 * pairs), dtype=np.float32)
    np.multiply(radius, np.cos(theta), out=out[:, :pairs])
    np.multiply(radius, np.sin(theta), out=out[:, pairs:])
    return out if width == 2 * pairs else np.ascontiguousarray(out[:, :width])


def dropout_keep(
    key: int,
    round_idx: int,
    clients: ArrayLike,
    local_step: int,
    batch_size: int,
    layer: int,
    width: int,
    p: float,
) -> NDArray[np.bool_]:
    """Which units a model's dropout layer keeps, per listed client and minibatch sample.

    Entry [i, b, u] is kept when a uniform number in [0, 1) indexed by (``key``, round, local
    step, layer, client i, sample b of its minibatch, unit u) is ≥ ``p``: a pure function of
    those counters, so a client's masks are the same whoever else is asked for, however the
    jobs are batched, on any number of workers and on resume. Row counters are
    ``client << 32 | b`` (`counter_uniform`'s rows); the local step and the layer are the salt.

    Parameters
    ----------
    key : int
        Stream key (the minibatches' [`stream_key`][adcs.sim.stream_key]).
    round_idx, local_step, layer : int
        t ≥ 0, the local step e ≥ 0 and the dropout layer's index ≥ 0 (< 2¹⁶).
    clients : ndarray of shape (n,), int in [0, 2³¹)
        Client indices (any order, repeats allowed).
    batch_size, width : int
        B ≥ 1 samples per minibatch and the layer's units per sample (≥ 1).
    p : float
        Drop probability in [0, 1).

    Returns
    -------
    ndarray of shape (n, B, width), bool
        True where the unit is kept.
    """
    clients = np.asarray(clients, dtype=np.int64).reshape(-1)
    if clients.size and (clients.min() < 0 or clients.max() >= 1 << 31):
        raise ValueError("clients must be in [0, 2**31)")
    check_int("round_idx", round_idx, minimum=0)
    step = check_int("local_step", local_step, minimum=0)
    layer = check_int("layer", layer, minimum=0)
    if layer >= 1 << 16:
        raise ValueError(f"layer must be < 65536, got {layer}")
    batch = check_int("batch_size", batch_size)
    width = check_int("width", width)
    if not (isinstance(p, int | float) and 0.0 <= p < 1.0):
        raise ValueError(f"p must be in [0, 1), got {p!r}")
    rows = (clients[:, None] << 32) | np.arange(batch, dtype=np.int64)[None, :]
    bits = _hash(key, Domain.UNITS, round_idx, (step << 16) | layer, rows.reshape(-1), width)
    uniform = (bits >> _S11).astype(np.float64) * 2.0**-53
    return (uniform >= p).reshape(clients.size, batch, width)


@functools.lru_cache(maxsize=64)
def _steps(width: int) -> U64:
    steps = np.arange(1, width + 1, dtype=np.uint64) * _GOLDEN_U
    steps.setflags(write=False)
    return steps


def _hash(
    key: int, domain: int, round_idx: int, salt: int, rows: ArrayLike, width: int | None
) -> U64:
    """64 random bits per (row[, column]): see `counter_uniform`."""
    base = np.uint64(_fold_int(key, domain, round_idx, salt))
    row_key = np.asarray(rows).astype(np.uint64)
    row_key *= _GOLDEN_U
    row_key ^= base
    row_key = _mix(row_key)
    if width is None:
        row_key += _GOLDEN_U
        return _mix(row_key)
    return _mix(row_key[..., None] + _steps(width))


def _hash_rounds(
    key: int, domain: int, first: int, n_rounds: int, rows: NDArray[Any], width: int
) -> U64:
    """`_hash` with ``width`` columns at rounds first, …, first + n_rounds − 1 (salt 0),
    shape (n_rounds, n_rows, width): the same bits, hashed for many rounds at once."""
    bases = np.array(
        [_fold_int(key, domain, first + r, 0) for r in range(n_rounds)], dtype=np.uint64
    )
    row_key = np.asarray(rows).astype(np.uint64)
    row_key *= _GOLDEN_U
    mixed = _mix(row_key[None, :] ^ bases[:, None])
    return _mix(mixed[..., None] + _steps(width))


def _has_repeat(rows: NDArray[np.int64]) -> NDArray[np.bool_]:
    ordered = np.sort(rows, axis=-1)
    return np.asarray((ordered[..., 1:] == ordered[..., :-1]).any(axis=-1))


def _shuffled(
    key: int, round_idx: int, clients: NDArray[Any], size: int, count: int
) -> NDArray[Any]:
    """The first ``count`` entries of back-to-back random permutations of range(size), per client."""
    n_shuffles = -(-count // size)
    keys = counter_uniform(key, Domain.SHUFFLE, round_idx, clients, n_shuffles * size)
    order = np.argsort(keys.reshape(clients.size, n_shuffles, size), axis=-1, kind="stable")
    return order.reshape(clients.size, n_shuffles * size)[:, :count]


def minibatch_indices(
    key: int,
    clients: ArrayLike,
    round_idx: int,
    sizes: ArrayLike,
    local_steps: int,
    batch_size: int,
) -> NDArray[np.int64]:
    """The local sample indices each listed client trains on at one round.

    Every (client, round) gets E·B indices into the client's own data: the first E minibatches of a
    fresh uniform shuffle, i.e. E·B distinct indices drawn uniformly, in order (whole shuffles back
    to back when the client holds fewer than E·B samples). The draw is a pure function of
    (``key``, client, ``round_idx``) and the client's size: the same whoever else is asked.

    Parameters
    ----------
    key : int
        Stream key ([`stream_key`][adcs.sim.stream_key]).
    clients : ndarray of shape (n,), int
        Client indices (any order, repeats allowed).
    round_idx : int
        t ≥ 0.
    sizes : ndarray of shape (n,), int ≥ 1
        Number of training samples of each listed client.
    local_steps, batch_size : int
        E and B.

    Returns
    -------
    ndarray of shape (n, E, B), int64
        Minibatch e of the i-th listed client is ``out[i, e]``.
    """
    clients = np.asarray(clients, dtype=np.int64).reshape(-1)
    sizes = np.asarray(sizes, dtype=np.int64).reshape(-1)
    if clients.shape != sizes.shape:
        raise ValueError(f"clients {clients.shape} and sizes {sizes.shape} must match")
    if clients.size and (clients.min() < 0 or sizes.min() < 1):
        raise ValueError("clients must be >= 0 and every size >= 1")
    round_idx = check_int("round_idx", round_idx, minimum=0)
    per = check_int("local_steps", local_steps) * check_int("batch_size", batch_size)
    out = _draw(key, clients, round_idx, sizes, per)
    return out.reshape(clients.size, local_steps, batch_size)


def _first_distinct(row: NDArray[np.int64], count: int) -> list[int] | None:
    """The first ``count`` distinct entries of ``row`` in order (None if it has fewer)."""
    seen: dict[int, None] = {}
    for value in row.tolist():
        seen.setdefault(value)
        if len(seen) == count:
            return list(seen)
    return None


def _draw(
    key: int, clients: NDArray[np.int64], round_idx: int, sizes: NDArray[np.int64], per: int
) -> NDArray[np.int64]:
    """[`minibatch_indices`][adcs.sim.minibatch_indices] without the checks, shape (n, per)."""
    return _draw_rounds(key, clients, round_idx, 1, sizes, per)[0]


def _draw_rounds(
    key: int,
    clients: NDArray[np.int64],
    first: int,
    n_rounds: int,
    sizes: NDArray[np.int64],
    per: int,
) -> NDArray[np.int64]:
    """`_draw` at rounds first, …, first + n_rounds − 1, shape (n_rounds, n, per).

    Sequential rejection: a row's uniform draws are scanned in order and repeats skipped, which
    samples without replacement exactly. A client with size ≥ 2·per scans its first
    per + 4 + ⌈per²/size⌉ draws (expected repeats: about per²/(2·size)); the rare client that
    finds too few distinct values there, and smaller clients, take a uniform shuffle instead.
    Every choice depends on the client's own size and the round only, never on the other
    clients asked or on how many rounds are drawn at once.
    """
    direct = np.repeat((sizes >= 2 * per)[None, :], n_rounds, axis=0)  # (n_rounds, n)
    cols = np.flatnonzero(direct[0])
    everyone = cols.size == clients.size
    own = sizes[cols]
    if per == 1:
        width = np.ones_like(own)
    else:
        width = per + 4 + -(-(per * per) // np.maximum(own, 1))
    bits = _hash_rounds(
        key, Domain.MINIBATCH, first, n_rounds, clients[cols], int(width.max(initial=1))
    )
    bits >>= _S32
    bits *= own.astype(np.uint64)[:, None]
    bits >>= _S32  # ⌊u · size⌋ for u = top 32 bits / 2³² (bias below size / 2³²)
    drawn = bits.astype(np.int64)
    out = drawn[..., :per]
    if per > 1:
        head = np.sort(out, axis=-1)
        repeats = (head[..., 1:] == head[..., :-1]).any(axis=-1)
        for r, i in zip(*np.nonzero(repeats), strict=True):
            fixed = _first_distinct(drawn[r, i, : width[i]], per)
            if fixed is None:
                direct[r, cols[i]] = False
            else:
                out[r, i] = fixed
    if everyone and direct.all():
        return np.ascontiguousarray(out)
    full = np.empty((n_rounds, clients.size, per), dtype=np.int64)
    full[:, cols] = out
    for r in range(n_rounds):
        for size in np.unique(sizes[~direct[r]]):
            which = np.flatnonzero(~direct[r] & (sizes == size))
            full[r, which] = _shuffled(key, first + r, clients[which], int(size), per)
    return full
