"""A sweep's storage path as a tree of files, local or on object storage, read the same way.

Tune writes its results and checkpoints straight to the storage path (``storage_path`` and
``storage_filesystem``). versatil writes its own small files (the sweep as it ran, the
parent run's record, the end marker) through :class:`Storage`, and reads Tune's records
from a local view: the directory itself on a local path, else a mirror under the user's
cache (``$XDG_CACHE_HOME/versatil/storage``) refreshed from the store before each read.
The mirror holds every record but no checkpoint's content: a checkpoint directory there is
empty, a marker beside it (``checkpoint_NNNNNN.versatil-remote``) names its URI, and
:func:`local_checkpoint` downloads it when a checkpoint is read (logged to MLflow,
compressed, re-timed or resumed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from versatil.files import atomic_write
from versatil.sweep.storage.location import Location, redact

__all__ = [
    "REMOTE_SUFFIX",
    "CheckpointMirror",
    "Storage",
    "cache_root",
    "checkpoint_ref",
    "local_checkpoint",
]

REMOTE_SUFFIX = ".versatil-remote"
"""What ends the file beside a mirrored checkpoint directory that names its URI."""

_CHECKPOINT_PREFIX = "checkpoint_"


def cache_root() -> Path:
    """This node's cache of versatil: ``$XDG_CACHE_HOME/versatil`` (``~/.cache/versatil``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "versatil"


