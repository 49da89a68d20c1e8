"""The sweep files shipped with versatil, and ``--config``'s lookup of them by name.

The files live in ``sweeps/`` at the top of the repository. A wheel installs them inside
the package as ``versatil/sweeps/`` (``package-dir`` in ``pyproject.toml``); a source
checkout or an editable install reads the repository's ``sweeps/`` itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from versatil.errors import ConfigError

__all__ = ["DEFAULT_SWEEP_NAME", "resolve_config", "shipped_dir", "shipped_sweeps"]

DEFAULT_SWEEP_NAME = "quickstart"
"""The sweep ``python -m versatil.sweep`` runs without ``--config``."""

_PACKAGE = Path(__file__).resolve().parents[2]


def shipped_dir() -> Path:
    """The directory holding the shipped ``*.yaml`` sweep files."""
    installed = _PACKAGE / "sweeps"
    return installed if installed.is_dir() else _PACKAGE.parent / "sweeps"


def shipped_sweeps() -> dict[str, Path]:
    """Each shipped sweep's name (its file's stem) and path, sorted by name."""
    return {path.stem: path for path in sorted(shipped_dir().glob("*.yaml"))}


def resolve_config(value: str | os.PathLike[str] | None) -> Path:
    """The sweep file ``--config`` names: a file path, or a shipped sweep by name.

    ``None`` is the default sweep. A path that exists is always taken as a path; otherwise
    ``asha_lr`` and ``asha_lr.yaml`` name the shipped ``asha_lr`` sweep.

    Raises:
        ConfigError: when ``value`` is neither an existing path nor a shipped sweep's name.
    """
    shipped = shipped_sweeps()
    if value is None:
        if DEFAULT_SWEEP_NAME not in shipped:
            raise ConfigError(
                f"--config: the default sweep {DEFAULT_SWEEP_NAME!r} is not installed in "
                f"{shipped_dir()}; give a sweep file with --config FILE"
            )
        return shipped[DEFAULT_SWEEP_NAME]
    text = os.fspath(value)
    if os.path.lexists(text):
        return Path(text)
    name = text.removesuffix(".yaml")
    if name in shipped:
        return shipped[name]
    names = ", ".join(shipped) or "none"
    if os.sep in text or (os.altsep and os.altsep in text):
        raise ConfigError(f"--config: sweep file {text!r} does not exist")
    raise ConfigError(
        f"--config: {text!r} is neither a sweep file nor a shipped sweep; shipped sweeps: {names}"
    )
