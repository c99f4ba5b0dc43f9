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

The ``[data]`` table is `adcs.experiments.config.data`'s; ``[sim]`` is the library's
`SimConfig` itself (its arguments are the keys, its checks the ones that
apply); the ``kind`` tables (``[sim.availability]``, ``[sim.system]``, ``[sim.attack]``,
``[sim.defence]``, ``[model]``) are the library's objects, named through their registries and
mapped by `KindTable` (docs/design.md §8). The attack and the
defence apply per run, so `ExperimentConfig` holds them beside the simulator's settings.

Schedulers are built only through the name → class table
[`adcs.schedulers.SCHEDULERS`][adcs.schedulers.SCHEDULERS].
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import itertools
import os
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

from adcs.data.partition_table import PARTITIONS as PARTITION_TABLE
from adcs.experiments.analysis.outputs import output_names
from adcs.experiments.config.adversary import ATTACK_TABLE, DEFENCE_TABLE
from adcs.experiments.config.data import DataConfig
from adcs.experiments.config.privacy import parse_privacy, privacy_to_dict
from adcs.experiments.config.schema import (
    ConfigError,
    KindTable,
    as_table,
    check_choice_key,
    check_int_key,
    check_known_keys,
    freeze,
    named_key,
    value_to_toml,
)
from adcs.optimizers import SERVER_OPTIMIZERS
from adcs.privacy import PrivateProbes
from adcs.registry import check_annotation
from adcs.schedulers import SCHEDULERS
from adcs.schedulers.base import Scheduler, UsesRoundTimes
from adcs.sim.availability import AVAILABILITY
from adcs.sim.engine import SimConfig
from adcs.sim.model import Model
from adcs.sim.models import MODELS, Logistic
from adcs.sim.system import SYSTEM_PROFILES

__all__ = [
    "MODEL_KINDS",
    "PAPER_CONFIGS",
    "PARTITIONS",
    "SIM_KEYS",
    "ConfigError",
    "DataConfig",
    "ExperimentConfig",
    "MethodConfig",
    "build_model",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "merge_configs",
    "packaged_config",
    "packaged_config_path",
    "read_toml",
    "resolve_config",
    "shipped_configs",
    "shipped_configs_folder",
    "sim_config",
    "sim_for_clients",
]

PARTITIONS = tuple(PARTITION_TABLE)
"""Partition kinds of `adcs.data.PARTITIONS`."""

PAPER_CONFIGS = ("fig1", "fig2", "fig3", "table1", "quick")
"""Configurations shipped with the project (``experiments/<name>.toml``)."""

# ---------------------------------------------------------------------------------------------
# sections


AVAILABILITY_TABLE = KindTable("sim.availability", AVAILABILITY, "always")
"""``[sim.availability]``: which clients can be selected each round (docs/design.md §4); its
kinds are the rows of `adcs.sim.availability.AVAILABILITY`."""
SYSTEM_TABLE = KindTable("sim.system", SYSTEM_PROFILES, "lognormal", frozenset({"profile"}))
"""``[sim.system]``: client devices and the simulated clock (`adcs.sim.system`); its kinds
are the rows of `adcs.sim.system.SYSTEM_PROFILES`."""
SERVER_OPTIMIZER_TABLE = KindTable("sim.server_optimizer", SERVER_OPTIMIZERS, "fedavg")
"""``[sim.server_optimizer]``: the server step (`adcs.optimizers`); its kinds are the rows of
`adcs.optimizers.SERVER_OPTIMIZERS`. Without the table: plain FedAvg with ``server_lr``."""
TABLES = {"attack": ATTACK_TABLE, "defence": DEFENCE_TABLE}
"""``[sim.attack]`` and ``[sim.defence]`` (`adcs.experiments.config.adversary`): per run, not the
simulator's, so `ExperimentConfig` holds them."""


SIM_KEYS = frozenset(f.name for f in dataclasses.fields(SimConfig)) | {
    "attack",
    "defence",
    "privacy",
}
"""The keys of ``[sim]``: `SimConfig`'s arguments (``availability`` and ``system`` as sub-tables)
and the per-run ``attack``, ``defence`` and ``privacy`` sub-tables."""


def sim_config(base: SimConfig | None = None, **values: Any) -> SimConfig:
    """``SimConfig(**values)``, or ``base`` with ``values`` replaced: the ``[sim]`` table.

    Raises
    ------
    ConfigError
        The library's refusal, naming the key (``sim.batch_size must be ...``).
    """
    try:
        return SimConfig(**values) if base is None else dataclasses.replace(base, **values)
    except ValueError as exc:
        raise ConfigError(named_key("sim", str(exc), SIM_KEYS)) from None


