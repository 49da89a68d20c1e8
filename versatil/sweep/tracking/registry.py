"""The model registry: the sweep's best checkpoint as a version of a registered model."""

from __future__ import annotations

import contextlib
from typing import Any

from versatil.sweep.vocab import tags

__all__ = ["register_checkpoint"]


def register_checkpoint(client: Any, name: str, run: Any) -> None:
    """Adds a version of model ``name`` for the run's ``checkpoint/``, once per run."""
    from mlflow.exceptions import MlflowException

    with contextlib.suppress(MlflowException):  # it exists: add a version
        client.create_registered_model(name)
    held = client.search_model_versions(f"name='{name}' and run_id='{run.info.run_id}'")
    if held:  # a resumed or synced sweep registers nothing twice
        return
    client.create_model_version(
        name,
        source=f"{run.info.artifact_uri}/checkpoint",
        run_id=run.info.run_id,
        tags={tags.TRIAL_ID: run.data.tags[tags.TRIAL_ID]},
    )
