"""FedCor: the closed-form GP fit, the greedy correlation-based picks, the warm-up schedule."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.schedulers import ClientStats, FedCor, LossSource, ProbeKind
from adcs.schedulers.fedcor import fedcor_greedy, fit_loss_change_gp


def log_likelihood(cov, data, w):
    _sign, logdet = np.linalg.slogdet(cov)
    inv = np.linalg.inv(cov)
    return -0.5 * sum(wi * (logdet + x @ inv @ x) for wi, x in zip(w, data, strict=True))


def test_one_measurement_gives_the_rank_one_maximum_likelihood_kernel():
    v = np.array([0.3, -0.1, 0.2, 0.0])
    factor, noise2 = fit_loss_change_gp(v[None, :], np.zeros(1), 0.8, 15, 0.01)
    assert noise2 == pytest.approx(1e-4 * (v @ v) / 4)
    cov = factor @ factor.T
    np.testing.assert_allclose(cov, (v @ v - noise2) * np.outer(v, v) / (v @ v), atol=1e-12)


def test_the_fit_maximises_the_weighted_marginal_likelihood():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(6, 12)) @ rng.normal(size=(12, 12)) * 0.1
    ages = np.arange(5, -1, -1)
    factor, noise2 = fit_loss_change_gp(data, ages, 0.8, 3, 0.05)
    w = 0.8**ages / (0.8**ages).sum()
    best = log_likelihood(factor @ factor.T + noise2 * np.eye(12), data, w)
    for _ in range(30):  # any other rank-3 kernel with the same noise is less likely
        other = factor + 0.05 * rng.normal(size=factor.shape) * np.abs(factor).mean()
        assert log_likelihood(other @ other.T + noise2 * np.eye(12), data, w) < best


def dense_greedy(cov, p, discount, candidates, k):
    """The authors' selection literally: the full Σ, conditioned after every pick."""
    sigma = cov.copy()
    remaining = list(np.flatnonzero(candidates))
    picks = []
    for _ in range(k):
        scores = [(p @ sigma[:, j]) * discount[j] / np.sqrt(sigma[j, j]) for j in remaining]
        j = remaining[int(np.argmax(scores))]
        sigma = sigma - np.outer(sigma[:, j], sigma[j, :]) / sigma[j, j]
        picks.append(j)
        remaining.remove(j)
    return picks


def test_greedy_picks_equal_the_dense_conditioning():
    rng = np.random.default_rng(1)
    factor = rng.normal(size=(25, 4))
    p = rng.dirichlet(np.ones(25))
    discount = rng.uniform(0.5, 1.0, size=25)
    candidates = rng.random(25) < 0.8
    got = fedcor_greedy(factor, 0.01, p, discount, candidates, 8)
    want = dense_greedy(factor @ factor.T + 0.01 * np.eye(25), p, discount, candidates, 8)
    assert got.tolist() == want


def test_correlated_groups_are_covered_by_one_client_each():
    # three groups whose loss changes move together: conditioning on one member explains the
    # group, so three picks take one from each
    rng = np.random.default_rng(2)
    group = np.repeat(np.eye(3), 4, axis=0)
    data = (rng.normal(size=(10, 3)) @ group.T) + 0.01 * rng.normal(size=(10, 12))
    factor, noise2 = fit_loss_change_gp(data, np.zeros(10), 1.0, 5, 0.01)
    picks = fedcor_greedy(factor, noise2, np.full(12, 1 / 12), np.ones(12), np.ones(12, bool), 3)
    assert sorted((picks // 4).tolist()) == [0, 1, 2]


def test_schedule_warmup_refits_and_discount():
    scheduler = FedCor(3, warmup=2, refit_every=4, discount=0.5)
    state = scheduler.init(10)
    rng = np.random.default_rng(3)
    everyone = np.ones(10, dtype=bool)
    kinds = []
    for t in range(10):
        probe = scheduler.probe(state, t, everyone, rng)
        kinds.append(probe.kind)
        if probe.kind is ProbeKind.LOSSES:
            assert probe.loss_source is LossSource.FULL
            stats = ClientStats(everyone, np.arange(10), rng.normal(size=10))
        else:
            stats = ClientStats.blind(everyone)
        selection, state = scheduler.select(state, t, stats, rng)
        if t == 3:  # the first GP round: fitted on the changes of rounds 0, 1, 2
            assert state.factor is not None and state.changes_rounds.tolist() == [0, 1, 2]
            np.testing.assert_allclose(state.discount[selection.clients], 0.5)
        if t == 5:  # round 4 was measured: refit, discount reset, then GP picks again
            assert state.changes_rounds.tolist() == [0, 1, 2, 4]
            assert (state.discount[selection.clients] == 0.5).all()
            assert np.count_nonzero(state.discount < 1) == 3
    measured = [ProbeKind.LOSSES] * 4 + [ProbeKind.LOSSES, ProbeKind.LOSSES]
    assert kinds[:6] == measured and kinds[6:8] == [ProbeKind.NONE] * 2
    assert kinds[8:] == [ProbeKind.LOSSES] * 2
