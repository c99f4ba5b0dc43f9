"""The simulator's data protocol and the Flower client's data are two public classes, two names."""

from __future__ import annotations

import pytest


def test_the_simulators_and_the_flower_clients_data_have_distinct_names() -> None:
    pytest.importorskip("flwr")
    import adcs.flower
    import adcs.sim
    from adcs.flower.client import LocalData
    from adcs.sim.data import ClientData

    assert adcs.sim.ClientData is ClientData and adcs.flower.LocalData is LocalData
    assert "ClientData" not in adcs.flower.__all__  # was: adcs.flower.ClientData, another class
    assert not hasattr(adcs.flower, "ClientData")
    assert "LocalData" not in adcs.sim.__all__
