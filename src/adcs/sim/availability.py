"""Which clients can be selected each round (docs/design.md §4): always, Bernoulli, cyclic, or a trace.

A model's mask at round t is a pure function of (seed, t) — the same for every method of a seed —
given by [`Availability.mask`][adcs.sim.Availability.mask]. Masks are inputs of the round;
schedulers select min(m, available) of the available clients ([`adcs.round.contract`][adcs.round.contract]).
"""

from __future__ import annotations

import csv
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_int, check_number, check_string
from adcs.registry import Registry
from adcs.streams import Domain, counter_uniform, round_generator

__all__ = [
    "AVAILABILITY",
    "AlwaysAvailable",
    "Availability",
    "BernoulliAvailability",
    "CyclicAvailability",
    "TraceAvailability",
    "TraceFile",
]

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]


@runtime_checkable
class Availability(Protocol):
    """A client-availability model."""

    @property
    def kind(self) -> str:
        """Its name in configs and records ("always", "bernoulli", "cyclic", "trace")."""
        ...

    def mask(self, key: int, round_idx: int, groups: IntArray) -> BoolArray:
        """The clients available at round ``round_idx``, shape (n_clients,).

        ``key`` is the seed's stream key ([`adcs.streams.stream_key`][adcs.sim.stream_key]);
        ``groups`` the partition's group of each client.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Its parameters, for manifests and for regenerating masks."""
        ...


@dataclass(frozen=True)
class AlwaysAvailable:
    """Every client, every round (the paper's setting)."""

    @property
    def kind(self) -> str:
        return "always"

    def mask(self, key: int, round_idx: int, groups: IntArray) -> BoolArray:
        return np.ones(groups.shape[0], dtype=bool)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}


_SKIP_BLOCK = 4096
"""Geometric skips drawn per block (32 KiB of float64: the block's passes stay in cache)."""


@dataclass(frozen=True)
class BernoulliAvailability:
    """Each client independently available with probability ``p`` each round.

    Parameters
    ----------
    p : float
        Each client's probability of being available, in (0, 1].
    """

    p: float

    def __post_init__(self) -> None:
        check_number("availability.p", self.p, 0.0, 1.0, low_open=True)

    @property
    def kind(self) -> str:
        return "bernoulli"

    def mask(self, key: int, round_idx: int, groups: IntArray) -> BoolArray:
        mask = np.zeros(groups.shape[0], dtype=bool)
        mask[self.available_clients(key, round_idx, groups.shape[0])] = True
        return mask

    def available_clients(self, key: int, round_idx: int, n_clients: int) -> IntArray:
        """The clients available at round ``round_idx``, ascending: the indices of `mask`.

        Drawn by geometric skips, so the cost follows the ≈ p·N available clients, not N: the
        gap from one available client to the next is 1 + ⌊E / λ⌋ with E standard exponential and
        λ = −ln(1 − p), i.e. geometric with success probability p, from the round's own stream
        (a pure function of (seed, t), as every availability model's).
        """
        if self.p >= 1.0:
            return np.arange(n_clients, dtype=np.intp)
        rng = round_generator(key, Domain.AVAILABILITY, round_idx)
        rate = -math.log1p(-self.p)
        expected = n_clients * self.p
        out = np.empty(int(expected + 6.0 * math.sqrt(expected) + 16), dtype=np.intp)
        draws = np.empty(min(out.size, _SKIP_BLOCK))  # in cache-sized blocks
        ends = np.empty(draws.size, dtype=np.int64)
        got, last = 0, -1
        while last < n_clients:
            rng.standard_exponential(draws.size, out=draws)
            draws /= rate
            np.floor(draws, out=draws)
            # a gap past the population ends the draw: clipped there, the sums stay integers
            np.minimum(draws, n_clients, out=draws)
            np.copyto(ends, draws, casting="unsafe")  # exact: integers ≤ n_clients
            ends += 1
            np.cumsum(ends, out=ends)
            ends += last
            k = int(np.searchsorted(ends, n_clients))  # those below n_clients
            if got + k > out.size:
                out = np.concatenate([out, np.empty(max(out.size, k), dtype=np.intp)])
            out[got : got + k] = ends[:k]
            got += k
            last = int(min(ends[-1], n_clients))
        return out[:got]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "p": self.p}


