"""Which checkpoint a restored trial resumes from, when the newest one cannot be read.

Tune restores a retried, resumed or exploited trial from its newest checkpoint. A worker
killed while writing one, or storage that lost its tail, leaves a ``last.ckpt`` that
cannot be read; loading it would fail the trial on every retry. :func:`choose_checkpoint`
checks the file first and then, as the sweep's ``on_unreadable_checkpoint`` says:

- ``previous`` (default): resumes from the newest earlier checkpoint of the trial that
  can be read, else starts the trial over;
- ``restart``: starts the trial over;
- ``fail``: fails the trial with the message.

:func:`restore_checkpoint` also copies the chosen checkpoint where the fit reads it.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

from versatil.errors import ConfigError
from versatil.training.constants import CheckpointFilename

__all__ = ["Restored", "choose_checkpoint", "copy_checkpoint", "readable", "restore_checkpoint"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Restored:
    """What a trial resumes from.

    Attributes:
        ckpt_path: The copied ``last.ckpt`` to resume from; ``None``: start over.
        skipped: The unreadable checkpoints passed over, each with why.
    """

    ckpt_path: Path | None
    skipped: tuple[str, ...] = ()


def readable(path: Path) -> str | None:
    """``None`` when ``path`` is a checkpoint torch can open, else why not."""
    import torch

    if not path.is_file():
        return f"{path} is missing"
    try:
        with zipfile.ZipFile(path):  # a torn write loses the zip's central directory
            pass
        torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    except Exception as error:  # torch, zipfile and pickle each raise their own
        return f"{path} cannot be read ({type(error).__name__}: {str(error)[:200]})"
    return None


def _candidates(newest: Path) -> list[Path]:
    """``newest``, then the trial's earlier checkpoint directories, newest first."""
    earlier = [d for d in newest.parent.glob("checkpoint_*") if d.is_dir() and d.name < newest.name]
    return [newest, *sorted(earlier, reverse=True)]


def choose_checkpoint(
    checkpoint_dir: Path,
    policy: str = "previous",
    fetch: Callable[[Path], Path] | None = None,
) -> tuple[Path | None, tuple[str, ...]]:
    """The checkpoint directory to resume from, and the unreadable ones passed over.

    Reads nothing but the candidates' ``last.ckpt`` and copies nothing, so it can run
    where the trial coordinates and its checkpoint be copied where the fit runs.

    Args:
        checkpoint_dir: The checkpoint directory Tune restores the trial from.
        policy: ``previous``, ``restart`` or ``fail`` (see the module docstring).
        fetch: Brings a candidate's files into its directory before it is read (a
            checkpoint on object storage); default: they are there.

    Returns:
        The directory whose ``last.ckpt`` can be read (``None``: start over), and why
        each unreadable checkpoint before it was skipped.

    Raises:
        ConfigError: with ``policy: fail``, naming the unreadable file.
    """
    skipped: list[str] = []
    candidates = _candidates(checkpoint_dir) if policy == "previous" else [checkpoint_dir]
    for candidate in candidates:
        if fetch is not None:
            fetch(candidate)
        problem = readable(candidate / CheckpointFilename.DEFAULT_CHECKPOINT)
        if problem is None:
            if skipped:
                log.warning("resuming from %s: skipped %s", candidate.name, "; ".join(skipped))
            return candidate, tuple(skipped)
        skipped.append(problem)
    if policy == "fail":
        raise ConfigError(
            f"on_unreadable_checkpoint: fail: {skipped[0]}; the trial cannot resume "
            "(set on_unreadable_checkpoint: previous or restart to go on without it)"
        )
    log.warning("starting over: no readable checkpoint (%s)", "; ".join(skipped))
    return None, tuple(skipped)


def copy_checkpoint(checkpoint_dir: Path, into: Path) -> Path:
    """Copies ``checkpoint_dir`` into ``into`` (replaced); returns the copy's ``last.ckpt``."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(checkpoint_dir, into)
    return into / CheckpointFilename.DEFAULT_CHECKPOINT


def restore_checkpoint(checkpoint_dir: Path, into: Path, policy: str = "previous") -> Restored:
    """Copies the checkpoint to resume from into ``into``; see the module docstring.

    Args:
        checkpoint_dir: The checkpoint directory Tune restores the trial from.
        into: Where the chosen checkpoint directory is copied (replaced).
        policy: ``previous``, ``restart`` or ``fail``.

    Raises:
        ConfigError: with ``policy: fail``, naming the unreadable file.
    """
    chosen, skipped = choose_checkpoint(checkpoint_dir, policy)
    if chosen is None:
        return Restored(None, skipped)
    return Restored(copy_checkpoint(chosen, into), skipped)
