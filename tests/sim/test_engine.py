"""The multi-run round loop: exact maths on small cases, independence of runs, accounting."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from adcs.schedulers import (
    ADCS,
    OCS,
    ClientStats,
    DivFL,
    LossSource,
    PowerOfChoice,
    Probe,
    ProbeKind,
    Selection,
    StaticDPP,
    Uniform,
)
from adcs.sim import (
    BernoulliAvailability,
    CyclicAvailability,
    FederatedData,
    LogisticRegression,
    RunSpec,
    SimConfig,
    TraceAvailability,
    simulate,
    to_unit_float,
)
from adcs.streams import minibatch_indices, stream_key

from .conftest import make_data
from .test_model import reference_loss, reference_sample_grads


def reference_rounds(
    data: FederatedData,
    seed: int,
    rounds: int,
    lr: float,
    batch: int,
    steps: int = 1,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Full participation, computed client by client in float64 from the stream's minibatch rows."""
    n = data.n_clients
    coef = np.full(n, 1.0 / n) if weights is None else weights
    w = np.zeros((data.input_shape[0] + 1, data.n_classes))
    for t in range(rounds):
        rows = stream_rows(data, seed, t, steps * batch)
        total = np.zeros_like(w)
        for c in range(n):
            local = w.copy()
            for e in range(steps):
                r = rows[c, e * batch : (e + 1) * batch]
                x = to_unit_float(data.train_images[r])
                local -= lr * reference_sample_grads(local, x, data.train_labels[r]).mean(axis=0)
            total += coef[c] * (local - w)
        w = w + total
    return w.ravel()


def stream_rows(data: FederatedData, seed: int, t: int, per_round: int) -> np.ndarray:
    """Every client's training rows at round t of seed's shared stream, shape (n_clients, E·B)."""
    clients = np.arange(data.n_clients)
    local = minibatch_indices(stream_key(seed), clients, t, data.data_sizes, 1, per_round)
    return data.train_rows(clients, local[:, 0])


# ------------------------------------------------------------------ exact maths on small cases


def test_full_participation_round_is_minibatch_sgd_on_the_union(data: FederatedData) -> None:
    n = data.n_clients
    config = SimConfig(rounds=3, batch_size=5, local_lr=0.3, eval_every=10)
    (result,) = simulate([RunSpec(Uniform(m=n), seed=4, run_id="all")], data, config)
    expected = reference_rounds(data, seed=4, rounds=3, lr=0.3, batch=5)
    np.testing.assert_allclose(result.final_params, expected, rtol=1e-4, atol=1e-6)
    assert result.client_updates == 3 * n and result.loss_evals == 0


def test_probed_and_blind_paths_aggregate_the_same(data: FederatedData) -> None:
    # OCS(m = N) reuses its probed updates; Uniform(m = N) computes the aggregate directly. Same
    # seed means the same minibatches, so both must follow the same trajectory.
    n = data.n_clients
    config = SimConfig(rounds=6, batch_size=4, local_lr=0.5, eval_every=3)
    specs = [RunSpec(Uniform(m=n), 1, "uniform"), RunSpec(OCS(m=n), 1, "ocs")]
    blind, probed = simulate(specs, data, config)
    np.testing.assert_allclose(blind.final_params, probed.final_params, rtol=1e-5, atol=1e-7)


def test_several_local_steps_follow_local_sgd(data: FederatedData) -> None:
    n = data.n_clients
    config = SimConfig(rounds=2, local_steps=3, batch_size=4, local_lr=0.2, eval_every=5)
    specs = [RunSpec(Uniform(m=n), 2, "blind"), RunSpec(OCS(m=n), 2, "probed")]
    results = simulate(specs, data, config)
    expected = reference_rounds(data, seed=2, rounds=2, lr=0.2, batch=4, steps=3)
    for result in results:
        np.testing.assert_allclose(result.final_params, expected, rtol=1e-4, atol=1e-6)


