"""``logistic-torch`` is the paper's model: on the quick configuration it makes the same choices.

Both models start from zero and see the same minibatches (counter-based streams), so every
method must select the same clients and reach the same accuracies; only the float32 rounding of
PyTorch's kernels differs from NumPy's. That rounding can resolve a near-tie (two clients' update
norms or distances equal to float32 precision) the other way in a rare round, so update-driven
methods may differ in a handful of rounds; the blind Uniform never.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

from adcs.data import load_subset
from adcs.experiments.config import packaged_config
from adcs.experiments.config.overrides import with_overrides
from adcs.experiments.run.runner import run_experiment
from adcs.sim.models import MODELS


@pytest.mark.parametrize(
    "rounds",
    [
        # 250 rounds hold 13 of ADCS's refreshes and 5 evaluations: every path, a quarter of the time
        250,
        pytest.param(None, marks=pytest.mark.slow, id="full"),  # the configuration's 1 000 rounds
    ],
)
def test_logistic_torch_selects_like_the_numpy_model_on_the_quick_configuration(
    tmp_path: Path, rounds: int | None
) -> None:
    dataset = load_subset()  # the same in every checkout and in CI
    quick = packaged_config("quick")
    if rounds is not None:
        quick = with_overrides(quick, rounds=rounds)
    folders = {}
    for kind in ("logistic", "logistic-torch"):
        config = dataclasses.replace(quick, model=MODELS[kind]())
        folders[kind] = run_experiment(config, tmp_path / kind, dataset=dataset, workers=1).folder
    numpy_sel = np.load(folders["logistic"] / "selections.npz")
    torch_sel = np.load(folders["logistic-torch"] / "selections.npz")
    runs = [k for k in numpy_sel.files if k.startswith("selected/")]
    assert len(runs) == 6
    for key in runs:
        assert numpy_sel[key].shape == (quick.sim.rounds, quick.m)
        rounds_differ = np.flatnonzero((numpy_sel[key] != torch_sel[key]).any(axis=1))
        allowed = 0 if key.startswith("selected/uniform") else quick.sim.rounds // 100
        assert rounds_differ.size <= allowed, f"{key}: rounds that differ {rounds_differ[:10]}"
    numpy_acc = np.load(folders["logistic"] / "client_acc.npz")
    torch_acc = np.load(folders["logistic-torch"] / "client_acc.npz")
    for key in numpy_acc.files:
        np.testing.assert_allclose(torch_acc[key], numpy_acc[key], rtol=0, atol=1e-4)
    report = (folders["logistic-torch"] / "report.md").read_text()
    assert "multinomial logistic regression (PyTorch)" in report
