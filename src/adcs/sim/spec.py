"""What a simulation is given and what it returns: [`SimConfig`][adcs.sim.SimConfig],
[`RunSpec`][adcs.sim.RunSpec], [`RunResult`][adcs.sim.RunResult].

The simulator's inputs and outputs (docs/design.md §4), apart from the round loop that connects them
(`adcs.sim.engine`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from adcs import defaults
from adcs._validate import check_bool, check_choice, check_int, check_number
from adcs.aggregation import Aggregator
from adcs.columns import AVG_ACC, P10_ACC, WORST_ACC, EvalView, eval_values
from adcs.optimizers import ServerOptimizer, check_server_optimizer
from adcs.schedulers.base import Scheduler, check_scheduler
from adcs.sim.availability import AlwaysAvailable, Availability, TraceAvailability
from adcs.sim.system import SystemConfig

__all__ = [
    "BoolArray",
    "Evaluation",
    "F32Array",
    "F64Array",
    "IntArray",
    "PerPopulation",
    "RunResult",
    "RunSpec",
    "SimConfig",
]

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]


@runtime_checkable
class PerPopulation(Protocol):
    """A setting known once the number of clients is (a trace or device file to read)."""

    def for_clients(self, n_clients: int) -> Any:
        """The simulator's object for ``n_clients`` clients."""
        ...


