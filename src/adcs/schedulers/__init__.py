"""Client schedulers: ADCS and the five baselines of the paper, behind one protocol (see ``base``)."""

from __future__ import annotations

from adcs.dpp import alpha_of
from adcs.schedulers.adcs import ADCS, ADCSState, Quality
from adcs.schedulers.base import (
    NO_PROBE,
    ClientStats,
    LossSource,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
)
from adcs.schedulers.divfl import DivFL
from adcs.schedulers.ocs import OCS
from adcs.schedulers.power_of_choice import PowerOfChoice
from adcs.schedulers.static_dpp import StaticDPP
from adcs.schedulers.uniform import Uniform

SCHEDULERS: dict[str, type] = {
    "uniform": Uniform,
    "powerofchoice": PowerOfChoice,
    "ocs": OCS,
    "divfl": DivFL,
    "staticdpp": StaticDPP,
    "adcs": ADCS,
}
"""The one name → class table used by configs and the command line."""

__all__ = [
    "ADCS",
    "NO_PROBE",
    "OCS",
    "SCHEDULERS",
    "ADCSState",
    "ClientStats",
    "DivFL",
    "LossSource",
    "PowerOfChoice",
    "Probe",
    "ProbeKind",
    "Quality",
    "Scheduler",
    "Selection",
    "StaticDPP",
    "Uniform",
    "alpha_of",
]
