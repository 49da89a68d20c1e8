"""How the built site renders the API pages: Sphinx roles, labels, enum members, the repo link.

The site is built once per test run (``build_site`` of ``test_docs``, shared with its strict
build test). Roles in docstrings are rewritten by ``docs/hooks/sphinx_roles.py``, a griffe
extension; its conversion is also checked on its own, without a build.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import griffe
import pytest

from tests.docs.test_docs import ROOT, BuiltSite, build_site

ROLE_TEXT = re.compile(r":(?:func|class|meth|mod|attr|data|exc):")
# Source listings (show_source) are the code as written, roles included.
PRE = re.compile(r"<pre\b.*?</pre>", re.S)
REPO_URL = "https://github.com/versatil-ml/versatil"


def load_extension() -> types.ModuleType:
    path = ROOT / "docs" / "hooks" / "sphinx_roles.py"
    spec = importlib.util.spec_from_file_location("sphinx_roles", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sphinx_roles = load_extension()

SOURCE = '''
"""The module: see :mod:`.helpers` and :data:`LIMIT`."""

from pkg.errors import ConfigError

LIMIT = 3


class Widget:
    """Made by :func:`make`; raises :exc:`ConfigError`."""

    def spin(self):
        """Calls :meth:`stop`, :meth:`~pkg.other.Thing.run`, :class:`the widget <Widget>`."""

    def stop(self):
        """Stops."""


def make():
    """Builds a :class:`Widget`; :attr:`nowhere.to.be.found` is left as it is."""
'''


def test_roles_become_optional_cross_references() -> None:
    with griffe.temporary_visited_module(SOURCE, module_name="mod") as module:
        spin = module["Widget.spin"]
        text = sphinx_roles.convert(spin, spin.docstring.value)
        assert '<autoref identifier="mod.Widget.stop" optional><code>stop</code>' in text
        assert 'identifier="pkg.other.Thing.run" optional><code>run</code>' in text
        assert 'identifier="mod.Widget" optional><code>the widget</code>' in text
        widget = module["Widget"]
        text = sphinx_roles.convert(widget, widget.docstring.value)
        assert 'identifier="mod.make" optional><code>make</code>' in text
        assert 'identifier="pkg.errors.ConfigError" optional><code>ConfigError</code>' in text
        make = module["make"]
        text = sphinx_roles.convert(make, make.docstring.value)
        assert 'identifier="nowhere.to.be.found" optional' in text
        text = sphinx_roles.convert(module, module.docstring.value)
        assert 'identifier="mod.LIMIT" optional><code>LIMIT</code>' in text
        assert "<code>helpers</code>" in text
    assert not ROLE_TEXT.search(text)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built: BuiltSite = build_site(tmp_path_factory)
    assert (built.directory / "index.html").is_file(), built.result.stderr[-3000:]
    return built.directory


def rendered_text(page: Path) -> str:
    return PRE.sub("", page.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_no_sphinx_role_is_left_as_text(site: Path) -> None:
    left = {}
    for page in sorted(site.rglob("*.html")):
        found = ROLE_TEXT.findall(rendered_text(page))
        if found:
            left[str(page.relative_to(site))] = sorted(set(found))
    assert not left, f"Sphinx roles rendered as text: {left}"


@pytest.mark.slow
def test_roles_link_where_the_target_is_documented(site: Path) -> None:
    html = rendered_text(site / "api" / "constants" / "index.html")
    link = r'<a class="autorefs autorefs-internal"[^<]*><code>get_model_dtype</code></a>'
    assert re.search(link, html), "`:meth:`get_model_dtype`` links to nothing"


@pytest.mark.slow
def test_api_pages_show_no_attribute_labels(site: Path) -> None:
    for page in sorted((site / "api").rglob("*.html")):
        assert "doc-label" not in page.read_text(encoding="utf-8"), page


@pytest.mark.slow
def test_enum_members_show_their_docstrings(site: Path) -> None:
    html = rendered_text(site / "api" / "constants" / "index.html")
    for member in (
        "PrecisionType.FP16_TRUE",
        "CompileMode.REDUCE_OVERHEAD",
        "CheckpointKey.STATE_DICT",
    ):
        match = re.search(
            rf'id="versatil\.training\.constants\.{re.escape(member)}".*?<p>(.+?)</p>', html, re.S
        )
        assert match and len(match.group(1)) > 20, f"{member} shows no docstring"


@pytest.mark.slow
def test_the_theme_links_the_repository(site: Path) -> None:
    html = (site / "index.html").read_text(encoding="utf-8")
    assert f'href="{REPO_URL}"' in html
