"""Counter-based random streams: pure functions of what they are about (docs/design.md §4)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from adcs.streams import (
    Domain,
    _draw,
    _draw_rounds,
    counter_normal,
    counter_uniform,
    minibatch_indices,
    round_generator,
    scheduler_rng,
    stream_key,
)

KEY = stream_key(7)


MIXED_SIZES = np.array([500] * 20 + [9, 17, 30, 33, 40, 64, 3, 1, 100, 2] * 2)


def test_minibatch_draws_are_pinned() -> None:
    # the stream must never change silently: committed results depend on it
    out = minibatch_indices(KEY, np.arange(40), 12, MIXED_SIZES, 2, 8)
    digest = hashlib.sha256(out.astype("<i8").tobytes()).hexdigest()
    assert digest == "8160e8e4382f7949654d6e15154ef122d4057a1b0da61cd9a3ac064509d9b59c"


@pytest.mark.parametrize("per", [1, 5, 16])
def test_minibatches_drawn_for_many_rounds_at_once_are_those_of_each_round(per: int) -> None:
    clients = np.arange(40, dtype=np.int64) * 7919
    sizes = MIXED_SIZES.astype(np.int64)  # direct draws, rejections and whole shuffles
    block = _draw_rounds(KEY, clients, 30, 9, sizes, per)
    assert block.shape == (9, 40, per)
    for r in range(9):
        np.testing.assert_array_equal(block[r], _draw(KEY, clients, 30 + r, sizes, per))
        some = [3, 39, 22]
        np.testing.assert_array_equal(
            block[r, some], _draw(KEY, clients[some], 30 + r, sizes[some], per)
        )


def test_a_clients_minibatch_does_not_depend_on_who_else_is_asked() -> None:
    clients = np.arange(40)
    sizes = np.full(40, 500)
    every = minibatch_indices(KEY, clients, 12, sizes, 2, 8)
    some = minibatch_indices(KEY, clients[[31, 4, 4, 17]], 12, sizes[[31, 4, 4, 17]], 2, 8)
    np.testing.assert_array_equal(some, every[[31, 4, 4, 17]])
    assert not np.array_equal(every, minibatch_indices(KEY, clients, 13, sizes, 2, 8))
    assert not np.array_equal(every, minibatch_indices(stream_key(8), clients, 12, sizes, 2, 8))
    assert not np.array_equal(
        every, minibatch_indices(stream_key(7, "run"), clients, 12, sizes, 2, 8)
    )


@pytest.mark.parametrize("size", [3, 16, 40, 300, 5000])
def test_minibatches_are_distinct_in_range_and_uniform(size: int) -> None:
    n, per = 20_000, 16
    idx = minibatch_indices(KEY, np.arange(n), 3, np.full(n, size), 1, per).reshape(n, per)
    assert idx.min() >= 0 and idx.max() < size
    if size >= per:
        ordered = np.sort(idx, axis=1)
        assert (ordered[:, 1:] != ordered[:, :-1]).all()
    else:  # whole shuffles back to back
        for row in idx[:50].tolist():
            assert sorted(row[:size]) == list(range(size))
    for position in (0, per - 1):  # every position is uniform over the client's data: χ² test
        counts = np.bincount(idx[:, position], minlength=size)
        chi2 = ((counts - n / size) ** 2 / (n / size)).sum()
        assert abs(chi2 - (size - 1)) < 5 * math.sqrt(2 * (size - 1))


def test_counter_uniforms_are_uniform_and_independent_of_the_rows_asked() -> None:
    u = counter_uniform(KEY, Domain.DROPOUT, 5, np.arange(200_000))
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01
    np.testing.assert_array_equal(counter_uniform(KEY, Domain.DROPOUT, 5, [9, 3]), u[[9, 3]])
    assert not np.array_equal(u[:10], counter_uniform(KEY, Domain.AVAILABILITY, 5, np.arange(10)))


def test_round_and_scheduler_generators_are_reproducible_and_distinct() -> None:
    a = round_generator(KEY, Domain.AVAILABILITY, 3).random(5)
    np.testing.assert_array_equal(a, round_generator(KEY, Domain.AVAILABILITY, 3).random(5))
    assert not np.array_equal(a, round_generator(KEY, Domain.AVAILABILITY, 4).random(5))
    s = scheduler_rng(1, "adcs/seed1").random(3)
    np.testing.assert_array_equal(s, scheduler_rng(1, "adcs/seed1").random(3))
    assert not np.array_equal(s, scheduler_rng(1, "uniform/seed1").random(3))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"round_idx": -1}, "round_idx"), ({"local_steps": 0}, "local_steps"),
     ({"batch_size": 1.5}, "batch_size")],
)  # fmt: skip
def test_bad_minibatch_arguments_are_named(kwargs: dict, name: str) -> None:
    args = {"key": KEY, "clients": [0], "round_idx": 0, "sizes": [10], "local_steps": 1,
            "batch_size": 4, **kwargs}  # fmt: skip
    with pytest.raises(ValueError, match=name):
        minibatch_indices(**args)
    with pytest.raises(ValueError, match="seed"):
        stream_key(-1)


def test_a_run_id_that_is_no_string_is_named() -> None:
    # was AttributeError: 'int' object has no attribute 'encode'
    with pytest.raises(ValueError, match="run_id must be a string, got int 3"):
        scheduler_rng(0, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="run_id must be a string, got bytes"):
        stream_key(0, b"a")  # type: ignore[arg-type]


def test_counter_normals_are_standard_normal_and_per_row() -> None:
    from scipy import stats

    z = counter_normal(KEY, Domain.DATA, 0, np.arange(20_000), 61, salt=3)
    assert z.shape == (20_000, 61) and z.dtype == np.float32
    assert stats.kstest(z[:, 0], "norm").pvalue > 1e-3
    assert stats.kstest(z[:, 60], "norm").pvalue > 1e-3
    assert abs(float(z.mean())) < 0.003 and abs(float(z.std()) - 1.0) < 0.003
    # the two normals of one hash (columns j and j + 31) are uncorrelated
    assert abs(np.corrcoef(z[:, 0], z[:, 31])[0, 1]) < 0.03
    np.testing.assert_array_equal(
        counter_normal(KEY, Domain.DATA, 0, np.array([17, 3]), 61, salt=3), z[[17, 3]]
    )
    assert not np.array_equal(counter_normal(KEY, Domain.DATA, 0, np.arange(5), 61, salt=4), z[:5])
    with pytest.raises(ValueError, match="width"):
        counter_normal(KEY, Domain.DATA, 0, np.arange(3), 0)
