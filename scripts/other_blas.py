"""Name an OpenBLAS kernel other than the one this machine picks, for a second run of the tests.

OpenBLAS chooses its kernels by the CPU (``SkylakeX`` on AVX-512, ``Haswell`` on AVX2, ...) and
``OPENBLAS_CORETYPE`` overrides the choice. A float tolerance that holds on one kernel and not on
another is a guess, so CI runs the tests that compare floats again under a second kernel::

    OPENBLAS_CORETYPE=$(python scripts/other_blas.py) pytest -m numeric

``python scripts/other_blas.py`` prints ``Prescott`` (SSE3 kernels, on every x86-64), or ``Haswell``
where the machine's own kernel is already Prescott's; ``--check`` exits 1 unless the kernel in force
in this process (as NumPy's and SciPy's OpenBLAS report it) differs from the machine's own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

# OpenBLAS reports the Prescott kernels under the name of their core, Katmai.
_PRESCOTT = {"Prescott", "Katmai"}


def kernels() -> set[str]:
    """The architectures that NumPy's and SciPy's OpenBLAS report in this process."""
    import numpy  # noqa: F401  (loads NumPy's OpenBLAS)
    import scipy.linalg  # noqa: F401  (loads SciPy's)
    from threadpoolctl import threadpool_info

    return {
        str(info.get("architecture"))
        for info in threadpool_info()
        if info.get("internal_api") == "openblas"
    }


def own_kernels() -> set[str]:
    """The architectures this machine picks by itself (``OPENBLAS_CORETYPE`` unset)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    code = "from scripts.other_blas import kernels; print(*sorted(kernels()))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )  # fmt: skip
    return set(out.stdout.split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail unless another kernel is in force"
    )
    args = parser.parse_args(argv)
    own = own_kernels()
    if args.check:
        now = kernels()
        if not now or now & own:
            print(
                f"error: OpenBLAS runs {sorted(now)}, the machine's own {sorted(own)}",
                file=sys.stderr,
            )
            return 1
        print(
            f"OpenBLAS kernel {', '.join(sorted(now))} (the machine's own: {', '.join(sorted(own))})"
        )
        return 0
    print("Haswell" if own & _PRESCOTT else "Prescott")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
