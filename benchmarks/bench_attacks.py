"""The attack suite: how capturable each scheduler is, and what the defences change.

Clients that game the scheduler (`adcs.adversary`) against Uniform, PowerOfChoice, OCS,
DivFL and ADCS — the methods of ``experiments/attacks.toml`` — each with and without defences:

* **capture** (poison none: the liars train honestly): every lie of ``[suite].lies`` × k
  malicious clients (``[suite].k``, drawn from each seed, nested) × {no defence; defences on,
  naive liar; defences on, adaptive liar}. The measure is each liar's selection rate over the
  same client's rate in the same scheduler's no-attack run of the seed (with the same defences);
* **poison**: each poison × k, the poisoners also telling ``[suite].poison_lie``, without defence
  (mean aggregation) and with the defences and ``[suite].robust`` aggregation (naive and
  adaptive). The measure is the honest clients' worst / 10th-percentile / average accuracy;
* **no-attack cost**: each scheduler's no-attack run without defences, with the defences, with
  the defences and the robust rule; and each defence of ``[suite.costs]`` alone on
  ``[suite].cost_methods``.

Runs are shared where they must be equal: a method in ``[suite].blind`` sees no statistics, so
its lie runs are its no-attack run (not run again; tests/adversary prove the selections equal);
without a defence the adaptive liar is the naive one. Every run of a seed shares its minibatch
stream (common random numbers), so a capture ratio compares like with like.

Writes to ``--out`` (default ``results/attacks``): ``runs.csv`` (one row per run: its attack,
defence, malicious clients, their rates and no-attack rates, honest accuracy), ``selections.npz``
(``selected/<run_id>``, from which every rate is computed), ``client_acc.npz``, ``report.md``
(the capture tables, the poison table, the no-attack costs, the goal check) and
``manifest.json``.

    adcs bench attacks                          # the full suite (see --estimate for its time)
    adcs bench attacks --estimate               # time a short run of every run, extrapolate
    adcs bench attacks --quick                  # 1 000 rounds, 1 seed, k = 1: indicative only
    adcs bench attacks --methods adcs,ocs --blocks capture --rounds 1000 --seeds 0
"""

from __future__ import annotations

import os

# Before numpy loads (direct runs): one BLAS thread; `adcs bench attacks` relies on threadpoolctl.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import csv
import dataclasses
import enum
import json
import math
import platform
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import numpy as np

from adcs._validate import is_int
from adcs.adversary import Crafted, Defence, Liars, capture_ratio, honest_accuracy, selection_rates
from adcs.experiments.config import ConfigError, ExperimentConfig, config_from_dict
from adcs.experiments.config.adversary import adversarial_run
from adcs.experiments.run.plan import expand_runs, federated_data
from adcs.experiments.run.workload import DataSource, load_data
from adcs.sim import RunResult, RunSpec, simulate

try:  # the checkout and the tests import this file as benchmarks.bench_attacks
    from benchmarks import attack_families, attack_report
except ImportError:  # `adcs bench attacks` loads it from its folder (also the installed copy's)
    import attack_families  # type: ignore[no-redef]
    import attack_report  # type: ignore[no-redef]

family_lines, shares = attack_families.family_lines, attack_families.shares
interval_share = attack_families.interval_share
_fmt, goal_lines, cost_table = (
    attack_report._fmt,
    attack_report.goal_lines,
    attack_report.cost_table,
)
capturability_lines = attack_report.capturability_lines
capture_tables, accuracy_tables = attack_report.capture_tables, attack_report.accuracy_tables

REPO = Path(__file__).resolve().parents[1]
# the checkout's experiments/, or the installed package's copy beside these scripts (adcs/)
DEFAULT_CONFIG = (
    next((p for p in (REPO / "experiments", REPO / "experiments" / "configs") if p.is_dir()), REPO)
    / "attacks.toml"
)


