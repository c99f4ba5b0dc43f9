"""Suite-wide guards: no test may reach the network."""

from __future__ import annotations

import urllib.error

import pytest

from adcs.data import fashion_mnist


def _no_network(url: str) -> object:
    raise urllib.error.URLError(f"network disabled in tests (asked for {url})")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fashion_mnist, "_default_opener", _no_network)
