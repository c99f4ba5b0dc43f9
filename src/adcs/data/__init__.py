"""Fashion-MNIST loading and verification, and client partitions (DESIGN §3 and §5)."""

from adcs.data.fashion_mnist import (
    CLASS_NAMES,
    ChecksumError,
    FashionMNIST,
    cache_dir,
    download_fashion_mnist,
    find_fashion_mnist,
    load_fashion_mnist,
    load_subset,
    read_idx,
)
from adcs.data.partition import Partition, class_counts, dirichlet, iid, paper_groups

__all__ = [
    "CLASS_NAMES",
    "ChecksumError",
    "FashionMNIST",
    "Partition",
    "cache_dir",
    "class_counts",
    "dirichlet",
    "download_fashion_mnist",
    "find_fashion_mnist",
    "iid",
    "load_fashion_mnist",
    "load_subset",
    "paper_groups",
    "read_idx",
]
