"""Corroborating peers from history (``Defence.peer_history``, `adcs.adversary.peers`)."""

from __future__ import annotations

import numpy as np

from adcs.adversary import Defence, Defended
from adcs.adversary.peers import MIN_PAIRS, history_peers
from adcs.schedulers.base import ClientStats
from tests.adversary.conftest import DIM, GROUP, Fixed, N, Recording

VICTIMS, COLLUDERS = (0, 1, 2), (9, 10)


def affinities(pairs: dict[tuple[int, int], float], n: int, times: int) -> tuple:
    sums, counts = np.zeros((n, n)), np.zeros((n, n), dtype=np.intp)
    for (i, j), a in pairs.items():
        sums[i, j], counts[i, j] = a * times, times
    return sums, counts


def test_near_duplicate_peers_collapse_to_one():
    # 0's real mates 1, 2 at 0.98; colluders 3, 4 at 0.995 to 0 and 0.9999 to each other
    pairs = {(0, 1): 0.98, (0, 2): 0.98, (1, 2): 0.98, (0, 3): 0.995, (0, 4): 0.995}
    pairs[(3, 4)] = 0.9999
    peers = history_peers(*affinities(pairs, 5, MIN_PAIRS), p=2)
    assert peers[0, 0] == 3 and peers[0, 1] in (1, 2)  # one colluder, then a real mate
    assert set(peers[1].tolist()) == {0, 2}  # honest mates are not duplicates of each other


def test_a_pair_seen_too_rarely_is_no_peer():
    peers = history_peers(*affinities({(0, 1): 0.99}, 3, MIN_PAIRS - 1), p=2)
    assert (peers == -1).all()


def group_updates(rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    noise = 0.05 * rng.normal(size=(N, DIM))
    return (np.repeat(centres, GROUP, axis=0) + noise).astype(np.float32)


def smothered_losses(peer_history: bool) -> np.ndarray:
    """The losses the scheduler sees when two colluders smother group 0 (the red team's attack):
    they report the mean of the group's received directions at 1 % of its norm, and loss 0."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(N // GROUP, DIM))
    recording = Recording(Fixed(4))
    defence = Defence(corroborate=True, peers=2, peer_history=peer_history, window=10)
    sched = Defended(recording, defence, 0)
    state = sched.init(N)
    honest = np.array([c for c in range(N) if c not in COLLUDERS])
    available = np.ones(N, dtype=bool)
    losses = np.repeat(np.linspace(1.0, 2.0, N // GROUP), GROUP) + 0.01 * rng.random(N)
    for t in range(20):  # two periods of honest receipts; the colluders are never selected
        updates = group_updates(rng, centres)
        stats = ClientStats(available, np.arange(N), losses, updates)
        _, state = sched.select(state, t, stats, rng)
        state = sched.observe(state, t, honest, updates[honest], None)
    updates = group_updates(rng, centres)
    lure = updates[list(VICTIMS)].mean(axis=0) * 0.01
    updates[list(COLLUDERS)] = lure
    attacked = losses.copy()
    attacked[list(COLLUDERS)] = 0.0
    sched.select(state, 20, ClientStats(available, np.arange(N), attacked, updates), rng)
    return np.asarray(recording.seen[-1].losses)


def test_colluders_smother_a_group_through_reported_peers():
    seen = smothered_losses(peer_history=False)
    assert np.all(seen[list(VICTIMS)] < 1e-6)  # median(own, 0, 0) = 0: the group is gone


def test_peers_from_history_keep_the_group_on_its_own_losses():
    seen = smothered_losses(peer_history=True)
    # each victim's loss is a median of its group's honest losses (≥ 1.0, jitter 1e-9)
    assert np.all(seen[list(VICTIMS)] >= 1.0)
