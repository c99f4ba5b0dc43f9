"""adcs — Adaptive Determinantal Client Scheduling for federated learning.

The public API: DPP MAP inference (:mod:`adcs.dpp`) and the schedulers (:mod:`adcs.schedulers`).
The simulator (:mod:`adcs.sim`), data (:mod:`adcs.data`), theory (:mod:`adcs.theory`) and the
Flower strategy (:mod:`adcs.flower`, optional extra) are imported from their modules.
"""

from __future__ import annotations

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

__version__ = "0.1.0"

__all__ = [
    "ADCS",
    "OCS",
    "SCHEDULERS",
    "ClientStats",
    "DivFL",
    "PowerOfChoice",
    "Probe",
    "ProbeKind",
    "Scheduler",
    "Selection",
    "StaticDPP",
    "Uniform",
    "__version__",
    "exact_map",
    "greedy_map",
    "greedy_map_features",
    "log_det",
]
