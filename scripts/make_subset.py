"""Regenerate the Fashion-MNIST subset shipped in ``src/adcs/data/subset``.

The subset takes, for each class, the first ``--train-per-class`` training images and the first
``--test-per-class`` test images in the official files' order (no randomness), keeps their
original relative order, and writes them as gzip-compressed IDX files with the official names,
a deterministic gzip header (no file name, mtime 0, level 9), an ``MD5SUMS`` file that the loader
verifies, the MIT licence of Zalando SE and a ``NOTICE``. The full data are read through
:func:`adcs.data.load_fashion_mnist`, so they are MD5-verified first.

Usage::

    python scripts/make_subset.py [--source FOLDER] [--out FOLDER]

Without ``--source`` the usual lookup order applies (``$ADCS_DATA_DIR``, user cache, Debian
package, download); the shipped subset itself is never used as a source.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import logging
import os
import struct
import tempfile
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from adcs.data.fashion_mnist import (
    FILES,
    TEST_IMAGES,
    TEST_LABELS,
    TRAIN_IMAGES,
    TRAIN_LABELS,
    FashionMNIST,
    load_fashion_mnist,
)

logger = logging.getLogger("make_subset")

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "adcs" / "data" / "subset"
TRAIN_PER_CLASS = 550
TEST_PER_CLASS = 110

LICENSE = """\
The MIT License (MIT) Copyright © 2017 Zalando SE, https://tech.zalando.com

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and \
associated documentation files (the “Software”), to deal in the Software without restriction, \
including without limitation the rights to use, copy, modify, merge, publish, distribute, \
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is \
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or \
substantial portions of the Software.

THE SOFTWARE IS PROVIDED “AS IS”, WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT \
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND \
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, \
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT \
OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""

NOTICE = """\
Fashion-MNIST subset shipped with adcs
======================================

This folder holds a small, class-balanced subset of Fashion-MNIST (Xiao, Rasul and Vollgraf,
"Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms",
arXiv:1708.07747, 2017; https://github.com/zalandoresearch/fashion-mnist).
Copyright 2017 Zalando SE, released under the MIT licence (see LICENSE in this folder).

adcs falls back to it only when the full data set is neither found nor downloadable, and then
says so (FashionMNIST.is_subset is True). Results on it are not comparable with the paper's.

Content: for each of the 10 classes, the first {train_per_class} training images and the first
{test_per_class} test images in the order of the official files, in their original relative order:
{n_train} training and {n_test} test images, 28x28 uint8, with their labels. The files use the
official names and format (gzip-compressed IDX, magic 2051 for images, 2049 for labels).
MD5SUMS holds the MD5 of each .gz file; the loader checks it.

Made by scripts/make_subset.py from the official files (MD5-verified), deterministically.
"""


def first_per_class(labels: NDArray[np.uint8], per_class: int) -> NDArray[np.intp]:
    """Indices of the first ``per_class`` samples of each class, in the original order."""
    chosen = []
    for c in range(10):
        of_class = np.flatnonzero(labels == c)
        if len(of_class) < per_class:
            raise ValueError(f"class {c} has only {len(of_class)} samples, {per_class} asked")
        chosen.append(of_class[:per_class])
    return np.sort(np.concatenate(chosen))


def idx_bytes(array: NDArray[np.uint8], magic: int) -> bytes:
    """Serialise a uint8 array as IDX (big-endian header: magic, then each dimension)."""
    if array.dtype != np.uint8 or magic & 0xFF != array.ndim:
        raise ValueError(f"magic {magic} does not describe a uint8 array of {array.ndim} dims")
    header = struct.pack(f">I{array.ndim}I", magic, *array.shape)
    return header + np.ascontiguousarray(array).tobytes()


def subset_files(data: FashionMNIST, train_per_class: int, test_per_class: int) -> dict[str, bytes]:
    """The four gzip IDX files of the subset, by official file name."""
    train = first_per_class(data.train_labels, train_per_class)
    test = first_per_class(data.test_labels, test_per_class)
    arrays = {
        TRAIN_IMAGES: (data.train_images[train].reshape(-1, 28, 28), 2051),
        TRAIN_LABELS: (data.train_labels[train], 2049),
        TEST_IMAGES: (data.test_images[test].reshape(-1, 28, 28), 2051),
        TEST_LABELS: (data.test_labels[test], 2049),
    }
    return {
        name: gzip.compress(idx_bytes(array, magic), compresslevel=9, mtime=0)
        for name, (array, magic) in arrays.items()
    }


def _write_atomic(path: Path, content: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the files are installed for every user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_subset(
    data: FashionMNIST,
    out: Path,
    train_per_class: int = TRAIN_PER_CLASS,
    test_per_class: int = TEST_PER_CLASS,
) -> dict[str, str]:
    """Write the subset, MD5SUMS, LICENSE and NOTICE into ``out``; return file name → MD5."""
    if data.is_subset:
        raise ValueError("the source must be the full data set, not the shipped subset")
    files = subset_files(data, train_per_class, test_per_class)
    sums = {name: hashlib.md5(files[name], usedforsecurity=False).hexdigest() for name in FILES}
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        _write_atomic(out / name, files[name])
    notice = NOTICE.format(
        train_per_class=train_per_class,
        test_per_class=test_per_class,
        n_train=10 * train_per_class,
        n_test=10 * test_per_class,
    )
    _write_atomic(out / "LICENSE", LICENSE.encode())
    _write_atomic(out / "NOTICE", notice.encode())
    md5sums = "".join(f"{sums[name]}  {name}\n" for name in sorted(FILES))
    _write_atomic(out / "MD5SUMS", md5sums.encode())
    return sums


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=None, help="folder with the official files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--train-per-class", type=int, default=TRAIN_PER_CLASS)
    parser.add_argument("--test-per-class", type=int, default=TEST_PER_CLASS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data = load_fashion_mnist(args.source, allow_subset=False)
    sums = write_subset(data, args.out, args.train_per_class, args.test_per_class)
    total = sum((args.out / name).stat().st_size for name in os.listdir(args.out))
    for name, digest in sums.items():
        logger.info("%s  %s  (%d bytes)", digest, name, (args.out / name).stat().st_size)
    logger.info("wrote %s: %d bytes in all", args.out, total)


if __name__ == "__main__":
    main()