@dataclass(frozen=True)
class CyclicAvailability:
    """Clients come and go in cycles: available while ((t + phase_n) mod period) < duty · period.

    Parameters
    ----------
    period : int
        Rounds per cycle (≥ 1), e.g. a day.
    duty : float
        Fraction of the cycle a client is available, in (0, 1].
    phase : {"group", "client", "none"}
        "group": the groups' phases are spread evenly over the cycle (time zones); "client": each
        client's phase is drawn uniformly with the seed; "none": all in step.
    """

    period: int
    duty: float
    phase: Literal["group", "client", "none"] = "group"

    def __post_init__(self) -> None:
        check_int("availability.period", self.period)
        check_number("availability.duty", self.duty, 0.0, 1.0, low_open=True)
        if self.phase not in ("group", "client", "none"):
            raise ValueError(
                f"availability.phase must be 'group', 'client' or 'none', got {self.phase!r}"
            )

    @property
    def kind(self) -> str:
        return "cyclic"

    def phases(self, key: int, groups: IntArray) -> IntArray:
        """Each client's phase in [0, period), shape (n_clients,)."""
        if self.phase == "none":
            return np.zeros(groups.shape[0], dtype=np.intp)
        if self.phase == "group":
            n_groups = int(groups.max()) + 1 if groups.size else 1
            spread = np.floor(np.arange(n_groups) * self.period / n_groups).astype(np.intp)
            return spread[groups]
        u = counter_uniform(key, Domain.AVAILABILITY, 0, np.arange(groups.shape[0]), salt=1)
        return np.minimum((u * self.period).astype(np.intp), self.period - 1)

    def mask(self, key: int, round_idx: int, groups: IntArray) -> BoolArray:
        on = max(1, math.ceil(self.duty * self.period - 1e-9))
        return np.asarray((round_idx + self.phases(key, groups)) % self.period < on)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "period": self.period, "duty": self.duty, "phase": self.phase}


@dataclass(frozen=True, eq=False)
class TraceAvailability:
    """Availability read from a recorded trace: ``table[t, n]`` says whether client n is available.

    Use [`load`][adcs.sim.TraceAvailability.load] for a ``.npz`` (a bool array ``available`` of that
    shape) or a ``.csv`` of ``round,client`` rows listing the available (round, client) pairs.

    Parameters
    ----------
    table : ndarray of bool, shape (n_trace_rounds, n_clients)
    repeat : bool
        Rounds past the end of the trace start it again (t mod n_trace_rounds); otherwise a
        run longer than the trace is refused.
    source : str
        Where the trace came from (for records).
    """

    table: BoolArray
    repeat: bool = False
    source: str = ""
    _rounds: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        table = np.asarray(self.table)
        if table.ndim != 2 or table.dtype != np.bool_ or table.shape[0] == 0:
            raise ValueError(
                "availability trace must be a bool array of shape (rounds, n_clients), got "
                f"{table.dtype} {table.shape}"
            )
        check_bool("availability.repeat", self.repeat)
        view = table.view()
        view.setflags(write=False)
        object.__setattr__(self, "table", view)
        object.__setattr__(self, "_rounds", int(table.shape[0]))

    @classmethod
    def load(cls, path: str | Path, n_clients: int, *, repeat: bool = False) -> TraceAvailability:
        """Read a trace file (``.npz`` or ``.csv``; see the class docstring)."""
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"availability trace {p} does not exist or is not a file")
        if p.suffix == ".npz":
            table = _read_npz_trace(p)
        elif p.suffix == ".csv":
            table = _read_csv_trace(p, n_clients)
        else:
            raise ValueError(f"availability trace {p} must be a .npz or .csv file")
        if table.ndim != 2 or table.shape[1] != n_clients:
            raise ValueError(
                f"availability trace {p} has shape {table.shape}, expected (rounds, {n_clients})"
            )
        return cls(table, repeat=repeat, source=str(p))

    @property
    def kind(self) -> str:
        return "trace"

    def check_rounds(self, rounds: int) -> None:
        """Refuse a run longer than the trace unless it repeats."""
        if rounds > self._rounds and not self.repeat:
            raise ValueError(
                f"the availability trace covers {self._rounds} rounds but the run has {rounds}; "
                "set availability.repeat = true to start it again"
            )

    def mask(self, key: int, round_idx: int, groups: IntArray) -> BoolArray:
        if groups.shape[0] != self.table.shape[1]:
            raise ValueError(
                f"the availability trace has {self.table.shape[1]} clients, the data "
                f"{groups.shape[0]}"
            )
        return np.array(self.table[round_idx % self._rounds])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "rounds": self._rounds,
            "repeat": self.repeat,
        }


