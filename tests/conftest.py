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
