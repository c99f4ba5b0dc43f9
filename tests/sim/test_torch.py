"""PyTorch models behind the flat-parameter protocol: per-client updates equal torch.optim.SGD,
the engine probes the model at w⁽ᵗ⁾, and impure modules are refused with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from adcs.schedulers import ClientStats, Probe, ProbeKind, Selection, Uniform
from adcs.sim import FederatedData, LogisticRegression, RunSpec, SimConfig, local_update, simulate
from adcs.sim.torch import TorchModel, lenet5, load_factory, logistic, model_for
from adcs.streams import minibatch_indices, stream_key

from .conftest import N_CLASSES, N_FEATURES, as_images, make_data


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(N_FEATURES, 16), nn.Tanh(), nn.Linear(16, N_CLASSES))


def small_cnn() -> nn.Module:
    """A conv net on 4×4×1 inputs (the synthetic data has 12 features: padded here to 16)."""
    return nn.Sequential(
        nn.Unflatten(1, (1, 4, 4)),
        nn.Conv2d(1, 3, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(12, N_CLASSES),
    )


def sgd_updates(
    factory: Any, params: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Client by client, the way FL code usually does it: a module per client, torch.optim.SGD.

    x (J, E, B, ...), y (J, E, B); returns the updates (J, dim) and the first losses (J,).
    """
    updates, losses = [], []
    for j in range(params.shape[0]):
        module = factory()
        start = torch.from_numpy(params[j].copy())
        vector_to_parameters(start.clone(), module.parameters())
        optimiser = torch.optim.SGD(module.parameters(), lr=lr)
        for e in range(steps):
            optimiser.zero_grad()
            loss = F.cross_entropy(module(torch.from_numpy(x[j, e])), torch.from_numpy(y[j, e]))
            loss.backward()
            optimiser.step()
            if e == 0:
                losses.append(loss.item())
        updates.append((parameters_to_vector(module.parameters()) - start).detach().numpy())
    return np.stack(updates), np.asarray(losses, dtype=np.float32)


