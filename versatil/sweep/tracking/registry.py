"""The model registry: the sweep's answer as versions of a registered model.

:func:`register_model` registers a trial's logged model (see
:mod:`~versatil.sweep.tracking.logged_models`) once and points aliases at its version:
``recommended`` (the verdict's recommendation), ``fastest`` (the no-worse setting with
the highest measured speedup) and ``most-accurate`` (the setting with the best
objective); :func:`~versatil.sweep.engine.tracker.pareto_aliases` picks their trials.
One trial may hold several aliases: its model is still one version.
:func:`drop_aliases` removes the aliases a sweep's end names no trial for, so that none
points at an answer the verdict no longer gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from versatil.sweep.vocab import tags

__all__ = [
    "ALIASES",
    "FASTEST_ALIAS",
    "MOST_ACCURATE_ALIAS",
    "RECOMMENDED_ALIAS",
    "RECOMMENDED_INT8_ALIAS",
    "drop_aliases",
    "register_model",
]

RECOMMENDED_ALIAS = "recommended"
"""The alias of the version that holds the sweep's recommended setting."""
FASTEST_ALIAS = "fastest"
"""The alias of the no-worse setting with the highest measured speedup."""
MOST_ACCURATE_ALIAS = "most-accurate"
"""The alias of the setting with the best objective."""
ALIASES = (RECOMMENDED_ALIAS, FASTEST_ALIAS, MOST_ACCURATE_ALIAS)
"""The aliases a sweep's end sets (and moves, and drops)."""
RECOMMENDED_INT8_ALIAS = "recommended-int8"
"""The alias of the recommended trial's INT8 model, once ``compress`` has compressed it."""

MODEL_ID_TAG = tags.VERSION_MODEL_ID


def register_model(
    client: Any,
    name: str,
    model_id: str,
    run_id: str,
    version_tags: Mapping[str, str],
    aliases: Sequence[str] = (RECOMMENDED_ALIAS,),
) -> str:
    """Registers the logged model as a version of ``name`` (once), with ``aliases``.

    A resumed, synced or re-confirmed sweep finds the version that holds the model (by
    its :data:`MODEL_ID_TAG`) and moves the aliases to it; it never registers a model
    twice.

    Args:
        client: An ``MlflowClient``.
        name: The registered model.
        model_id: The trial's logged model.
        run_id: Its run.
        version_tags: The setting, its speedup and interval, the objective.
        aliases: The aliases to point at its version (by default ``recommended``).

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
    for alias in aliases:
        client.set_registered_model_alias(name, alias, version)
    return str(version)


def drop_aliases(client: Any, name: str, aliases: Iterable[str]) -> None:
    """Removes ``aliases`` from the registered model ``name``; a missing one is no error."""
    from mlflow.exceptions import MlflowException

    for alias in aliases:
        with contextlib.suppress(MlflowException):
            client.delete_registered_model_alias(name, alias)
