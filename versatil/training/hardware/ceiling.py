"""The device's measured ceiling: the dense matmul FLOP/s it reaches per compute dtype.

A datasheet's peak is what a GPU could do; the ceiling is what this device, with this
torch, actually does on a large square matrix product (random data, the result written to
a preallocated tensor). Per compute dtype (:mod:`.dtypes`) the matrices grow until one
product takes long enough to time (up to a size cap), then three blocks of products of at
least ``block_s`` each are timed, CUDA-synchronized, and the fastest block is the ceiling.

Measured once per host, device, torch version (and, on CPU, torch's thread count, which a
trial's CPU share sets) and cached as JSON in a shared directory: a second sweep on the
same machine measures nothing. A lock file serializes the measurement, so trials that
start together wait for one measurement instead of timing each other's load.
"""

from __future__ import annotations

import dataclasses
import datetime
import fcntl
import json
import math
import re
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from versatil.files import atomic_write
from versatil.training.hardware.dtypes import torch_dtype_of

__all__ = ["Ceiling", "CeilingCache", "ceiling_key", "measure_matmul"]

LOCK_WAIT_S = 600.0
"""The longest a process waits for another one's measurement before measuring itself."""

_SIZES = {"cuda": (4096, 16384, 0.005), "cpu": (256, 2048, 0.02)}
"""Per device type: the first matrix size, the largest, and the shortest product to time."""


@dataclasses.dataclass
class Ceiling:
    """A device's measured ceilings.

    Attributes:
        key: What identifies the device (:func:`ceiling_key`).
        tflops: Measured dense matmul TFLOP/s per compute dtype.
        sizes: The matrix size each dtype was measured at.
        measured_at: When each dtype was measured (ISO 8601, UTC).
        measured_now: The dtypes this process measured (the rest came from the cache).
    """

    key: dict[str, Any]
    tflops: dict[str, float] = dataclasses.field(default_factory=dict)
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    measured_at: dict[str, str] = dataclasses.field(default_factory=dict)
    measured_now: list[str] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (without ``measured_now``)."""
        return {
            "key": self.key,
            "tflops": self.tflops,
            "sizes": self.sizes,
            "measured_at": self.measured_at,
        }


def ceiling_key(device: torch.device) -> dict[str, Any]:
    """What a ceiling holds for: host, device name, torch version, and CPU threads."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{device.type} ({torch.get_num_threads()} threads)"
    key: dict[str, Any] = {
        "host": socket.gethostname(),
        "device": name,
        "torch": str(torch.__version__),
    }
    if device.type == "cpu":
        key["threads"] = torch.get_num_threads()
    return key


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_products(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, count: int) -> float:
    _sync(a.device)
    start = time.perf_counter()
    for _ in range(count):
        torch.mm(a, b, out=out)
    _sync(a.device)
    return time.perf_counter() - start


def measure_matmul(key: str, device: torch.device, block_s: float = 0.1) -> tuple[float, int]:
    """Measures the dense matmul TFLOP/s of compute dtype ``key`` on ``device``.

    Args:
        key: A compute dtype (``fp32-high``, ``bf16``, ...).
        device: The device to measure.
        block_s: The least time one timed block of products takes.

    Returns:
        ``(TFLOP/s, matrix size)``: the fastest of three blocks.
    """
    dtype_name, matmul = torch_dtype_of(key)
    dtype = getattr(torch, dtype_name)
    first, largest, shortest = _SIZES.get(device.type, _SIZES["cpu"])
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)
    try:
        size = first
        while True:
            gen = torch.Generator(device=device).manual_seed(0)
            a = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
            b = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
            out = torch.empty(size, size, device=device, dtype=dtype)
            _time_products(a, b, out, 1)  # warm-up: kernel choice, allocation
            once = _time_products(a, b, out, 1)
            if once >= shortest or size >= largest:
                break
            size *= 2
        count = max(1, math.ceil(block_s / max(once, 1e-9)))
        fastest = min(_time_products(a, b, out, count) for _ in range(3))
        return 2.0 * size**3 * count / fastest / 1e12, size
    finally:
        torch.set_float32_matmul_precision(before)


def _slug(key: dict[str, Any]) -> str:
    text = "-".join(str(key[k]) for k in sorted(key))
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:200]


class CeilingCache:
    """Ceilings cached as one JSON file per device key in ``directory``.

    Args:
        directory: A directory every trial can reach (a sweep's storage path's).
        also: Compute dtypes measured along with the first one asked for (a sweep's
            others), so that one measurement covers every trial.
    """

    def __init__(self, directory: Path, also: Iterable[str] = ()) -> None:
        self.directory = Path(directory)
        self.also = tuple(also)

    def path(self, key: dict[str, Any]) -> Path:
        """The JSON file of ``key``."""
        return self.directory / f"{_slug(key)}.json"

    def get(self, device: torch.device, dtypes: Iterable[str], block_s: float = 0.1) -> Ceiling:
        """The ceilings of ``dtypes`` on ``device``: read from the cache, else measured.

        Missing ones are measured together with those of ``also``.

        Measuring holds the key's lock; a process that finds it held waits (up to
        :data:`LOCK_WAIT_S`) and then reads what the holder measured.
        """
        key = ceiling_key(device)
        asked = list(dtypes)
        cached = self._read(key)
        if all(d in cached.tflops for d in asked):
            return cached
        wanted = list(dict.fromkeys([*asked, *self.also]))
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        with open(path.with_suffix(".lock"), "a+b") as lock:
            _lock(lock)
            try:
                ceiling = self._read(key)  # measured meanwhile by the lock's holder?
                now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                for dtype in wanted:
                    if dtype in ceiling.tflops:
                        continue
                    tflops, size = measure_matmul(dtype, device, block_s)
                    ceiling.tflops[dtype], ceiling.sizes[dtype] = tflops, size
                    ceiling.measured_at[dtype] = now
                    ceiling.measured_now.append(dtype)
                if ceiling.measured_now:
                    text = json.dumps(ceiling.as_dict(), indent=2)
                    atomic_write(path, lambda tmp: tmp.write_text(text))
                return ceiling
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self, key: dict[str, Any]) -> Ceiling:
        try:
            data = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return Ceiling(key=key)
        if data.get("key") != key:
            return Ceiling(key=key)
        return Ceiling(
            key=key,
            tflops={k: float(v) for k, v in data.get("tflops", {}).items()},
            sizes=dict(data.get("sizes", {})),
            measured_at=dict(data.get("measured_at", {})),
        )


def _lock(handle: Any) -> None:
    """Takes an exclusive lock on ``handle``, waiting at most :data:`LOCK_WAIT_S`."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                return  # measure anyway: a stale holder must not stop the sweep
            time.sleep(0.05)
