"""The model registry: the sweep's answer as a version of a registered model.

:func:`register_model` registers the recommended setting's logged model (see
:mod:`~versatil.sweep.tracking.logged_models`) and points the ``recommended`` alias at
it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from versatil.sweep.vocab import tags

__all__ = ["RECOMMENDED_ALIAS", "register_model"]

RECOMMENDED_ALIAS = "recommended"
"""The alias of the version that holds the sweep's recommended setting."""

MODEL_ID_TAG = tags.VERSION_MODEL_ID


def register_model(
    client: Any, name: str, model_id: str, run_id: str, version_tags: Mapping[str, str]
) -> str:
    """Registers the logged model as a version of ``name`` (once), aliased ``recommended``.

    A resumed, synced or re-confirmed sweep finds the version that holds the model (by
    its :data:`MODEL_ID_TAG`) and moves the alias to it; it never registers a model twice.

    Args:
        client: An ``MlflowClient``.
        name: The registered model.
        model_id: The recommended trial's logged model.
        run_id: Its run.
        version_tags: The setting, its speedup and interval, the objective.

    Returns:
        The version number.
    """
    from mlflow.exceptions import MlflowException

    with contextlib.suppress(MlflowException):  # it exists: add a version
        client.create_registered_model(name)
    held = [
        v
        for v in client.search_model_versions(f"name='{name}' and run_id='{run_id}'")
        if v.tags.get(MODEL_ID_TAG) == model_id
    ]
    if held:
        version = held[0].version
    else:
        version = client.create_model_version(
            name,
            source=f"models:/{model_id}",
            run_id=run_id,
            tags={**version_tags, MODEL_ID_TAG: model_id},
            model_id=model_id,
        ).version
    for key, value in version_tags.items():
        client.set_model_version_tag(name, version, key, value)
    client.set_registered_model_alias(name, RECOMMENDED_ALIAS, version)
    return str(version)
