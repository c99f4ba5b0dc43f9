"""Experiments: configurations, runs, results folders, figures and the report (docs/design.md §1, §6).

- `adcs.experiments.config` — TOML configurations → validated frozen dataclasses;
- `adcs.experiments.run.runner` — expand a configuration into distinct runs, simulate them
  (checkpointed, resumable), write the results folder;
- `adcs.experiments.run.folder` — results folders: checked before any work, locked while
  written, completed atomically, stale partial folders named;
- `adcs.experiments.analysis.report` — run records, series, the one meaning of *final*, and the
  neutral ``report.md``;
- `adcs.experiments.analysis.figures` — accuracy curves (matplotlib, imported there only);
- `adcs.experiments.paper` — the paper's setting, figures, Table 1, claims and report;
- `adcs.theory.check` — the paper's bounds against measured selection bias.

Only the configuration layer and the paper's study (which registers its outputs with
`adcs.experiments.analysis.outputs`) are imported here; the simulator and plotting load with the
modules that need them.
"""

from adcs.experiments import paper as _paper  # noqa: F401  (registers the paper's study)
from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    load_config,
    packaged_config,
)

__all__ = ["ConfigError", "ExperimentConfig", "load_config", "packaged_config"]
