"""A sweep's winners to INT8, logged beside them (``python -m versatil.sweep compress``).

The trials are read back from MLflow, as ``report`` reads them; the chosen ones (the
Pareto front by default, ``--top K`` or ``--trial ID``) are compressed with
:func:`versatil.quantization.post_training_compress` and each is logged as a run nested
under its trial's run (see :mod:`versatil.sweep.int8.runs`).

A trial's checkpoint is its last one, the one its objective was measured on. It is taken
from the trial run's ``checkpoint/`` artifact when MLflow holds one (the copy any machine
that reaches the tracking server can read; ``mlflow.log_checkpoints`` says which trials
get one: ``best`` by default, ``all``), else from the sweep's Tune storage path
(``<experiment_dir>/<trial_id>/checkpoint_NNNNNN``, recorded on the sweep's parent run),
which holds every trial's but only on the machine, or shared disk, the sweep ran on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from versatil.errors import ConfigError
from versatil.sweep.config.post_training import Selection
from versatil.sweep.int8.selection import select_trials
from versatil.sweep.results.rows import finished
from versatil.sweep.vocab.names import CHECKPOINT_ARTIFACT

if TYPE_CHECKING:
    from versatil.sweep.report.load import Int8Row, SweepReport

__all__ = [
    "CompressOutcome",
    "TrialCheckpoint",
    "compress_after_sweep",
    "compress_sweep",
    "locate_checkpoint",
]

"""Where a trial run holds its checkpoint directory (``tracking.log_checkpoint``)."""
_PROGRESS_BAR = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


@dataclasses.dataclass(frozen=True)
class TrialCheckpoint:
    """Where a trial's checkpoint is.

    Attributes:
        trial_id: The trial.
        run: The trial's MLflow run.
        artifact: Whether it is the run's ``checkpoint/`` artifact (else ``path``).
        path: The checkpoint directory on the storage path, when not an artifact.
    """

    trial_id: str
    run: Any
    artifact: bool
    path: Path | None = None

    @property
    def source(self) -> str:
        """The checkpoint's address, as the INT8 run's tag records it."""
        if self.artifact:
            return f"runs:/{self.run.info.run_id}/{CHECKPOINT_ARTIFACT}"
        from versatil.sweep.storage import checkpoint_ref

        return checkpoint_ref(self.path)  # on object storage, its URI


def latest_tune_checkpoint(experiment_dir: str | Path, trial_id: str) -> Path | None:
    """The trial's last ``checkpoint_NNNNNN`` directory holding ``last.ckpt``, if any.

    ``experiment_dir`` is a directory or, on object storage, its URI: the trial's
    checkpoints are then fetched into this machine's mirror.
    """
    from versatil.sweep.storage import Storage, local_checkpoint, parse_location
    from versatil.sweep.vocab import tags
    from versatil.training.constants import CheckpointFilename

    name = CheckpointFilename.DEFAULT_CHECKPOINT
    storage = Storage(parse_location(tags.EXPERIMENT_DIR, str(experiment_dir)))
    if storage.remote:
        for directory in sorted(storage.pull(trial_id).glob("checkpoint_*"), reverse=True):
            if directory.is_dir() and (local_checkpoint(directory) / name).is_file():
                return directory
        return None
    trial_dir = Path(experiment_dir) / trial_id
    found = sorted(d for d in trial_dir.glob("checkpoint_*") if (d / name).is_file())
    return found[-1] if found else None


def locate_checkpoint(
    client: Any, trial_run: Any, experiment_dir: str | None, trial_id: str
) -> TrialCheckpoint:
    """The trial's checkpoint: its run's artifact, else the sweep's storage path.

    Raises:
        ConfigError: when neither holds it.
    """
    if client.list_artifacts(trial_run.info.run_id, CHECKPOINT_ARTIFACT):
        return TrialCheckpoint(trial_id, trial_run, artifact=True)
    local = latest_tune_checkpoint(experiment_dir, trial_id) if experiment_dir else None
    if local is not None:
        return TrialCheckpoint(trial_id, trial_run, artifact=False, path=local)
    where = f"{experiment_dir}/{trial_id}" if experiment_dir else "the sweep's storage path"
    raise ConfigError(
        f"compress: trial {trial_id} has no checkpoint here: its MLflow run "
        f"{trial_run.info.run_id} holds no {CHECKPOINT_ARTIFACT}/ artifact (set "
        f"mlflow.log_checkpoints: all in the sweep file to log every trial's) and {where} "
        "has no checkpoint_* directory (run compress where the sweep ran)"
    )


def fetch_checkpoint(client: Any, checkpoint: TrialCheckpoint, workdir: Path) -> Path:
    """A local checkpoint directory: the artifact downloaded into ``workdir``, or the path."""
    if not checkpoint.artifact:
        return checkpoint.path
    run_id = checkpoint.run.info.run_id
    with _no_progress_bar():
        return Path(client.download_artifacts(run_id, CHECKPOINT_ARTIFACT, str(workdir)))


@contextlib.contextmanager
def _no_progress_bar() -> Iterator[None]:
    """Turns MLflow's artifact download progress bar off for the block."""
    previous = os.environ.get(_PROGRESS_BAR)
    os.environ[_PROGRESS_BAR] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_PROGRESS_BAR, None)
        else:
            os.environ[_PROGRESS_BAR] = previous