class Storage:
    """A storage path: where Tune writes, and how versatil reads and writes beside it.

    Args:
        location: The parsed storage path.
    """

    def __init__(self, location: Location) -> None:
        self.location = location
        self._filesystem: Any = None
        self._root: str | None = None

    @property
    def remote(self) -> bool:
        """Whether the storage path is on object storage."""
        return self.location.remote

    def display(self, *parts: str) -> str:
        """What to print for ``parts`` under the storage path (no secrets)."""
        if not self.remote:
            return str(self.location.directory().joinpath(*parts))
        uri = urllib.parse.urlsplit(redact(self.location.value))
        path = "/".join([uri.path.rstrip("/"), *parts])
        return urllib.parse.urlunsplit(uri._replace(path=path))

    @property
    def filesystem(self) -> Any:
        """The pyarrow file system (credentials from the environment or the URI)."""
        self._resolve()
        return self._filesystem

    @property
    def root(self) -> str:
        """The storage path on :attr:`filesystem` (``bucket/prefix`` on S3)."""
        self._resolve()
        assert self._root is not None
        return self._root

    def _resolve(self) -> None:
        if self._root is not None:
            return
        from pyarrow import fs

        if self.remote:
            self._filesystem, root = fs.FileSystem.from_uri(self.location.value)
            self._root = root.rstrip("/")
        else:
            self._filesystem, self._root = fs.LocalFileSystem(), str(self.location.directory())

    def path(self, *parts: str) -> str:
        """``parts`` under the storage path, as a path on :attr:`filesystem`."""
        return "/".join([self.root, *parts])

    def tune_arguments(self, *parts: str) -> dict[str, Any]:
        """Tune's ``storage_path`` (and ``storage_filesystem``) for ``parts`` under the path."""
        if not self.remote:
            return {"storage_path": str(self.location.directory().joinpath(*parts))}
        return {"storage_path": self.path(*parts), "storage_filesystem": self.filesystem}

    def mirror(self, *parts: str) -> Path:
        """The local view of ``parts``: the directory itself, or its place in the mirror."""
        if not self.remote:
            return self.location.directory().joinpath(*parts)
        return _mirror_root(self.filesystem).joinpath(self.root, *parts)

    def _uri(self, path: str) -> str:
        """The URI of ``path`` on this store, with the storage path's non-secret query."""
        query = urllib.parse.urlsplit(redact(self.location.value)).query
        return f"{self.location.scheme}://{path}" + (f"?{query}" if query else "")

    def local_of(self, path: str) -> Path:
        """Where ``path`` (on :attr:`filesystem`, under the storage path) is in the mirror."""
        relative = PurePosixPath(path).relative_to(self.root)
        return self.mirror(*relative.parts)

    def probe(self) -> None:
        """Creates the path if needed and writes and deletes an object there.

        Raises:
            OSError: (or pyarrow's errors) when the store refuses.
        """
        probe = self.path(f".versatil-write-check-{os.getpid()}")
        if not self.remote:
            self.filesystem.create_dir(self.root, recursive=True)
        with self.filesystem.open_output_stream(probe) as out:
            out.write(b"")
        self.filesystem.delete_file(probe)

    def exists(self, *parts: str) -> bool:
        """Whether a file or directory ``parts`` exists under the storage path."""
        from pyarrow import fs

        return self.filesystem.get_file_info(self.path(*parts)).type != fs.FileType.NotFound

    def directories(self, *parts: str) -> list[str]:
        """The names of the directories right under ``parts``, sorted."""
        from pyarrow import fs

        selector = fs.FileSelector(self.path(*parts), allow_not_found=True)
        infos = self.filesystem.get_file_info(selector)
        return sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)

    def write_text(self, text: str, *parts: str) -> None:
        """Writes ``text`` to the file ``parts`` (and to its place in the mirror), whole.

        A write that fails (a full disk) leaves the file as it was: a reader never meets
        part of one (:func:`~versatil.files.atomic_write`; an object store's upload is
        whole by itself).
        """
        if self.remote:
            with self.filesystem.open_output_stream(self.path(*parts)) as out:
                out.write(text.encode())
        local = self.mirror(*parts)
        local.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(local, lambda tmp: tmp.write_text(text))

    def push(self, *parts: str) -> None:
        """Uploads the mirror's file or directory ``parts`` to the store (local: nothing)."""
        if not self.remote:
            return
        from pyarrow import fs

        local = self.mirror(*parts)
        if local.is_dir():
            fs.copy_files(
                str(local),
                self.path(*parts),
                source_filesystem=fs.LocalFileSystem(),
                destination_filesystem=self.filesystem,
            )
        else:
            with self.filesystem.open_output_stream(self.path(*parts)) as out:
                out.write(local.read_bytes())

    def pull(self, *parts: str) -> Path:
        """The local view of the directory ``parts``, its records fresh from the store.

        Downloads what changed (size or modification time) since the last pull; each
        checkpoint directory becomes an empty one beside a marker naming its URI, and one
        the store no longer holds leaves the mirror.
        """
        local = self.mirror(*parts)
        if not self.remote:
            return local
        from pyarrow import fs

        base = self.path(*parts)
        selector = fs.FileSelector(base, recursive=True, allow_not_found=True)
        local.mkdir(parents=True, exist_ok=True)
        with _locked(local):  # one pull of a directory at a time on this node
            self._mirror(self.filesystem.get_file_info(selector), base, local)
        return local

    def _mirror(self, infos: list[Any], base: str, local: Path) -> None:
        """Brings ``infos`` (the store's listing under ``base``) into ``local``."""
        from pyarrow import fs

        checkpoints: set[Path] = set()
        for info in infos:
            relative = PurePosixPath(info.path).relative_to(base).parts
            at = next((i for i, p in enumerate(relative) if p.startswith(_CHECKPOINT_PREFIX)), None)
            if at is not None:
                directory = local.joinpath(*relative[: at + 1])
                if directory not in checkpoints:
                    checkpoints.add(directory)
                    directory.mkdir(parents=True, exist_ok=True)
                    remote = "/".join([base, *relative[: at + 1]])
                    uri = self._uri(remote)
                    atomic_write(_marker(directory), lambda tmp, uri=uri: tmp.write_text(uri))
            elif info.type == fs.FileType.File:
                # Tune rewrites its state in place: same size, same second on S3.
                again = relative[-1].startswith("experiment_state-")
                _download(self.filesystem, info, local.joinpath(*relative), again)
        for stale in local.glob(f"**/{_CHECKPOINT_PREFIX}*"):
            if stale.is_dir() and stale not in checkpoints:
                shutil.rmtree(stale, ignore_errors=True)
                _marker(stale).unlink(missing_ok=True)


