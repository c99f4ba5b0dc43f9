"""Experiment configurations: TOML → validated frozen dataclasses (docs/design.md §3, §6).

A configuration describes one experiment of the paper's Sec. 6 kind: the data and its partition
over clients, the simulator settings, the grid of scheduling methods (with sweeps over their
hyperparameters, e.g. θ and R for ADCS), the seeds and m. Everything is checked when the file is
read — unknown keys, wrong types, impossible values, hyperparameters a scheduler refuses — so a bad
configuration fails with a message naming the key before any work starts.

Example (``experiments/fig2.toml``)::

    name = "fig2"
    m = 18
    seeds = [0, 1, 2, 3, 4]
    outputs = ["fig2"]

    [data]
    partition = "paper_groups"   # the flat form; or a [data.partition] table (below)
    dominance = 1.0

    [sim]
    rounds = 20000
    eval_every = 100

    [[methods]]
    name = "uniform"

    [[methods]]
    name = "adcs"
    refresh_every = 20
    sweep = { theta = [0.2, 0.4, 0.6, 0.8, 1.0] }

Data come from the name → loader table :data:`adcs.data.DATASETS` and are split by the name →
partition table :data:`adcs.data.PARTITIONS`, each with its own keys::

    [data]
    dataset = "fashion-mnist"    # digits, arrays, cifar10, femnist, synthetic; options beside it
    path = "data/fashion-mnist"  # for the file-based data sets

    [data.partition]
    kind = "dirichlet"           # paper_groups, iid, dirichlet, shards, classes_per_client, natural
    n_clients = 100
    alpha = 0.3
    size_sigma = 1.0             # quantity skew (iid, dirichlet)
    seed = 0                     # the partition's draw
    resample_per_seed = false    # true: a new partition (or synthetic population) per seed

The flat form of the paper's configurations (``partition = "paper_groups"`` with the partition's
keys, ``partition_seed``, ``partition_per_seed`` in ``[data]``) keeps working for data sets whose
options do not clash with partition keys.

Schedulers are built only through the name → class table :data:`adcs.schedulers.SCHEDULERS`.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import itertools
import math
import re
import sys
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from adcs.data.datasets import DATASETS
from adcs.data.partition import PARTITIONS as PARTITION_TABLE
from adcs.data.partition import PartitionKind, partition_kind
from adcs.experiments import adversary
from adcs.experiments.adversary import AttackSettings, DefenceSettings
from adcs.experiments.paper import PAPER_OUTPUTS
from adcs.schedulers import SCHEDULERS
from adcs.schedulers.base import Scheduler, UsesRoundTimes
from adcs.sim.availability import (
    AlwaysAvailable,
    Availability,
    BernoulliAvailability,
    CyclicAvailability,
    TraceAvailability,
)
from adcs.sim.engine import SimConfig
from adcs.sim.model import LogisticRegression, Model
from adcs.sim.system import SystemConfig, SystemProfile

__all__ = [
    "MODEL_KINDS",
    "OUTPUTS",
    "PAPER_CONFIGS",
    "PARTITIONS",
    "ConfigError",
    "DataConfig",
    "ExperimentConfig",
    "MethodConfig",
    "ModelSettings",
    "SimSettings",
    "SystemSettings",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "merge_configs",
    "packaged_config",
    "packaged_config_path",
    "read_toml",
    "with_overrides",
]

PARTITIONS = tuple(PARTITION_TABLE)
"""Partition kinds of :data:`adcs.data.PARTITIONS`."""

OUTPUTS = (*PAPER_OUTPUTS, "curves")
"""Figures and tables a configuration may ask for: ``curves`` (every variant on one plot), and the
paper's ``fig1``–``fig3`` and ``table1`` (:mod:`adcs.experiments.paper`)."""

PAPER_CONFIGS = ("fig1", "fig2", "fig3", "table1", "quick")
"""Configurations shipped with the project (``experiments/<name>.toml``)."""

WEIGHTINGS = ("uniform", "data_size")

_FLAT_KEYS = frozenset(
    {"dataset", "path", "partition", "partition_seed", "partition_per_seed", "resample_per_seed"}
)
"""Keys of the flat ``[data]`` form besides the dataset's options and the partition's keys."""
_TABLE_KEYS = frozenset({"kind", "seed", "resample_per_seed"})
"""Keys of a ``[data.partition]`` table besides the partition's own."""


class ConfigError(ValueError):
    """A configuration that cannot be run; the message names the file, key and value."""


