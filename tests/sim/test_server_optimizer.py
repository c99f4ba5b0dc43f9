"""The simulator's server step through a server optimizer (``SimConfig.server_optimizer``)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from adcs.optimizers import FedAdam, FedAvg, FedAvgM, FedYogi
from adcs.schedulers import ADCS, OCS, Uniform
from adcs.sim import FederatedData, RunSpec, SimConfig, simulate
from adcs.sim.engine import Checkpointing, SimCheckpoint
from adcs.sim.model import LogisticRegression

from .test_checkpoint import assert_same

CONFIG = SimConfig(rounds=16, batch_size=4, local_lr=0.5, eval_every=5, dropout=0.6)


def specs() -> list[RunSpec]:
    """Three runs of one stream (seed 0) and one of another, m = 2 (with dropout 0.6 a run
    often has nobody to aggregate)."""
    return [
        RunSpec(Uniform(m=2), 0, "uniform/0"),
        RunSpec(OCS(m=2), 0, "ocs/0"),
        RunSpec(ADCS(m=2, refresh_every=3), 0, "adcs/0"),
        RunSpec(Uniform(m=2), 1, "uniform/1"),
    ]


@dataclass(frozen=True)
class Recording:
    """A server optimizer that records what the simulator hands it, then steps as ``inner``."""

    inner: Any
    calls: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, compare=False)

    def init(self, params: np.ndarray) -> Any:
        return self.inner.init(params)

    def update(self, aggregate: np.ndarray, state: Any, stepped: Any = None) -> Any:
        self.calls.append((aggregate.copy(), np.array(stepped)))
        return self.inner.update(aggregate, state, stepped)


def test_fedavg_as_an_object_is_the_default_server_step_to_the_bit(data: FederatedData) -> None:
    default = simulate(specs(), data, replace(CONFIG, server_lr=0.5))
    fedavg = simulate(specs(), data, replace(CONFIG, server_optimizer=FedAvg(eta=0.5)))
    assert_same(default, fedavg)


def _model(name: str) -> Any:
    if name == "numpy":
        return LogisticRegression(12, 4)  # the simulator's default model for these data
    torch_models = pytest.importorskip("adcs.sim.torch", reason="needs the extra adcs[torch]")
    return torch_models.TorchModel(lambda: torch_models.logistic(12, 4))


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_each_run_steps_by_its_own_rows_of_the_optimizer(data: FederatedData, engine: str) -> None:
    """Replaying the aggregates the simulator handed over, run by run, gives its models."""
    recording = Recording(FedAdam(eta=0.05))
    model = _model(engine)
    runs = specs()[:3]  # one stream: one call per round for the three runs
    results = simulate(runs, data, replace(CONFIG, server_optimizer=recording), model=model)
    assert len(recording.calls) == CONFIG.rounds
    stepped = np.stack([s for _, s in recording.calls])
    assert stepped.any() and not stepped.all()  # both branches: aggregated and nothing back
    delivered = np.stack([r.returned.any(axis=1) for r in results], axis=1)
    np.testing.assert_array_equal(stepped, delivered)  # stepped = some client's update came back
    for j, result in enumerate(results):
        params = model.init_params(1)
        state = FedAdam(eta=0.05).init(params)
        for aggregate, ran in recording.calls:
            step, state = FedAdam(eta=0.05).update(aggregate[j : j + 1], state, ran[j : j + 1])
            params += step
        np.testing.assert_array_equal(result.final_params, params[0])
        assert not np.array_equal(params, model.init_params(1))  # the model moved


@pytest.mark.parametrize("optimizer", [FedAvgM(eta=0.5), FedAdam(eta=0.05), FedYogi(eta=0.05)])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_resumed_call_gives_the_uninterrupted_results(
    data: FederatedData, optimizer: Any, workers: int
) -> None:
    config = replace(CONFIG, server_optimizer=optimizer)
    plain = simulate(specs(), data, config, workers=workers)
    saved: list[SimCheckpoint] = []

    def save(checkpoint: SimCheckpoint) -> None:
        saved.append(pickle.loads(pickle.dumps(checkpoint)))  # what a file would hold

    segments = Checkpointing(save, every=5)  # forked workers restart at every checkpoint
    assert_same(plain, simulate(specs(), data, config, workers=workers, checkpoint=segments))
    assert [c.rounds_done for c in saved] == [5, 10, 15]
    for checkpoint in saved:
        assert_same(plain, simulate(specs(), data, config, workers=workers, resume_from=checkpoint))
    # the optimizer's state is what resumes it: without it the call goes elsewhere
    stream = next(iter(saved[1].state["streams"].values()))
    assert stream.server_state is not None
    stream.server_state = optimizer.init(stream.params)
    restarted = simulate(specs(), data, config, resume_from=saved[1])
    assert not np.array_equal(restarted[0].final_params, plain[0].final_params)


def test_the_optimizer_changes_the_training(data: FederatedData) -> None:
    plain = simulate(specs()[:1], data, CONFIG)
    adam = simulate(specs()[:1], data, replace(CONFIG, server_optimizer=FedAdam(eta=0.05)))
    np.testing.assert_array_equal(plain[0].selected, adam[0].selected)  # a blind scheduler
    assert not np.allclose(plain[0].final_params, adam[0].final_params)


def test_server_lr_with_an_optimizer_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^server_lr=0\.5 is plain FedAvg's server rate"):
        SimConfig(server_lr=0.5, server_optimizer=FedAdam())
    with pytest.raises(ValueError, match=r"^server_optimizer must have init"):
        SimConfig(server_optimizer="fedadam")  # type: ignore[arg-type]