@dataclass(frozen=True)
class SimConfig:
    """Hyperparameters of a simulation (paper Sec. 6: E = 1, B = 16, η_ℓ = 0.001, η_s = 1).

    Parameters
    ----------
    rounds : int
        T ≥ 1, number of rounds (paper: 20 000).
    local_steps : int
        E ≥ 1, local SGD steps per client update.
    batch_size : int
        B ≥ 1, minibatch size of each local step (and of a minibatch loss probe). A client holding
        fewer than E·B samples trains on whole shuffles of its data back to back.
    local_lr : float
        η_ℓ > 0.
    server_lr : float
        η_s > 0.
    eval_every : int
        Test metrics are computed at rounds 0, eval_every, 2·eval_every, … and at T (≥ 1).
    weighting : {"uniform", "data_size"}
        Aggregation weights p_n: equal, or proportional to the client's number of training samples.
    common_minibatches : bool
        ``True`` (default): runs with the same seed draw the same client minibatches (common random
        numbers across methods, and the faster shared computation). ``False``: each run's
        minibatches come from its own ``(seed, run_id)`` stream.
    dropout : float
        Probability in [0, 1) that a selected client fails to return its update in a round (drawn
        per (seed, client, round)); dropped clients are not aggregated and are recorded.
    availability : Availability or PerPopulation
        Which clients can be selected each round (default: all, every round); or what gives
        that model for N clients (a `TraceFile`), completed by
        [`for_clients`][adcs.sim.SimConfig.for_clients] before a simulation.
    system : SystemConfig or PerPopulation, optional
        Client devices and round rules (`adcs.sim.system`): every round is timed on a
        simulated clock, and a deadline or over-commitment decides who is aggregated (or a
        `MeasuredSystem`, completed by [`for_clients`][adcs.sim.SimConfig.for_clients]). ``None``
        (default): no clock, and every number is as without this option.
    sketch_dim : int or None
        k: schedulers see each update as its seeded Johnson–Lindenstrauss sketch of length k
        (`adcs.sketch.UpdateSketch`, one projection per seed), while aggregation uses the
        true updates. ``None`` (default): schedulers see the updates themselves.
    eval_clients : int or None
        Evaluate a fixed subset of this many clients (drawn once, the same for every seed and
        run) instead of all of them — the metrics of a large population at bounded cost.
        ``None`` (default): every client.
    lr_decay : tuple of (int, float)
        A step schedule of the local rate: pairs (t_k, f_k), t_k strictly increasing, f_k > 0;
        from round t_k on (rounds count from 0) η_ℓ is ``local_lr`` · f_k
        ([`lr_at`][adcs.sim.SimConfig.lr_at]). Empty (default): η_ℓ = ``local_lr`` throughout.
    server_optimizer : ServerOptimizer, optional
        The server step from the aggregated update Δ⁽ᵗ⁾ (`adcs.optimizers`: FedAvgM, FedAdagrad,
        FedAdam, FedYogi; its state is vectorised over the runs and checkpointed). ``None``
        (default): plain FedAvg, w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Δ⁽ᵗ⁾ with η_s = ``server_lr``, which must then
        keep its default when an optimizer is given (the optimizer has its own η).
    prox_mu : float
        μ ≥ 0, FedProx's proximal term (Li et al. 2020): each local step descends
        ℓ(w) + (μ/2)‖w − w⁽ᵗ⁾‖² (`adcs.sim.model.local_update`). Its gradient is 0 at w⁽ᵗ⁾, so it
        changes nothing when E = 1. 0 (default): plain local SGD.
    weight_decay : float
        λ ≥ 0, weight decay in every local SGD step: w ← w − η_ℓ (∇ℓ(w) + λ w), as
        ``torch.optim.SGD``'s ``weight_decay`` (every parameter, biases included;
        `adcs.sim.model.local_update`). 0 (default): none.
    """

    rounds: int = 20_000
    local_steps: int = defaults.LOCAL_STEPS
    batch_size: int = defaults.BATCH_SIZE
    local_lr: float = defaults.LOCAL_LR
    server_lr: float = defaults.SERVER_LR
    eval_every: int = 100
    weighting: Literal["uniform", "data_size"] = "uniform"
    common_minibatches: bool = True
    dropout: float = 0.0
    # typed as the simulator reads them; before for_clients either may be a PerPopulation
    availability: Availability = field(default_factory=AlwaysAvailable)
    system: SystemConfig | None = None
    sketch_dim: int | None = None
    eval_clients: int | None = None
    lr_decay: tuple[tuple[int, float], ...] = ()
    server_optimizer: ServerOptimizer | None = None
    prox_mu: float = 0.0
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        check_int("rounds", self.rounds)
        check_int("local_steps", self.local_steps)
        check_int("batch_size", self.batch_size)
        check_number("local_lr", self.local_lr, 0.0, low_open=True)
        check_number("server_lr", self.server_lr, 0.0, low_open=True)
        check_int("eval_every", self.eval_every)
        check_choice("weighting", self.weighting, ("uniform", "data_size"))
        check_bool("common_minibatches", self.common_minibatches)
        check_number("dropout", self.dropout, 0.0, 1.0, high_open=True)
        if not isinstance(self.availability, Availability | PerPopulation):
            raise ValueError(
                f"availability must be an Availability (or have for_clients(n_clients)), "
                f"got {self.availability!r}"
            )
        if isinstance(self.availability, TraceAvailability):
            self.availability.check_rounds(self.rounds)
        if self.system is not None and not isinstance(self.system, SystemConfig | PerPopulation):
            raise ValueError(
                f"system must be a SystemConfig (or have for_clients(n_clients)) or None, "
                f"got {self.system!r}"
            )
        if self.sketch_dim is not None:
            check_int("sketch_dim", self.sketch_dim)
        if self.eval_clients is not None:
            check_int("eval_clients", self.eval_clients)
        object.__setattr__(self, "lr_decay", _check_lr_decay(self.lr_decay))
        check_server_optimizer(self.server_optimizer)
        if self.server_optimizer is not None and self.server_lr != defaults.SERVER_LR:
            raise ValueError(
                f"server_lr={self.server_lr!r} is plain FedAvg's server rate; with a "
                "server_optimizer, set the optimizer's eta instead"
            )
        check_number("prox_mu", self.prox_mu, 0.0)
        check_number("weight_decay", self.weight_decay, 0.0)

    def for_clients(self, n_clients: int) -> SimConfig:
        """This configuration for ``n_clients`` clients: what reads a file per population (a
        `TraceFile`, a `MeasuredSystem`)
        replaced by what its ``for_clients`` gives.

        Raises
        ------
        ValueError
            Naming the field first (``availability: …``), or the trace is shorter than the run.
        """
        complete: dict[str, Any] = {}
        for name in ("availability", "system"):
            spec = getattr(self, name)
            if isinstance(spec, PerPopulation):
                try:
                    complete[name] = spec.for_clients(n_clients)
                except ValueError as exc:
                    raise ValueError(f"{name}: {exc}") from None
        return replace(self, **complete) if complete else self

    @property
    def complete(self) -> bool:
        """Whether [`simulate`][adcs.sim.simulate] can run it
        ([`for_clients`][adcs.sim.SimConfig.for_clients] done)."""
        return not isinstance(self.availability, PerPopulation) and not isinstance(
            self.system, PerPopulation
        )

    def lr_at(self, t: int) -> float:
        """η_ℓ in round t (0-based): ``local_lr`` times the factor of the last milestone ≤ t."""
        factor = 1.0
        for start, f in self.lr_decay:
            if t >= start:
                factor = f
        return self.local_lr * factor

    @property
    def eval_rounds(self) -> IntArray:
        """Rounds after which test metrics are computed: 0, eval_every, …, and T."""
        points = np.arange(0, self.rounds + 1, self.eval_every, dtype=np.intp)
        if points[-1] != self.rounds:
            points = np.append(points, self.rounds)
        return points


