"""What the streams of a simulation share: minibatch rows drawn ahead are those of each round."""

from __future__ import annotations

import numpy as np

from adcs.sim import SimConfig
from adcs.sim.context import _AHEAD_ROUNDS, _context
from adcs.streams import minibatch_indices, stream_key
from tests.sim.conftest import make_data


def test_minibatch_rows_drawn_ahead_are_each_rounds_own() -> None:
    data = make_data(n_clients=8)
    ctx = _context(data, SimConfig(rounds=3 * _AHEAD_ROUNDS, batch_size=5, local_steps=2), None)
    key = stream_key(3)
    rng = np.random.default_rng(0)
    for t in [
        0,
        1,
        _AHEAD_ROUNDS - 1,
        _AHEAD_ROUNDS,
        2 * _AHEAD_ROUNDS + 7,
        5,
        3 * _AHEAD_ROUNDS - 1,
    ]:
        clients = np.sort(rng.choice(8, size=int(rng.integers(1, 9)), replace=False))
        local = minibatch_indices(key, clients, t, data.data_sizes[clients], 2, 5)
        expected = data.train_rows(clients, local.reshape(clients.size, 10))
        np.testing.assert_array_equal(ctx.minibatch(key, t, clients), expected)


def test_a_sparse_round_draws_only_its_own_clients_and_the_same_rows() -> None:
    data = make_data(n_clients=40)
    ctx = _context(data, SimConfig(rounds=10, batch_size=5), None)
    key = stream_key(4)
    few = np.array([3, 17, 29])
    local = minibatch_indices(key, few, 2, data.data_sizes[few], 1, 5)
    np.testing.assert_array_equal(ctx.minibatch(key, 2, few), data.train_rows(few, local[:, 0]))
    assert key not in ctx._ahead  # 3 of 40: no draw ahead
    everyone = np.arange(40)
    ctx.minibatch(key, 2, everyone)
    assert key in ctx._ahead
    np.testing.assert_array_equal(ctx.minibatch(key, 3, few), ctx._ahead[key][1][few, 1])
