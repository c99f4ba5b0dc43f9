"""Tests of the theory-check experiment: end to end on the quick grid, atomic output, real updates."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from adcs import theory
from adcs.experiments.run.folder import RunError
from adcs.theory.check import (
    CaseSpec,
    clustered_updates,
    equicorrelated_centers,
    fashion_mnist_probe,
    run_theory_check,
    synthetic_grid,
)
from tests.paths import full_data_dir

DATA = full_data_dir()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_real(n_groups: int = 10, per_group: int = 3, dim: int = 40) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(5)
    centers = rng.standard_normal((n_groups, dim))
    groups = np.repeat(np.arange(n_groups), per_group)
    updates = centers[groups] + 0.3 * rng.standard_normal((groups.size, dim))
    return updates, groups, rng.random(groups.size)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    updates, groups, quality = fake_real()
    out = tmp_path_factory.mktemp("run") / "theory"
    return run_theory_check(
        out,
        quick=True,
        seed=1,
        real_updates=updates,
        real_groups=groups,
        real_quality=quality,
        real_description="synthetic stand-in",
    )


def test_quick_run_writes_a_manifest(quick_run: Path) -> None:
    manifest = json.loads((quick_run.parent / "manifest.json").read_text())
    assert manifest["experiment"] == "theory" and manifest["quick"] is True
    assert manifest["seed"] == 1 and manifest["real_updates"] == "synthetic stand-in"
    assert manifest["versions"]["numpy"] == np.__version__ and manifest["wall_s"] > 0
    leftovers = sorted(p.name for p in quick_run.parent.parent.iterdir())
    assert leftovers == ["theory"]  # no lock file, no partial folder


def test_quick_run_writes_report_figures_and_tables(quick_run: Path) -> None:
    out = quick_run.parent
    assert quick_run.name == "report.md" and quick_run.is_file()
    text = quick_run.read_text()
    assert "Assumption 1 holds in" in text and "Real client updates" in text
    for name in ("bias_vs_bounds.png", "distinct_vs_radius.png", "real_updates.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
        assert name in text
    with (out / "grid.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(synthetic_grid(quick=True))
    # nothing but the finished folder is left next to it
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


def test_quick_run_findings_are_consistent_with_the_theory(quick_run: Path) -> None:
    payload = json.loads((quick_run.parent / "summary.json").read_text())
    s = payload["summary"]
    assert 0 < s["assumption_holds"] < s["cases"]  # the grid straddles the threshold
    # Theorem 1: exact MAP takes m distinct clusters and stays within eq. 14 under Assumption 1
    assert (
        s["when_assumption_holds"]["exact"]["distinct"]
        == s["when_assumption_holds"]["exact"]["cases"]
    )
    assert s["eq14_violations_when_assumption_holds"] == {"greedy": 0, "exact": 0}
    # greedy: proved (cluster_geometry notes) and observed
    assert s["when_greedy_condition_holds"]["greedy"]["distinct"] == s["greedy_condition_holds"]
    # eq. 15 holds for every subset, so no method may exceed it
    assert all(v == 0 for v in s["eq15_violations"].values())
    real = payload["real"]
    assert [r["m"] for r in real] == [2, 3, 5, 10, 18]
    assert all(r["greedy_bias"] <= r["eq15"] * (1 + 1e-9) for r in real)


def test_grid_case_generator_controls_mu_and_r() -> None:
    rng = np.random.default_rng(0)
    centers = equicorrelated_centers(4, 0.3, 16, rng, norm_spread=1.0)
    z = np.repeat(np.arange(4), 3)
    g = clustered_updates(centers, z, 0.05, rng)
    geo = theory.cluster_geometry(g, z, np.zeros(12), 3, theta=0.0, centers=centers)
    assert geo.mu == pytest.approx(0.3, abs=1e-12)
    assert geo.kappa == pytest.approx(1.0, abs=1e-12)
    assert geo.r == pytest.approx(0.05, abs=1e-12)


def test_refuses_a_non_empty_folder_and_leaves_it_alone(tmp_path: Path) -> None:
    out = tmp_path / "theory"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(RunError, match="adcs did not write"):
        run_theory_check(out, quick=True, seed=0, overwrite=True)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["theory"]


def test_bad_real_input_fails_before_writing_anything(tmp_path: Path) -> None:
    updates, groups, _ = fake_real()
    bad = updates.copy()
    bad[0, 0] = math.nan
    out = tmp_path / "theory"
    with pytest.raises(ValueError, match="NaN"):
        run_theory_check(out, quick=True, seed=0, real_updates=bad, real_groups=groups)
    with pytest.raises(ValueError, match="together"):
        run_theory_check(out, quick=True, seed=0, real_updates=updates)
    with pytest.raises(ValueError, match="real_quality"):
        run_theory_check(
            out,
            quick=True,
            seed=0,
            real_updates=updates,
            real_groups=groups,
            real_quality=np.ones(3),
        )
    assert list(tmp_path.iterdir()) == []


def test_failure_midway_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import adcs.theory.check as tc

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(tc, "_plot", boom)
    with pytest.raises(RuntimeError, match="plotting failed"):
        run_theory_check(tmp_path / "theory", quick=True, seed=0)
    assert list(tmp_path.iterdir()) == []


def test_grid_sizes() -> None:
    assert len(synthetic_grid(quick=True)) == 64
    full = synthetic_grid(quick=False)
    assert len(full) == 4860
    assert all(spec.m <= spec.n_clusters for spec in full)


def test_case_spec_validation() -> None:
    with pytest.raises(ValueError, match="m must"):
        CaseSpec((2, 2), 3, 0.0, 0.5, 0.0)
    with pytest.raises(ValueError, match="mu"):
        CaseSpec((2, 2), 2, 1.0, 0.5, 0.0)
    with pytest.raises(ValueError, match="r_ratio"):
        CaseSpec((2, 2), 2, 0.0, -1.0, 0.0)
    with pytest.raises(ValueError, match="cluster_sizes"):
        CaseSpec((2, 0), 1, 0.0, 0.5, 0.0)


@pytest.mark.skipif(not DATA.is_dir(), reason="Fashion-MNIST files not found next to the repo")
def test_fashion_mnist_probe_paper_setting() -> None:
    probe = fashion_mnist_probe(2, seed=0, data_path=DATA)
    assert probe.updates.shape == (30, 785 * 10)
    np.testing.assert_array_equal(np.bincount(probe.groups), np.full(10, 3))
    assert np.isfinite(probe.updates).all() and np.isfinite(probe.losses).all()
    again = fashion_mnist_probe(2, seed=0, data_path=DATA)
    np.testing.assert_array_equal(probe.updates, again.updates)
    # at w = 0 every logit is 0, so every client's loss is log 10 and its bias update is
    # −η_ℓ(1/10 − share of each class); pure label skew puts all of group k's data on class k
    fresh = fashion_mnist_probe(0, seed=0, data_path=DATA)
    np.testing.assert_allclose(fresh.losses, math.log(10), rtol=1e-6)
    bias_grad = fresh.updates.reshape(30, 785, 10)[:, 784, :] / -1e-3
    expected = np.full((30, 10), 0.1)
    expected[np.arange(30), fresh.groups] -= 1.0
    np.testing.assert_allclose(bias_grad, expected, atol=1e-5)
