"""Fashion-MNIST: lookup, download, MD5 verification and IDX parsing (docs/design.md §3 and §5).

The data set of the paper's experiment (Sec. 6; Xiao, Rasul and Vollgraf 2017) is looked up, in order:

1. an explicit path given by the caller (missing or corrupt files there are an error);
2. the folder named by ``$ADCS_DATA_DIR`` (when set, it is used or refused like an explicit path,
   never skipped);
3. the user cache, ``$XDG_CACHE_HOME/adcs/fashion-mnist`` (default ``~/.cache/adcs/fashion-mnist``);
4. Debian's package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``);
5. a download from the official source into the user cache, each file MD5-checked before it is
   moved into place;
6. offline, the small real subset shipped with the package (with a logged warning; the returned
   `FashionMNIST` has ``is_subset=True``).

A location counts as found when it holds all four official ``.gz`` files, itself or in
torchvision's layout below it (``FashionMNIST/raw/`` or ``raw/``, as
``torchvision.datasets.FashionMNIST(root, download=True)`` leaves them). Every file read is
verified against the official MD5 of the ``.gz`` file; a re-compressed copy (Debian rewrites the gzip
header) is accepted when the MD5 of its decompressed content matches the official one. A file that
fails both checks is an error naming the file and both sums: a corrupt full data set is never
skipped silently.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import logging
import os
import stat
import struct
import tempfile
import urllib.request
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

logger = logging.getLogger(__name__)

__all__ = [
    "BASE_URL",
    "CLASS_NAMES",
    "DEBIAN_DIR",
    "ENV_VAR",
    "FILES",
    "OFFICIAL_MD5",
    "OFFICIAL_MD5_UNCOMPRESSED",
    "SUBSET_DIR",
    "ChecksumError",
    "FashionMNIST",
    "Opener",
    "cache_dir",
    "data_folders",
    "download_fashion_mnist",
    "find_fashion_mnist",
    "load_fashion_mnist",
    "load_subset",
    "read_idx",
]

BASE_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
"""The official download location; a file's URL is this plus its name."""

TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"
FILES: tuple[str, ...] = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)
"""The four official file names."""

OFFICIAL_MD5: dict[str, str] = {
    TRAIN_IMAGES: "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    TRAIN_LABELS: "25c81989df183df01b3e8a0aad5dffbe",
    TEST_IMAGES: "bef4ecab320f06d8554ea6380940ec79",
    TEST_LABELS: "bb300cfdad3c16e7a12a480ee83cd310",
}
"""MD5 of each official ``.gz`` file (zalandoresearch/fashion-mnist README)."""

OFFICIAL_MD5_UNCOMPRESSED: dict[str, str] = {
    TRAIN_IMAGES: "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    TRAIN_LABELS: "9018921c3c673c538a1fc5bad174d6f9",
    TEST_IMAGES: "8181f5470baa50b63fa0f6fddb340f0a",
    TEST_LABELS: "15d484375f8d13e6eb1aabb0c3f46965",
}
"""MD5 of the decompressed IDX content of each official file (accepts re-compressed copies)."""

CLASS_NAMES: tuple[str, ...] = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
"""Label k names class ``CLASS_NAMES[k]``."""

ENV_VAR = "ADCS_DATA_DIR"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
SUBSET_DIR = Path(__file__).resolve().parent / "subset"
"""The small real subset installed with the package (gzip IDX files, ``MD5SUMS``, licence)."""

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
IMAGE_SHAPE = (28, 28)
N_CLASSES = len(CLASS_NAMES)
DOWNLOAD_TIMEOUT_S = 30.0
_CHUNK = 1 << 20

# IDX type code → big-endian element type (the IDX format stores every multi-byte value MSB first).
_IDX_DTYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_HOW_TO_GET = (
    f"Get the four official files ({', '.join(FILES)}) from {BASE_URL} or "
    "https://github.com/zalandoresearch/fashion-mnist and put them in one folder, then pass that "
    f"folder or set ${ENV_VAR} to it; on Debian/Ubuntu `apt install dataset-fashion-mnist` also works."
)

Opener = Callable[[str], BinaryIO]
"""Opens a URL for reading (``urllib.request.urlopen`` by default); injectable for tests."""

U8Array = NDArray[np.uint8]


class ChecksumError(ValueError):
    """A data file's MD5 differs from the expected one.

    Attributes
    ----------
    file : Path or str
        The offending file (or URL, for a download).
    expected, actual : str
        The expected and the measured MD5 (hex).
    """

    def __init__(self, file: Path | str, expected: str, actual: str, hint: str = "") -> None:
        self.file = file
        self.expected = expected
        self.actual = actual
        message = f"MD5 mismatch for {file}: expected {expected}, got {actual}."
        super().__init__(f"{message} {hint}".strip())


