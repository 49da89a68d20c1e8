"""A task given as a LightningCLI config: ``model`` and ``data`` by ``class_path``/``init_args``.

The file is the one a user already trains with (``python train.py fit --config
lm.yaml``), read by LightningCLI and jsonargparse themselves, never by a parser of ours:
``seed_everything``, ``model``, ``data``, ``trainer`` and LightningCLI's ``optimizer`` and
``lr_scheduler``. A sweep's axes name its keys as LightningCLI's command line does
(``model.lr``, ``data.batch_size``, or ``model.init_args.lr``); each trial's values go to
LightningCLI as those arguments.

The file's ``trainer`` options become the sweep's (:func:`read_cli_config`), checked like
the sweep file's own; the model and datamodule are built in each trial (:func:`build`).
The file's text travels in the task's params (``config``), so every node builds the same
task without seeing the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from versatil.errors import ConfigError
from versatil.training.trainer_options import lightning_quiet

__all__ = ["CONFIG_PARAM", "TASK", "CliConfig", "build", "read_cli_config"]

TASK = "versatil.training.tasks.cli_config:build"
"""The task spec of every sweep whose task is a LightningCLI config."""

CONFIG_PARAM = "config"
"""The task param that holds the config file's text."""


@dataclasses.dataclass(frozen=True)
class CliConfig:
    """What a sweep takes from a LightningCLI config besides its model and data.

    Attributes:
        trainer: The file's Trainer options that differ from Lightning's defaults.
        seed: The file's ``seed_everything`` when it is a number, else ``None``.
    """

    trainer: dict[str, Any]
    seed: int | None


def _cli(text: str, overrides: Mapping[str, Any], *, instantiate: bool) -> Any:
    """LightningCLI over ``text`` and ``overrides``; the classes built only if ``instantiate``.

    Raises:
        ConfigError: with jsonargparse's words when the file or an override does not fit
            the classes it names.
    """
    from lightning.pytorch.cli import LightningCLI

    class _Cli(LightningCLI):
        def instantiate_classes(self) -> None:
            if not instantiate:
                return
            # LightningCLI's own, but the Trainer: versatil builds each trial's.
            self.config_init = self.parser.instantiate_classes(self.config)
            self.datamodule = self._get(self.config_init, "data")
            self.model = self._get(self.config_init, "model")
            self._add_configure_optimizers_method_to_model(self.subcommand)

    args = ["--config", text, *(f"--{key}={_arg(value)}" for key, value in overrides.items())]
    if instantiate:
        args.append("--seed_everything=false")  # each trial is seeded by versatil
    try:
        with lightning_quiet():
            return _Cli(
                model_class=None,
                datamodule_class=None,
                subclass_mode_model=True,
                subclass_mode_data=True,
                run=False,
                args=args,
                save_config_callback=None,
                parser_kwargs={"exit_on_error": False},
            )
    except Exception as error:  # jsonargparse's ArgumentError, an import error, ...
        message = " ".join(str(error).split())
        raise ConfigError(f"task.config: LightningCLI refuses it: {message[:600]}") from None


def _arg(value: Any) -> str:
    """A value as LightningCLI's command line takes it (YAML for lists and mappings)."""
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value)


def read_cli_config(text: str, overrides: Mapping[str, Any] = ()) -> CliConfig:
    """Parses a LightningCLI config (nothing built): its Trainer options and seed.

    Args:
        text: The config file's text.
        overrides: Dotted keys and values (a trial's axes), checked against the classes.

    Raises:
        ConfigError: when LightningCLI refuses the file or an override.
    """
    cli = _cli(text, dict(overrides), instantiate=False)
    config = cli.config.clone().as_dict()
    defaults = cli.parser.get_defaults().clone().as_dict()
    trainer = {
        key: value
        for key, value in (config.get("trainer") or {}).items()
        if value != (defaults.get("trainer") or {}).get(key)
    }
    seed = config.get("seed_everything")
    return CliConfig(
        trainer, seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    )


def build(params: Mapping[str, Any]) -> tuple[Any, Any]:
    """The task's model and datamodule, as LightningCLI builds them from the config.

    Args:
        params: ``config`` (the file's text) and the trial's dotted keys (``model.lr``).
    """
    overrides = {k: v for k, v in params.items() if k != CONFIG_PARAM}
    cli = _cli(params[CONFIG_PARAM], overrides, instantiate=True)
    return cli.model, cli.datamodule
