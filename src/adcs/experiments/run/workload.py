"""From a configuration's ``[data]`` to the clients' data the simulator runs on (docs/design.md §7).

`load_data` loads the named data set (`adcs.data.DATASETS`); `federate` splits
it with the named partition (`adcs.data.PARTITIONS`) — once, or once per training seed
with ``resample_per_seed`` — into [`ClientData`][adcs.sim.ClientData]: a
[`FederatedData`][adcs.sim.FederatedData] over the samples in memory, or a generated population
(`SyntheticClients`) for ``synthetic``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adcs.data import ChecksumError, DataError, Dataset, FashionMNIST, load_dataset, partition_data
from adcs.data.synthetic import Synthetic
from adcs.experiments.config import DataConfig
from adcs.sim.data import ClientData, FederatedData

__all__ = ["DataSource", "DataUnavailable", "federate", "load_data"]

DataSource = Dataset | FashionMNIST | Synthetic
"""What a loader gives: samples in memory, or a generated population."""


class DataUnavailable(DataError):
    """The data cannot be read (missing, unreadable, not a file): a failure of the input data,
    never of the results folder, whatever operating-system error it came as."""


def load_data(data: DataConfig) -> DataSource:
    """The configured data set, loaded (files checked as each loader does).

    Raises
    ------
    DataUnavailable
        A file or folder of the data cannot be read (the message names it and says why).
    ChecksumError, DataError
        From the loader: a file is not the expected one, or is malformed; or a loader (a user's,
        by import path) raised another error (named, with the cause) or returned no data set.
    """
    try:
        source = load_dataset(data.dataset, **data.dataset_options)
    except FileNotFoundError as exc:
        if exc.filename is None:  # the loaders' own messages name the file and what is wrong
            raise DataUnavailable(str(exc)) from exc
        raise DataUnavailable(f"cannot read {exc.filename}: {exc.strerror}") from exc
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = f" {exc.filename}" if exc.filename else ""
        raise DataUnavailable(f"cannot read the data{where}: {reason}") from exc
    except (DataError, ChecksumError):
        raise
    except ImportError as exc:  # an extra that is not installed (the message says which)
        raise DataUnavailable(str(exc)) from exc
    except Exception as exc:  # a loader's own failure: named, not a traceback
        raise DataError(
            f"dataset {data.dataset!r}: its loader failed: {type(exc).__name__}: {exc}"
        ) from exc
    return source


def _split(source: DataSource, data: DataConfig, rng: np.random.Generator) -> ClientData:
    if isinstance(source, Synthetic):
        return source.clients(rng)
    partition = partition_data(str(data.partition), source, rng, **data.partition_params)
    return FederatedData.from_partition(source, partition)


def federate(
    source: DataSource, data: DataConfig, seeds: Sequence[int]
) -> dict[int | None, ClientData]:
    """The clients' data: one entry (key None) shared by every run, or one per training seed.

    The partition's generator is seeded by ``partition_seed``, or by (seed, partition_seed) for
    each training seed with ``resample_per_seed``.

    Raises
    ------
    ValueError
        The data cannot be split as configured (the partition's own message).
    """
    if not data.resample_per_seed:
        return {None: _split(source, data, np.random.default_rng(data.partition_seed))}
    return {
        seed: _split(source, data, np.random.default_rng([seed, data.partition_seed]))
        for seed in seeds
    }
