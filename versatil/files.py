"""Files written whole: a reader sees the old file (or folder) or the new one, never part."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> None:
    """Writes ``path`` whole: ``write(tmp)`` on a temporary path beside it, then a rename.

    ``tmp`` has the name of ``path`` (inside a new hidden folder ``.<name>.XXXXXXXX`` of
    the same directory, so on the same file system), and ``write`` may make a file or a
    folder there. A file, or a folder where ``path`` was none, is then renamed over
    ``path`` (``os.replace``). A folder that replaces a folder (which ``os.replace`` cannot
    overwrite) swaps places with it: the previous one is renamed to ``.<name>.old`` beside
    it, the new one to ``path``, and ``.<name>.old`` is removed.

    Each call has a temporary folder of its own, so processes and threads may write the
    same ``path`` at once: the last rename wins.

    Args:
        path: The file or folder to write; its parent directory must exist.
        write: Writes the content to the path it is given; what it returns is ignored.

    Raises:
        Exception: whatever ``write`` or the rename raised. ``path`` is then as it was,
            and the temporary folder, with whatever ``write`` left in it, is removed.
    """
    path = Path(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent)) / path.name
    try:
        write(tmp)
        if path.is_dir() and tmp.is_dir():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)
