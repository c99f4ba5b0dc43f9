"""Smoke test of the PyTorch benchmark: both engines run, through the CLI, and agree."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

from typer.testing import CliRunner

from adcs import cli


def test_bench_torch_measures_both_engines_and_they_train_the_same_model() -> None:
    args = ["bench", "torch", "--rounds", "2", "--seeds", "2", "--workers", "2", "--cpu-only"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    rows = re.findall(r"^(adcs, \d process(?:es)?|loop, \d threads?) +cpu +[\d.]+ +(\d+) +([\d.]+)$",
                      result.output, flags=re.MULTILINE)  # fmt: skip
    assert [r[0] for r in rows] == ["adcs, 2 processes", "adcs, 1 process", rows[2][0]]
    assert rows[2][0].startswith("loop")
    assert all(int(updates) == 2 * 2 * 18 and float(rate) > 0 for _, updates, rate in rows)
    ratio = re.search(r"cpu: adcs / loop = ([\d.]+)x", result.output)
    diff = re.search(r"largest \|w_adcs - w_loop\| after 2 rounds: ([\d.e+-]+)", result.output)
    assert ratio is not None and float(ratio.group(1)) > 0
    assert diff is not None and float(diff.group(1)) < 1e-4