# ---------------------------------------------------------------------------------------------
# small checkers: each raises ConfigError naming the dotted key


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(key: str, value: Any, minimum: int) -> int:
    if not _is_int(value) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _float(
    key: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    ok = (_is_int(value) or isinstance(value, float)) and math.isfinite(float(value))
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        raise ConfigError(f"{key} must be a number in {left}{low}, {high}{right}, got {value!r}")
    return float(value)


def _choice(key: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ConfigError(f"{key} must be one of {list(allowed)}, got {value!r}")
    return str(value)


def _no_unknown(section: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        where = f"{section}." if section else ""
        raise ConfigError(
            f"unknown key(s) {', '.join(where + k for k in unknown)}; allowed: {sorted(allowed)}"
        )


def _table(key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a table, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# sections


def _positive_int(key: str, value: Any) -> None:
    _int(key, value, 1)


MAX_CLIENTS = 2**31 - 1
"""Client indices are int32 throughout the simulator and the results files."""


def _client_count(key: str, value: Any) -> None:
    if _int(key, value, 1) > MAX_CLIENTS:
        raise ConfigError(
            f"{key} must be at most {MAX_CLIENTS:,} (clients are int32), got {value!r}"
        )


def _unit(key: str, value: Any) -> None:
    _float(key, value, 0.0, 1.0)


def _positive(key: str, value: Any) -> None:
    _float(key, value, 0.0, math.inf, low_open=True)


def _non_negative(key: str, value: Any) -> None:
    _float(key, value, 0.0, math.inf)


def _open_unit(key: str, value: Any) -> None:
    _float(key, value, 0.0, 1.0, low_open=True, high_open=True)


def _partition(key: str, kind: Any) -> PartitionKind:
    """The partition ``kind`` (a built-in or ``flwr:NAME``), or a ConfigError naming ``key``."""
    if not isinstance(kind, str):
        raise ConfigError(f"{key} must be a string, got {kind!r}")
    try:
        return partition_kind(kind)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _string(key: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a non-empty string, got {value!r}")


_VALUE_CHECKS: dict[str, Any] = {
    "n_groups": _positive_int, "clients_per_group": _positive_int, "dominance": _unit,
    "n_clients": _client_count, "alpha": _positive, "size_sigma": _non_negative,
    "train_per_client": _positive_int, "test_per_client": _positive_int,
    "shards_per_client": _positive_int, "classes": _positive_int,
}  # fmt: skip
"""Types and ranges of partition parameters (the data decide the rest when loaded)."""
_OPTION_CHECKS: dict[str, Any] = {
    "n_clients": _client_count, "alpha": _non_negative, "beta": _non_negative,
    "test_fraction": _open_unit, "name": _string, "features": _string, "label": _string,
    "train_split": _string, "test_split": _string,
}  # fmt: skip
"""Types and ranges of data set options."""


@dataclass(frozen=True)
class DataConfig:
    """Where the data come from and how they are split over clients (docs/design.md §3, §5, §7).

    Attributes
    ----------
    dataset : str
        A key of :data:`adcs.data.DATASETS` (default ``fashion-mnist``, the paper's).
    path : str or None
        The data set's file or folder; ``None`` for Fashion-MNIST uses its lookup
        (:func:`adcs.data.load_fashion_mnist`).
    options : tuple of (str, value)
        The data set's other options (``synthetic``: ``n_clients``, ``alpha``, ``beta``).
    partition : str
        A key of :data:`adcs.data.PARTITIONS`; default ``paper_groups`` (``natural`` for a
        generated data set, whose clients come with it).
    params : tuple of (str, value)
        The partition's parameters (e.g. ``n_groups``, ``clients_per_group``, ``dominance`` of
        ``paper_groups``: the paper's setting is 10 × 3, dominance 1).
    partition_seed : int
        Seed of the partition's random draw (and of a generated population).
    resample_per_seed : bool
        ``False`` (default): one partition for every run, so the seeds vary the training only.
        ``True``: each training seed s gets its own partition, drawn from ``(s, partition_seed)``.
    """

    dataset: str = "fashion-mnist"
    path: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    partition: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    partition_seed: int = 0
    resample_per_seed: bool = False
    flat: bool = field(default=False, compare=False, repr=False)
    """Read from the flat ``[data]`` form (messages then name the keys as written there)."""

    def __post_init__(self) -> None:
        _choice("data.dataset", self.dataset, sorted(DATASETS))
        entry = DATASETS[self.dataset]
        if self.partition is None:
            object.__setattr__(self, "partition", "natural" if entry.generated else "paper_groups")
        options = dict(self.options)
        _no_unknown("data", options, entry.keys - {"path"})
        for key, value in options.items():
            _OPTION_CHECKS.get(key, lambda k, v: None)(f"data.{key}", value)
        missing = sorted(entry.required - set(options) - ({"path"} if self.path else set()))
        if missing:
            raise ConfigError(f"data.{missing[0]} is required for dataset = {self.dataset!r}")
        if self.path is not None and (not isinstance(self.path, str) or not self.path):
            raise ConfigError(f"data.path must be a non-empty string, got {self.path!r}")
        if self.path is not None and "path" not in entry.keys:
            raise ConfigError(f"data.path: dataset {self.dataset!r} reads no files")
        kind = _partition("data.partition", self.partition)
        if entry.generated and self.partition != "natural":
            raise ConfigError(
                f"data.partition: dataset {self.dataset!r} brings its own clients; only the "
                f"'natural' partition applies, got {self.partition!r}"
            )
        params = dict(self.params)
        where = "data" if self.flat else "data.partition"
        _no_unknown(where, params, kind.keys)
        for key, value in params.items():  # a flwr partitioner's own arguments: it checks them
            _VALUE_CHECKS.get(key, lambda k, v: None)(f"{where}.{key}", value)
        for key in sorted(kind.required - set(params)):
            raise ConfigError(f"{where}.{key} is required for partition = {self.partition!r}")
        if entry.generated and params:
            raise ConfigError(
                f"data.partition: the clients of {self.dataset!r} are set by its options "
                f"(data.n_clients); the natural partition takes no {sorted(params)}"
            )
        _int("data.partition_seed" if self.flat else "data.partition.seed", self.partition_seed, 0)
        if not isinstance(self.resample_per_seed, bool):
            raise ConfigError(
                f"{where}.resample_per_seed must be true or false, got {self.resample_per_seed!r}"
            )

    @classmethod
    def from_dict(cls, table: Mapping[str, Any], base_dir: Path | None = None) -> DataConfig:
        """The ``[data]`` table of a configuration (either form), validated.

        Raises
        ------
        ConfigError
            On an unknown key or an impossible value.
        """
        return _parse_data(table, base_dir)

    def value(self, key: str) -> Any:
        """A ``[data]`` setting by its key: a field, a data set option or a partition parameter
        (its default when not given; None when the data decide)."""
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        if key in dict(self.options):
            return dict(self.options)[key]
        return partition_kind(str(self.partition)).value(dict(self.params), key)

    @property
    def dataset_options(self) -> dict[str, Any]:
        """The loader's keyword arguments (``path`` included when given)."""
        out = dict(self.options)
        if self.path is not None:
            out["path"] = self.path
        return out

    @property
    def partition_params(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def total_clients(self) -> int | None:
        """N, when the configuration fixes it (None: the data decide, e.g. FEMNIST's writers)."""
        if DATASETS[self.dataset].generated:
            return int(dict(self.options)["n_clients"])
        return partition_kind(str(self.partition)).n_clients(dict(self.params))


AVAILABILITY_KINDS = ("always", "bernoulli", "cyclic", "trace")
_AVAILABILITY_KEYS = {
    "always": frozenset({"kind"}),
    "bernoulli": frozenset({"kind", "p"}),
    "cyclic": frozenset({"kind", "period", "duty", "phase"}),
    "trace": frozenset({"kind", "path", "repeat"}),
}


@dataclass(frozen=True)
class AvailabilitySettings:
    """``[sim.availability]``: which clients can be selected each round (docs/design.md §4).

    Attributes
    ----------
    kind : {"always", "bernoulli", "cyclic", "trace"}
        "always" (default): every client every round.
    p : float in (0, 1]
        For "bernoulli": each client is available with probability p, independently each round.
    period : int, duty : float in (0, 1], phase : {"group", "client", "none"}
        For "cyclic": available while ((t + phase) mod period) < duty · period.
    path : str, repeat : bool
        For "trace": a ``.npz`` (bool array ``available``, rounds × clients) or ``.csv``
        (``round,client`` rows of available pairs); ``repeat`` restarts a trace shorter than
        the run.
    """

    kind: str = "always"
    p: float | None = None
    period: int | None = None
    duty: float | None = None
    phase: str = "group"
    path: str | None = None
    repeat: bool = False

    def __post_init__(self) -> None:
        _choice("sim.availability.kind", self.kind, AVAILABILITY_KINDS)
        need = {"bernoulli": ("p",), "cyclic": ("period", "duty"), "trace": ("path",)}
        for key in need.get(self.kind, ()):
            if getattr(self, key) is None:
                raise ConfigError(f"sim.availability.{key} is required for kind = {self.kind!r}")
        if self.p is not None:
            _float("sim.availability.p", self.p, 0.0, 1.0, low_open=True)
        if self.period is not None:
            _int("sim.availability.period", self.period, 1)
        if self.duty is not None:
            _float("sim.availability.duty", self.duty, 0.0, 1.0, low_open=True)
        _choice("sim.availability.phase", self.phase, ("group", "client", "none"))
        if not isinstance(self.repeat, bool):
            raise ConfigError(f"sim.availability.repeat must be true or false, got {self.repeat!r}")
        if self.path is not None and (not isinstance(self.path, str) or not self.path):
            raise ConfigError(
                f"sim.availability.path must be a non-empty string, got {self.path!r}"
            )

    def build(self, n_clients: int) -> Availability:
        """The simulator's availability model (a trace is read and checked here)."""
        if self.kind == "bernoulli":
            assert self.p is not None
            return BernoulliAvailability(self.p)
        if self.kind == "cyclic":
            assert self.period is not None and self.duty is not None
            return CyclicAvailability(self.period, self.duty, self.phase)  # type: ignore[arg-type]
        if self.kind == "trace":
            assert self.path is not None
            try:
                return TraceAvailability.load(self.path, n_clients, repeat=self.repeat)
            except ValueError as exc:
                raise ConfigError(f"sim.availability: {exc}") from None
        return AlwaysAvailable()

    def to_dict(self) -> dict[str, Any]:
        """The TOML table (only the keys of its kind)."""
        return {k: getattr(self, k) for k in sorted(_AVAILABILITY_KEYS[self.kind])}


SYSTEM_KINDS = ("lognormal", "csv")
_SYSTEM_RULES = frozenset({"kind", "deadline", "overcommit", "forward_cost"})
_SYSTEM_KEYS = {
    "lognormal": _SYSTEM_RULES
    | frozenset(f"{q}_{p}" for q in ("compute", "upload", "download") for p in ("median", "sigma"))
    | {"group_correlation"},
    "csv": _SYSTEM_RULES | {"path"},
}
_SYSTEM_DEFAULTS = SystemConfig()


@dataclass(frozen=True)
class SystemSettings:
    """``[sim.system]``: client devices and the simulated clock (:mod:`adcs.sim.system`).

    Attributes
    ----------
    kind : {"lognormal", "csv"}
        "lognormal" (default): each client's compute speed and bandwidths are drawn per seed,
        log-normal around the medians; "csv": measured values from ``path``, for every seed.
    compute_median, compute_sigma : float
        Median training speed (samples/s, > 0) and its log-space standard deviation (≥ 0).
    upload_median, upload_sigma, download_median, download_sigma : float
        The same for the bandwidths (bytes/s).
    group_correlation : float in [0, 1]
        Correlation of the log-values of two clients of one group.
    path : str
        For "csv": columns ``client,compute,upload,download``, one row per client.
    deadline : float > 0, optional
        Seconds after which a round's training phase closes (later clients are dropped).
    overcommit : float ≥ 0
        Invite ⌈(1 + overcommit)·m⌉ clients, aggregate the first m to return.
    forward_cost : float in (0, 1]
        Cost of a forward pass relative to a training step (loss probes).
    """

    kind: str = "lognormal"
    compute_median: float = _SYSTEM_DEFAULTS.compute_median
    compute_sigma: float = _SYSTEM_DEFAULTS.compute_sigma
    upload_median: float = _SYSTEM_DEFAULTS.upload_median
    upload_sigma: float = _SYSTEM_DEFAULTS.upload_sigma
    download_median: float = _SYSTEM_DEFAULTS.download_median
    download_sigma: float = _SYSTEM_DEFAULTS.download_sigma
    group_correlation: float = 0.0
    path: str | None = None
    deadline: float | None = None
    overcommit: float = 0.0
    forward_cost: float = _SYSTEM_DEFAULTS.forward_cost

    def __post_init__(self) -> None:
        key = "sim.system"
        _choice(f"{key}.kind", self.kind, SYSTEM_KINDS)
        for q in ("compute", "upload", "download"):
            _float(f"{key}.{q}_median", getattr(self, f"{q}_median"), 0.0, math.inf, low_open=True)
            _float(f"{key}.{q}_sigma", getattr(self, f"{q}_sigma"), 0.0, math.inf)
        _float(f"{key}.group_correlation", self.group_correlation, 0.0, 1.0)
        if self.kind == "csv" and self.path is None:
            raise ConfigError(f"{key}.path is required for kind = 'csv'")
        if self.path is not None and (not isinstance(self.path, str) or not self.path):
            raise ConfigError(f"{key}.path must be a non-empty string, got {self.path!r}")
        if self.deadline is not None:
            _float(f"{key}.deadline", self.deadline, 0.0, math.inf, low_open=True)
        _float(f"{key}.overcommit", self.overcommit, 0.0, math.inf)
        _float(f"{key}.forward_cost", self.forward_cost, 0.0, 1.0, low_open=True)

    def build(self, n_clients: int) -> SystemConfig:
        """The simulator's system configuration (a CSV profile is read and checked here)."""
        profile = None
        if self.kind == "csv":
            assert self.path is not None
            try:
                profile = SystemProfile.from_csv(self.path, n_clients)
            except ValueError as exc:
                raise ConfigError(f"sim.system: {exc}") from None
        kwargs = {k: getattr(self, k) for k in sorted(_SYSTEM_KEYS[self.kind] - {"kind", "path"})}
        return SystemConfig(profile=profile, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The TOML table (only the keys of its kind; no deadline when there is none)."""
        doc = {k: getattr(self, k) for k in sorted(_SYSTEM_KEYS[self.kind])}
        if doc["deadline"] is None:
            del doc["deadline"]
        return doc


@dataclass(frozen=True)
class SimSettings:
    """Simulator settings; mirrors :class:`adcs.sim.engine.SimConfig` (paper defaults, Sec. 6).

    Attributes
    ----------
    rounds : int
        T, the number of communication rounds (paper: 20 000).
    local_steps : int
        E, local SGD steps per round (paper: 1).
    batch_size : int
        B, local minibatch size (paper: 16).
    local_lr, server_lr : float
        η_ℓ and η_s (paper: 0.001 and 1).
    eval_every : int
        Rounds between evaluations of per-client test accuracy.
    weighting : {"uniform", "data_size"}
        Aggregation weights p_n.
    common_minibatches : bool
        Runs of the same seed draw the same client minibatches (common random numbers across
        methods; also faster). ``False``: every run has its own minibatch stream.
    dropout : float in [0, 1)
        Probability that a selected client fails to return its update in a round.
    availability : AvailabilitySettings
        The ``[sim.availability]`` table.
    system : SystemSettings or None
        The ``[sim.system]`` table; ``None`` (no table): no simulated clock.
    sketch_dim : int or None
        Schedulers see k-dimensional Johnson–Lindenstrauss sketches of the updates (aggregation
        uses the true ones); omitted: the updates themselves.
    eval_clients : int or None
        Evaluate a fixed subset of this many clients (large populations); omitted: all.
    attack : AttackSettings or None
        The ``[sim.attack]`` table: malicious clients, for every method (None: all honest).
    defence : DefenceSettings or None
        The ``[sim.defence]`` table: defences for every method (None: none).
    lr_decay : tuple of (int, float)
        Step schedule of η_ℓ, ``[[round, factor], …]``: from that round on (counting from 0)
        η_ℓ = local_lr · factor (``SimConfig.lr_decay``); empty (default): constant.
    """

    rounds: int = 20_000
    local_steps: int = 1
    batch_size: int = 16
    local_lr: float = 1e-3
    server_lr: float = 1.0
    eval_every: int = 100
    weighting: str = "uniform"
    common_minibatches: bool = True
    dropout: float = 0.0
    availability: AvailabilitySettings = AvailabilitySettings()
    system: SystemSettings | None = None
    sketch_dim: int | None = None
    eval_clients: int | None = None
    attack: AttackSettings | None = None
    defence: DefenceSettings | None = None
    lr_decay: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        _int("sim.rounds", self.rounds, 1)
        try:
            decay = SimConfig(rounds=1, lr_decay=self.lr_decay).lr_decay
        except ValueError as exc:
            raise ConfigError(f"sim.{exc}") from None
        object.__setattr__(self, "lr_decay", decay)
        _int("sim.local_steps", self.local_steps, 1)
        _int("sim.batch_size", self.batch_size, 1)
        _float("sim.local_lr", self.local_lr, 0.0, math.inf, low_open=True)
        _float("sim.server_lr", self.server_lr, 0.0, math.inf, low_open=True)
        _int("sim.eval_every", self.eval_every, 1)
        _choice("sim.weighting", self.weighting, WEIGHTINGS)
        if not isinstance(self.common_minibatches, bool):
            raise ConfigError(
                f"sim.common_minibatches must be true or false, got {self.common_minibatches!r}"
            )
        _float("sim.dropout", self.dropout, 0.0, 1.0, high_open=True)
        for key in ("sketch_dim", "eval_clients"):
            if getattr(self, key) is not None:
                _int(f"sim.{key}", getattr(self, key), 1)

    def build(self, n_clients: int) -> SimConfig:
        """The simulator's configuration."""
        kwargs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        kwargs["availability"] = self.availability.build(n_clients)
        kwargs["system"] = None if self.system is None else self.system.build(n_clients)
        del kwargs["attack"], kwargs["defence"]  # per run, not the simulator's (runner.py)
        return SimConfig(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The ``[sim]`` table (availability and system as their own sub-tables)."""
        doc = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        doc["availability"] = self.availability.to_dict()
        if self.system is None:
            del doc["system"]
        else:
            doc["system"] = self.system.to_dict()
        for table in ("attack", "defence"):
            settings = doc.pop(table)
            if settings is not None:
                doc[table] = settings.to_dict()
        doc["lr_decay"] = [list(pair) for pair in self.lr_decay]
        if not self.lr_decay:
            del doc["lr_decay"]
        return {k: v for k, v in doc.items() if v is not None}  # TOML has no null


MODEL_KINDS = ("logistic", "logistic-torch", "cnn", "mlp", "torch")
"""Model kinds of the ``[model]`` table; all but ``logistic`` need the extra ``adcs[torch]``."""
_MODEL_KEYS = frozenset({"kind", "factory", "device", "hidden", "input_norm"})
_DEVICE = re.compile(r"cpu|mps|cuda(:[0-9]+)?")


@dataclass(frozen=True)
class ModelSettings:
    """``[model]``: the model every run trains (docs/design.md §4 "Models", §7).

    Attributes
    ----------
    kind : {"logistic", "logistic-torch", "cnn", "mlp", "torch"}
        "logistic" (default): the paper's multinomial logistic regression in NumPy;
        "logistic-torch": the same model in PyTorch; "cnn": LeNet-5 for 28×28×1 inputs;
        "mlp": ReLU layers of widths ``hidden`` (:func:`adcs.sim.torch.mlp`); "torch": the module a
        user factory returns.
    factory : str or None
        For "torch" only: ``"package.module:function"``, a zero-argument callable returning a
        ``torch.nn.Module`` (imported with the current folder on the module path).
    device : str
        For the PyTorch kinds: "cpu" (default), "cuda", "cuda:N" or "mps".
    hidden : tuple of int or None
        For "mlp" only: the hidden layers' widths (default (64, 30), PowerOfChoice's MLP).
    input_norm : (float, float) or None
        For "mlp" only: standardise inputs as (x − mean) / std first.
    """

    kind: str = "logistic"
    factory: str | None = None
    device: str = "cpu"
    hidden: tuple[int, ...] | None = None
    input_norm: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _choice("model.kind", self.kind, MODEL_KINDS)
        self._check_mlp()
        if self.kind == "torch":
            if not isinstance(self.factory, str) or self.factory.count(":") != 1:
                raise ConfigError(
                    "model.factory = 'package.module:function' is required for kind = 'torch', "
                    f"got {self.factory!r}"
                )
        elif self.factory is not None:
            raise ConfigError(f"model.factory is only for kind = 'torch', not {self.kind!r}")
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise ConfigError(
                f"model.device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {self.device!r}"
            )
        if self.kind == "logistic" and self.device != "cpu":
            raise ConfigError(
                "model.kind = 'logistic' runs in NumPy on the CPU; use a PyTorch kind"
            )

    def _check_mlp(self) -> None:
        if self.kind != "mlp":
            for key in ("hidden", "input_norm"):
                if getattr(self, key) is not None:
                    raise ConfigError(f"model.{key} is only for kind = 'mlp', not {self.kind!r}")
            return
        hidden = (64, 30) if self.hidden is None else self.hidden
        if not isinstance(hidden, list | tuple):
            raise ConfigError(f"model.hidden must be an array of integers, got {hidden!r}")
        object.__setattr__(self, "hidden", tuple(_int("model.hidden[]", w, 1) for w in hidden))
        if self.input_norm is not None:
            norm = self.input_norm
            if not isinstance(norm, list | tuple) or len(norm) != 2:
                raise ConfigError(f"model.input_norm must be [mean, std], got {norm!r}")
            mean = _float("model.input_norm[0]", norm[0], -math.inf, math.inf)
            std = _float("model.input_norm[1]", norm[1], 0.0, math.inf, low_open=True)
            object.__setattr__(self, "input_norm", (mean, std))

    def describe(self) -> str:
        """The model in words, for reports."""
        return {
            "logistic": "multinomial logistic regression",
            "logistic-torch": "multinomial logistic regression (PyTorch)",
            "cnn": "LeNet-5 (PyTorch)",
            "mlp": f"an MLP with hidden layers {list(self.hidden or ())} (PyTorch)",
            "torch": f"the PyTorch model {self.factory}",
        }[self.kind] + ("" if self.device == "cpu" else f" on {self.device}")

    def build(self, input_shape: Sequence[int], n_classes: int) -> Model:
        """The simulator's model for inputs of ``input_shape``, checked on one forward pass.

        Raises
        ------
        ConfigError
            PyTorch is missing, the factory cannot be imported, or the module does not map a
            batch of inputs to (batch, n_classes).
        """
        if self.kind == "logistic":
            return LogisticRegression(math.prod(input_shape), n_classes)
        try:
            torch_models = importlib.import_module("adcs.sim.torch")
        except ImportError:
            raise ConfigError(
                f"model.kind = {self.kind!r} needs PyTorch: pip install 'adcs[torch]'"
            ) from None
        try:
            mlp = self.kind == "mlp"
            extra = {"hidden": self.hidden, "input_norm": self.input_norm} if mlp else {}
            return torch_models.model_for(
                self.kind, input_shape, n_classes, factory=self.factory, device=self.device,
                **extra,
            )  # fmt: skip
        except ValueError as exc:
            raise ConfigError(f"model: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The ``[model]`` table."""
        doc: dict[str, Any] = {"kind": self.kind, "device": self.device}
        if self.factory is not None:
            doc["factory"] = self.factory
        if self.hidden is not None:
            doc["hidden"] = list(self.hidden)
        if self.input_norm is not None:
            doc["input_norm"] = list(self.input_norm)
        return doc


def _freeze(value: Any) -> Any:
    """TOML arrays → tuples, so hyperparameters are hashable and immutable."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class MethodConfig:
    """One entry of the methods grid.

    Attributes
    ----------
    name : str
        A name :data:`adcs.schedulers.SCHEDULERS` resolves: built-in, ``"package.module:Name"``
        or an entry point of ``adcs.schedulers``.
    params : tuple of (str, value)
        Fixed hyperparameters passed to the scheduler's constructor (``m`` is the config's).
    sweep : tuple of (str, tuple of values)
        Hyperparameters swept over; the grid is their Cartesian product.
    """

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    sweep: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def scheduler_class(self) -> type[Any]:
        return SCHEDULERS[self.name]

    def grid(self) -> list[dict[str, Any]]:
        """Every hyperparameter combination of this entry, fixed params first."""
        base = dict(self.params)
        keys = [k for k, _ in self.sweep]
        points = []
        for values in itertools.product(*(v for _, v in self.sweep)):
            point = dict(base)
            point.update(zip(keys, values, strict=True))
            points.append(point)
        return points

    def build(self, m: int, params: Mapping[str, Any]) -> Scheduler:
        """The scheduler for one grid point, constructed through the name → class table.

        A string given for an enum-typed hyperparameter (e.g. ``quality = "grad_norm"``) is turned
        into the enum member of that value.
        """
        cls = self.scheduler_class
        kwargs = {k: _coerce_enum(cls, k, v) for k, v in params.items()}
        scheduler: Scheduler = cls(m=m, **kwargs)
        return scheduler


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment: data, simulator, methods grid, seeds and m.

    Attributes
    ----------
    name : str
    description : str
    m : int
        Clients selected per round (paper: 18).
    seeds : tuple of int
        Training seeds; each (method, hyperparameters) point runs once per seed.
    data : DataConfig
    sim : SimSettings
    methods : tuple of MethodConfig
    outputs : tuple of str
        Figures/tables to produce, from :data:`OUTPUTS`.
    source : str
        Where the configuration came from (a file path or ``"<dict>"``), for messages.
    """

    name: str
    m: int
    seeds: tuple[int, ...]
    data: DataConfig
    sim: SimSettings
    methods: tuple[MethodConfig, ...]
    outputs: tuple[str, ...] = ("curves",)
    description: str = ""
    model: ModelSettings = field(default_factory=ModelSettings)
    source: str = field(default="<dict>", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ConfigError(f"name must be a non-empty string without '/', got {self.name!r}")
        _int("m", self.m, 1)
        n_clients = self.data.total_clients
        if n_clients is not None and self.m > n_clients:
            raise ConfigError(f"m={self.m} exceeds the number of clients N={n_clients}")
        if not self.seeds:
            raise ConfigError("seeds must list at least one seed")
        for s in self.seeds:
            _int("seeds[]", s, 0)
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must be distinct, got {list(self.seeds)}")
        if not self.methods:
            raise ConfigError("methods must list at least one method ([[methods]] tables)")
        for o in self.outputs:
            _choice("outputs[]", o, OUTPUTS)
        for i, method in enumerate(self.methods):
            _check_method(f"methods[{i}]", method, self.m, timed=self.sim.system is not None)
        if self.sim.attack is not None and n_clients is not None:  # else checked when loaded
            for seed in self.seeds:
                try:
                    self.sim.attack.malicious(seed, n_clients)
                except ValueError as exc:
                    raise ConfigError(str(exc)) from None


def _check_method(key: str, method: MethodConfig, m: int, *, timed: bool = False) -> None:
    """Refuse unknown hyperparameters and build every grid point once, so bad values fail now."""
    try:
        SCHEDULERS.resolve(method.name)
    except ValueError as exc:
        raise ConfigError(f"{key}.name: {exc}") from None
    allowed = _hyperparameters(method.scheduler_class)
    for k, _ in method.params:
        if k == "m":
            raise ConfigError(f"{key}.m: m is set once, at the top level of the configuration")
        if k not in allowed:
            raise ConfigError(
                f"unknown key {key}.{k} for method {method.name!r}; allowed: {sorted(allowed)}"
            )
    seen = {k for k, _ in method.params}
    for k, values in method.sweep:
        if k not in allowed:
            raise ConfigError(
                f"unknown key {key}.sweep.{k} for method {method.name!r}; "
                f"allowed: {sorted(allowed)}"
            )
        if k in seen:
            raise ConfigError(f"{key}: {k!r} is both fixed and swept; keep one")
        if not values:
            raise ConfigError(f"{key}.sweep.{k} must be a non-empty array")
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(f"{key}.sweep.{k} repeats a value: {list(values)}")
    for point in method.grid():
        try:
            scheduler = method.build(m, point)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{key} ({method.name}, {point}): {exc}") from exc
        if not timed and isinstance(scheduler, UsesRoundTimes) and scheduler.needs_round_times:
            raise ConfigError(
                f"{key} ({method.name}, {point}) needs the clients' round durations: "
                "add a [sim.system] table"
            )


def _enum_types(cls: type[Any], name: str) -> list[type[enum.Enum]]:
    """Enum classes named in the type hint of hyperparameter ``name`` of ``cls``."""
    try:
        hint = typing.get_type_hints(cls).get(name)
    except Exception:  # unresolvable hints: no coercion, the constructor will judge the value
        return []
    candidates = [hint, *typing.get_args(hint)]
    return [c for c in candidates if isinstance(c, type) and issubclass(c, enum.Enum)]


def _coerce_enum(cls: type[Any], name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    for enum_cls in _enum_types(cls, name):
        allowed = [member.value for member in enum_cls]
        if value in allowed:
            return enum_cls(value)
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _hyperparameters(cls: type[Any]) -> frozenset[str]:
    """Constructor arguments of a scheduler class, other than ``m``."""
    if dataclasses.is_dataclass(cls):
        names = {f.name for f in dataclasses.fields(cls) if f.init}
    else:
        names = set(inspect.signature(cls).parameters)
    return frozenset(names - {"m"})


# ---------------------------------------------------------------------------------------------
# TOML ↔ dataclasses

_TOP_KEYS = frozenset(
    {"name", "description", "m", "seeds", "outputs", "data", "sim", "model", "methods"}
)
_SIM_KEYS = frozenset(f.name for f in dataclasses.fields(SimSettings))


def _resolve_path(key: str, path: Any, kind: str | None, base_dir: Path | None) -> str:
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{key} must be a non-empty string, got {path!r}")
    resolved = Path(path).expanduser()
    if not resolved.is_absolute() and base_dir is not None:
        resolved = base_dir / resolved
    ok = {"folder": resolved.is_dir(), "file": resolved.is_file()}.get(
        kind or "", resolved.exists()
    )
    if not ok:
        what = {"folder": "a folder", "file": "a file"}.get(kind or "", "a file or folder")
        raise ConfigError(f"{key} {path!r} is not {what} (looked at {resolved})")
    return str(resolved)


def _parse_data(raw: Mapping[str, Any], base_dir: Path | None) -> DataConfig:
    dataset = raw.get("dataset", "fashion-mnist")
    _choice("data.dataset", dataset, sorted(DATASETS))
    entry = DATASETS[dataset]
    option_keys = entry.keys - {"path"}
    table = raw.get("partition")
    kwargs: dict[str, Any] = {"dataset": dataset}
    if isinstance(table, Mapping):  # [data.partition]
        _no_unknown("data", raw, frozenset({"dataset", "path", "partition"}) | option_keys)
        kind = table.get("kind", "natural" if entry.generated else "paper_groups")
        _no_unknown(
            "data.partition", table, _TABLE_KEYS | _partition("data.partition.kind", kind).keys
        )
        params = {k: v for k, v in table.items() if k not in _TABLE_KEYS}
        kwargs["partition_seed"] = table.get("seed", 0)
        kwargs["resample_per_seed"] = table.get("resample_per_seed", False)
    else:  # the flat form: the partition's keys beside the data set's
        kind = table if table is not None else ("natural" if entry.generated else "paper_groups")
        found = _partition("data.partition", kind)
        # a generated data set's options make its clients: its natural partition takes no keys
        part_keys = frozenset() if entry.generated else found.keys
        clash = sorted(option_keys & part_keys)
        if clash:
            raise ConfigError(
                f"data: {clash} name both an option of dataset {dataset!r} and a key of "
                f"partition {kind!r}; put the partition in a [data.partition] table"
            )
        _no_unknown("data", raw, _FLAT_KEYS | option_keys | part_keys)
        params = {k: v for k, v in raw.items() if k in part_keys}
        kwargs["partition_seed"] = raw.get("partition_seed", 0)
        if "partition_per_seed" in raw and "resample_per_seed" in raw:
            raise ConfigError("data: give resample_per_seed or partition_per_seed, not both")
        kwargs["resample_per_seed"] = raw.get(
            "resample_per_seed", raw.get("partition_per_seed", False)
        )
        kwargs["flat"] = True
    kwargs["partition"] = kind
    kwargs["params"] = tuple(sorted((k, _freeze(v)) for k, v in params.items()))
    kwargs["options"] = tuple(sorted((k, raw[k]) for k in option_keys if k in raw))
    if "path" in raw:
        if "path" not in entry.keys:
            raise ConfigError(f"data.path: dataset {dataset!r} reads no files")
        kwargs["path"] = _resolve_path("data.path", raw["path"], entry.path, base_dir)
    return DataConfig(**kwargs)


def _kind_table(
    key: str, value: Any, default: str, keys: Mapping[str, frozenset[str]], base_dir: Path | None
) -> dict[str, Any]:
    """A sub-table whose ``kind`` decides its keys (``[sim.availability]``, ``[sim.system]``).

    The kind and the keys are checked, and a relative ``path`` is resolved against ``base_dir``.
    """
    table = dict(_table(key, value))
    kind = table.get("kind", default)
    _choice(f"{key}.kind", kind, list(keys))
    _no_unknown(key, table, keys[kind])
    if isinstance(table.get("path"), str) and base_dir is not None:
        path = Path(table["path"]).expanduser()
        table["path"] = str(path if path.is_absolute() else base_dir / path)
    return table


def _parse_method(i: int, raw: Any) -> MethodConfig:
    key = f"methods[{i}]"
    table = _table(key, raw)
    if "name" not in table:
        raise ConfigError(
            f"{key}.name is required (one of {sorted(SCHEDULERS)}, or 'package.module:Name')"
        )
    name = table["name"]
    sweep_raw = _table(f"{key}.sweep", table.get("sweep", {}))
    sweep = []
    for k, values in sweep_raw.items():
        if not isinstance(values, list):
            raise ConfigError(f"{key}.sweep.{k} must be an array of values, got {values!r}")
        sweep.append((k, tuple(_freeze(v) for v in values)))
    params = tuple((k, _freeze(v)) for k, v in table.items() if k not in ("name", "sweep"))
    return MethodConfig(name=name, params=params, sweep=tuple(sweep))


def config_from_dict(
    raw: Mapping[str, Any], *, source: str = "<dict>", base_dir: Path | None = None
) -> ExperimentConfig:
    """Validate a parsed TOML document and build the configuration.

    Parameters
    ----------
    raw : mapping
        The document (as ``tomllib.load`` returns it).
    source : str
        Named in error messages.
    base_dir : Path, optional
        Folder against which a relative ``data.path`` is resolved (the TOML file's folder).

    Raises
    ------
    ConfigError
        On an unknown key or an impossible value; the message starts with ``source``.
    """
    try:
        _no_unknown("", raw, _TOP_KEYS)
        for key in ("name", "m", "seeds", "methods"):
            if key not in raw:
                raise ConfigError(f"{key} is required")
        data_raw = _table("data", raw.get("data", {}))
        sim_raw = dict(_table("sim", raw.get("sim", {})))
        _no_unknown("sim", sim_raw, _SIM_KEYS)
        if "availability" in sim_raw:
            avail = _kind_table(
                "sim.availability", sim_raw["availability"], "always", _AVAILABILITY_KEYS, base_dir
            )
            sim_raw["availability"] = AvailabilitySettings(**avail)
        if "system" in sim_raw:
            system = _kind_table(
                "sim.system", sim_raw["system"], "lognormal", _SYSTEM_KEYS, base_dir
            )
            sim_raw["system"] = SystemSettings(**system)
        for table in ("attack", "defence"):
            if table in sim_raw:
                try:
                    sim_raw[table] = adversary.parse(
                        table, dict(_table(f"sim.{table}", sim_raw[table]))
                    )
                except ValueError as exc:
                    raise ConfigError(str(exc)) from None
        seeds = raw["seeds"]
        if not isinstance(seeds, list):
            raise ConfigError(f"seeds must be an array of integers, got {seeds!r}")
        methods_raw = raw["methods"]
        if not isinstance(methods_raw, list):
            raise ConfigError("methods must be an array of tables ([[methods]])")
        outputs = raw.get("outputs", ["curves"])
        if not isinstance(outputs, list):
            raise ConfigError(f"outputs must be an array of strings, got {outputs!r}")
        model_raw = _table("model", raw.get("model", {}))
        _no_unknown("model", model_raw, _MODEL_KEYS)
        description = raw.get("description", "")
        if not isinstance(description, str):
            raise ConfigError(f"description must be a string, got {description!r}")
        return ExperimentConfig(
            name=raw["name"],
            description=description,
            m=raw["m"],
            seeds=tuple(seeds),
            data=_parse_data(data_raw, base_dir),
            sim=SimSettings(**sim_raw),
            model=ModelSettings(**model_raw),
            methods=tuple(_parse_method(i, t) for i, t in enumerate(methods_raw)),
            outputs=tuple(outputs),
            source=source,
        )
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file as a document, refusing a folder, a missing file and binary or bad text.

    Raises
    ------
    ConfigError
        Naming the file and what is wrong with it.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a configuration file (a .toml file)")
    if not path.exists():
        raise ConfigError(f"{path}: no such configuration file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not a text configuration: byte {exc.start} is not UTF-8 (a binary file?)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if "\x00" in text:
        raise ConfigError(f"{path}: not a text configuration: it holds NUL bytes (a binary file?)")
    try:  # a byte-order mark (some Windows editors write one) is not part of the TOML
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def load_config(path: str | Path, *, data_path: str | None = None) -> ExperimentConfig:
    """Read and validate a TOML configuration file.

    Parameters
    ----------
    path : str or Path
    data_path : str, optional
        A data path given in place of the file's ``data.path`` (``--data``): the file's own
        path is then neither checked nor used (set it with :func:`with_overrides`).

    Raises
    ------
    ConfigError
        If the file is missing, is not valid TOML, or fails validation.
    """
    path = Path(path)
    return config_from_file(read_toml(path), path, data_path=data_path)


def config_from_file(
    doc: Mapping[str, Any], path: Path, *, data_path: str | None = None
) -> ExperimentConfig:
    """:func:`load_config` of a document already read from ``path`` (its tables resolved
    against the file's folder)."""
    if isinstance(doc.get("suite"), dict):
        raise ConfigError(
            f"{path}: an attack suite (it has a [suite] table), not an experiment "
            f"configuration: run it with `adcs bench attacks --config {path}`"
        )
    data = doc.get("data")
    if data_path is not None and isinstance(data, dict) and "path" in data:
        given = str(Path(data_path).expanduser().absolute())
        doc = {**doc, "data": {**data, "path": given}}
    config = config_from_dict(doc, source=str(path), base_dir=path.parent)
    return config if data_path is None else with_overrides(config, data_path=data_path)


def _value_to_toml(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_value_to_toml(v) for v in value]
    return value


def config_to_dict(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration as a plain TOML/JSON-able document; ``config_from_dict`` inverts it."""
    d = config.data
    data: dict[str, Any] = {"dataset": d.dataset, **{k: _value_to_toml(v) for k, v in d.options}}
    if d.path is not None:
        data["path"] = d.path
    data["partition"] = {
        "kind": d.partition,
        **{k: _value_to_toml(v) for k, v in d.params},
        "seed": d.partition_seed,
        "resample_per_seed": d.resample_per_seed,
    }
    methods = []
    for method in config.methods:
        entry: dict[str, Any] = {"name": method.name}
        entry.update({k: _value_to_toml(v) for k, v in method.params})
        if method.sweep:
            entry["sweep"] = {k: [_value_to_toml(v) for v in vs] for k, vs in method.sweep}
        methods.append(entry)
    doc: dict[str, Any] = {
        "name": config.name,
        "description": config.description,
        "m": config.m,
        "seeds": list(config.seeds),
        "outputs": list(config.outputs),
        "data": data,
        "sim": config.sim.to_dict(),
        "model": config.model.to_dict(),
        "methods": methods,
    }
    return doc


# ---------------------------------------------------------------------------------------------
# the shipped configurations, overrides and merging


def packaged_config_path(name: str) -> Path:
    """Path of a shipped configuration (``fig1``, ``fig2``, ``fig3``, ``table1``, ``quick``).

    Looked up in the source checkout's ``experiments/`` folder (the source of truth), then in the
    installed package's data (``adcs/experiments/configs/``).
    """
    if name not in PAPER_CONFIGS:
        raise ConfigError(f"no shipped configuration {name!r}; known: {list(PAPER_CONFIGS)}")
    checkout = Path(__file__).resolve().parents[3] / "experiments" / f"{name}.toml"
    if checkout.is_file():
        return checkout
    packaged = resources.files("adcs.experiments") / "configs" / f"{name}.toml"
    if packaged.is_file():
        return Path(str(packaged))
    raise ConfigError(
        f"the shipped configuration {name}.toml is missing: not in {checkout.parent} nor in the "
        "installed package data (adcs/experiments/configs)"
    )


def packaged_config(name: str) -> ExperimentConfig:
    """Load a shipped configuration by name (its source reads ``experiments/<name>.toml``)."""
    config = load_config(packaged_config_path(name))
    return dataclasses.replace(config, source=f"experiments/{name}.toml")


def with_overrides(
    config: ExperimentConfig,
    *,
    rounds: int | None = None,
    seeds: Sequence[int] | None = None,
    eval_every: int | None = None,
    data_path: str | None = None,
    name: str | None = None,
) -> ExperimentConfig:
    """A copy with command-line overrides applied and validated.

    ``eval_every`` is capped at ``rounds`` so that a short run is still evaluated.
    """
    sim = config.sim
    if rounds is not None:
        _int("rounds", rounds, 1)
        sim = dataclasses.replace(sim, rounds=rounds)
    if eval_every is not None:
        sim = dataclasses.replace(sim, eval_every=eval_every)
    if sim.eval_every > sim.rounds:
        sim = dataclasses.replace(sim, eval_every=sim.rounds)
    data = config.data
    if data_path is not None:
        entry = DATASETS[data.dataset]
        if "path" not in entry.keys:
            raise ConfigError(f"data path: dataset {data.dataset!r} reads no files")
        resolved = _resolve_path("data path", data_path, entry.path, None)
        data = dataclasses.replace(data, path=str(Path(resolved).resolve()))
    return dataclasses.replace(
        config,
        sim=sim,
        data=data,
        seeds=tuple(seeds) if seeds is not None else config.seeds,
        name=name if name is not None else config.name,
    )


def merge_configs(configs: Sequence[ExperimentConfig], name: str) -> ExperimentConfig:
    """One configuration running the union of several configurations' methods.

    The configurations must agree on data, simulator settings, seeds and m (the paper's figures
    all do); duplicate runs are removed later, when the runs are expanded.
    """
    if not configs:
        raise ConfigError("nothing to merge")
    first = configs[0]
    for other in configs[1:]:
        for attr in ("data", "sim", "model", "seeds", "m"):
            if getattr(other, attr) != getattr(first, attr):
                raise ConfigError(
                    f"cannot merge {first.source} and {other.source}: they differ in {attr} "
                    f"({getattr(first, attr)!r} vs {getattr(other, attr)!r})"
                )
    methods: list[MethodConfig] = []
    outputs: list[str] = []
    for c in configs:
        methods.extend(mc for mc in c.methods if mc not in methods)
        outputs.extend(o for o in c.outputs if o not in outputs)
    return dataclasses.replace(
        first,
        name=name,
        description="; ".join(c.description for c in configs if c.description),
        methods=tuple(methods),
        outputs=tuple(outputs),
        source=" + ".join(c.source for c in configs),
    )
