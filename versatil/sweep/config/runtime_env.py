"""The sweep file's ``runtime_env:`` section: Ray's own runtime environment, passed through.

On a cluster, versatil ships the task's code by itself (see
:mod:`versatil.sweep.engine.shipping`); this section is for what only the user knows: a
directory or packages of their own to ship, what to leave out, packages to install and
environment variables. Its fields are Ray's, with Ray's meaning; local paths are relative to
the directory the sweep is started from, as Ray reads them.
"""

from __future__ import annotations

from typing import Any

import pydantic

__all__ = ["RuntimeEnvSection"]


class RuntimeEnvSection(pydantic.BaseModel):
    """Ray's ``runtime_env`` for every trial of the sweep (``working_dir``, ``pip``, ...)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    working_dir: str | None = pydantic.Field(
        None,
        description="A directory (or a zip/URI) every trial runs in and imports from; "
        "replaces the task's directory that versatil ships by default.",
    )
    py_modules: list[str] | None = pydantic.Field(
        None,
        description="Packages or modules (local paths, or URIs of zips and wheels) every "
        "trial can import; replaces the task's package that versatil ships by default.",
    )
    excludes: list[str] = pydantic.Field(
        default_factory=list,
        description="Patterns (.gitignore syntax) of files not to ship, added to versatil's "
        "own: .git, virtual environments, caches, the storage path, and files over 10 MiB "
        "of the task's directory shipped by default.",
    )
    pip: list[str] | str | None = pydantic.Field(
        None, description="Packages pip installs on each node for the trials (nodes need PyPI)."
    )
    env_vars: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Environment variables of every trial."
    )

    @pydantic.field_validator("env_vars", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        # YAML reads `1` and `true` as numbers and booleans; Ray wants strings.
        if isinstance(value, dict):
            return {
                key: str(item).lower() if isinstance(item, bool) else str(item)
                for key, item in value.items()
            }
        return value

    @property
    def ships_code(self) -> bool:
        """Whether the section names the code to ship itself (``working_dir``, ``py_modules``)."""
        return self.working_dir is not None or self.py_modules is not None

    def as_ray(self) -> dict[str, Any]:
        """The fields given, as Ray's ``runtime_env`` dict (unset fields left out)."""
        return {
            name: value
            for name, value in self.model_dump(exclude_defaults=True).items()
            if value not in (None, [], {})
        }
