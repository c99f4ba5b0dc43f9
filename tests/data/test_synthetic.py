"""Synthetic(α, β) generated on demand: a pure function of (key, client, sample)."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.data.synthetic import INPUT_DIM, Synthetic, SyntheticClients
from adcs.sim.data import ClientData


def population(n: int = 5000, alpha: float = 1.0, beta: float = 1.0) -> SyntheticClients:
    return Synthetic(n, alpha, beta).clients(np.random.default_rng(0))


def test_sizes_are_log_normal_plus_fifty_split_ninety_ten() -> None:
    data = population(20_000)
    total = data.data_sizes + data.test_sizes
    assert isinstance(data, ClientData)
    assert total.min() >= 50
    np.testing.assert_array_equal(data.data_sizes, np.floor(0.9 * total).astype(int))
    # n − 50 = ⌊e^z⌋, z ~ N(4, 2²): median ⌊e⁴⌋ = 54, and P(n − 50 ≥ e⁶) = P(Z ≥ 1) = 0.159
    extra = total - 50
    assert 52 <= np.median(extra) <= 57
    assert 0.150 < np.mean(extra >= np.exp(6.0)) < 0.167  # 3 sd of the proportion
    assert extra.max() > np.exp(4 + 2 * 3.5)  # the heavy tail: beyond 3.5 sd in 20 000


def test_a_clients_data_do_not_depend_on_who_else_is_asked_nor_on_n() -> None:
    small, large = population(300), population(50_000)
    np.testing.assert_array_equal(small.data_sizes, large.data_sizes[:300])
    clients = np.array([7, 250, 7, 3])
    local = np.array([[0, 1], [5, 2], [3, 3], [0, 0]])
    x, y = small.train_batch(small.train_rows(clients, local))
    x2, y2 = large.train_batch(large.train_rows(clients, local))
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert x.shape == (4, 2, INPUT_DIM) and y.shape == (4, 2)
    np.testing.assert_array_equal(x[2, 0], x[2, 1])  # the same sample twice
    alone, _ = small.train_batch(small.train_rows(np.array([250]), np.array([[2]])))
    np.testing.assert_array_equal(alone[0, 0], x[1, 1])
    other = Synthetic(300).clients(np.random.default_rng(1))  # another key: other data
    assert not np.array_equal(other.train_batch(other.train_rows(clients, local))[0], x)


def test_inputs_spread_as_sigma_around_the_clients_mean_and_labels_follow_its_model() -> None:
    data = population(200)
    client = int(np.argmax(data.data_sizes))  # thousands of samples
    n = int(data.data_sizes[client])
    x, y = data.train_batch(data.train_rows(np.array([client]), np.arange(n)[None]))
    x, y = x[0], y[0]
    var = x.var(axis=0)
    expected = np.arange(1, INPUT_DIM + 1) ** -1.2
    assert np.all(np.abs(var / expected - 1) < 6 * np.sqrt(2 / n))
    # labels are a deterministic function of the input: the argmax of one linear model
    mean_x, weights, bias = data._parameters(np.array([client]))
    np.testing.assert_array_equal(y, np.argmax(x @ weights[0] + bias[0], axis=1))
    np.testing.assert_allclose(x.mean(axis=0), mean_x[0], atol=6 / np.sqrt(n))


def test_alpha_and_beta_set_how_far_clients_differ() -> None:
    def spread(alpha: float, beta: float) -> tuple[float, float]:
        data = population(2000, alpha, beta)
        mean_x, weights, _ = data._parameters(np.arange(2000))
        return float(mean_x.mean(axis=1).std()), float(weights.mean(axis=(1, 2)).std())

    x0, w0 = spread(0.0, 0.0)
    x1, w1 = spread(1.0, 1.0)
    assert x0 < 0.2 and w0 < 0.1  # only the unit noise around a common prior
    assert 0.9 < x1 < 1.15 and 0.9 < w1 < 1.1  # B_k, u_k of sd 1 dominate the clients' means


def test_test_rows_and_groups() -> None:
    data = population(400)
    clients = np.array([3, 10, 399])
    rows = data.test_rows(clients)
    assert rows.size == int(data.test_sizes[clients].sum())
    x, _ = data.test_batch(rows)
    assert x.shape == (rows.size, INPUT_DIM)
    # test sample j of client k is its sample ⌊0.9 n_k⌋ + j: not one of its training samples
    k = 10
    first_test = data.test_batch(data.test_rows(np.array([k]))[:1])[0]
    train_all = data.train_batch(
        data.train_rows(np.array([k]), np.arange(data.data_sizes[k])[None])
    )[0][0]
    assert not (train_all == first_test).all(axis=1).any()
    owner = np.repeat(np.arange(400), data.test_sizes)
    _, y_all = data.test_batch(data.test_rows(np.arange(400)))
    majority = np.array([np.bincount(y_all[owner == i], minlength=10).argmax() for i in range(400)])
    assert data.groups.shape == (400,) and data.n_groups == 10
    assert np.mean(majority == data.groups) > 0.85
    assert len(np.unique(data.groups)) == 10


def test_bad_hyperparameters() -> None:
    with pytest.raises(ValueError, match="n_clients"):
        Synthetic(0)
    with pytest.raises(ValueError, match="alpha"):
        Synthetic(10, alpha=-1.0)
    with pytest.raises(ValueError, match="beta"):
        Synthetic(10, beta=float("nan"))


def test_a_batch_finds_each_rows_client_whether_or_not_rows_come_one_client_per_row() -> None:
    clients = Synthetic(300).clients(np.random.default_rng(0))
    rng = np.random.default_rng(1)
    picked = np.sort(rng.choice(300, 12, replace=False))
    grouped = clients.train_rows(picked, rng.integers(0, 40, size=(12, 5)))  # one client a row
    mixed = grouped.reshape(-1)[rng.permutation(60)].reshape(12, 5)  # clients mixed in a row
    x_g, y_g = clients.train_batch(grouped)
    x_m, y_m = clients.train_batch(mixed)
    order = np.argsort(mixed.reshape(-1), kind="stable")
    back = np.argsort(grouped.reshape(-1), kind="stable")
    np.testing.assert_array_equal(x_m.reshape(60, -1)[order], x_g.reshape(60, -1)[back])
    np.testing.assert_array_equal(y_m.reshape(-1)[order], y_g.reshape(-1)[back])
    for i in range(12):  # and each row is its client's sample
        x_c, y_c = clients.train_batch(grouped[i : i + 1, :1].reshape(1))
        np.testing.assert_array_equal(x_c[0], x_g[i, 0])
        assert y_c[0] == y_g[i, 0]
