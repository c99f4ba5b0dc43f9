"""``SimConfig`` holds what is read per population (a trace, a device file) until
``for_clients`` completes it; the simulator refuses it incomplete."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adcs.sim import SimConfig, TraceAvailability
from adcs.sim.availability import TraceFile
from adcs.sim.engine import check_simulation
from adcs.sim.system import MeasuredSystem
from tests.sim.conftest import make_data


def test_for_clients_reads_the_trace_and_the_devices_for_the_population(tmp_path: Path) -> None:
    np.savez(tmp_path / "trace.npz", available=np.ones((10, 8), dtype=bool))
    (tmp_path / "devices.csv").write_text(
        "client,compute,upload,download\n" + "".join(f"{c},{c + 1},1e6,1e6\n" for c in range(8))
    )
    spec = SimConfig(
        rounds=10,
        availability=TraceFile(str(tmp_path / "trace.npz")),
        system=MeasuredSystem(str(tmp_path / "devices.csv"), deadline=5.0),
    )
    assert not spec.complete
    with pytest.raises(ValueError, match=r"config\.for_clients\(data\.n_clients\)"):
        check_simulation(make_data(), spec)
    config = spec.for_clients(8)
    assert config.complete and isinstance(config.availability, TraceAvailability)
    assert config.system is not None and config.system.deadline == 5.0
    assert config.system.profile is not None and config.system.profile.n_clients == 8
    check_simulation(make_data(), config)
    assert SimConfig(rounds=3).for_clients(8) == SimConfig(rounds=3)  # nothing to read


def test_for_clients_names_the_field_and_the_trace_is_held_to_the_run(tmp_path: Path) -> None:
    missing = SimConfig(rounds=10, availability=TraceFile(str(tmp_path / "none.npz")))
    with pytest.raises(ValueError, match=r"^availability: "):
        missing.for_clients(8)
    np.savez(tmp_path / "short.npz", available=np.ones((4, 8), dtype=bool))
    short = SimConfig(rounds=10, availability=TraceFile(str(tmp_path / "short.npz")))
    with pytest.raises(ValueError, match="covers 4 rounds but the run has 10"):
        short.for_clients(8)
    with pytest.raises(ValueError, match="availability must be an Availability"):
        SimConfig(availability="trace.npz")  # type: ignore[arg-type]
