"""A trial's checkpoint as an MLflow 3 logged model, linked to its child run.

The model is :mod:`versatil.inference_model` (a pyfunc model from code) with the
checkpoint directory as its artifact and the trial's setting as its model config, so
``mlflow.pyfunc.load_model`` rebuilds the module the way it trained. Logging it runs that
file, which imports no torch: the driver stays free of torch. No input example is given
(inferring a signature from one would load the model); no requirements are inferred
(that would load it in a subprocess): they are the installed versions of what it needs.

A model is logged once per run: a resumed sweep, a ``sync`` or a second end of a sweep
finds it by its source run and name (:func:`find_trial_model`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from versatil.sweep.vocab import tags

__all__ = [
    "MODEL_NAME",
    "MODEL_TYPE",
    "find_trial_model",
    "log_trial_model",
    "model_config_of",
]

log = logging.getLogger(__name__)

MODEL_NAME = "model"
"""Each trial's logged model's name (its run tells the trials' models apart)."""

MODEL_TYPE = "versatil-checkpoint"
"""The logged models' type: a checkpoint directory served by versatil.inference_model."""

CODE_MODULE = "versatil.inference_model"
"""The models-from-code file MLflow logs and runs at load."""

REQUIREMENTS = ("versatil", "torch", "lightning", "mlflow")
"""The distributions the model needs where it loads, pinned to the installed versions."""

SETTING_KEYS = ("precision", "compile_mode", "matmul_precision")

INT8_PRECISION = "8"
"""An INT8 checkpoint's precision in its ``config.yaml``."""


def model_config_of(checkpoint_dir: Path) -> dict[str, str]:
    """The model config for a checkpoint: its setting from ``config.yaml``, device ``auto``.

    An INT8 checkpoint's device is ``cpu``, where INT8 runs.

    Plain strings, as a sweep's axes spell them (``"none"`` for eager and torch's default
    matmul precision), read without torch.
    """
    data = yaml.safe_load((Path(checkpoint_dir) / "config.yaml").read_text()) or {}
    config = {key: str(data.get(key) or "none") for key in SETTING_KEYS}
    config["precision"] = str(data.get("precision") or "32")
    # An INT8 checkpoint (``precision: "8"``, from ``compress``) runs on CPU.
    return {**config, "device": "cpu" if config["precision"] == INT8_PRECISION else "auto"}


def find_trial_model(client: Any, experiment_id: str, run_id: str) -> Any | None:
    """The model logged for the run (its source run, named :data:`MODEL_NAME`), or ``None``."""
    found = client.search_logged_models(
        experiment_ids=[experiment_id],
        filter_string=f"source_run_id = '{run_id}' AND name = '{MODEL_NAME}'",
    )
    return found[0] if found else None


def _requirements() -> list[str]:
    pinned = []
    for name in REQUIREMENTS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            pinned.append(f"{name}=={importlib.metadata.version(name)}")
    return pinned


@contextlib.contextmanager
def _tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's fluent API pointed at ``uri`` for the block (``Model.log`` reads it).

    Setting it also sets ``MLFLOW_TRACKING_URI``; an unset URI is unset again after, so
    the process's default store stays what it was.
    """
    import mlflow
    from mlflow.tracking import is_tracking_uri_set

    previous = mlflow.get_tracking_uri() if is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)


def log_trial_model(
    client: Any,
    experiment_id: str,
    run: Any,
    checkpoint_dir: Path,
    model_tags: Mapping[str, str] | None = None,
) -> str:
    """Logs the checkpoint as a logged model of the run, unless it holds one; its id.

    Args:
        client: An ``MlflowClient``.
        experiment_id: The sweep's experiment.
        run: The trial's child run (its params become the model's).
        checkpoint_dir: The checkpoint directory on this machine.
        model_tags: Tags for the model, besides the trial id.

    Returns:
        The logged model's id.
    """
    import mlflow.pyfunc
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.models import Model

    run_id = run.info.run_id
    held = find_trial_model(client, experiment_id, run_id)
    if held is not None and held.status == LoggedModelStatus.READY:
        return held.model_id
    if held is None:
        held = client.create_logged_model(
            experiment_id=experiment_id,
            name=MODEL_NAME,
            source_run_id=run_id,
            params={k: str(v) for k, v in run.data.params.items()},
            tags={tags.TRIAL_ID: run.data.tags.get(tags.TRIAL_ID, ""), **(model_tags or {})},
            model_type=MODEL_TYPE,
        )
    code = importlib.util.find_spec(CODE_MODULE)
    with _tracking_uri(client.tracking_uri):
        Model.log(
            artifact_path=None,
            name=MODEL_NAME,
            flavor=mlflow.pyfunc,
            model_id=held.model_id,
            python_model=str(code.origin),
            artifacts={"checkpoint": str(checkpoint_dir)},
            model_config=model_config_of(checkpoint_dir),
            pip_requirements=_requirements(),
            flavor_name="pyfunc.ModelFromCode",
        )
    client.finalize_logged_model(held.model_id, LoggedModelStatus.READY)
    client.log_outputs(run_id, [LoggedModelOutput(held.model_id, step=0)])
    log.info("logged model %s for run %s", held.model_id, run_id)
    return held.model_id
