"""adcs — Adaptive Determinantal Client Scheduling for federated learning.

The public API: DPP MAP inference ([`adcs.dpp`][adcs.dpp]) and the schedulers
([`adcs.schedulers`][adcs.schedulers]). The simulator ([`adcs.sim`][adcs.sim]), data (`adcs.data`),
theory (`adcs.theory`) and the Flower strategy ([`adcs.flower`][adcs.flower], optional extra) are
imported from their modules. ``adcs.run`` and ``adcs.load_results``
([`adcs.notebook`][adcs.notebook], pandas DataFrames) are loaded on first use, so ``import adcs``
stays light.
"""

from __future__ import annotations

from typing import Any

from adcs.dpp import exact_map, greedy_map, greedy_map_features, log_det
from adcs.schedulers import (
    ADCS,
    OCS,
    SCHEDULERS,
    ClientStats,
    DivFL,
    PowerOfChoice,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
    StaticDPP,
    Uniform,
)

__version__ = "0.2.0"

_NOTEBOOK = frozenset({"Results", "load_results", "run"})


def __getattr__(name: str) -> Any:
    if name in _NOTEBOOK:
        from adcs import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'adcs' has no attribute {name!r}")


__all__ = [
    "ADCS",
    "OCS",
    "SCHEDULERS",
    "ClientStats",
    "DivFL",
    "PowerOfChoice",
    "Probe",
    "ProbeKind",
    "Results",
    "Scheduler",
    "Selection",
    "StaticDPP",
    "Uniform",
    "__version__",
    "exact_map",
    "greedy_map",
    "greedy_map_features",
    "load_results",
    "log_det",
    "run",
]
