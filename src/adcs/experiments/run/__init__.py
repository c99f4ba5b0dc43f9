"""Running a configuration: the plan (its distinct runs and batches), their execution, the results
folder and its files, and the manifest (docs/design.md §6)."""
