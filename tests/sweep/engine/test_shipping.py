"""What a sweep ships to a cluster's nodes, decided and checked before Ray starts."""

import json
import os
import subprocess
import sys
import uuid

import pytest
import yaml

from versatil.errors import ConfigError
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine import shipping
from versatil.sweep.engine.shipping import LARGE_FILE_BYTES, plan_shipment

BUILD = "def build(params):\n    raise NotImplementedError\n"


def unique(prefix):
    """A module name no earlier test imported (find_spec answers from sys.modules)."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's directory, on sys.path and the current directory, as `python -m` sees it."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    return root


def sweep(task, **fields):
    return SweepConfig(name="ship", task={"name": task}, **fields)


def test_a_top_level_module_ships_its_directory_without_venvs_storage_or_large_files(project):
    name = unique("my_task")
    (project / f"{name}.py").write_text(BUILD)
    (project / "helpers.py").write_text("X = 1\n")
    (project / "env").mkdir()
    (project / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (project / "env" / "lib.py").write_text("# not code of the task\n")
    with (project / "data.bin").open("wb") as data:
        data.truncate(LARGE_FILE_BYTES + 1)
    (project / "runs").mkdir()
    (project / "runs" / "old.json").write_text("{}")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: main\n")

    shipment = plan_shipment(sweep(f"{name}:build", storage_path="runs"), joining=True)

    env = shipment.runtime_env
    assert env["working_dir"] == str(project) and "py_modules" not in env
    assert {"/env/", "/runs/", "/data.bin", ".git"} <= set(env["excludes"])
    assert shipment.files == 2  # the task and its helper
    assert shipment.left_out == (("data.bin", LARGE_FILE_BYTES + 1),)
    line = shipment.describe()
    assert line.startswith(f"code: shipping {project} (2 files, ")
    assert "as working_dir; left out, over 10.0 MiB: data.bin (10.0 MiB)" in line


def test_a_module_in_a_package_ships_the_package(project):
    package = unique("mypkg")
    (project / package / "tasks").mkdir(parents=True)
    (project / package / "__init__.py").write_text("")
    (project / package / "tasks" / "__init__.py").write_text("")
    (project / package / "tasks" / "regress.py").write_text(BUILD)
    (project / "unrelated.py").write_text("")

    shipment = plan_shipment(sweep(f"{package}.tasks.regress:build"), joining=True)

    assert shipment.runtime_env["py_modules"] == [str(project / package)]
    assert "working_dir" not in shipment.runtime_env
    assert shipment.files == 3 and shipment.field == "py_modules"


def test_nothing_ships_locally_for_built_in_or_installed_tasks_or_inside_a_job(
    project, monkeypatch
):
    name = unique("local_task")
    (project / f"{name}.py").write_text(BUILD)
    assert plan_shipment(sweep(f"{name}:build"), joining=False).runtime_env is None
    assert plan_shipment(sweep("reaching"), joining=True).runtime_env is None
    assert plan_shipment(sweep("yaml:safe_load"), joining=True).runtime_env is None  # installed
    job = {"runtime_env": {"working_dir": "gcs://_ray_pkg_abc.zip"}}
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(job))
    assert plan_shipment(sweep(f"{name}:build"), joining=True).runtime_env is None


def test_the_sweep_files_runtime_env_passes_rays_fields_through(project):
    name = unique("own_task")
    (project / f"{name}.py").write_text(BUILD)
    (project / "code" / "env").mkdir(parents=True)
    (project / "code" / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    config = sweep(
        f"{name}:build",
        storage_path="code/runs",
        runtime_env={
            "working_dir": "code",
            "pip": ["tabulate"],
            "env_vars": {"ALPHA": 1, "BETA": True},
            "excludes": ["*.csv"],
        },
    )
    for joining in (True, False):
        env = plan_shipment(config, joining=joining).runtime_env
        assert env["working_dir"] == "code" and env["pip"] == ["tabulate"]
        assert env["env_vars"] == {"ALPHA": "1", "BETA": "true"}
        assert {"*.csv", ".git", "/env/", "/runs/"} <= set(env["excludes"])
    assert plan_shipment(config, joining=True).describe() is None  # the user's own choice


def test_a_missing_path_names_the_field(project):
    config = sweep("reaching", runtime_env={"py_modules": ["lib", "nowhere"]})
    (project / "lib").mkdir()
    with pytest.raises(ConfigError, match=r"runtime_env.py_modules\[1\]: 'nowhere' does not exist"):
        plan_shipment(config, joining=True)


def test_an_upload_over_rays_limit_names_the_largest_files(project, monkeypatch):
    name = unique("heavy_task")
    (project / f"{name}.py").write_text(BUILD)
    for index, kib in enumerate((300, 500, 400)):
        (project / f"part{index}.npy").write_bytes(os.urandom(kib * 1024))
    monkeypatch.setattr(shipping, "_limit", lambda: 1024 * 1024)
    with pytest.raises(ConfigError) as error:
        plan_shipment(sweep(f"{name}:build"), joining=True)
    message = str(error.value)
    assert message.startswith(f"runtime_env.working_dir (default): {project} is 1.2 MiB in 4 ")
    assert (
        "over Ray's upload limit of 1.0 MiB; largest: part1.npy (500.0 KiB), part2.npy" in message
    )
    assert "runtime_env.excludes" in message
    # Compressible files under the limit once zipped pass: the limit is on the zip.
    for index in range(3):
        (project / f"part{index}.npy").write_bytes(b"\0" * 500 * 1024)
    assert plan_shipment(sweep(f"{name}:build"), joining=True).files == 4


def test_an_unknown_runtime_env_field_is_refused_at_load():
    from versatil.sweep.config.load import validate_sweep

    with pytest.raises(ConfigError, match=r"runtime_env\.working_directory"):
        validate_sweep({"name": "x", "runtime_env": {"working_directory": "."}})


@pytest.mark.slow  # two commands, each its own interpreter
@pytest.mark.parametrize("problem", ["missing", "too large"])
def test_a_bad_runtime_env_is_exit_2_before_anything_starts(tmp_path, problem):
    project = tmp_path / "project"
    project.mkdir()
    (project / "light_task.py").write_text(BUILD)
    data = {"name": "bad-env", "task": {"name": "light_task:build"}, "storage_path": "runs"}
    env = {**os.environ, "RAY_max_grpc_message_size": str(1024 * 1024)}
    if problem == "missing":
        data["runtime_env"] = {"working_dir": "no-such-dir"}
    else:
        (project / "blob.bin").write_bytes(os.urandom(2 * 1024 * 1024))
    (project / "sweep.yaml").write_text(yaml.safe_dump(data))
    # An address nothing answers at: had the sweep tried to join it, the error would say so.
    done = subprocess.run(
        [sys.executable, "-m", "versatil.sweep", "--config", "sweep.yaml", "--address",
         "127.0.0.1:9"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    if problem == "missing":
        assert done.stderr.startswith("error: runtime_env.working_dir: 'no-such-dir' does not")
    else:
        assert done.stderr.startswith("error: runtime_env.working_dir (default): ")
        assert "largest: blob.bin (2.0 MiB)" in done.stderr
    assert not (project / "runs").exists()  # nothing written: the storage path untouched
