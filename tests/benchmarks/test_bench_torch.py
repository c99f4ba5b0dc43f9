"""Smoke tests of the PyTorch benchmark: a round by part, and whole runs against the loop."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

from typer.testing import CliRunner

from adcs import cli

# LeNet-5's multiply-adds per sample: conv 6·28·28·(1·5·5), conv 16·10·10·(6·5·5), linear
# 120·400, 84·120, 10·84
LENET5_MACS = 6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 120 * 400 + 84 * 120 + 10 * 84


def _parts(section: str) -> dict[str, list[float]]:
    """The rows of one path's breakdown: part → [ms, GFLOP computed, GFLOP minimum, GFLOP/s]."""
    number = r"(—|-?[\d.]+)"
    return {
        m[0]: [float(v) if v != "—" else float("nan") for v in m[1:]]
        for m in re.findall(
            rf"^([A-Za-z +]+?) +{number} +-?\d+% +{number} +{number} +{number}$",
            section,
            flags=re.MULTILINE,
        )
    }


def test_bench_torch_breaks_a_round_down_and_compares_with_the_loop_and_the_floor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the engine's round and its parts are timed inside simulate: T + 1 = 4 rounds a repetition
    args = ["--clients", "3", "--batch", "4", "--repeats", "2", "--rounds", "3",
            "--paths", "vmap,shared,shared-unfold"]  # fmt: skip
    recorded = cli._load_bench("torch")(args)["lenet5"]  # engine → CPU seconds per repetition
    output = capsys.readouterr().out
    sections = re.split(
        r"^path '([a-z-]+)', one engine round by part \(the mean of 3, the least of \d+ runs\):$",
        output,
        flags=re.M,
    )
    paths = dict(zip(sections[1::2], map(_parts, sections[2::2]), strict=True))
    assert list(paths) == ["vmap", "shared", "shared-unfold"]
    # two repetitions, each of the 3 rounds that a next round closes (the warm-up is not kept)
    assert re.findall(r"\(the mean of 3, the least of (\d+) runs\)", output) == ["2"] * 3
    for path in ("shared", "shared-unfold"):  # measured inside the engine's round, each part
        for part in ("data gather", "forward", "input gradient", "weight gradient"):
            assert paths[path][part][0] > 0, (path, part)
    common = ["data gather", "forward", "optimizer step", "Python and engine", "round"]
    assert set(paths["vmap"]) == {*common, "input + weight grad"}
    assert set(paths["shared"]) == {*common, "input gradient", "weight gradient"}
    samples, first = 3 * 4, 6 * 28 * 28 * 25
    for path, rows in paths.items():
        # the minimum of the forward pass is 2 FLOPs per multiply-add; it computes that, and
        # the shared pass the first convolution's 2 zero filters (6 → 8 channels) too
        assert rows["forward"][2] == pytest.approx(2 * LENET5_MACS * samples / 1e9, abs=1e-4)
        zeros = 2 * (first // 6 * 2) * samples if path != "vmap" else 0
        assert rows["forward"][1] == pytest.approx(rows["forward"][2] + zeros / 1e9, abs=1e-4), path
        # the parts add up to the engine's round (each printed to 0.01 ms)
        parts = sum(v[0] for k, v in rows.items() if k != "round")
        assert parts == pytest.approx(rows["round"][0], abs=0.01 * len(rows)), path
        # the round broken down is the least of the repetitions' rounds (printed to 0.01 ms)
        engine = recorded[f"adcs, path {path!r}: engine round"]
        assert len(engine) == 2
        assert rows["round"][0] == pytest.approx(min(engine) * 1e3, abs=0.005), path
    backward = 2 * (2 * LENET5_MACS - first) * samples / 1e9
    assert paths["vmap"]["input + weight grad"][2] == pytest.approx(backward, abs=1e-4)
    for path in ("shared", "shared-unfold"):  # the shared pass computes the minimum, no more
        for part in ("input gradient", "weight gradient"):
            computed, least = paths[path][part][1:3]
            assert computed == pytest.approx(least, abs=1e-4), (path, part)
    least_table, paired_table = output.split("paired by repetition")
    engines = re.findall(r"^(per-client loop|floor: one batch, (?:NCHW|channels-last)|adcs, .+?) "
                         r"+(-?[\d.]+) +(-?[\d.]+) +(-?[\d.]+) +(-?[\d.]+)$", least_table,
                         flags=re.MULTILINE)  # fmt: skip
    names = [e[0].strip() for e in engines]
    assert names == list(recorded)  # every engine timed in every repetition, listed once
    assert "per-client loop" in names and "floor: one batch, channels-last" in names
    assert "adcs, path 'shared': engine round" in names
    assert "adcs, path 'shared': loss_and_grad alone" in names
    loop, floor = recorded["per-client loop"], recorded["floor: one batch, channels-last"]
    for name, ms, per_cpu_s, x_loop, to_floor in engines:
        # each one's least time, printed to 0.01 ms, and the ratios of the least times
        times = recorded[name]
        assert len(times) == 2, name
        assert float(ms) == pytest.approx(min(times) * 1e3, abs=0.005), name
        assert float(x_loop) == pytest.approx(min(loop) / min(times), abs=0.005), name
        assert float(to_floor) == pytest.approx(min(times) / min(floor), abs=0.005), name
        # both columns come from one time, printed to 0.01 ms and 0.1 update/s: 3 / (ms / 1e3)
        # moves by up to 3e3 · 0.005 / (ms − 0.005)² over the ms column's rounding
        ms_f = float(ms)
        assert ms_f > 0.005, name
        rounding = 3e3 * 0.005 / (ms_f - 0.005) ** 2 + 0.05
        assert float(per_cpu_s) == pytest.approx(3e3 / ms_f, abs=rounding), name
    number = r"([\d.]+) \[([\d.]+)–([\d.]+)\]"
    paired = {
        m[0].strip(): [float(v) for v in m[1:]]
        for m in re.findall(rf"^(.+?) +{number} +{number}$", paired_table, flags=re.MULTILINE)
    }
    assert list(paired) == list(recorded)
    for name, printed in paired.items():
        # the ratios repetition by repetition: their median (of two, the mean), least, largest
        times = recorded[name]
        by_loop = [a / b for a, b in zip(loop, times, strict=True)]
        by_floor = [a / b for a, b in zip(times, floor, strict=True)]
        expected = [
            f(ratios) for ratios in (by_loop, by_floor) for f in (lambda r: sum(r) / 2, min, max)
        ]
        assert printed == pytest.approx(expected, abs=0.005), name
    assert paired["per-client loop"][:3] == [1.0, 1.0, 1.0]
    assert paired["floor: one batch, channels-last"][3:] == [1.0, 1.0, 1.0]


def test_bench_torch_refuses_an_unknown_path() -> None:
    result = CliRunner().invoke(cli.app, ["bench", "torch", "--paths", "vmap,fast"])
    assert result.exit_code != 0
    assert "--paths: unknown ['fast']" in result.output


def test_bench_torch_end_to_end_measures_both_engines_and_they_train_the_same_model() -> None:
    args = ["bench", "torch", "--end-to-end", "--rounds", "2", "--seeds", "2", "--workers", "2",
            "--cpu-only", "--loop-threads", "1"]  # fmt: skip
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    rows = re.findall(r"^(adcs, \d process(?:es)?|loop, \d threads?) +cpu +[\d.]+ +(\d+) +([\d.]+) ",
                      result.output, flags=re.MULTILINE)  # fmt: skip
    assert [r[0] for r in rows] == ["adcs, 2 processes", "adcs, 1 process", "loop, 1 thread"]
    assert all(int(updates) == 2 * 2 * 18 and float(rate) > 0 for _, updates, rate in rows)
    ratio = re.search(
        r"cpu: adcs / loop = ([\d.]+)x client updates/s \(([\d.]+)x per CPU", result.output
    )
    diff = re.search(r"largest \|w_adcs - w_loop\| after 2 rounds: ([\d.e+-]+)", result.output)
    assert ratio is not None and float(ratio.group(1)) > 0 and float(ratio.group(2)) > 0
    assert diff is not None and float(diff.group(1)) < 1e-4
