"""A full disk, met anywhere, is named as one: ``no space left on ...``, exit status 1."""

import errno

import pytest

from versatil.cli_common import run_main
from versatil.errors import NO_SPACE, DiskFullError, no_space_left


def test_a_full_disk_is_found_in_python_and_pyarrow_errors_and_their_causes():
    python = OSError(errno.ENOSPC, "No space left on device", "/data/runs/last.ckpt")
    assert no_space_left(python, "/data") == (f"{NO_SPACE}/data/runs/last.ckpt (errno 28, ENOSPC)")
    # pyarrow's names no file; its errno is in its message.
    arrow = OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert no_space_left(arrow, "/data") == f"{NO_SPACE}/data (errno 28, ENOSPC)"
    try:
        try:
            raise arrow
        except OSError as cause:
            raise RuntimeError("the checkpoint was not saved") from cause
    except RuntimeError as wrapped:
        assert no_space_left(wrapped, "/data") == f"{NO_SPACE}/data (errno 28, ENOSPC)"
    assert no_space_left(OSError(errno.EACCES, "Permission denied"), "/data") is None
    assert no_space_left(RuntimeError("out of memory"), "/data") is None


def test_a_command_that_meets_a_full_disk_says_so_and_exits_1(capsys):
    def fills(argv):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/sweep_ended.json")

    assert run_main(fills, []) == 1
    assert capsys.readouterr().err == (
        f"error: {NO_SPACE}/data/sweep_ended.json (errno 28, ENOSPC); "
        "free space there, then run the command again\n"
    )

    def stopped(argv):
        raise DiskFullError(f"{NO_SPACE}/data (errno 28, ENOSPC). The sweep stopped")

    assert run_main(stopped, []) == 1
    assert capsys.readouterr().err.startswith(f"error: {NO_SPACE}/data")


def test_other_os_errors_are_not_taken_for_a_full_disk():
    def denied(argv):
        raise PermissionError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):
        run_main(denied, [])


def test_tunes_error_that_its_state_was_not_saved_on_a_full_disk_is_one_line():
    import logging

    from versatil.sweep.engine.console import _full_disk_in_one_line

    full = OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")
    record = logging.LogRecord(
        "ray.tune.execution.experiment_state", logging.ERROR, __file__, 1,
        "Saving experiment state to storage at '%s' failed with exception: ", ("/data/x",),
        (OSError, full, None),
    )  # fmt: skip
    assert _full_disk_in_one_line(record)
    assert record.exc_info is None
    assert record.getMessage() == (
        "Saving experiment state to storage at '/data/x' failed with exception: "
        f"{NO_SPACE}the storage path (errno 28, ENOSPC)"
    )
    other = logging.LogRecord(
        "x", logging.ERROR, __file__, 1, "m", None, (ValueError, ValueError("v"), None)
    )
    assert _full_disk_in_one_line(other) and other.exc_info is not None
