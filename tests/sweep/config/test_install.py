"""A non-editable install: the wheel carries the shipped sweeps, found from any directory."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PIP = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
SHIPPED = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))


def run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Runs a command to its end (at most 300 s) and returns its result."""
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def run_ok(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Runs a command; fails the test with its output when it fails."""
    result = run(args, cwd, env)
    assert result.returncode == 0, f"{args}: {result.stdout[-2000:]}{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the project (the build leaves nothing in the checkout)."""
    work = tmp_path_factory.mktemp("build")
    source = work / "versatil"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("versatil", "sweeps"):
        shutil.copytree(REPO / folder, source / folder, ignore=ignore)
    dist = work / "dist"
    run_ok([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)], work)
    (built,) = dist.glob("versatil-*.whl")
    return built


def test_the_wheel_holds_every_module_and_the_shipped_sweeps(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "versatil").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert modules - names == set(), "add the missing packages to pyproject's packages"
    shipped = sorted(n for n in names if n.startswith("versatil/sweeps/"))
    assert shipped == [f"versatil/sweeps/{name}.yaml" for name in SHIPPED]


def test_installed_wheel_finds_its_shipped_sweeps_from_any_directory(wheel, tmp_path):
    # Nothing from the test session's environment (the Ray fixture puts the checkout on
    # PYTHONPATH) may show the checkout's versatil to the install or to the runs.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    venv = tmp_path / "venv"
    run_ok([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = str(venv / "bin" / "python")
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run_ok([python, "-c", purelib], tmp_path, env).strip())
    # The dependencies come from the test's own environment: a path entry, not its .pth
    # files, so an editable versatil installed there stays out of sight.
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [*PIP, "--python", python, "install", "--no-deps", "--no-index", str(wheel)]
    run_ok(install, tmp_path, env)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run_ok([python, "-c", "import versatil; print(versatil.__file__)"], elsewhere, env)
    assert where.startswith(str(site)), where

    out = run_ok([python, "-m", "versatil.sweep", "--dry-run"], elsewhere, env)
    assert "sweep 'quickstart': 16 trials" in out
    out = run_ok(
        [python, "-m", "versatil.sweep", "--config", "asha_lr", "--dry-run"], elsewhere, env
    )
    assert "sweep 'asha_lr': 16 trials" in out
    result = run([python, "-m", "versatil.sweep", "--config", "nope", "--dry-run"], elsewhere, env)
    assert result.returncode == 2
    assert result.stderr == (
        "error: --config: 'nope' is neither a sweep file nor a shipped sweep; "
        f"shipped sweeps: {', '.join(SHIPPED)}\n"
    )