@dataclass(frozen=True, eq=False)
class FashionMNIST:
    """Fashion-MNIST held in memory (arrays are read-only views of the decompressed files).

    Attributes
    ----------
    train_images : ndarray of shape (n_train, 784), uint8
        Training images, each 28×28 flattened row-major, pixel values 0–255.
    train_labels : ndarray of shape (n_train,), uint8
        Training labels in 0–9 (see `CLASS_NAMES`).
    test_images : ndarray of shape (n_test, 784), uint8
    test_labels : ndarray of shape (n_test,), uint8
    source : str
        Where the data came from, in words (e.g. ``"user cache (...)"``,
        ``"shipped subset (...)"``).
    is_subset : bool
        True when this is the small subset shipped with the package, not the full data set.
    checksums : dict of str to str
        File name → MD5 (hex) of the ``.gz`` file as read.
    """

    train_images: U8Array
    train_labels: U8Array
    test_images: U8Array
    test_labels: U8Array
    source: str
    is_subset: bool
    checksums: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for split in ("train", "test"):
            images = getattr(self, f"{split}_images")
            labels = getattr(self, f"{split}_labels")
            if images.dtype != np.uint8 or images.ndim != 2 or images.shape[1] != 784:
                raise ValueError(
                    f"{split}_images must be a uint8 array of shape (n, 784), "
                    f"got {images.dtype} {images.shape}"
                )
            if labels.dtype != np.uint8 or labels.shape != (images.shape[0],):
                raise ValueError(
                    f"{split}_labels must be a uint8 array of shape ({images.shape[0]},), "
                    f"got {labels.dtype} {labels.shape}"
                )
            if labels.size and int(labels.max()) >= N_CLASSES:
                raise ValueError(f"{split}_labels must lie in [0, {N_CLASSES - 1}]")

    @property
    def n_train(self) -> int:
        """Number of training images."""
        return int(self.train_labels.shape[0])

    @property
    def n_test(self) -> int:
        """Number of test images."""
        return int(self.test_labels.shape[0])


# --------------------------------------------------------------------------------------------
# IDX format
# --------------------------------------------------------------------------------------------


def _parse_idx(raw: bytes, name: str) -> tuple[int, NDArray[Any]]:
    """Parse IDX bytes; return ``(magic, array)`` with the array in native byte order."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{name} is not an IDX file (bad magic number)")
    magic = struct.unpack(">I", raw[:4])[0]
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(f"{name}: unknown IDX element type 0x{type_code:02x}")
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise ValueError(f"{name}: truncated IDX header ({ndim} dimensions)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{name}: IDX header announces shape {dims} ({expected} data bytes) "
            f"but the file holds {len(raw) - header}"
        )
    array = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    if dtype.byteorder == ">":
        array = array.astype(dtype.newbyteorder("="))
    return magic, array


def _decompress(raw: bytes, name: str) -> bytes:
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{name} is not a valid gzip file: {exc}") from exc


def read_idx(path: str | os.PathLike[str]) -> NDArray[Any]:
    """Read an IDX file (gzip-compressed or not) into an array.

    Parameters
    ----------
    path : str or path-like
        The file. Gzip compression is detected from its first bytes, not its name.

    Returns
    -------
    ndarray
        Shape and element type as announced by the IDX header, in native byte order.

    Raises
    ------
    ValueError
        The file is not valid IDX (bad magic, unknown type, size not matching the header).
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = _decompress(raw, str(path))
    return _parse_idx(raw, str(path))[1]


# --------------------------------------------------------------------------------------------
# Verification and loading of one folder
# --------------------------------------------------------------------------------------------


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _verified_content(
    path: Path, expected: Mapping[str, str], expected_raw: Mapping[str, str] | None
) -> tuple[bytes, str]:
    """Read one ``.gz`` file, check its MD5, return ``(decompressed bytes, md5 of the file)``."""
    blob = path.read_bytes()
    actual = _md5(blob)
    want = expected[path.name]
    if actual == want:
        return _decompress(blob, str(path)), actual
    if expected_raw is not None:
        # A re-compressed copy (Debian's package rewrites the gzip header) holds the same IDX data.
        with contextlib.suppress(ValueError):
            content = _decompress(blob, str(path))
            if _md5(content) == expected_raw[path.name]:
                logger.info("%s: gzip differs from the official file, content verified", path)
                return content, actual
    raise ChecksumError(
        path,
        want,
        actual,
        "The file is corrupt or not the official one; delete it (it is re-downloaded into the "
        f"user cache when online) or replace it. {_HOW_TO_GET}",
    )


