"""Suite-wide guards: no test may reach the network; property tests draw the same examples each run.

The default Hypothesis profile is derandomised so that a run of the suite is reproducible; set
``HYPOTHESIS_PROFILE=explore`` to search with fresh random examples (and add any failure it finds
as an explicit regression test).
"""

from __future__ import annotations

import os
import urllib.error

import pytest
from hypothesis import settings

from adcs.data import fashion_mnist

settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def _no_network(url: str) -> object:
    raise urllib.error.URLError(f"network disabled in tests (asked for {url})")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fashion_mnist, "_default_opener", _no_network)


# Tests that start clusters share machine-wide resources, so under pytest-xdist (`make test` runs
# `pytest -n 2 --dist loadgroup`) each kind runs on one worker, one test at a time:
# Flower's Deployment Runtime (SuperLink and SuperNode processes waiting out Flower's heartbeats),
# and Ray (Flower's Simulation Runtime and the Ray cluster tests, which could meet on one node).
_GROUPS = {
    "deployment": ("tests/flower/test_deployment",),
    "ray": (
        "tests/flower/test_strategy.py",
        "tests/flower/test_scheduled.py",
        "tests/flower/test_torch.py",
        "tests/flower/test_attacks.py",
        "tests/experiments/test_ray.py",
        "tests/benchmarks/test_bench_flower.py",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        for group, prefixes in _GROUPS.items():
            if where.startswith(prefixes):
                item.add_marker(pytest.mark.xdist_group(group))
