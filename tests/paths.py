"""Where the tests find the full Fashion-MNIST files: ``$ADCS_DATA_DIR`` when it is set, else the
workplace's shared copy beside the checkout (``../shared/data/fashion-mnist``)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def full_data_dir() -> Path:
    """The folder the full-data tests read (it may not exist: they then skip)."""
    env = os.environ.get("ADCS_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return REPO.parent / "shared" / "data" / "fashion-mnist"


def has_full_data() -> bool:
    folder = full_data_dir()
    return all((folder / name).is_file() for name in FILES)
