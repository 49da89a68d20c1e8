"""Library log lines the commands keep off the console."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator

__all__ = ["EMBEDDED_STORE_LOGGERS", "quiet_loggers"]

EMBEDDED_STORE_LOGGERS = ("alembic", "mlflow.store.db.utils")
"""Who logs, at INFO level, the creation and migration of a new SQLite store's tables."""


@contextlib.contextmanager
def quiet_loggers(names: Iterable[str], level: int = logging.WARNING) -> Iterator[None]:
    """Raises the named loggers to ``level`` for the block, then restores their levels.

    Args:
        names: The loggers to quiet; none leaves logging as it is.
        level: The lowest level they still emit.
    """
    loggers = [logging.getLogger(name) for name in names]
    previous = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(level, logger.level))
    try:
        yield
    finally:
        for logger, old in zip(loggers, previous, strict=True):
            logger.setLevel(old)
