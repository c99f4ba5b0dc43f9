"""What a resume compares: a configuration's identity (its document without the data's path and
the description), a checkpoint's (the configuration, the data by content, the runs and batches),
and the differences between a saved identity and the current one, named key by key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adcs.experiments.config import ExperimentConfig
from adcs.experiments.run.workload import DataSource
from adcs.sim.engine import RunSpec

__all__ = ["checkpoint_identity", "config_differences", "document_identity", "resume_identity"]


def resume_identity(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration as a resume compares it: without the data's path and the description."""
    return document_identity(config.document)


def document_identity(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`resume_identity` of a configuration's document (as a manifest records it)."""
    out = {k: v for k, v in doc.items() if k != "description"}
    out["data"] = {k: v for k, v in out.get("data", {}).items() if k != "path"}
    return out


def checkpoint_identity(
    config: ExperimentConfig, dataset: DataSource, plan: Sequence[RunSpec], n_batches: int
) -> dict[str, Any]:
    """What must be the same for a checkpoint to be resumed (the data by content, not path)."""
    return {
        "config": resume_identity(config),
        "data": dict(dataset.checksums) or {"source": dataset.source},
        "runs": [r.run_id for r in plan],
        "batches": n_batches,
    }


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, Mapping):
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(doc, list) and any(isinstance(v, Mapping) for v in doc):
        out = {}
        for i, v in enumerate(doc):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: doc}


def config_differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``key (interrupted run: a, now: b)`` for every key whose value differs."""
    a, b = _flatten(saved), _flatten(now)
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<unset>") != b.get(key, "<unset>"):
            out.append(
                f"{key} (interrupted run: {a.get(key, 'unset')!r}, now: {b.get(key, 'unset')!r})"
            )
    return out
