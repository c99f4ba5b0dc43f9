"""Client schedulers: ADCS, the paper's five baselines and the rivals, behind one protocol (``base``).

Your own scheduler: subclass [`SchedulerBase`][adcs.schedulers.SchedulerBase] (a frozen dataclass
with ``m``) and implement the protocol of [`adcs.schedulers.base`][adcs.schedulers.base]; name it
anywhere a scheduler is named by its import path ``"package.module:Name"``, or declare an entry
point of the group ``adcs.schedulers`` ([`adcs.registry`][adcs.registry]).
"""

from __future__ import annotations

from adcs.dpp import alpha_of
from adcs.registry import Registry
from adcs.schedulers._common import BasicState, SchedulerBase
from adcs.schedulers.adcs import ADCS, ADCSState, Quality
from adcs.schedulers.adcs2 import ADCS2, ADCS2State, QualityScale
from adcs.schedulers.adcs2_adaptive import ADCS2Adaptive, ADCS2AdaptiveState
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
from adcs.schedulers.variants import Extra, Variants

SCHEDULERS: Registry[Scheduler] = Registry(
    "scheduler",
    "adcs.schedulers",
    {
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
        "adcs2_adaptive": ADCS2Adaptive,
    },
    requires=("init", "probe", "select", "observe"),
)
"""The one name → class table used by configs and the command line; it also resolves
``"package.module:Name"`` and the ``adcs.schedulers`` entry points
([`adcs.registry.Registry`][adcs.registry.Registry])."""

__all__ = [
    "ADCS",
    "ADCS2",
    "DELTA",
    "KDPP",
    "MD",
    "NO_PROBE",
    "OCS",
    "SCHEDULERS",
    "ADCS2Adaptive",
    "ADCS2AdaptiveState",
    "ADCS2State",
    "ADCSState",
    "BasicState",
    "ClientStats",
    "ClusteredSimilarity",
    "ClusteredSize",
    "Distance",
    "DivFL",
    "Extra",
    "FedCor",
    "LossSource",
    "Oort",
    "PowerOfChoice",
    "Probe",
    "ProbeKind",
    "Quality",
    "QualityScale",
    "Scheduler",
    "SchedulerBase",
    "Selection",
    "StaticDPP",
    "Uniform",
    "UsesRoundTimes",
    "Variants",
    "alpha_of",
]
