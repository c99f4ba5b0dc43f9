"""The private probe channel (adcs.privacy): accounting, noise, budgets, the simulator."""

from __future__ import annotations

import pickle

import dp_accounting
import numpy as np
import pytest
from scipy import stats as st

from adcs.privacy import (
    DPFedAvg,
    Private,
    PrivateProbes,
    budget,
    calibrate,
    client_epsilons,
    epsilon,
    private_run,
)
from adcs.schedulers import ADCS, ClientStats, PowerOfChoice, Uniform
from adcs.sim import RunSpec, SimConfig, simulate
from adcs.sim.checkpoint import Checkpointing
from tests.sim.conftest import make_data

U64 = np.finfo(np.float64).eps
DELTA = 1e-3
N = 8
KS_LEVEL = 1e-3  # a correct scale fails one run in a thousand; the seed is fixed


def library_epsilon(sequence: list[float], delta: float) -> float:
    """dp_accounting itself: the mechanisms of ``sequence`` (noise multipliers) one by one."""
    accountant = dp_accounting.rdp.RdpAccountant()
    for z in sequence:
        accountant.compose(dp_accounting.GaussianDpEvent(z))
    return float(accountant.get_epsilon(delta))


def test_a_clients_epsilon_is_the_accountants_over_its_sequence_of_releases():
    rng = np.random.default_rng(0)
    probes, updates = np.array([0, 3, 7, 7, 40]), np.array([0, 1, 0, 5, 12])
    z_probe, z_update = 3.0, 1.5
    ours = client_epsilons(probes, updates, z_probe, z_update, DELTA)
    for i in range(probes.size):
        sequence = [z_probe] * int(probes[i]) + [z_update] * int(updates[i])
        rng.shuffle(sequence)  # interleaved as a run would release them
        expected = library_epsilon(sequence, DELTA) if sequence else 0.0
        # the RDP vector is a sum of len(sequence) terms either way: rounding of that order
        assert ours[i] == pytest.approx(expected, rel=4 * max(len(sequence), 1) * U64, abs=0)
    assert ours[0] == 0.0 and ours[2] < ours[3] < ours[4]


def test_the_budget_is_the_accountants_calibration_and_is_tight():
    spend = budget(4.0, DELTA)
    z = spend**-0.5
    assert epsilon({z: 1}, DELTA) <= 4.0
    assert epsilon({z * (1 - 1e-6): 1}, DELTA) > 4.0  # calibrated to tol 1e-9 in z
    # n releases of multiplier z·√n spend the same: the accountant agrees with the budget
    assert epsilon({z * np.sqrt(50): 50}, DELTA) == pytest.approx(4.0, rel=1e-6)


def test_calibrated_plans_fit_the_budget_and_refuse_an_empty_share():
    z_probe, z_update = calibrate(2.0, DELTA, 60, 10, 0.25)
    assert epsilon({z_probe: 60, z_update: 10}, DELTA) <= 2.0
    assert epsilon({z_probe: 61, z_update: 10}, DELTA) > 2.0
    with pytest.raises(ValueError, match="no budget for the planned probes"):
        calibrate(2.0, DELTA, 5, 1, 0.0)


def channel(**kw) -> Private:
    probes = PrivateProbes(**{"probe_noise": 0.7, "update_noise": 2.0, **kw})
    return Private(Uniform(m=2), probes, seed=3, delta=DELTA)


def test_loss_noise_has_the_stated_gaussian_scale():
    wrapped = channel(loss_range=(0.0, 4.0))
    clients = np.arange(5000, dtype=np.intp)
    losses = np.full(clients.size, 9.0)  # clipped to 4
    seen = wrapped.private_stats(11, ClientStats(np.ones(clients.size, bool), clients, losses))
    sigma = 0.7 * 4.0
    noise = (seen.losses - 4.0) / sigma
    assert st.kstest(noise, "norm").pvalue > KS_LEVEL
    assert st.kstest(noise / 1.1, "norm").pvalue < KS_LEVEL  # a 10 % wrong scale is seen


