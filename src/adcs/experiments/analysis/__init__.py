"""Reading results: run records and series, statistics over seeds, time to accuracy, the neutral
report, figures, and the studies that write them (docs/design.md §6)."""
