"""Counter-based dropout ([model] dropout) and weight decay in local SGD ([sim] weight_decay).

A mask entry is a pure function of (stream key, client, round, local step, sample, unit), kept
with probability 1 − p; a model with dropout trains on the vmap path, evaluates and probes
without dropout, and its gradients equal autograd's through the same mask; weight decay adds
λ w to every step's gradient as torch.optim.SGD does."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

import torch
from torch.nn import functional as F

from adcs.experiments.config import ConfigError, config_from_dict, config_to_dict
from adcs.schedulers import PowerOfChoice, Uniform
from adcs.sim import FederatedData, LogisticRegression, RunSpec, SimConfig, local_update, simulate
from adcs.sim.context import _context
from adcs.sim.torch import DropoutSequential, TorchModel, mlp, model_for
from adcs.streams import dropout_keep, stream_key

from .conftest import N_CLASSES, N_FEATURES, make_data
from .test_torch import jobs

EPS32 = float(np.finfo(np.float32).eps)
HIDDEN = (6, 5)
P = 0.5


def dropout_mlp(p: float = P) -> TorchModel:
    return model_for("mlp", (N_FEATURES,), N_CLASSES, hidden=HIDDEN, dropout=p)


def within_binomial(count: int, n: int, q: float) -> bool:
    """count within 6 standard deviations of Binomial(n, q)'s mean (fails with prob. < 2e-9)."""
    return abs(count - n * q) <= 6 * math.sqrt(n * q * (1 - q))


# ------------------------------------------------------------------ the masks


def test_a_clients_masks_do_not_depend_on_who_else_is_asked() -> None:
    key = stream_key(4)
    alone = dropout_keep(key, 7, [5], 2, 8, 0, 30, P)[0]
    crowd = dropout_keep(key, 7, [9, 5, 0, 5, 3], 2, 8, 0, 30, P)
    assert alone.shape == (8, 30)
    np.testing.assert_array_equal(crowd[1], alone)
    np.testing.assert_array_equal(crowd[3], alone)  # a repeat gets the same mask
    # every counter changes the mask: round, step, layer, client, key
    for other in (
        dropout_keep(key, 8, [5], 2, 8, 0, 30, P)[0],
        dropout_keep(key, 7, [5], 3, 8, 0, 30, P)[0],
        dropout_keep(key, 7, [5], 2, 8, 1, 30, P)[0],
        dropout_keep(key, 7, [4], 2, 8, 0, 30, P)[0],
        dropout_keep(stream_key(5), 7, [5], 2, 8, 0, 30, P)[0],
    ):
        assert not np.array_equal(other, alone)
    # a sample's mask is the same in a smaller batch (its row counter is its index alone)
    np.testing.assert_array_equal(dropout_keep(key, 7, [5], 2, 3, 0, 30, P)[0], alone[:3])


@pytest.mark.parametrize("p", [0.5, 0.2, 0.9])
def test_the_keep_fraction_is_one_minus_p(p: float) -> None:
    key = stream_key(1)
    clients = np.arange(40)
    first = dropout_keep(key, 3, clients, 0, 32, 0, 30, p)
    n = first.size
    assert within_binomial(int(first.sum()), n, 1 - p)
    # two steps' masks agree as independent draws would: p² + (1 − p)²
    second = dropout_keep(key, 3, clients, 1, 32, 0, 30, p)
    agree = p * p + (1 - p) * (1 - p)
    assert within_binomial(int((first == second).sum()), n, agree)
    # and neighbouring units of one sample likewise
    assert within_binomial(int((first[..., 1:] == first[..., :-1]).sum()), n * 29 // 30, agree)


def test_bad_mask_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="p must be"):
        dropout_keep(0, 0, [0], 0, 4, 0, 3, 1.0)
    with pytest.raises(ValueError, match="clients"):
        dropout_keep(0, 0, [-1], 0, 4, 0, 3, 0.5)


class MaskRecorder:
    """A TorchModel whose loss_and_grad notes each job's minibatch with the masks it got."""

    def __init__(self, model: TorchModel) -> None:
        self.model = model
        self.seen: dict[bytes, bytes] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def loss_and_grad(self, params: Any, x: Any, y: Any, masks: Any = None) -> Any:
        if masks is not None:
            for j in range(x.shape[0]):
                self.seen[np.asarray(x[j]).tobytes()] = b"".join(m[j].tobytes() for m in masks)
        return self.model.loss_and_grad(params, x, y, masks=masks)


