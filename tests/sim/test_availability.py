"""Availability models: reproducible masks, trace files, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.sim import (
    AlwaysAvailable,
    BernoulliAvailability,
    CyclicAvailability,
    SimConfig,
    TraceAvailability,
)
from adcs.streams import stream_key

GROUPS = np.repeat(np.arange(5), 4)


def test_bernoulli_masks_are_a_function_of_seed_and_round() -> None:
    model = BernoulliAvailability(0.3)
    k = stream_key(2)
    a = model.mask(k, 10, GROUPS)
    np.testing.assert_array_equal(a, model.mask(k, 10, GROUPS))
    assert not np.array_equal(a, model.mask(k, 11, GROUPS))
    rate = np.mean([model.mask(k, t, np.zeros(1000, dtype=np.intp)).mean() for t in range(50)])
    assert abs(rate - 0.3) < 0.01
    assert AlwaysAvailable().mask(k, 0, GROUPS).all()


def test_cyclic_phases() -> None:
    k = stream_key(0)
    none = CyclicAvailability(period=10, duty=0.3, phase="none")
    assert [bool(none.mask(k, t, GROUPS)[0]) for t in range(10)] == [True] * 3 + [False] * 7
    per_client = CyclicAvailability(period=10, duty=0.3, phase="client")
    masks = np.array([per_client.mask(k, t, GROUPS) for t in range(10)])
    np.testing.assert_array_equal(masks.sum(axis=0), 3)  # each client: 3 rounds of every 10


def test_traces_from_npz_and_csv(tmp_path) -> None:
    table = np.random.default_rng(0).random((6, 4)) < 0.5
    np.savez(tmp_path / "t.npz", available=table)
    trace = TraceAvailability.load(tmp_path / "t.npz", 4)
    np.testing.assert_array_equal(trace.mask(0, 2, np.zeros(4, dtype=np.intp)), table[2])
    pairs = "round,client\n" + "".join(
        f"{t},{c}\n" for t, c in zip(*np.nonzero(table), strict=True)
    )
    (tmp_path / "t.csv").write_text(pairs)
    from_csv = TraceAvailability.load(tmp_path / "t.csv", 4)
    np.testing.assert_array_equal(
        from_csv.table[: table.shape[0]], table[: from_csv.table.shape[0]]
    )
    with pytest.raises(ValueError, match="covers 6 rounds"):
        SimConfig(rounds=7, availability=trace)
    SimConfig(rounds=7, availability=TraceAvailability(table, repeat=True))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("round,client\n0,9\n", "client in"),
        ("0,x\n", "expected 'round,client'"),
        ("", r"no \(round"),
    ],
)
def test_bad_trace_files_are_named(tmp_path, content: str, message: str) -> None:
    (tmp_path / "bad.csv").write_text(content)
    with pytest.raises(ValueError, match=message):
        TraceAvailability.load(tmp_path / "bad.csv", 4)
    with pytest.raises(ValueError, match="does not exist"):
        TraceAvailability.load(tmp_path / "missing.npz", 4)
    np.savez(tmp_path / "wrong.npz", available=np.ones((3, 5), dtype=bool))
    with pytest.raises(ValueError, match=r"expected \(rounds, 4\)"):
        TraceAvailability.load(tmp_path / "wrong.npz", 4)


def test_a_trace_file_that_is_not_what_its_name_says_is_named(tmp_path) -> None:
    np.savez(tmp_path / "good.npz", available=np.ones((3, 4), dtype=bool))
    whole = (tmp_path / "good.npz").read_bytes()
    for name, content, message in [
        ("text.npz", b"round,client\n0,1\n", "text.npz is not a .npz archive"),
        ("cut.npz", whole[: len(whole) // 2], "cut.npz is not a .npz archive"),
        ("spoilt.npz", whole[:40] + bytes(20) + whole[60:], "spoilt.npz cannot be read: "),
        ("binary.csv", b"\xff\xfe\x00 binary", "binary.csv is not UTF-8 text"),
    ]:
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=f"availability trace .*{message}"):
            TraceAvailability.load(tmp_path / name, 4)


@pytest.mark.parametrize(
    ("factory", "name"),
    [(lambda: BernoulliAvailability(0.0), "p"), (lambda: CyclicAvailability(0, 0.5), "period"),
     (lambda: CyclicAvailability(4, 1.5), "duty"), (lambda: CyclicAvailability(4, 0.5, "x"), "phase")],
)  # fmt: skip
def test_bad_parameters_are_named(factory, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        factory()


@pytest.mark.parametrize("p", [0.02, 0.3, 0.9])
def test_bernoulli_draws_by_geometric_skips_are_independent_coins_of_probability_p(
    p: float,
) -> None:
    model = BernoulliAvailability(p)
    n, rounds = 2000, 200
    key = stream_key(11)
    masks = np.stack([model.mask(key, t, np.zeros(n, dtype=np.intp)) for t in range(rounds)])
    for t in (0, 57):  # the indices are the mask's, ascending, and a pure function of (seed, t)
        clients = model.available_clients(key, t, n)
        np.testing.assert_array_equal(clients, np.flatnonzero(masks[t]))
        np.testing.assert_array_equal(clients, model.available_clients(key, t, n))
    total = masks.size
    sd = np.sqrt(p * (1 - p) / total)
    assert abs(masks.mean() - p) < 5 * sd
    # neighbours and the first and last client are independent coins like any other
    both = (masks[:, 1:] & masks[:, :-1]).mean()
    assert abs(both - p * p) < 5 * np.sqrt(p * p * (1 - p * p) / total) + 1e-9
    assert abs(masks[:, 0].mean() - p) < 5 * np.sqrt(p * (1 - p) / rounds)
    assert abs(masks[:, -1].mean() - p) < 5 * np.sqrt(p * (1 - p) / rounds)
    counts = masks.sum(axis=1)  # Binomial(n, p) per round
    assert abs(counts.var() / (n * p * (1 - p)) - 1) < 0.5


def test_bernoulli_with_p_one_is_everyone_and_a_huge_population_costs_its_available_clients() -> (
    None
):
    assert BernoulliAvailability(1.0).available_clients(stream_key(0), 3, 7).tolist() == list(
        range(7)
    )
    clients = BernoulliAvailability(1e-5).available_clients(stream_key(0), 3, 10**9)
    assert clients.size < 100_000 and np.all(np.diff(clients) > 0) and clients[-1] < 10**9


@pytest.mark.parametrize("p", [0.01, 0.5])
def test_bernoulli_skips_drawn_in_blocks_give_the_same_clients_at_any_block_size(
    p: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adcs.sim import availability

    model, key = BernoulliAvailability(p), stream_key(5)
    sizes = (1, 9, 5000)
    drawn = [model.available_clients(key, t, n) for t in range(4) for n in sizes]
    monkeypatch.setattr(availability, "_SKIP_BLOCK", 3)  # many blocks, each a few skips
    again = [model.available_clients(key, t, n) for t in range(4) for n in sizes]
    for a, b in zip(drawn, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert sum(a.size for a in drawn) > 0
