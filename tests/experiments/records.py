"""Run records built by hand, for the report, paper and figure tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from adcs.experiments.analysis.report import RunRecord

ROUNDS = np.arange(0, 1001, 100)
UNIFORM_SHARE = np.full(10, 0.1)


def record(
    method: str,
    worst: float,
    avg: float,
    *,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    share: np.ndarray = UNIFORM_SHARE,
    wiggle: float = 0.0,
    rounds: np.ndarray = ROUNDS,
    noise: float = 0.0,
    group_clients: np.ndarray | None = None,
) -> RunRecord:
    """A run whose accuracies ramp up to ``worst``/``avg`` and stay there (± ``wiggle``)."""
    params = dict(params or {})
    ramp = np.minimum(1.0, np.linspace(0.2, 1.5, rounds.size))
    alt = wiggle * (-1.0) ** np.arange(rounds.size)
    jitter = noise * np.random.default_rng(seed).standard_normal(rounds.size)
    variant = "-".join([method, *(f"{k}={v}" for k, v in params.items())])
    return RunRecord(
        run_id=f"{variant}-seed={seed}",
        variant=variant,
        method=method,
        seed=seed,
        params=params,
        eval_rounds=rounds,
        worst_acc=worst * ramp + alt + jitter,
        avg_acc=avg * ramp,
        test_loss=np.linspace(2.0, 0.5, rounds.size),
        group_share=np.asarray(share, dtype=np.float64),
        tv_to_uniform=0.5 * float(np.abs(np.asarray(share) - 1.0 / len(share)).sum()),
        client_updates=18_000,
        loss_evals=0,
        group_clients=group_clients,
    )


def adcs(
    worst: float, avg: float, theta: float = 0.8, refresh_every: int = 20, **kw: Any
) -> RunRecord:
    return record("adcs", worst, avg, params={"theta": theta, "refresh_every": refresh_every}, **kw)
