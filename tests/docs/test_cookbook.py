"""The cookbook (``docs/cookbook.md``): every recipe is a sweep file that loads.

Each YAML block of the page goes through what loading a sweep file does (parse, plain
data, :func:`~versatil.sweep.config.load.validate_sweep`, the limits) and the check of the
task's params that ``--dry-run`` adds. No Ray, no subprocess: a few milliseconds a recipe.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from versatil.sweep.config.checks import check_task
from versatil.sweep.config.load import check_limits, validate_sweep
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.sweep_file import check_plain_data, parse_yaml

ROOT = Path(__file__).resolve().parents[2]
COOKBOOK = ROOT / "docs" / "cookbook.md"
YAML_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```$", re.M | re.S)


def recipes() -> list[tuple[str, str]]:
    """Each YAML block of the cookbook, with the heading it is under."""
    text = COOKBOOK.read_text(encoding="utf-8")
    found = []
    for match in YAML_BLOCK.finditer(text):
        headings = re.findall(r"^## (.+)$", text[: match.start()], re.M)
        found.append((headings[-1] if headings else "top", match.group(1)))
    return found


RECIPES = recipes()


def load_recipe(heading: str, text: str) -> SweepConfig:
    """``text`` loaded as ``load_sweep`` loads a file, then checked as ``--dry-run`` does."""
    source = f"docs/cookbook.md, {heading}"
    data = parse_yaml(text, source)
    check_plain_data(data)
    config = validate_sweep(data, source=source)
    check_limits(config, source)
    check_task(config)
    return config


def test_the_cookbook_has_its_recipes() -> None:
    assert len(RECIPES) >= 6
    assert len({text for _, text in RECIPES}) == len(RECIPES), "a recipe is shown twice"


@pytest.mark.parametrize(("heading", "text"), RECIPES, ids=[h for h, _ in RECIPES])
def test_recipe_loads(heading: str, text: str) -> None:
    load_recipe(heading, text)


def configs() -> dict[str, SweepConfig]:
    return {heading: load_recipe(heading, text) for heading, text in RECIPES}


def test_each_recipe_shows_what_its_heading_names() -> None:
    """The recipes the page promises: GPU, TF32, replicates, DDP, a GPU share, S3 + MLflow."""
    loaded = list(configs().values())
    assert any(c.trainer.accelerator == "gpu" and "compile_mode" in c.space for c in loaded)
    assert any(set(c.space.get("matmul_precision", [])) == {"highest", "high"} for c in loaded)
    assert any(c.replicates > 1 for c in loaded)
    assert any(c.resources.workers_per_trial > 1 for c in loaded)
    assert any(c.resources.shares_gpu(c.trainer.accelerator) for c in loaded)
    assert any(
        c.location().remote and (c.mlflow.tracking_uri or "").startswith("http") for c in loaded
    )


def test_the_cookbook_links_the_pages_that_go_deeper() -> None:
    text = COOKBOOK.read_text(encoding="utf-8")
    for page in ("reference/sweeps.md", "gpu.md", "cluster.md", "storage.md", "verdict.md"):
        assert f"]({page}" in text, f"docs/cookbook.md does not link {page}"
