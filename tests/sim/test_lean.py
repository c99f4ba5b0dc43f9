"""The lean path of a stream's round gives the general path's numbers, byte for byte."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from adcs.schedulers import ADCS, OCS, DivFL, PowerOfChoice, StaticDPP, Uniform
from adcs.schedulers.base import NO_PROBE, LossSource, Probe, ProbeKind, Selection
from adcs.sim import (
    BernoulliAvailability,
    FederatedData,
    RunResult,
    RunSpec,
    SimConfig,
    lockstep,
    simulate,
)
from adcs.sim.jobs import _plan_early
from adcs.sim.system import SystemConfig

M = 3
NOBODY = np.empty(0, dtype=np.intp)


def six_methods(seed: int) -> list[RunSpec]:
    """The paper's six methods (Fig. 1), ADCS refreshing every 4 rounds."""
    return [
        RunSpec(Uniform(M), seed, f"uniform/{seed}"),
        RunSpec(PowerOfChoice(M), seed, f"poc/{seed}"),
        RunSpec(OCS(M), seed, f"ocs/{seed}"),
        RunSpec(DivFL(M), seed, f"divfl/{seed}"),
        RunSpec(StaticDPP(M), seed, f"staticdpp/{seed}"),
        RunSpec(ADCS(M, theta=0.8, refresh_every=4), seed, f"adcs/{seed}"),
    ]


def run(
    specs: list[RunSpec], data: FederatedData, config: SimConfig, lean: bool
) -> list[RunResult]:
    saved = lockstep.LEAN
    lockstep.LEAN = lean
    try:
        return simulate(specs, data, config)
    finally:
        lockstep.LEAN = saved


def numbers(result: RunResult) -> dict[str, Any]:
    return {
        "selected": result.selected,
        "returned": result.returned,
        "final_params": result.final_params,
        "client_acc": result.client_acc,
        "test_loss": result.test_loss,
        "client_updates": result.client_updates,
        "loss_evals": result.loss_evals,
        "dropped": result.dropped,
        "non_finite": result.non_finite,
        "round_time": result.round_time,
    }


def assert_same(lean: list[RunResult], general: list[RunResult]) -> None:
    for a, b in zip(lean, general, strict=True):
        for name, value in numbers(a).items():
            other = numbers(b)[name]
            if isinstance(value, np.ndarray):
                assert value.dtype == other.dtype, (a.spec.run_id, name)
                assert value.tobytes() == other.tobytes(), (a.spec.run_id, name)
            else:
                assert value == other, (a.spec.run_id, name)


CONFIGS = {
    "paper": SimConfig(rounds=9, eval_every=4),
    "bernoulli, dropout, data-size weights": SimConfig(
        rounds=9,
        eval_every=4,
        availability=BernoulliAvailability(0.6),
        dropout=0.3,
        weighting="data_size",
    ),
    "clock with over-commitment": SimConfig(
        rounds=6, eval_every=3, system=SystemConfig(overcommit=0.5)
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_lean_path_gives_the_general_paths_numbers(data: FederatedData, name: str) -> None:
    specs = six_methods(0) + six_methods(1)

    lean = run(specs, data, CONFIGS[name], lean=True)
    general = run(specs, data, CONFIGS[name], lean=False)

    assert_same(lean, general)
    assert all(np.abs(r.final_params).max() > 0 for r in lean)  # every model trained
    assert len({r.selected.tobytes() for r in lean}) > 6  # the methods chose apart


def test_the_lean_path_is_taken_unless_a_run_observes_updates(data: FederatedData) -> None:
    config = SimConfig(rounds=2)
    taken: list[bool] = []
    step = lockstep._Stream.step

    def spy(self: lockstep._Stream, t: int, avail: Any) -> None:
        taken.append(self.lean)
        step(self, t, avail)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lockstep._Stream, "step", spy)
        simulate(six_methods(0), data, config)
        assert taken and all(taken)
        taken.clear()
        simulate([*six_methods(0), RunSpec(DivFL(M, stale=True), 0, "stale")], data, config)
        assert taken and not any(taken)


def test_the_plan_takes_the_available_clients_when_a_probe_names_them_all() -> None:
    everyone = np.array([0, 2, 3, 5], dtype=np.intp)
    some = np.array([2, 5], dtype=np.intp)
    probes = [Probe(ProbeKind.UPDATES), Probe(ProbeKind.LOSSES), NO_PROBE]
    blind = [None, None, Selection(np.array([5, 0]))]

    named = _plan_early(probes, [some, everyone, NOBODY], blind, NOBODY, everyone)
    unnamed = _plan_early(probes, [some, everyone.copy(), NOBODY], blind, NOBODY, everyone)
    full_only = _plan_early(
        [Probe(ProbeKind.UPDATES), Probe(ProbeKind.LOSSES, loss_source=LossSource.FULL)],
        [some, everyone],
        [None, None],
        NOBODY,
        everyone,
    )

    assert named.union is everyone and named.blind == frozenset({2})
    assert unnamed.union.tolist() == everyone.tolist() and unnamed.blind == named.blind
    assert full_only.union.tolist() == [2, 5]  # full losses are no early job
