"""A griffe extension: Sphinx roles in docstrings rendered as cross-references.

The docstrings write references as reST roles (``:func:`name```, ``:class:`~a.b.C```,
``:meth:``, ``:mod:``, ``:attr:``, ``:data:``, ``:exc:``), which Markdown would show as
text. mkdocstrings loads this extension (``extensions:`` of its Python handler in
``mkdocs.yml``); it rewrites each role in the docstrings as loaded, never in the source
files, into an optional autorefs cross-reference: a link where the site documents the
target, inline code where it does not.

A role's target is resolved the way Sphinx reads it: relative to the object whose
docstring holds it (its members, then its parents' and its module's names, imports
included), else as an absolute path. ``~`` shows only the last part, and
``:func:`text <target>``` shows ``text``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(?P<target>[^`]+)`")
_TITLED = re.compile(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>")


def resolve(obj: griffe.Object, name: str) -> str:
    """The full path ``name`` refers to in the scope of ``obj``, or ``name`` itself."""
    first, _, rest = name.partition(".")
    try:
        base = obj.resolve(first)
    except griffe.NameResolutionError:
        return name
    return f"{base}.{rest}" if rest else base


def reference(obj: griffe.Object, target: str) -> str:
    """The autorefs cross-reference (HTML in the Markdown) one role's target becomes."""
    titled = _TITLED.fullmatch(target)
    if titled:
        title, target = titled.group("title"), titled.group("target")
    short = target.startswith("~")
    name = target.lstrip("~").lstrip(".")
    if not titled:
        title = name.rsplit(".", 1)[-1] if short else name
    identifier = resolve(obj, name)
    return (
        f'<autoref identifier="{html.escape(identifier)}" optional>'
        f"<code>{html.escape(title)}</code></autoref>"
    )


def convert(obj: griffe.Object, text: str) -> str:
    """``text`` with each Sphinx role replaced by its cross-reference."""
    return ROLE.sub(lambda match: reference(obj, match.group("target")), text)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring once the package is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrites the roles in ``obj``'s docstring, resolved in its scope.

        Args:
            obj: An object of the loaded package, its tree complete.
            **kwargs: What else griffe passes.
        """
        docstring = obj.docstring
        if docstring is not None and ROLE.search(docstring.value):
            docstring.value = convert(obj, docstring.value)
