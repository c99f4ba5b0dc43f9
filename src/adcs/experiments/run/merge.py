"""Join finished results folders of one configuration into the folder one run of them all writes.

Every random stream is keyed by the seed and the run, and the runs of one seed (a *stream*) are
simulated and evaluated apart from other seeds' (docs/design.md), so the seeds of one
configuration may run in different folders: on different machines, in different sessions.
`merge_results` joins such parts: the configuration's methods and seeds are the parts'
together, every run of that configuration must be in exactly one part, and when the parts split
the seeds (each seed's runs all in one part) the data files (``runs.csv``, ``metrics.csv``,
``group_share.csv``, ``summary.json``, ``client_acc.npz``, ``selections.npz``) are those one run
of the joined configuration writes, byte for byte, when that run keeps each seed's runs in one
batch (a memory-bounded cut through a seed, `adcs.experiments.run.plan._batches`, makes that
seed's runs two streams). The tables, figures and report are written
from them as a run writes its own. The manifest keeps the first part's provenance and lists every
part (its folder, command, commit and versions) under ``merged_from``; wall times are the parts'
sums.

Parts may also split one seed's runs (a scheduler added after the others ran). Each run is then
as its part computed it, beside its part's runs of that seed only. The runs of a seed share BLAS
products, whose rounding depends on the rows stacked in them (docs/design.md, "What a run's
arithmetic depends on"), so such a run can differ from the same run beside all of them in the last
bits, and where a selection turns on those bits, in its selections from some round on. Such a
merge says so in its report and in the manifest's ``joined``.

Parts must agree on everything else: the configuration but its methods and seeds, the data
(checksums, partition, clients) and the streams they share (the availability of a seed). Folders
with a system profile or differential privacy are refused: their extra files are not joined yet.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.figures import write_figures
from adcs.experiments.analysis.outputs import figures_by_name, study_of, write_study_report
from adcs.experiments.analysis.outputs import write_tables as write_study_tables
from adcs.experiments.analysis.records import RunRecord
from adcs.experiments.config import ConfigError, ExperimentConfig, config_from_dict
from adcs.experiments.run.folder import ResultsFolder
from adcs.experiments.run.manifest import context_of, setting_keys
from adcs.experiments.run.plan import canonical_value, expand_runs
from adcs.experiments.run.provenance import source_checkout
from adcs.experiments.run.resultfiles import read_arrays, read_manifest
from adcs.experiments.run.results import load_records, write_json, write_run_files

__all__ = ["MERGED_KEYS", "SPLIT_JOINED", "SPLIT_SEED_NOTE", "merge_notes", "merge_results"]

MERGED_KEYS = ("methods", "seeds")
"""The configuration's keys in which parts may differ (joined); every other key must be equal."""

SPLIT_SEED_NOTE = (
    "Joined by `adcs merge` from parts that ran one seed's schedulers apart (manifest.json, "
    "merged_from): each run is as its part computed it, beside that part's runs only, so it can "
    "differ from one run of them all in the last bits of its shared products, and where a "
    "selection turns on those bits, in its selections from some round on."
)
"""The report's note when a seed's runs come from several parts (module notes)."""
SPLIT_JOINED = "one seed's runs from several parts"
"""The manifest's ``joined`` then (else ``"seeds"``)."""
_SAME_DATA = ("dataset", "partition", "resample_per_seed", "checksums", "n_clients", "n_groups",
              "is_subset")  # fmt: skip
_SHARED_ARRAYS = ("n_available/", "available/")  # a seed's, the same in every part with that seed


