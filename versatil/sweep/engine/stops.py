"""A sweep stopped the way clusters stop it: SIGTERM (a pod's end, a job's) or Ctrl-C.

The first SIGTERM or SIGINT asks for a clean stop. During the trials, Tune ends its fit
at its next step, by its own graceful stop (``SIGUSR1``): the running trials stop, and
Tune saves the experiment's state. In any other phase (a race's screen, the re-timing,
the end's logging), the phase stops where it is. Either way the sweep then ends as
interrupted (:func:`end_interrupted`): the parent MLflow run says it was, and when, the
runs of unfinished trials are marked ``KILLED``, and :class:`SweepInterrupted` says what
was saved; ``--resume`` (or ``--auto-resume``) continues, and a trial stopped mid-way goes
on from its last checkpoint. A second signal stops at once.

Tune's own SIGINT handler is off meanwhile (``TUNE_DISABLE_SIGINT_HANDLER``): one handler
decides what both signals do, in every phase.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from versatil.status import MLFLOW_KILLED
from versatil.sweep.vocab import tags

__all__ = ["EXIT_STATUS", "Stops", "SweepInterrupted", "end_interrupted", "get_or_cancel"]

EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""A command's exit status after each signal: 128 plus the signal's number, as a shell's."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_TUNE_HANDLER = "TUNE_DISABLE_SIGINT_HANDLER"
DRAIN_S = 10.0
"""How long an interrupted sweep waits for its queued MLflow logging, of the 25 s it takes."""


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped by SIGINT or SIGTERM; what was saved, and how to go on.

    A ``KeyboardInterrupt``: no ``except Exception`` of a phase takes it for a failure of
    its own, and a wait in Ray (``ray.get``) ends on it as on Ctrl-C.

    Attributes:
        signum: The signal.
        at: When it came (``time.time()``).
        at_once: Whether a second signal stopped the sweep before it was saved.
        ended: Trials ended so far, the earlier runs' of a resumed sweep included.
        planned: Trials the sweep plans.
        stopped: Trials stopped mid-way, to go on from their last checkpoint.
        where: Where Tune's state is (the experiment directory, or its URI).
    """

    def __init__(self, signum: int, at: float, at_once: bool = False) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signal.Signals(signum)
        self.at = at
        self.at_once = at_once
        self.ended: int | None = None
        self.planned: int | None = None
        self.stopped: int | None = None
        self.where = ""

    @property
    def exit_status(self) -> int:
        """130 after SIGINT, 143 after SIGTERM."""
        return EXIT_STATUS[self.signum]

    @property
    def when(self) -> str:
        """The signal's time, UTC, ISO 8601 to the second."""
        moment = datetime.datetime.fromtimestamp(self.at, datetime.UTC)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")

    @property
    def headline(self) -> str:
        """How a stopped command's last line begins: ``stopped by SIGTERM at ...Z``."""
        return f"stopped by {self.signum.name} at {self.when}"

    def saved(self) -> str:
        """What the stop left, as one clause: ``5 of 16 trials ended, 2 stopped mid-way...``."""
        if self.at_once:
            return "stopped at once by a second signal: the state Tune saved last is kept"
        counts = f"{self.ended} of {self.planned} trials ended"
        if self.stopped == 1:
            counts += ", 1 stopped mid-way (it goes on from its last checkpoint)"
        elif self.stopped:
            counts += f", {self.stopped} stopped mid-way (they go on from their last checkpoint)"
        return f"{counts}; Tune's state is saved in {self.where}"


