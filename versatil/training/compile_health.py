"""How ``torch.compile`` fared in one fit: graphs, graph breaks, recompiles, CUDA graphs.

Dynamo keeps its statistics in process-wide counters, and a worker runs trial after trial:
:func:`reset_compile_counters` (called by ``reset_process_state`` before every fit) starts
them from zero, so :func:`read_compile_counts` is the current fit's alone. The sources,
as of torch 2.13:

- graphs: ``torch._dynamo.utils.counters["stats"]["unique_graphs"]``, one per FX graph
  dynamo handed to the backend (a graph break splits a frame into several).
- graph breaks: the sum of ``counters["graph_break"]``, keyed by reason.
- recompiles: dynamo's compilation metrics (``torch._dynamo.utils.get_compilation_metrics``)
  with a ``recompile_reason``: a frame compiled again because a guard failed (a new batch
  size, a dtype, a Python value). ``torch._dynamo.reset()`` clears none of these, hence
  the explicit reset.
- CUDA graphs: inductor's CUDA graph trees call dynamo's compile callbacks with the
  ``CUDAGRAPH_RECORDING`` trigger each time they record a graph (``reduce-overhead`` and
  ``max-autotune``); :class:`CudaGraphRecordings` counts those calls.
  ``counters["inductor"]["cudagraph_skips"]`` counts the graphs inductor ran without
  CUDA graphs (it logs why). Both are CUDA-only and untested on this project's CPU
  machines so far.

Whether dynamo compiled *during* a stretch of the fit (a training batch, for the
throughput's steady state) is what :class:`CompileActivity` tells: dynamo runs its
compile-start callbacks for every compile (a frame traced, a backward compiled lazily at
its first call, a CUDA graph recorded), and counts every frame it tries to compile in
``counters["frames"]["total"]``; either changing between two reads means it compiled.
(Dynamo's compilation metrics are a deque of the last 64 entries: their number stops
growing, so they do not tell.)

Dynamo's warnings (a graph break's explanation, a recompile limit hit) are logged by every
worker; :func:`compile_logs_to` sends them to a file for the duration of a fit (``train``
uses :data:`COMPILE_LOG` in the checkpoint directory).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "COMPILE_LOG",
    "COMPILE_LOGGERS",
    "CompileActivity",
    "CompileCounts",
    "CudaGraphRecordings",
    "compile_logs_to",
    "read_compile_counts",
    "reset_compile_counters",
]

COMPILE_LOG = "compile.log"
"""The file in a checkpoint directory that a fit's compile log records go to."""

COMPILE_LOGGERS = (
    "torch._dynamo",
    "torch._inductor",
    "torch._functorch",
    "torch._subclasses",
    "torch.fx",
)
"""The logger trees whose records :func:`compile_logs_to` redirects: dynamo, inductor,
AOT autograd, fake tensors and FX's symbolic shapes (dynamic-shape warnings)."""


@dataclasses.dataclass(frozen=True)
class CompileCounts:
    """Dynamo's statistics since :func:`reset_compile_counters`.

    Attributes:
        graphs: FX graphs compiled.
        graph_breaks: Graph breaks, every reason and occurrence counted.
        recompiles: Frames compiled again after a guard failed.
        frames_ok: Frames dynamo converted (with or without a graph).
        cudagraph_skips: Compiled graphs inductor ran without CUDA graphs.
    """

    graphs: int
    graph_breaks: int
    recompiles: int
    frames_ok: int
    cudagraph_skips: int


def reset_compile_counters() -> None:
    """Starts dynamo's statistics from zero (``torch._dynamo.reset()`` leaves them)."""
    from torch._dynamo import utils

    utils.counters.clear()
    utils.clear_compilation_metrics()


def read_compile_counts() -> CompileCounts:
    """Dynamo's statistics since the last :func:`reset_compile_counters`."""
    from torch._dynamo import utils

    counters = utils.counters
    recompiles = sum(
        1 for m in utils.get_compilation_metrics() if getattr(m, "recompile_reason", None)
    )
    return CompileCounts(
        graphs=int(counters["stats"]["unique_graphs"]),
        graph_breaks=int(sum(counters["graph_break"].values())),
        recompiles=recompiles,
        frames_ok=int(counters["frames"]["ok"]),
        cudagraph_skips=int(counters["inductor"]["cudagraph_skips"]),
    )


