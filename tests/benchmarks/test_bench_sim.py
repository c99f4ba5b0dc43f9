"""Smoke test of the simulator benchmark: its loops and the engine agree on what they compute."""

from __future__ import annotations

import re

import numpy as np

from adcs.data import load_subset
from benchmarks import bench_sim


def test_quick_run_checks_the_loops_against_the_engine(capsys) -> None:
    assert bench_sim.main(["--quick"]) == 0
    out = capsys.readouterr().out
    checks = re.findall(r"identical selections in (\d+)/(\d+) runs.*counts: (\w+)", out)
    assert len(checks) == 2  # the per-client and the per-run loop
    for same, total, counts in checks:
        assert same == total == "6" and counts == "True"
    assert "full grid wall time" in out and "Uniform" in out


def test_iid_data_shares_test_rows_when_clients_outnumber_them() -> None:
    dataset = load_subset()
    data = bench_sim.iid_data(dataset, dataset.test_labels.size + 7)
    assert data.n_clients == dataset.test_labels.size + 7
    assert int(data.data_sizes.sum()) == dataset.train_labels.size
    assert np.array_equal(data.test_indices[0], data.test_indices[dataset.test_labels.size])
