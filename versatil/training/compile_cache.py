"""Compiled graphs shared between trials: each graph compiles once per cluster.

A compiled trial's first graph costs seconds of ``torch.compile`` per worker process.
Trials of one sweep often compile the very same graph (the same model under the same
settings, at another learning rate), on several workers and nodes. :class:`CompileCache`
shares the result through a directory every worker can reach (the sweep's storage):

- **Key.** A bundle is filed under the torch and triton versions, the device, the
  settings (precision, compile mode, matmul precision) and the model's structure (its
  modules, parameter and buffer shapes and dtypes). Inductor checks its own, finer keys
  when it loads an entry, so a bundle that does not fit a graph is a cache miss, never a
  wrong kernel.
- **Once.** The first trial of a key takes the key's lock (``fcntl.flock``; released by
  the kernel if its process dies), compiles, and publishes the bundle when its first
  epoch (training and validation graphs) is over. A trial of the same key that starts
  meanwhile on another machine (or with another inductor cache) waits for the lock, up
  to ``wait_timeout_s``, then loads the bundle instead of compiling; with no bundle (the
  first trial failed) it compiles and publishes itself. On the holder's own machine and
  inductor cache it does not wait: inductor's own locks make each kernel compile once
  there, and waiting for the whole first epoch would only idle the worker.
- **Bundle.** PyTorch's portable compile-cache artifacts
  (``torch.compiler.save_cache_artifacts``: AOT autograd, inductor graphs, Triton
  kernels) plus, on CPU, the C++ kernels (``.so``) inductor built during the fit, which
  the portable artifacts do not carry. A kernel's file name is the hash of its source and
  compiler command (ISA flags included), so a node that builds differently misses it and
  compiles. Written atomically (:func:`versatil.files.atomic_write`).

What a trial reports (epoch metrics): ``compile/cache_loaded`` (1 when it loaded a bundle),
``compile/cache_published``, ``compile/cache_wait_s``, and inductor's
``compile/fxgraph_cache_hits`` / ``compile/fxgraph_cache_misses``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import json
import logging
import socket
import tarfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import nn

from versatil.files import atomic_write
from versatil.training.spec import DeviceInfo, TrialSettings

__all__ = ["CompileCache", "CompileCacheSession", "cache_key"]

log = logging.getLogger(__name__)

_BUNDLE = ".bundle"
_ARTIFACTS = "artifacts.bin"
_KERNELS = "kernels/"


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return str(triton.__version__)


def cache_key(settings: TrialSettings, device: DeviceInfo, model: nn.Module) -> dict[str, Any]:
    """What a bundle is filed under (see the module docstring), as plain data."""
    tensors = [
        (name, list(t.shape), str(t.dtype))
        for name, t in [*model.named_parameters(), *model.named_buffers()]
    ]
    structure = hashlib.sha256(
        json.dumps([repr(model), tensors], sort_keys=True).encode()
    ).hexdigest()
    return {
        "torch": str(torch.__version__),
        "triton": _triton_version(),
        "device": f"{device.type}:{device.name}",
        "settings": settings.to_config(),
        "model": f"{type(model).__module__}.{type(model).__qualname__}",
        "structure": structure[:16],
    }


def _digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def _inductor_cache_dir() -> Path:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir())


def _identity() -> str:
    """This process's machine and inductor cache: who shares its compiled kernels."""
    return f"{socket.gethostname()}:{_inductor_cache_dir()}"


def _kernel_files(since: float) -> list[Path]:
    """The C++ kernels inductor built in its local cache since ``since`` (a timestamp)."""
    root = _inductor_cache_dir()
    return [
        path for path in root.glob("??/c*.so") if path.is_file() and path.stat().st_mtime >= since
    ]


@dataclasses.dataclass(frozen=True)
class CompileCache:
    """A shared directory of compile bundles (see the module docstring).

    Attributes:
        root: The directory; created on first use. Every worker must reach it (the
            sweep's storage path is shared by every node).
        wait_timeout_s: How long a trial waits for another trial compiling the same key
            before compiling itself.
    """

    root: Path
    wait_timeout_s: float = 600.0

    def session(
        self, settings: TrialSettings, device: DeviceInfo, model: nn.Module
    ) -> CompileCacheSession:
        """The cache as one compiled fit of ``model`` uses it (a Lightning callback)."""
        key = cache_key(settings, device, model)
        return CompileCacheSession(self, key, self.root / _digest(key))


