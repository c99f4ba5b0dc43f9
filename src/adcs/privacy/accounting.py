"""Each client's privacy cost, by an established accountant (docs/design.md §9).

Every release of the private probe channel — a probe reply, a training update in the DP-FedAvg
aggregate — is a Gaussian mechanism with noise multiplier z (σ = z·Δ, Δ its replace-one
sensitivity; docs/concepts/privacy.md). A client's cost over a run is the composition of its
releases, computed by ``dp-accounting``'s RDP accountant (Mironov 2017; no subsampling
amplification: a data-dependent selection is not a random sample). Nothing here does privacy
arithmetic of its own beyond one identity the accountant itself uses
(``dp_accounting.rdp``'s effective noise multiplier): n_k Gaussian mechanisms of multipliers z_k
compose to one Gaussian of multiplier (Σ_k n_k / z_k²)^(-1/2) (Dong, Roth and Su 2019). So a
client's spending is the one number Σ_k n_k / z_k², and a budget (ε, δ) is its largest value
that the accountant keeps within ε (`budget`).

Needs the ``privacy`` extra (``pip install adcs[privacy]``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int, check_number

__all__ = ["budget", "calibrate", "client_epsilons", "epsilon"]

F64Array = NDArray[np.float64]

CALIBRATION_MARGIN = 1e-9
"""Relative increase of calibrated noise multipliers, so that the planned releases fit under
the budget after the float rounding of Σ n_k / z_k² (it only adds privacy)."""


def _dp() -> Any:
    try:
        import dp_accounting
    except ImportError:  # pragma: no cover - the extra is installed in CI
        raise ImportError(
            "private probes need dp-accounting: pip install 'adcs[privacy]'"
        ) from None
    return dp_accounting


def _accountant() -> Any:
    return _dp().rdp.RdpAccountant()


def _event(releases: Mapping[float, int]) -> Any:
    """The composition of ``releases[z]`` Gaussian mechanisms of multiplier z, for every z."""
    dp = _dp()
    events = [
        dp.SelfComposedDpEvent(dp.GaussianDpEvent(float(z)), int(n))
        for z, n in releases.items()
        if n > 0
    ]
    return dp.ComposedDpEvent(events)


def _check_delta(delta: float) -> float:
    return check_number("delta", delta, 0.0, 1.0, low_open=True, high_open=True)


def epsilon(releases: Mapping[float, int], delta: float) -> float:
    """ε at ``delta`` of composing ``releases[z]`` Gaussian mechanisms of noise multiplier z.

    Parameters
    ----------
    releases : mapping of float to int
        Noise multiplier z > 0 → number of releases n ≥ 0.
    delta : float
        In (0, 1).

    Returns
    -------
    float
        The RDP accountant's ε (0 without a release).
    """
    delta = _check_delta(delta)
    for z, n in releases.items():
        check_number("noise multiplier", z, 0.0, low_open=True)
        check_int("release count", n, minimum=0)
    if not any(n > 0 for n in releases.values()):
        return 0.0
    return float(_accountant().compose(_event(releases)).get_epsilon(delta))


@functools.lru_cache(maxsize=64)
def budget(target_epsilon: float, delta: float) -> float:
    """The largest spending Σ_k n_k / z_k² whose accountant ε at ``delta`` is ≤ ``target_epsilon``.

    The accountant's own calibration (``dp_accounting.calibrate_dp_mechanism``) finds the least
    noise multiplier z* of one Gaussian mechanism within (ε, δ); it returns one that meets the
    target, so 1 / z*² is within budget.
    """
    target_epsilon = check_number("epsilon", target_epsilon, 0.0, low_open=True)
    delta = _check_delta(delta)
    dp = _dp()
    try:
        z = dp.calibrate_dp_mechanism(
            _accountant,
            dp.GaussianDpEvent,
            target_epsilon,
            delta,
            dp.LowerEndpointAndGuess(1e-3, 1.0),
            tol=1e-9,
        )
    except (ValueError, dp.mechanism_calibration.NoBracketIntervalFoundError) as exc:
        raise ValueError(
            f"epsilon {target_epsilon} at delta {delta}: the accountant finds no noise "
            f"multiplier in [1e-3, 2^30] for it ({exc})"
        ) from None
    return float(1.0 / z**2)


def calibrate(
    target_epsilon: float,
    delta: float,
    planned_probes: int,
    planned_updates: int,
    probe_share: float,
) -> tuple[float, float]:
    """Noise multipliers (z_probe, z_update) that fit a plan into the budget (ε, δ).

    A client that makes ``planned_probes`` probe releases and ``planned_updates`` training
    updates spends ``probe_share`` of `budget` on the first and the rest on the second.

    Raises
    ------
    ValueError
        A share leaves a planned kind of release no budget.
    """
    share = check_number("probe_share", probe_share, 0.0, 1.0)
    probes = check_int("planned_probes", planned_probes, minimum=0)
    updates = check_int("planned_updates", planned_updates, minimum=0)
    if (probes and share == 0.0) or (updates and share == 1.0):
        raise ValueError(
            f"probe_share {share} leaves no budget for the planned "
            f"{'probes' if probes and share == 0.0 else 'updates'}"
        )
    total = budget(target_epsilon, delta)
    grow = 1.0 + CALIBRATION_MARGIN
    z_probe = grow * float(np.sqrt(probes / (share * total))) if probes else np.inf
    z_update = grow * float(np.sqrt(updates / ((1.0 - share) * total))) if updates else np.inf
    return float(z_probe), float(z_update)


def client_epsilons(
    probes: NDArray[np.integer[Any]],
    updates: NDArray[np.integer[Any]],
    z_probe: float,
    z_update: float,
    delta: float,
) -> F64Array:
    """Each client's ε at ``delta`` over its releases, shape (n_clients,).

    Parameters
    ----------
    probes, updates : ndarray of shape (n_clients,), int
        Probe releases and training updates of each client.
    z_probe, z_update : float
        Their noise multipliers (``inf``: that kind is never released).
    delta : float

    Returns
    -------
    ndarray of shape (n_clients,)
        The accountant's ε of each client's composition (one accountant call per distinct
        (probes, updates) pair).
    """
    probes, updates = np.asarray(probes), np.asarray(updates)
    if probes.shape != updates.shape or probes.ndim != 1:
        raise ValueError(f"probes {probes.shape} and updates {updates.shape} must be (n,) both")
    pairs, inverse = np.unique(np.stack([probes, updates], axis=1), axis=0, return_inverse=True)
    values = np.empty(pairs.shape[0])
    for i, (n_probe, n_update) in enumerate(pairs.tolist()):
        releases: dict[float, int] = {}
        for z, n in ((z_probe, n_probe), (z_update, n_update)):
            if n:
                if not np.isfinite(z):
                    raise ValueError(f"{n} releases of a kind planned never to be released")
                releases[z] = releases.get(z, 0) + n
        values[i] = epsilon(releases, delta)
    return values[np.asarray(inverse).reshape(-1)]
