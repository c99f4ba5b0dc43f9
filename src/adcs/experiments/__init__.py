"""Experiments: configurations, runs, results folders, figures and the report (DESIGN §1, §6).

- :mod:`adcs.experiments.config` — TOML configurations → validated frozen dataclasses;
- :mod:`adcs.experiments.runner` — expand a configuration into distinct runs, simulate them,
  write the results folder;
- :mod:`adcs.experiments.figures` — the paper's Figures 1–3 (matplotlib, imported there only);
- :mod:`adcs.experiments.report` — Table 1 and ``report.md``: our numbers beside the paper's and
  the paper's claims checked against them;
- :mod:`adcs.experiments.theory_check` — the paper's bounds against measured selection bias.

Only the configuration layer is imported here, so that importing this package stays light; the
simulator and plotting load with the modules that need them.
"""

from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    load_config,
    packaged_config,
)

__all__ = ["ConfigError", "ExperimentConfig", "load_config", "packaged_config"]
