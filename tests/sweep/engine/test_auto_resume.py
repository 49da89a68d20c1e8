"""Which run ``--resume`` and ``--auto-resume`` continue, from what the storage path holds."""

import io
import json

import pytest

from versatil.errors import ConfigError
from versatil.sweep.engine.resume import choose_experiment_dir, mark_ended
from versatil.sweep.vocab.names import SWEEP_ENDED


def earlier_run(config, stamp, restorable=True):
    """An experiment directory as Tune leaves it (``tuner.pkl`` once it can be restored)."""
    directory = config.storage_dir() / f"{config.name}-20261204-{stamp}"
    directory.mkdir(parents=True)
    if restorable:
        (directory / "tuner.pkl").write_bytes(b"")
    return directory


def test_auto_resume_continues_the_latest_run_only_while_it_is_interrupted(sweep_config):
    config = sweep_config()
    out = io.StringIO()
    fresh, resumed = choose_experiment_dir(config, resume=False, auto_resume=True, stream=out)
    assert not resumed and fresh.parent == config.storage_dir()
    assert "no interrupted run of 't'; starting one" in out.getvalue()

    earlier_run(config, "100000")
    latest = earlier_run(config, "110000")
    out = io.StringIO()
    assert choose_experiment_dir(config, False, True, out) == (latest, True)
    assert f"resuming the interrupted run {latest}" in out.getvalue()

    # Its end logged: a retried job starts a new run rather than ending it again.
    mark_ended(latest, "abc", trials=4)
    assert json.loads((latest / SWEEP_ENDED).read_text())["parent_run_id"] == "abc"
    new, resumed = choose_experiment_dir(config, False, True)
    assert not resumed and new not in (latest, fresh.parent)
    # --resume still continues it (it runs the sweep's end again, training nothing).
    assert choose_experiment_dir(config, True, False) == (latest, True)


def test_auto_resume_starts_anew_when_the_latest_run_cannot_be_restored(sweep_config):
    config = sweep_config()
    earlier_run(config, "100000")  # interrupted, restorable, but not the latest
    latest = earlier_run(config, "110000", restorable=False)  # killed before Tune saved
    directory, resumed = choose_experiment_dir(config, False, True)
    assert not resumed and directory != latest
    assert choose_experiment_dir(config, True, False)[0].name.endswith("100000")


def test_resume_with_nothing_to_resume_names_the_sweep_and_the_storage(sweep_config):
    config = sweep_config()
    with pytest.raises(ConfigError, match=r"--resume: no earlier run of sweep 't' under .*runs"):
        choose_experiment_dir(config, resume=True, auto_resume=False)