def test_the_engine_hands_a_run_the_same_masks_alone_and_beside_others() -> None:
    data = make_data(seed=2, n_clients=12, clients_per_group=3)
    config = SimConfig(rounds=4, local_steps=3, batch_size=4, local_lr=0.2, eval_every=2)
    alone = MaskRecorder(dropout_mlp())
    simulate([RunSpec(Uniform(m=3), 0, "u")], data, config, model=alone)  # type: ignore[arg-type]
    crowd = MaskRecorder(dropout_mlp())
    runs = [
        RunSpec(PowerOfChoice(m=4, candidates=8), 0, "pow"),
        RunSpec(Uniform(m=3), 0, "u"),
        RunSpec(Uniform(m=5), 0, "u5"),
    ]
    simulate(runs, data, config, model=crowd, workers=2)  # type: ignore[arg-type]
    common = alone.seen.keys() & crowd.seen.keys()
    assert len(common) == len(alone.seen) == 4 * 3 * 3  # every job of the run, every step
    assert all(alone.seen[k] == crowd.seen[k] for k in common)
    assert len(set(alone.seen.values())) == len(alone.seen)  # no two jobs share a mask


# ------------------------------------------------------------------ the model


def test_dropout_falls_back_to_the_vmap_path_and_refuses_the_shared_one() -> None:
    plain = model_for("mlp", (N_FEATURES,), N_CLASSES, hidden=HIDDEN)
    dropping = dropout_mlp()
    assert type(plain._template) is torch.nn.Sequential and plain.path == "shared"
    assert isinstance(dropping._template, DropoutSequential) and dropping.path == "vmap"
    assert (dropping.dropout, dropping.dropout_widths) == (P, (HIDDEN[-1],))
    assert (plain.dropout, plain.dropout_widths) == (0.0, ())
    assert dropping.dim == plain.dim
    with pytest.raises(ValueError, match="path 'shared' cannot run"):
        model_for("mlp", (N_FEATURES,), N_CLASSES, hidden=HIDDEN, dropout=P, path="shared")


def test_evaluation_and_probes_run_without_dropout() -> None:
    """Like PyTorch's eval() mode, and like the authors' candidate losses (model.eval())."""
    dropping = dropout_mlp()
    plain = model_for("mlp", (N_FEATURES,), N_CLASSES, hidden=HIDDEN, path="vmap")
    params, x, y = jobs(dropping, n_jobs=4, steps=1, batch=5, shape=(N_FEATURES,))
    x, y = x[:, 0], y[:, 0]
    np.testing.assert_array_equal(dropping.init_params(1), plain.init_params(1))
    for got, expected in zip(
        dropping.evaluate(params[:1], x[0], y[0]),
        plain.evaluate(params[:1], x[0], y[0]),
        strict=True,
    ):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(
        dropping.minibatch_loss(params, x, y), plain.minibatch_loss(params, x, y)
    )
    keep = dropout_keep(0, 0, np.arange(4), 0, 5, 0, HIDDEN[-1], P)
    trained = dropping.loss_and_grad(params, x, y, masks=[keep])[1]
    assert not np.allclose(trained, dropping.loss_and_grad(params, x, y)[1])


def reference_grad(
    flat: np.ndarray, x: np.ndarray, y: np.ndarray, keep: np.ndarray, p: float
) -> tuple[float, np.ndarray]:
    """One job's loss and gradient by autograd, written from scratch (no module)."""
    w = torch.tensor(flat, requires_grad=True)
    shapes = [(HIDDEN[0], N_FEATURES), (HIDDEN[0],), (HIDDEN[1], HIDDEN[0]), (HIDDEN[1],)]
    shapes += [(N_CLASSES, HIDDEN[1]), (N_CLASSES,)]
    pieces = torch.split(w, [math.prod(s) for s in shapes])
    w1, b1, w2, b2, w3, b3 = (t.view(s) for t, s in zip(pieces, shapes, strict=True))
    h = torch.relu(torch.from_numpy(x) @ w1.T + b1)
    h = torch.relu(h @ w2.T + b2)
    h = h * (torch.from_numpy(keep).float() / (1 - p))
    loss = F.cross_entropy(h @ w3.T + b3, torch.from_numpy(y))
    (g,) = torch.autograd.grad(loss, [w])
    return loss.item(), g.numpy()


