"""The commands' store options, and the MLflow store ``report`` and ``compress`` read.

``--storage-path`` and ``--tracking-uri`` are declared here once for every command; the
store a reading command uses is chosen, checked and kept quiet here too.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from versatil.sweep.cli.logs import EMBEDDED_STORE_LOGGERS, quiet_loggers
from versatil.sweep.storage import embedded_store_directory

__all__ = ["add_store_options", "reading_store"]

READING_STORE_HELP = "default: MLFLOW_TRACKING_URI, else the embedded SQLite store"


def add_store_options(
    parser: argparse.ArgumentParser,
    *,
    storage_default: str | None = "runs/sweeps",
    storage_help: str = "storage path holding the embedded store",
    tracking_help: str = READING_STORE_HELP,
) -> None:
    """Adds ``--tracking-uri`` and ``--storage-path``, as every command on a sweep has them.

    Args:
        parser: The command's parser.
        storage_default: ``--storage-path``'s default.
        storage_help: What ``--storage-path`` is to this command.
        tracking_help: What ``--tracking-uri`` defaults to for this command.
    """
    parser.add_argument("--storage-path", default=storage_default, help=storage_help)
    parser.add_argument("--tracking-uri", default=None, help=tracking_help)


@contextlib.contextmanager
def reading_store(tracking_uri: str | None, storage_path: str) -> Iterator[str]:
    """Yields the store's URI, with the embedded store's set-up logs kept quiet.

    The store is ``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the embedded SQLite
    store under ``--storage-path``.

    Raises:
        ConfigError: When the URI cannot be used (a scheme MLflow cannot track to, no
            server answering), naming where it came from.
    """
    from versatil.sweep.tracking import check_server, default_tracking_uri, tracking_store

    named = tracking_store(("--tracking-uri", tracking_uri))
    uri, source = named or (
        default_tracking_uri(embedded_store_directory("--storage-path", storage_path)),
        "--storage-path",
    )
    check_server(uri, source=source)
    with quiet_loggers(EMBEDDED_STORE_LOGGERS if named is None else ()):
        yield uri
