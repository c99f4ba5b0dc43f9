"""RunSpec.stream: runs that share it draw the same scheduler randomness (paired comparisons)."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.adversary import Defence, Defended
from adcs.schedulers import Uniform
from adcs.sim import RunSpec, SimConfig, simulate
from tests.sim.conftest import make_data

CONFIG = SimConfig(12, batch_size=4, local_lr=0.3, eval_every=6)


def test_runs_that_share_a_stream_draw_the_same_selections():
    data = make_data(seed=3)
    defended = Defended(Uniform(3), Defence(corroborate=True, fence=2.0), seed=0)
    plain, paired, apart = simulate(
        [
            RunSpec(Uniform(3), 0, "off", stream="uniform"),
            RunSpec(defended, 0, "bound", stream="uniform"),
            RunSpec(defended, 0, "bound-own"),  # keyed by its run id
        ],
        data,
        CONFIG,
    )
    np.testing.assert_array_equal(plain.selected, paired.selected)
    assert not np.array_equal(plain.selected, apart.selected)


def test_a_stream_must_be_a_non_empty_string():
    with pytest.raises(ValueError, match="stream"):
        RunSpec(Uniform(3), 0, "run", stream="")