def test_gradients_with_a_fixed_mask_equal_autograd() -> None:
    model = dropout_mlp()
    n_jobs, batch = 7, 6
    params, x, y = jobs(model, n_jobs=n_jobs, steps=1, batch=batch, shape=(N_FEATURES,), seed=3)
    x, y = x[:, 0], y[:, 0]
    keep = dropout_keep(stream_key(2), 1, np.arange(n_jobs), 0, batch, 0, HIDDEN[-1], P)
    loss, grad = model.loss_and_grad(params, x, y, masks=[keep])
    expected = [reference_grad(params[j], x[j], y[j], keep[j], P) for j in range(n_jobs)]
    ref_loss = np.array([e[0] for e in expected], dtype=np.float32)
    ref_grad = np.stack([e[1] for e in expected])
    # the longest float32 sum: the batch, or a layer's fan-in or fan-out
    n = max(batch, N_FEATURES, *HIDDEN, N_CLASSES)
    np.testing.assert_allclose(grad, ref_grad, rtol=0, atol=n * EPS32 * np.abs(ref_grad).max())
    np.testing.assert_allclose(loss, ref_loss, rtol=0, atol=n * EPS32 * np.abs(ref_loss).max())
    # in chunks of one job (each call its own vmap) the same numbers
    chunked = TorchModel(
        functools.partial(mlp, N_FEATURES, N_CLASSES, HIDDEN, None, P),
        input_shape=(N_FEATURES,),
        n_classes=N_CLASSES,
        samples_per_call=batch,
    )
    np.testing.assert_allclose(
        chunked.loss_and_grad(params, x, y, masks=[keep])[1], grad, rtol=0, atol=n * EPS32
    )


def test_masks_of_the_wrong_shape_are_refused() -> None:
    model = dropout_mlp()
    params, x, y = jobs(model, n_jobs=2, steps=1, batch=3, shape=(N_FEATURES,))
    with pytest.raises(ValueError, match="shape"):
        model.loss_and_grad(params, x[:, 0], y[:, 0], masks=[np.ones((2, 3, 4), dtype=bool)])
    with pytest.raises(ValueError, match="one array per dropout layer"):
        model.loss_and_grad(params, x[:, 0], y[:, 0], masks=[])


# ------------------------------------------------------------------ weight decay


def test_one_step_of_weight_decay_is_the_formula() -> None:
    model = LogisticRegression(N_FEATURES, N_CLASSES)
    rng = np.random.default_rng(0)
    params = rng.normal(0, 0.3, (3, model.dim)).astype(np.float32)
    x = rng.random((3, 1, 5, N_FEATURES), dtype=np.float32)
    y = rng.integers(0, N_CLASSES, (3, 1, 5))
    lr, lam = 0.1, 0.01
    update, _ = local_update(model, params, x, y, lr, weight_decay=lam)
    _, grad = model.loss_and_grad(params, x[:, 0], y[:, 0])
    expected = -lr * (grad.astype(np.float64) + lam * params.astype(np.float64))
    # three float32 roundings (λw, the sum, the product by η) of terms of this magnitude
    scale = lr * (np.abs(grad) + lam * np.abs(params)).max()
    np.testing.assert_allclose(update, expected, rtol=0, atol=3 * EPS32 * scale)
    plain, _ = local_update(model, params, x, y, lr)
    assert np.abs(update - plain).max() > 100 * EPS32 * scale  # the decay is there


def test_local_sgd_with_dropout_and_weight_decay_equals_torch_sgd() -> None:
    """E steps of local_update against torch.optim.SGD(weight_decay=λ) on the module, client
    by client, with the same masks handed to its forward pass."""
    model = dropout_mlp()
    n_jobs, steps, batch, lr, lam = 4, 3, 5, 0.2, 0.05
    params, x, y = jobs(model, n_jobs=n_jobs, steps=steps, batch=batch, shape=(N_FEATURES,))
    clients = np.array([3, 0, 7, 3])

    def masks(step: int) -> tuple[np.ndarray, ...]:
        return (dropout_keep(9, 2, clients, step, batch, 0, HIDDEN[-1], P),)

    update, first = local_update(model, params, x, y, lr, weight_decay=lam, masks=masks)
    expected, expected_first = [], []
    for j in range(n_jobs):
        module = mlp(N_FEATURES, N_CLASSES, HIDDEN, None, P)
        start = torch.from_numpy(params[j].copy())
        torch.nn.utils.vector_to_parameters(start.clone(), module.parameters())
        optimiser = torch.optim.SGD(module.parameters(), lr=lr, weight_decay=lam)
        for e in range(steps):
            optimiser.zero_grad()
            keep = torch.from_numpy(masks(e)[0][j]).float() / (1 - P)
            out = module(torch.from_numpy(x[j, e]), [keep])
            loss = F.cross_entropy(out, torch.from_numpy(y[j, e]))
            loss.backward()
            optimiser.step()
            if e == 0:
                expected_first.append(loss.item())
        delta = torch.nn.utils.parameters_to_vector(module.parameters()) - start
        expected.append(delta.detach().numpy())
    ref = np.stack(expected)
    # each step's longest sum, over the steps, of terms the size of the largest update
    n = steps * max(batch, N_FEATURES, *HIDDEN, N_CLASSES)
    scale = np.abs(ref).max() + lr * lam * np.abs(params).max()
    np.testing.assert_allclose(update, ref, rtol=0, atol=n * EPS32 * scale)
    np.testing.assert_allclose(first, expected_first, rtol=n * EPS32)


