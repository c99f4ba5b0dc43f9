"""Client system profiles and the simulated clock (docs/design.md §7, *Systems*).

Each client has a compute speed (training samples per second) and a bandwidth up and down (bytes
per second), fixed for a run and drawn from the seed, so every method of a seed meets the same
devices. From them the simulator times every round:

* a **full local round** (an update, or an update probe) takes
  ``model_bytes / download + E·B / compute + update_bytes / upload``, with
  ``model_bytes = update_bytes = 4 · dim`` (float32 parameters);
* a **loss probe** takes ``model_bytes / download + forward_cost · B / compute + 4 / upload``
  (one minibatch forward pass, one float32 back); a full-data loss probe does the forward pass over
  the client's whole training set. ``forward_cost`` = 1/3 by default: a training step costs about
  three forward passes (forward, and a backward twice as costly), FedScale's
  ``augmentation_factor = 3``.

A round is a **probe phase** — the probed clients work in parallel and the server waits for the
slowest (probes are neither dropped nor cut by the deadline) — then a **training phase**, timed by
`training_phase`: every selected client returns after its full local round (at once when
its update was already probed this round), a dropped-out client fails at that same moment, and the
round closes when the last client has answered, when the first ``target`` updates are in
(FedScale's over-commitment: ⌈(1 + o)·m⌉ are invited and the first m kept), or at the deadline,
whichever comes first. Clients that fail or miss the deadline are *dropped*; clients that answer
in time after the first ``target`` are *discarded*; neither is aggregated. A client is busy for
its probe and, in the training phase, until it answers or the round closes.

Evaluations are the server's and cost no simulated time.

Defaults. The compute and bandwidth medians are of the order of a mid-range phone training a
small network on Wi-Fi (FedScale's device traces: AI Benchmark for compute, MobiPerf for Wi-Fi
bandwidth, Lai et al. 2022); the log-normal spreads (σ = 1 in log space: the 5 % and 95 %
quantiles 27× apart) give the order-of-magnitude spread of those traces. They are not fitted to
the traces; set them, or give a CSV of measured values, for a study that depends on them.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from adcs._validate import check_number, check_string
from adcs.registry import Registry
from adcs.round.clock import probe_phase, training_phase
from adcs.streams import Domain, counter_uniform, stream_key

__all__ = [
    "LOSS_BYTES",
    "SYSTEM_PROFILES",
    "ClientTimes",
    "MeasuredSystem",
    "SystemConfig",
    "SystemProfile",
    "client_times",
    "probe_phase",
    "training_phase",
]

F64Array = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

LOSS_BYTES = 4
"""What a loss probe uploads: one float32."""

_QUANTITIES = ("compute", "upload", "download")


def _positive_array(name: str, values: ArrayLike) -> F64Array:
    array = np.array(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all() or (array <= 0).any():
        raise ValueError(f"{name} must be a non-empty 1-D array of finite numbers > 0")
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class SystemProfile:
    """Every client's device: compute speed and bandwidths, fixed for a run.

    Attributes
    ----------
    compute : ndarray of shape (n_clients,)
        Training speed, samples per second (> 0).
    upload, download : ndarray of shape (n_clients,)
        Bandwidth, bytes per second (> 0).
    """

    compute: F64Array
    upload: F64Array
    download: F64Array

    def __post_init__(self) -> None:
        for name in _QUANTITIES:
            object.__setattr__(self, name, _positive_array(name, getattr(self, name)))
        if not self.compute.shape == self.upload.shape == self.download.shape:
            raise ValueError(
                f"compute, upload and download must have one entry per client, got shapes "
                f"{self.compute.shape}, {self.upload.shape}, {self.download.shape}"
            )

    @property
    def n_clients(self) -> int:
        return int(self.compute.shape[0])

    @classmethod
    def from_csv(cls, path: str | Path, n_clients: int) -> SystemProfile:
        """Read a profile: a CSV with header ``client,compute,upload,download``, one row per client.

        Raises
        ------
        ValueError
            If the file is missing, malformed, or does not name clients 0 … n_clients − 1 once each.
        """
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"system profile {p} does not exist or is not a file")
        try:
            return cls._read_csv(p, n_clients)
        except UnicodeDecodeError as exc:
            raise ValueError(f"system profile {p} is not UTF-8 text: {exc}") from None

    @classmethod
    def _read_csv(cls, p: Path, n_clients: int) -> SystemProfile:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = {"client", *_QUANTITIES} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"system profile {p} lacks column(s) {sorted(missing)}")
            values = np.full((n_clients, 3), np.nan)
            seen = np.zeros(n_clients, dtype=bool)
            for line, row in enumerate(reader, start=2):
                try:
                    client = int(row["client"])
                    numbers = [float(row[q]) for q in _QUANTITIES]
                except (TypeError, ValueError):
                    raise ValueError(f"system profile {p}, line {line}: not numbers") from None
                if not 0 <= client < n_clients or seen[client]:
                    raise ValueError(
                        f"system profile {p}, line {line}: client {client} is out of "
                        f"[0, {n_clients}) or repeated"
                    )
                seen[client] = True
                values[client] = numbers
        if not seen.all():
            absent = np.flatnonzero(~seen)
            raise ValueError(
                f"system profile {p} lacks {absent.size} client(s), e.g. {absent[:5].tolist()}"
            )
        try:
            return cls(values[:, 0], values[:, 1], values[:, 2])
        except ValueError as exc:
            raise ValueError(f"system profile {p}: {exc}") from None


def _normals(key: int, salt: int, rows: IntArray) -> F64Array:
    """Standard normal numbers, one per row, a pure function of (key, salt, row)."""
    u = counter_uniform(key, Domain.SYSTEM, 0, rows, salt=salt)
    return np.asarray(ndtri(u + 2.0**-54))  # u + 2⁻⁵⁴ lies in (0, 1): ndtri stays finite


def lognormal_profile(
    key: int,
    groups: ArrayLike,
    medians: tuple[float, float, float],
    sigmas: tuple[float, float, float],
    group_correlation: float = 0.0,
) -> SystemProfile:
    """Log-normal compute speed and bandwidths, drawn per client from the stream ``key``.

    For each quantity, log x_n = log median + σ z_n with
    z_n = √ρ g_{group(n)} + √(1 − ρ) e_n (g, e independent standard normals), so each z_n is
    standard normal and two clients of one group have correlation ρ = ``group_correlation``.
    Client n's values depend only on (key, n, its group): not on the number of clients.

    Parameters
    ----------
    key : int
        The seed's stream key ([`adcs.streams.stream_key`][adcs.sim.stream_key]).
    groups : ndarray of shape (n_clients,), int
    medians, sigmas : tuple of 3 floats
        Median and log-space standard deviation of compute (samples/s), upload and download
        (bytes/s).
    group_correlation : float
        ρ ∈ [0, 1].
    """
    grp = np.asarray(groups, dtype=np.intp)
    clients = np.arange(grp.shape[0], dtype=np.intp)
    rho = check_number("group_correlation", group_correlation, 0.0, 1.0)
    values = []
    for q, (median, sigma) in enumerate(zip(medians, sigmas, strict=True)):
        z = _normals(key, 2 * q, clients)
        if rho > 0.0:
            z = math.sqrt(rho) * _normals(key, 2 * q + 1, grp) + math.sqrt(1.0 - rho) * z
        values.append(median * np.exp(sigma * z))
    return SystemProfile(*values)


@dataclass(frozen=True)
class SystemConfig:
    """Client devices and the round rules of the simulated clock (module docstring).

    Parameters
    ----------
    compute_median : float
        Median training speed, samples per second (> 0).
    compute_sigma : float
        Log-space standard deviation of the speed (≥ 0).
    upload_median, download_median : float
        Median bandwidths, bytes per second (> 0; defaults 5 and 10 Mbit/s).
    upload_sigma, download_sigma : float
        Their log-space standard deviations (≥ 0).
    group_correlation : float
        ρ ∈ [0, 1]: correlation of the log-values of two clients of one group (0: independent).
    profile : SystemProfile, optional
        Measured per-client values used for every seed instead of the draw.
    deadline : float, optional
        Seconds (> 0) after which the training phase closes; clients still out are dropped.
    overcommit : float
        o ≥ 0: invite ⌈(1 + o)·m⌉ clients and aggregate the first m to return.
    forward_cost : float
        Cost of a forward pass relative to a training step, in (0, 1] (default 1/3).
    """

    compute_median: float = 10.0
    compute_sigma: float = 1.0
    upload_median: float = 625_000.0
    upload_sigma: float = 1.0
    download_median: float = 1_250_000.0
    download_sigma: float = 1.0
    group_correlation: float = 0.0
    profile: SystemProfile | None = None
    deadline: float | None = None
    overcommit: float = 0.0
    forward_cost: float = 1.0 / 3.0

    def __post_init__(self) -> None:
        for q in _QUANTITIES:
            check_number(f"{q}_median", getattr(self, f"{q}_median"), 0.0, low_open=True)
            check_number(f"{q}_sigma", getattr(self, f"{q}_sigma"), 0.0)
        check_number("group_correlation", self.group_correlation, 0.0, 1.0)
        if self.profile is not None and not isinstance(self.profile, SystemProfile):
            raise ValueError(f"profile must be a SystemProfile, got {type(self.profile).__name__}")
        if self.deadline is not None:
            check_number("deadline", self.deadline, 0.0, low_open=True)
        check_number("overcommit", self.overcommit, 0.0)
        check_number("forward_cost", self.forward_cost, 0.0, 1.0, low_open=True)

    def draw(self, seed: int, groups: ArrayLike) -> SystemProfile:
        """The clients' devices in runs of ``seed`` (the fixed ``profile`` when one is given)."""
        n = np.asarray(groups).shape[0]
        if self.profile is not None:
            if self.profile.n_clients != n:
                raise ValueError(
                    f"the system profile has {self.profile.n_clients} clients, the data {n}"
                )
            return self.profile
        return lognormal_profile(
            stream_key(seed),
            groups,
            (self.compute_median, self.upload_median, self.download_median),
            (self.compute_sigma, self.upload_sigma, self.download_sigma),
            self.group_correlation,
        )

    def invited(self, m: int, n_clients: int) -> int:
        """Clients invited per round for m wanted: ⌈(1 + o)·m⌉, at most ``n_clients``."""
        # rounded first so that (1 + 0.1)·10 = 11.000000000000002 invites 11, not 12
        return min(n_clients, math.ceil(round((1.0 + self.overcommit) * m, 9)))

    def describe(self) -> dict[str, Any]:
        """The parameters, for manifests."""
        doc: dict[str, Any] = {
            "deadline": self.deadline,
            "overcommit": self.overcommit,
            "forward_cost": self.forward_cost,
        }
        if self.profile is not None:
            doc["profile"] = "fixed per-client values"
            return doc
        for q in _QUANTITIES:
            doc[f"{q}_median"] = getattr(self, f"{q}_median")
            doc[f"{q}_sigma"] = getattr(self, f"{q}_sigma")
        doc["group_correlation"] = self.group_correlation
        return doc


