"""Every rival scheduler runs in the simulator: its probes are served, observe fed, weights used."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.schedulers import (
    ADCS,
    DELTA,
    KDPP,
    MD,
    ClusteredSimilarity,
    ClusteredSize,
    FedCor,
    Oort,
)
from adcs.sim import BernoulliAvailability, RunSpec, SimConfig, simulate
from tests.sim.conftest import make_data

ROUNDS, M = 8, 4

RIVALS = {
    "md": lambda: MD(M),
    "clustered_size": lambda: ClusteredSize(M),
    "clustered_similarity": lambda: ClusteredSimilarity(M),
    "delta": lambda: DELTA(M),
    "oort": lambda: Oort(M),
    "fedcor": lambda: FedCor(M, warmup=2, refit_every=3),
    "kdpp": lambda: KDPP(M, refresh_every=3),
    "adcs-fresh": lambda: ADCS(M, refresh_every=3, fresh_quality=True),
}


@pytest.mark.parametrize("name", RIVALS)
def test_rival_runs_with_availability_and_dropout(name):
    data = make_data(seed=1, n_clients=12, clients_per_group=3)
    config = SimConfig(
        ROUNDS,
        batch_size=4,
        local_lr=0.3,
        eval_every=ROUNDS,
        weighting="data_size",
        availability=BernoulliAvailability(0.7),
        dropout=0.2,
    )
    (result,) = simulate([RunSpec(RIVALS[name](), 0, name)], data, config)
    for t in range(ROUNDS):
        k = min(M, int(result.n_available[t]))
        chosen = result.selected[t][result.selected[t] >= 0]
        assert chosen.size == k and np.unique(chosen).size == k
    assert np.isfinite(result.final_params).all()
    assert np.isfinite(result.worst_acc).all()


def test_costs_follow_each_rivals_probe_schedule():
    data = make_data(seed=2, n_clients=12, clients_per_group=3)
    n, config = data.n_clients, SimConfig(6, batch_size=4, local_lr=0.3, eval_every=6)
    runs = [
        RunSpec(MD(M), 0, "md"),
        RunSpec(ClusteredSimilarity(M), 0, "cs"),
        RunSpec(DELTA(M), 0, "delta"),
        RunSpec(FedCor(M, warmup=1, refit_every=4), 0, "fedcor"),
        RunSpec(ADCS(M, refresh_every=3, fresh_quality=True), 0, "fresh"),
    ]
    md, cs, delta, fedcor, fresh = simulate(runs, data, config)
    assert (md.client_updates, md.loss_evals) == (M * 6, 0)  # blind: the selected only
    assert cs.client_updates == n + M * 5 and cs.loss_evals == 0  # probe all once, then observe
    assert delta.client_updates == n * 6  # every update probed every round (selected reused)
    # FedCor measures rounds 0, 1 (warm-up) and 4, so probes losses at 0, 1, 2, 4 and 5
    assert fedcor.loss_evals == n * 5 and fedcor.client_updates == M * 6
    # fresh quality: updates of all at rounds 0 and 3, pool losses in the four other rounds
    assert fresh.client_updates == 2 * n + 4 * M and fresh.loss_evals == 4 * n