class _StartCallback:
    """Dynamo's compile-start callback, installed and removed by the instance.

    ``torch._dynamo.reset()`` clears every callback, so install after it. Subclasses
    define ``_on_start(args)``.
    """

    def __init__(self) -> None:
        self._installed = False

    def _on_start(self, args: Any) -> None:
        raise NotImplementedError

    def install(self) -> None:
        """Starts counting (idempotent)."""
        from torch._dynamo.callback import callback_handler

        if not self._installed:
            callback_handler.register_start_callback(self._on_start)
            self._installed = True

    def remove(self) -> None:
        """Stops counting; harmless when already removed (or cleared by a reset)."""
        from torch._dynamo.callback import callback_handler

        if self._installed:
            with contextlib.suppress(ValueError):
                callback_handler.remove_start_callback(self._on_start)
            self._installed = False


class CudaGraphRecordings(_StartCallback):
    """Counts the CUDA graphs inductor records while installed (see :meth:`install`).

    CUDA graph trees record a graph after warm-up runs, at run time; each recording runs
    dynamo's compile-start callbacks with ``CallbackTrigger.CUDAGRAPH_RECORDING``.
    ``torch._dynamo.reset()`` clears every callback, so install after it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _on_start(self, args: Any) -> None:
        from torch._dynamo.callback import CallbackTrigger

        if getattr(args, "callback_trigger", None) is CallbackTrigger.CUDAGRAPH_RECORDING:
            self.count += 1


class CompileActivity(_StartCallback):
    """Tells whether dynamo compiled between two reads of :meth:`marker`.

    Counts dynamo's compile-start callbacks while installed (see :meth:`install`), and
    reads dynamo's count of frames it tried to compile, which a ``torch._dynamo.reset()``
    that cleared the callback leaves counting.
    """

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0

    def _on_start(self, args: Any) -> None:
        self.starts += 1

    def marker(self) -> tuple[int, int]:
        """A value that changes whenever dynamo compiles: compare two reads of it."""
        from torch._dynamo import utils

        return self.starts, int(utils.counters["frames"]["total"])


def _compile_loggers() -> list[logging.Logger]:
    """The existing loggers under :data:`COMPILE_LOGGERS` that have handlers of their own.

    torch's logging setup gives each of them a stderr handler and turns propagation off,
    so swapping those handlers is what moves their output.
    """
    loggers = [logging.getLogger(name) for name in COMPILE_LOGGERS]
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name.startswith(
            tuple(f"{root}." for root in COMPILE_LOGGERS)
        ):
            loggers.append(logger)
    return [logger for logger in loggers if logger.handlers]


@contextlib.contextmanager
def compile_logs_to(path: Path, header: str = "") -> Iterator[None]:
    """Sends the compile loggers' records to ``path`` (appended) instead of the console.

    Each logger under :data:`COMPILE_LOGGERS` that torch gave a handler keeps its level;
    only where its records go changes, and the original handlers come back on exit. The
    file is created at the first record, so a fit that logs nothing leaves none.

    Args:
        path: The log file.
        header: A line written before the first record (which fit the records are from).
    """
    handler = _HeaderFileHandler(path, header)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    )
    saved = [(logger, list(logger.handlers)) for logger in _compile_loggers()]
    for logger, _ in saved:
        logger.handlers = [handler]
    try:
        yield
    finally:
        for logger, handlers in saved:
            logger.handlers = handlers
        handler.close()


class _HeaderFileHandler(logging.FileHandler):
    """A lazily opened, appending file handler that starts with a header line."""

    def __init__(self, path: Path, header: str) -> None:
        super().__init__(path, mode="a", encoding="utf-8", delay=True)
        self._header = header

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is None:  # type: ignore[has-type]
            # Only now: a fit that logs nothing leaves no file, nor a directory for it.
            Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            self.stream = self._open()
            if self._header:
                self.stream.write(self._header.rstrip("\n") + "\n")
        super().emit(record)