def test_direction_noise_is_gaussian_on_the_clipped_sketch():
    wrapped = channel(sketch_dim=16, direction_clip=0.5)
    n, dim = 400, 50
    clients = np.arange(n, dtype=np.intp)
    updates = np.zeros((n, dim), dtype=np.float32)  # sketch 0: what is seen is the noise
    seen = wrapped.private_stats(2, ClientStats(np.ones(n, bool), clients, None, updates))
    assert seen.updates.shape == (n, 16)
    noise = seen.updates.ravel().astype(np.float64) / (0.7 * 2 * 0.5)
    assert st.kstest(noise, "norm").pvalue > KS_LEVEL
    assert st.kstest(noise / 1.1, "norm").pvalue < KS_LEVEL
    # a long update is clipped to the bound before the noise: seen − noise has norm C
    big = np.full((n, dim), 10.0, dtype=np.float32)
    clipped = wrapped.private_stats(2, ClientStats(np.ones(n, bool), clients, None, big))
    norms = np.linalg.norm(clipped.updates - seen.updates, axis=1)
    # float32: a rounding of (sketch + noise) − noise per coordinate, and the clip's norm (k terms)
    u32 = float(np.finfo(np.float32).eps)
    k, big_noise = 16, float(np.abs(seen.updates).max())
    tol = 2 * u32 * (big_noise + 0.5) * np.sqrt(k) + 0.5 * k * u32
    assert norms == pytest.approx(0.5, abs=tol)


def test_dp_fedavg_noise_has_the_stated_scale_on_the_aggregate():
    wrapped = channel()
    state = wrapped.init(4)
    agg = DPFedAvg(clip=0.5, noise=2.0, seed=3)
    updates = np.zeros((4, 3000), dtype=np.float32)
    coefs = np.array([0.1, 0.2, 0.3, 0.4])
    received, step = agg.aggregate(state, 5, np.arange(4), updates, coefs, None)
    assert st.kstest(step / (2.0 * 2 * 0.5 * 0.4), "norm").pvalue > KS_LEVEL
    assert (received == 0).all()


def test_a_client_whose_budget_is_spent_is_never_probed_again():
    wrapped = Private(
        PowerOfChoice(m=2), PrivateProbes(epsilon=1.0, probe_noise=2.0, update_noise=4.0),
        seed=0, delta=DELTA,
    )  # fmt: skip
    state, rng = wrapped.init(N), np.random.default_rng(0)
    available = np.ones(N, dtype=bool)
    refused_at: dict[int, int] = {}
    for t in range(60):
        probe = wrapped.probe(state, t, available, rng)
        probed = probe.targets(available)
        for c in set(range(N)) - set(probed.tolist()):
            refused_at.setdefault(c, t)
        for c in probed.tolist():
            assert c not in refused_at, f"client {c} probed at {t} after its budget ran out"
        losses = np.linspace(0.5, 2.0, probed.size)
        _, state = wrapped.select(state, t, ClientStats(available, probed, losses), rng)
    assert len(refused_at) == N  # everyone ran out
    eps = wrapped.epsilons(state)
    assert eps.max() <= 1.0 and eps.min() > 0.5


def test_a_sketch_longer_than_the_model_is_refused():
    with pytest.raises(ValueError, match="sketch_dim 64 is larger than the model's 10"):
        private_run(ADCS(m=2), PrivateProbes(probe_noise=1, update_noise=1), 0, N, dim=10)
    with pytest.raises(ValueError, match="noise multipliers or a plan"):
        PrivateProbes(epsilon=1.0, probe_noise=1.0, planned_probes=3)


CONFIG = SimConfig(40, batch_size=4, local_lr=0.3, eval_every=20)


def specs() -> list[RunSpec]:
    probes = PrivateProbes(epsilon=4.0, planned_probes=30, planned_updates=10, sketch_dim=8)
    out = []
    for name, scheduler in (("poc", PowerOfChoice(m=2)), ("adcs", ADCS(m=2))):
        run, hook = private_run(scheduler, probes, 0, N)
        out.append(RunSpec(run, 0, name, aggregator=hook))
    return out


