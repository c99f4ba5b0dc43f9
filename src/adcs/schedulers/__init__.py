"""Client schedulers: ADCS, the paper's five baselines and the rivals, behind one protocol (``base``)."""

from __future__ import annotations

from adcs.dpp import alpha_of
from adcs.schedulers.adcs import ADCS, ADCSState, Quality
from adcs.schedulers.adcs2 import ADCS2, ADCS2State, QualityScale
from adcs.schedulers.base import (
    NO_PROBE,
    ClientStats,
    LossSource,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
    UsesRoundTimes,
)
from adcs.schedulers.clustered_similarity import ClusteredSimilarity, Distance
from adcs.schedulers.clustered_size import ClusteredSize
from adcs.schedulers.delta import DELTA
from adcs.schedulers.divfl import DivFL
from adcs.schedulers.fedcor import FedCor
from adcs.schedulers.kdpp import KDPP
from adcs.schedulers.md import MD
from adcs.schedulers.ocs import OCS
from adcs.schedulers.oort import Oort
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
    "md": MD,
    "clustered_size": ClusteredSize,
    "clustered_similarity": ClusteredSimilarity,
    "delta": DELTA,
    "oort": Oort,
    "fedcor": FedCor,
    "kdpp": KDPP,
    "adcs2": ADCS2,
}
"""The one name → class table used by configs and the command line."""

__all__ = [
    "ADCS",
    "ADCS2",
    "DELTA",
    "KDPP",
    "MD",
    "NO_PROBE",
    "OCS",
    "SCHEDULERS",
    "ADCS2State",
    "ADCSState",
    "ClientStats",
    "ClusteredSimilarity",
    "ClusteredSize",
    "Distance",
    "DivFL",
    "FedCor",
    "LossSource",
    "Oort",
    "PowerOfChoice",
    "Probe",
    "ProbeKind",
    "Quality",
    "QualityScale",
    "Scheduler",
    "Selection",
    "StaticDPP",
    "Uniform",
    "UsesRoundTimes",
    "alpha_of",
]