def test_data_size_weighting(data: FederatedData) -> None:
    train = list(data.train_indices)
    train[0], train[3] = train[0][:10], train[3][:25]
    skewed = FederatedData(
        data.train_images, data.train_labels, data.test_images, data.test_labels,
        tuple(train), data.test_indices, data.groups, data.n_groups, data.n_classes,
    )  # fmt: skip
    n = skewed.n_clients
    config = SimConfig(rounds=2, batch_size=4, local_lr=0.3, weighting="data_size")
    (result,) = simulate([RunSpec(Uniform(m=n), 0, "w")], skewed, config)
    sizes = skewed.data_sizes.astype(float)
    expected = reference_rounds(skewed, 0, 2, lr=0.3, batch=4, weights=sizes / sizes.sum())
    np.testing.assert_allclose(result.final_params, expected, rtol=1e-4, atol=1e-6)


@dataclass(frozen=True)
class FixedWeights:
    """Selects every client and returns its own aggregation weights (an unbiased-variant stand-in)."""

    m: int
    weights: tuple[float, ...]
    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.NONE)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        return Selection(np.arange(self.m), np.asarray(self.weights)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


def test_scheduler_weights_replace_the_default_aggregation(data: FederatedData) -> None:
    n = data.n_clients
    weights = tuple(np.linspace(0.1, 1.5, n))
    config = SimConfig(rounds=2, batch_size=4, local_lr=0.3)
    (result,) = simulate([RunSpec(FixedWeights(n, weights), 0, "fw")], data, config)
    expected = reference_rounds(data, 0, 2, lr=0.3, batch=4, weights=np.asarray(weights))
    np.testing.assert_allclose(result.final_params, expected, rtol=1e-4, atol=1e-6)


@dataclass(frozen=True)
class RecordingLosses:
    """Probes full local losses of every client, records them, picks the first m."""

    m: int
    source: LossSource
    seen: list[np.ndarray] = field(default_factory=list, compare=False)
    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.LOSSES, loss_source=self.source)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        assert stats.losses is not None and stats.updates is None
        self.seen.append(stats.losses.copy())
        return Selection(np.arange(self.m)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


@pytest.mark.parametrize("source", [LossSource.FULL, LossSource.MINIBATCH])
def test_loss_probes_measure_the_requested_loss(data: FederatedData, source: LossSource) -> None:
    config = SimConfig(rounds=2, batch_size=4, local_lr=0.5)
    recorder = RecordingLosses(m=3, source=source)
    (result,) = simulate([RunSpec(recorder, 0, "x")], data, config)
    one_round = simulate(
        [RunSpec(RecordingLosses(m=3, source=source), 0, "x")],
        data,
        SimConfig(rounds=1, batch_size=4, local_lr=0.5),
    )[0].final_params  # w⁽¹⁾ of the same run (a run's first rounds do not depend on T)
    rows = stream_rows(data, 0, 1, 4)
    for c in range(data.n_clients):
        idx = data.train_indices[c] if source is LossSource.FULL else rows[c]
        x = to_unit_float(data.train_images[idx])
        expected = reference_loss(one_round, x, data.train_labels[idx])
        assert recorder.seen[1][c] == pytest.approx(expected, rel=1e-4)
    assert result.loss_evals == 2 * data.n_clients and result.client_updates == 2 * 3


# ------------------------------------------------------------------ learning and evaluation


def test_loss_decreases_on_a_learnable_task(data: FederatedData) -> None:
    config = SimConfig(rounds=150, batch_size=8, local_lr=0.5, eval_every=50)
    (result,) = simulate([RunSpec(Uniform(m=4), 0, "u")], data, config)
    assert result.test_loss[0] == pytest.approx(math.log(data.n_classes), rel=1e-5)
    assert np.all(np.diff(result.test_loss) < 0)
    assert result.test_loss[-1] < 0.6 * result.test_loss[0]
    assert result.avg_acc[-1] > 0.7 and result.avg_acc[0] < 0.5


def test_metrics_are_those_of_the_final_model(data: FederatedData) -> None:
    config = SimConfig(rounds=25, batch_size=4, local_lr=0.5, eval_every=10)
    (result,) = simulate([RunSpec(ADCS(m=3, refresh_every=4), 3, "a")], data, config)
    np.testing.assert_array_equal(result.eval_rounds, [0, 10, 20, 25])
    f = data.input_shape[0]
    w = result.final_params.astype(np.float64).reshape(f + 1, data.n_classes)
    accuracies, losses = [], []
    for idx in data.test_indices:
        x = to_unit_float(data.test_images[idx]).astype(np.float64)
        accuracies.append(np.mean((x @ w[:f] + w[f]).argmax(axis=1) == data.test_labels[idx]))
        losses.append(reference_loss(w, x, data.test_labels[idx]) * idx.size)
    np.testing.assert_allclose(result.client_acc[-1], accuracies, atol=1.0 / 15 + 1e-12)
    assert abs(result.client_acc[-1] - accuracies).sum() <= 1.0 / 15 + 1e-12
    assert result.worst_acc[-1] == result.client_acc[-1].min()
    assert result.avg_acc[-1] == pytest.approx(result.client_acc[-1].mean())
    total = sum(idx.size for idx in data.test_indices)
    assert result.test_loss[-1] == pytest.approx(sum(losses) / total, rel=1e-4)


# ------------------------------------------------------------------ runs are independent


def _mixed_specs() -> list[RunSpec]:
    return [
        RunSpec(Uniform(m=3), 0, "uniform/0"),
        RunSpec(OCS(m=3), 0, "ocs/0"),
        RunSpec(ADCS(m=3, refresh_every=3), 1, "adcs/1"),
        RunSpec(PowerOfChoice(m=3), 0, "poc/0"),
    ]


@pytest.mark.parametrize("common", [True, False])
def test_run_alone_equals_run_in_a_batch(data: FederatedData, common: bool) -> None:
    config = SimConfig(rounds=30, batch_size=4, local_lr=0.5, eval_every=10,
                       common_minibatches=common)  # fmt: skip
    batch = simulate(_mixed_specs(), data, config)
    for spec, in_batch in zip(_mixed_specs(), batch, strict=True):
        (alone,) = simulate([spec], data, config)
        np.testing.assert_array_equal(alone.selected[:10], in_batch.selected[:10])
        np.testing.assert_allclose(alone.final_params, in_batch.final_params, rtol=1e-4, atol=1e-6)


def test_same_seed_same_result_different_seed_different(data: FederatedData) -> None:
    config = SimConfig(rounds=20, batch_size=4, local_lr=0.5, eval_every=10)
    first = simulate(_mixed_specs(), data, config)
    again = simulate(_mixed_specs(), data, config)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_array_equal(a.final_params, b.final_params)
        np.testing.assert_array_equal(a.client_acc, b.client_acc)
    other = simulate([RunSpec(s.scheduler, s.seed + 10, s.run_id) for s in _mixed_specs()],
                     data, config)  # fmt: skip
    for a, b in zip(first, other, strict=True):
        assert not np.array_equal(a.final_params, b.final_params)
    assert not np.array_equal(first[0].selected, other[0].selected)


def test_run_id_separates_the_scheduler_streams(data: FederatedData) -> None:
    config = SimConfig(rounds=20, batch_size=4, local_lr=0.5)
    a, b = simulate([RunSpec(Uniform(m=3), 0, "a"), RunSpec(Uniform(m=3), 0, "b")], data, config)
    assert not np.array_equal(a.selected, b.selected)


def test_workers_do_not_change_results(data: FederatedData) -> None:
    config = SimConfig(rounds=15, batch_size=4, local_lr=0.5, eval_every=5)
    specs = [*_mixed_specs(), RunSpec(DivFL(m=3), 2, "divfl/2")]
    serial = simulate(specs, data, config, workers=1)
    threaded = simulate(specs, data, config, workers=2)
    for a, b in zip(serial, threaded, strict=True):
        assert a.spec.run_id == b.spec.run_id
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_array_equal(a.final_params, b.final_params)
        np.testing.assert_array_equal(a.client_acc, b.client_acc)
        np.testing.assert_array_equal(a.test_loss, b.test_loss)


def test_first_rounds_do_not_depend_on_the_number_of_rounds(data: FederatedData) -> None:
    specs = [RunSpec(OCS(m=3), 5, "ocs"), RunSpec(Uniform(m=3), 5, "u")]
    short = simulate(specs, data, SimConfig(rounds=4, batch_size=4, local_lr=0.5))
    long = simulate(specs, data, SimConfig(rounds=300, batch_size=4, local_lr=0.5))
    for s, lg in zip(short, long, strict=True):
        np.testing.assert_array_equal(s.selected, lg.selected[:4])


# ------------------------------------------------------------------ accounting


def test_client_computation_counts_follow_the_formulas() -> None:
    data = make_data(seed=1, n_clients=8)
    n, m, rounds, refresh = 8, 5, 23, 5
    specs = [
        RunSpec(Uniform(m), 0, "uniform"),
        RunSpec(PowerOfChoice(m), 0, "poc"),
        RunSpec(OCS(m), 0, "ocs"),
        RunSpec(DivFL(m), 0, "divfl"),
        RunSpec(ADCS(m, refresh_every=refresh), 0, "adcs"),
        RunSpec(StaticDPP(m), 0, "static"),
    ]
    results = simulate(specs, data, SimConfig(rounds=rounds, batch_size=4, local_lr=0.1))
    counts = {r.spec.run_id: (r.client_updates, r.loss_evals) for r in results}
    assert counts == {
        "uniform": (m * rounds, 0),
        "poc": (m * rounds, n * rounds),
        "ocs": (n * rounds, 0),
        "divfl": (n * rounds, 0),
        "adcs": (m * rounds + (n - m) * math.ceil(rounds / refresh), 0),
        "static": (m * rounds + (n - m), 0),
    }
    for r in results:
        assert r.selected.shape == (rounds, m)
        assert all(len(set(row)) == m for row in r.selected.tolist())
        assert r.group_share.sum() == pytest.approx(1.0)
        assert 0.0 <= r.tv_to_uniform <= 1.0


def test_static_dpp_trains_one_subset(data: FederatedData) -> None:
    (result,) = simulate([RunSpec(StaticDPP(3), 0, "s")], data, SimConfig(rounds=12, batch_size=4))
    assert (result.selected == result.selected[0]).all()


def test_progress_reports_rounds_done(data: FederatedData) -> None:
    seen: list[int] = []
    simulate([RunSpec(Uniform(3), 0, "u")], data, SimConfig(rounds=120, batch_size=4),
             progress=seen.append)  # fmt: skip
    assert seen == [50, 100, 120]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rounds": 0}, "rounds"),
        ({"rounds": 5, "local_steps": 0}, "local_steps"),
        ({"rounds": 5, "batch_size": 2.5}, "batch_size"),
        ({"rounds": 5, "local_lr": -1.0}, "local_lr"),
        ({"rounds": 5, "server_lr": float("nan")}, "server_lr"),
        ({"rounds": 5, "eval_every": 0}, "eval_every"),
        ({"rounds": 5, "weighting": "size"}, "weighting"),
        ({"rounds": True}, "rounds"),
        ({"rounds": 5, "dropout": 1.0}, "dropout"),
        ({"rounds": 5, "availability": "always"}, "availability"),
    ],
)
def test_config_validation_names_the_argument(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SimConfig(**kwargs)


def test_bad_runs_are_rejected(data: FederatedData) -> None:
    config = SimConfig(rounds=2)
    with pytest.raises(ValueError, match="twice"):
        simulate([RunSpec(Uniform(2), 0, "a"), RunSpec(Uniform(2), 1, "a")], data, config)
    with pytest.raises(ValueError, match=r"scheduler\.m"):
        simulate([RunSpec(Uniform(data.n_clients + 1), 0, "a")], data, config)
    with pytest.raises(ValueError, match="at least one"):
        simulate([], data, config)
    with pytest.raises(ValueError, match="seed"):
        RunSpec(Uniform(2), -1, "a")
    with pytest.raises(ValueError, match="run_id"):
        RunSpec(Uniform(2), 0, "")
    with pytest.raises(ValueError, match="workers"):
        simulate([RunSpec(Uniform(2), 0, "a")], data, config, workers=0)


def test_bad_arguments_are_named_before_any_round(data: FederatedData) -> None:
    run, config = RunSpec(Uniform(2), 0, "a"), SimConfig(rounds=2)
    # these were an AttributeError, "object of type 'RunSpec' has no len()", or a TypeError
    # at the first progress report, after the rounds had run
    with pytest.raises(ValueError, match="config must be a SimConfig, got dict"):
        simulate([run], data, {"rounds": 2})  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="runs must be a sequence \\(a list\\) of RunSpec, got Run"
    ):
        simulate(run, data, config)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="progress must be callable or None, got int"):
        simulate([run], data, config, progress=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_eval must be callable or None, got str"):
        simulate([run], data, config, on_eval="print")  # type: ignore[arg-type]


@dataclass(frozen=True)
class Duplicates:
    m: int
    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.NONE)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        return Selection(np.zeros(self.m, dtype=np.intp)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


def test_a_scheduler_breaking_its_contract_is_reported(data: FederatedData) -> None:
    with pytest.raises(RuntimeError, match="distinct available"):
        simulate([RunSpec(Duplicates(2), 0, "dup")], data, SimConfig(rounds=2))


def test_federated_data_validation(data: FederatedData) -> None:
    base: dict[str, Any] = {
        "train_images": data.train_images, "train_labels": data.train_labels,
        "test_images": data.test_images, "test_labels": data.test_labels,
        "train_indices": data.train_indices, "test_indices": data.test_indices,
        "groups": data.groups, "n_groups": data.n_groups, "n_classes": data.n_classes,
    }  # fmt: skip
    bad = {
        "train_indices": (np.array([10**6]), *data.train_indices[1:]),
        "test_indices": (np.array([], dtype=int), *data.test_indices[1:]),
        "groups": np.full(data.n_clients, data.n_groups),
        "train_labels": np.full_like(data.train_labels, data.n_classes),
        "test_images": data.test_images[:, :3],
    }
    for name, value in bad.items():
        with pytest.raises(ValueError, match=name):
            FederatedData(**{**base, name: value})
    assert data.n_clients == 8 and data.data_sizes.tolist() == [40] * 8
    floats = make_data(uint8=False)
    assert floats.train_images.dtype == np.float32


def test_a_failing_worker_stops_the_call(data: FederatedData) -> None:
    specs = [RunSpec(Uniform(2), 1, "fine"), RunSpec(Duplicates(2), 0, "dup")]
    with pytest.raises(RuntimeError, match="dup"):
        simulate(specs, data, SimConfig(rounds=400), workers=2)


def test_results_survive_pickling(data: FederatedData) -> None:
    import pickle

    spec = RunSpec(ADCS(m=3), 0, "adcs", {"theta": 0.8})
    (result,) = simulate([spec], data, SimConfig(rounds=5, batch_size=4))
    copy = pickle.loads(pickle.dumps(result))
    assert copy.spec == spec and copy.spec.meta == {"theta": 0.8}
    np.testing.assert_array_equal(copy.selected, result.selected)
    np.testing.assert_array_equal(copy.final_params, result.final_params)


@dataclass(frozen=True)
class RecordingObserver:
    """Probes ``kind``, selects clients 1..m, and records what observe() receives."""

    m: int
    kind: ProbeKind
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=list, compare=False
    )
    observes_updates = True

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(self.kind)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        return Selection(np.arange(1, self.m + 1)), state

    def observe(self, state: Any, round_idx: int, clients: Any, updates: Any, losses: Any) -> None:
        self.seen.append((clients.copy(), np.array(updates), np.array(losses)))
        return state


