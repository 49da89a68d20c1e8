"""A storage path that cannot be written: one clear error, exit 2, before anything starts."""

import pytest
import ray
import yaml

from versatil.cli_common import run_main
from versatil.sweep.__main__ import main


@pytest.mark.parametrize("where", ["under_a_file", "in_proc"])
def test_unwritable_storage_path_is_one_clear_error_before_ray_starts(tmp_path, capsys, where):
    if where == "under_a_file":
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        storage = str(blocker / "sweeps")
        reason = "Not a directory"
    else:
        storage = "/proc/versatil-sweeps"  # procfs: nobody, root included, can create here
        reason = "No such file or directory"
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "nowhere",
                "task": {"name": "reaching", "params": {"n_episodes": 8, "horizon": 5}},
                "trainer": {"max_epochs": 1, "accelerator": "cpu"},
                "storage_path": storage,
            }
        )
    )
    ray_before = ray.is_initialized()
    code = run_main(main, ["--config", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: storage_path: {storage!r} cannot be written ({reason}")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert ray.is_initialized() == ray_before  # the check came before Ray