def jobs(
    model: TorchModel, n_jobs: int, steps: int, batch: int, shape: tuple[int, ...], seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random jobs: params (J, dim) in runs of two identical rows, x (J, E, B, *shape), y."""
    rng = np.random.default_rng(seed)
    base = model.init_params(n_jobs)
    noise = rng.normal(0, 0.05, size=((n_jobs + 1) // 2, model.dim)).astype(np.float32)
    params = base + np.repeat(noise, 2, axis=0)[:n_jobs]  # rows 0,1 equal; 2,3 equal; …
    x = rng.random((n_jobs, steps, batch, *shape), dtype=np.float32)
    y = rng.integers(0, N_CLASSES, size=(n_jobs, steps, batch))
    return params, x, y


# ------------------------------------------------------------------ the model protocol


def test_lenet5_is_the_issue_network() -> None:
    model = TorchModel(lenet5, input_shape=(784,), n_classes=10)
    assert model.dim == 61_706
    shapes = [p.shape for p in lenet5().parameters()]
    assert shapes == [
        (6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (120, 400), (120,), (84, 120), (84,),
        (10, 84), (10,),
    ]  # fmt: skip
    flat = np.zeros((2, 784), dtype=np.float32)
    image = np.zeros((2, 28, 28, 1), dtype=np.float32)
    assert model.evaluate(model.init_params(1), flat, np.zeros(2, np.int64))[0].shape == (1, 2)
    TorchModel(lenet5, input_shape=(28, 28, 1), n_classes=10).evaluate(
        model.init_params(1), image, np.zeros(2, np.int64)
    )


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("factory", [mlp, small_cnn], ids=["mlp", "cnn"])
def test_vmap_updates_equal_a_per_client_sgd_loop(factory: Any, steps: int) -> None:
    shape = (16,) if factory is small_cnn else (N_FEATURES,)
    model = TorchModel(factory, input_shape=shape, n_classes=N_CLASSES)
    params, x, y = jobs(model, n_jobs=7, steps=steps, batch=5, shape=shape)
    update, first_loss = local_update(model, params, x, y, local_lr=0.2)
    expected, expected_loss = sgd_updates(factory, params, x, y, lr=0.2, steps=steps)
    assert update.dtype == np.float32 and update.shape == (7, model.dim)
    np.testing.assert_allclose(update, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(first_loss, expected_loss, rtol=1e-5)


def test_lenet5_updates_equal_a_per_client_sgd_loop() -> None:
    model = TorchModel(lenet5, input_shape=(784,), n_classes=10)
    params, x, y = jobs(model, n_jobs=4, steps=1, batch=3, shape=(784,))
    y = y % 10
    update, _ = local_update(model, params, x, y, local_lr=0.1)
    expected, _ = sgd_updates(lenet5, params, x, y, lr=0.1, steps=1)
    np.testing.assert_allclose(update, expected, rtol=1e-4, atol=1e-6)


def test_chunks_shared_and_distinct_parameters_give_the_same_numbers() -> None:
    wide = TorchModel(mlp, input_shape=(N_FEATURES,))
    narrow = TorchModel(mlp, samples_per_call=10)  # two jobs of 5 samples per mapped call
    params, x, y = jobs(wide, n_jobs=9, steps=1, batch=5, shape=(N_FEATURES,))
    loss, grad = wide.loss_and_grad(params, x[:, 0], y[:, 0])
    loss2, grad2 = narrow.loss_and_grad(params, x[:, 0], y[:, 0])
    shuffled = np.random.default_rng(1).permutation(9)  # no two neighbours share parameters
    loss3, grad3 = wide.loss_and_grad(params[shuffled], x[shuffled, 0], y[shuffled, 0])
    np.testing.assert_allclose(grad2, grad, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grad3, grad[shuffled], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss3, loss[shuffled], rtol=1e-6)
    assert np.isfinite(loss2).all() and np.all(loss2 == loss)
    one_run = np.repeat(params[:1], 9, axis=0)  # one mapped call, and in chunks of two jobs
    loss4, grad4 = wide.loss_and_grad(one_run, x[:, 0], y[:, 0])
    loss5, grad5 = narrow.loss_and_grad(one_run, x[:, 0], y[:, 0])
    np.testing.assert_allclose(grad4[:2], grad[:2], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grad5, grad4, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss5, loss4, rtol=1e-6)


def test_evaluate_gives_per_sample_loss_and_argmax_correctness() -> None:
    model = TorchModel(mlp, input_shape=(N_FEATURES,), samples_per_call=7)
    params, x, _ = jobs(model, n_jobs=3, steps=1, batch=20, shape=(N_FEATURES,))
    samples = x[0, 0]
    labels = np.arange(20) % N_CLASSES
    loss, correct = model.evaluate(params, samples, labels)
    assert loss.shape == correct.shape == (3, 20) and correct.dtype == np.bool_
    for r in range(3):
        module = mlp()
        vector_to_parameters(torch.from_numpy(params[r].copy()), module.parameters())
        with torch.no_grad():
            out = module(torch.from_numpy(samples))
        expected = F.cross_entropy(out, torch.from_numpy(labels), reduction="none").numpy()
        np.testing.assert_allclose(loss[r], expected, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(correct[r], out.argmax(1).numpy() == labels)


def test_logistic_module_is_the_numpy_model_in_another_layout() -> None:
    torch_model = TorchModel(lambda: logistic(N_FEATURES, N_CLASSES))
    numpy_model = LogisticRegression(N_FEATURES, N_CLASSES)
    rng = np.random.default_rng(3)
    w = rng.normal(0, 0.3, size=(2, N_FEATURES + 1, N_CLASSES)).astype(np.float32)
    as_torch = np.concatenate([w[:, :-1].transpose(0, 2, 1).reshape(2, -1), w[:, -1]], axis=1)
    x = rng.random((2, 6, N_FEATURES), dtype=np.float32)
    y = rng.integers(0, N_CLASSES, size=(2, 6))
    loss_t, grad_t = torch_model.loss_and_grad(as_torch, x, y)
    loss_n, grad_n = numpy_model.loss_and_grad(w.reshape(2, -1), x, y)
    g = grad_n.reshape(2, N_FEATURES + 1, N_CLASSES)
    expected = np.concatenate([g[:, :-1].transpose(0, 2, 1).reshape(2, -1), g[:, -1]], axis=1)
    np.testing.assert_allclose(loss_t, loss_n, rtol=1e-5)
    np.testing.assert_allclose(grad_t, expected, rtol=1e-4, atol=1e-6)
    assert np.all(torch_model.init_params(3) == 0)


def test_initialisation_is_seeded_and_leaves_the_global_generator_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = TorchModel(mlp).init_params(2)
    assert torch.equal(torch.rand(1), expected_next)
    b = TorchModel(mlp).init_params(1)
    c = TorchModel(mlp, init_seed=1).init_params(1)
    assert a.dtype == np.float32 and a.shape == (2, TorchModel(mlp).dim)
    np.testing.assert_array_equal(a[0], a[1])
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(b, c)


def test_threads_use_their_own_module_copy() -> None:
    model = TorchModel(mlp, input_shape=(N_FEATURES,))
    params, x, y = jobs(model, n_jobs=6, steps=1, batch=5, shape=(N_FEATURES,))
    expected = model.loss_and_grad(params, x[:, 0], y[:, 0])[1]
    results: list[np.ndarray] = []

    def work() -> None:
        for _ in range(20):
            results.append(model.loss_and_grad(params, x[:, 0], y[:, 0])[1])

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 60
    for grad in results:
        np.testing.assert_array_equal(grad, expected)


def test_frozen_parameters_and_constant_buffers_are_constants() -> None:
    def factory() -> nn.Module:
        module = nn.Sequential(nn.Linear(N_FEATURES, 8), nn.BatchNorm1d(8), nn.Linear(8, 4))
        module[0].weight.requires_grad_(False)
        return module.eval()  # BatchNorm with fixed statistics is a pure function

    model = TorchModel(factory, input_shape=(N_FEATURES,), n_classes=N_CLASSES)
    assert model.dim == 8 + 2 * 8 + 8 * 4 + 4  # bias of layer 0, BatchNorm affine, layer 2
    params, x, y = jobs(model, n_jobs=2, steps=1, batch=5, shape=(N_FEATURES,))
    _, grad = model.loss_and_grad(params, x[:, 0], y[:, 0])
    assert np.isfinite(grad).all() and np.abs(grad).sum() > 0


# ------------------------------------------------------------------ refusals


class Scaled(nn.Module):
    """A linear layer whose logits are multiplied by ``scale`` and cast to ``dtype``."""

    def __init__(self, scale: float = 1.0, dtype: Any = None) -> None:
        super().__init__()
        self.linear = nn.Linear(N_FEATURES, N_CLASSES)
        self.scale, self.dtype = scale, dtype

    def forward(self, x: Any) -> Any:
        out = self.linear(x) * self.scale
        return out if self.dtype is None else out.to(self.dtype)


def _needs_an_argument(width: int) -> nn.Module:
    return nn.Linear(N_FEATURES, width)


class Counter(nn.Module):
    """Counts its calls in a buffer: state that changes in a forward pass."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(N_FEATURES, N_CLASSES)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: Any) -> Any:
        self.calls += 1
        return self.linear(x)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            lambda: nn.Sequential(nn.Linear(N_FEATURES, 8), nn.BatchNorm1d(8)),
            "GroupNorm or LayerNorm",
        ),
        (lambda: nn.Sequential(nn.Linear(N_FEATURES, 8), nn.Dropout(0.5)), "call .eval()"),
        (Counter, "change in a forward pass"),
        (lambda: nn.Linear(N_FEATURES, 3), "expected (batch, 4)"),
        (lambda: nn.Sequential(nn.Linear(N_FEATURES, 4), nn.Flatten(0)), "expected (batch, 4)"),
        (lambda: nn.Linear(5, 4), "cannot take inputs of shape (batch, 12)"),
        (lambda: "not a module", "must return a torch.nn.Module"),
        (lambda: nn.ReLU(), "no trainable parameters"),
        # were: a traceback; a run that trained NaN silently; a message blaming vmap
        (_needs_an_argument, "module_factory() failed: TypeError: _needs_an_argument()"),
        (lambda: Scaled(float("inf")), "output on a batch of 2 inputs is NaN or infinite"),
        (lambda: Scaled(dtype=torch.int64), "output is torch.int64; expected floating-point"),
    ],
    ids=[
        "batchnorm",
        "dropout",
        "buffer",
        "classes",
        "batch",
        "input",
        "type",
        "no-params",
        "factory-raises",
        "non-finite",
        "integer",
    ],
)
def test_impure_or_misshapen_modules_are_refused(factory: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        TorchModel(factory, input_shape=(N_FEATURES,), n_classes=N_CLASSES)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_batchnorm_is_refused_even_without_a_shape_check() -> None:
    with pytest.raises(ValueError, match=r"BatchNorm2d at '1' is in training mode.*GroupNorm"):
        TorchModel(lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)))


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="loss must be one of"):
        TorchModel(mlp, loss="hinge")
    with pytest.raises(ValueError, match="samples_per_call"):
        TorchModel(mlp, samples_per_call=0)
    with pytest.raises(ValueError, match="device"):
        TorchModel(mlp, device="tpu-7")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            TorchModel(mlp, device="cuda")
    model = TorchModel(mlp)
    with pytest.raises(ValueError, match=r"params must have shape \(k, "):
        model.loss_and_grad(np.zeros((2, 3), np.float32), np.zeros((2, 1, 12)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="x must have shape"):
        model.loss_and_grad(model.init_params(2), np.zeros((3, 1, 12)), np.zeros((3, 1)))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "must look like 'package.module:function'"),
        ("adcs_no_such_module:make", "cannot import module 'adcs_no_such_module'"),
        ("adcs.sim.torch:no_such_factory", "has no attribute 'no_such_factory'"),
        ("adcs.sim.torch:LOSSES", "is not callable"),
    ],
)
def test_bad_factory_strings_are_explained(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        load_factory(spec)
    assert message in str(err.value)


def test_a_factory_is_found_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_nets.py").write_text(
        "from torch import nn\n\ndef tiny():\n    return nn.Linear(12, 4)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_nets", raising=False)
    model = model_for("torch", (N_FEATURES,), N_CLASSES, factory="my_nets:tiny")
    assert model.dim == 12 * 4 + 4
    with pytest.raises(ValueError, match="LeNet-5 for 28×28×1 inputs"):
        model_for("cnn", (N_FEATURES,), N_CLASSES)


