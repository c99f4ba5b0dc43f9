"""Who is malicious: the clients an attack names, or k of them drawn from each seed.

`Liars` and `Crafted` both take exactly one of
``clients`` (fixed indices) and ``n_malicious`` (drawn per seed by `malicious_clients`, so
every method of a seed faces the same clients); the checks below are theirs (docs/design.md §7).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adcs._validate import check_int, is_int
from adcs.streams import Domain, round_generator, stream_key

__all__ = ["check_members", "malicious_clients", "members_of"]


def malicious_clients(seed: int, n_clients: int, k: int) -> tuple[int, ...]:
    """The ``k`` malicious clients of ``seed``, ascending.

    A counter-based draw (`adcs.streams.Domain` ATTACK) of a permutation of the clients,
    the first ``k`` taken: the same for every method of a seed, and nested in ``k`` (the single
    liar of k = 1 is one of the three of k = 3).
    """
    check_int("n_clients", n_clients)
    check_int("k", k, minimum=1, maximum=n_clients)
    order = round_generator(stream_key(seed), Domain.ATTACK, 0).permutation(n_clients)
    return tuple(sorted(int(c) for c in order[:k]))


def check_members(clients: Any, n_malicious: Any) -> tuple[int, ...] | None:
    """``clients`` as a tuple in the order given (None with ``n_malicious``), both checked.

    Raises
    ------
    ValueError
        Both or neither given; ``clients`` not a non-empty sequence of distinct integers ≥ 0;
        ``n_malicious`` not an integer ≥ 1.
    """
    if (clients is None) == (n_malicious is None):
        raise ValueError("clients or n_malicious: give exactly one of them")
    if clients is None:
        check_int("n_malicious", n_malicious)
        return None
    if isinstance(clients, (str, bytes)) or not isinstance(clients, Sequence) or not clients:
        shown = list(clients) if isinstance(clients, tuple) else clients
        raise ValueError(f"clients must be a non-empty list of client indices, got {shown!r}")
    if not all(is_int(c) and c >= 0 for c in clients):
        raise ValueError(f"clients must hold integers >= 0, got {list(clients)}")
    if len(set(clients)) != len(clients):
        raise ValueError(f"clients repeats a client: {list(clients)}")
    return tuple(int(c) for c in clients)


def members_of(
    clients: Sequence[int] | None, n_malicious: int | None, seed: int, n_clients: int
) -> tuple[int, ...]:
    """The malicious clients of ``seed`` among ``n_clients``, ascending.

    Raises
    ------
    ValueError
        A named client is not one of the ``n_clients``, or more are asked than there are.
    """
    if clients is not None:
        if max(clients) >= n_clients:
            raise ValueError(f"clients {list(clients)} must lie in [0, {n_clients})")
        return tuple(sorted(clients))
    assert n_malicious is not None
    if n_malicious > n_clients:
        raise ValueError(f"n_malicious={n_malicious} exceeds N={n_clients}")
    return malicious_clients(seed, n_clients, n_malicious)
