"""The round, written once for every runtime (docs/design.md §1, §4 and §8; paper Algorithm 1).

* `adcs.round.contract` — what a scheduler is held to (its probe and its selection checked) and
  the aggregation weights;
* `adcs.round.clock` — a simulated clock: round seconds, the deadline, over-commitment;
* `adcs.round.adapt` — the scheduler a run's rounds ask, adapted through the wrappers that
  declare themselves (`adcs.round.adapt.SchedulerWrapper`);
* `adcs.round.machine` — one run's round as a state machine (`adcs.round.machine.RunRound`) and
  its record (`adcs.round.machine.PlayedRound`, the one shape every path keeps of a round);
* `adcs.round.play` — one round over any runtime that gathers losses and updates (the Flower
  strategies, the tests' in-process loop); the simulator plays many runs' rounds in lockstep
  (`adcs.sim.lockstep`).
"""
