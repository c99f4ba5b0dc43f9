"""``logistic-torch`` is the paper's model: on the quick configuration it makes the same choices.

Both models start from zero and see the same minibatches (counter-based streams), so every
method must select the same clients in every round and reach the same accuracies; only the
float32 rounding of PyTorch's kernels differs from NumPy's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

from adcs.data import load_subset
from adcs.experiments.config import ModelSettings, packaged_config
from adcs.experiments.runner import run_experiment


def test_logistic_torch_selects_like_the_numpy_model_on_the_quick_configuration(
    tmp_path: Path,
) -> None:
    dataset = load_subset()  # the same in every checkout and in CI
    quick = packaged_config("quick")
    folders = {}
    for kind in ("logistic", "logistic-torch"):
        config = dataclasses.replace(quick, model=ModelSettings(kind=kind))
        folders[kind] = run_experiment(config, tmp_path / kind, dataset=dataset, workers=1).folder
    numpy_sel = np.load(folders["logistic"] / "selections.npz")
    torch_sel = np.load(folders["logistic-torch"] / "selections.npz")
    runs = [k for k in numpy_sel.files if k.startswith("selected/")]
    assert len(runs) == 6
    for key in runs:
        assert numpy_sel[key].shape == (quick.sim.rounds, quick.m)
        rounds_differ = np.flatnonzero((numpy_sel[key] != torch_sel[key]).any(axis=1))
        assert rounds_differ.size == 0, f"{key}: first different round {rounds_differ[:1]}"
    numpy_acc = np.load(folders["logistic"] / "client_acc.npz")
    torch_acc = np.load(folders["logistic-torch"] / "client_acc.npz")
    for key in numpy_acc.files:
        np.testing.assert_allclose(torch_acc[key], numpy_acc[key], rtol=0, atol=1e-4)
    report = (folders["logistic-torch"] / "report.md").read_text()
    assert "multinomial logistic regression (PyTorch)" in report
