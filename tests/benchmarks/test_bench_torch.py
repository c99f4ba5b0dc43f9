"""Smoke test of the PyTorch benchmark: both engines run, through the CLI, and agree."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

from typer.testing import CliRunner

from adcs import cli


def test_bench_torch_measures_both_engines_and_they_train_the_same_model() -> None:
    args = ["bench", "torch", "--rounds", "2", "--seeds", "2", "--workers", "2", "--cpu-only",
            "--loop-threads", "1"]  # fmt: skip
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
