"""The private probes mod (adcs.flower.private_probes): the server never gets a clear probe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity
from scipy import stats as st

from adcs.flower import SchedulerStrategy, make_client_app
from adcs.flower.private_probes import EPSILON, PrivateProbesMod, with_mods
from adcs.privacy import epsilon as accountant_epsilon
from adcs.schedulers import PowerOfChoice
from adcs.schedulers.base import ClientStats
from adcs.streams import Domain, counter_normal, stream_key

from .conftest import TRAIN_CONFIG, grid_of, small_model, synthetic_clients

N = 10
SEED = 7
DELTA = 1e-3
KS_LEVEL = 1e-3  # a correct scale fails one run in a thousand; the noise's seed is fixed
MOD = PrivateProbesMod(0.5, 0.01, DELTA, loss_range=(0.0, 4.0), update_clip=0.5, seed=3)


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


@pytest.fixture(scope="module")
def clients() -> list:
    return synthetic_clients(N, seed=1)


def ask(app: ClientApp, kind: str, server_round: int, pid: int, state: RecordDict) -> Message:
    params = small_model().init_params(1)[0] + 0.1
    config = ConfigRecord({**TRAIN_CONFIG, "server-round": server_round, "adcs-seed": 11})
    content = RecordDict({"arrays": ArrayRecord({"w": Array(params)}), "config": config})
    request = Message(content, 5, kind)
    request.metadata.__dict__["_message_id"] = "m1"
    return app(request, Context(1, 5, {"partition-id": pid}, state, {}))


def replies(clients: list, mod: PrivateProbesMod, kind: str, rounds: int) -> list[tuple]:
    """(clear, private) replies of every client at rounds 1..rounds."""
    plain = make_client_app(lambda pid, context: clients[pid], model=small_model())
    private = with_mods(plain, [mod])
    return [
        (ask(plain, kind, t, pid, RecordDict()), ask(private, kind, t, pid, RecordDict()))
        for t in range(1, rounds + 1)
        for pid in range(N)
    ]


def test_loss_replies_carry_the_clipped_loss_plus_noise_of_the_stated_scale(clients):
    pairs = replies(clients, MOD, "query.adcs_loss", 200)
    clear = np.array([c.content.metric_records["metrics"]["loss"] for c, _ in pairs])
    private = np.array([p.content.metric_records["metrics"]["loss"] for _, p in pairs])
    noise = (private - np.clip(clear, 0.0, 4.0)) / (0.5 * 4.0)
    assert st.kstest(noise, "norm").pvalue > KS_LEVEL
    assert st.kstest(noise / 1.2, "norm").pvalue < KS_LEVEL  # a 20 % wrong scale is seen


def test_train_replies_carry_the_clipped_update_plus_noise_of_the_stated_scale(clients):
    ((clear, private),) = replies(clients, MOD, "train", 1)[:1]
    delta = clear.content.array_records["arrays"]["w"].numpy().astype(np.float64)
    sent = private.content.array_records["arrays"]["w"].numpy().astype(np.float64)
    clipped = delta * min(1.0, 0.5 / np.linalg.norm(delta))
    sigma = 0.01 * 2 * 0.5
    assert st.kstest((sent - clipped) / sigma, "norm").pvalue > KS_LEVEL
    assert not np.array_equal(sent, delta)
    metrics = private.content.metric_records["metrics"]
    # ε of one loss release and one update release, by the accountant
    assert metrics[EPSILON] == accountant_epsilon({0.5: 1, 0.01: 1}, DELTA)


def test_a_node_whose_budget_is_spent_answers_with_an_error_from_then_on(clients):
    mod = PrivateProbesMod(2.0, 2.0, DELTA, epsilon=3.0, seed=3)
    app = with_mods(make_client_app(lambda pid, context: clients[pid], model=small_model()), [mod])
    state = RecordDict()  # the node's context state, kept across its messages
    answered = [not ask(app, "query.adcs_loss", t, 0, state).has_error() for t in range(1, 30)]
    first_refusal = answered.index(False)
    assert first_refusal > 0 and not any(answered[first_refusal:])
    assert accountant_epsilon({2.0: first_refusal}, DELTA) <= 3.0
    assert accountant_epsilon({2.0: first_refusal + 1}, DELTA) > 3.0


@dataclass
class Recording:
    """PowerOfChoice that keeps the losses the server received at each round."""

    inner: PowerOfChoice
    seen: dict[int, ClientStats] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return self.inner.m

    @property
    def observes_updates(self) -> bool:
        return False

    def init(self, n_clients: int, data_sizes: Any = None) -> Any:
        return self.inner.init(n_clients, data_sizes)

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Any:
        return self.inner.probe(state, round_idx, available, rng)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        self.seen[round_idx] = stats
        return self.inner.select(state, round_idx, stats, rng)

    def observe(self, state: Any, *args: Any) -> Any:
        return state


def federation(clients: list, apps: Any) -> Recording:
    from flwr.app import ArrayRecord as Arrays

    scheduler = Recording(PowerOfChoice(m=3))
    strategy = SchedulerStrategy(scheduler, N, seed=SEED)
    initial = Arrays({"params": Array(small_model().init_params(1)[0])})
    strategy.start(grid_of(apps, N), initial, num_rounds=2, train_config=ConfigRecord(TRAIN_CONFIG))
    return scheduler


def test_in_a_federation_the_server_sees_the_clients_losses_plus_their_noise(clients):
    plain = make_client_app(lambda pid, context: clients[pid], model=small_model())
    clear = federation(clients, lambda k: plain).seen[0]
    private = federation(clients, lambda k: with_mods(plain, [MOD])).seen[0]
    assert np.array_equal(clear.clients, private.clients) and clear.clients.size == N
    # round 1 (t = 0): the same model, so the same clear losses; the server got them noised
    noise = counter_normal(stream_key(3), Domain.PRIVACY, 0, clear.clients, 1, salt=1)[:, 0]
    expected = np.clip(clear.losses, 0.0, 4.0) + 0.5 * 4.0 * noise.astype(np.float64)
    np.testing.assert_array_equal(private.losses, expected)  # the mod's own arithmetic
    assert not np.allclose(private.losses, clear.losses)
