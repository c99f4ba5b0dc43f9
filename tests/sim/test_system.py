"""Client devices and the simulated clock: profiles, round times, deadlines, over-commitment."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.schedulers import ADCS, NO_PROBE, OCS, PowerOfChoice, Selection, Uniform
from adcs.schedulers.adcs import speed_score
from adcs.sim import FederatedData, RunSpec, SimConfig, simulate
from adcs.sim.system import (
    LOSS_BYTES,
    SystemConfig,
    SystemProfile,
    client_times,
    training_phase,
)

from .conftest import N_CLASSES, N_FEATURES

DIM = (N_FEATURES + 1) * N_CLASSES
MODEL_BYTES = 4.0 * DIM


def fixed_profile(compute: list[float], up: float = 1e9, down: float = 1e9) -> SystemProfile:
    n = len(compute)
    return SystemProfile(np.array(compute), np.full(n, up), np.full(n, down))


def hand_round_seconds(
    profile: SystemProfile, client: int, samples: int, *, forward: float = 1.0
) -> float:
    """download + forward · samples / speed + upload, written out for one client."""
    up_bytes = MODEL_BYTES if forward == 1.0 else LOSS_BYTES
    return (
        MODEL_BYTES / profile.download[client]
        + forward * samples / profile.compute[client]
        + up_bytes / profile.upload[client]
    )


# ------------------------------------------------------------------ the training phase by hand


def test_a_round_lasts_until_the_slowest_selected_client_returns() -> None:
    kept, seconds, busy = training_phase(np.array([3.0, 1.0, 2.0]), np.zeros(3, bool), 3)
    assert kept.all() and seconds == 3.0 and busy == 6.0


def test_a_deadline_drops_exactly_the_clients_past_it() -> None:
    response = np.array([1.0, 7.0, 4.0, 5.0, 9.0])
    kept, seconds, busy = training_phase(response, np.zeros(5, bool), 5, deadline=5.0)
    np.testing.assert_array_equal(kept, [True, False, True, True, False])
    assert seconds == 5.0  # the server waits for the deadline, then closes the round
    assert busy == 1.0 + 5.0 + 4.0 + 5.0 + 5.0  # the late ones work until it closes


def test_over_commitment_keeps_the_first_to_return() -> None:
    response = np.array([4.0, 1.0, 3.0, 2.0, 3.0])
    failed = np.array([False, True, False, False, False])  # the fastest drops out
    kept, seconds, busy = training_phase(response, failed, 2)
    np.testing.assert_array_equal(kept, [False, False, True, True, False])  # ties: first selected
    assert seconds == 3.0
    assert busy == 3.0 + 1.0 + 3.0 + 2.0 + 3.0


def test_without_enough_successes_the_round_waits_for_every_answer() -> None:
    kept, seconds, _ = training_phase(np.array([2.0, 6.0]), np.array([False, True]), 2)
    np.testing.assert_array_equal(kept, [True, False])
    assert seconds == 6.0  # the dropout is known only when it fails, at its time
    kept, seconds, busy = training_phase(np.empty(0), np.empty(0, bool), 0)
    assert kept.size == 0 and seconds == 0.0 and busy == 0.0


# ------------------------------------------------------------------ profiles


def test_profiles_are_log_normal_around_the_medians() -> None:
    groups = np.arange(20_000) // 4
    config = SystemConfig(compute_median=20.0, compute_sigma=0.7, upload_sigma=0.0)
    profile = config.draw(0, groups)
    log_c = np.log(profile.compute)
    assert np.median(profile.compute) == pytest.approx(20.0, rel=0.03)
    assert log_c.std() == pytest.approx(0.7, rel=0.03)
    np.testing.assert_allclose(profile.upload, config.upload_median)
    assert abs(np.corrcoef(log_c, np.log(profile.download))[0, 1]) < 0.03  # independent


def test_a_clients_device_depends_on_the_seed_and_itself_only() -> None:
    config = SystemConfig()
    small, large = config.draw(3, np.arange(10) // 2), config.draw(3, np.arange(50) // 2)
    np.testing.assert_array_equal(small.compute, large.compute[:10])
    other = config.draw(4, np.arange(10) // 2)
    assert not np.allclose(small.compute, other.compute)


def test_group_correlation_makes_a_groups_devices_alike() -> None:
    groups = np.arange(40_000) // 2  # 20 000 pairs: a correlation's standard error is 0.007
    for rho in (0.0, 0.6, 1.0):
        log_c = np.log(SystemConfig(group_correlation=rho).draw(0, groups).compute)
        pairs = log_c.reshape(-1, 2)
        assert np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1] == pytest.approx(rho, abs=0.03)
        assert log_c.std() == pytest.approx(1.0, rel=0.03)  # σ keeps its meaning


def test_profiles_from_a_csv(tmp_path: Path) -> None:
    path = tmp_path / "devices.csv"
    path.write_text("client,compute,upload,download\n1,5,100,200\n0,10,300,400\n")
    profile = SystemProfile.from_csv(path, 2)
    np.testing.assert_array_equal(profile.compute, [10.0, 5.0])
    np.testing.assert_array_equal(profile.download, [400.0, 200.0])
    config = SystemConfig(profile=profile)
    assert config.draw(0, np.zeros(2, int)) is config.draw(7, np.zeros(2, int))
    with pytest.raises(ValueError, match="3 clients, the data 2"):
        SystemConfig(profile=fixed_profile([1.0, 1.0, 1.0])).draw(0, np.zeros(2, int))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("client,compute,upload\n0,1,1\n", "lacks column"),
        ("client,compute,upload,download\n0,1,1,1\n0,1,1,1\n", "repeated"),
        ("client,compute,upload,download\n0,1,1,1\n", "lacks 1 client"),
        ("client,compute,upload,download\n0,1,1,x\n1,1,1,1\n", "not numbers"),
        ("client,compute,upload,download\n0,1,1,1\n1,0,1,1\n", "compute must be"),
    ],
)
def test_bad_csv_profiles_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "devices.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        SystemProfile.from_csv(path, 2)


def test_a_binary_profile_is_named(tmp_path: Path) -> None:
    path = tmp_path / "devices.csv"
    path.write_bytes(b"\xff\xfe\x00 binary")
    with pytest.raises(ValueError, match=r"system profile .*devices\.csv is not UTF-8 text"):
        SystemProfile.from_csv(path, 2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"compute_median": 0.0}, "compute_median"),
        ({"upload_sigma": -1.0}, "upload_sigma"),
        ({"group_correlation": 1.5}, "group_correlation"),
        ({"deadline": 0.0}, "deadline"),
        ({"overcommit": -0.1}, "overcommit"),
        ({"forward_cost": 0.0}, "forward_cost"),
    ],
)
def test_system_config_validation_names_the_argument(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SystemConfig(**kwargs)


def test_invitations_round_up_without_float_noise() -> None:
    config = SystemConfig(overcommit=0.1)
    assert config.invited(10, 100) == 11  # (1 + 0.1)·10 is 11.000000000000002 in floats
    assert config.invited(18, 100) == 20 and config.invited(18, 19) == 19
    assert SystemConfig(overcommit=0.3).invited(18, 30) == 24  # FedScale's 1.3


def test_client_times_follow_the_formulas() -> None:
    profile = SystemProfile(np.array([10.0, 4.0]), np.array([100.0, 50.0]), np.array([1e3, 2e3]))
    times = client_times(
        profile, dim=25, local_samples=8, batch_size=4, data_sizes=[30, 12], forward_cost=0.25
    )
    np.testing.assert_allclose(times.update, [100 / 1e3 + 8 / 10 + 1.0, 100 / 2e3 + 2.0 + 2.0])
    np.testing.assert_allclose(
        times.loss, [0.1 + 0.25 * 4 / 10 + 4 / 100, 0.05 + 0.25 * 4 / 4 + 4 / 50]
    )
    np.testing.assert_allclose(
        times.full_loss, [0.1 + 0.25 * 30 / 10 + 0.04, 0.05 + 0.25 * 12 / 4 + 0.08]
    )


# ------------------------------------------------------------------ the engine on the clock


SPEEDS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]


def timed(rounds: int = 6, **system: Any) -> SimConfig:
    return SimConfig(
        rounds=rounds, batch_size=4, local_lr=0.05, eval_every=2,
        system=SystemConfig(profile=fixed_profile(SPEEDS), **system),
    )  # fmt: skip


def test_round_time_is_the_slowest_selected_clients_time(data: FederatedData) -> None:
    (res,) = simulate([RunSpec(Uniform(m=3), 0, "u")], data, timed())
    profile = fixed_profile(SPEEDS)
    assert res.round_time is not None and res.busy_time is not None
    for t in range(6):
        own = [hand_round_seconds(profile, c, 4) for c in res.selected[t]]
        assert res.round_time[t] == pytest.approx(max(own), rel=1e-12)
        assert res.busy_time[t] == pytest.approx(sum(own), rel=1e-12)
    assert res.returned.all() and res.dropped == 0
    # e.g. client 0 computes 4 samples at 1 sample/s: 4 s and 2·MODEL_BYTES/1e9 of transfers
    assert hand_round_seconds(profile, 0, 4) == pytest.approx(4.0 + 2 * MODEL_BYTES / 1e9)


def test_clock_and_client_time_are_the_sums_of_the_rounds(data: FederatedData) -> None:
    (res,) = simulate([RunSpec(Uniform(m=3), 0, "u")], data, timed(rounds=7))
    assert res.round_time is not None and res.busy_time is not None
    assert res.clock is not None and res.eval_clock is not None
    assert res.clock[0] == 0.0
    assert res.clock[-1] == pytest.approx(res.round_time.sum(), rel=1e-12)
    assert res.total_time == pytest.approx(res.round_time.sum(), rel=1e-12)
    assert res.client_time == pytest.approx(res.busy_time.sum(), rel=1e-12)
    np.testing.assert_array_equal(res.eval_rounds, [0, 2, 4, 6, 7])
    expected = [0.0, *(res.round_time[:k].sum() for k in (2, 4, 6, 7))]
    np.testing.assert_allclose(res.eval_clock, expected, rtol=1e-12)


def test_probe_rounds_cost_the_probed_clients_time(data: FederatedData) -> None:
    profile = fixed_profile(SPEEDS)
    ocs, poc = simulate(
        [RunSpec(OCS(m=3), 0, "ocs"), RunSpec(PowerOfChoice(m=3), 0, "poc")], data, timed()
    )
    full = [hand_round_seconds(profile, c, 4) for c in range(8)]
    loss = [hand_round_seconds(profile, c, 4, forward=1 / 3) for c in range(8)]
    for t in range(6):
        # OCS: an update probe of everyone; the selected updates are the probed ones (no wait)
        assert ocs.round_time[t] == pytest.approx(max(full), rel=1e-12)
        assert ocs.busy_time[t] == pytest.approx(sum(full), rel=1e-12)
        # PowerOfChoice: a loss probe of everyone, then the selected clients train
        chosen = [full[c] for c in poc.selected[t]]
        assert poc.round_time[t] == pytest.approx(max(loss) + max(chosen), rel=1e-12)
        assert poc.busy_time[t] == pytest.approx(sum(loss) + sum(chosen), rel=1e-12)


def test_a_deadline_drops_exactly_the_late_clients(data: FederatedData) -> None:
    profile = fixed_profile(SPEEDS)
    deadline = 1.0  # clients 4…7 (4 samples at ≥ 5 samples/s) make it, 0…3 do not
    (res,) = simulate([RunSpec(Uniform(m=4), 0, "u")], data, timed(deadline=deadline))
    late = res.selected < 4
    np.testing.assert_array_equal(res.returned, ~late)
    assert res.dropped == int(late.sum()) > 0
    assert res.round_time is not None
    for t in range(6):
        own = max(hand_round_seconds(profile, c, 4) for c in res.selected[t])
        assert res.round_time[t] == pytest.approx(min(own, deadline), rel=1e-12)


def test_late_clients_are_not_aggregated(data: FederatedData) -> None:
    (cut,) = simulate([RunSpec(Fixed(m=4, picks=(6, 0, 7, 1)), 0, "f")], data, timed(deadline=1.0))
    np.testing.assert_array_equal(cut.returned, [[True, False, True, False]] * 6)
    plain = SimConfig(rounds=6, batch_size=4, local_lr=0.05, eval_every=2)
    (only,) = simulate([RunSpec(Fixed(m=2, picks=(6, 7)), 0, "f")], data, plain)
    np.testing.assert_allclose(cut.final_params, only.final_params, rtol=1e-6, atol=1e-8)
    assert (
        cut.final_params.tolist()
        != simulate([RunSpec(Fixed(m=4, picks=(6, 0, 7, 1)), 0, "f")], data, plain)[
            0
        ].final_params.tolist()
    )


@dataclasses.dataclass(frozen=True)
class Fixed:
    """A blind scheduler that selects the same clients every round (a test double)."""

    m: int
    picks: tuple[int, ...] = ()

    @property
    def observes_updates(self) -> bool:
        return False

    def init(self, n_clients: int, data_sizes: Any = None) -> int:
        return 0

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Any:
        return NO_PROBE

    def select(self, state: Any, round_idx: int, stats: Any, rng: Any) -> tuple[Selection, int]:
        return Selection(np.array(self.picks[: self.m])), state

    def observe(self, state: Any, *args: Any) -> Any:
        return state


def test_over_commitment_invites_more_and_keeps_the_first_m(data: FederatedData) -> None:
    profile = fixed_profile(SPEEDS)
    (res,) = simulate([RunSpec(Uniform(m=2), 0, "u")], data, timed(overcommit=0.5))
    assert res.selected.shape == (6, 3)  # ⌈1.5 · 2⌉ invited
    assert res.returned.sum(axis=1).tolist() == [2] * 6
    assert res.dropped == 0  # the third answered in time: discarded, not dropped
    assert res.round_time is not None and res.busy_time is not None
    for t in range(6):
        own = np.array([hand_round_seconds(profile, c, 4) for c in res.selected[t]])
        order = np.argsort(own, kind="stable")
        np.testing.assert_array_equal(np.flatnonzero(res.returned[t]), np.sort(order[:2]))
        assert res.round_time[t] == pytest.approx(own[order[1]], rel=1e-12)
        assert res.busy_time[t] == pytest.approx(np.minimum(own, own[order[1]]).sum(), rel=1e-12)


def test_over_commitment_needs_a_scheduler_whose_m_can_be_raised(data: FederatedData) -> None:
    class Plain:  # follows the protocol, but is no dataclass
        m = 2
        observes_updates = False
        init = Uniform(m=2).init
        probe = Uniform(m=2).probe
        select = Uniform(m=2).select
        observe = Uniform(m=2).observe

    with pytest.raises(ValueError, match="over-commitment asks the scheduler for 3 clients"):
        simulate([RunSpec(Plain(), 0, "p")], data, timed(overcommit=0.5))


def test_the_clock_alone_changes_no_number(data: FederatedData) -> None:
    runs = [
        RunSpec(Uniform(m=3), 0, "u"), RunSpec(OCS(m=3), 0, "o"),
        RunSpec(ADCS(m=3, refresh_every=2), 0, "a"), RunSpec(PowerOfChoice(m=3), 1, "p"),
    ]  # fmt: skip
    plain = SimConfig(rounds=6, batch_size=4, local_lr=0.05, eval_every=2, dropout=0.3)
    clocked = dataclasses.replace(plain, system=SystemConfig())
    for a, b in zip(simulate(runs, data, plain), simulate(runs, data, clocked), strict=True):
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_array_equal(a.returned, b.returned)
        np.testing.assert_array_equal(a.final_params, b.final_params)
        np.testing.assert_array_equal(a.client_acc, b.client_acc)
        assert a.dropped == b.dropped and a.client_updates == b.client_updates
        assert a.round_time is None and b.round_time is not None


@pytest.mark.parametrize("common", [True, False])
def test_every_method_of_a_seed_meets_the_same_devices(data: FederatedData, common: bool) -> None:
    config = SimConfig(rounds=5, batch_size=4, eval_every=5, common_minibatches=common,
                       system=SystemConfig(upload_median=200.0))  # fmt: skip
    runs = [RunSpec(Uniform(m=3), s, f"u{i}-{s}") for s in (0, 1) for i in range(3)]
    results = simulate(runs, data, config, workers=2)
    for res in results:
        assert config.system is not None
        profile = config.system.draw(res.spec.seed, data.groups)
        expected = [max(hand_round_seconds(profile, c, 4) for c in sel) for sel in res.selected]
        assert res.round_time is not None
        np.testing.assert_allclose(res.round_time, expected, rtol=1e-12)
    # the draws do differ between seeds
    assert config.system is not None
    assert not np.allclose(config.system.draw(0, data.groups).compute,
                           config.system.draw(1, data.groups).compute)  # fmt: skip


def test_workers_do_not_change_the_clock(data: FederatedData) -> None:
    runs = [RunSpec(Uniform(m=3), s, f"u{s}") for s in range(3)]
    config = timed(deadline=2.0, overcommit=0.4)
    for a, b in zip(simulate(runs, data, config), simulate(runs, data, config, workers=3),
                    strict=True):  # fmt: skip
        assert a.round_time is not None and b.round_time is not None
        np.testing.assert_array_equal(a.round_time, b.round_time)
        np.testing.assert_array_equal(a.busy_time, b.busy_time)
        np.testing.assert_array_equal(a.returned, b.returned)
        assert a.dropped == b.dropped


# ------------------------------------------------------------------ ADCS's communication term


def test_gamma_zero_with_speed_leaves_adcs_unchanged(data: FederatedData) -> None:
    base = SimConfig(rounds=12, batch_size=4, local_lr=0.05, eval_every=4)
    clocked = dataclasses.replace(base, system=SystemConfig())
    (plain,) = simulate([RunSpec(ADCS(m=3, refresh_every=3), 0, "a")], data, base)
    (speed,) = simulate(
        [RunSpec(ADCS(m=3, refresh_every=3, comm_score="speed", gamma=0.0), 0, "a")],
        data, clocked,
    )  # fmt: skip
    np.testing.assert_array_equal(plain.selected, speed.selected)
    np.testing.assert_array_equal(plain.final_params, speed.final_params)


def test_gamma_trades_learning_quality_for_speed(data: FederatedData) -> None:
    config = SimConfig(rounds=40, batch_size=4, local_lr=0.05, eval_every=40,
                       system=SystemConfig(compute_sigma=1.5))  # fmt: skip
    runs = [
        RunSpec(ADCS(m=3, refresh_every=4, comm_score="speed", gamma=g), 0, f"g{g}")
        for g in (0.0, 0.9)
    ]
    slow, fast = simulate(runs, data, config)
    assert config.system is not None
    profile = config.system.draw(0, data.groups)
    own = np.array([hand_round_seconds(profile, c, 4) for c in range(data.n_clients)])
    assert own[fast.selected].mean() < own[slow.selected].mean()
    assert fast.total_time is not None and slow.total_time is not None
    assert fast.total_time < slow.total_time
    # q_comm handed to the scheduler: the negative log round time scaled to [0, 1]
    q = speed_score(own)
    assert q[np.argmin(own)] == 1.0 and q[np.argmax(own)] == 0.0


def test_speed_without_a_system_profile_is_refused(data: FederatedData) -> None:
    config = SimConfig(rounds=2, batch_size=4)
    with pytest.raises(ValueError, match="run 'a': its scheduler needs the clients' round"):
        simulate([RunSpec(ADCS(m=3, comm_score="speed"), 0, "a")], data, config)


def test_oort_takes_its_durations_from_the_devices(data: FederatedData) -> None:
    from adcs.schedulers import Oort

    tau = np.arange(1.0, 9.0)
    assert Oort(3).with_round_times(tau).durations == tuple(tau)
    own = Oort(3, durations=(2.0,) * 8)
    assert own.with_round_times(tau) is own and not own.needs_round_times
    # in the simulator: the profile's durations shape the system utility (straggler penalty)
    config = timed(rounds=60)
    runs = [RunSpec(Oort(3), 0, "o"), RunSpec(Oort(3, round_penalty=0.0), 0, "o")]
    penalised, free = (simulate([r], data, config)[0] for r in runs)
    times = [hand_round_seconds(fixed_profile(SPEEDS), c, 4) for c in range(8)]
    mean_time = {k: np.mean(np.take(times, r.selected[20:])) for k, r in
                 (("penalised", penalised), ("free", free))}  # fmt: skip
    assert mean_time["penalised"] < mean_time["free"]


def test_an_attacked_or_defended_scheduler_is_resized_and_told_the_durations_through_its_wrappers(
    data: FederatedData,
) -> None:
    from adcs.adversary import Attack, Defence, Lie, adversarial

    attacked, _ = adversarial(
        Uniform(m=2), attack=Attack(clients=(0,), lie=(Lie.LOSS,)), defence=Defence(), seed=0
    )
    (res,) = simulate([RunSpec(attacked, 0, "a")], data, timed(overcommit=0.5))
    assert res.selected.shape == (6, 3)  # ⌈1.5 · 2⌉ invited through the attack and the defence
    assert res.returned.sum(axis=1).tolist() == [2] * 6
    fast = ADCS(m=2, refresh_every=2, comm_score="speed", gamma=1.0)
    lied, _ = adversarial(fast, attack=Attack(clients=(0,), lie=(Lie.LOSS,)), seed=0)
    with pytest.raises(ValueError, match="needs the clients' round durations"):
        simulate([RunSpec(lied, 0, "a")], data, dataclasses.replace(timed(), system=None))
    told, alone = simulate([RunSpec(lied, 0, "a"), RunSpec(fast, 0, "f")], data, timed())
    assert told.selected.shape == (6, 2)  # told the durations inside the attack: it runs
    assert told.round_time is not None and alone.round_time is not None
