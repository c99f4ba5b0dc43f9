"""Smoke test of the MAP benchmark: it measures what it says and skips what cannot fit."""

from __future__ import annotations

import math

from benchmarks import bench_map


def test_skip_rules_name_the_reason():
    assert "GB" in bench_map.estimate_skip("dense", 1_000_000, 100, 128, 4.0, 60.0)
    assert "naive greedy would take" in bench_map.estimate_skip(
        "naive", 30_000, 300, 300, 1e9, 60.0
    )
    assert bench_map.estimate_skip("features", 1_000_000, 100, 128, 4.0, 60.0) == ""


def test_measurements_are_real_numbers():
    results = bench_map.run((300,), (10,), (16,), budget_gb=1.0, naive_s=30.0)
    assert [r.method for r in results] == ["features", "dense", "naive"]
    for r in results:
        assert not r.skipped
        assert r.map_s > 0 and math.isfinite(r.map_s)
        assert r.peak_rss_mb > 10  # a Python process with numpy loaded
    features, dense, _ = results
    # the kernel (N × N, built in the untimed preparation) is never copied by the greedy
    assert dense.traced_mb < 300 * 300 * 8 / 1e6
    assert features.traced_mb < 300 * 300 * 8 / 1e6  # nor formed by the features path
