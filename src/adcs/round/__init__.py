"""The round, written once for every runtime (docs/design.md §1, §4 and §8; paper Algorithm 1).

* `adcs.round.contract` — the selection contract and the aggregation weights;
* `adcs.round.machine` — one run's round as a state machine;
* `adcs.round.play` — one round over any runtime that gathers losses and updates.
"""
