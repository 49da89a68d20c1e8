"""The MLflow store that ``report`` and ``compress`` read: chosen, checked, quiet."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from versatil.sweep.cli.logs import EMBEDDED_STORE_LOGGERS, quiet_loggers
from versatil.sweep.storage import embedded_store_directory

__all__ = ["reading_store"]


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
