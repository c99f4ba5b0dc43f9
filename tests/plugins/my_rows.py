"""A user's own data set and availability model, outside adcs (imported by path in tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adcs._validate import check_int
from adcs.adversary import Defence
from adcs.data import Dataset, DatasetEntry
from adcs.data.partition import PartitionKind


def load_blobs(n_train: int = 200, seed: int = 0) -> Dataset:
    """Two Gaussian blobs in 8 dimensions, 4 classes (a toy data set)."""
    rng = np.random.default_rng(seed)

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, 4, n)
        return (rng.normal(labels[:, None], 1.0, (n, 8)).astype(np.float32), labels)

    (x, y), (xt, yt) = split(n_train), split(n_train // 2)
    return Dataset("blobs", x, y, xt, yt, n_classes=4, source="generated blobs")


BLOBS = DatasetEntry(
    load_blobs,
    frozenset({"n_train", "seed"}),
    title="Blobs",
    checks={"n_train": lambda key, value: check_int(key, value, 40)},
)
"""The registry row: the loader, its options and their checks."""


def _failing(**options: Any) -> Any:
    if options.get("give"):
        return options["give"]  # no data set
    raise RuntimeError("the data server is down")


FAILING = DatasetEntry(_failing, frozenset({"give"}), title="A loader that fails")
"""A row whose loader raises a RuntimeError, or returns ``give`` (not a data set)."""


@dataclass(frozen=True)
class EveryOther:
    """Clients of even index on even rounds, odd ones on odd rounds.

    Parameters
    ----------
    shift : int
        Rounds the pattern starts late (>= 0).
    """

    shift: int = 0

    def __post_init__(self) -> None:
        check_int("shift", self.shift, 0)

    @property
    def kind(self) -> str:
        return "every_other"

    def mask(self, key: int, round_idx: int, groups: np.ndarray) -> np.ndarray:
        return np.arange(groups.shape[0]) % 2 == (round_idx + self.shift) % 2

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "shift": self.shift}


@dataclass(frozen=True)
class LowLoss:
    """A user's attack kind: clients ``liars`` report ten times their loss (built from the lies)."""

    liars: tuple[int, ...] = (0,)
    seed: int = 0

    def _lie(self) -> Any:
        from adcs.adversary import Liars

        return Liars(clients=self.liars, lie=("loss",), factor=10.0)

    def malicious(self, seed: int, n_clients: int) -> np.ndarray:
        return np.asarray(self._lie().malicious(seed, n_clients))

    def build(self, seed: int, n_clients: int) -> Any:
        return self._lie().build(seed, n_clients)


@dataclass(frozen=True)
class NotAnAttack(LowLoss):
    """An attack kind whose ``build`` gives something the round cannot use."""

    def build(self, seed: int, n_clients: int) -> Any:
        return object()


@dataclass(frozen=True)
class TrimmedOf:
    """A user's defence kind: a trimmed mean of its own trim (built per run from its table)."""

    trim: float = 0.1

    def build(self, seed: int, n_clients: int) -> Any:
        from adcs.adversary import Defence

        return Defence(aggregation="trimmed_mean", trim=self.trim)


@dataclass(frozen=True)
class NotADefence(TrimmedOf):
    """A defence kind whose ``build`` gives something the round cannot use."""

    def build(self, seed: int, n_clients: int) -> Any:
        return object()


@dataclass(frozen=True)
class OtherClients(LowLoss):
    """An attack kind whose ``build`` attacks with ``clients``, not the ``liars`` it names."""

    clients: tuple[int, ...] = (2,)

    def build(self, seed: int, n_clients: int) -> Any:
        from adcs.adversary import Attack

        return Attack(self.clients)


@dataclass(frozen=True)
class PerSeedCrafted(LowLoss):
    """An attack kind whose ``build`` gives a crafted attack not built for the run."""

    def build(self, seed: int, n_clients: int) -> Any:
        from adcs.adversary import Crafted

        return Crafted(n_malicious=1)


@dataclass(frozen=True)
class NoRule(Defence):
    """A defence whose ``aggregator()`` gives something that is not a rule."""

    def aggregator(self) -> Any:
        return object()


def _no_split(data: Any, rng: np.random.Generator, **params: Any) -> Any:
    return "client 0 gets everything"


NO_PARTITION = PartitionKind(_no_split, frozenset({"n_clients"}))
"""A partition row whose split breaks the contract: it returns no Partition."""


@dataclass(frozen=True)
class FractionalMask(EveryOther):
    """Breaks the availability contract: its mask is of floats, not of bools."""

    def mask(self, key: int, round_idx: int, groups: np.ndarray) -> np.ndarray:
        return super().mask(key, round_idx, groups).astype(np.float64)


NOT_DATA = DatasetEntry(lambda: {"x": [1, 2]}, frozenset())
"""A data set row whose loader breaks the contract: it returns a dict, not a Dataset."""


@dataclass(frozen=True)
class Unlicensed(EveryOther):
    """An availability model whose constructor fails with an error of its own."""

    def __post_init__(self) -> None:
        raise RuntimeError("no trace server")


def _split_raises(data: Any, rng: np.random.Generator, **params: Any) -> Any:
    raise IndexError("label 9 has no samples")


RAISING_PARTITION = PartitionKind(_split_raises, frozenset({"n_clients"}))
"""A partition row whose split raises an error of its own."""


@dataclass(frozen=True)
class DownAt(EveryOther):
    """EveryOther whose mask raises an error of its own at round 2."""

    def mask(self, key: int, round_idx: int, groups: np.ndarray) -> np.ndarray:
        if round_idx == 2:
            raise ConnectionError("the trace server is down")
        return super().mask(key, round_idx, groups)