def _read_npz_trace(path: Path) -> BoolArray:
    """The ``available`` array of a trace archive; a file that is none is refused naming it."""
    if not zipfile.is_zipfile(path):  # np.load would take it for pickled data
        raise ValueError(f"availability trace {path} is not a .npz archive (as np.savez writes)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            table = np.asarray(archive["available"]) if "available" in archive.files else None
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"availability trace {path} cannot be read: {exc}") from None
    if table is None:
        raise ValueError(f"availability trace {path} has no array named 'available'")
    return table.astype(bool)


def _read_csv_trace(path: Path, n_clients: int) -> BoolArray:
    try:
        return _csv_pairs(path, n_clients)
    except UnicodeDecodeError as exc:
        raise ValueError(f"availability trace {path} is not UTF-8 text: {exc}") from None


def _csv_pairs(path: Path, n_clients: int) -> BoolArray:
    pairs: list[tuple[int, int]] = []
    with path.open(newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.reader(f), start=1):
            if not row or (line == 1 and not row[0].strip().lstrip("-").isdigit()):
                continue  # a blank line or the header
            try:
                t, c = int(row[0]), int(row[1])
            except (ValueError, IndexError):
                raise ValueError(
                    f"availability trace {path}, line {line}: expected 'round,client', got {row}"
                ) from None
            if t < 0 or not 0 <= c < n_clients:
                raise ValueError(
                    f"availability trace {path}, line {line}: round must be >= 0 and client in "
                    f"[0, {n_clients}), got {t},{c}"
                )
            pairs.append((t, c))
    if not pairs:
        raise ValueError(f"availability trace {path} lists no (round, client) pairs")
    index = np.asarray(pairs)
    table = np.zeros((int(index[:, 0].max()) + 1, n_clients), dtype=bool)
    table[index[:, 0], index[:, 1]] = True
    return table


@dataclass(frozen=True)
class TraceFile:
    """A recorded trace named by its file, read once the number of clients is known.

    The ``[sim.availability]`` row ``kind = "trace"``: a configuration holds it, and the
    simulator's model is `for_clients` ([`TraceAvailability`][adcs.sim.TraceAvailability]).

    Parameters
    ----------
    path : str
        A ``.npz`` or ``.csv`` trace ([`TraceAvailability.load`][adcs.sim.TraceAvailability.load]).
    repeat : bool
        Restart a trace shorter than the run.
    """

    path: str
    repeat: bool = False

    def __post_init__(self) -> None:
        check_string("availability.path", self.path)
        check_bool("availability.repeat", self.repeat)

    @property
    def kind(self) -> str:
        return "trace"

    def for_clients(self, n_clients: int) -> TraceAvailability:
        """The trace read and checked for ``n_clients`` clients."""
        return TraceAvailability.load(self.path, n_clients, repeat=self.repeat)


AVAILABILITY: Registry[Any] = Registry(
    "availability model",
    "adcs.availability",
    {
        "always": AlwaysAvailable,
        "bernoulli": BernoulliAvailability,
        "cyclic": CyclicAvailability,
        "trace": TraceFile,
    },
    requires=("mask",),
)
"""The ``[sim.availability]`` kinds (docs/design.md §8): a row's constructor arguments are the
table's keys; a row with ``for_clients(n_clients)`` (a trace) is completed when N is known."""
