"""Suite-wide guards: no test may reach the network; property tests draw the same examples each run.

The default Hypothesis profile is derandomised so that a run of the suite is reproducible; set
``HYPOTHESIS_PROFILE=explore`` to search with fresh random examples (and add any failure it finds
as an explicit regression test).
"""

from __future__ import annotations

import functools
import os
import re
import urllib.error
from pathlib import Path

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


# A comparison of floats within a tolerance: the class of test whose bound may hold on one BLAS
# kernel and not on another. `.ci/run` runs these again under a second OpenBLAS kernel. A module
# is the unit (its helpers and fixtures compare for its tests), so a test that only calls a
# comparing helper of its own module is not missed.
_FLOAT_COMPARISON = re.compile(
    r"\bapprox\(|\ballclose\(|\bisclose\(|assert_allclose|assert_array_almost_equal"
    r"|assert_almost_equal|\bfinfo\("
)


@functools.cache
def _compares_floats(path: Path) -> bool:
    return bool(_FLOAT_COMPARISON.search(path.read_text(encoding="utf-8")))


# Tests that may start Ray run in one process, one at a time, after the others (which
# `scripts/run_tests.sh` spreads over the cores with pytest-xdist): Flower's Simulation Runtime
# calls ray.init(), which joins any cluster another test started, and its nodes' messages expire
# when other tests starve it of the CPU.
_ONE_PROCESS = re.compile(r"(^|/)flower/|(^|/)test_ray\.py$")


def _one_process(path: Path) -> bool:
    return bool(_ONE_PROCESS.search(path.relative_to(Path(__file__).parent).as_posix()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``numeric`` every test of a module that compares floats within a tolerance, and
    ``one_process`` every test that may start Ray (`_ONE_PROCESS`)."""
    for item in items:
        if _compares_floats(item.path):
            item.add_marker(pytest.mark.numeric)
        if _one_process(item.path):
            item.add_marker(pytest.mark.one_process)
