"""The real outputs the pages show come from ``docs/regenerate.py``, not from pasting.

- Every ``--8<-- "outputs/NAME.txt"`` include of a page is an output of ``regenerate.py``,
  every output is included by a page, and each starts with its dated header.
- Every file an output keeps (a sweep's plot) is in ``docs/`` and shown by a page that
  includes that output, and every file a command needs from a page exists there.
- A page that includes outputs quotes no trial id its outputs do not hold.
- A page that quotes an output it does not include (``QUOTES``) quotes, in its prose, only
  trial ids, speedups, intervals and count lines that output (or one it includes) holds.
- No page pastes a console session (a ``$`` command followed by its output).
- ``regenerate()`` itself, on small ``python -c`` commands: the setup runs first in the same
  directory, the files a page shows are written there, kept files are copied, and an exit
  status other than the expected one, or a kept file missing, leaves everything as it was.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.test_docs import PAGES, ROOT, fenced_blocks
from tests.docs.test_tutorial import HEADER, INCLUDE, prose, regenerate

DOCS = ROOT / "docs"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
TRIAL_ID = re.compile(r"\b[0-9a-f]{5}_\d{5}\b")
# What a page's prose quotes of a run: trial ids, speedups (``0.97x``), intervals
# (``0.92-0.99``) and count lines (``16 trials in 28.4s: 12 completed, 4 infeasible``).
QUOTED = (
    TRIAL_ID,
    re.compile(r"(?<![\w.])\d+\.\d+x\b"),
    re.compile(r"(?<![\w.-])\d+\.\d+-\d+\.\d+(?![\d.])"),
    re.compile(r"\b\d+ trials in \d+(?:\.\d+)?s(?::[^`\n]*)?"),
)
# The outputs a page quotes without including them, by page.
QUOTES = {
    "concepts.md": ("quickstart",),
    "faq.md": ("quickstart",),
}
ABOUT = "2 CPUs (Some CPU), Linux x86_64, torch 2.13.0+cpu, no GPU"


def includes() -> dict[Path, list[str]]:
    """The outputs each page includes, by page."""
    found = {}
    for page in DOCS.rglob("*.md"):
        names = INCLUDE.findall(page.read_text(encoding="utf-8"))
        if names:
            found[page] = names
    return found


BY_NAME = {output.name: output for output in regenerate.OUTPUTS}


def test_every_include_is_an_output_and_every_output_is_included():
    included = [name for names in includes().values() for name in names]
    assert sorted(set(included)) == sorted(BY_NAME), "includes and OUTPUTS differ"
    assert len(included) == len(set(included)), "an output is included twice"


@pytest.mark.parametrize("output", regenerate.OUTPUTS, ids=lambda output: output.name)
def test_each_output_starts_with_its_dated_header(output):
    lines = output.path.read_text(encoding="utf-8").splitlines()
    match = HEADER.match(lines[0])
    assert match, f"{output.path.name}: not a header: {lines[0]!r}"
    assert match["command"] == output.command
    assert len(lines) > 1, f"{output.path.name} holds no output"
    assert "\x1b" not in "".join(lines), f"{output.path.name} holds terminal escape codes"


@pytest.mark.parametrize(
    "output", [o for o in regenerate.OUTPUTS if o.keep], ids=lambda output: output.name
)
def test_kept_files_are_shown_beside_their_output(output):
    page = next(page for page, names in includes().items() if output.name in names)
    shown = set(IMAGE.findall(page.read_text(encoding="utf-8")))
    for destination in output.keep.values():
        assert (DOCS / destination).is_file(), f"docs/{destination} is missing"
        relative = Path(destination).as_posix()
        assert relative in shown, f"{page.name} includes {output.name} but not {destination}"


@pytest.mark.parametrize(
    "output",
    [o for o in regenerate.OUTPUTS if o.files or o.page_files],
    ids=lambda output: output.name,
)
def test_the_files_a_command_needs_exist(output):
    for name in output.files:
        assert (ROOT / name).is_file(), f"{name} is not in the repository"
    for name in output.page_files:
        assert regenerate.page_file(name).strip(), f"the page's {name} is empty"


@pytest.mark.parametrize("page", sorted(includes()), ids=lambda page: page.name)
def test_the_prose_quotes_only_trial_ids_of_its_outputs(page):
    text = "".join(BY_NAME[name].path.read_text(encoding="utf-8") for name in includes()[page])
    quoted = set(TRIAL_ID.findall(prose(page.read_text(encoding="utf-8"))))
    missing = sorted(trial for trial in quoted if trial not in text)
    assert not missing, f"{page.name} quotes trial ids its outputs do not hold: {missing}"


def stale_quotes(page: str, outputs: str) -> list[str]:
    """The values the page's prose quotes of a run that the outputs' text does not hold."""
    quoted = {value for pattern in QUOTED for value in pattern.findall(prose(page))}
    return sorted(value for value in quoted if value not in outputs)


@pytest.mark.parametrize("name", sorted(QUOTES))
def test_the_prose_quotes_only_what_its_outputs_printed(name):
    page = DOCS / name
    names = [*QUOTES[name], *includes().get(page, [])]
    outputs = "".join(BY_NAME[output].path.read_text(encoding="utf-8") for output in names)
    text = page.read_text(encoding="utf-8")
    assert any(pattern.search(prose(text)) for pattern in QUOTED), f"{name} quotes nothing"
    stale = stale_quotes(text, outputs)
    assert not stale, (
        f"docs/{name} quotes {stale}, which {', '.join(names)} do not hold: "
        "after `python docs/regenerate.py`, quote the new run"
    )


def test_a_stale_quote_is_found_and_a_fenced_one_is_not():
    outputs = "c5eaa_00008 0.97x 0.92-0.99\n16 trials in 28.4s: 12 completed, 4 infeasible\n"
    page = (
        "Trial `c5eaa_00008` reads `0.97x` with `0.92-0.99`, not `0.92x` with `0.83-0.95`;\n"
        "`16 trials in 45.4s: 12 completed, 4 infeasible`, `16 trials in 28.4s`, `93bc3_00008`.\n"
        "```text\n0.57x 0.43-1.04 ab12c_00001\n```\n"
    )
    assert stale_quotes(page, outputs) == [
        "0.83-0.95",
        "0.92x",
        "16 trials in 45.4s: 12 completed, 4 infeasible",
        "93bc3_00008",
    ]


def pasted_sessions(page: Path) -> list[int]:
    """The lines of the page's fenced blocks holding a ``$`` command and output after it."""
    found = []
    for block in fenced_blocks(page):
        lines = block.text.splitlines()
        first = next((n for n, line in enumerate(lines) if line.startswith("$ ")), None)
        after = lines[first:] if first is not None else []
        if any(line.strip() and not line.startswith("$ ") for line in after):
            found.append(block.line)
    return found