def _images_and_labels(
    images_raw: bytes, labels_raw: bytes, images_name: str, labels_name: str
) -> tuple[U8Array, U8Array]:
    images_magic, images = _parse_idx(images_raw, images_name)
    labels_magic, labels = _parse_idx(labels_raw, labels_name)
    if images_magic != IMAGES_MAGIC or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(
            f"{images_name}: expected IDX magic {IMAGES_MAGIC} with 28×28 images, "
            f"got magic {images_magic} and shape {images.shape}"
        )
    if labels_magic != LABELS_MAGIC:
        raise ValueError(f"{labels_name}: expected IDX magic {LABELS_MAGIC}, got {labels_magic}")
    if labels.shape[0] != images.shape[0]:
        raise ValueError(
            f"{images_name} holds {images.shape[0]} images but {labels_name} "
            f"holds {labels.shape[0]} labels"
        )
    if labels.size and int(labels.max()) >= N_CLASSES:
        raise ValueError(f"{labels_name}: labels must lie in [0, {N_CLASSES - 1}]")
    return images.reshape(images.shape[0], -1), labels


def _load_directory(
    directory: Path,
    source: str,
    *,
    expected: Mapping[str, str],
    expected_raw: Mapping[str, str] | None,
    is_subset: bool = False,
) -> FashionMNIST:
    content: dict[str, bytes] = {}
    checksums: dict[str, str] = {}
    for name in FILES:
        content[name], checksums[name] = _verified_content(directory / name, expected, expected_raw)
    train_images, train_labels = _images_and_labels(
        content[TRAIN_IMAGES], content[TRAIN_LABELS], TRAIN_IMAGES, TRAIN_LABELS
    )
    test_images, test_labels = _images_and_labels(
        content[TEST_IMAGES], content[TEST_LABELS], TEST_IMAGES, TEST_LABELS
    )
    logger.info(
        "Fashion-MNIST from %s: %d train, %d test images",
        source,
        len(train_labels),
        len(test_labels),
    )
    return FashionMNIST(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        source=source,
        is_subset=is_subset,
        checksums=checksums,
    )


def _display(path: Path) -> str:
    """``path`` with the home folder written as ``~``, for messages and result manifests."""
    home = Path.home()
    # as given first (a cache that is a symbolic link stays "~/..."), then with links resolved
    for where, base in ((Path(path).absolute(), home), (Path(path).resolve(), home.resolve())):
        try:
            return str(Path("~") / where.relative_to(base))
        except ValueError:
            continue
    return str(path)


def _read_md5sums(path: Path) -> dict[str, str]:
    """Parse an ``md5sum``-style file: ``<hex>  <name>`` per line."""
    sums: dict[str, str] = {}
    for line in path.read_text(encoding="ascii").splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*").strip()] = digest.lower()
    return sums


def load_subset() -> FashionMNIST:
    """Load the small real subset shipped with the package, verified against its ``MD5SUMS``.

    Returns
    -------
    FashionMNIST
        With ``is_subset=True``; see ``SUBSET_DIR/NOTICE`` for how it was made.
    """
    sums_file = SUBSET_DIR / "MD5SUMS"
    if not sums_file.is_file():
        raise FileNotFoundError(f"the shipped subset is incomplete: {sums_file} is missing")
    sums = _read_md5sums(sums_file)
    missing = [name for name in FILES if name not in sums]
    if missing:
        raise ValueError(f"{sums_file} lists no MD5 for {', '.join(missing)}")
    data = _load_directory(SUBSET_DIR, "shipped subset", expected=sums, expected_raw=None)
    return FashionMNIST(
        train_images=data.train_images,
        train_labels=data.train_labels,
        test_images=data.test_images,
        test_labels=data.test_labels,
        source=(
            f"shipped subset ({data.n_train} train / {data.n_test} test images, "
            "balanced per class, not the full data set)"
        ),
        is_subset=True,
        checksums=data.checksums,
    )


# --------------------------------------------------------------------------------------------
# Lookup
# --------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The user cache folder: ``$XDG_CACHE_HOME/adcs/fashion-mnist``, else ``~/.cache/...``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec says relative values are invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "adcs" / "fashion-mnist"


