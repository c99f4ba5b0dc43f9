"""ADCS-2's quality standardisation against a few extreme reporters (QualityScale.ROBUST)."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.schedulers import ADCS2, QualityScale
from adcs.schedulers.adcs2 import ROBUST_CLIP, robust_scores, standardise
from adcs.schedulers.base import ClientStats

N_HONEST, K = 28, 2


def honest_losses(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 2.5, size=N_HONEST)


def test_two_reports_of_a_million_flatten_the_zscore_not_the_robust_score():
    honest = honest_losses()
    flooded = np.concatenate([honest, honest.max(initial=0.0) * 1e6 * np.ones(K)])
    z = standardise(flooded, QualityScale.ZSCORE)[:N_HONEST]
    r = standardise(flooded, QualityScale.ROBUST)[:N_HONEST]
    clean = standardise(honest, QualityScale.ROBUST)
    assert np.ptp(z) < 1e-5  # the red team's flattening: every honest score the same
    assert np.ptp(r) > 2.0  # the honest clients keep their spread ...
    assert (np.argsort(r, kind="stable") == np.argsort(honest, kind="stable")).all()  # ... order
    # ... and their scores move by no more than two extra order statistics shift the median/MAD
    assert np.abs(r - clean).max() < 0.5
    assert np.abs(standardise(flooded, QualityScale.ROBUST)).max() <= ROBUST_CLIP


def test_robust_scores_are_scale_and_shift_free_and_handle_ties():
    x = honest_losses(1)
    np.testing.assert_allclose(robust_scores(3.0 * x + 7.0), robust_scores(x), atol=1e-12)
    tied = np.array([1.0, 1.0, 1.0, 1.0, 2.0])  # MAD = 0: the mean absolute deviation scales
    s = robust_scores(tied)
    assert s[-1] > 0 and np.all(s[:-1] == 0)
    assert not robust_scores(np.full(5, 0.3)).any()
    assert robust_scores(np.empty(0)).shape == (0,)


def test_adcs2_with_robust_quality_still_prefers_the_honest_high_losses():
    # every client has a direction (orthogonal ones, so diversity is neutral); two liars report
    # × 10⁶: the liars take two slots (their scores are clipped, not removed; the cap bounds
    # them), the honest clients of highest loss the rest
    n, m = N_HONEST + K, 8
    losses = np.concatenate([honest_losses(2), np.full(K, 1e6)])
    updates = np.eye(n, dtype=np.float32)
    stats = ClientStats(np.ones(n, dtype=bool), np.arange(n), losses, updates)
    best = set(np.argsort(-losses[:N_HONEST])[: m - K].tolist()) | {N_HONEST, N_HONEST + 1}
    rng = np.random.default_rng(0)
    robust = ADCS2(m, quality_scale=QualityScale.ROBUST)
    chosen, _ = robust.select(robust.init(n), 0, stats, rng)
    assert set(chosen.clients.tolist()) == best


def test_the_default_stays_the_zscore():
    assert ADCS2(4).quality_scale is QualityScale.ZSCORE
    with pytest.raises(ValueError, match="quality_scale"):
        ADCS2(4, quality_scale="robust")  # type: ignore[arg-type]
