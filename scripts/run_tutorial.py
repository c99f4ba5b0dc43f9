"""Execute the tutorial notebook (docs/tutorial/tutorial.ipynb) and store its outputs in it.

The documentation site shows the stored outputs (mkdocs-jupyter does not execute), so run this
after changing the notebook or anything its numbers depend on. The outputs are computed on the full
Fashion-MNIST: pass its folder, or set ``$ADCS_DATA_DIR``. ``tests/test_tutorial.py`` executes the
notebook again and checks it against the stored outputs.

    python scripts/run_tutorial.py --data PATH/TO/fashion-mnist
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "tutorial" / "tutorial.ipynb"


def execute(notebook: Any, data_dir: Path, timeout: int = 600) -> Any:
    """Run every cell of ``notebook`` (in place) in a fresh kernel in a temporary folder, with
    ``$ADCS_DATA_DIR`` set to ``data_dir``; cell ids and execution counts as nbclient leaves them."""
    import nbclient

    env = {**os.environ, "ADCS_DATA_DIR": str(data_dir)}
    with tempfile.TemporaryDirectory() as folder:
        client = nbclient.NotebookClient(
            notebook, timeout=timeout, kernel_name="python3",
            resources={"metadata": {"path": folder}},
        )  # fmt: skip
        saved = dict(os.environ)
        os.environ.update(env)  # the kernel inherits this process's environment
        try:
            client.execute()
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return notebook


def main() -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=os.environ.get("ADCS_DATA_DIR"))
    args = parser.parse_args()
    if args.data is None or not (args.data / "train-images-idx3-ubyte.gz").is_file():
        print("error: --data (or $ADCS_DATA_DIR) must name the full Fashion-MNIST folder")
        return 2
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    start = time.perf_counter()
    execute(notebook, args.data.resolve())
    for cell in notebook.cells:  # the run's timestamps would change the file on every run
        cell.metadata.pop("execution", None)
    nbformat.write(notebook, NOTEBOOK)
    print(f"{NOTEBOOK.name}: executed in {time.perf_counter() - start:.0f} s and stored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
