"""The changelog: ``CHANGELOG.md`` at the top of the repository, and ``docs/changelog.md``, the
site's page of it, hold the same text.

The site cannot include a file outside ``docs/`` (pymdownx.snippets is not configured), so
the page is a copy. After editing ``CHANGELOG.md``: ``cp CHANGELOG.md docs/changelog.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
PAGE = ROOT / "docs" / "changelog.md"

VERSION = re.compile(r"^## \[(Unreleased|\d+\.\d+\.\d+)\]( - \d{4}-\d{2}-\d{2})?$")
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_page_is_the_changelog() -> None:
    page = PAGE.read_text(encoding="utf-8")
    changelog = CHANGELOG.read_text(encoding="utf-8")
    assert page == changelog, "docs/changelog.md differs: cp CHANGELOG.md docs/changelog.md"


def test_keep_a_changelog_headings() -> None:
    lines = CHANGELOG.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# Changelog"
    versions = [line for line in lines if line.startswith("## ")]
    assert versions and versions[0] == "## [Unreleased]", versions[:1]
    for line in versions:
        assert VERSION.match(line), f"not a Keep a Changelog version heading: {line!r}"
    for line in lines:
        if line.startswith("### "):
            assert line[4:] in SECTIONS, f"not a Keep a Changelog section: {line!r}"


def test_the_released_version_is_the_package_version() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"$', pyproject, re.M)
    assert version, "pyproject.toml names no version"
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", CHANGELOG.read_text(encoding="utf-8"), re.M)
    assert released and released[0] == version.group(1), (released, version.group(1))
