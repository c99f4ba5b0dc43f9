"""Private forms of the schedulers (adcs.privacy.forms) and the channel's loss window."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats as st

from adcs.experiments.config.privacy import parse_privacy
from adcs.experiments.config.schema import ConfigError
from adcs.privacy import Private, PrivateProbes, private_run
from adcs.privacy.channel import CENTRE_RATE
from adcs.privacy.forms import AveragedLoss
from adcs.schedulers import NO_PROBE, ClientStats, ProbeKind
from adcs.sim import RunSpec, SimConfig, simulate
from adcs.sim.checkpoint import Checkpointing
from tests.schedulers.fake_runtime import run_rounds
from tests.schedulers.test_contract import M as M_CONTRACT
from tests.schedulers.test_contract import clustered_data
from tests.sim.conftest import make_data

U64 = np.finfo(np.float64).eps
KS_LEVEL = 1e-3  # a correct scale fails one run in a thousand; the seed is fixed
N = 8


def replies(losses: list[float], available: list[bool] | None = None) -> ClientStats:
    """Every client's loss (NaN: no reply) as one round's probe replies."""
    values = np.asarray(losses, dtype=np.float64)
    mask = np.ones(values.size, bool) if available is None else np.asarray(available, bool)
    return ClientStats(mask, np.arange(values.size, dtype=np.intp), values)


def test_averaged_loss_ranks_by_each_clients_mean_reply_a_client_never_probed_first():
    form, rng = AveragedLoss(m=2), np.random.default_rng(0)
    state = form.init(4)
    # client 3 unavailable at round 0: never probed, so it comes first once available
    _, state = form.select(state, 0, replies([5.0, 1.0, 2.0, 0.0], [1, 1, 1, 0]), rng)
    selection, state = form.select(state, 1, replies([0.0, 3.0, 2.5, 9.0]), rng)
    # means: client 0 (5 + 0)/2 = 2.5, client 1 2.0, client 2 2.25, client 3 9 (one reply)
    assert selection.clients.tolist() == [3, 0]
    assert state.weight.tolist() == [2.0, 2.0, 2.0, 1.0]
    assert state.total[2] == pytest.approx(4.5, rel=U64, abs=0)


def test_averaged_loss_probes_every_r_rounds_and_keeps_its_memory_between():
    form, rng = AveragedLoss(m=1, probe_every=3), np.random.default_rng(0)
    state, available = form.init(3), np.ones(3, bool)
    assert form.probe(state, 0, available, rng).kind is ProbeKind.LOSSES
    assert form.probe(state, 1, available, rng) is NO_PROBE
    assert form.probe(state, 6, available, rng).kind is ProbeKind.LOSSES
    _, state = form.select(state, 0, replies([1.0, 4.0, 2.0]), rng)
    unprobed = ClientStats(available, np.empty(0, np.intp))
    selection, kept = form.select(state, 1, unprobed, rng)
    assert selection.clients.tolist() == [1] and kept is state


def test_a_half_life_discounts_each_reply_by_half_per_half_life():
    form, rng = AveragedLoss(m=1, halflife=2.0), np.random.default_rng(0)
    state = form.init(2)
    _, state = form.select(state, 0, replies([4.0, 0.0]), rng)
    _, state = form.select(state, 1, replies([0.0, 3.0]), rng)
    decay = 0.5**0.5  # one round of a half-life of two
    assert state.weight[0] == pytest.approx(decay + 1.0, rel=4 * U64, abs=0)
    assert state.total[0] == pytest.approx(4.0 * decay, rel=4 * U64, abs=0)
    # client 0's mean 4·0.707/1.707 = 1.66 < client 1's 3/1.707 = 1.76
    selection, _ = form.select(state, 2, ClientStats(np.ones(2, bool), np.empty(0, np.intp)), rng)
    assert selection.clients.tolist() == [1]


@pytest.mark.parametrize("kw", [{"probe_every": 0}, {"halflife": 0.0}, {"halflife": -1.0}])
def test_averaged_loss_refuses_bad_hyperparameters(kw):
    with pytest.raises(ValueError):
        AveragedLoss(m=2, **kw)


def windowed(h: float) -> Private:
    probes = PrivateProbes(probe_noise=0.7, loss_range=(0.0, 3.0), loss_window=h,
                           private_updates=False)  # fmt: skip
    return Private(AveragedLoss(m=2), probes, seed=3, delta=1e-3)


def test_a_windowed_loss_is_clipped_around_the_centre_with_noise_of_scale_z_times_2h():
    wrapped, h, centre = windowed(0.2), 0.2, 1.5
    clients = np.arange(5000, dtype=np.intp)
    losses = np.where(clients % 2 == 0, 9.0, -9.0)  # clipped to centre ± h
    stats = ClientStats(np.ones(clients.size, bool), clients, losses)
    seen = wrapped.private_stats(11, stats, centre)
    clipped = np.where(clients % 2 == 0, centre + h, centre - h)
    noise = (seen.losses - clipped) / (0.7 * 2 * h)
    assert st.kstest(noise, "norm").pvalue > KS_LEVEL
    assert st.kstest(noise / 1.1, "norm").pvalue < KS_LEVEL  # a 10 % wrong scale is seen


def test_the_windows_centre_starts_mid_range_and_follows_the_released_losses():
    wrapped = windowed(0.5)
    state = wrapped.init(6)
    assert state.centre == 1.5  # the midpoint of loss_range (0, 3)
    stats = replies([0.1, 0.2, 3.0, 2.9, 1.5, 1.4])
    _, after = wrapped.select(state, 4, stats, np.random.default_rng(0))
    released = wrapped.private_stats(4, stats, 1.5).losses
    expected = 1.5 + CENTRE_RATE * (released.mean() - 1.5)
    assert after.centre == pytest.approx(expected, rel=8 * U64, abs=0)
    # a round without replies leaves it where it is
    none = ClientStats(np.ones(6, bool), np.empty(0, np.intp))
    _, same = wrapped.select(after, 5, none, np.random.default_rng(0))
    assert same.centre == after.centre


def test_no_window_leaves_the_state_without_a_centre():
    probes = PrivateProbes(probe_noise=0.7, private_updates=False)
    assert Private(AveragedLoss(m=2), probes, seed=0, delta=1e-3).init(4).centre is None


@pytest.mark.parametrize("value", [0.0, -0.5, "wide"])
def test_a_bad_loss_window_is_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"sim\.privacy.*loss_window"):
        parse_privacy({"probe_noise": 1.0, "private_updates": False, "loss_window": value})


def test_a_windowed_private_form_resumes_byte_identically():
    probes = PrivateProbes(epsilon=4.0, planned_probes=40, loss_window=0.2, private_updates=False)
    run, hook = private_run(AveragedLoss(m=2), probes, 0, N)
    specs = [RunSpec(run, 0, "averaged", aggregator=hook)]
    data, config = make_data(n_clients=N), SimConfig(40, batch_size=4, local_lr=0.3, eval_every=20)
    plain = simulate(specs, data, config)
    saved = []
    simulate(specs, data, config, checkpoint=Checkpointing(
        lambda c: saved.append(pickle.loads(pickle.dumps(c))), every=13))  # fmt: skip
    resumed = simulate(specs, data, config, resume_from=saved[0])
    assert np.array_equal(plain[0].selected, resumed[0].selected)
    assert np.array_equal(plain[0].final_params, resumed[0].final_params)
    assert float(plain[0].client_epsilon.max()) <= 4.0


def test_sampling_draws_each_mean_within_its_standard_error():
    form, rng = AveragedLoss(m=1, sample=True), np.random.default_rng(0)
    state = form.init(2)
    # client 0: replies 1 and 3 (mean 2, spread 1, standard error 1/√2); client 1: 2.5 twice
    for t, losses in enumerate(([1.0, 2.5], [3.0, 2.5])):
        _, state = form.select(state, t, replies(losses), rng)
    assert state.squares.tolist() == [10.0, 12.5]
    none = ClientStats(np.ones(2, bool), np.empty(0, np.intp))
    picks = [form.select(state, 2 + t, none, rng)[0].clients[0] for t in range(2000)]
    share = np.mean(np.asarray(picks) == 0)
    # P(2 + N(0, 1/2) > 2.5) = P(Z > 0.707) = 0.2398; 2000 draws: standard error 0.0095
    assert abs(share - 0.2398) < 4 * 0.0096
    plain = AveragedLoss(m=1)  # the mean alone: client 1 every time
    assert plain.select(state, 2, none, rng)[0].clients.tolist() == [1]


def test_sampling_with_identical_replies_is_the_means_ranking():
    form, rng = AveragedLoss(m=2, sample=True), np.random.default_rng(0)
    state = form.init(4)
    for t in range(3):
        _, state = form.select(state, t, replies([0.5, 2.0, 1.0, 3.0]), rng)
    none = ClientStats(np.ones(4, bool), np.empty(0, np.intp))
    assert form.select(state, 3, none, rng)[0].clients.tolist() == [3, 1]


@pytest.mark.parametrize(
    "form", [AveragedLoss(m=M_CONTRACT), AveragedLoss(m=M_CONTRACT, sample=True, probe_every=3)]
)
def test_averaged_loss_keeps_the_scheduler_contract(form):
    updates, losses, available = clustered_data(seed=1)  # the contract test's rounds
    first = run_rounds(form, updates, losses, available, seed=7)
    for t, selection in enumerate(first):
        clients = selection.clients
        assert clients.shape == (M_CONTRACT,) and len(set(clients.tolist())) == M_CONTRACT
        assert available[t][clients].all(), f"round {t}: selected an unavailable client"
    again = run_rounds(form, updates, losses, available, seed=7)
    assert [s.clients.tolist() for s in first] == [s.clients.tolist() for s in again]