def test_no_page_pastes_a_console_session():
    pasted = {
        f"{page.relative_to(ROOT)}:{line}" for page in PAGES for line in pasted_sessions(page)
    }
    assert not pasted, f"pasted console output, make it an output of regenerate.py: {pasted}"


def test_a_pasted_session_is_found_and_an_included_output_is_not(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "A session:\n\n```text\n$ python -m versatil.sweep\nerror: bad\n```\n\n"
        "A command alone:\n\n```bash\n$ python -m versatil.sweep\n```\n\n"
        'An output:\n\n```{.text .output}\n--8<-- "outputs/quickstart.txt"\n```\n',
        encoding="utf-8",
    )
    assert pasted_sessions(page) == [3]


# -- regenerate() on small commands --------------------------------------------------------


def python_c(code: str) -> str:
    return f'python -c "{code}"'


@pytest.fixture
def docs_dir(tmp_path, monkeypatch):
    """A docs directory of one page showing ``data.txt`` whole, in place of the real one."""
    monkeypatch.setattr(regenerate, "DOCS", tmp_path)
    monkeypatch.setattr(regenerate, "OUTPUT_DIR", tmp_path / "outputs")
    (tmp_path / "page.md").write_text(
        "A file:\n\n<!-- file: data.txt -->\n```text\nfrom the page\n```\n", encoding="utf-8"
    )
    return tmp_path


def test_regenerate_runs_the_setup_and_keeps_files(docs_dir):
    setup = python_c("import pathlib; pathlib.Path('report').mkdir()")
    command = python_c(
        "import pathlib; print(pathlib.Path('data.txt').read_text().strip()); "
        "print(chr(27) + '[36m(worker)' + chr(27) + '[0m done'); "
        "pathlib.Path('report/plot.png').write_bytes(b'png')"
    )
    output = regenerate.Output(
        "demo",
        command,
        page_files=("data.txt",),
        setup=(setup,),
        keep={"report/*.png": "plots/plot.png"},
    )
    assert regenerate.regenerate(output, ABOUT)
    lines = (docs_dir / "outputs" / "demo.txt").read_text(encoding="utf-8").splitlines()
    assert HEADER.match(lines[0])["command"] == command
    assert lines[1:] == ["from the page", "(worker) done"]  # without its colour codes
    assert (docs_dir / "plots" / "plot.png").read_bytes() == b"png"


@pytest.mark.parametrize(
    ("code", "status", "keep"),
    [
        ("print('fine')", 2, {}),  # bad input on purpose that was not bad
        ("import sys; sys.exit(3)", 0, {}),
        ("print('no plot')", 0, {"report/*.png": "plot.png"}),
    ],
    ids=["status-0-not-2", "status-3-not-0", "kept-file-missing"],
)
def test_regenerate_leaves_the_files_when_a_command_fails(docs_dir, code, status, keep):
    output = regenerate.Output("demo", python_c(code), status=status, keep=keep)
    output.path.parent.mkdir()
    output.path.write_text("before\n", encoding="utf-8")
    assert not regenerate.regenerate(output, ABOUT)
    assert output.path.read_text(encoding="utf-8") == "before\n"
    assert not (docs_dir / "plot.png").exists()


def test_regenerate_takes_the_expected_status_of_bad_input(docs_dir):
    code = "import sys; print('error: bad value'); sys.exit(2)"
    output = regenerate.Output("demo", python_c(code), status=2)
    assert regenerate.regenerate(output, ABOUT)
    assert output.path.read_text(encoding="utf-8").splitlines()[1:] == ["error: bad value"]
