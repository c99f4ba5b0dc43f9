"""adcs's server optimizers against Flower's own: the same aggregates, the same arrays.

Flower's ``FedAvgM``, ``FedAdagrad``, ``FedAdam`` and ``FedYogi`` (``flwr.serverapp.strategy``)
are driven as their ``start`` loop drives them — ``configure_train`` with the current arrays,
then ``aggregate_train`` on the nodes' replies — with replies built here (each node returns the
arrays it was sent plus its own update, weighted by ``num-examples``). The aggregate Δ⁽ʳ⁾ each
round is the one Flower forms (its own weighted average, minus the arrays it sent); adcs's
optimizer (:mod:`adcs.optimizers`) gets that Δ⁽ʳ⁾ and its model must follow Flower's.

Tolerance, elementwise (u = 2⁻²⁴, float32's unit roundoff). Per round the optimizer rounds at
most 8 times from Δ to the step (Δ to float32, the moment's two products and sum, the square,
the root, τ, the quotient, the rate) and its state carries the earlier rounds' errors forward
with factors ≤ 1 (≤ 1/β₂ per round for Yogi's v: 1.08 over these 8 rounds), so to first order
the step of round r is within (8r + 8)·u·S_r of exact, where S_r = η_r M_r / (√v_r + τ) bounds it
with M_r the first moment of |Δ| (what cancellation in m cannot exceed); adding the step to the
model rounds once more, u·|w_r|. Flower computes the same expressions in float32 (FedAdam's
bias-corrected rate in float64, so it is at least as close to exact), hence

    |w_adcs − w_flower| ≤ 2 u Σ_r [(8r + 8) S_r + |w_r|].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import FedAdagrad, FedAdam, FedAvg, FedAvgM, FedYogi
from flwr.supercore.task_identity import TaskIdentity

from adcs import optimizers

ROUNDS = 8
NODES = (11, 12, 13)
SHAPES = {"w": (4, 5), "b": (5,)}  # a model of two arrays, flattened in this order by adcs
U = float(np.finfo(np.float32).eps) / 2

PAIRS: dict[str, Callable[[], tuple[Any, Any]]] = {  # fresh objects: Flower's hold state
    "fedavgm": lambda: (
        FedAvgM(server_learning_rate=0.7, server_momentum=0.9),
        optimizers.FedAvgM(eta=0.7, momentum=0.9),
    ),
    "fedadagrad": lambda: (FedAdagrad(eta=0.1, tau=1e-3), optimizers.FedAdagrad(eta=0.1, tau=1e-3)),
    "fedadam": lambda: (
        FedAdam(eta=0.1, beta_1=0.9, beta_2=0.99, tau=1e-3),
        optimizers.FedAdam(eta=0.1, beta_1=0.9, beta_2=0.99, tau=1e-3),
    ),
    "fedyogi": lambda: (
        FedYogi(eta=0.01, beta_1=0.9, beta_2=0.99, tau=1e-3),
        optimizers.FedYogi(eta=0.01, beta_1=0.9, beta_2=0.99, tau=1e-3),
    ),
}


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Flower's runtime sets before a ServerApp makes Messages."""
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


class _Grid:
    """What ``configure_train`` asks of a Grid: the connected nodes."""

    def get_node_ids(self) -> Iterable[int]:
        return list(NODES)


def _flat(arrays: ArrayRecord) -> np.ndarray:
    return np.concatenate([arrays[k].numpy().astype(np.float64).ravel() for k in SHAPES])


def _replies(sent: list[Message], arrays: ArrayRecord, rng: np.random.Generator) -> list[Message]:
    """Each node's reply: the arrays it was sent plus its own float32 update, and its weight."""
    out = []
    for i, message in enumerate(sent):
        message.metadata.__dict__["_message_id"] = f"m{i}"  # what the Grid's push sets
        trained = {
            k: Array(arrays[k].numpy() + rng.normal(0, 0.1, SHAPES[k]).astype(np.float32))
            for k in SHAPES
        }
        metrics = MetricRecord({"num-examples": int(rng.integers(5, 50))})
        content = RecordDict({"arrays": ArrayRecord(trained), "metrics": metrics})
        out.append(Message(content, reply_to=message))
    return out


