"""Property-based invariants of every scheduler on adversarial inputs (duplicates, zeros, NaN)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from adcs.schedulers import (
    ADCS,
    DELTA,
    KDPP,
    MD,
    OCS,
    ClusteredSimilarity,
    ClusteredSize,
    DivFL,
    FedCor,
    Oort,
    PowerOfChoice,
    StaticDPP,
    Uniform,
)
from tests.schedulers.fake_runtime import run_rounds

ROW_VALUES = st.sampled_from([0.0, 1.0, -1.0, 2.5, np.nan, 1e-8, 1e8])


@st.composite
def problems(draw):
    n = draw(st.integers(2, 14))
    m = draw(st.integers(1, n))
    dim = draw(st.integers(1, 5))
    rounds = draw(st.integers(1, 4))
    distinct = draw(st.integers(1, n))
    base = np.array(draw(st.lists(ROW_VALUES, min_size=distinct * dim, max_size=distinct * dim)))
    rows = base.reshape(distinct, dim)[np.arange(n) % distinct]  # duplicates when distinct < n
    losses = np.array(draw(st.lists(ROW_VALUES, min_size=n, max_size=n)))
    masks = []
    for _ in range(rounds):
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        off = np.flatnonzero(~mask)
        mask[off[: max(0, m - int(mask.sum()))]] = True  # at least m available
        masks.append(mask)
    theta = draw(st.sampled_from([0.0, 0.3, 0.8, 0.999999, 1.0]))
    return n, m, rows, losses, masks, theta


@settings(max_examples=120, deadline=None)
@given(problems(), st.integers(0, 2**16))
def test_every_scheduler_returns_m_distinct_available(problem, seed):
    _, m, rows, losses, masks, theta = problem
    schedulers = [
        Uniform(m=m),
        PowerOfChoice(m=m),
        OCS(m=m),
        OCS(m=m, unbiased=True),
        DivFL(m=m),
        DivFL(m=m, stale=True),
        StaticDPP(m=m),
        ADCS(m=m, theta=theta, refresh_every=2),
        ADCS(m=m, theta=theta, refresh_every=2, fresh_quality=True),
        MD(m=m),
        ClusteredSize(m=m),
        ClusteredSimilarity(m=m),
        DELTA(m=m),
        Oort(m=m),
        FedCor(m=m, warmup=0, refit_every=2),
        KDPP(m=m, theta=min(theta, 0.9), refresh_every=2),
    ]
    rounds = len(masks)
    for scheduler in schedulers:
        selections = run_rounds(scheduler, [rows] * rounds, [losses] * rounds, masks, seed=seed)
        for mask, selection in zip(masks, selections, strict=True):
            clients = selection.clients
            assert clients.shape == (m,), scheduler
            assert len(set(clients.tolist())) == m, scheduler
            assert mask[clients].all(), scheduler
            if selection.weights is not None:
                assert np.isfinite(selection.weights).all(), scheduler


@settings(max_examples=120, deadline=None)
@given(problems(), st.integers(0, 2**16))
def test_a_client_with_non_finite_statistics_never_goes_before_a_finite_one(problem, seed):
    _, m, rows, losses, masks, theta = problem
    rows = rows.copy()
    rows[::3] = np.inf  # every third client's update overflowed, on top of the drawn NaNs
    schedulers = [
        PowerOfChoice(m=m), OCS(m=m), OCS(m=m, unbiased=True), DivFL(m=m), StaticDPP(m=m),
        ADCS(m=m, theta=theta, refresh_every=2),
    ]  # fmt: skip
    available = masks[0]
    for scheduler in schedulers:
        (selection,) = run_rounds(scheduler, [rows], [losses], [available], seed=seed)
        # the runtime hands every probe its losses, and update probes their updates too
        finite = np.isfinite(losses)
        if not isinstance(scheduler, PowerOfChoice):
            finite &= np.isfinite(rows).all(axis=1)
        good = np.flatnonzero(available & finite)
        chosen = set(selection.clients.tolist())
        if good.size >= m:
            assert chosen <= set(good.tolist()), scheduler
        else:
            assert set(good.tolist()) <= chosen, scheduler