def _put_in_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` by the finished folder ``tmp``, keeping ``out``'s nested results folders
    (families/, costs/) that ``tmp`` does not have."""
    if out.exists():
        for sub in out.iterdir():
            if sub.is_dir() and not (tmp / sub.name).exists():
                sub.rename(tmp / sub.name)
        shutil.rmtree(out)
    tmp.rename(out)


def _shown(source: str) -> str:
    """A configuration's path as the manifest records it: relative to the checkout when inside it."""
    try:
        return str(Path(source).resolve().relative_to(REPO))
    except ValueError:
        return source


BLOCKS = ("clean", "capture", "poison", "costs", "families")
SUITE_KEYS = ("k", "undefended", "naive")
"""A family's keys that the suite reads, not passed to `adcs.adversary.Crafted`: its k;
``undefended = false``: not run without defence; ``naive = false``: with the bounds, the adaptive
form only."""


# ---------------------------------------------------------------------------------------------
# the suite


@dataclass(frozen=True)
class Suite:
    """The ``[suite]`` table of the configuration (see ``experiments/attacks.toml``)."""

    k: tuple[int, ...] = (1, 3)
    lies: tuple[tuple[str, ...], ...] = (
        ("loss",),
        ("direction",),
        ("norm",),
        ("loss", "direction"),
    )
    factor: float = 10.0
    direction: str | float = "orthogonal"
    poisons: tuple[str, ...] = ("direction", "sign_flip", "scaled")
    poison_lie: tuple[str, ...] = ("loss", "direction")
    robust: str = "norm_clip"
    blind: tuple[str, ...] = ("uniform",)
    cost_methods: tuple[str, ...] = ("adcs",)
    defence: Defence = field(default_factory=Defence)
    costs: tuple[tuple[str, Defence], ...] = ()
    families: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    family_k: tuple[int, ...] = (1, 3, 5)
    bound: Defence = field(default_factory=Defence)

    def crafted(self, keys: Mapping[str, Any], k: int, adaptive: bool) -> Crafted:
        """A family's attack with k malicious clients (`adcs.adversary.Crafted`)."""
        return Crafted(
            n_malicious=k,
            adaptive=adaptive,
            **{a: v for a, v in keys.items() if a not in SUITE_KEYS},
        )

    def ks_of(self, keys: Mapping[str, Any]) -> tuple[int, ...]:
        """A family's k: its own ``k = [...]`` key, else ``family_k``."""
        own = keys.get("k")
        return self.family_k if own is None else tuple(own if isinstance(own, list) else [own])

    @property
    def defended(self) -> Defence:
        """The defences on the poison side: the lie defences and the robust rule."""
        return dataclasses.replace(self.defence, aggregation=self.robust)

    def attack(self, k: int, lie: Sequence[str], poison: str, adaptive: bool) -> Liars:
        return Liars(
            n_malicious=k,
            lie=tuple(lie),
            factor=self.factor,
            direction=self.direction,
            poison=poison,
            adaptive=adaptive,
        )


def parse_suite(raw: Mapping[str, Any]) -> Suite:
    """The validated ``[suite]`` table (ConfigError naming the key)."""
    allowed = {f.name for f in dataclasses.fields(Suite)}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join('suite.' + k for k in unknown)}")
    values = dict(raw)
    try:
        values["defence"] = Defence(**values.get("defence", {}))
        values["costs"] = tuple(
            (name, Defence(**table)) for name, table in values.get("costs", {}).items()
        )
        values["bound"] = Defence(**values.get("bound", {}))
        values["families"] = tuple(
            (name, dict(table)) for name, table in values.get("families", {}).items()
        )
        for key in ("k", "poisons", "poison_lie", "blind", "cost_methods", "family_k"):
            if key in values:
                values[key] = tuple(values[key])
        if "lies" in values:
            values["lies"] = tuple(tuple(lie) for lie in values["lies"])
        suite = Suite(**values)
        Defence(aggregation=suite.robust)
        for lie in (*suite.lies, suite.poison_lie):  # every attack of the suite is valid
            for poison in ("none", *suite.poisons):
                if lie or poison != "none":
                    suite.attack(max(suite.k), lie, poison, True)
        for name, keys in suite.families:
            if {"clients", "n_malicious", "adaptive"} & set(keys):
                raise ValueError(f"families.{name}: the suite sets clients and adaptive")
            for key in ("undefended", "naive"):
                if not isinstance(keys.get(key, True), bool):
                    raise ValueError(f"families.{name}.{key} must be true or false")
            if (keys.get("absent") is True) != (name == attack_families.ABSENT):
                raise ValueError(
                    f"families.{name}: the runs without the attackers (absent = true) are the "
                    f"family named {attack_families.ABSENT!r}, and only they"
                )
            suite.crafted(keys, max(suite.ks_of(keys)), True)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"suite: {exc}") from None
    return suite


def load_suite(path: str | Path) -> tuple[ExperimentConfig, Suite]:
    """The experiment (everything but ``[suite]``) and the suite of a suite configuration."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    suite = parse_suite(raw.pop("suite", {}))
    config = config_from_dict(raw, source=str(path), base_dir=path.parent)
    check_ks(config, suite, f"{path}: ")
    return config, suite


def check_ks(config: ExperimentConfig, suite: Suite, where: str = "") -> None:
    """Every k of ``suite.k`` and ``suite.family_k`` distinct, >= 1 and below N (ConfigError
    prefixed by ``where``): a repeated k repeats its runs, N leaves no honest client."""
    own = [(f"families.{name}.k", suite.ks_of(keys)) for name, keys in suite.families]
    for name, ks in (("k", suite.k), ("family_k", suite.family_k), *own):
        if not all(is_int(k) and k >= 1 for k in ks) or len(set(ks)) != len(ks):
            raise ConfigError(f"{where}suite.{name} must be distinct integers >= 1, got {list(ks)}")
    n = config.data.total_clients
    k_max = max(suite.k + suite.family_k + tuple(k for _, ks in own for k in ks), default=0)
    if n is not None and k_max >= n:
        raise ConfigError(f"{where}suite.k={k_max} leaves no honest client")


def _ints(flag: str, text: str) -> tuple[int, ...]:
    """A flag's comma-separated integers (ConfigError naming the flag)."""
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"{flag} must be comma-separated integers, got {text!r}") from None


# ---------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class Planned:
    """One run of the suite."""

    run_id: str
    block: str
    method: str
    seed: int
    defence: str
    attack: str
    k: int
    adaptive: bool
    malicious: tuple[int, ...]
    baseline: str
    spec: RunSpec = field(compare=False)
    since: int = 0
    """Rates are measured from this round on (a sleeper's start)."""


def _label(lie: Sequence[str]) -> str:
    return "+".join(lie) if lie else "-"


def plan_suite(
    config: ExperimentConfig,
    suite: Suite,
    blocks: Sequence[str] = BLOCKS,
    methods: Sequence[str] | None = None,
) -> list[Planned]:
    """Every run of the suite, in blocks (module docstring)."""
    n = config.data.total_clients
    base = [r for r in expand_runs(config) if methods is None or r.meta["method"] in methods]
    out: list[Planned] = []

    def add(
        run: Any,
        block: str,
        defence_label: str,
        defence: Defence | None,
        attack_label: str = "none",
        attack: Liars | Crafted | None = None,
    ) -> None:
        k = 0 if attack is None else int(attack.n_malicious or 0)
        adaptive = attack is not None and attack.adaptive
        variant, method = run.meta["variant"], run.meta["method"]
        parts = [variant, defence_label, attack_label]
        if attack is not None:
            parts += [f"k{k}", "adaptive" if adaptive else "naive"]
        run_id = "/".join([*parts, f"seed{run.seed}"])
        baseline = "/".join([variant, defence_label, "none", f"seed{run.seed}"])
        if block == "costs":
            baseline = "/".join([variant, "off", "none", f"seed{run.seed}"])
        scheduler, hook = adversarial_run(run.scheduler, run.seed, n, attack, defence)
        malicious = () if attack is None else attack.malicious(run.seed, n)
        # every run of a method and seed draws the same scheduler randomness: a defended or
        # attacked run is paired with its baseline, not compared across two streams
        stream = f"{variant}/seed{run.seed}"
        spec = RunSpec(scheduler, run.seed, run_id, {"method": method}, hook, stream)
        since = attack.start if isinstance(attack, Crafted) else 0
        out.append(
            Planned(run_id, block, variant, run.seed, defence_label, attack_label, k,
                    adaptive, malicious, baseline, spec, since)
        )  # fmt: skip

    defended, robust = suite.defence, suite.defended
    lies = "clean" in blocks or "capture" in blocks or "poison" in blocks
    for run in base:
        if lies:
            add(run, "clean", "off", None)
            add(run, "clean", "on", defended)
            add(run, "clean", "on+robust", robust)
        method = run.meta["method"]
        if "families" in blocks:
            if not lies:
                add(run, "clean", "off", None)
            add(run, "clean", "bound", suite.bound)
            # every method: a family's attackers send what they report, so even a scheduler
            # that reads no statistics (suite.blind) aggregates their updates
            for name, keys in suite.families:
                for k in suite.ks_of(keys):
                    if keys.get("undefended", True):
                        add(run, "families", "off", None, name, suite.crafted(keys, k, False))
                    for adaptive in (False, True) if keys.get("naive", True) else (True,):
                        attack = suite.crafted(keys, k, adaptive)
                        add(run, "families", "bound", suite.bound, name, attack)
        if "capture" in blocks and method not in suite.blind:
            for lie in suite.lies:
                for k in suite.k:
                    add(
                        run,
                        "capture",
                        "off",
                        None,
                        _label(lie),
                        suite.attack(k, lie, "none", False),
                    )
                    for adaptive in (False, True):
                        attack = suite.attack(k, lie, "none", adaptive)
                        add(run, "capture", "on", defended, _label(lie), attack)
        if "poison" in blocks:
            for poison in suite.poisons:
                label = f"{poison}<{_label(suite.poison_lie)}>"
                for k in suite.k:
                    attack = suite.attack(k, suite.poison_lie, poison, False)
                    add(run, "poison", "off", None, label, attack)
                    for adaptive in (False, True):
                        attack = suite.attack(k, suite.poison_lie, poison, adaptive)
                        add(run, "poison", "on+robust", robust, label, attack)
        if "costs" in blocks and method in suite.cost_methods:
            if not lies and "families" not in blocks:
                add(run, "clean", "off", None)
            for name, defence in suite.costs:
                add(run, "costs", name, defence)
    return out


# ---------------------------------------------------------------------------------------------
# running and measuring


@dataclass(frozen=True)
class Measured:
    """What one run gave: the rates it is judged by and the honest clients' accuracy."""

    planned: Planned
    rates: np.ndarray
    baseline_rates: np.ndarray
    worst: float
    p10: float
    average: float
    client_updates: int
    loss_evals: int
    interval_share: float = math.nan
    """The most a malicious client holds in any L ≥ W rounds ÷ L × its fair share (whole run)."""

    @property
    def ratios(self) -> np.ndarray:
        return capture_ratio(self.rates, self.baseline_rates, self.planned.malicious)


def run_plan(
    plan: Sequence[Planned], data: Any, config: ExperimentConfig, workers: int
) -> dict[str, RunResult]:
    """Simulate every planned run (all of a seed in one minibatch stream); results by run id."""
    sim_config = config.sim.for_clients(config.data.total_clients)
    done = [0]
    started = time.perf_counter()

    def progress(rounds: int) -> None:
        if rounds - done[0] >= max(1, sim_config.rounds // 20) or rounds == sim_config.rounds:
            done[0] = rounds
            print(
                f"  round {rounds}/{sim_config.rounds} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )

    model = config.model.build(data.input_shape, data.n_classes)  # the [model] table
    results = simulate(
        [p.spec for p in plan], data, sim_config, progress, model=model, workers=workers
    )
    return {p.run_id: r for p, r in zip(plan, results, strict=True)}


def measure(
    plan: Sequence[Planned], results: Mapping[str, RunResult], n: int, window: int = 100
) -> list[Measured]:
    """Rates (from the selection records), no-attack rates and honest accuracy of every run;
    ``window`` W: the malicious clients' largest share over any interval of ≥ W rounds."""
    rates = {run_id: selection_rates(r.selected, n) for run_id, r in results.items()}
    out = []
    for p in plan:
        result = results[p.run_id]
        base = rates.get(p.baseline, np.full(n, np.nan))
        if p.since:  # a sleeper: its rounds since it woke, against the same rounds without it
            rates[p.run_id] = selection_rates(result.selected[p.since :], n)
            if p.baseline in results:
                base = selection_rates(results[p.baseline].selected[p.since :], n)
        # client_acc's columns are the evaluated clients (all, or [sim] eval_clients of them)
        evaluated = result.eval_clients if result.eval_clients.size else np.arange(n)
        liars = np.flatnonzero(np.isin(evaluated, p.malicious))
        honest = honest_accuracy(result.client_acc, liars.tolist())
        interval = interval_share(result.selected, p.malicious, window, n)
        out.append(
            Measured(p, rates[p.run_id], base, honest.worst, honest.p10, honest.average,
                     int(result.client_updates), int(result.loss_evals), interval)
        )  # fmt: skip
    return out


def write_results(
    out: Path,
    measured: Sequence[Measured],
    results: Mapping[str, RunResult],
    config: ExperimentConfig,
    suite: Suite,
    meta: Mapping[str, Any],
) -> None:
    """The results folder, written under a temporary name and renamed at the end."""
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        _write_runs_csv(tmp / "runs.csv", measured)
        np.savez_compressed(
            tmp / "selections.npz",
            **{f"selected/{run_id}": r.selected for run_id, r in results.items()},
        )  # type: ignore[arg-type]
        np.savez_compressed(
            tmp / "client_acc.npz",
            **{run_id: r.client_acc.astype(np.float32) for run_id, r in results.items()},
        )  # type: ignore[arg-type]
        (tmp / "report.md").write_text(
            "\n".join(report_lines(measured, config, suite, meta)) + "\n"
        )
        manifest = {
            "experiment": config.name,
            "config_source": _shown(config.source),
            "suite": _jsonable(dataclasses.asdict(suite)),
            "seeds": list(config.seeds),
            "rounds": config.sim.rounds,
            "runs": [m.planned.run_id for m in measured],
            **meta,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        _put_in_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def report_lines(
    measured: Sequence[Measured],
    config: ExperimentConfig,
    suite: Suite,
    meta: Mapping[str, Any],
) -> list[str]:
    """The report's Markdown lines (``meta``: the manifest's ``malicious`` clients per seed)."""
    methods = list(dict.fromkeys(m.planned.method for m in measured))
    return [
        f"# {config.name}: selection under attack",
        "",
        f"{config.description}.",
        "",
        f"N = {config.data.total_clients}, m = {config.m}, T = {config.sim.rounds}, seeds "
        f"{list(config.seeds)}; lies ×{suite.factor:g}, direction {suite.direction!r}. "
        f"Defences on: `{_defence_text(suite.defence)}`; poison runs add aggregation "
        f"`{suite.robust}`; the families' bounds: `{_defence_text(suite.bound)}`. "
        "Malicious clients per seed: "
        + ", ".join(f"seed {s}: {list(v)}" for s, v in meta["malicious"].items())
        + ". Every rate is computed from `selections.npz`.",
        "",
        *goal_lines(measured, methods),
        *capturability_lines(measured, methods),
        *capture_tables(measured, methods),
        *accuracy_tables(measured, methods),
        *cost_table(measured),
        *family_lines(measured, methods, suite.bound.window),
    ]


# ---------------------------------------------------------------------------------------------
# a results folder read back: its report from its files, several folders merged


def suite_of_manifest(raw: Mapping[str, Any]) -> Suite:
    """The suite a manifest records (``dataclasses.asdict`` of it, tables as lists of pairs)."""
    table = dict(raw)
    for key in ("costs", "families"):
        table[key] = {name: dict(values) for name, values in table.get(key, [])}
    return parse_suite(table)


def read_folder(folder: Path) -> tuple[ExperimentConfig, Suite, list[Measured], dict[str, Any]]:
    """A results folder's experiment, suite, measured runs and manifest, from its files.

    The experiment is the manifest's configuration (``config_source``, relative to the checkout)
    at the manifest's rounds and seeds; every rate, share and lift is recomputed from
    ``selections.npz``, the accuracies are ``runs.csv``'s (the runs' own).
    """
    manifest = json.loads((folder / "manifest.json").read_text())
    source = Path(manifest["config_source"])
    config, _ = load_suite(source if source.is_absolute() else REPO / source)
    config = _with_rounds(config, int(manifest["rounds"]), [int(s) for s in manifest["seeds"]])
    suite = suite_of_manifest(manifest["suite"])
    n = config.data.total_clients
    with (folder / "runs.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    with np.load(folder / "selections.npz") as npz:
        selected = {row["run_id"]: npz[f"selected/{row['run_id']}"] for row in rows}
    measured = []
    for row in rows:
        since = int(row.get("since") or 0)
        planned = Planned(
            row["run_id"], row["block"], row["method"], int(row["seed"]), row["defence"],
            row["attack"], int(row["k"]), row["adaptive"] == "True",
            tuple(json.loads(row["malicious"])), row["baseline"], None,  # type: ignore[arg-type]
            since,
        )  # fmt: skip
        base = selected.get(planned.baseline)
        measured.append(
            Measured(
                planned,
                selection_rates(selected[planned.run_id][since:], n),
                np.full(n, np.nan) if base is None else selection_rates(base[since:], n),
                float(row["honest_worst"]), float(row["honest_p10"]),
                float(row["honest_average"]), int(row["client_updates"]),
                int(row["loss_evals"]),
                interval_share(selected[planned.run_id], planned.malicious,
                               suite.bound.window, n),
            )
        )  # fmt: skip
    return config, suite, measured, manifest


def write_report(folder: Path) -> None:
    """Rewrite ``folder/report.md`` from the folder's files (`read_folder`)."""
    config, suite, measured, manifest = read_folder(folder)
    lines = report_lines(measured, config, suite, manifest)
    (folder / "report.md").write_text("\n".join(lines) + "\n")


def _unique_runs(
    parts: Sequence[Path], rows: Sequence[list[str]], differing: list[str] | None = None
) -> list[list[str]]:
    """The rows of the parts' runs.csv, a run that two parts ran kept once where both ran it
    alike (the no-attack runs of a seed that every part of it runs; same selections, same row),
    ConfigError where they differ — unless ``differing`` is given: then the first part's run is
    kept and the run's id appended to it."""
    selections: dict[str, np.ndarray] = {}
    kept: dict[str, list[str]] = {}
    for p in parts:
        with np.load(p / "selections.npz") as npz:
            mine = {key.split("/", 1)[1]: npz[key] for key in npz.files}
        for run_id, selected in mine.items():
            if run_id in selections and not np.array_equal(selections[run_id], selected):
                if differing is None:
                    raise ConfigError(f"{p}: run {run_id} differs from another part's")
                differing.append(run_id)
            selections.setdefault(run_id, selected)
    for row in rows:
        if row[0] in kept and kept[row[0]] != row and row[0] not in (differing or ()):
            raise ConfigError(f"run {row[0]}: two parts' rows differ")
        kept.setdefault(row[0], row)
    return list(kept.values())


def merge_folders(parts: Sequence[Path], out: Path, keep_first: bool = False) -> None:
    """One results folder from several of the same suite (e.g. one per seed): their runs,
    selections and accuracies side by side, the manifest's seeds, runs and malicious clients
    joined (each part's command kept, a merged part's parts in its place), and the report
    written from the joined files.
    ``keep_first``: a run two parts ran differently is the first part's (the manifest lists it
    under ``differing_duplicates``), not an error."""
    manifests = [json.loads((p / "manifest.json").read_text()) for p in parts]
    first = manifests[0]

    def same(m: Mapping[str, Any]) -> tuple[Any, ...]:  # the parts may run different families
        suite = {k: v for k, v in m["suite"].items() if k != "families"}
        return suite, m["rounds"], m["config_source"]

    for p, m in zip(parts, manifests, strict=True):
        if same(m) != same(first):
            raise ConfigError(f"{p}: not a part of the same suite as {parts[0]}")
    families = {name: keys for m in manifests for name, keys in m["suite"]["families"]}
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        header: list[str] = []
        rows: list[list[str]] = []
        for p in parts:
            with (p / "runs.csv").open(newline="") as fh:
                reader = csv.reader(fh)
                head = next(reader)
                if header and head != header:
                    raise ConfigError(f"{p}: runs.csv has other columns than {parts[0]}'s")
                header = head
                rows.extend(reader)
        differing: list[str] | None = [] if keep_first else None
        rows = _unique_runs(parts, rows, differing)
        with (tmp / "runs.csv").open("w", newline="") as fh:
            csv.writer(fh).writerows([header, *rows])
        for name in ("selections.npz", "client_acc.npz"):
            arrays: dict[str, np.ndarray] = {}
            for p in parts:
                with np.load(p / name) as npz:
                    arrays.update({k: npz[k] for k in npz.files if k not in arrays})
            np.savez_compressed(tmp / name, **arrays)  # type: ignore[arg-type]
        manifest = {
            **{k: v for k, v in first.items() if k not in ("argv", "finished_at", "wall_s")},
            "suite": {**first["suite"], "families": [[n, k] for n, k in families.items()]},
            "seeds": sorted({s for m in manifests for s in m["seeds"]}),
            "runs": [row[0] for row in rows],
            "malicious": {s: v for m in manifests for s, v in m["malicious"].items()},
            "wall_s": sum(float(m["wall_s"]) for m in manifests),
            "load_average": [m["load_average"] for m in manifests],
            "finished_at": max(m["finished_at"] for m in manifests),
            "parts": [  # a part that was itself merged is its own parts
                part
                for m in manifests
                for part in m.get("parts")
                or [{"argv": m["argv"], "wall_s": m["wall_s"], "finished_at": m["finished_at"]}]
            ],
            "argv": [
                "adcs bench attacks",
                "--merge",
                ",".join(map(str, parts)),
                "--out",
                str(out),
                *(["--keep-first"] if keep_first else []),
            ],
        }
        earlier = [run for m in manifests for run in m.get("differing_duplicates", [])]
        if differing or earlier:
            manifest["differing_duplicates"] = list(dict.fromkeys([*earlier, *(differing or [])]))
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        write_report(tmp)
        _put_in_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_out(out: Path) -> None:
    """Refuse to replace a folder that is not an earlier result of this benchmark."""
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / "manifest.json").is_file())
    ):
        raise ConfigError(f"{out} exists and is not a results folder of this benchmark")


def _defence_text(settings: Defence) -> str:
    default = Defence()
    on = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)
          if getattr(settings, f.name) != getattr(default, f.name)}  # fmt: skip
    return ", ".join(f"{k}={_jsonable(v)}" for k, v in on.items()) or "none"


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):  # the defences' rule, as its configuration value
        return value.value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _write_runs_csv(path: Path, measured: Sequence[Measured]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([
            "run_id", "block", "method", "seed", "defence", "attack", "k", "adaptive",
            "malicious", "liar_rates", "no_attack_rates", "capture_ratios", "honest_worst",
            "honest_p10", "honest_average", "client_updates", "loss_evals", "baseline",
            "attacker_share", "coalition_share", "since", "interval_share",
        ])  # fmt: skip
        for m in measured:
            p = m.planned
            mal = list(p.malicious)
            single, coalition = shares(m.rates, mal)
            writer.writerow([
                p.run_id, p.block, p.method, p.seed, p.defence, p.attack, p.k, p.adaptive,
                json.dumps(mal), json.dumps([round(float(m.rates[c]), 6) for c in mal]),
                json.dumps([round(float(m.baseline_rates[c]), 6) for c in mal]),
                json.dumps([None if not math.isfinite(r) else round(float(r), 6) for r in m.ratios]),
                repr(m.worst), repr(m.p10), repr(m.average), m.client_updates, m.loss_evals,
                p.baseline, _fmt(single, 4), _fmt(coalition, 4), p.since,
                _fmt(m.interval_share, 4),
            ])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the command line


def chosen_families(suite: Suite, text: str) -> Suite:
    """The suite with the families ``--families`` names (comma-separated), or with none
    (``none``: the families block is then its no-attack runs alone)."""
    if text == "none":
        return dataclasses.replace(suite, families=())
    chosen = text.split(",")
    unknown = sorted(set(chosen) - {name for name, _ in suite.families})
    if unknown:
        raise ConfigError(f"--families: no family {unknown} in the suite")
    kept = tuple((n, keys) for n, keys in suite.families if n in chosen)
    return dataclasses.replace(suite, families=kept)


def _with_rounds(
    config: ExperimentConfig, rounds: int | None, seeds: Sequence[int] | None
) -> ExperimentConfig:
    sim = config.sim
    if rounds is not None:
        sim = dataclasses.replace(sim, rounds=rounds, eval_every=min(sim.eval_every, rounds))
    return dataclasses.replace(config, sim=sim, seeds=tuple(seeds) if seeds else config.seeds)


def _one_partition(dataset: DataSource, config: ExperimentConfig) -> Any:
    """The clients' data, one partition for every seed (a liar's rates compare within a seed)."""
    fed = federated_data(dataset, config)
    if len(fed) != 1:
        raise ConfigError(
            f"{config.source}: the attack suite runs every seed on one partition; "
            "set data.resample_per_seed = false"
        )
    return next(iter(fed.values()))


def run_suite(
    config: ExperimentConfig,
    suite: Suite,
    out: Path | None,
    *,
    dataset: DataSource | None = None,
    blocks: Sequence[str] = BLOCKS,
    methods: Sequence[str] | None = None,
    workers: int = 2,
) -> list[Measured]:
    """Plan, simulate, measure and (``out`` given) write the suite's results."""
    if out is not None:
        _check_out(out)
    plan = plan_suite(config, suite, blocks, methods)
    if dataset is None:
        dataset = load_data(config.data)
    data = _one_partition(dataset, config)
    n = config.data.total_clients
    counts = defaultdict(int)
    for p in plan:
        counts[p.block] += 1
    print(
        f"{len(plan)} runs ({', '.join(f'{b}: {c}' for b, c in counts.items())}) × "
        f"{config.sim.rounds} rounds, seeds {list(config.seeds)}, data {dataset.source}",
        flush=True,
    )
    started, cpu = time.perf_counter(), time.process_time()
    results = run_plan(plan, data, config, workers)
    wall = time.perf_counter() - started
    measured = measure(plan, results, n, suite.bound.window)
    if out is not None:
        malicious = {
            seed: next(
                (p.malicious for p in plan if p.seed == seed and len(p.malicious) == max(suite.k)),
                (),
            )
            for seed in config.seeds
        }
        meta = {
            "malicious": malicious,
            "data_source": dataset.source,
            "is_subset": dataset.is_subset,
            "wall_s": wall,
            "workers": workers,
            "platform": platform.platform(),
            "load_average": os.getloadavg()[0],
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "argv": list(sys.argv),
        }
        write_results(out, measured, results, config, suite, meta)
        print(f"wrote {out} ({wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU here)")
    return measured


def estimate(
    config: ExperimentConfig,
    suite: Suite,
    rounds: int,
    workers: int,
    blocks: Sequence[str] = BLOCKS,
    methods: Sequence[str] | None = None,
) -> float:
    """Seconds the full suite should take with ``workers``, from short runs of one seed.

    Every planned run of the first seed is simulated for 1 and for ``rounds`` rounds with one
    worker, in process CPU time (which a busy machine inflates less than wall time); each short
    run evaluates twice, so the two give the cost of a round and of an evaluation. Rounds scale
    linearly, seeds add, workers divide (one minibatch stream per seed).
    """
    dataset = load_data(config.data)

    def cpu_seconds(t: int) -> float:
        short = _with_rounds(config, t, config.seeds[:1])
        short = dataclasses.replace(short, sim=dataclasses.replace(short.sim, eval_every=t))
        plan = plan_suite(short, suite, blocks, methods)
        data = _one_partition(dataset, short)
        model = short.model.build(data.input_shape, data.n_classes)
        start = time.process_time()
        simulate([p.spec for p in plan], data, short.sim.for_clients(n), model=model, workers=1)
        return time.process_time() - start

    n = config.data.total_clients
    one, many = cpu_seconds(1), cpu_seconds(rounds)
    per_round = max(many - one, 0.0) / (rounds - 1)
    per_eval = max(one - per_round, 0.0) / 2
    evals = config.sim.for_clients(n).eval_rounds.size
    seeds = len(config.seeds)
    runs = len(plan_suite(_with_rounds(config, 1, config.seeds[:1]), suite, blocks, methods))
    total = seeds * (per_round * config.sim.rounds + per_eval * evals) / min(workers, seeds)
    print(
        f"{runs} runs per seed, {seeds} seed(s): {per_round * 1e3:.0f} ms CPU per round of a "
        f"seed's runs, {per_eval:.1f} s per evaluation of them, {evals} evaluations"
    )
    print(f"estimated full suite: {total / 60:.0f} min with {min(workers, seeds)} worker(s)")
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="adcs bench attacks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="suite configuration (TOML)")
    parser.add_argument("--out", default="results/attacks", help="results folder")
    parser.add_argument("--data", default=None, help="Fashion-MNIST folder (default: the lookup)")
    parser.add_argument("--rounds", type=int, default=None, help="override T")
    parser.add_argument("--seeds", default=None, help="override the seeds, e.g. 0,1")
    parser.add_argument("--k", default=None, help="override suite.k, e.g. 1")
    parser.add_argument("--family-k", default=None, help="override suite.family_k, e.g. 1,3")
    parser.add_argument(
        "--families",
        default=None,
        help="subset of the families, e.g. sleeper (none: the no-attack runs alone)",
    )
    parser.add_argument("--blocks", default=",".join(BLOCKS), help=f"subset of {','.join(BLOCKS)}")
    parser.add_argument("--methods", default=None, help="subset of the methods, e.g. adcs,ocs")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (one per seed)")
    parser.add_argument("--quick", action="store_true", help="1 000 rounds, seed 0, k = 1")
    parser.add_argument("--estimate", action="store_true", help="time a short run, extrapolate")
    parser.add_argument("--estimate-rounds", type=int, default=41, help="rounds of --estimate")
    parser.add_argument(
        "--merge", default=None, help="join these results folders (comma-separated) into --out"
    )
    parser.add_argument(
        "--keep-first",
        action="store_true",
        help="with --merge: a run two parts ran differently is the first part's",
    )
    parser.add_argument(
        "--report", default=None, help="rewrite this results folder's report.md from its files"
    )
    args = parser.parse_args(argv)
    try:
        if args.report:
            if not (Path(args.report) / "manifest.json").is_file():
                raise ConfigError(f"--report: {args.report} is not a results folder of this bench")
            write_report(Path(args.report))
            return 0
        if args.merge:
            parts = [Path(p) for p in args.merge.split(",") if p]
            missing = [str(p) for p in parts if not (p / "manifest.json").is_file()]
            if missing:
                raise ConfigError(f"--merge: not a results folder: {', '.join(missing)}")
            merge_folders(parts, Path(args.out), keep_first=args.keep_first)
            return 0
        config, suite = load_suite(args.config)
        if args.data is not None:
            config = dataclasses.replace(
                config, data=dataclasses.replace(config.data, path=args.data)
            )
        if args.quick:
            args.rounds = args.rounds or 1000
            args.seeds = args.seeds or "0"
            args.k = args.k or "1"
        for flag in ("rounds", "workers", "estimate_rounds"):
            value = getattr(args, flag)
            if value is not None and value < 1:
                raise ConfigError(f"--{flag.replace('_', '-')} must be >= 1, got {value}")
        seeds = _ints("--seeds", args.seeds) if args.seeds else None
        config = _with_rounds(config, args.rounds, seeds)
        if args.k:
            suite = dataclasses.replace(suite, k=_ints("--k", args.k))
        if args.family_k:
            suite = dataclasses.replace(suite, family_k=_ints("--family-k", args.family_k))
        check_ks(config, suite, "--k/--family-k: ")
        if args.families:
            suite = chosen_families(suite, args.families)
        blocks = [b for b in args.blocks.split(",") if b]
        if not set(blocks) <= set(BLOCKS):
            raise ConfigError(f"--blocks must be a subset of {list(BLOCKS)}, got {blocks}")
        methods = args.methods.split(",") if args.methods else None
        names = [m.name for m in config.methods]
        if methods is not None and not set(methods) <= set(names):
            unknown = sorted(set(methods) - set(names))
            raise ConfigError(f"--methods: no method {unknown} in the suite's {names}")
        if args.estimate:
            estimate(config, suite, args.estimate_rounds, args.workers, blocks, methods)
            return 0
        run_suite(
            config, suite, Path(args.out), blocks=blocks, methods=methods, workers=args.workers
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
