"""Local training's defaults, the paper's (Sec. 6), shared by every runtime.

The simulator (`adcs.sim.SimConfig`), the configuration's ``[sim]`` table and the Flower
app (`adcs.flower.client.TrainDefaults`, `adcs.flower.Settings`) read them
here, so that a run with nothing set trains the same everywhere. This module imports nothing, so
the Flower ClientApp stays light.
"""

from __future__ import annotations

__all__ = ["BATCH_SIZE", "LOCAL_LR", "LOCAL_STEPS", "SERVER_LR"]

LOCAL_STEPS = 1
"""E, local SGD steps per round."""
BATCH_SIZE = 16
"""B, the local minibatch size."""
LOCAL_LR = 1e-3
"""η_ℓ, the local learning rate."""
SERVER_LR = 1.0
"""η_s, the server's learning rate."""