@dataclasses.dataclass
class CompressOutcome:
    """What ``compress`` did.

    Attributes:
        report: The sweep as read from MLflow before compressing.
        int8: The INT8 runs logged by this call, in trial order.
        failed: ``(trial_id, reason)`` of each trial that could not be compressed.
    """

    report: SweepReport
    int8: list[Int8Row]
    failed: list[tuple[str, str]]


def _load(tracking_uri: str, experiment: str, parent_run_id: str | None) -> SweepReport:
    from mlflow.exceptions import MlflowException

    from versatil.sweep.report.load import load_report

    try:
        return load_report(tracking_uri, experiment, parent_run_id)
    except ConfigError as error:
        raise ConfigError(f"compress: {str(error).removeprefix('report: ')}") from None
    except MlflowException as error:
        reason = " ".join(str(error).split())
        raise ConfigError(f"compress: MLflow at {tracking_uri!r} failed: {reason[:500]}") from None


def _choose(report: SweepReport, experiment: str, selection: Selection) -> list[Any]:
    """The trials to compress, or a ConfigError saying why there are none."""
    done = [r for r in report.rows if finished(r)]
    if not done:
        statuses = ", ".join(f"{r.trial_id} {r.status}" for r in report.rows) or "no trials"
        raise ConfigError(
            f"compress: sweep {experiment!r} has no finished trial to compress ({statuses}); "
            "a trial must complete (or be stopped by the scheduler) with a finite objective"
        )
    if selection.kind == "trial" and selection.trial_id not in {r.trial_id for r in done}:
        valid = ", ".join(r.trial_id for r in done)
        known = {r.trial_id: r for r in report.rows}.get(selection.trial_id)
        why = (
            f"it ended {known.status}{': ' + known.reason if known.reason else ''}"
            if known is not None
            else f"sweep {experiment!r} has no such trial"
        )
        raise ConfigError(
            f"compress: --trial {selection.trial_id}: {why}; finished trials: {valid}"
        )
    ranking = report.judgement.ranking
    if selection.kind == "pareto" and ranking is not None and len(ranking.objectives) > 1:
        # A multi-objective sweep: its own Pareto set, as the report ranks and tags it.
        by_id = {r.trial_id: r for r in done}
        return [by_id[t] for t in ranking.front if t in by_id]
    return select_trials(report.rows, report.mode, selection)


def _describe(report: SweepReport, selection: Selection) -> str:
    """What was chosen, as the output says it (a multi-objective sweep's own Pareto set)."""
    ranking = report.judgement.ranking
    if selection.kind == "pareto" and ranking is not None and len(ranking.objectives) > 1:
        objectives = ", ".join(f"{m} ({mode})" for m, mode in ranking.objectives)
        return f"the Pareto set of {objectives}"
    return selection.describe()


