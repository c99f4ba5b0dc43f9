"""Private selection: probe replies clipped, noised and accounted per client (docs/design.md §9).

The threat model is docs/concepts/privacy.md. `Private` wraps any scheduler;
`DPFedAvg` aggregates the training updates (clipping and Gaussian noise on the aggregate);
`adcs.privacy.accounting` gives each client's (ε, δ) by ``dp-accounting``'s RDP accountant.
Needs the ``privacy`` extra (``pip install adcs[privacy]``) for the accounting.
"""

from adcs.privacy.accounting import budget, calibrate, client_epsilons, epsilon
from adcs.privacy.channel import (
    DPFedAvg,
    Private,
    PrivateProbes,
    PrivateState,
    default_delta,
    private_run,
)

__all__ = [
    "DPFedAvg",
    "Private",
    "PrivateProbes",
    "PrivateState",
    "budget",
    "calibrate",
    "client_epsilons",
    "default_delta",
    "epsilon",
    "private_run",
]