class CompileCacheSession(L.Callback):
    """One fit's use of a :class:`CompileCache`: wait or lock, load, then publish.

    Use as a context manager around the fit, and pass it to the Trainer as a callback:
    entering waits for (or takes) the key's lock and loads the bundle; the end of the first
    training epoch publishes a bundle when there was none; leaving releases the lock.
    """

    def __init__(self, cache: CompileCache, key: dict[str, Any], stem: Path) -> None:
        self.cache = cache
        self.key = key
        self.bundle = stem.with_suffix(_BUNDLE)
        self._lock_path = stem.with_suffix(".lock")
        self._owner_path = stem.with_suffix(".owner")
        self.identity = _identity()
        self.loaded = False
        self.published = False
        self.wait_s = 0.0
        self._lock: Any = None
        self._started = 0.0
        self._replace = False  # the bundle there could not be loaded: overwrite it

    # --- lock ---------------------------------------------------------------------------

    def _acquire(self) -> bool:
        """Takes the key's lock, waiting while another process holds it (bounded)."""
        self.cache.root.mkdir(parents=True, exist_ok=True)
        handle = open(self._lock_path, "a+b")  # noqa: SIM115
        deadline = time.monotonic() + self.cache.wait_timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if self._owner_path.exists() and self._owner_path.read_text() == self.identity:
                    # Compiling in this very inductor cache: inductor's own locks already
                    # make each kernel compile once here, so waiting would only idle.
                    handle.close()
                    return False
                if time.monotonic() >= deadline:
                    handle.close()
                    log.warning("compile cache: waited %.0f s for %s", self.wait_s, self.bundle)
                    return False
                time.sleep(0.1)
                continue
            self._lock = handle
            self._owner_path.write_text(self.identity)
            return True

    def _release(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(FileNotFoundError):
                self._owner_path.unlink()
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    # --- load and publish -----------------------------------------------------------------

    def _load(self) -> bool:
        try:
            with tarfile.open(self.bundle, "r") as archive:
                artifacts = archive.extractfile(_ARTIFACTS)
                if artifacts is None:
                    return False
                torch.compiler.load_cache_artifacts(artifacts.read())
                local = _inductor_cache_dir()
                for member in archive.getmembers():
                    if not member.isfile() or not member.name.startswith(_KERNELS):
                        continue
                    relative = Path(member.name[len(_KERNELS) :])
                    if relative.is_absolute() or ".." in relative.parts:
                        continue
                    target = local / relative
                    if target.exists():
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    data = archive.extractfile(member)
                    content = data.read() if data else b""
                    atomic_write(target, lambda tmp, content=content: tmp.write_bytes(content))
        except (OSError, tarfile.TarError, RuntimeError) as error:
            log.warning("compile cache: could not load %s: %s", self.bundle, error)
            return False
        return True

    def publish(self) -> bool:
        """Writes this process's compile artifacts as the key's bundle (if it has none)."""
        if self.bundle.exists() and not self._replace:
            return False
        saved = torch.compiler.save_cache_artifacts()
        if saved is None:
            return False
        artifacts, _ = saved
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            _add(archive, _ARTIFACTS, artifacts)
            _add(archive, "key.json", json.dumps(self.key, indent=1).encode())
            local = _inductor_cache_dir()
            for path in _kernel_files(self._started):
                _add(archive, _KERNELS + str(path.relative_to(local)), path.read_bytes())
        atomic_write(self.bundle, lambda tmp: tmp.write_bytes(buffer.getvalue()))
        return True

    # --- the fit ---------------------------------------------------------------------------

    def __enter__(self) -> CompileCacheSession:
        start = time.monotonic()
        # A reused worker's earlier trials recorded their artifacts too: publish this fit's.
        with contextlib.suppress(ImportError, AttributeError):
            from torch.compiler._cache import CacheArtifactManager

            CacheArtifactManager.clear()
        self._started = time.time() - 1.0  # file times have coarse resolution
        if not self.bundle.exists():
            self._acquire()
        if self.bundle.exists():
            self.loaded = self._load()
            if self.loaded:
                self._release()  # nothing to compile first: let the others load too
            else:
                self._replace = self._lock is not None or self._acquire()
        self.wait_s = time.monotonic() - start
        return self

    def __exit__(self, *exc: object) -> None:
        self._release()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Publishes once the first epoch compiled its graphs, then lets waiters load."""
        if self._lock is not None and not self.loaded:
            try:
                self.published = self.publish()
            except (OSError, RuntimeError) as error:
                log.warning("compile cache: could not publish %s: %s", self.bundle, error)
            self._release()

    @property
    def epoch_metrics(self) -> dict[str, float]:
        """``compile/cache_*`` and inductor's graph-cache hits and misses so far."""
        from torch._dynamo.utils import counters

        return {
            "compile/cache_loaded": float(self.loaded),
            "compile/cache_published": float(self.published),
            "compile/cache_wait_s": self.wait_s,
            "compile/fxgraph_cache_hits": float(counters["inductor"]["fxgraph_cache_hit"]),
            "compile/fxgraph_cache_misses": float(counters["inductor"]["fxgraph_cache_miss"]),
        }


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    archive.addfile(info, io.BytesIO(data))
