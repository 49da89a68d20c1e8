"""The task's code on every node: Ray's ``runtime_env`` for a sweep, checked before Ray starts.

A cluster's nodes do not see the driver's files. When a sweep joins a cluster, the task's
code travels with Ray's ``runtime_env``, chosen by the task module's shape:

- a module at the top of a directory (``my_task:build``, ``my_task.py`` beside the sweep)
  ships that **directory** as ``working_dir``: what Python found beside the module (sibling
  modules, small files it opens by a path built from ``__file__``: Tune starts each trial
  in a directory of its own) comes along, as it does when the sweep runs locally;
- a module inside a package (``mypkg.tasks:build``) ships that **package** as
  ``py_modules``: just the package, importable by its name, whatever directory holds it.

Nothing is shipped for the built-in tasks, for a task installed as a package (in
site-packages, as in a cluster's image), inside a Ray job whose own ``runtime_env`` ships
code (``ray job submit --working-dir``), or when the sweep file's ``runtime_env`` names
``working_dir`` or ``py_modules`` itself. A local sweep (no cluster address) ships nothing:
its workers share the driver's files.

What never ships: ``.git``, virtual environments, caches, MLflow's local files, the storage
path, and (by default) files over 10 MiB, which are named on the console. An upload over
Ray's limit (512 MiB, zipped) is one clear error naming the largest files, before Ray starts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import site
import sysconfig
import zipfile
from pathlib import Path
from typing import Any, TextIO

from versatil.errors import ConfigError
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.connect import connect_ray, joins_cluster
from versatil.training.tasks import BUILTIN_TASKS

__all__ = [
    "DEFAULT_EXCLUDES",
    "LARGE_FILE_BYTES",
    "Shipment",
    "connect_with",
    "plan_for",
    "plan_shipment",
]

# Patterns (.gitignore syntax, as Ray's ``excludes``) that no trial needs.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git",
    ".venv",
    "venv",
    ".venv-*",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".hypothesis",
    ".ipynb_checkpoints",
    "*.egg-info",
    "mlruns",
    "mlartifacts",
    "mlflow.db",
    ".DS_Store",
)
# Ray's own warning size for one file of a package: above it, a file is data, not code.
LARGE_FILE_BYTES = 10 * 1024 * 1024
_SHOWN = 5  # the largest files an error names


@dataclasses.dataclass(frozen=True)
class Shipment:
    """What a sweep hands Ray as ``runtime_env``, and what versatil chose to ship.

    Attributes:
        runtime_env: Ray's ``runtime_env`` for ``ray.init``, or ``None`` for none.
        shipped: The directory or package versatil ships by default, or ``None``.
        field: ``working_dir`` or ``py_modules``: how ``shipped`` travels.
        files: Files shipped from ``shipped``.
        size: Their bytes, before compression.
        left_out: Files over :data:`LARGE_FILE_BYTES` left out, with their sizes.
    """

    runtime_env: dict[str, Any] | None
    shipped: Path | None = None
    field: str | None = None
    files: int = 0
    size: int = 0
    left_out: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str | None:
        """One console line on the code shipped, or ``None`` when versatil ships none."""
        if self.shipped is None:
            return None
        line = (
            f"code: shipping {self.shipped} ({self.files} files, {_size(self.size)}) to the "
            f"cluster as {self.field}"
        )
        if self.left_out:
            names = ", ".join(f"{name} ({_size(size)})" for name, size in self.left_out)
            line += (
                f"; left out, over {_size(LARGE_FILE_BYTES)}: {names} (keep data on the "
                "storage path, or name runtime_env.working_dir to ship everything)"
            )
        return line


def plan_shipment(config: SweepConfig, joining: bool) -> Shipment:
    """The ``runtime_env`` of a sweep, its local paths and sizes checked.

    Args:
        config: The sweep; its task module must be importable here (the driver).
        joining: Whether the sweep joins a cluster (``--address`` or ``RAY_ADDRESS``).

    Raises:
        ConfigError: naming the ``runtime_env`` field, when a local path is missing or an
            upload is over Ray's size limit.
    """
    section = config.runtime_env
    env = section.as_ray()
    excludes = [*DEFAULT_EXCLUDES, *section.excludes]
    storage = None if config.location().remote else config.storage_dir()
    for field, path in _local_paths(section.working_dir, section.py_modules):
        if path.is_dir():  # its virtual environments and the storage path stay out too
            excludes += _measure(path, excludes, storage, field, large=False)[3]
    default = None
    # A LightningCLI config's classes are the user's to ship (runtime_env.working_dir).
    if joining and not section.ships_code and not _job_ships_code() and not config.task.config:
        default = _task_code(config.task.name)
    if default is None:
        if not env:
            return Shipment(None)
        return Shipment({**env, "excludes": excludes})
    field, root = default
    files, size, left_out, extra = _measure(root, excludes, storage, f"{field} (default)")
    where = str(root) if field == "working_dir" else [str(root)]
    env = {**env, field: where, "excludes": [*excludes, *extra]}
    return Shipment(env, root, field, files, size, left_out)


def plan_for(config: SweepConfig, address: str | None) -> Shipment:
    """:func:`plan_shipment` for a sweep about to connect to ``address`` (or a local Ray).

    A process already connected (its caller ran ``ray.init``) keeps its own
    ``runtime_env``: nothing is shipped by default then.
    """
    import ray

    return plan_shipment(config, joins_cluster(address) and not ray.is_initialized())


def connect_with(shipment: Shipment, address: str | None, stream: TextIO) -> None:
    """Says what code ships (one line on ``stream``), then connects with it."""
    line = shipment.describe()
    if line is not None:
        print(line, file=stream, flush=True)
    connect_ray(address, shipment.runtime_env)


def _local_paths(working_dir: str | None, py_modules: list[str] | None) -> list[tuple[str, Path]]:
    """The section's local paths, each checked to exist.

    Raises:
        ConfigError: for a path that does not exist.
    """
    named = [("runtime_env.working_dir", working_dir)] if working_dir else []
    named += [(f"runtime_env.py_modules[{i}]", m) for i, m in enumerate(py_modules or [])]
    paths = []
    for field, value in named:
        if "://" in value:
            continue  # a remote package: Ray fetches it on each node
        path = Path(value).expanduser().absolute()
        if not path.exists():
            raise ConfigError(
                f"{field}: {value!r} does not exist (looked for {path}); give a directory, "
                "a .py file or a .zip/.whl of your code, relative to the directory the sweep "
                "starts in, or a URI of a package"
            )
        paths.append((field, path))
    return paths


def _job_ships_code() -> bool:
    """Whether this driver runs in a Ray job whose ``runtime_env`` already ships code."""
    raw = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")
    if not raw:
        return False
    try:
        env = json.loads(raw).get("runtime_env") or {}
    except (ValueError, AttributeError):
        return False
    return bool(env.get("working_dir") or env.get("py_modules"))


def _task_code(spec: str) -> tuple[str, Path] | None:
    """How the task's code travels: ``("working_dir", dir)``, ``("py_modules", package)``.

    ``None`` for a built-in task, versatil's own modules and an installed package.
    """
    if spec in BUILTIN_TASKS:
        return None
    name = spec.partition(":")[0]
    found = importlib.util.find_spec(name)
    if found is None or found.origin is None or not os.path.isfile(found.origin):
        return None
    origin = Path(found.origin).resolve()
    top = name.split(".")[0]
    if top == "versatil" or _installed(origin):
        return None
    parts = name.split(".")
    if len(parts) == 1 and origin.name != "__init__.py":
        return "working_dir", origin.parent
    # The package's top: up from the module's directory, one level per dotted part.
    levels = len(parts) - 1 if origin.name == "__init__.py" else len(parts) - 2
    return "py_modules", origin.parent.parents[levels - 1] if levels else origin.parent


def _installed(path: Path) -> bool:
    """Whether ``path`` lies in an installed package's directory (site-packages)."""
    roots = {*site.getsitepackages(), site.getusersitepackages()}
    roots |= {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    for root in roots:
        with_root = Path(root).resolve()
        if path.is_relative_to(with_root):
            return True
    return False


def _measure(
    root: Path, excludes: list[str], storage: Path | None, field: str, large: bool = True
) -> tuple[int, int, tuple[tuple[str, int], ...], list[str]]:
    """Walks ``root`` as Ray will pack it; returns files, bytes, large files and patterns.

    The patterns leave out the virtual environments found, the storage path when it lies
    inside ``root`` and (with ``large``) the files over :data:`LARGE_FILE_BYTES`.

    Raises:
        ConfigError: when the package would exceed Ray's upload limit.
    """
    from ray._private.runtime_env import packaging

    extra: list[str] = []
    inside = storage is not None and storage.resolve().is_relative_to(root.resolve())
    if inside and storage.resolve() != root.resolve():
        extra.append(f"/{storage.resolve().relative_to(root.resolve()).as_posix()}/")

    def is_venv(path: Path) -> bool:
        if path.is_dir() and (path / "pyvenv.cfg").is_file():
            extra.append(f"/{path.relative_to(root).as_posix()}/")
            return True
        return False

    sizes: dict[str, int] = {}

    def handler(path: Path) -> None:
        if path.is_file():
            sizes[path.relative_to(root).as_posix()] = path.stat().st_size

    patterns = packaging._get_excludes(root, [*excludes, *extra])
    packaging._dir_travel(root, [patterns, is_venv], handler, include_gitignore=_gitignore())
    left_out: list[tuple[str, int]] = []
    if large:
        left_out = sorted(
            ((n, s) for n, s in sizes.items() if s > LARGE_FILE_BYTES), key=lambda item: -item[1]
        )
        extra += [f"/{name}" for name, _ in left_out]
        for name, _ in left_out:
            del sizes[name]
    _check_limit(root, sizes, field, _limit())
    return len(sizes), sum(sizes.values()), tuple(left_out), extra


def _limit() -> int:
    """Ray's upload limit of one package, in bytes (``RAY_max_grpc_message_size``)."""
    from ray._private.runtime_env import packaging

    return packaging.GCS_STORAGE_MAX_SIZE


def _gitignore() -> bool:
    """Whether Ray reads ``.gitignore`` files when it packs code (its default: yes)."""
    return os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1"


def _check_limit(root: Path, sizes: dict[str, int], field: str, limit: int) -> None:
    """Fails when the files would zip to Ray's limit or more; zips only when they might.

    Raises:
        ConfigError: naming the largest files and how to leave them out.
    """
    if sum(sizes.values()) < limit:
        return
    if _zipped_size(root, sizes) < limit:
        return
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:_SHOWN]
    names = ", ".join(f"{name} ({_size(size)})" for name, size in largest)
    raise ConfigError(
        f"runtime_env.{field}: {root} is {_size(sum(sizes.values()))} in {len(sizes)} files, "
        f"over Ray's upload limit of {_size(limit)}; largest: {names}. Leave files out with "
        "runtime_env.excludes (patterns as in .gitignore, e.g. 'data/'), a .rayignore file "
        "or .gitignore, and keep data on the storage path"
    )


def _zipped_size(root: Path, sizes: dict[str, int]) -> int:
    """The bytes of ``sizes``' files zipped as Ray zips them (deflate), without keeping it."""

    class _Counter:
        def __init__(self) -> None:
            self.count = 0

        def write(self, data: bytes) -> int:
            self.count += len(data)
            return len(data)

        def flush(self) -> None:
            pass

    counter = _Counter()
    with zipfile.ZipFile(counter, "w", zipfile.ZIP_DEFLATED) as archive:  # type: ignore[arg-type]
        for name in sizes:
            archive.write(root / name, name)
    return counter.count


def _size(size: int) -> str:
    """Bytes for a reader: B, KiB, MiB or GiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
