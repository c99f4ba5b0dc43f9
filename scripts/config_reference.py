"""Write the configuration reference of the documentation site from the code.

Every TOML table and key an experiment configuration accepts, with its type, default and meaning,
is read from the classes that check them: :class:`adcs.experiments.config.ExperimentConfig`,
the library's :class:`adcs.sim.SimConfig`, the library classes the ``kind`` tables name (their
registries, the attacks' and defences' included), the data set and partition
tables (:data:`adcs.data.DATASETS`, :data:`adcs.data.PARTITIONS`) and the schedulers' name table
(:data:`adcs.schedulers.SCHEDULERS`). ``tests/test_docs.py`` fails when the committed page differs.

Usage::

    python scripts/config_reference.py [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import inspect
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adcs.adversary import Crafted, Defence, Liars
from adcs.aggregation import Robust
from adcs.data import DATASETS, PARTITIONS
from adcs.experiments import config as cfg
from adcs.experiments.analysis.outputs import output_names
from adcs.experiments.config.schema import KindTable
from adcs.privacy import PrivateProbes
from adcs.schedulers import SCHEDULERS
from adcs.sim import SimConfig

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "configuration.md"
_NAME = r"[A-Za-z_]\w*"
_ENTRY = re.compile(rf"^{_NAME}(, {_NAME})* : ")
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _plain(text: str) -> str:
    """reST to markdown: ``x`` and :role:`x` become `x`."""
    return _ROLE.sub(r"`\1`", text.replace("``", "`"))


def _entry_types(line: str) -> dict[str, str]:
    """``"a : int, b : float in (0, 1]"`` → ``{"a": "int", "b": "float in (0, 1]"}``."""
    out: dict[str, str] = {}
    waiting: list[str] = []  # names before a shared type: "a, b : float"
    for part in re.split(rf",\s*(?={_NAME}(?:, {_NAME})* : )", line):
        names, _, kind = part.partition(" : ")
        waiting += [name.strip() for name in names.split(",")]
        if kind:
            out.update(dict.fromkeys(waiting, kind.strip()))
            waiting = []
    out.update(dict.fromkeys(waiting, ""))
    return out


def docstring_entries(obj: Any) -> dict[str, tuple[str, str]]:
    """``name → (type, text)`` from the Attributes and Parameters sections of a numpy docstring.

    An entry naming several attributes (``a, b : float`` or ``a : int, b : float``) gives each
    of them the same text.
    """
    lines = (inspect.getdoc(obj) or "").splitlines()
    types: dict[str, str] = {}
    texts: dict[str, list[str]] = {}
    section = ""
    names: list[str] = []
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
            section = line.strip()
            names = []
            continue
        if section not in ("Attributes", "Parameters") or set(line.strip()) == {"-"}:
            continue
        if _ENTRY.match(line):
            entry = _entry_types(line)
            types.update(entry)
            names = list(entry)
            for name in names:
                texts[name] = []
        elif line.startswith(" ") and names:
            for name in names:
                texts[name].append(line.strip())
    return {n: (_plain(types[n]), _plain(" ".join(texts[n]))) for n in types}


def _value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(_value(v).strip("`") for v in value) + "]`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return _value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        made = field.default_factory()
        return "a table" if dataclasses.is_dataclass(made) else _value(made)
    return "required"


def field_rows(
    cls: type[Any],
    *,
    skip: Iterable[str] = (),
    docs: Mapping[str, tuple[str, str]] | None = None,
    defaults: Mapping[str, str] | None = None,
    listed: Iterable[str] = (),
) -> list[str]:
    """Markdown table rows (key, type, default, meaning) for the init fields of ``cls``.

    The type is the docstring's (which names allowed values and ranges), else the annotation;
    an enum's values are added to it, but for the fields ``listed`` (their text names them).
    """
    inherited = {k: v for base in reversed(cls.__mro__) for k, v in docstring_entries(base).items()}
    text = dict(docs if docs is not None else inherited)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if not f.init or f.name in skip or f.name.startswith("_"):
            continue
        kind, meaning = text.get(f.name, ("", ""))
        kind = kind or f"`{f.type}`"
        if isinstance(f.default, enum.Enum) and f.name not in listed:
            kind += " (one of " + ", ".join(_value(v) for v in type(f.default)) + ")"
        default = (defaults or {}).get(f.name) or _default(f)
        rows.append(f"| `{f.name}` | {_cell(kind)} | {default} | {_cell(meaning)} |")
    return rows


def _keys(keys: Iterable[str]) -> str:
    return ", ".join(f"`{k}`" for k in sorted(keys)) or "—"


def top_section() -> list[str]:
    docs = docstring_entries(cfg.ExperimentConfig)
    docs["name"] = ("str", "Names the experiment (non-empty, no `/`).")
    docs["description"] = ("str", "A line for the report.")
    docs["data"] = ("table", "The `[data]` table.")
    docs["sim"] = ("table", "The `[sim]` table.")
    docs["model"] = ("table", "The `[model]` table.")
    docs["methods"] = ("array of tables", "The `[[methods]]` tables, at least one.")
    kind, text = docs["outputs"]
    docs["outputs"] = (
        kind,
        text.replace("from `output_names`", "any of " + _keys(output_names())),
    )
    tables = {k: "its defaults" for k in ("data", "sim", "model")}
    return [
        "## Top level",
        "",
        "Keys outside any table. `data`, `sim`, `model` and `methods` are the tables below.",
        "",
        *field_rows(
            cfg.ExperimentConfig,
            skip={"source", "attack", "defence", "privacy"},  # [sim.attack], ...
            docs=docs,
            defaults=tables,
        ),
    ]


def data_section() -> list[str]:
    lines = [
        "## `[data]`",
        "",
        "Where the data come from and how they are split over clients. The partition is given",
        "either as a `[data.partition]` table (keys: `kind`, `seed`, `resample_per_seed` and the",
        "partition's parameters) or flat in `[data]` (keys: `partition` for the kind,",
        "`partition_seed`, `resample_per_seed` or its older name `partition_per_seed`, and the",
        "partition's parameters beside the data set's options).",
        "",
        *field_rows(cfg.DataConfig, skip={"flat", "options", "params"}),
        "",
        "Besides these: the data set's options and the partition's parameters (tables below).",
        "",
        "### Data sets (`data.dataset`)",
        "",
        "| dataset | options | required | `path` names |",
        "|---|---|---|---|",
    ]
    for name, entry in DATASETS.items():
        what = entry.path or "—"
        lines.append(f"| `{name}` | {_keys(entry.keys)} | {_keys(entry.required)} | {what} |")
    lines += [
        "",
        "### Partitions (`data.partition.kind`, or `data.partition` in the flat form)",
        "",
        "| partition | parameters | required | defaults |",
        "|---|---|---|---|",
    ]
    for name, kind in PARTITIONS.items():
        defaults = ", ".join(f"`{k} = {v}`" for k, v in sorted(kind.defaults.items())) or "—"
        lines.append(f"| `{name}` | {_keys(kind.keys)} | {_keys(kind.required)} | {defaults} |")
    return lines


def _kind_rows(table: KindTable) -> list[str]:
    """Each kind of ``table`` (a row of its registry): its class and keys, then their meaning."""
    rows = ["| kind | class | keys |", "|---|---|---|"]
    for kind, cls in table.registry.items():
        keys = _keys(["kind", *table.keys(cls)])
        rows.append(f"| `{kind}` | `{cls.__module__}.{cls.__qualname__}` | {keys} |")
    for kind, cls in table.registry.items():
        if table.keys(cls):
            rows += ["", f'`kind = "{kind}"`:', ""]
            rows += field_rows(cls, skip=set(table.hidden))
    return rows


def sim_section() -> list[str]:
    defence_docs = docstring_entries(Defence)
    rules = ", ".join(f'`"{r.value}"`' for r in Robust)
    defence_docs["aggregation"] = ("str", f"The aggregation rule, one of {rules}.")
    return [
        "## `[sim]`",
        "",
        "The simulator: the keys are the arguments of `adcs.sim.SimConfig`, which checks them.",
        "Its sub-tables `availability`, `system`, `server_optimizer`, `attack`, `defence` and",
        "`privacy` follow.",
        "",
        *field_rows(SimConfig, skip={"availability", "system", "server_optimizer"}),
        "",
        "### `[sim.availability]`",
        "",
        'Which clients can be selected each round. `kind` (default `"always"`) names a row of',
        '`adcs.sim.availability.AVAILABILITY` (or an import path `"package.module:Name"`); the',
        "other keys are that class's constructor arguments:",
        "",
        *_kind_rows(cfg.AVAILABILITY_TABLE),
        "",
        "### `[sim.system]`",
        "",
        "Client devices and the simulated clock; without this table there is no clock. `kind`",
        '(default `"lognormal"`) names a row of `adcs.sim.system.SYSTEM_PROFILES`; the other',
        "keys are that class's constructor arguments:",
        "",
        *_kind_rows(cfg.SYSTEM_TABLE),
        "",
        "### `[sim.server_optimizer]`",
        "",
        "The server step (`adcs.optimizers`); without this table, plain FedAvg with `server_lr`.",
        '`kind` (default `"fedavg"`) names a row of `adcs.optimizers.SERVER_OPTIMIZERS` (or an',
        "import path, or an entry point of `adcs.server_optimizers`); the other keys are that",
        'class\'s constructor arguments. The inline forms `server_optimizer = "fedadam"` (a kind',
        'with its defaults) and `server_optimizer = {kind = "fedadam", eta = 0.01}` are the same',
        "table.",
        "",
        *_kind_rows(cfg.SERVER_OPTIMIZER_TABLE),
        "",
        "### `[sim.attack]`",
        "",
        "Malicious clients, the same for every method of a seed (give exactly one of `clients`",
        'and `n_malicious`). `kind` (default `"lie"`) names a row of `adcs.adversary.ATTACKS`',
        "(or an import path, or an entry point of `adcs.attacks`); the other keys are that",
        'class\'s constructor arguments. `kind = "lie"` (`adcs.adversary.Liars`):',
        "",
        *field_rows(Liars, listed={"direction"}),
        "",
        'With `kind = "crafted"` the malicious clients report *and send* crafted updates',
        "(`adcs.adversary.Crafted`; see the threat model in the concepts). Its keys:",
        "",
        *field_rows(Crafted, skip={"seed"}),
        "",
        "### `[sim.defence]`",
        "",
        'Defences for every method; all off by default. `kind` (default `"standard"`) names a',
        "row of `adcs.adversary.DEFENCES` (or an import path, or an entry point of",
        '`adcs.defences`). `kind = "standard"` (`adcs.adversary.Defence`):',
        "",
        *field_rows(Defence, docs=defence_docs, listed={"aggregation"}),
        "",
        "### `[sim.privacy]`",
        "",
        "Private selection for every method (`adcs.privacy.PrivateProbes`; the threat model is",
        "in the concepts): each probe reply clipped and noised on the client, the training",
        "updates through DP-FedAvg, each client's (ε, δ) accounted. Its keys:",
        "",
        *field_rows(PrivateProbes),
    ]


def model_section() -> list[str]:
    return [
        "## `[model]`",
        "",
        'The model every run trains. `kind` (default `"logistic"`, the paper\'s) names a row of',
        "`adcs.sim.models.MODELS` (or an import path, or an entry point of `adcs.models`); the",
        "other keys are that class's constructor arguments:",
        "",
        *_kind_rows(cfg.MODEL_TABLE),
    ]


def methods_section() -> list[str]:
    lines = [
        "## `[[methods]]`",
        "",
        "One table per method. `name` is a scheduler name (below), an import path",
        '`"package.module:Name"` or an entry point of the group `adcs.schedulers`; the other keys',
        "are the scheduler's parameters (`m` is the top-level key). A `[methods.sweep]` table maps",
        "parameters to arrays of values; the grid is their Cartesian product.",
        "",
    ]
    for name in SCHEDULERS:
        cls = SCHEDULERS[name]
        lines += [f"### `{name}`", "", f"`{cls.__module__}.{cls.__qualname__}`", ""]
        if any(f.init and f.name != "m" for f in dataclasses.fields(cls)):
            lines += field_rows(cls, skip={"m"})
        else:
            lines.append("No parameters besides `m`.")
        lines.append("")
    return lines


def reference_markdown() -> str:
    """The whole page."""
    parts = [
        "# Configuration",
        "",
        "<!-- Generated by scripts/config_reference.py from the code; do not edit by hand. -->",
        "",
        "An experiment configuration is a TOML file (`adcs run CONFIG.toml`; the shipped ones are",
        "in `experiments/`). Every key below can also be changed from the command line with",
        "`--set KEY=VALUE` ([Overrides](../how-to/overrides.md)). Unknown keys and impossible",
        "values are refused before any work starts, with the key named. Types are those of the",
        "dataclass fields that hold the values.",
        "",
        *top_section(),
        "",
        *data_section(),
        "",
        *sim_section(),
        "",
        *model_section(),
        "",
        *methods_section(),
    ]
    return "\n".join(parts).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    args = parser.parse_args(argv)
    text = reference_markdown()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.name}: the configuration reference is out of date", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