# ------------------------------------------------------------------ in the engine


class RecordingProbe:
    """Probes updates (or minibatch losses) of every client, records them, selects the first m."""

    def __init__(self, m: int, kind: ProbeKind) -> None:
        self.m = m
        self.kind = kind
        self.seen: list[ClientStats] = []

    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(self.kind)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        self.seen.append(stats)
        return Selection(np.arange(self.m)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


def model_at(params: np.ndarray) -> nn.Module:
    module = mlp()
    vector_to_parameters(torch.from_numpy(params.copy()), module.parameters())
    return module


@pytest.mark.parametrize("kind", [ProbeKind.UPDATES, ProbeKind.LOSSES])
def test_engine_probes_are_the_models_at_the_current_parameters(
    data: FederatedData, kind: ProbeKind
) -> None:
    model = TorchModel(mlp, input_shape=data.input_shape, n_classes=data.n_classes)
    lr, batch, rounds = 0.3, 4, 3
    config = SimConfig(rounds=rounds, batch_size=batch, local_lr=lr)
    recorder = RecordingProbe(3, kind)
    simulate([RunSpec(recorder, 5, "probe")], data, config, model=model)
    clients = np.arange(data.n_clients)
    for t in range(rounds):
        # w⁽ᵗ⁾ of the same run (a run's first rounds do not depend on T)
        w = (
            model.init_params(1)[0]
            if t == 0
            else simulate(
                [RunSpec(RecordingProbe(3, kind), 5, "probe")],
                data,
                SimConfig(rounds=t, batch_size=batch, local_lr=lr),
                model=model,
            )[0].final_params
        )
        local = minibatch_indices(stream_key(5), clients, t, data.data_sizes, 1, batch)
        rows = data.train_rows(clients, local[:, 0])
        stats = recorder.seen[t]
        for c in clients:
            module = model_at(w)
            x = torch.from_numpy(data.gather_train(rows[c]))
            loss = F.cross_entropy(module(x), torch.from_numpy(data.train_labels[rows[c]]))
            loss.backward()
            assert stats.losses is not None
            assert stats.losses[c] == pytest.approx(loss.item(), rel=1e-5)
            if kind is ProbeKind.UPDATES:
                assert stats.updates is not None
                grad = torch.cat([p.grad.reshape(-1) for p in module.parameters()]).numpy()
                np.testing.assert_allclose(stats.updates[c], -lr * grad, rtol=1e-4, atol=1e-7)


FORKED_WORKERS = """
import numpy as np, torch
from torch import nn
from tests.sim.conftest import make_data
from adcs.schedulers import OCS
from adcs.sim import RunSpec, SimConfig, simulate
from adcs.sim.torch import TorchModel

data = make_data()
factory = lambda: nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 4))
model = TorchModel(factory, input_shape=(12,), n_classes=4)
torch.set_num_threads(2)
a = torch.rand(1024, 1024)
(a @ a).sum()  # the parent's MKL and OpenMP start their thread teams before the fork
config = SimConfig(rounds=3, batch_size=4, local_lr=0.3, eval_every=3)
specs = [RunSpec(OCS(m=3), s, f"r{s}") for s in range(2)]
one = simulate(specs, data, config, model=model, workers=1)
two = simulate(specs, data, config, model=model, workers=2)
same = all(
    np.array_equal(x.final_params, y.final_params) and np.array_equal(x.client_acc, y.client_acc)
    for x, y in zip(one, two)
)
print("same" if same else "different")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forked workers need os.fork")
def test_forked_workers_after_threaded_work_give_the_same_results() -> None:
    # in a child process, so that a deadlock fails the test instead of hanging the suite
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [sys.executable, "-c", FORKED_WORKERS],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "same"


def test_a_cnn_learns_in_the_simulator() -> None:
    data = make_data(seed=2, n_clients=6, clients_per_group=2, train_per_client=60)
    padded = as_images(data)
    model = TorchModel(small_cnn, input_shape=padded.input_shape, n_classes=N_CLASSES)
    config = SimConfig(rounds=60, batch_size=8, local_lr=0.5, eval_every=60)
    (result,) = simulate([RunSpec(Uniform(m=4), 0, "u")], padded, config, model=model)
    assert result.test_loss[-1] < 0.8 * result.test_loss[0]
    assert result.avg_acc[-1] > 0.5
