"""Logging while the sweep runs: a Tune callback's work, queued to one background thread.

A trial waits at each report until the driver has taken its result, so the callback only
queues; one thread logs in order. The store may fail at any time: a failed call is
skipped, not retried, because Tune's records hold everything (see
:mod:`versatil.sweep.tracking.reconcile`): when a server that stopped answering answers
again, and at the end of the sweep, whatever is missing is backfilled from them.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.plan.records import Where
from versatil.sweep.tracking.child_run import ChildRun
from versatil.sweep.tracking.store import (
    TrackingContext,
    TrackingUnavailable,
    client,
    is_reachable,
)
from versatil.sweep.vocab.report import TrialReport

__all__ = ["SweepTracker"]

logger = logging.getLogger(__name__)

PROBE_EVERY_S = 3.0
"""While a server does not answer, how often the logging thread asks whether it is back."""


class SweepTracker:
    """The driver's side of tracking: every child run, as results arrive and after.

    Tracking reaches up to nothing: what it needs of the sweep comes in as plain values
    and functions.

    Args:
        opening: The parent run, or the future of it being opened: trials start while
            it opens, and the first logging call waits for it.
        where: Where the sweep's runs go: which checkpoints to log (``log_checkpoints``)
            and the model to register them as (``register``).
        resolve: A trial's axes -> its run configuration (params and settings to log), or
            ``None`` when the axes do not resolve (the trial fails; its axes alone are logged).
        recover: Called when a store that stopped answering answers again, to log what it
            missed (from Tune's records); store errors it raises count as a new failure.
    """

    def __init__(
        self,
        opening: TrackingContext | concurrent.futures.Future,
        where: Where,
        resolve: Callable[[Mapping[str, Any]], Any | None] | None = None,
        recover: Callable[[SweepTracker], Any] | None = None,
    ) -> None:
        self._opening = opening
        self.where = where
        self._resolve = resolve or (lambda axes: None)
        self._recover = recover
        self._client: Any = None
        self.children: dict[str, ChildRun] = {}
        """The child runs this driver opened, by trial id, with the steps they hold."""
        self._queue: concurrent.futures.ThreadPoolExecutor | None = None
        self.down_since: float | None = None
        """When the store stopped answering (``time.monotonic()``); ``None`` while it does."""
        self.outage: str = ""
        """Why the store last failed."""
        self._next_probe = 0.0
        self.skipped = 0
        """Logging calls skipped while the store did not answer."""
        self.log_times_s: list[float] = []
        """Seconds each queued logging call took in the background thread."""

    @property
    def context(self) -> TrackingContext:
        """The parent run, once it is open.

        Raises:
            TrackingUnavailable: when the parent run could not be opened.
        """
        if isinstance(self._opening, concurrent.futures.Future):
            try:
                self._opening = self._opening.result()
            except ConfigError:
                raise
            except Exception as error:
                raise TrackingUnavailable(
                    f"MLflow: cannot open the sweep's parent run ({type(error).__name__}: "
                    f"{error}); the trials' results so far stay in the Tune experiment "
                    "directory: fix the store, then continue with --resume"
                ) from None
        return self._opening

    @property
    def client(self) -> Any:
        """The ``MlflowClient`` of the sweep's store."""
        if self._client is None:
            self._client = client(self.context.tracking_uri)
        return self._client

    # The queue.

    def submit(self, call: Callable[..., Any], *args: Any) -> None:
        """Queues a logging call for the background thread, after the ones before it.

        Raises:
            TrackingUnavailable: when the parent run failed to open: the sweep stops.
        """
        if isinstance(self._opening, concurrent.futures.Future) and self._opening.done():
            _ = self.context  # raises if opening failed
        if self._queue is None:
            self._queue = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="mlflow-log"
            )
        self._queue.submit(self._guarded, call, *args)

    def _guarded(self, call: Callable[..., Any], *args: Any) -> None:
        if self.down_since is not None and not self.answers_again():
            self.skipped += 1
            return
        start = time.perf_counter()
        try:
            call(*args)
        except ConfigError:
            return  # TrackingUnavailable: the callback raises it in the driver's thread
        except Exception as error:  # an outage must not stop training
            self.failed(error)
        finally:
            self.log_times_s.append(time.perf_counter() - start)

    def failed(self, error: BaseException) -> None:
        """Records that the store failed; warns once per outage."""
        reason = failure_reason(error)
        if self.down_since is None:
            logger.warning(
                "MLflow: could not log to %s (%s); the sweep goes on, and what is missing "
                "is logged from Tune's records when the store answers again",
                self.context.tracking_uri,
                reason,
            )
        self.down_since = self.down_since or time.monotonic()
        self.outage = reason
        self._next_probe = time.monotonic() + PROBE_EVERY_S

    def answers_again(self, now: bool = False) -> bool:
        """Whether a store that failed answers again; then logs what it missed.

        Args:
            now: Ask now; by default a server is asked at most every few seconds.
        """
        if not now and time.monotonic() < self._next_probe:
            return False
        if not is_reachable(self.context.tracking_uri):
            self._next_probe = time.monotonic() + PROBE_EVERY_S
            return False
        logger.warning(
            "MLflow: %s answers again after %.0f s; logging what it missed",
            self.context.tracking_uri,
            time.monotonic() - (self.down_since or time.monotonic()),
        )
        self.down_since = None
        if self._recover is not None:
            try:
                self._recover(self)
            except Exception as error:
                self.failed(error)
                return False
        return True

    def drain(self, timeout_s: float = 120.0) -> bool:
        """Waits until every queued logging call is done; ``False`` if it gave up waiting.

        A call stuck on a server that accepts and never answers ends at MLflow's request
        timeout; ``timeout_s`` bounds the wait regardless.
        """
        if self._queue is None:
            return True
        queue, self._queue = self._queue, None
        try:
            queue.submit(lambda: None).result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            queue.shutdown(wait=False, cancel_futures=True)
            self.failed(TimeoutError(f"logging calls still waiting after {timeout_s:g} s"))
            return False
        queue.shutdown(wait=True)
        return True

    # What the callback queues.

    def child(self, trial_id: str, trial_name: str, axes: Mapping[str, Any]) -> ChildRun:
        """The trial's run: the one this driver holds, else found or created in the store."""
        child = self.children.get(trial_id)
        if child is None:
            child = ChildRun.open(
                self.client,
                self.context,
                trial_id=trial_id,
                trial_name=trial_name,
                axes=axes,
                config=self._resolve(axes),
            )
            self.children[trial_id] = child
        return child

    def trial_result(
        self, trial_id: str, trial_name: str, axes: Mapping[str, Any], result: Mapping[str, Any]
    ) -> None:
        """Logs a trial's result: an epoch's metrics, or just the run of a trial that ended."""
        child = self.child(trial_id, trial_name, axes)
        report = TrialReport.from_dict(result)
        if report.status == TrialStatus.RUNNING:
            child.reopen()  # retried or resumed after its run was ended
        if report.epoch is not None:
            child.log_epoch(result)

    def finish_trial(
        self, trial_id: str, trial_name: str, axes: Mapping[str, Any], status: str, reason: str
    ) -> None:
        """Tags a trial's run with its final status and reason and ends it."""
        self.child(trial_id, trial_name, axes).finish(status, reason)

    def callback(self) -> Any:
        """A Tune callback that queues each result for its trial's run, and the trial's end."""
        from ray import tune

        tracker = self

        class _Callback(tune.Callback):
            def on_trial_result(self, iteration, trials, trial, result, **info):
                # The config the result trained with: the scheduler sees a result before
                # the callbacks do, and a PBT exploit has by then mutated trial.config.
                config = result.get("config")
                axes = dict(config if isinstance(config, dict) else trial.config)
                tracker.submit(tracker.trial_result, trial.trial_id, str(trial), axes, result)

            def on_trial_complete(self, iteration, trials, trial, **info):
                # No status in the last result (none reported): the trial failed.
                report = TrialReport.from_dict(trial.last_result or {})
                status = report.status or TrialStatus.FAILED
                tracker.submit(
                    tracker.finish_trial,
                    trial.trial_id,
                    str(trial),
                    dict(trial.config),
                    TrialStatus.STOPPED if status == TrialStatus.RUNNING else status,
                    report.reason,
                )

            def on_trial_error(self, iteration, trials, trial, **info):
                error = ""
                if trial.error_file and Path(trial.error_file).is_file():
                    lines = Path(trial.error_file).read_text().strip().splitlines()
                    error = lines[-1] if lines else ""
                tracker.submit(
                    tracker.finish_trial,
                    trial.trial_id,
                    str(trial),
                    dict(trial.config),
                    TrialStatus.FAILED,
                    error,
                )

        return _Callback()

    def unlogged(self, records: Sequence[Any]) -> dict[str, str]:
        """What this driver knows is not in the store: trial id -> the epochs and end missing.

        A trial whose run this driver never opened is listed as not confirmed.
        """
        missing = {}
        for record in records:
            epochs = sorted(record.epochs())
            child = self.children.get(record.trial_id)
            if child is None:
                if epochs or record.ended:
                    missing[record.trial_id] = f"not confirmed ({len(epochs)} epochs)"
                continue
            parts = []
            gaps = [e for e in epochs if not child.holds(e)]
            if gaps:
                parts.append(f"epochs {_ranges(gaps)}")
            if record.ended and not child.ended:
                parts.append("its end")
            if parts:
                missing[record.trial_id] = " and ".join(parts)
        return missing


_KNOWN_FAILURES = (
    ("Connection refused", "connection refused"),
    ("Read timed out", "no answer: the request timed out"),
    ("timed out", "no answer: the request timed out"),
    ("Connection reset", "connection reset"),
    ("RemoteDisconnected", "the server closed the connection"),
)


def failure_reason(error: BaseException) -> str:
    """A store's failure in a few words: what a network error means, else the error itself."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    for marker, meaning in _KNOWN_FAILURES:
        if marker in text:
            return meaning
    return text[:300]


def _ranges(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