def _mirror_root(filesystem: Any) -> Path:
    """This node's mirror of a store: one per kind and endpoint (two MinIOs never mix)."""
    key = filesystem.type_name
    try:  # an S3-compatible store's endpoint, as pyarrow pickles it
        endpoint = filesystem.__reduce__()[1][0].get("endpoint_override") or ""
    except (AttributeError, IndexError, TypeError):
        endpoint = ""
    if endpoint:
        key += "-" + re.sub(r"[^A-Za-z0-9.-]+", "_", endpoint.split("://")[-1])
    return cache_root() / "storage" / key


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``directory`` (a file in it) for the block."""
    with (directory / ".versatil-pull.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(filesystem: Any, info: Any, target: Path, again: bool = False) -> None:
    """Copies the file ``info`` describes to ``target`` unless it is there, unchanged."""
    mtime_ns = info.mtime_ns or 0
    if target.is_file() and not again:
        held = target.stat()
        if held.st_size == info.size and held.st_mtime_ns == mtime_ns:
            return
    target.parent.mkdir(parents=True, exist_ok=True)

    def fetch(partial: Path) -> None:
        with filesystem.open_input_stream(info.path) as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        os.utime(partial, ns=(mtime_ns, mtime_ns))

    # Whole, and each call its own partial file: two processes of a node may fetch the
    # same checkpoint at once.
    atomic_write(target, fetch)


def _marker(directory: Path) -> Path:
    """The file naming the URI of the mirrored checkpoint ``directory``."""
    return directory.with_name(directory.name + REMOTE_SUFFIX)


def checkpoint_ref(checkpoint: str | os.PathLike) -> str:
    """What names ``checkpoint`` on every node: its URI for a mirrored one, else its path."""
    text = str(checkpoint)
    if "://" in text:
        return text
    marker = _marker(Path(text))
    return marker.read_text().strip() if marker.is_file() else text


def local_checkpoint(checkpoint: str | os.PathLike) -> Path:
    """A local directory holding the checkpoint ``checkpoint`` names.

    ``checkpoint`` is a local directory (returned as it is), a mirrored one (its content
    downloaded into it) or a checkpoint's URI (downloaded into this node's mirror).
    """
    from pyarrow import fs

    text = str(checkpoint)
    location_uri = checkpoint_ref(text)
    if "://" not in location_uri:
        return Path(text)
    filesystem, path = fs.FileSystem.from_uri(location_uri)
    target = Path(text) if "://" not in text else _mirror_root(filesystem) / path
    selector = fs.FileSelector(path, recursive=True, allow_not_found=True)
    for info in filesystem.get_file_info(selector):  # none: the store dropped it
        if info.type == fs.FileType.File:
            relative = PurePosixPath(info.path).relative_to(path).parts
            _download(filesystem, info, target.joinpath(*relative))
    target.mkdir(parents=True, exist_ok=True)
    atomic_write(_marker(target), lambda tmp: tmp.write_text(location_uri))
    return target


@dataclasses.dataclass(frozen=True)
class CheckpointMirror:
    """A trial's checkpoints on object storage, fetched into this node's cache one by one.

    Attributes:
        filesystem: The store's pyarrow file system (the one Tune's checkpoint holds).
        remote_parent: The trial's directory on the store.
        newest: The local place of the checkpoint Tune restores (empty until fetched).
    """

    filesystem: Any
    remote_parent: str
    newest: Path

    @classmethod
    def of(cls, filesystem: Any, path: str) -> CheckpointMirror | None:
        """The mirror of the checkpoint at ``path``, or ``None`` when it is a local path.

        The trial's earlier checkpoint directories get their (empty) local places too,
        so a policy that falls back to an earlier one finds it.
        """
        from pyarrow import fs

        if filesystem is None or isinstance(filesystem, fs.LocalFileSystem):
            return None
        parent, _, name = path.rstrip("/").rpartition("/")
        local_parent = _mirror_root(filesystem) / parent
        selector = fs.FileSelector(parent, allow_not_found=True)
        for info in filesystem.get_file_info(selector):
            earlier = info.base_name.startswith(_CHECKPOINT_PREFIX) and info.base_name < name
            if info.type == fs.FileType.Directory and earlier:
                (local_parent / info.base_name).mkdir(parents=True, exist_ok=True)
        (local_parent / name).mkdir(parents=True, exist_ok=True)
        return cls(filesystem, parent, local_parent / name)

    def remote(self, directory: Path) -> str:
        """The store's path of the mirrored checkpoint ``directory``."""
        return f"{self.remote_parent}/{directory.name}"

    def fetch(self, directory: Path) -> Path:
        """Downloads the checkpoint whose local place is ``directory``; returns it."""
        from pyarrow import fs

        remote = self.remote(directory)
        selector = fs.FileSelector(remote, recursive=True, allow_not_found=True)
        for info in self.filesystem.get_file_info(selector):
            if info.type == fs.FileType.File:
                relative = PurePosixPath(info.path).relative_to(remote).parts
                _download(self.filesystem, info, directory.joinpath(*relative))
        return directory