def _bound_scale(name: str, opt: Any, state: Any, delta: np.ndarray, first: np.ndarray) -> Any:
    """S_r of the module docstring (and the first moment M_r of |Δ| it carries)."""
    if name == "fedavgm":
        moment = opt.momentum * first + np.abs(delta)
        return moment, opt.eta * moment
    moment = opt.beta_1 * first + (1 - opt.beta_1) * np.abs(delta)
    rate = float(opt._rate(state.rounds)[0, 0])
    return moment, rate * moment / (np.sqrt(state.v[0].astype(np.float64)) + opt.tau)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_arrays_follow_flowers_strategy_round_by_round(name: str) -> None:
    flower, ours = PAIRS[name]()
    rng = np.random.default_rng(7)
    start = {k: rng.normal(0, 1, shape).astype(np.float32) for k, shape in SHAPES.items()}
    arrays = ArrayRecord({k: Array(v) for k, v in start.items()})
    ours_params = _flat(arrays).astype(np.float32)[None]
    state = ours.init(ours_params)
    first = np.zeros(ours_params.shape[1])
    total = np.zeros(ours_params.shape[1])  # Σ_r [(8r + 8) S_r + |w_r|]
    for server_round in range(1, ROUNDS + 1):
        sent = list(flower.configure_train(server_round, arrays, ConfigRecord(), _Grid()))
        assert sorted(m.metadata.dst_node_id for m in sent) == list(NODES)
        replies = _replies(sent, arrays, rng)
        averaged, _ = FedAvg.aggregate_train(flower, server_round, replies)  # Flower's average
        assert averaged is not None
        delta = _flat(averaged) - _flat(arrays)  # Flower's Δ (float64 once FedAdam's are)
        arrays, _ = flower.aggregate_train(server_round, replies)
        step, state = ours.update(delta.astype(np.float32)[None], state)
        ours_params = ours_params + step
        first, scale = _bound_scale(name, ours, state, delta, first)
        total += (8 * server_round + 8) * scale + np.abs(ours_params[0])
        tolerance = 2 * U * total
        theirs = _flat(arrays)
        np.testing.assert_array_less(
            np.abs(ours_params[0] - theirs), tolerance, err_msg=f"round {server_round}"
        )
    # the optimizer moved the model far beyond the tolerance: the comparison says something
    moved = np.abs(theirs - _flat(ArrayRecord({k: Array(v) for k, v in start.items()})))
    assert np.median(moved) > 1e3 * tolerance.max()


def test_fedadam_without_bias_correction_is_not_flowers_so_the_check_sees_the_rate() -> None:
    flower, _ = PAIRS["fedadam"]()
    ours = optimizers.FedAdam(eta=0.1, beta_1=0.9, beta_2=0.99, tau=1e-3, bias_correction=False)
    rng = np.random.default_rng(3)
    start = {k: rng.normal(0, 1, shape).astype(np.float32) for k, shape in SHAPES.items()}
    arrays = ArrayRecord({k: Array(v) for k, v in start.items()})
    params = _flat(arrays).astype(np.float32)[None]
    sent = list(flower.configure_train(1, arrays, ConfigRecord(), _Grid()))
    replies = _replies(sent, arrays, rng)
    averaged, _ = FedAvg.aggregate_train(flower, 1, replies)
    assert averaged is not None
    delta = (_flat(averaged) - _flat(arrays)).astype(np.float32)[None]
    new, _ = flower.aggregate_train(1, replies)
    step, _ = ours.update(delta, ours.init(params))
    # Flower's rate in round 1 is η √(1 − β₂²) / (1 − β₁²), not η
    ratio = (_flat(new) - _flat(arrays)) / step[0]
    np.testing.assert_allclose(ratio, np.sqrt(1 - 0.99**2) / (1 - 0.9**2), rtol=1e-5)