def _check_lr_decay(schedule: Any) -> tuple[tuple[int, float], ...]:
    """``lr_decay`` as a tuple of (round, factor) pairs, checked (see
    [`SimConfig`][adcs.sim.SimConfig])."""
    if not isinstance(schedule, list | tuple):
        raise ValueError(f"lr_decay must be a sequence of (round, factor) pairs, got {schedule!r}")
    out: list[tuple[int, float]] = []
    for pair in schedule:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ValueError(f"lr_decay entries must be (round, factor) pairs, got {pair!r}")
        start = check_int("lr_decay round", pair[0], minimum=0)
        factor = check_number("lr_decay factor", pair[1], 0.0, low_open=True)
        if out and start <= out[-1][0]:
            raise ValueError(f"lr_decay rounds must increase strictly, got {schedule!r}")
        out.append((start, factor))
    return tuple(out)


@dataclass(frozen=True)
class RunSpec:
    """One run: a scheduler, a seed and an identity.

    Parameters
    ----------
    scheduler : Scheduler
        Any object following `adcs.schedulers.Scheduler`.
    seed : int
        ≥ 0. Seeds the run's availability, dropouts and minibatch stream (shared by all runs of
        this seed when ``SimConfig.common_minibatches``) and, with ``stream`` (else
        ``run_id``), its scheduler's stream.
    run_id : str
        Non-empty, unique within a [`simulate`][adcs.sim.simulate] call, e.g.
        ``"adcs-theta0.8-R20/seed3"``.
    meta : mapping
        Free-form labels (method, hyperparameters, …), carried into the result.
    aggregator : Aggregator, optional
        The run's aggregation hook (`adcs.aggregation`): a robust rule or a poison. With one,
        every returned client's update is computed individually and the aggregator gives the step
        (and what the server received, which ``observe`` then gets); without, Σ c_i Δ_i.
    stream : str, optional
        The name that keys the scheduler's stream with ``seed`` (None: ``run_id``). Runs of one
        seed that share it draw the same scheduler randomness — a paired comparison, such as a
        scheduler with and without a wrapper that changes nothing it reads.
    """

    scheduler: Scheduler
    seed: int
    run_id: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    aggregator: Aggregator | None = None
    stream: str | None = None

    def __post_init__(self) -> None:
        check_scheduler(self.scheduler)
        check_int("seed", self.seed, minimum=0)
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"run_id must be a non-empty string, got {self.run_id!r}")
        if self.stream is not None and (not isinstance(self.stream, str) or not self.stream):
            raise ValueError(f"stream must be None or a non-empty string, got {self.stream!r}")
        object.__setattr__(self, "meta", dict(self.meta))  # a copy: later edits do not leak in
        if self.aggregator is not None and not isinstance(self.aggregator, Aggregator):
            raise ValueError(
                f"aggregator must follow the Aggregator protocol, got {type(self.aggregator).__name__}"
            )