def compress_sweep(
    tracking_uri: str,
    experiment: str,
    selection: Selection,
    output: Path,
    *,
    parent_run_id: str | None = None,
    backend: str | None = None,
    stream: TextIO | None = None,
    register: str | None = None,
) -> CompressOutcome:
    """Compresses the chosen trials of a sweep and logs each as a nested INT8 run.

    Every chosen trial's checkpoint is located before any is compressed, so a missing
    one fails the command at once. A trial whose compression fails (its validation logs
    no objective, say) is reported in ``failed`` and the others go on.

    Args:
        tracking_uri: The sweep's MLflow store.
        experiment: The sweep's MLflow experiment.
        selection: Which trials.
        output: The directory the INT8 checkpoint directories go to, one per trial.
        parent_run_id: The sweep run; by default the experiment's latest.
        backend: ``torchao``, ``torch.ao`` or ``None`` to choose.
        stream: Where progress lines go; default: standard output.
        register: The registered model (``mlflow.register``): the recommended trial's
            INT8 checkpoint, when it is compressed, is logged as a model of its INT8 run
            and registered there with the alias ``recommended-int8``.

    Raises:
        ConfigError: for an unknown sweep or trial, no finished trial, or a chosen trial
            without a checkpoint.
    """
    from versatil.sweep.int8.runs import compressed_dir, log_int8_run
    from versatil.sweep.report.load import int8_rows
    from versatil.sweep.tracking import runs_by_trial
    from versatil.sweep.tracking.store import client as mlflow_client
    from versatil.sweep.vocab.run_tags import SweepTags

    stream = stream if stream is not None else sys.stdout
    report = _load(tracking_uri, experiment, parent_run_id)
    chosen = _choose(report, experiment, selection)
    context = report.context
    client = mlflow_client(tracking_uri)
    runs = runs_by_trial(client, context)
    experiment_dir = SweepTags.read(client.get_run(context.parent_run_id).data.tags).experiment_dir
    checkpoints = [
        locate_checkpoint(client, runs[row.trial_id], experiment_dir, row.trial_id)
        for row in chosen
    ]
    finished_count = sum(finished(r) for r in report.rows)
    print(
        f"compress: sweep {experiment!r} (run {context.parent_run_id}), "
        f"{_describe(report, selection)}: {len(chosen)} of {finished_count} finished "
        f"trials: {', '.join(r.trial_id for r in chosen)}",
        file=stream,
        flush=True,
    )
    from versatil.cli_common import quiet_libraries
    from versatil.quantization import post_training_compress

    quiet_libraries()  # after Lightning's import, which sets its loggers' levels
    logged, failed = [], []
    for checkpoint in checkpoints:
        trial = checkpoint.trial_id
        print(f"{trial}: checkpoint {checkpoint.source}", file=stream, flush=True)
        try:
            with tempfile.TemporaryDirectory(prefix="versatil-compress-") as workdir:
                local = fetch_checkpoint(client, checkpoint, Path(workdir))
                result = post_training_compress(
                    local,
                    compressed_dir(output, trial),
                    objective=context.objective,
                    backend=backend,
                )
        except Exception as error:  # one trial's failure does not stop the others
            reason = f"{type(error).__name__}: {error}"
            failed.append((trial, reason))
            print(f"{trial}: not compressed: {reason}", file=stream, flush=True)
            continue
        run_id = log_int8_run(client, context, checkpoint.run, trial, result, checkpoint.source)
        logged.append(run_id)
        if register and trial == report.judgement.verdict.recommended:
            _register_int8(client, context, register, run_id, result)
        print(
            f"{trial}: {result.backend.value}, {result.objective} "
            f"{result.objective_before:.4g} -> {result.objective_after:.4g} "
            f"({result.objective_delta:+.2g}), inference x{result.speedup:.2f}, "
            f"{result.size_mb_before:.3g} -> {result.size_mb_after:.3g} MB; run {run_id} "
            f"under {checkpoint.run.info.run_id}",
            file=stream,
            flush=True,
        )
    mine = [row for row in int8_rows(client, context) if row.run_id in set(logged)]
    return CompressOutcome(report=report, int8=mine, failed=failed)


def _register_int8(client: Any, context: Any, name: str, run_id: str, result: Any) -> None:
    """The recommended trial's INT8 checkpoint, a logged model, as ``recommended-int8``."""
    from versatil.sweep.tracking.logged_models import log_trial_model
    from versatil.sweep.tracking.registry import RECOMMENDED_INT8_ALIAS, register_model
    from versatil.sweep.vocab import tags

    run = client.get_run(run_id)
    model_id = log_trial_model(client, context.experiment_id, run, Path(result.output_dir))
    version_tags = {
        tags.VERSION_SETTING: "INT8",
        "precision": "8",
        tags.OBJECTIVE: result.objective,
        tags.VERSION_OBJECTIVE: f"{result.objective_after:.6g}",
        tags.INT8_TRIAL: run.data.tags.get(tags.INT8_TRIAL, ""),
        tags.INT8_BACKEND: result.backend.value,
    }
    register_model(client, name, model_id, run_id, version_tags, aliases=(RECOMMENDED_INT8_ALIAS,))


def compress_after_sweep(
    config: Any, outcome: Any, stream: TextIO | None = None
) -> CompressOutcome | None:
    """What the sweep file's ``post_training.int8`` asks for, once the sweep has ended.

    The INT8 directories go to ``<experiment_dir>/int8``. Nothing happens for ``none``, or
    when no trial produced a finite objective.

    Args:
        config: The sweep (``SweepConfig``).
        outcome: What ``run_sweep`` returned.
        stream: Where progress lines go; default: standard output.
    """
    selection = config.post_training.selection()
    if selection is None or outcome.best is None:
        return None
    print(file=stream if stream is not None else sys.stdout)
    compressed = compress_sweep(
        outcome.tracking.tracking_uri,
        config.experiment_name,
        selection,
        outcome.experiment_dir / "int8",
        parent_run_id=outcome.tracking.parent_run_id,
        stream=stream,
        register=config.mlflow.register,
    )
    if outcome.storage is not None and (outcome.experiment_dir / "int8").is_dir():
        outcome.storage.push(outcome.experiment_dir.name, "int8")  # beside the results
    return compressed
