"""The leaderboard: every scheduler ranked on a suite of workloads, its report, and the sweeps run
the same way (docs/design.md §6)."""