@dataclass(frozen=True, eq=False)
class RunResult:
    """What one run produced.

    Attributes
    ----------
    spec : RunSpec
    eval_rounds : ndarray of shape (n_evals,), int
        Number of rounds trained before each evaluation (0, eval_every, …, T).
    worst_acc, avg_acc : ndarray of shape (n_evals,)
        Min and mean over the evaluated clients of the per-client test accuracy (paper Fig. 1).
    test_loss : ndarray of shape (n_evals,)
        Mean cross-entropy over the union of the evaluated clients' test sets.
    client_acc : ndarray of shape (n_evals, n_eval_clients)
        Accuracy of the global model on each evaluated client's own test set (column i is client
        ``eval_clients[i]``).
    selected : ndarray of shape (rounds, m), int32
        Clients selected in each round, in the scheduler's order; −1 where fewer than m were
        (fewer than m available). With over-commitment (``SimConfig.system``) m is the number
        invited, ⌈(1 + o)·m⌉.
    returned : ndarray of shape (rounds, m), bool
        Which selected clients returned their update and were aggregated (not dropped, in time,
        among the first m with over-commitment); False in padding.
    n_available : ndarray of shape (rounds,), int
        Clients available in each round.
    available : ndarray of shape (rounds, ⌈N/8⌉), uint8, or None
        The availability masks, bit-packed (``np.unpackbits(available, axis=1, count=N)``);
        shared by the runs of a seed. None when every client is always available, or when the
        masks are too large to keep (regenerate them from ``SimConfig.availability`` and the seed).
    client_updates : int
        Local updates computed (probed ∪ returned selected per round; a probed update reused for
        aggregation counts once). Updates the clock discards (past the deadline, or beyond the
        first m with over-commitment) are not counted; their clients' time is in ``busy_time``.
    loss_evals : int
        Losses evaluated apart from an update (loss probes).
    dropped : int
        Selected clients that failed to return their update (dropped out, or past the deadline).
    wall_s : float
        This run's share of the [`simulate`][adcs.sim.simulate] call's wall time (call time /
        number of runs).
    group_share : ndarray of shape (n_groups,)
        Share of selection slots per group (Table 1); with over-commitment, of the invitations.
    tv_to_uniform : float
        TV distance of ``group_share`` to the groups' shares of the population
        ([`adcs.sim.metrics.tv_to_uniform`][adcs.sim.tv_to_uniform]): what uniform selection gives
        in expectation.
    final_params : ndarray of shape (dim,), float32
        w⁽ᵀ⁾.
    round_time : ndarray of shape (rounds,), or None
        Simulated seconds of each round (probe phase + training phase, `adcs.sim.system`);
        None without ``SimConfig.system``.
    busy_time : ndarray of shape (rounds,), or None
        Client-seconds spent in each round, summed over the clients that worked.
    non_finite : int
        Probed clients whose loss or update was NaN or infinite, summed over rounds; they were
        excluded from selection (logged at WARNING, with the client ids, the first time).
    p10_acc : ndarray of shape (n_evals,)
        10th percentile of the per-client accuracy (the worst-decile view, steadier than the
        minimum when there are many clients).
    group_acc : ndarray of shape (n_evals, n_groups)
        Mean accuracy of each group's evaluated clients (NaN for a group none of them is in).
    eval_clients : ndarray of shape (n_eval_clients,), int
        The clients evaluated, ascending (all of them unless ``SimConfig.eval_clients``).
    client_epsilon : ndarray of shape (n_clients,) or None
        Each client's ε over the run, when the run's scheduler accounts privacy (it, or a
        scheduler it wraps, has ``epsilons(state)``: `adcs.privacy.Private`); else None.
    delta : float or None
        The δ of ``client_epsilon``.
    """

    spec: RunSpec
    eval_rounds: IntArray
    worst_acc: F64Array
    avg_acc: F64Array
    test_loss: F64Array
    client_acc: F64Array
    selected: NDArray[np.int32]
    returned: BoolArray
    n_available: NDArray[np.int32]
    available: NDArray[np.uint8] | None
    client_updates: int
    loss_evals: int
    dropped: int
    wall_s: float
    group_share: F64Array
    tv_to_uniform: float
    final_params: F32Array
    round_time: F64Array | None = None
    busy_time: F64Array | None = None
    p10_acc: F64Array = field(default_factory=lambda: np.empty(0))
    group_acc: F64Array = field(default_factory=lambda: np.empty((0, 0)))
    eval_clients: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.intp))

    @property
    def clock(self) -> F64Array | None:
        """Simulated time at the start of each round and at the end, shape (rounds + 1,)."""
        if self.round_time is None:
            return None
        return np.concatenate([[0.0], np.cumsum(self.round_time)])

    @property
    def eval_clock(self) -> F64Array | None:
        """Simulated time of each evaluation, shape (n_evals,) (after ``eval_rounds`` rounds)."""
        clock = self.clock
        return None if clock is None else clock[self.eval_rounds]

    @property
    def total_time(self) -> float | None:
        """Simulated seconds of the whole run."""
        return None if self.round_time is None else float(self.round_time.sum())

    @property
    def client_time(self) -> float | None:
        """Client-seconds spent over the whole run."""
        return None if self.busy_time is None else float(self.busy_time.sum())

    non_finite: int = 0
    client_epsilon: F64Array | None = None
    delta: float | None = None


@dataclass(frozen=True, eq=False)
class Evaluation:
    """One run's evaluation, as it happens ([`simulate`][adcs.sim.simulate]'s ``on_eval``).

    It carries the evaluated clients' accuracies, so that every per-evaluation column of
    `adcs.columns.COLUMNS` a runtime can give is computed from it (`columns`), the same values
    the run's [`RunResult`][adcs.sim.RunResult] and ``metrics.csv`` hold at ``round``.

    Attributes
    ----------
    run_id : str
    round : int
        Rounds trained before the evaluation.
    accuracy : ndarray of shape (n_eval_clients,)
        Each evaluated client's test accuracy (``RunResult.client_acc`` at this evaluation).
    test_loss : float
        Mean cross-entropy over the union of the evaluated clients' test sets.
    """

    run_id: str
    round: int
    accuracy: F64Array
    test_loss: float

    @property
    def columns(self) -> dict[str, float]:
        """Every per-evaluation column computed from one evaluation (`adcs.columns.eval_values`):
        ``worst_acc``, ``avg_acc``, ``test_loss``, ``p10_acc`` and any column declared since."""
        return eval_values(self.accuracy, self.test_loss)

    @property
    def worst_acc(self) -> float:
        return float(WORST_ACC.evaluate(EvalView(self.accuracy)))

    @property
    def avg_acc(self) -> float:
        return float(AVG_ACC.evaluate(EvalView(self.accuracy)))

    @property
    def p10_acc(self) -> float:
        return float(P10_ACC.evaluate(EvalView(self.accuracy)))