def sim_for_clients(sim: SimConfig, n_clients: int) -> SimConfig:
    """`SimConfig.for_clients` (a trace or a
    device file read for N clients), its refusal naming the key (``sim.availability: ...``)."""
    try:
        return sim.for_clients(n_clients)
    except ValueError as exc:
        raise ConfigError(named_key("sim", str(exc), SIM_KEYS)) from None


def _parse_sim(raw: Any, base_dir: Path | None) -> tuple[SimConfig, Any, Any, Any]:
    """The ``[sim]`` table: the simulator's configuration, the attack, the defence and the
    private probe channel."""
    table = dict(as_table("sim", raw))
    check_known_keys("sim", table, SIM_KEYS)
    if "availability" in table:
        table["availability"] = AVAILABILITY_TABLE.parse(table["availability"], base_dir)
    if "system" in table:
        table["system"] = SYSTEM_TABLE.parse(table["system"], base_dir)
    optimizer = table.get("server_optimizer")
    if isinstance(optimizer, str):  # a kind with its defaults: server_optimizer = "fedadam"
        optimizer = {"kind": optimizer}
    if isinstance(optimizer, Mapping):  # else an object, which SimConfig checks
        table["server_optimizer"] = SERVER_OPTIMIZER_TABLE.parse(optimizer, None)
    attack, defence = (
        None if key not in table else TABLES[key].parse(_frozen(key, table.pop(key)), None)
        for key in ("attack", "defence")
    )
    privacy = parse_privacy(table.pop("privacy")) if "privacy" in table else None
    return sim_config(**table), attack, defence, privacy


def _frozen(key: str, raw: Any) -> dict[str, Any]:
    """The ``[sim.<key>]`` table with its arrays as tuples (the objects stay hashable)."""
    return {k: freeze(v) for k, v in as_table(f"sim.{key}", raw).items()}


def _sim_to_dict(config: ExperimentConfig) -> dict[str, Any]:
    """The ``[sim]`` table: the simulator's settings in their order, then the attack and the
    defence (availability, system, attack and defence as sub-tables)."""
    sim = config.sim
    doc = {f.name: getattr(sim, f.name) for f in dataclasses.fields(sim)}
    doc["availability"] = AVAILABILITY_TABLE.to_dict(sim.availability)
    doc["system"] = None if sim.system is None else SYSTEM_TABLE.to_dict(sim.system)
    doc["lr_decay"] = [list(pair) for pair in sim.lr_decay] or None
    optimizer = sim.server_optimizer
    doc["server_optimizer"] = (
        None if optimizer is None else SERVER_OPTIMIZER_TABLE.to_dict(optimizer)
    )
    doc["prox_mu"] = sim.prox_mu or None  # absent at 0: the manifests of earlier versions
    doc["weight_decay"] = sim.weight_decay or None  # likewise
    for key, obj in (("attack", config.attack), ("defence", config.defence)):
        doc[key] = None if obj is None else TABLES[key].to_dict(obj)
    doc["privacy"] = None if config.privacy is None else privacy_to_dict(config.privacy)
    return {k: v for k, v in doc.items() if v is not None}  # TOML has no null


MODEL_TABLE = KindTable("model", MODELS, "logistic", sort_keys=False)
"""``[model]``: the model every run trains; its kinds are the rows of
`adcs.sim.models.MODELS` (docs/design.md §4 "Models")."""
MODEL_KINDS = tuple(MODELS)
"""Model kinds of the ``[model]`` table; all but ``logistic`` need the extra ``adcs[torch]``."""


def build_model(config: ExperimentConfig, input_shape: Sequence[int], n_classes: int) -> Model:
    """The simulator's model of ``config`` for the data's inputs, checked on one forward pass.

    Raises
    ------
    ConfigError
        PyTorch is missing, the factory cannot be imported, or the module does not map a
        batch of inputs to (batch, n_classes).
    """
    model: Model = MODEL_TABLE.build(config.model, input_shape, n_classes)
    return model


