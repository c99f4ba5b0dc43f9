"""What a finished run says of itself: its manifest (what ran, on what data, with which code and
when) and the context its report is written in (`ReportContext`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.data import DATASETS
from adcs.experiments.analysis.report import ReportContext, RunRecord
from adcs.experiments.config import ExperimentConfig
from adcs.experiments.run.execute import ExperimentProgress, SimulatedRuns
from adcs.experiments.run.plan import PreparedRun
from adcs.experiments.run.provenance import provenance
from adcs.sim.engine import RunSpec

__all__ = ["context_of", "experiment_manifest", "report_context", "setting_keys"]

_LISTED_SIZES = 10_000
"""Clients whose sizes the manifest lists one by one; larger populations get a summary."""


def _sizes(sizes: np.ndarray) -> Any:
    if sizes.size <= _LISTED_SIZES:
        return np.asarray(sizes).tolist()
    q = np.quantile(sizes, [0.0, 0.1, 0.5, 0.9, 1.0])
    return {"n_clients": int(sizes.size), "total": int(sizes.sum()), "mean": float(sizes.mean()),
            "min": int(q[0]), "p10": float(q[1]), "median": float(q[2]), "p90": float(q[3]),
            "max": int(q[4])}  # fmt: skip


def report_context(
    config: ExperimentConfig,
    ready: PreparedRun,
    quick: bool,
    figures: list[str],
    started: float,
    notes: list[str],
    tmp: Path,
) -> ReportContext:
    """What the report says of the run beside its records."""
    first = next(iter(ready.fed.values()))
    return context_of(
        config, rounds=ready.sim_config.rounds, n_clients=first.n_clients,
        data_source=ready.dataset.source, is_subset=ready.dataset.is_subset, quick=quick,
        figures=figures, wall_s=time.perf_counter() - started, notes=notes, folder=tmp,
    )  # fmt: skip


def context_of(
    config: ExperimentConfig,
    *,
    rounds: int,
    n_clients: int,
    data_source: str,
    is_subset: bool,
    quick: bool,
    figures: Sequence[str],
    wall_s: float,
    notes: Sequence[str],
    folder: Path,
) -> ReportContext:
    """The report's context from its pieces (`report_context` of a run; a merge's from its
    parts' manifests)."""
    return ReportContext(
        name=config.name, rounds=rounds, eval_every=config.sim.eval_every,
        m=config.m, n_clients=n_clients, seeds=config.seeds,
        data_source=data_source, is_subset=is_subset, quick=quick,
        figures=tuple(figures), wall_s=wall_s,
        description=config.description, model=config.model.describe(),
        dataset=DATASETS.resolve(config.data.dataset).title or config.data.dataset,
        notes=(*notes, *(
            f"See also [{p.parent.name}/report.md]({p.parent.name}/report.md)."
            for p in sorted(folder.glob("*/report.md"))
        )),
    )  # fmt: skip


def _privacy_manifest(plan: list[RunSpec], records: Sequence[RunRecord]) -> dict[str, Any]:
    """Per private run: the largest client ε, its δ and the noise multipliers (null: none)."""
    largest = {r.run_id: r.extra.get("epsilon") for r in records}
    out: dict[str, Any] = {}
    for spec in plan:
        noise = getattr(spec.scheduler, "noise", None)
        if noise is None:
            continue
        out[spec.run_id] = {
            "epsilon": largest.get(spec.run_id),
            "delta": float(spec.scheduler.delta),  # type: ignore[attr-defined]
            "probe_noise": noise[0] if math.isfinite(noise[0]) else None,
            "update_noise": noise[1] if math.isfinite(noise[1]) else None,
        }
    return out


def setting_keys(differs: Mapping[str, list[str]]) -> dict[str, Any]:
    """The manifest's ``NAME_setting`` and ``differences_from_NAME`` of each study a
    configuration is compared with (`adcs.experiments.analysis.outputs.study_of`)."""
    return {
        k: v
        for name, d in differs.items()
        for k, v in ((f"{name}_setting", not d), (f"differences_from_{name}", d))
    }


def experiment_manifest(
    config: ExperimentConfig,
    plan: list[RunSpec],
    ready: PreparedRun,
    sim: SimulatedRuns,
    quick: bool,
    differs: Mapping[str, list[str]],
    state: ExperimentProgress,
) -> dict[str, Any]:
    """``manifest.json`` but what the caller and ``finalize`` add: what ran, on what, when."""
    dataset, fed, sim_config = ready.dataset, ready.fed, ready.sim_config
    first = next(iter(fed.values()))
    sessions = state.all_sessions()
    return {
        "experiment": config.name,
        "description": config.description,
        "config": config.document,
        "config_source": config.source,
        "seeds": list(config.seeds),
        "quick": quick,
        **setting_keys(differs),
        "runs": [r.run_id for r in plan],
        "data": {
            "source": dataset.source,
            "is_subset": dataset.is_subset,
            "checksums": dict(dataset.checksums),
            "dataset": config.data.dataset,
            "partition": config.data.partition,
            "resample_per_seed": config.data.resample_per_seed,
            "n_clients": first.n_clients,
            "n_groups": first.n_groups,
            "data_sizes": {str(k): _sizes(v.data_sizes) for k, v in fed.items()},
        },
        "availability": sim_config.availability.describe(),
        "malicious": {r.run_id: r.meta["malicious"] for r in plan if r.meta.get("malicious")},
        **({} if sim_config.system is None else {"system": sim_config.system.describe()}),
        **({} if config.privacy is None else {"privacy": _privacy_manifest(plan, sim.records)}),
        **provenance(),
        "argv": list(sys.argv),
        "started_at": sessions[0]["started_at"],
        "wall_s": sum(float(s["wall_s"]) for s in sessions),
        "sessions": sessions,
        "simulation_wall_s": sim.wall_s,
        "run_wall_s": {r.run_id: r.wall_s for r in sim.records},
    }
