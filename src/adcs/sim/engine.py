"""The multi-run federated round loop (docs/design.md §1 and §4, paper Algorithm 1 generalised).

Every run r advances through the same rounds t = 0, …, T − 1, in five steps:

1. **probe** — ``probe = scheduler.probe(state_r, t, available_t, rng_r)``;
2. **gather** — the simulator computes what the probe asks at w⁽ᵗ⁾ for the probed clients only —
   minibatch or full local losses, or local updates Δ_n = w_n^{(t,E)} − w⁽ᵗ⁾ with the loss at w⁽ᵗ⁾
   on their first minibatch — into `ClientStats`;
3. **select** — ``selection, state_r = scheduler.select(...)``: min(m, available) distinct
   available clients, checked by [`adcs.round.contract.check_selection`][adcs.round.contract.check_selection];
4. **train and aggregate** — each selected client returns its update unless it drops out; the
   updates of those that returned (probed ones reused) are aggregated with
   [`adcs.round.contract.aggregation_weights`][adcs.round.contract.aggregation_weights]: w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ_{i∈R}
   c_i Δ_i — or, for a run with an aggregation hook (``RunSpec.aggregator``: a robust rule, a
   poison), by the hook from the returned clients' individual updates; with
   ``SimConfig.server_optimizer`` the aggregate becomes the step through the optimizer
   (`adcs.optimizers`, its state one row per run);
5. **observe** — ``observe`` gets the returned clients' updates; the round's selection, returns and
   client computations are recorded.

Cost follows the active clients (docs/design.md §4). Per round and run only the probed and the selected
clients are computed; blind schedulers (Uniform, cached ADCS rounds) select before anything is
computed, so a blind round costs O(m) client work. Runs that share a *minibatch stream* (with
``SimConfig.common_minibatches``, all runs of a seed) share one gather of their active clients'
minibatches and, when the model offers [`SharedInputs`][adcs.sim.SharedInputs] and E = 1, one
forward product over the union of their active clients; every other job runs through the model's
batched ``loss_and_grad``. Memory per run is O(active · dim) plus O(N) bookkeeping; no (N, dim) or
(N, N) array is formed.

Randomness is counter-based (`adcs.streams`): client n's minibatch at round t is a pure
function of (stream, n, t), availability of (seed, t), a dropout of (seed, n, t), a scheduler's
stream of (seed, run id) — nothing depends on a run's position in a lot, on who else is active,
or on the number of workers. A run alone therefore equals the same run simulated with others
(selections exactly, metrics up to float32 rounding in the shared products).

The loop is spread over small modules, in the order data flows (words as `adcs.sim.jobs`
defines them): `spec` (what a call is given and returns), `context`
(what every stream shares), `runstate` (one run's bookkeeping),
`lockstep` (a stream's runs play their rounds, `adcs.round.machine.RunRound` —
the round written once for every runtime — in lockstep), `jobs` (which
(run, client) jobs a round needs), `lot` (executing them in batched products),
`evaluate`, `lanes` (the streams one worker advances),
`workers` (forked workers or threads) and `checkpoint`; this module
wires them into [`simulate`][adcs.sim.simulate].
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_int, is_int
from adcs.columns import AVG_ACC, P10_ACC, WORST_ACC
from adcs.sim.checkpoint import (
    Checkpointing,
    SimCheckpoint,
    _restore,
    _snapshot,
    _StreamState,  # noqa: F401  (re-exported: checkpoints written before the split name it here)
)
from adcs.sim.context import _Context, _context
from adcs.sim.data import ClientData, FederatedData  # noqa: F401  (FederatedData: re-exported)
from adcs.sim.evaluate import _eval_subset  # noqa: F401  (re-exported)
from adcs.sim.lanes import _deal_lanes, _Lane
from adcs.sim.metrics import group_accuracy, group_share, tv_to_uniform
from adcs.sim.model import Model
from adcs.sim.runstate import privacy_cost
from adcs.sim.spec import Evaluation, RunResult, RunSpec, SimConfig
from adcs.sim.workers import _run_lanes, _single_threaded_blas

__all__ = [
    "Checkpointing",
    "RunResult",
    "RunSpec",
    "SimCheckpoint",
    "SimConfig",
    "check_simulation",
    "simulate",
]

logger = logging.getLogger(__name__)


def check_simulation(data: ClientData, config: SimConfig, model: Model | None = None) -> None:
    """What [`simulate`][adcs.sim.simulate] checks of data, config and model before any round,
    without running.

    Raises
    ------
    ValueError
        The model does not follow the protocol, an availability trace is of another population,
        or a round would gather more inputs than memory allows (the message starts with the
        offending argument, e.g. ``batch_size=100000 …``).
    """
    _context(data, config, model)


def simulate(
    runs: Sequence[RunSpec],
    data: ClientData,
    config: SimConfig,
    progress: Callable[[int], None] | None = None,
    *,
    model: Model | None = None,
    workers: int = 1,
    checkpoint: Checkpointing | None = None,
    resume_from: SimCheckpoint | None = None,
    on_eval: Callable[[list[Evaluation]], None] | None = None,
) -> list[RunResult]:
    """Run many independent federated trainings together (Algorithm 1 for every scheduler).

    Parameters
    ----------
    runs : sequence of RunSpec
        The runs (distinct ``run_id``); each gets its own model, scheduler state and streams.
    data : ClientData
        The clients' data: [`FederatedData`][adcs.sim.FederatedData], or any
        [`ClientData`][adcs.sim.ClientData] (e.g. `adcs.data.synthetic.SyntheticClients`, generated
        on demand).
    config : SimConfig
    progress : callable, optional
        Called with the number of rounds every run has completed, every 50 rounds and at the end
        (from a worker thread when ``workers > 1``, never concurrently).
    model : Model, optional
        Any [`Model`][adcs.sim.Model]; default [`LogisticRegression`][adcs.sim.LogisticRegression]
        sized for ``data`` (the paper's model).
    workers : int
        Workers that advance disjoint sets of minibatch streams in parallel — forked processes on
        Linux, threads elsewhere (≥ 1; more than the number of streams — seeds, with
        ``common_minibatches`` — brings nothing). Results do not depend on it. Forked workers die
        with the calling process and are stopped when the call raises (KeyboardInterrupt
        included). BLAS is kept to one thread during the call when ``threadpoolctl`` is
        installed (without it, set ``OPENBLAS_NUM_THREADS=1`` for best speed).
    checkpoint : Checkpointing, optional
        Hand a `SimCheckpoint` to ``checkpoint.save`` every ``checkpoint.every`` rounds
        (default about every 30 s), between rounds.
    resume_from : SimCheckpoint, optional
        Continue the call that saved this checkpoint (same runs, data, config and model; any
        ``workers``). The results are those of the uninterrupted call.
    on_eval : callable, optional
        Called in this process with each evaluation as it happens (a list of
        [`Evaluation`][adcs.sim.Evaluation], one per run of a worker; never concurrently): the
        numbers the results will hold, for live tracking. It changes no result.

    Returns
    -------
    list of RunResult
        In the order of ``runs``.
    """
    check_int("workers", workers)
    if not isinstance(data, ClientData):
        raise ValueError(f"data must follow the ClientData protocol, got {type(data).__name__}")
    if not isinstance(config, SimConfig):
        raise ValueError(f"config must be a SimConfig, got {type(config).__name__}")
    for name, hook in (("progress", progress), ("on_eval", on_eval)):
        if hook is not None and not callable(hook):  # else found only at the first call
            raise ValueError(f"{name} must be callable or None, got {type(hook).__name__}")
    _check_runs(runs, data)
    if checkpoint is not None and not isinstance(checkpoint, Checkpointing):
        raise ValueError(f"checkpoint must be a Checkpointing, got {type(checkpoint).__name__}")
    ctx = _context(data, config, model)
    lanes, members = _deal_lanes(runs, ctx, workers)
    earlier = 0.0
    if resume_from is not None:
        _restore(lanes, resume_from, runs, config.rounds)
        earlier = resume_from.wall_s
    logger.info(
        "simulating %d runs in %d stream(s), rounds %d to %d, %d worker(s)",
        len(runs),
        sum(len(s.streams) for s in lanes),
        lanes[0].rounds_done,
        config.rounds,
        len(lanes),
    )
    wall = _advance(lanes, runs, config, progress, checkpoint, earlier, on_eval)
    logger.info("simulated %d runs x %d rounds in %.1f s", len(runs), config.rounds, wall)
    return _collect(runs, ctx, lanes, members, wall)


def _advance(
    lanes: list[_Lane],
    runs: Sequence[RunSpec],
    config: SimConfig,
    progress: Callable[[int], None] | None,
    checkpoint: Checkpointing | None,
    earlier: float,
    on_eval: Callable[[list[Evaluation]], None] | None = None,
) -> float:
    """Advance every lane to round T, saving a checkpoint between segments; the wall time.

    ``earlier``: wall seconds of the sessions before this one (a resumed call).
    """
    start = time.perf_counter()
    with _single_threaded_blas():
        done = lanes[0].rounds_done
        step = config.rounds if checkpoint is None else checkpoint.first(config.rounds - done)
        while True:
            until = min(config.rounds, done + step)
            began = time.perf_counter()
            _run_lanes(lanes, config, progress, until, on_eval)
            if until == config.rounds:
                break
            assert checkpoint is not None
            wall = earlier + time.perf_counter() - start
            checkpoint.save(_snapshot(lanes, runs, config.rounds, wall))
            remaining = config.rounds - until
            step = checkpoint.next(remaining, until - done, time.perf_counter() - began)
            done = until
    return earlier + time.perf_counter() - start


def _check_runs(runs: Sequence[RunSpec], data: ClientData) -> None:
    if not isinstance(runs, Sequence):
        raise ValueError(f"runs must be a sequence (a list) of RunSpec, got {type(runs).__name__}")
    if len(runs) == 0:
        raise ValueError("runs must hold at least one RunSpec")
    seen: set[str] = set()
    for spec in runs:
        if not isinstance(spec, RunSpec):
            raise ValueError(f"runs must hold RunSpec objects, got {type(spec).__name__}")
        if spec.run_id in seen:
            raise ValueError(f"run_id {spec.run_id!r} appears twice; run ids must be unique")
        seen.add(spec.run_id)
        m = spec.scheduler.m
        if not is_int(m) or not 1 <= m <= data.n_clients:
            raise ValueError(
                f"run {spec.run_id!r}: scheduler.m must be in [1, {data.n_clients}], got {m!r}"
            )


def _collect(
    runs: Sequence[RunSpec],
    ctx: _Context,
    lanes: list[_Lane],
    members: list[list[int]],
    wall: float,
) -> list[RunResult]:
    data, config = ctx.data, ctx.config
    results: list[RunResult | None] = [None] * len(runs)
    eval_rounds = config.eval_rounds
    eval_rounds.setflags(write=False)
    groups = np.asarray(data.groups)
    eval_clients = lanes[0].evaluator.clients
    available: dict[int, NDArray[np.uint8]] = {}
    for lane in lanes:
        for seed, bits in (lane.available or {}).items():
            available.setdefault(seed, bits)  # the same masks in every lane of a seed
    for lane, member in zip(lanes, members, strict=True):
        row = 0
        for stream in lane.streams:
            for j, run in enumerate(stream.runs):
                spec_index = member[row]
                client_acc = lane.client_acc[row]
                eval_groups = groups[eval_clients]
                share = group_share(run.selected, data.groups, data.n_groups)
                results[spec_index] = RunResult(
                    spec=run.spec,
                    eval_rounds=eval_rounds,
                    worst_acc=WORST_ACC.series(client_acc),
                    avg_acc=AVG_ACC.series(client_acc),
                    test_loss=lane.test_loss[row].copy(),
                    client_acc=client_acc.copy(),
                    selected=run.selected,
                    returned=run.returned,
                    n_available=lane.n_available[run.spec.seed],
                    available=available.get(run.spec.seed),
                    client_updates=run.client_updates,
                    loss_evals=run.loss_evals,
                    dropped=run.dropped,
                    wall_s=wall / len(runs),
                    group_share=share,
                    tv_to_uniform=tv_to_uniform(share, data.groups, data.n_groups),
                    final_params=stream.params[j].copy(),
                    round_time=run.round_s,
                    busy_time=run.busy_s,
                    non_finite=run.non_finite,
                    p10_acc=P10_ACC.series(client_acc),
                    group_acc=group_accuracy(client_acc, eval_groups, data.n_groups),
                    eval_clients=eval_clients,
                    **privacy_cost(run),
                )
                row += 1
    return [r for r in results if r is not None]