@dataclass(frozen=True, eq=False)
class ClientTimes:
    """Seconds each client needs for each kind of work (one seed's profile, one workload).

    Attributes
    ----------
    update : ndarray of shape (n_clients,)
        A full local round: download, E·B training samples, upload.
    loss : ndarray of shape (n_clients,)
        A minibatch loss probe: download, a forward pass of B samples, a float32 up.
    full_loss : ndarray of shape (n_clients,)
        A full-data loss probe: download, a forward pass of the whole training set, a float32 up.
    """

    update: F64Array
    loss: F64Array
    full_loss: F64Array


def client_times(
    profile: SystemProfile,
    *,
    dim: int,
    local_samples: int,
    batch_size: int,
    data_sizes: ArrayLike,
    forward_cost: float,
) -> ClientTimes:
    """Durations of a full local round and of the loss probes (module docstring).

    Parameters
    ----------
    profile : SystemProfile
    dim : int
        Model parameters (4·dim bytes down, and 4·dim up for an update).
    local_samples : int
        E·B, samples a local round trains on.
    batch_size : int
        B, samples of a minibatch loss probe.
    data_sizes : ndarray of shape (n_clients,)
        Training samples per client (a full-data loss probe).
    forward_cost : float
        Forward pass cost relative to a training step.
    """
    model_bytes = 4.0 * dim
    down = model_bytes / profile.download
    sizes = np.asarray(data_sizes, dtype=np.float64)
    update = down + local_samples / profile.compute + model_bytes / profile.upload
    loss_up = LOSS_BYTES / profile.upload
    loss = down + forward_cost * batch_size / profile.compute + loss_up
    full_loss = down + forward_cost * sizes / profile.compute + loss_up
    for a in (update, loss, full_loss):
        a.setflags(write=False)
    return ClientTimes(update, loss, full_loss)


