"""A trial's checkpoint as an MLflow 3 logged model, linked to its child run.

The model is :mod:`versatil.inference_model` (a pyfunc model from code) with the
checkpoint directory as its artifact and the trial's setting as its model config, so
``mlflow.pyfunc.load_model`` rebuilds the module the way it trained. Logging it runs that
file, which imports no torch: the driver stays free of torch. No requirements are inferred
(that would load the model in a subprocess): they are the installed versions of what it
needs.

The input example and the signature come from the checkpoint's ``input_example.json``
(written by the worker, :mod:`versatil.training.input_example`): a few rows of a real
batch and the module's outputs on them, read here as numpy. The signature is inferred
from both, so MLflow never runs the model to infer it, and the serving-input validation,
which would load the model, is turned off (``validate_serving_input=False``). A
checkpoint without the file is logged without either. After logging, the run's final
metric values are logged again with the model's id, so the model shows them.

A model is logged once per run: a resumed sweep, a ``sync`` or a second end of a sweep
finds it by its source run and name (:func:`find_trial_model`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
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

INPUT_EXAMPLE_FILE = "input_example.json"
"""The worker's input example in a checkpoint directory (versatil.training.input_example)."""

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


def _decode(value: Any) -> Any:
    """An ``input_example.json`` value as numpy: an array, a dict or a list of them."""
    import numpy as np

    if "dict" in value:
        return {str(k): _decode(v) for k, v in value["dict"].items()}
    if "list" in value:
        return [_decode(v) for v in value["list"]]
    return np.asarray(value["data"], dtype=value["dtype"])


def input_example_of(checkpoint_dir: Path) -> tuple[Any, Any] | None:
    """The checkpoint's input example and the signature inferred from it, or ``None``.

    The signature's outputs are the recorded outputs' (when MLflow can describe them; the
    inputs' alone otherwise). A missing or unreadable file gives ``None``: the model is
    logged without an example.
    """
    from mlflow.models import infer_signature

    path = Path(checkpoint_dir) / INPUT_EXAMPLE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        example = _decode(data["inputs"])
        outputs = _decode(data["outputs"]) if "outputs" in data else None
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("ignoring the unreadable input example %s", path, exc_info=True)
        return None
    try:
        signature = infer_signature(example, outputs)
    except Exception:  # outputs MLflow has no schema for: describe the inputs only
        signature = infer_signature(example)
    return example, signature


def _link_run_metrics(client: Any, run_id: str, model_id: str) -> None:
    """Logs the run's final metric values again, with the model's id (the same points).

    The run's history is unchanged (a point logged twice is stored once). A failure is
    logged, not raised: the model stays logged without its metrics.
    """
    from mlflow.entities import Metric
    from mlflow.exceptions import MlflowException

    try:
        metrics = []
        for key in client.get_run(run_id).data.metrics:
            history = client.get_metric_history(run_id, key)
            if history:
                end = max(history, key=lambda m: (m.step, m.timestamp))
                metrics.append(Metric(key, end.value, end.timestamp, end.step, model_id=model_id))
        if metrics:
            client.log_batch(run_id, metrics=metrics)
    except MlflowException:
        log.warning("the metrics of run %s are not linked to its model", run_id, exc_info=True)


class _PyfuncFlavor:
    """``mlflow.pyfunc`` as ``Model.log``'s flavor, taking ``validate_serving_input``.

    ``Model.log`` reads ``validate_serving_input`` (default ``True``: load the model and
    predict on the example) from its keyword arguments, then passes them all to the
    flavor's ``save_model``, which ``mlflow.pyfunc``'s rejects. This flavor drops it.
    """

    @staticmethod
    def save_model(validate_serving_input: bool = True, **kwargs: Any) -> Any:
        import mlflow.pyfunc

        return mlflow.pyfunc.save_model(**kwargs)


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


@contextlib.contextmanager
def _quiet_model_logging() -> Iterator[None]:
    """MLflow's notes on the model's signature, left off the sweep's console.

    The signature is the one this module gives (from the checkpoint's input example), or
    none when the checkpoint has no example (the worker said why): MLflow's notes that it
    validates the example, or that it cannot infer a signature, say nothing to act on.
    """
    pyfunc_log = logging.getLogger("mlflow.pyfunc")
    level = pyfunc_log.level
    pyfunc_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        pyfunc_log.setLevel(level)


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

    The checkpoint's ``input_example.json``, if any, gives the example and signature;
    a newly logged model gets the run's final metric values (logged once, with it).

    Returns:
        The logged model's id.
    """
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
    example, signature = input_example_of(checkpoint_dir) or (None, None)
    with _tracking_uri(client.tracking_uri), _quiet_model_logging():
        Model.log(
            artifact_path=None,
            name=MODEL_NAME,
            flavor=_PyfuncFlavor,
            model_id=held.model_id,
            python_model=str(code.origin),
            artifacts={"checkpoint": str(checkpoint_dir)},
            model_config=model_config_of(checkpoint_dir),
            pip_requirements=_requirements(),
            flavor_name="pyfunc.ModelFromCode",
            input_example=example,
            signature=signature,
            validate_serving_input=False,  # it would load the model (torch) in the driver
        )
    client.finalize_logged_model(held.model_id, LoggedModelStatus.READY)
    client.log_outputs(run_id, [LoggedModelOutput(held.model_id, step=0)])
    _link_run_metrics(client, run_id, held.model_id)
    log.info("logged model %s for run %s", held.model_id, run_id)
    return held.model_id