@dataclasses.dataclass
class Stops:
    """The sweep's handler of SIGINT and SIGTERM, and what it was asked.

    Attributes:
        request: The first signal's stop, once one came.
        at_once: The second signal's, once one came.
        fitting: Whether Tune's fit runs (it then stops at its next step).
    """

    request: SweepInterrupted | None = None
    at_once: SweepInterrupted | None = None
    fitting: bool = False
    _forwarded: bool = False
    _previous: dict[int, Any] = dataclasses.field(default_factory=dict)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Stops]:
        """Handles both signals while the block runs; the previous handlers after it.

        Outside the main thread (where Python runs no signal handler) it does nothing.
        """
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        tune_handler = os.environ.get(_TUNE_HANDLER)
        os.environ[_TUNE_HANDLER] = "1"
        self._previous = {signum: signal.getsignal(signum) for signum in _SIGNALS}
        self.install()
        try:
            yield self
        finally:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
            if tune_handler is None:
                os.environ.pop(_TUNE_HANDLER, None)
            else:
                os.environ[_TUNE_HANDLER] = tune_handler

    def install(self) -> None:
        """Puts the handler (back) on both signals: Ray's start puts its own on SIGTERM."""
        if self._previous:
            for signum in _SIGNALS:
                signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.request is not None:
            self.at_once = SweepInterrupted(signum, time.time(), at_once=True)
            raise self.at_once
        self.request = SweepInterrupted(signum, time.time())
        if not self.fitting:
            raise self.request

    def stop_of(self, interrupt: KeyboardInterrupt) -> SweepInterrupted | None:
        """The stop an interrupt came from (Ray raises one of its own for it in a wait).

        ``None`` for an interrupt no signal of this handler's raised.
        """
        if isinstance(interrupt, SweepInterrupted):
            return interrupt
        return self.at_once or self.request

    @contextlib.contextmanager
    def fit(self) -> Iterator[None]:
        """Marks Tune's fit: a stop asked during it ends the fit, then the sweep."""
        self.fitting = True
        try:
            yield
        finally:
            self.fitting = False
        if self.request is not None:
            raise self.request

    def callback(self) -> Any:
        """A Tune callback that hands a stop asked during the fit to Tune, at its next step."""
        from ray import tune

        stops = self

        class _Callback(tune.Callback):
            def on_step_begin(self, iteration, trials, **info):
                if stops.request is None or stops._forwarded:
                    return
                stops._forwarded = True
                # Tune says how to resume with its own API; the sweep says it with ours.
                logging.getLogger("ray.tune.tune").setLevel(logging.CRITICAL)
                signal.raise_signal(signal.SIGUSR1)  # Tune's graceful stop

        return _Callback()


def get_or_cancel(ref: Any) -> Any:
    """``ray.get(ref)``; a stop meanwhile cancels the task, freeing its device now.

    Args:
        ref: The object ref of a Ray task the phase waits for (the screen, the re-timing).
    """
    import ray

    try:
        return ray.get(ref)
    except KeyboardInterrupt:
        ray.cancel(ref, force=True)
        raise


def end_interrupted(stop: SweepInterrupted, tracker: Any, records: list[Any]) -> None:
    """Leaves the MLflow runs as ``--resume`` continues them, and counts what was saved.

    The queued logging gets :data:`DRAIN_S`; then the runs of trials Tune has not
    recorded as ended are marked ``KILLED`` (a resumed trial's first result makes its run
    ``RUNNING`` again), and the parent run is tagged with the signal and its time and
    marked ``KILLED`` (the resume reopens it). A store that does not answer is skipped:
    ``sync`` backfills it.

    Args:
        stop: The stop; its counts are filled in here.
        tracker: The sweep's :class:`~versatil.sweep.tracking.SweepTracker`.
        records: Tune's records of the sweep's trials, as saved at the stop.
    """
    stop.ended = sum(record.ended for record in records)
    unfinished = {record.trial_id for record in records if not record.ended}
    stop.stopped = sum(bool(record.results) for record in records if not record.ended)
    log = logging.getLogger(__name__)
    try:
        tracker.drain(timeout_s=DRAIN_S)
        client = tracker.client
        for trial_id, child in tracker.children.items():
            if trial_id in unfinished and not child.ended:
                client.set_terminated(child.run_id, MLFLOW_KILLED)
        parent = tracker.context.parent_run_id
        client.set_tag(parent, tags.INTERRUPTED, f"{stop.signum.name} at {stop.when}")
        client.set_terminated(parent, MLFLOW_KILLED)
    except Exception as error:  # the store is down: sync backfills what it missed
        log.warning("MLflow: the interrupted sweep's runs were not marked: %s", error)