def test_weight_decay_leaves_the_shared_products_to_local_training() -> None:
    """The shared-inputs products give −η∇ℓ alone: with weight decay the engine trains every
    client by local_update, as for a model without the capability."""

    class Plain:  # the Model protocol without SharedInputs
        def __init__(self) -> None:
            self.inner = LogisticRegression(N_FEATURES, N_CLASSES)
            self.dim = self.inner.dim

        def __getattr__(self, name: str) -> Any:
            if name in ("shared_forward", "block_grads", "weighted_grads"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    data: FederatedData = make_data(seed=1)
    config = SimConfig(rounds=3, batch_size=4, local_lr=0.3, eval_every=1, weight_decay=0.1)
    assert _context(data, config, LogisticRegression(N_FEATURES, N_CLASSES)).shared is None
    no_decay = SimConfig(rounds=3, batch_size=4, local_lr=0.3, eval_every=1)
    assert _context(data, no_decay, LogisticRegression(N_FEATURES, N_CLASSES)).shared is not None
    runs = [RunSpec(Uniform(m=3), 0, "u"), RunSpec(PowerOfChoice(m=3, candidates=6), 0, "p")]
    (a, b) = simulate(runs, data, config)
    (c, d) = simulate(runs, data, config, model=Plain())  # type: ignore[arg-type]
    for got, expected in ((a, c), (b, d)):
        np.testing.assert_array_equal(got.selected, expected.selected)
        np.testing.assert_array_equal(got.test_loss, expected.test_loss)
    (e, _) = simulate(runs, data, no_decay)
    assert not np.array_equal(a.test_loss, e.test_loss)


# ------------------------------------------------------------------ configuration


def test_the_configuration_keys() -> None:
    base: dict[str, Any] = {
        "name": "t", "m": 2, "seeds": [0], "methods": [{"name": "uniform"}],
        "data": {"partition": "paper_groups", "n_groups": 2, "clients_per_group": 2},
    }  # fmt: skip
    config = config_from_dict(
        {**base, "model": {"kind": "mlp", "dropout": 0.5}, "sim": {"weight_decay": 1e-4}}
    )
    doc = config_to_dict(config)
    assert doc["model"]["dropout"] == 0.5 and doc["sim"]["weight_decay"] == 1e-4
    assert config.sim.weight_decay == 1e-4
    # unset, neither is written (the manifests of earlier versions)
    plain = config_to_dict(config_from_dict({**base, "model": {"kind": "mlp"}}))
    assert "dropout" not in plain["model"] and "weight_decay" not in plain.get("sim", {})
    for table, message in (
        ({"model": {"kind": "mlp", "dropout": 1.0}}, r"model\.dropout"),
        ({"model": {"kind": "mlp", "dropout": -0.1}}, r"model\.dropout"),
        ({"model": {"kind": "mlp", "dropout": 0.5, "hidden": []}}, r"model\.dropout"),
        ({"model": {"kind": "mlp", "dropout": 0.5, "torch_path": "shared"}}, r"model\.dropout"),
        ({"model": {"kind": "cnn", "dropout": 0.5}}, r"model\.dropout"),
        ({"sim": {"weight_decay": -1e-4}}, r"sim\.weight_decay"),
        ({"sim": {"weight_decay": "a"}}, r"sim\.weight_decay"),
    ):
        with pytest.raises(ConfigError, match=message) as err:
            config_from_dict({**base, **table})
        assert "\n" not in str(err.value)