def _lookup_locations() -> list[tuple[str, Path]]:
    """The non-explicit locations, in lookup order, as ``(description, folder)``."""
    locations: list[tuple[str, Path]] = []
    env = os.environ.get(ENV_VAR, "")
    if env:
        locations.append((f"${ENV_VAR}", Path(env).expanduser()))
    locations.append(("user cache", cache_dir()))
    locations.append(("Debian package dataset-fashion-mnist", DEBIAN_DIR))
    return locations


def _missing_files(directory: Path) -> list[str]:
    return [name for name in FILES if not (directory / name).is_file()]


def _file_problem(directory: Path, name: str) -> str | None:
    """What keeps ``directory / name`` from being read as a data file, in words (None: nothing)."""
    path = directory / name
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"{name} is missing"
    except OSError as exc:
        return f"{name} cannot be inspected ({(exc.strerror or str(exc)).lower()})"
    if stat.S_ISDIR(mode):
        return f"{name} is a folder, not a file"
    if not stat.S_ISREG(mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "not a regular file"
        return f"{name} is {kind}"
    if not os.access(path, os.R_OK):
        return f"{name} is not readable (permission denied)"
    return None


def _folder_problem(directory: Path) -> str | None:
    """Why ``directory`` cannot be read as a Fashion-MNIST folder, naming each file (None: ok)."""
    if not directory.exists():
        return "it does not exist"
    if not directory.is_dir():
        return "it is not a folder"
    try:
        empty = next(os.scandir(directory), None) is None
    except OSError as exc:
        return f"it cannot be listed ({(exc.strerror or str(exc)).lower()})"
    if empty:
        return f"it is empty (it should hold {', '.join(FILES)})"
    problems = {name: _file_problem(directory, name) for name in FILES}
    # gunzip leaves train-images-idx3-ubyte where train-images-idx3-ubyte.gz was
    plain = [n for n, p in problems.items() if p and p.endswith("missing") and
             (directory / n).with_suffix("").is_file()]  # fmt: skip
    said = [p for n, p in problems.items() if p and n not in plain]
    if plain:
        names = " ".join(Path(n).stem for n in plain)
        said.append(
            f"{', '.join(plain)} {'is' if len(plain) == 1 else 'are'} there only decompressed "
            f"({names}): adcs reads the official .gz files; compress them again with "
            f"`gzip -k {names}` (the content is checked against the official MD5)"
        )
    return "; ".join(said) if said else None


_TORCHVISION_LAYOUT = (Path("FashionMNIST", "raw"), Path("raw"))
"""Where torchvision's ``FashionMNIST(root, download=True)`` keeps the official files."""


def _layout(directory: Path) -> Path:
    """``directory``, or torchvision's ``FashionMNIST/raw/`` (or ``raw/``) inside it when that
    holds the four files and ``directory`` itself does not."""
    if not _missing_files(directory):
        return directory
    for sub in _TORCHVISION_LAYOUT:
        if not _missing_files(directory / sub):
            return directory / sub
    return directory


def _explicit_directory(path: str | os.PathLike[str], description: str = "the given path") -> Path:
    directory = _layout(Path(path).expanduser())
    problem = _folder_problem(directory)
    if problem is not None:
        raise FileNotFoundError(
            f"Fashion-MNIST cannot be read from {description} {directory}: {problem}. {_HOW_TO_GET}"
        )
    return directory


def _find(path: str | os.PathLike[str] | None) -> tuple[str, Path] | None:
    if path is not None:
        return "explicit path", _explicit_directory(path)
    for description, directory in _lookup_locations():
        if description == f"${ENV_VAR}":
            # a folder the user named is used or refused, never skipped for another one
            return description, _explicit_directory(directory, description)
        directory = _layout(directory)
        missing = _missing_files(directory)
        if not missing:
            return description, directory
        logger.debug(
            "%s folder %s lacks %s; skipping it", description, directory, ", ".join(missing)
        )
    return None


def data_folders(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """Every folder `load_fashion_mnist` may read, present or not (the shipped subset last).

    With ``path`` that folder is the only one looked in; else the lookup locations. Nothing is
    checked or logged (results folders are kept clear of these).
    """
    looked = [Path(path).expanduser()] if path is not None else [p for _, p in _lookup_locations()]
    return [*looked, SUBSET_DIR]


def find_fashion_mnist(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The first folder, in lookup order, that holds all four official files.

    Only presence is checked here; `load_fashion_mnist` verifies the MD5 sums.

    Parameters
    ----------
    path : str or path-like, optional
        An explicit folder. When given it is the only place looked at.

    Returns
    -------
    Path or None
        The folder, or None when no lookup location holds the files (nothing is downloaded).

    Raises
    ------
    FileNotFoundError
        ``path`` was given but does not hold all four files.
    """
    found = _find(path)
    return None if found is None else found[1]


# --------------------------------------------------------------------------------------------
# Download
# --------------------------------------------------------------------------------------------


def _default_opener(url: str) -> BinaryIO:
    response: BinaryIO = urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S)
    return response


def _download_file(url: str, dest: Path, expected_md5: str, opener: Opener) -> None:
    """Stream ``url`` into a temporary file next to ``dest``; rename only once the MD5 matches."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        digest = hashlib.md5(usedforsecurity=False)
        with os.fdopen(fd, "wb") as out, opener(url) as response:
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != expected_md5:
            raise ChecksumError(url, expected_md5, actual, "The download was discarded.")
        os.chmod(tmp_name, 0o644)  # mkstemp creates 0600; a cached data file is not secret
        os.replace(tmp_name, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def download_fashion_mnist(
    directory: str | os.PathLike[str] | None = None, *, opener: Opener | None = None
) -> Path:
    """Download the official files missing from ``directory`` (default: the user cache).

    Each file is streamed into a temporary file in ``directory``, MD5-checked against
    `OFFICIAL_MD5` and only then atomically renamed to its final name, so an interrupted or
    corrupt download never leaves a file that later passes for good.

    Parameters
    ----------
    directory : str or path-like, optional
        Target folder, created if needed; default `cache_dir`.
    opener : callable, optional
        ``opener(url)`` returns a readable binary file object (a context manager);
        default ``urllib.request.urlopen`` with a timeout.

    Returns
    -------
    Path
        The folder.

    Raises
    ------
    ChecksumError
        A downloaded file's MD5 is wrong (nothing of it is left on disk).
    OSError or http.client.HTTPException
        The network or the disk failed.
    """
    target = cache_dir() if directory is None else Path(directory).expanduser()
    opener = _default_opener if opener is None else opener
    target.mkdir(parents=True, exist_ok=True)
    for name in _missing_files(target):
        url = BASE_URL + name
        logger.info("downloading %s into %s", url, target)
        _download_file(url, target / name, OFFICIAL_MD5[name], opener)
    return target


# --------------------------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------------------------


def load_fashion_mnist(
    path: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    allow_subset: bool = True,
    opener: Opener | None = None,
) -> FashionMNIST:
    """Load Fashion-MNIST, verified against the official MD5 sums (docs/design.md §5).

    Parameters
    ----------
    path : str or path-like, optional
        A folder holding the four official ``.gz`` files. When given, nothing else is tried.
    download : bool
        When no lookup location holds the files, download them into the user cache.
    allow_subset : bool
        When the full data set cannot be had (not found, download off or failing for lack of a
        network), fall back to the shipped subset with a logged warning instead of raising.
    opener : callable, optional
        URL opener for the download (see `download_fashion_mnist`).

    Returns
    -------
    FashionMNIST
        ``source`` says where the data came from; ``is_subset`` is True for the fallback.

    Raises
    ------
    FileNotFoundError
        ``path`` (or ``$ADCS_DATA_DIR``) does not hold the four files as readable regular files
        (the message says what is wrong with which file); or nothing was found and
        ``allow_subset`` is False.
    ChecksumError
        A file found (or downloaded) has the wrong MD5.
    ValueError
        A file is not valid gzip/IDX or not shaped like Fashion-MNIST.
    """
    found = _find(path)
    if found is not None:
        description, directory = found
        return _load_directory(
            directory,
            f"{description} ({_display(directory)})",
            expected=OFFICIAL_MD5,
            expected_raw=OFFICIAL_MD5_UNCOMPRESSED,
        )
    looked = "; ".join(f"{d} ({p})" for d, p in _lookup_locations())
    if download:
        try:
            directory = download_fashion_mnist(opener=opener)
        except (OSError, http.client.HTTPException) as exc:
            reason = f"the download from {BASE_URL} failed ({exc})"
        else:
            return _load_directory(
                directory,
                f"downloaded from {BASE_URL} into the user cache ({_display(directory)})",
                expected=OFFICIAL_MD5,
                expected_raw=OFFICIAL_MD5_UNCOMPRESSED,
            )
    else:
        reason = "downloading was disabled"
    if not allow_subset:
        raise FileNotFoundError(
            f"Fashion-MNIST not found (looked in: {looked}) and {reason}. {_HOW_TO_GET}"
        )
    subset = load_subset()
    logger.warning(
        "Fashion-MNIST not found (looked in: %s) and %s; using the %s. Results will differ from "
        "the full data set. %s",
        looked,
        reason,
        subset.source,
        _HOW_TO_GET,
    )
    return subset