def merge_results(
    parts: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    force: bool = False,
    command: str = "",
) -> Path:
    """Join ``parts`` into the results folder ``out`` (module notes).

    Parameters
    ----------
    parts : sequence of path
        Two or more finished results folders of one configuration but for its methods and
        seeds, no run in two of them.
    out : path
        The joined folder: new, or (with ``force``) an earlier results folder to replace.
    command : str
        Recorded in the manifest as what wrote it.

    Returns
    -------
    Path
        The joined folder.

    Raises
    ------
    ConfigError
        The parts cannot be joined (one line naming the part and why).
    RunError
        ``out`` cannot hold the joined folder.
    """
    folders = [Path(p) for p in parts]
    if len(folders) < 2:
        raise ConfigError("merge needs two or more results folders")
    manifests = [_finished(p) for p in folders]
    config = _joined_config(folders, manifests)
    specs = expand_runs(config)
    plan = [spec.run_id for spec in specs]
    owner = _owners(folders, manifests, plan)
    records_of = {}
    for p in folders:
        records_of.update({r.run_id: r for r in load_records(p) if owner.get(r.run_id) == p})
    records = [_as_planned(records_of[spec.run_id], spec.meta.get("params", {})) for spec in specs]
    client_acc, selections = _arrays(folders, owner, plan)
    seeds_of = [{int(s) for s in m["config"]["seeds"]} for m in manifests]
    split = any(a & b for i, a in enumerate(seeds_of) for b in seeds_of[i + 1 :])

    target = ResultsFolder(out, keep=source_checkout())
    for p in folders:
        if target.out == p.resolve() or target.out in p.resolve().parents:
            raise ConfigError(f"--out {out} is or holds {p}, a part of this merge")
    target.check(force=force)
    target.acquire(command)
    try:
        target.prepare(force=force, command=command)
        tmp = target.partial
        write_run_files(tmp, config, records, client_acc, selections)
        own, differs = study_of(config)
        write_study_tables(tmp, config.outputs, records, own)
        figures = write_figures(tmp, records, config.outputs, figures_by_name())
        manifest = _manifest(folders, manifests, config, plan, differs, command)
        manifest["joined"] = SPLIT_JOINED if split else "seeds"
        context = context_of(
            config, rounds=config.sim.rounds, n_clients=manifest["data"]["n_clients"],
            data_source=manifest["data"]["source"], is_subset=manifest["data"]["is_subset"],
            quick=manifest["quick"], figures=figures, wall_s=manifest["wall_s"],
            notes=merge_notes(manifest),
            folder=tmp,
        )  # fmt: skip
        write_study_report(tmp / "report.md", records, context, own)
        write_json(tmp / "manifest.json", manifest)
        target.finish()
    except BaseException:
        target.discard(keep_checkpoint=False)
        raise
    finally:
        target.release()
    return target.out


def merge_notes(manifest: Mapping[str, Any]) -> list[str]:
    """The notes a merged folder's report carries, from its manifest (none for a plain run)."""
    return [SPLIT_SEED_NOTE] if manifest.get("joined") == SPLIT_JOINED else []


def _finished(folder: Path) -> dict[str, Any]:
    """A finished results folder's manifest; its extras that a merge cannot join are refused."""
    path = folder / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"{folder} is no finished results folder (no manifest.json)")
    manifest = read_manifest(path)
    if not isinstance(manifest.get("config"), dict) or "runs" not in manifest:
        raise ConfigError(f"{folder} is no results folder of one configuration (a sweep's or a "
                          "leaderboard's top folder? merge its workloads or points)")  # fmt: skip
    for key, what in (("system", "a system profile"), ("privacy", "differential privacy")):
        if key in manifest:
            raise ConfigError(f"{folder} ran with {what}: merge does not join its files yet")
    return manifest


def _joined_config(
    folders: Sequence[Path], manifests: Sequence[Mapping[str, Any]]
) -> ExperimentConfig:
    """The configuration of every part's methods and seeds, once the rest is checked equal."""
    first, data = manifests[0]["config"], manifests[0]["data"]
    for p, m in zip(folders[1:], manifests[1:], strict=True):
        doc = m["config"]
        keys = sorted({*first, *doc} - set(MERGED_KEYS))
        differ = [k for k in keys if first.get(k) != doc.get(k)]
        differ += [f"data's {k}" for k in _SAME_DATA if data.get(k) != m["data"].get(k)]
        differ += ["quick"] if m.get("quick") != manifests[0].get("quick") else []
        if differ:
            raise ConfigError(
                f"{p} ran another configuration than {folders[0]} (its {', '.join(differ)} "
                f"differ); parts may differ only in {' and '.join(MERGED_KEYS)}"
            )
    methods: list[Any] = []
    for m in manifests:
        methods += [method for method in m["config"]["methods"] if method not in methods]
    seeds = sorted({int(s) for m in manifests for s in m["config"]["seeds"]})
    source = str(manifests[0].get("config_source", "<merged>"))
    return config_from_dict({**first, "methods": methods, "seeds": seeds}, source=source)


def _as_planned(record: RunRecord, params: Mapping[str, Any]) -> RunRecord:
    """The record with its parameters in the scheduler's order (``runs.csv`` sorts them).

    A run recorded before its scheduler gained a parameter lacks that key: it is kept as recorded
    when every key it has agrees with the configuration (a parameter is added at the default that
    keeps the earlier behaviour); a value that disagrees is refused.
    """
    planned = json.loads(json.dumps(dict(params), sort_keys=True, default=canonical_value))
    if any(k not in planned or planned[k] != v for k, v in record.params.items()):
        raise ConfigError(f"run {record.run_id} ran with other parameters than its configuration "
                          f"gives: {record.params} against {planned}")  # fmt: skip
    return dataclasses.replace(record, params={k: v for k, v in params.items()
                                               if k in record.params})  # fmt: skip


