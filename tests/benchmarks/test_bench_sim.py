"""Smoke test of the simulator benchmark: its loops and the engine agree on what they compute."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest

from adcs.data import load_subset
from benchmarks import bench_sim


@pytest.fixture(scope="module")
def quick_output() -> str:
    """What ``bench sim --quick`` prints: run once for the tests that read it."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert bench_sim.main(["--quick"]) == 0
    return buffer.getvalue()


def test_quick_run_checks_the_loops_against_the_engine(quick_output: str) -> None:
    out = quick_output
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


def test_quick_run_shows_where_a_seed_round_goes(quick_output: str) -> None:
    out = quick_output
    rows = dict(re.findall(r"^(\S.*?)\s{2,}(\d+\.\d{3})\s", out, flags=re.MULTILINE))
    parts = bench_sim._sibling("sim_breakdown").PARTS
    assert set(parts) <= set(rows)
    assert abs(sum(float(rows[p]) for p in parts) - float(rows["total"])) < 0.01
    computed, least = re.search(
        r"([\d.]+) MFLOP computed per seed-round, ([\d.]+) at least", out
    ).groups()
    assert float(computed) >= float(least) > 0  # the forward of every used sample at least
    assert "per-run loop (this file)" in out


def test_the_loops_evaluate_on_the_simulators_cadence() -> None:
    _, data = bench_sim.load_data(None, partition_seed=0)
    config = bench_sim.SimConfig(rounds=5, eval_every=2)
    runs = bench_sim.run_loop(bench_sim.fig1_specs(1)[:1], data, config, per_client=False)
    assert len(runs[0].client_acc) == config.eval_rounds.size == 4  # rounds 0, 2, 4, 5


def test_samples_go_to_the_innermost_named_part_unless_a_frame_claims_them() -> None:
    bd = bench_sim._sibling("sim_breakdown")
    assert bd._lookup(bd._RULES, "/x/src/adcs/sim/model.py", "block_grads") == bd.PROBE_UPDATES
    assert bd._lookup(bd._RULES, "/x/src/adcs/sim/lockstep.py", "step") == bd.ENGINE
    assert bd._lookup(bd._CLAIMS, "/x/src/adcs/sim/evaluate.py", "_cached") == bd.EVAL
    assert bd._lookup(bd._CLAIMS, "/x/src/adcs/schedulers/ocs.py", "select") == bd.SELECT
    assert bd._lookup(bd._CLAIMS, "/x/src/adcs/schedulers/base.py", "usable") is None
    assert bd._lookup(bd._RULES, "/x/numpy/core/numeric.py", "ones") is None


def test_a_missing_plain_loop_script_is_one_error_line_before_any_work(tmp_path) -> None:
    import pytest

    with pytest.raises(SystemExit, match=r"^error: --plain-loop .*nope\.py: no such file$"):
        bench_sim.main(["--quick", "--plain-loop", str(tmp_path / "nope.py")])


def test_each_other_layout_computes_what_the_simulator_does(capsys) -> None:
    layouts = bench_sim._sibling("sim_layouts")
    _, data = bench_sim.load_data(None, partition_seed=0)
    pairs = layouts.alternatives(data)
    assert len(pairs) == 4  # probe, its product alone, forward, one-pass gather (uint8 data)
    for name, ours, other in pairs:
        if name == layouts.PRODUCT_ALONE:  # (G, C, F): ours is (G, (F + 1) C), biases last
            f, c = data.train_images.shape[1], data.n_classes
            theirs = ours().reshape(len(other()), f + 1, c)[:, :f, :]
            np.testing.assert_allclose(other().transpose(0, 2, 1), theirs, rtol=1e-5, atol=1e-7)
        else:
            np.testing.assert_allclose(other(), ours(), rtol=1e-5, atol=1e-7)
    rows = layouts.layout_rows(data)
    assert len(rows) == 1 + len(pairs) and all(re.search(r"\d+\.\d{3}", r) for r in rows[1:])