def test_a_private_simulation_stays_within_budget_and_resumes_byte_identically():
    data = make_data(n_clients=N)
    plain = simulate(specs(), data, CONFIG)
    saved = []
    simulate(specs(), data, CONFIG, checkpoint=Checkpointing(
        lambda c: saved.append(pickle.loads(pickle.dumps(c))), every=13))  # fmt: skip
    resumed = simulate(specs(), data, CONFIG, resume_from=saved[0])
    for a, b in zip(plain, resumed, strict=True):
        assert np.array_equal(a.final_params, b.final_params)
        assert np.array_equal(a.selected, b.selected)
    for result in plain:
        assert np.isfinite(result.final_params).all()


def test_a_norm_release_is_the_clipped_norm_plus_noise_of_the_stated_scale():
    wrapped = channel(updates_as="norm", norm_clip=0.25)
    n = 10_000
    clients = np.arange(n, dtype=np.intp)
    updates = np.zeros((n, 7), dtype=np.float32)
    updates[:, 0] = 2.0  # norm 2, clipped to 0.25
    seen = wrapped.private_stats(4, ClientStats(np.ones(n, bool), clients, None, updates))
    assert seen.updates.shape == (n, 1)  # the norm alone is released
    noise = (seen.updates[:, 0].astype(np.float64) - 0.25) / (0.7 * 0.25)
    assert st.kstest(noise, "norm").pvalue > KS_LEVEL
    assert st.kstest(noise / 1.1, "norm").pvalue < KS_LEVEL


def test_a_spent_client_is_never_selected_again_and_declines_when_filling():
    wrapped = Private(
        Uniform(m=3), PrivateProbes(epsilon=1.0, probe_noise=2.0, update_noise=3.0),
        seed=0, delta=DELTA,
    )  # fmt: skip
    state, rng = wrapped.init(4), np.random.default_rng(0)
    available = np.ones(4, dtype=bool)
    sends = np.zeros(4, dtype=int)
    for t in range(40):
        selection, state = wrapped.select(state, t, ClientStats(available), rng)
        assert selection.clients.size == 3  # the selection stays full ...
        declined = set(state.declined.tolist())
        for c in selection.clients.tolist():
            sends[c] += c not in declined
    # ... but no client sent more updates than its budget affords
    afford = max(n for n in range(100) if epsilon({3.0: n}, DELTA) <= 1.0)
    assert (sends <= afford).all() and (state.updates == sends).all()
    assert (sends == afford).all()  # and each sent its budget's worth before declining
    aggregator = DPFedAvg(clip=1.0, noise=3.0, seed=0)
    clients = np.sort(selection.clients)
    received, step = aggregator.aggregate(
        state, 40, clients, np.ones((3, 5), np.float32), np.full(3, 1 / 3), None
    )
    assert (received == 0).all() and (step == 0).all()  # everyone declined: nothing sent


def test_an_observing_scheduler_sees_private_directions_and_pays_for_them():
    from adcs.schedulers import ADCS2

    data = make_data(n_clients=N)
    probes = PrivateProbes(epsilon=8.0, planned_probes=60, planned_updates=20, sketch_dim=8)
    run, hook = private_run(ADCS2(m=2, refresh_every=5), probes, 0, N)
    assert run.observes_updates
    (result,) = simulate([RunSpec(run, 0, "adcs2", aggregator=hook)], data, CONFIG)
    assert result.client_epsilon is not None and result.client_epsilon.max() <= 8.0
    assert result.delta == run.delta
    # every client paid for what it answered: its ε exceeds that of its updates alone
    updates = np.bincount(result.selected[result.selected >= 0], minlength=N)
    alone = client_epsilons(np.zeros(N, int), updates, *run.noise, run.delta)
    assert (result.client_epsilon >= alone).all() and (result.client_epsilon > alone).any()
