"""Checkpoints of the round loop: a resumed call equals the call never interrupted; workers stop."""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from adcs.schedulers import (
    ADCS,
    OCS,
    ClientStats,
    DivFL,
    PowerOfChoice,
    Probe,
    ProbeKind,
    Selection,
    StaticDPP,
    Uniform,
)
from adcs.sim import BernoulliAvailability, FederatedData, RunResult, RunSpec, SimConfig, simulate
from adcs.sim.engine import Checkpointing, SimCheckpoint

CONFIG = SimConfig(
    rounds=24, batch_size=4, local_lr=0.5, eval_every=5,
    availability=BernoulliAvailability(0.8), dropout=0.2,
)  # fmt: skip


def specs() -> list[RunSpec]:
    """Every kind of state a run carries: scheduler generators, observed updates, kernels."""
    return [
        RunSpec(Uniform(m=3), 0, "uniform/0"),
        RunSpec(OCS(m=3, unbiased=True), 0, "ocs/0"),
        RunSpec(ADCS(m=3, refresh_every=4), 1, "adcs/1"),
        RunSpec(PowerOfChoice(m=3, candidates=5), 1, "poc/1"),
        RunSpec(DivFL(m=3, stale=True), 2, "divfl/2"),
        RunSpec(StaticDPP(m=3), 2, "static/2"),
    ]


def assert_same(a: list[RunResult], b: list[RunResult]) -> None:
    assert [r.spec.run_id for r in a] == [r.spec.run_id for r in b]
    for x, y in zip(a, b, strict=True):
        for name in ("selected", "returned", "final_params", "client_acc", "test_loss",
                     "n_available", "worst_acc", "group_share"):  # fmt: skip
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
        np.testing.assert_array_equal(x.available, y.available)
        assert (x.client_updates, x.loss_evals, x.dropped) == (
            y.client_updates, y.loss_evals, y.dropped,
        )  # fmt: skip


def saved_checkpoints(data: FederatedData, workers: int, every: int) -> tuple[list, list]:
    saved: list[SimCheckpoint] = []

    def save(checkpoint: SimCheckpoint) -> None:
        saved.append(pickle.loads(pickle.dumps(checkpoint)))  # what a file would hold

    results = simulate(
        specs(), data, CONFIG, workers=workers, checkpoint=Checkpointing(save, every=every)
    )
    return results, saved


@pytest.mark.parametrize("workers", [1, 2])
def test_resuming_from_any_checkpoint_gives_the_uninterrupted_results(
    data: FederatedData, workers: int
) -> None:
    plain = simulate(specs(), data, CONFIG, workers=workers)
    checkpointed, saved = saved_checkpoints(data, workers, every=7)
    assert_same(plain, checkpointed)  # checkpointing itself changes nothing
    assert [c.rounds_done for c in saved] == [7, 14, 21]
    for checkpoint in saved:
        resumed = simulate(specs(), data, CONFIG, workers=3 - workers, resume_from=checkpoint)
        assert_same(plain, resumed)


def test_a_checkpoint_is_a_snapshot_not_a_view(data: FederatedData) -> None:
    kept: list[SimCheckpoint] = []
    simulate(specs()[:2], data, CONFIG, checkpoint=Checkpointing(kept.append, every=10))
    first = kept[0].state["streams"][(0, None)]
    assert (first.runs[0][2][10:] == -1).all()  # rounds after the checkpoint are not in it


def test_time_based_checkpoints_follow_the_round_rate(data: FederatedData) -> None:
    kept: list[SimCheckpoint] = []
    config = SimConfig(rounds=60, batch_size=4, local_lr=0.5, eval_every=10)
    simulate(specs()[:1], data, config, checkpoint=Checkpointing(kept.append, seconds=1e-6))
    # the first segment measures the rate; with a tiny target every later round is a boundary
    assert [c.rounds_done for c in kept] == [20, *range(21, 60)]


def test_a_checkpoint_of_other_runs_is_refused(data: FederatedData) -> None:
    _, saved = saved_checkpoints(data, 1, every=10)
    with pytest.raises(ValueError, match="other runs"):
        simulate(specs()[:3], data, CONFIG, resume_from=saved[0])
    with pytest.raises(ValueError, match="this call runs 30 rounds"):
        longer = SimConfig(**{**CONFIG.__dict__, "rounds": 30})
        simulate(specs(), data, longer, resume_from=saved[0])


def test_checkpointing_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="every"):
        Checkpointing(print, every=0)
    with pytest.raises(ValueError, match="seconds"):
        Checkpointing(print, seconds=0.0)
    with pytest.raises(ValueError, match="save"):
        Checkpointing("not callable")  # type: ignore[arg-type]


# ------------------------------------------------------------------ non-finite statistics


@dataclass(frozen=True)
class BrokenProbe:
    """Probes every client's updates, then picks the first m (whatever they reported)."""

    m: int
    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.UPDATES)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        return Selection(np.arange(self.m)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_non_finite_statistics_are_counted_and_logged_once(
    data: FederatedData, caplog: pytest.LogCaptureFixture
) -> None:
    config = SimConfig(rounds=5, batch_size=4, local_lr=1e38, eval_every=5)  # diverges at once
    with caplog.at_level(logging.WARNING, logger="adcs.sim"):
        (result,) = simulate([RunSpec(BrokenProbe(m=2), 0, "broken")], data, config)
    warnings = [r for r in caplog.records if "NaN or infinite" in r.getMessage()]
    assert len(warnings) == 1
    assert "'broken'" in warnings[0].getMessage() and "client(s) [" in warnings[0].getMessage()
    assert result.non_finite > data.n_clients  # every client, in several rounds


# ------------------------------------------------------------------ workers


@dataclass(frozen=True)
class Slow:
    """Uniform-like, but slow: the call is still running when the test interrupts it."""

    m: int
    observes_updates = False

    def init(self, n_clients: int, data_sizes: Any = None) -> None:
        return None

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.NONE)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        time.sleep(0.01)
        return Selection(np.arange(self.m)), state

    def observe(self, state: Any, *args: Any) -> None:
        return state


def test_an_interrupted_call_leaves_no_worker_running(data: FederatedData) -> None:
    seen: list[int] = []

    def interrupt(done: int) -> None:
        seen.extend(p.pid for p in multiprocessing.active_children() if p.pid is not None)
        if done >= 50:
            raise KeyboardInterrupt

    runs = [RunSpec(Slow(2), seed, f"slow/{seed}") for seed in range(3)]
    with pytest.raises(KeyboardInterrupt):
        simulate(runs, data, SimConfig(rounds=100_000), interrupt, workers=3)
    assert len(set(seen)) == 3
    assert multiprocessing.active_children() == []
    for pid in set(seen):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
