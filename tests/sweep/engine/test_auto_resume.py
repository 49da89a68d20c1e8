"""Which run ``--resume`` and ``--auto-resume`` continue, from what the storage path holds."""

import io
import json

import pytest

from versatil.errors import ConfigError
from versatil.sweep.engine.resume import choose_experiment, mark_ended
from versatil.sweep.vocab.names import SWEEP_ENDED


def earlier_run(config, stamp, restorable=True):
    """An experiment directory as Tune leaves it (``tuner.pkl`` once it can be restored)."""
    directory = config.storage_dir() / f"{config.name}-20261204-{stamp}"
    directory.mkdir(parents=True)
    if restorable:
        (directory / "tuner.pkl").write_bytes(b"")
    return directory.name


def test_auto_resume_continues_the_latest_run_only_while_it_is_interrupted(sweep_config):
    config = sweep_config()
    storage = config.storage()
    out = io.StringIO()
    fresh, resumed = choose_experiment(
        config.name, storage, resume=False, auto_resume=True, stream=out
    )
    assert not resumed and fresh.startswith("t-2")
    assert "no interrupted run of 't'; starting one" in out.getvalue()

    earlier_run(config, "100000")
    latest = earlier_run(config, "110000")
    (config.storage_dir() / ".compile_cache").mkdir()  # not a run of the sweep
    out = io.StringIO()
    assert choose_experiment(config.name, storage, False, True, out) == (latest, True)
    where = config.storage_dir() / latest
    assert f"resuming the interrupted run {where}" in out.getvalue()

    # Its end logged: a retried job starts a new run rather than ending it again.
    mark_ended(storage, latest, "abc", trials=4)
    assert json.loads((where / SWEEP_ENDED).read_text())["parent_run_id"] == "abc"
    new, resumed = choose_experiment(config.name, storage, False, True)
    assert not resumed and new != latest
    # --resume still continues it (it runs the sweep's end again, training nothing).
    assert choose_experiment(config.name, storage, True, False) == (latest, True)


def test_auto_resume_starts_anew_when_the_latest_run_cannot_be_restored(sweep_config):
    config = sweep_config()
    storage = config.storage()
    earlier_run(config, "100000")  # interrupted, restorable, but not the latest
    latest = earlier_run(config, "110000", restorable=False)  # killed before Tune saved
    name, resumed = choose_experiment(config.name, storage, False, True)
    assert not resumed and name != latest
    assert choose_experiment(config.name, storage, True, False)[0].endswith("100000")


def test_resume_with_nothing_to_resume_names_the_sweep_and_the_storage(sweep_config):
    config = sweep_config()
    with pytest.raises(ConfigError, match=r"--resume: no earlier run of sweep 't' under .*runs"):
        choose_experiment(config.name, config.storage(), resume=True, auto_resume=False)