def _owners(
    folders: Sequence[Path], manifests: Sequence[Mapping[str, Any]], plan: Sequence[str]
) -> dict[str, Path]:
    """Which part holds each run of the plan; a run in two parts, or in none, is refused."""
    owner: dict[str, Path] = {}
    for p, m in zip(folders, manifests, strict=True):
        for run in m["runs"]:
            if run in owner:
                raise ConfigError(f"run {run} is in {owner[run]} and in {p}: a run joins once")
            owner[run] = p
    missing = [run for run in plan if run not in owner]
    if missing:
        raise ConfigError(
            f"the parts do not make one whole: no part holds {len(missing)} run(s) of the joined "
            f"methods and seeds, e.g. {missing[0]}"
        )
    unplanned = sorted(set(owner) - set(plan))
    if unplanned:  # a configuration equal but for methods names the same runs; a guard
        raise ConfigError(f"{owner[unplanned[0]]} holds run {unplanned[0]}, not one of the plan")
    return owner


def _arrays(
    folders: Sequence[Path], owner: Mapping[str, Path], plan: Sequence[str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``client_acc.npz``'s arrays in plan order and ``selections.npz``'s, as one run keys them."""
    acc: dict[str, np.ndarray] = {}
    selections: dict[str, np.ndarray] = {}
    shared: dict[str, tuple[Path, np.ndarray]] = {}
    for p in folders:
        arrays = read_arrays(p / "client_acc.npz")
        acc.update({k: v for k, v in arrays.items() if owner.get(k) == p})
        if "eval_clients" in arrays:
            shared.setdefault("eval_clients", (p, arrays["eval_clients"]))
        for key, value in read_arrays(p / "selections.npz").items():
            if not key.startswith(_SHARED_ARRAYS):
                selections[key] = value
            elif key in shared and not np.array_equal(shared[key][1], value):
                raise ConfigError(f"{p} and {shared[key][0]} disagree on {key}: not the same "
                                  "seed's streams")  # fmt: skip
            else:
                shared.setdefault(key, (p, value))
    ordered = {run: acc[run] for run in plan}
    if "eval_clients" in shared:  # the engine's one draw, written after the runs
        ordered["eval_clients"] = shared.pop("eval_clients")[1]
    selections.update({k: v for k, (_, v) in shared.items()})
    return ordered, dict(sorted(selections.items()))


def _manifest(
    folders: Sequence[Path],
    manifests: Sequence[Mapping[str, Any]],
    config: ExperimentConfig,
    plan: Sequence[str],
    differs: Mapping[str, list[str]],
    command: str,
) -> dict[str, Any]:
    """The first part's manifest with the joined configuration, runs, data and times."""
    first = manifests[0]
    sizes: dict[str, Any] = {}
    malicious: dict[str, Any] = {}
    run_wall: dict[str, float] = {}
    for m in manifests:
        sizes.update(m["data"].get("data_sizes", {}))
        malicious.update(m.get("malicious", {}))
        run_wall.update({k: float(v) for k, v in (m.get("run_wall_s") or {}).items()})
    sessions = [s for m in manifests for s in m.get("sessions", [])]
    return {
        **first,
        "config": config.document,
        "seeds": list(config.seeds),
        **setting_keys(differs),
        "runs": list(plan),
        "data": {**first["data"], "data_sizes": _in_seed_order(sizes, config.seeds)},
        "malicious": {run: malicious[run] for run in plan if run in malicious},
        "argv": list(sys.argv),
        "started_at": min(str(m.get("started_at", "")) for m in manifests),
        "wall_s": sum(float(m.get("wall_s", 0.0)) for m in manifests),
        "sessions": sessions,
        "simulation_wall_s": sum(float(m.get("simulation_wall_s", 0.0)) for m in manifests),
        "run_wall_s": {run: run_wall[run] for run in plan if run in run_wall},
        "command": command,
        "merged_from": [
            {
                "folder": str(p),
                "runs": len(m["runs"]),
                "command": m.get("command") or shlex.join(map(str, m.get("argv", []))),
                "git": m.get("git"),
                "versions": m.get("versions"),
                "started_at": m.get("started_at"),
                "wall_s": m.get("wall_s"),
            }
            for p, m in zip(folders, manifests, strict=True)
        ],
    }


def _in_seed_order(sizes: Mapping[str, Any], seeds: Sequence[int]) -> dict[str, Any]:
    """``data_sizes`` keyed as a run keys it: one partition (``"None"``), or one per seed in the
    configuration's order (``"10"`` after ``"2"``)."""
    keys = [str(s) for s in seeds if str(s) in sizes]
    return {k: sizes[k] for k in [*keys, *(k for k in sizes if k not in keys)]}