@dataclass(frozen=True)
class MeasuredSystem:
    """Measured devices from a CSV file with the round rules, read once N is known.

    The ``[sim.system]`` row ``kind = "csv"``: a configuration holds it, and the simulator's
    `SystemConfig` is `for_clients`.

    Parameters
    ----------
    path : str
        Columns ``client,compute,upload,download``, one row per client
        (`SystemProfile.from_csv`).
    deadline : float, optional
        Seconds (> 0) after which the training phase closes (`SystemConfig`).
    overcommit : float
        o ≥ 0: invite ⌈(1 + o)·m⌉ clients and aggregate the first m to return.
    forward_cost : float
        Cost of a forward pass relative to a training step, in (0, 1] (default 1/3).
    """

    path: str
    deadline: float | None = None
    overcommit: float = 0.0
    forward_cost: float = SystemConfig.forward_cost

    def __post_init__(self) -> None:
        check_string("path", self.path)
        self._config(None)

    def _config(self, profile: SystemProfile | None) -> SystemConfig:
        return SystemConfig(
            profile=profile,
            deadline=self.deadline,
            overcommit=self.overcommit,
            forward_cost=self.forward_cost,
        )

    def for_clients(self, n_clients: int) -> SystemConfig:
        """The simulator's configuration with the file's ``n_clients`` devices."""
        return self._config(SystemProfile.from_csv(self.path, n_clients))


SYSTEM_PROFILES: Registry[Any] = Registry(
    "system profile",
    "adcs.system_profiles",
    {"lognormal": SystemConfig, "csv": MeasuredSystem},
)
"""The ``[sim.system]`` kinds (docs/design.md §8): a row's constructor arguments are the
table's keys (``profile`` is not one: a ``csv`` row reads it); a row with
``for_clients(n_clients)`` is completed when N is known."""