@pytest.mark.parametrize("kind", [ProbeKind.NONE, ProbeKind.UPDATES, ProbeKind.LOSSES])
def test_observe_receives_the_selected_updates(data: FederatedData, kind: ProbeKind) -> None:
    config = SimConfig(rounds=2, batch_size=4, local_lr=0.5)
    recorder = RecordingObserver(m=3, kind=kind)
    simulate([RunSpec(recorder, 0, "obs")], data, config)
    w1 = simulate(
        [RunSpec(RecordingObserver(m=3, kind=kind), 0, "obs")],
        data,
        SimConfig(rounds=1, batch_size=4, local_lr=0.5),
    )[0].final_params
    rows = stream_rows(data, 0, 1, 4)
    clients, updates, losses = recorder.seen[1]
    np.testing.assert_array_equal(clients, [1, 2, 3])
    for i, c in enumerate(clients):
        x = to_unit_float(data.train_images[rows[c]])
        y = data.train_labels[rows[c]]
        expected = -0.5 * reference_sample_grads(w1, x, y).mean(axis=0)
        np.testing.assert_allclose(updates[i], expected.ravel(), rtol=1e-4, atol=1e-7)
        assert losses[i] == pytest.approx(reference_loss(w1, x, y), rel=1e-5)


def test_stale_divfl_probes_once_and_observes(data: FederatedData) -> None:
    n, m, rounds = data.n_clients, 3, 12
    (result,) = simulate([RunSpec(DivFL(m, stale=True), 0, "stale")], data, SimConfig(rounds))
    assert result.client_updates == n + m * (rounds - 1)


