"""A sweep whose task is a LightningCLI config: the file read, its Trainer options joined.

Before the sweep file is validated, the config file named by ``task.config`` is read
(its text kept as ``task.config_text``, so the sweep needs no file later) and parsed by
LightningCLI (:func:`~versatil.training.tasks.cli_config.read_cli_config`). Its
``trainer`` options join the sweep's ``trainer`` section, and its ``seed_everything``
becomes ``trainer.seed``; a value given in both places differently is refused naming
both, and an option versatil owns is refused naming the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.training.trainer_options import OWNED

__all__ = ["with_cli_config"]


def _text(path: str) -> str:
    """The config file's text.

    Raises:
        ConfigError: when it cannot be read.
    """
    where = Path(path).expanduser().absolute()
    try:
        return where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ConfigError(
            f"task.config: {path!r} cannot be read (looked for {where}: {reason}); give the "
            "path of a LightningCLI config file, relative to the directory the sweep starts in"
        ) from None


def with_cli_config(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` with its LightningCLI config read in; ``data`` itself without one.

    Args:
        data: The sweep file's plain data, before validation.

    Raises:
        ConfigError: when the file cannot be read or LightningCLI refuses it; naming both
            places for a Trainer option or seed given differently in the file and the
            sweep; naming the file for an option versatil owns.
    """
    from versatil.training.tasks.cli_config import read_cli_config

    task = data.get("task")
    if not isinstance(task, Mapping) or not isinstance(task.get("config"), str):
        return data  # none, or the schema names what is wrong
    path = task["config"]
    text = task.get("config_text")
    text = text if isinstance(text, str) else _text(path)
    parsed = read_cli_config(text)
    trainer = data.get("trainer") if isinstance(data.get("trainer"), Mapping) else {}
    errors = [
        f"task.config: trainer.{key} in {path!r}: versatil owns this Trainer option: "
        f"{OWNED[key]}; remove it from the file"
        for key in parsed.trainer
        if key in OWNED
    ]
    from_file = {k: v for k, v in parsed.trainer.items() if k not in OWNED}
    if parsed.seed is not None:
        from_file["seed"] = parsed.seed
    for key, value in from_file.items():
        if key in trainer and trainer[key] != value:
            name = "seed_everything" if key == "seed" else f"trainer.{key}"
            errors.append(
                f"trainer.{key}: {trainer[key]!r} in the sweep file, and {name}: {value!r} in "
                f"task.config {path!r}; give it in one place"
            )
    if errors:
        raise ConfigError("; ".join(errors))
    return {
        **data,
        "task": {**task, "config_text": text},
        "trainer": {**from_file, **trainer},
    }
