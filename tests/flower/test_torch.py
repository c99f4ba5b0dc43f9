"""A PyTorch model in Flower: the ClientApp trains a TorchModel, and a few Flower rounds equal
adcs's simulator running the same model on the same clients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")
pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from adcs.flower import LocalData, SchedulerStrategy, make_client_app, minibatch_indices
from adcs.schedulers import ADCS
from adcs.sim import FederatedData, RunSpec, SimConfig, simulate
from adcs.sim.torch import TorchModel

from .conftest import (
    BATCH_SIZE,
    LOCAL_LR,
    LOCAL_STEPS,
    N_CLASSES,
    N_FEATURES,
    TRAIN_CONFIG,
    grid_of,
    synthetic_clients,
)

SEED = 3


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(N_FEATURES, 8), nn.ReLU(), nn.Linear(8, N_CLASSES))


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


@pytest.fixture(scope="module")
def model() -> TorchModel:
    return TorchModel(mlp, input_shape=(N_FEATURES,), n_classes=N_CLASSES)


def test_the_client_app_trains_a_torch_model_like_torch_optim_sgd(model: TorchModel) -> None:
    clients = synthetic_clients(3)
    app = make_client_app(lambda pid, context: clients[pid], model=model)
    params = model.init_params(1)[0]
    content = RecordDict(
        {
            "arrays": ArrayRecord({"w": Array(params)}),
            "config": ConfigRecord({"server-round": 4, "adcs-seed": SEED, **TRAIN_CONFIG}),
        }
    )
    request = Message(content, 5, "train")
    request.metadata.__dict__["_message_id"] = "m1"
    reply = app(request, Context(1, 5, {"partition-id": 2}, RecordDict(), {}))
    update = reply.content.array_records["arrays"]["w"].numpy()
    # the reference: the client's module trained with torch.optim.SGD on the same minibatches
    data = clients[2]
    idx = minibatch_indices(SEED, 4, 2, len(data.y_train), LOCAL_STEPS, BATCH_SIZE)
    module = mlp()
    start = torch.from_numpy(params.copy())
    vector_to_parameters(start.clone(), module.parameters())
    optimiser = torch.optim.SGD(module.parameters(), lr=LOCAL_LR)
    for rows in idx:
        optimiser.zero_grad()
        x, y = torch.from_numpy(data.x_train[rows]), torch.from_numpy(data.y_train[rows])
        F.cross_entropy(module(x), y).backward()
        optimiser.step()
    expected = (parameters_to_vector(module.parameters()) - start).detach().numpy()
    np.testing.assert_allclose(update, expected, rtol=1e-4, atol=1e-6)


def federated(clients: list[LocalData]) -> FederatedData:
    """The clients' data as the simulator holds it (client k owns its rows, in order)."""
    sizes = [c.x_train.shape[0] for c in clients]
    test_sizes = [c.x_test.shape[0] for c in clients]

    def owners(counts: list[int]) -> tuple[np.ndarray, ...]:
        ends = np.cumsum(counts)
        return tuple(np.arange(e - n, e) for n, e in zip(counts, ends, strict=True))

    return FederatedData(
        train_images=np.concatenate([c.x_train for c in clients]),
        train_labels=np.concatenate([c.y_train for c in clients]),
        test_images=np.concatenate([c.x_test for c in clients]),
        test_labels=np.concatenate([c.y_test for c in clients]),
        train_indices=owners(sizes),
        test_indices=owners(test_sizes),
        groups=np.arange(len(clients)),
        n_groups=len(clients),
        n_classes=N_CLASSES,
    )


def test_flower_rounds_with_a_torch_model_equal_the_simulator(model: TorchModel) -> None:
    clients = synthetic_clients(6, seed=2)
    rounds = 4
    scheduler = ADCS(m=3, theta=0.8, refresh_every=2)  # deterministic: no sampling to align
    grid = grid_of(lambda k: make_client_app(lambda pid, ctx: clients[pid], model=model), 6)
    strategy = SchedulerStrategy(scheduler, len(clients), seed=SEED)
    initial = ArrayRecord({"params": Array(model.init_params(1)[0])})
    result = strategy.start(
        grid, initial, num_rounds=rounds, train_config=ConfigRecord(dict(TRAIN_CONFIG))
    )
    config = SimConfig(
        rounds=rounds, local_steps=LOCAL_STEPS, batch_size=BATCH_SIZE, local_lr=LOCAL_LR
    )
    (sim,) = simulate([RunSpec(scheduler, SEED, "adcs")], federated(clients), config, model=model)
    flower_selected = np.stack([r.selected for r in strategy.history])
    np.testing.assert_array_equal(flower_selected, sim.selected)
    assert strategy.history[0].probed.size == len(clients)  # the refresh rounds probed updates
    final: Any = result.arrays["params"].numpy()
    np.testing.assert_allclose(final, sim.final_params, rtol=1e-4, atol=1e-6)
    assert not np.allclose(final, model.init_params(1)[0])
