"""k8s/image/Dockerfile, read statically: Docker does not run here or in CI.

The checks tie the image to the project so the three cannot drift apart: the official Ray
base image's Ray and Python versions are ``pyproject.toml``'s pins and the manifests'
``rayVersion``; each variant installs the matching torch build; versatil is installed as a
regular package with its shipped sweeps; the image runs as a non-root user; and the build
context's ``.dockerignore`` lets in what the ``COPY`` instructions need.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "k8s" / "image" / "Dockerfile"
# The build context (k8s/README.md, the Dockerfile's header): the repository root.
CONTEXT = REPO
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
TORCH_INDEX = {
    "cpu": r"https://download\.pytorch\.org/whl/cpu",
    "cuda": r"https://download\.pytorch\.org/whl/cu1\d{2}",
}
BASE_FLAVOUR = {"cpu": "cpu", "cuda": "gpu"}


@dataclass
class Stage:
    """One ``FROM`` stage: its image, name and instructions after it."""

    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def values(self, keyword: str) -> list[str]:
        """The arguments of every instruction of that keyword, in order."""
        return [rest for word, rest in self.instructions if word == keyword]


def parse(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """The global ``ARG`` defaults and the stages of a Dockerfile."""
    text = re.sub(r"\\\n", " ", path.read_text())
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            image, _, name = re.sub(r"\s+AS\s+", " AS ", rest, flags=re.I).partition(" AS ")
            stages.append(Stage(image.strip(), name.strip() or None))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = rest.partition("=")
            global_args[name] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return global_args, stages


def expand(text: str, variables: dict[str, str]) -> str:
    """``${NAME}`` and ``$NAME`` replaced by their values."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables[m.group(1) or m.group(2)], text)


GLOBAL_ARGS, STAGES = parse(DOCKERFILE)
BY_NAME = {stage.name: stage for stage in STAGES if stage.name}
FINAL = STAGES[-1]


def stage_args(stage: Stage) -> dict[str, str]:
    """The ``ARG`` defaults and ``ENV`` values a stage sets."""
    found = {}
    for keyword, rest in stage.instructions:
        if keyword in {"ARG", "ENV"} and "=" in rest:
            name, _, value = rest.partition("=")
            found[name] = value.strip('"')
    return found


def rendered_ray_versions() -> set[str]:
    """Every ``rayVersion`` in the manifests under k8s/."""
    versions = set()
    for path in (REPO / "k8s").rglob("*.yaml"):
        if "crds" in path.parts:
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in {"RayJob", "RayCluster"}:
                spec = doc["spec"].get("rayClusterSpec", doc["spec"])
                versions.add(spec["rayVersion"])
    return versions


def test_base_images_are_the_official_ray_images_of_the_pinned_versions() -> None:
    ray_version = GLOBAL_ARGS["RAY_VERSION"]
    assert rendered_ray_versions() == {ray_version}, "rayVersion of the manifests"
    (pin,) = [
        Requirement(r)
        for r in PYPROJECT["project"]["optional-dependencies"]["k8s"]
        if Requirement(r).name == "ray"
    ]
    assert str(pin.specifier) == f"=={ray_version}" and "default" in pin.extras
    (ray,) = [
        Requirement(r) for r in PYPROJECT["project"]["dependencies"] if Requirement(r).name == "ray"
    ]
    assert ray.specifier.contains(ray_version)

    python_tag = GLOBAL_ARGS["PYTHON_TAG"]
    major, minor = re.fullmatch(r"py(\d)(\d+)", python_tag).groups()
    python = f"{major}.{minor}"
    assert SpecifierSet(PYPROJECT["project"]["requires-python"]).contains(f"{python}.0")
    assert PYPROJECT["tool"]["ruff"]["target-version"] == python_tag, "the Python linted for"
    for variant, flavour in BASE_FLAVOUR.items():
        image = expand(BY_NAME[variant].image, GLOBAL_ARGS)
        assert image == f"rayproject/ray:{ray_version}-{python_tag}-{flavour}", variant


def test_a_build_argument_selects_the_cpu_or_the_cuda_variant() -> None:
    assert FINAL.image == "${VARIANT}"
    assert GLOBAL_ARGS["VARIANT"] in BASE_FLAVOUR
    assert set(BY_NAME) == set(BASE_FLAVOUR), "one stage per variant"


@pytest.mark.parametrize("variant", sorted(TORCH_INDEX))
def test_each_variant_installs_its_torch_build_at_the_ci_version(variant: str) -> None:
    index = stage_args(BY_NAME[variant])["TORCH_INDEX_URL"]
    assert re.fullmatch(TORCH_INDEX[variant], index), f"{variant}: {index}"
    ci_torch = re.search(r"pip install [^\n]*\btorch==([\w.+]+)", (REPO / ".ci/run").read_text())
    assert stage_args(FINAL)["TORCH_VERSION"] == ci_torch.group(1)
    installs = [shlex.split(run) for run in FINAL.values("RUN") if "torch==" in run]
    assert installs == [
        [
            "pip",
            "install",
            "--no-cache-dir",
            "torch==${TORCH_VERSION}",
            "--index-url",
            "${TORCH_INDEX_URL}",
        ]
    ]


def test_versatil_is_installed_as_a_package_with_its_sweeps_and_k8s_extra() -> None:
    copies = {}
    for rest in FINAL.values("COPY"):
        words = [w for w in shlex.split(rest) if not w.startswith("--")]
        *sources, target = words
        for source in sources:
            copies[source] = target
    assert {"pyproject.toml", "README.md", "versatil", "sweeps"} <= set(copies)
    root = copies["pyproject.toml"].rstrip("/")
    assert copies["versatil"] == f"{root}/versatil" and copies["sweeps"] == f"{root}/sweeps"
    # The wheel installs sweeps/ as versatil/sweeps (pyproject's package-dir).
    assert PYPROJECT["tool"]["setuptools"]["package-dir"]["versatil.sweeps"] == "sweeps"
    (install,) = [run for run in FINAL.values("RUN") if root in run and "pip install" in run]
    argv = shlex.split(install.split("&&")[0])
    assert argv[:2] == ["pip", "install"]
    assert f"{root}[k8s]" in argv, install
    assert not {"-e", "--editable"} & set(argv), "a regular install, not an editable one"


def test_the_image_runs_as_a_non_root_user() -> None:
    users = FINAL.values("USER")
    assert users, "no USER: the image would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, users[-1]
    # Everything after the last USER runs as that user, installs included.
    last = max(i for i, (keyword, _) in enumerate(FINAL.instructions) if keyword == "USER")
    package_install = max(
        i for i, (keyword, rest) in enumerate(FINAL.instructions) if "[k8s]" in rest
    )
    assert last < package_install


def dockerignore_excludes(path: str) -> bool:
    """Whether the build context's .dockerignore leaves ``path`` out (last match wins)."""
    excluded = False
    for line in (CONTEXT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/").removeprefix("**/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes) or fnmatch.fnmatch(
            parts[-1], pattern
        ):
            excluded = not negated
    return excluded


def test_the_build_context_holds_what_the_image_copies_and_nothing_else() -> None:
    for source in ("pyproject.toml", "README.md", "versatil/sweep/__main__.py", "sweeps"):
        assert not dockerignore_excludes(source), source
        assert (CONTEXT / source).exists(), source
    for left_out in (".git", ".venv", "runs", "tests", "k8s", "versatil/__pycache__"):
        assert dockerignore_excludes(left_out), left_out