@dataclass(frozen=True)
class KeepsUpdates:
    """Probes every update each round and keeps the arrays it was given."""

    m: int
    kept: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, compare=False)
    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.UPDATES)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        assert stats.updates is not None
        self.kept.append((stats.updates, stats.updates.copy()))
        return Selection(np.arange(self.m)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


def test_updates_a_scheduler_keeps_are_not_overwritten(data: FederatedData) -> None:
    keeper = KeepsUpdates(m=3)
    simulate([RunSpec(keeper, 0, "keep")], data, SimConfig(rounds=4, batch_size=4, local_lr=0.5))
    for kept, snapshot in keeper.kept:
        np.testing.assert_array_equal(kept, snapshot)
    assert not np.array_equal(keeper.kept[0][1], keeper.kept[1][1])


# ------------------------------------------------------------------ active set, availability, dropout


class CountingModel(LogisticRegression):
    """Logistic regression that counts the samples it sees, by path."""

    def __init__(self, n_features: int, n_classes: int) -> None:
        super().__init__(n_features, n_classes)
        object.__setattr__(self, "seen", {"shared": 0, "jobs": 0})

    def shared_forward(self, params: Any, x: Any, y: Any) -> Any:
        self.seen["shared"] += x.shape[0]  # type: ignore[attr-defined]
        return super().shared_forward(params, x, y)

    def loss_and_grad(self, params: Any, x: Any, y: Any) -> Any:
        self.seen["jobs"] += x.shape[0] * x.shape[1]  # type: ignore[attr-defined]
        return super().loss_and_grad(params, x, y)


@pytest.mark.parametrize("local_steps", [1, 2])
def test_a_blind_round_touches_only_the_selected_clients(local_steps: int) -> None:
    data = make_data(seed=3, n_clients=60, clients_per_group=6, train_per_client=30)
    model = CountingModel(data.input_shape[0], data.n_classes)
    rounds, m, batch = 7, 4, 5
    config = SimConfig(rounds=rounds, batch_size=batch, local_steps=local_steps, eval_every=100)
    simulate([RunSpec(Uniform(m), 0, "u")], data, config, model=model)
    seen = model.seen  # type: ignore[attr-defined]
    assert seen["shared"] + seen["jobs"] == rounds * m * batch * local_steps  # never all 60
    assert seen["shared" if local_steps == 1 else "jobs"] > 0


def test_selections_records_pad_when_fewer_than_m_are_available() -> None:
    data = make_data(seed=2, n_clients=12, clients_per_group=3)
    availability = TraceAvailability(np.tile(np.arange(12) < [[2], [12], [0], [7]], (2, 1)))
    config = SimConfig(rounds=8, batch_size=4, local_lr=0.5, availability=availability)
    results = simulate([RunSpec(Uniform(5), 0, "u"), RunSpec(ADCS(5, refresh_every=2), 0, "a")],
                       data, config)  # fmt: skip
    for r in results:
        counts = (r.selected >= 0).sum(axis=1)
        np.testing.assert_array_equal(counts, [2, 5, 0, 5] * 2)
        np.testing.assert_array_equal(r.n_available, [2, 12, 0, 7] * 2)
        assert r.available is not None
        masks = np.unpackbits(r.available, axis=1, count=12).astype(bool)
        for t in range(8):
            chosen = r.selected[t][r.selected[t] >= 0]
            assert masks[t][chosen].all() and len(set(chosen.tolist())) == chosen.size
        assert (r.returned == (r.selected >= 0)).all()  # no dropout
    # round 2 selects nobody: the model does not move (nothing to aggregate)
    a = simulate([RunSpec(Uniform(5), 0, "u")], data, dataclasses.replace(config, rounds=2))[0]
    b = simulate([RunSpec(Uniform(5), 0, "u")], data, dataclasses.replace(config, rounds=3))[0]
    np.testing.assert_array_equal(a.final_params, b.final_params)


def test_availability_is_shared_by_the_methods_of_a_seed(data: FederatedData) -> None:
    config = SimConfig(rounds=40, batch_size=4, local_lr=0.5,
                       availability=BernoulliAvailability(0.5))  # fmt: skip
    specs = [*_mixed_specs(), RunSpec(DivFL(m=3), 0, "divfl/0"), RunSpec(Uniform(3), 1, "u/1")]
    results = simulate(specs, data, config)
    by_seed: dict[int, list[Any]] = {}
    for r in results:
        assert r.available is not None
        masks = np.unpackbits(r.available, axis=1, count=data.n_clients).astype(bool)
        for t in range(config.rounds):
            chosen = r.selected[t][r.selected[t] >= 0]
            assert masks[t][chosen].all(), f"{r.spec.run_id} chose an unavailable client"
            assert chosen.size == min(3, masks[t].sum())
        by_seed.setdefault(r.spec.seed, []).append(masks)
    for masks in by_seed.values():
        assert all(np.array_equal(masks[0], other) for other in masks[1:])
    assert not np.array_equal(by_seed[0][0], by_seed[1][0])
    share = np.mean(by_seed[0][0])
    assert 0.35 < share < 0.65


def test_cyclic_availability_follows_the_group_phases() -> None:
    data = make_data(seed=4, n_clients=8, clients_per_group=2)
    cyclic = CyclicAvailability(period=4, duty=0.5, phase="group")
    (r,) = simulate([RunSpec(Uniform(2), 0, "u")], data,
                    SimConfig(rounds=8, batch_size=4, availability=cyclic))  # fmt: skip
    assert r.available is not None
    masks = np.unpackbits(r.available, axis=1, count=8).astype(bool)
    phase = data.groups  # 4 groups over a period of 4: phases 0, 1, 2, 3
    for t in range(8):
        np.testing.assert_array_equal(masks[t], (t + phase) % 4 < 2)


def test_dropout_renormalises_over_the_returned_clients_and_is_recorded(
    data: FederatedData,
) -> None:
    n = data.n_clients
    config = SimConfig(rounds=5, batch_size=4, local_lr=0.3, dropout=0.4)
    (result,) = simulate([RunSpec(Uniform(m=n), 6, "all")], data, config)
    returned = result.returned
    assert 0 < (~returned).sum() < returned.size and result.dropped == (~returned).sum()
    assert result.client_updates == returned.sum()
    # replay: one SGD step per round on the union of the clients that returned
    w = np.zeros((data.input_shape[0] + 1, data.n_classes))
    for t in range(config.rounds):
        rows = stream_rows(data, 6, t, 4)
        back = result.selected[t][returned[t]]
        step = np.zeros_like(w)
        for c in back:
            x = to_unit_float(data.train_images[rows[c]])
            step -= 0.3 * reference_sample_grads(w, x, data.train_labels[rows[c]]).mean(axis=0)
        w = w + step / max(back.size, 1)
    np.testing.assert_allclose(result.final_params, w.ravel(), rtol=1e-4, atol=1e-6)
    # the same clients drop out whichever method selects them
    (ocs,) = simulate([RunSpec(OCS(m=n), 6, "ocs")], data, config)
    for t in range(config.rounds):
        dropped_u = set(result.selected[t][~returned[t]].tolist())
        dropped_o = set(ocs.selected[t][~ocs.returned[t]].tolist())
        assert dropped_u == dropped_o


def test_dropout_keeps_scheduler_weights_at_their_total(data: FederatedData) -> None:
    n = data.n_clients
    weights = tuple(np.linspace(0.1, 1.5, n))
    config = SimConfig(rounds=1, batch_size=4, local_lr=0.3, dropout=0.5)
    (result,) = simulate([RunSpec(FixedWeights(n, weights), 3, "fw")], data, config)
    back = result.returned[0]
    w = np.asarray(weights)
    coef = np.where(back, w * w.sum() / w[back].sum(), 0.0)
    expected = reference_rounds(data, 3, 1, lr=0.3, batch=4, weights=coef)
    np.testing.assert_allclose(result.final_params, expected, rtol=1e-4, atol=1e-6)
