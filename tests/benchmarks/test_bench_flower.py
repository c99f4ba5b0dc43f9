"""benchmarks/bench_flower.py: its arguments and the simulator leg (the Flower legs are the slow,
measured part; tests/flower/test_deployment.py runs the same app on the same runtimes)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")


@pytest.fixture(scope="module")
def bench() -> Any:
    from benchmarks import bench_flower

    return bench_flower


def test_arguments_are_checked(bench: Any) -> None:
    args = bench.parse_args(["--supernodes", "6,30", "--engines", "sim"])
    assert args.supernodes == [6, 30] and args.engines == ["sim"]
    assert [bench.clients_selected(n) for n in (6, 30)] == [4, 18]
    for bad in (["--supernodes", "7"], ["--engines", "ray"], ["--rounds", "1"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_round_records_become_per_round_figures(bench: Any) -> None:
    history = [
        {"wall_s": 9.0, "client_updates": 6},
        {"wall_s": 2.0, "client_updates": 4},
        {"wall_s": 4.0, "client_updates": 4},
    ]
    figures = bench._from_history("deployment", history, 20.0, 6, 4)
    assert figures.first_round_s == 9.0 and figures.per_round_s == 3.0
    assert figures.client_updates == 14 and figures.updates_per_s == pytest.approx(8 / 6)


def test_the_simulator_leg_runs(bench: Any, capsys: pytest.CaptureFixture[str]) -> None:
    (row,) = bench.main(["--engines", "sim", "--rounds", "3"])
    assert row.engine == "adcs.sim" and row.rounds == 3 and row.m == 18
    assert row.client_updates == 30 + 2 * 18  # one ADCS refresh probes all 30, then m per round
    assert "adcs.sim" in capsys.readouterr().out