@dataclass(frozen=True)
class MethodConfig:
    """One entry of the methods grid.

    Attributes
    ----------
    name : str
        A name [`adcs.schedulers.SCHEDULERS`][adcs.schedulers.SCHEDULERS] resolves: built-in,
        ``"package.module:Name"`` or an entry point of ``adcs.schedulers``.
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
        into the enum member of that value; every value must fit its annotation
        (`adcs.registry.check_annotation`: an ``int`` parameter takes no 1.5).
        """
        cls = self.scheduler_class
        kwargs = {k: _coerce_enum(cls, k, v) for k, v in params.items()}
        for k, v in kwargs.items():  # a user's class may check nothing itself
            check_annotation(cls, k, v)
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
    sim : SimConfig
        The ``[sim]`` table (`adcs.sim.engine.SimConfig`; a trace or device file is read
        for N clients by `sim_for_clients`).
    methods : tuple of MethodConfig
    outputs : tuple of str
        Figures/tables to produce, from `output_names`.
    model : object
        The ``[model]`` table: a row of `adcs.sim.models.MODELS` (default
        `Logistic`, the paper's).
    attack : object or None
        The ``[sim.attack]`` table, for every method: a row of `adcs.adversary.ATTACKS`
        (`Liars`, `Crafted`, ...); None: all
        honest.
    defence : object or None
        The ``[sim.defence]`` table, for every method: a row of `adcs.adversary.DEFENCES`
        (`Defence`, ...); None: none.
    privacy : PrivateProbes or None
        The ``[sim.privacy]`` table, for every method (`adcs.experiments.config.privacy`); None: probes
        and updates in the clear.
    source : str
        Where the configuration came from (a file path or ``"<dict>"``), for messages.
    """

    name: str
    m: int
    seeds: tuple[int, ...]
    data: DataConfig
    sim: SimConfig
    methods: tuple[MethodConfig, ...]
    outputs: tuple[str, ...] = ("curves",)
    description: str = ""
    model: Any = field(default_factory=Logistic)
    attack: Any = None
    defence: Any = None
    privacy: PrivateProbes | None = None
    source: str = field(default="<dict>", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ConfigError(f"name must be a non-empty string without '/', got {self.name!r}")
        check_int_key("m", self.m, 1)
        n_clients = self.data.total_clients
        if n_clients is not None and self.m > n_clients:
            raise ConfigError(f"m={self.m} exceeds the number of clients N={n_clients}")
        if not self.seeds:
            raise ConfigError("seeds must list at least one seed")
        for s in self.seeds:
            check_int_key("seeds[]", s, 0)
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must be distinct, got {list(self.seeds)}")
        if not self.methods:
            raise ConfigError("methods must list at least one method ([[methods]] tables)")
        for o in self.outputs:
            check_choice_key("outputs[]", o, output_names())
        for i, method in enumerate(self.methods):
            _check_method(f"methods[{i}]", method, self.m, timed=self.sim.system is not None)
        if self.attack is not None and n_clients is not None:  # else checked when loaded
            for seed in self.seeds:
                try:
                    self.attack.malicious(seed, n_clients)
                except ValueError as exc:
                    raise ATTACK_TABLE.refusal(self.attack, exc) from None

    @property
    def document(self) -> dict[str, Any]:
        """The configuration as its TOML document (`config_to_dict`): what overrides edit
        (`adcs.experiments.config.overrides`), the manifest records and a resume compares.

        Written once per configuration and kept; each call returns a fresh copy to edit.
        """
        kept = self.__dict__.get("_document")
        if kept is None:  # a frozen dataclass: kept beside its fields, not as one
            kept = config_to_dict(self)
            object.__setattr__(self, "_document", kept)
        return copy.deepcopy(kept)


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
        except Exception as exc:  # a user's scheduler may raise anything: its message, named
            raise ConfigError(
                f"{key} ({method.name}, {point}): {type(exc).__name__}: {exc}"
            ) from exc
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


def _parse_method(i: int, raw: Any) -> MethodConfig:
    key = f"methods[{i}]"
    table = as_table(key, raw)
    if "name" not in table:
        raise ConfigError(
            f"{key}.name is required (one of {sorted(SCHEDULERS)}, or 'package.module:Name')"
        )
    name = table["name"]
    sweep_raw = as_table(f"{key}.sweep", table.get("sweep", {}))
    sweep = []
    for k, values in sweep_raw.items():
        if not isinstance(values, list):
            raise ConfigError(f"{key}.sweep.{k} must be an array of values, got {values!r}")
        sweep.append((k, tuple(freeze(v) for v in values)))
    params = tuple((k, freeze(v)) for k, v in table.items() if k not in ("name", "sweep"))
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
        check_known_keys("", raw, _TOP_KEYS)
        for key in ("name", "m", "seeds", "methods"):
            if key not in raw:
                raise ConfigError(f"{key} is required")
        data_raw = as_table("data", raw.get("data", {}))
        sim, attack, defence, privacy = _parse_sim(raw.get("sim", {}), base_dir)
        seeds = raw["seeds"]
        if isinstance(
            seeds, range
        ):  # ``--seeds N`` (`adcs.experiments.config.overrides.option_edits`)
            seeds = list(seeds)
        if not isinstance(seeds, list):
            raise ConfigError(f"seeds must be an array of integers, got {seeds!r}")
        methods_raw = raw["methods"]
        if not isinstance(methods_raw, list):
            raise ConfigError("methods must be an array of tables ([[methods]])")
        outputs = raw.get("outputs", ["curves"])
        if not isinstance(outputs, list):
            raise ConfigError(f"outputs must be an array of strings, got {outputs!r}")
        model_raw = as_table("model", raw.get("model", {}))
        description = raw.get("description", "")
        if not isinstance(description, str):
            raise ConfigError(f"description must be a string, got {description!r}")
        return ExperimentConfig(
            name=raw["name"],
            description=description,
            m=raw["m"],
            seeds=tuple(seeds),
            data=DataConfig.from_dict(data_raw, base_dir),
            sim=sim,
            model=MODEL_TABLE.parse(model_raw, None),
            attack=attack,
            defence=defence,
            privacy=privacy,
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
        path is then neither checked nor used.

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
    """`load_config` of a document already read from ``path`` (its tables resolved
    against the file's folder)."""
    if isinstance(doc.get("suite"), dict):
        raise ConfigError(
            f"{path}: an attack suite (it has a [suite] table), not an experiment "
            f"configuration: run it with `adcs bench attacks --config {path}`"
        )
    data = doc.get("data", {})
    if data_path is not None and isinstance(data, dict):
        given = str(Path(data_path).expanduser().resolve())
        doc = {**doc, "data": {**data, "path": given}}
    return config_from_dict(doc, source=str(path), base_dir=path.parent)


def config_to_dict(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration as a plain TOML/JSON-able document; ``config_from_dict`` inverts it."""
    methods = []
    for method in config.methods:
        entry: dict[str, Any] = {"name": method.name}
        entry.update({k: value_to_toml(v) for k, v in method.params})
        if method.sweep:
            entry["sweep"] = {k: [value_to_toml(v) for v in vs] for k, vs in method.sweep}
        methods.append(entry)
    doc: dict[str, Any] = {
        "name": config.name,
        "description": config.description,
        "m": config.m,
        "seeds": list(config.seeds),
        "outputs": list(config.outputs),
        "data": config.data.to_dict(),
        "sim": _sim_to_dict(config),
        "model": MODEL_TABLE.to_dict(config.model),
        "methods": methods,
    }
    return doc


# ---------------------------------------------------------------------------------------------
# the shipped configurations, overrides and merging


def shipped_configs_folder() -> Path:
    """The folder of the configurations shipped with the package (``adcs/experiments/configs``:
    in a source checkout a link to its ``experiments/`` folder, in a wheel its package data)."""
    packaged = Path(str(resources.files("adcs.experiments") / "configs"))
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[4] / "experiments"  # a checkout without the link


def shipped_configs() -> tuple[str, ...]:
    """Names of the shipped configurations: their paths in `shipped_configs_folder`
    without ``.toml`` (``fig1``, ``quick``, ``successor/paper``, ``leaderboard/m6``), sorted."""
    root = shipped_configs_folder()
    return tuple(
        sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.toml"))
    )


def packaged_config_path(name: str) -> Path:
    """Path of a shipped configuration by name (one of `shipped_configs`)."""
    known = shipped_configs()
    if name not in known:
        raise ConfigError(f"no shipped configuration {name!r}; known: {', '.join(known)}")
    return shipped_configs_folder() / f"{name}.toml"


def packaged_config(name: str) -> ExperimentConfig:
    """Load a shipped configuration by name (its source reads ``experiments/<name>.toml``)."""
    config = load_config(packaged_config_path(name))
    return dataclasses.replace(config, source=f"experiments/{name}.toml")


def resolve_config(config: str | os.PathLike[str]) -> Path:
    """The file a configuration argument names: the command line's ``adcs run CONFIG`` and
    `adcs.run` both resolve it here.

    An existing path is that file. Otherwise a shipped configuration's name (one of
    `shipped_configs`: ``fig1``, ``successor/paper``), also written as its path in a
    source checkout (``experiments/fig1.toml``), is the shipped file, so a name works from an
    installed wheel as from a checkout.

    Raises
    ------
    ConfigError
        Neither an existing path nor a shipped configuration's name.
    """
    path = Path(config)
    if path.exists():
        return path
    name = path.as_posix().removeprefix("experiments/").removesuffix(".toml")
    known = shipped_configs()
    if name in known:
        return packaged_config_path(name)
    raise ConfigError(
        f"{config}: no such configuration file, nor a shipped configuration's name "
        f"(one of {', '.join(known)})"
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
        for attr in ("data", "sim", "attack", "defence", "privacy", "model", "seeds", "m"):
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
