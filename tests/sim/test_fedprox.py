"""FedProx's proximal term μ in local training (``SimConfig.prox_mu``, Li et al. 2020).

Flower's FedProx client adds (μ/2)‖w − w⁽ᵗ⁾‖² to its loss and lets autograd differentiate it;
adcs adds its gradient μ(w − w⁽ᵗ⁾) = μ Δ to each local step's (:func:`adcs.sim.model.local_update`).
The term's gradient is 0 at w⁽ᵗ⁾, so only E > 1 local steps can show it: the tests use E = 4.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from adcs.schedulers import Uniform
from adcs.sim import FederatedData, RunSpec, SimConfig, simulate
from adcs.sim import context as sim_context
from adcs.sim.model import local_update

U = 2.0**-24  # float32's unit roundoff
STEPS, BATCH, LR, MU = 4, 4, 0.25, 0.5


class Quadratic:
    """ℓ_b(w) = ½‖w − mean of batch b‖²: gradient w − x̄_b. With the values below (multiples of
    1/8, batches of 4, η = 1/4, μ = 1/2) every float32 operation of E = 4 steps is exact."""

    dim = 6

    def loss_and_grad(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> Any:
        grad = params - x.mean(axis=1)
        return 0.5 * (grad**2).sum(axis=1), grad


def dyadic(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.integers(-16, 17, shape) / 8).astype(np.float32)


def test_the_local_steps_follow_the_proximal_recurrence_exactly() -> None:
    rng = np.random.default_rng(0)
    start = dyadic(rng, (3, Quadratic.dim))
    x = dyadic(rng, (3, STEPS, BATCH, Quadratic.dim))
    y = np.zeros((3, STEPS, BATCH), dtype=np.int64)
    update, _ = local_update(Quadratic(), start, x, y, LR, prox_mu=MU)
    w = start.astype(
        np.float64
    )  # the direct computation, in double: w ← w − η(∇ℓ_b(w) + μ(w − w⁽ᵗ⁾))
    for e in range(STEPS):
        w = w - LR * ((w - x[:, e].mean(axis=1)) + MU * (w - start))
    np.testing.assert_array_equal(update, w - start)
    plain, _ = local_update(Quadratic(), start, x, y, LR)
    assert np.abs(update - plain).min() > 0  # every coordinate feels the term


def test_one_local_step_is_the_same_whatever_mu() -> None:
    rng = np.random.default_rng(1)
    start = rng.normal(size=(2, Quadratic.dim)).astype(np.float32)
    x = rng.normal(size=(2, 1, BATCH, Quadratic.dim)).astype(np.float32)
    y = np.zeros((2, 1, BATCH), dtype=np.int64)
    with_mu = local_update(Quadratic(), start, x, y, 0.1, prox_mu=10.0)
    without = local_update(Quadratic(), start, x, y, 0.1)
    np.testing.assert_array_equal(with_mu[0], without[0])
    np.testing.assert_array_equal(with_mu[1], without[1])


def test_a_torch_model_follows_flowers_fedprox_client_on_the_same_batches() -> None:
    """Flower's recipe (``examples/quickstart-fedprox``: ``loss = criterion(net(x), y) +
    (μ/2) Σ ‖w − w_global‖²``, backward, SGD) in double, against adcs's float32 steps.

    The module is linear with the NLL loss, so the loss gradient −(1/B) Σ_b x̃_b e_{y_b}ᵀ does not
    depend on w and its entries are bounded by G = (1/B) Σ_b |x̃_b|. One float32 step
    Δ ← Δ − η(g + μΔ) rounds the B-term sum of g (B u η G), μΔ, the sum and the product
    (u η (G + μ|Δ|) each) and the update (u |Δ_new|); an earlier error is carried with the factor
    1 − ημ ∈ (0, 1). Summed over the steps, with the double computation's own error far smaller:
    |Δ_adcs − Δ_flower| ≤ 2 u Σ_e [(B + 2) η G + 2 η μ |Δ_e| + |Δ_{e+1}|].
    """
    torch = pytest.importorskip("torch", reason="needs the extra adcs[torch]")
    from adcs.sim.torch import TorchModel

    n_features, n_classes = 5, 3
    model = TorchModel(lambda: torch.nn.Linear(n_features, n_classes), loss="nll")
    rng = np.random.default_rng(2)
    start = rng.normal(0, 0.5, (2, model.dim)).astype(np.float32)
    x = rng.random((2, STEPS, BATCH, n_features), dtype=np.float32)
    y = rng.integers(0, n_classes, (2, STEPS, BATCH))
    update, _ = local_update(model, start, x, y, LR, prox_mu=MU)
    for j in range(2):
        net = torch.nn.Linear(n_features, n_classes).double()
        torch.nn.utils.vector_to_parameters(torch.from_numpy(start[j]).double(), net.parameters())
        global_params = [p.detach().clone() for p in net.parameters()]
        optimizer = torch.optim.SGD(net.parameters(), lr=LR)
        path = [np.zeros(model.dim)]
        for e in range(STEPS):
            optimizer.zero_grad()
            proximal_term = 0.0
            for local_weights, global_weights in zip(net.parameters(), global_params, strict=True):
                proximal_term += (local_weights - global_weights).norm(2) ** 2
            inputs = torch.from_numpy(x[j, e]).double()
            loss = torch.nn.functional.nll_loss(net(inputs), torch.from_numpy(y[j, e]))
            (loss + (MU / 2) * proximal_term).backward()
            optimizer.step()
            flat = torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()
            path.append(flat - start[j])
        expected = path[-1]
        x_tilde = np.concatenate([np.abs(x[j]), np.ones((STEPS, BATCH, 1))], axis=2)
        g = x_tilde.mean(axis=1)  # (E, F + 1): G of each step, per input feature (and bias)
        bound = sum(
            (BATCH + 2) * LR * _g_of(g[e], n_classes)
            + 2 * LR * MU * np.abs(path[e])
            + np.abs(path[e + 1])
            for e in range(STEPS)
        )
        np.testing.assert_array_less(np.abs(update[j] - expected), 2 * U * bound)
        plain, _ = local_update(model, start[j : j + 1], x[j : j + 1], y[j : j + 1], LR)
        assert np.abs(plain[0] - expected).max() > 1e3 * (2 * U * bound).max()


def _g_of(g: np.ndarray, n_classes: int) -> np.ndarray:
    """G per flat parameter of ``nn.Linear`` ([weight (C × F) row-major, bias (C)])."""
    return np.concatenate([np.tile(g[:-1], n_classes), np.full(n_classes, g[-1])])


def test_the_simulator_trains_with_mu_only_when_asked(
    data: FederatedData, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = SimConfig(rounds=6, batch_size=4, local_lr=0.5, eval_every=3, local_steps=3)
    runs = [RunSpec(Uniform(m=3), 0, "uniform/0")]
    seen: list[float] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[5] if len(args) > 5 else kwargs.get("prox_mu", 0.0))
        return local_update(*args, **kwargs)

    monkeypatch.setattr(sim_context, "local_update", spy)
    prox = simulate(runs, data, replace(config, prox_mu=0.1))
    assert seen and set(seen) == {0.1}
    plain = simulate(runs, data, config)
    assert not np.array_equal(prox[0].final_params, plain[0].final_params)
    # one local step (the shared product, no local_update at all): μ changes nothing
    one = replace(config, local_steps=1)
    assert np.array_equal(
        simulate(runs, data, replace(one, prox_mu=0.1))[0].final_params,
        simulate(runs, data, one)[0].final_params,
    )
