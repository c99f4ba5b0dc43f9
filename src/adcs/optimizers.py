"""Server optimizers: the server step of federated optimisation (docs/design.md §2).

The runtime aggregates the returned clients' updates into one pseudo-gradient Δ⁽ᵗ⁾ = Σ c_i Δ_i (or
a robust rule's step, `adcs.aggregation`); a server optimizer turns it into the model's step,
w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + step. Without one the simulator's step is η_s Δ⁽ᵗ⁾ (plain FedAvg, ``server_lr``).
The rows, after Reddi et al., "Adaptive Federated Optimization" (ICLR 2021, Algorithm 2) and Hsu
et al. 2019 (FedAvgM), with the arithmetic of Flower 1.42's strategies of the same names
(``flwr.serverapp.strategy``), which ``tests/test_optimizers.py`` checks array by array:

=============  ==========================================================================
``fedavg``     step = η Δ
``fedavgm``    v ← μ v + Δ;  step = η v                                   (Hsu et al. 2019)
``fedadagrad`` m ← β₁ m + (1 − β₁) Δ;  v ← v + Δ²;  step = η m / (√v + τ)
``fedadam``    m as above;  v ← β₂ v + (1 − β₂) Δ²;  step = η_t m / (√v + τ)
``fedyogi``    m as above;  v ← v − (1 − β₂) Δ² sign(v − Δ²);  step = η m / (√v + τ)
=============  ==========================================================================

Squares, roots and quotients are elementwise. FedAdam's η_t = η √(1 − β₂ʳ⁺¹) / (1 − β₁ʳ⁺¹) with r
the server round counted from 1 (Flower's bias correction; ``bias_correction=False`` gives
Reddi et al.'s constant η).

Each optimizer has optax's shape: a frozen, validated dataclass of hyperparameters with
``init(params) -> state`` and ``update(aggregate, state, stepped) -> (step, state)``; the state is
a NamedTuple of arrays passed in and returned, never held by the optimizer. Arrays carry a
leading axis of runs, so one call steps every run of the simulator's lock-step stream at once;
the rows are independent. A run that aggregated nothing in a round (``stepped`` False: every
selected client dropped out) keeps its state and takes no step, as Flower's strategies do when a
round brings no reply, while the round still counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_number
from adcs.registry import Registry

__all__ = [
    "SERVER_OPTIMIZERS",
    "AdaptiveState",
    "FedAdagrad",
    "FedAdam",
    "FedAvg",
    "FedAvgM",
    "FedYogi",
    "MomentumState",
    "NoState",
    "ServerOptimizer",
    "check_server_optimizer",
]

F32Array = NDArray[np.float32]
BoolArray = NDArray[np.bool_]


@runtime_checkable
class ServerOptimizer(Protocol):
    """What the runtime needs of a server optimizer (optax's ``init``/``update`` pair)."""

    def init(self, params: F32Array) -> Any:
        """The state before round 0 for models ``params`` of shape (n_runs, dim)."""
        ...

    def update(
        self, aggregate: F32Array, state: Any, stepped: BoolArray | None = None
    ) -> tuple[F32Array, Any]:
        """The step (n_runs, dim) to add to the models, and the new state.

        ``aggregate`` (n_runs, dim) is each run's aggregated update Δ⁽ᵗ⁾; ``stepped`` (n_runs,)
        which runs aggregated anything this round (default: all).
        """
        ...


def check_server_optimizer(obj: Any) -> Any:
    """``obj`` if it is ``None`` or follows `ServerOptimizer`, else ``ValueError``."""
    if obj is not None and not isinstance(obj, ServerOptimizer):
        raise ValueError(
            f"server_optimizer must have init(params) and update(aggregate, state, stepped) "
            f"(adcs.optimizers.ServerOptimizer) or be None, got {obj!r}"
        )
    return obj


class NoState(NamedTuple):
    """The state of a stateless optimizer (FedAvg)."""


class MomentumState(NamedTuple):
    """FedAvgM's state: the server momentum v, shape (n_runs, dim), float32."""

    momentum: F32Array


class AdaptiveState(NamedTuple):
    """The state of FedAdagrad, FedAdam and FedYogi.

    Attributes
    ----------
    rounds : ndarray of shape (n_runs,), int64
        Rounds played (the server round r of the last update, counted from 1).
    m : ndarray of shape (n_runs, dim), float32
        First moment of the aggregates.
    v : ndarray of shape (n_runs, dim), float32
        Second moment (Adagrad's sum of squares).
    """

    rounds: NDArray[np.int64]
    m: F32Array
    v: F32Array


def _stepped(stepped: BoolArray | None, n_runs: int) -> BoolArray:
    if stepped is None:
        return np.ones(n_runs, dtype=bool)
    return np.asarray(stepped, dtype=bool).reshape(n_runs)


def _keep(stepped: BoolArray, new: F32Array, old: F32Array) -> F32Array:
    """``new`` in the rows of runs that stepped, ``old`` in the others."""
    return new if stepped.all() else np.where(stepped[:, None], new, old)


def _check_eta(eta: Any) -> None:
    check_number("eta", eta, 0.0, low_open=True)


def _check_beta(name: str, value: Any) -> None:
    check_number(name, value, 0.0, 1.0, high_open=True)


@dataclass(frozen=True)
class FedAvg:
    """Plain FedAvg's server step: step = η Δ (McMahan et al. 2017; η = 1 is the average).

    Parameters
    ----------
    eta : float
        η > 0, the server learning rate.
    """

    eta: float = 1.0

    def __post_init__(self) -> None:
        _check_eta(self.eta)

    def init(self, params: F32Array) -> NoState:
        """No state."""
        return NoState()

    def update(
        self, aggregate: F32Array, state: NoState, stepped: BoolArray | None = None
    ) -> tuple[F32Array, NoState]:
        """η Δ (a run that aggregated nothing has Δ = 0)."""
        step = np.asarray(aggregate, dtype=np.float32) * np.float32(self.eta)
        ran = _stepped(stepped, step.shape[0])
        return _keep(ran, step, np.zeros_like(step)), state


@dataclass(frozen=True)
class FedAvgM:
    """FedAvg with server momentum (Hsu et al. 2019; Flower's ``FedAvgM``).

    v ← μ v + Δ, step = η v (v = 0 before round 0).

    Parameters
    ----------
    eta : float
        η > 0, the server learning rate (Flower's ``server_learning_rate``).
    momentum : float
        μ in [0, 1), the server momentum (Flower's ``server_momentum``).
    """

    eta: float = 1.0
    momentum: float = 0.9

    def __post_init__(self) -> None:
        _check_eta(self.eta)
        _check_beta("momentum", self.momentum)

    def init(self, params: F32Array) -> MomentumState:
        """v = 0, shape (n_runs, dim)."""
        return MomentumState(np.zeros_like(params, dtype=np.float32))

    def update(
        self, aggregate: F32Array, state: MomentumState, stepped: BoolArray | None = None
    ) -> tuple[F32Array, MomentumState]:
        """The step η v and the new momentum v."""
        delta = np.asarray(aggregate, dtype=np.float32)
        ran = _stepped(stepped, delta.shape[0])
        momentum = _keep(ran, np.float32(self.momentum) * state.momentum + delta, state.momentum)
        step = np.float32(self.eta) * momentum
        return _keep(ran, step, np.zeros_like(step)), MomentumState(momentum)


class _Adaptive:
    """What FedAdagrad, FedAdam and FedYogi share (Reddi et al. 2021, Algorithm 2): a mixin of
    methods; each row declares its own hyperparameters."""

    eta: float
    beta_1: float
    tau: float

    def _check(self) -> None:
        _check_eta(self.eta)
        _check_beta("beta_1", self.beta_1)
        check_number("tau", self.tau, 0.0, low_open=True)

    def init(self, params: F32Array) -> AdaptiveState:
        """rounds = 0, m = v = 0, shape (n_runs, dim)."""
        zeros = np.zeros_like(params, dtype=np.float32)
        return AdaptiveState(np.zeros(zeros.shape[0], dtype=np.int64), zeros, zeros.copy())

    def _second_moment(self, v: F32Array, squared: F32Array) -> F32Array:
        raise NotImplementedError

    def _rate(self, rounds: NDArray[np.int64]) -> NDArray[np.float32]:
        """Each run's server rate in its round ``rounds`` (counted from 1), shape (n_runs, 1)."""
        return np.full((rounds.size, 1), self.eta, dtype=np.float32)

    def update(
        self, aggregate: F32Array, state: AdaptiveState, stepped: BoolArray | None = None
    ) -> tuple[F32Array, AdaptiveState]:
        """The step η m / (√v + τ) and the new state (the moments of the runs that stepped)."""
        delta = np.asarray(aggregate, dtype=np.float32)
        ran = _stepped(stepped, delta.shape[0])
        # (1 − β) rounded once from double, as Flower's NumPy expressions round it
        beta_1, rest_1 = np.float32(self.beta_1), np.float32(1.0 - self.beta_1)
        m = _keep(ran, beta_1 * state.m + rest_1 * delta, state.m)
        v = _keep(ran, self._second_moment(state.v, delta**2), state.v)
        rounds = state.rounds + 1
        step = self._rate(rounds) * m / (np.sqrt(v) + np.float32(self.tau))
        return _keep(ran, step, np.zeros_like(step)), AdaptiveState(rounds, m, v)


@dataclass(frozen=True)
class FedAdagrad(_Adaptive):
    """FedAdagrad (Reddi et al. 2021; Flower's ``FedAdagrad``, whose β₁ is 0).

    Parameters
    ----------
    eta : float
        η > 0, the server learning rate.
    beta_1 : float
        β₁ in [0, 1), the momentum of m (0: m = Δ).
    tau : float
        τ > 0, the adaptivity: small τ divides more by the aggregates' history.
    """

    eta: float = 0.1
    beta_1: float = 0.0
    tau: float = 1e-3

    def __post_init__(self) -> None:
        self._check()

    def _second_moment(self, v: F32Array, squared: F32Array) -> F32Array:
        return v + squared


@dataclass(frozen=True)
class FedAdam(_Adaptive):
    """FedAdam (Reddi et al. 2021; Flower's ``FedAdam``).

    Parameters
    ----------
    eta : float
        η > 0, the server learning rate.
    beta_1, beta_2 : float
        β₁, β₂ in [0, 1), the moments' decay.
    tau : float
        τ > 0, the adaptivity.
    bias_correction : bool
        η_r = η √(1 − β₂ʳ⁺¹) / (1 − β₁ʳ⁺¹) in server round r = 1, 2, … (``True``, default: Flower's
        arithmetic), or η throughout (``False``: Reddi et al.'s Algorithm 2).
    """

    eta: float = 0.1
    beta_1: float = 0.9
    beta_2: float = 0.99
    tau: float = 1e-3
    bias_correction: bool = True

    def __post_init__(self) -> None:
        self._check()
        _check_beta("beta_2", self.beta_2)
        check_bool("bias_correction", self.bias_correction)

    def _second_moment(self, v: F32Array, squared: F32Array) -> F32Array:
        return np.float32(self.beta_2) * v + np.float32(1.0 - self.beta_2) * squared

    def _rate(self, rounds: NDArray[np.int64]) -> NDArray[np.float32]:
        if not self.bias_correction:
            return super()._rate(rounds)
        power = rounds.astype(np.float64)[:, None] + 1.0
        rate = self.eta * np.sqrt(1 - self.beta_2**power) / (1 - self.beta_1**power)
        return rate.astype(np.float32)


@dataclass(frozen=True)
class FedYogi(_Adaptive):
    """FedYogi (Reddi et al. 2021; Flower's ``FedYogi``): v grows or shrinks towards Δ² additively.

    Parameters
    ----------
    eta : float
        η > 0, the server learning rate.
    beta_1, beta_2 : float
        β₁, β₂ in [0, 1).
    tau : float
        τ > 0, the adaptivity.
    """

    eta: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.99
    tau: float = 1e-3

    def __post_init__(self) -> None:
        self._check()
        _check_beta("beta_2", self.beta_2)

    def _second_moment(self, v: F32Array, squared: F32Array) -> F32Array:
        return v - np.float32(1.0 - self.beta_2) * squared * np.sign(v - squared)


SERVER_OPTIMIZERS: Registry[ServerOptimizer] = Registry(
    "server optimizer",
    "adcs.server_optimizers",
    {
        "fedavg": FedAvg,
        "fedavgm": FedAvgM,
        "fedadagrad": FedAdagrad,
        "fedadam": FedAdam,
        "fedyogi": FedYogi,
    },
    requires=("init", "update"),
)
"""The ``[sim] server_optimizer`` kinds: name → class (also ``"package.module:Name"`` and entry
points of ``adcs.server_optimizers``); a row's constructor arguments are the table's keys."""
