"""The documentation: the MkDocs site builds with ``--strict``, README.md stays a first page,
and every sweep file and ``python -m versatil.sweep`` command the docs show runs.

Sweep files and commands are run with ``--dry-run``: validated and expanded, nothing started.
Two HTML comments on the line before a fence say more about its block:

- ``<!-- bad-input -->``: bad input on purpose; its sweep file or commands exit with status 2.
- ``<!-- file: NAME -->``: the block is the file NAME (a task module, a sweep file) that the
  blocks around it use; it is written into the directory the sweep files are checked in.

Subcommands that need a finished sweep (``report``, ``confirm``, ``compress``, ``sync``) are
checked with ``--help``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.forked import run_module

# Each sweep file and command runs as a process of its own (forked after the imports that
# every command makes: torch, Lightning), and a user task's module is imported in it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
SHIPPED_SWEEPS = ROOT / "sweeps"
README_MAX_LINES = 150
TIMEOUT_S = 300

# Top-level keys that make a YAML block a whole sweep file; any other YAML block is a
# fragment of one, checked laid over the quickstart sweep.
SWEEP_FILE_KEYS = {"name", "task", "space"}
# The top-level keys of a LightningCLI config, which a sweep's task.config names.
CLI_CONFIG_KEYS = {"seed_everything", "model", "data", "trainer", "optimizer", "lr_scheduler"}

COMMAND = "python -m versatil.sweep"
SHELL_LANGS = {"bash", "console", "shell", "sh"}
# An opening fence: ```LANG, or ```{.LANG .CLASS} (a console output: {.text .output}).
FENCE = re.compile(r"^```\s*(?:\{\s*\.([\w+-]+)[^}]*\}|([\w+-]*))\s*$")
ANNOTATION = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")
SUBCOMMAND = re.compile(re.escape(COMMAND) + r" ([a-z][\w-]*)")
DOCS_LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)")


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str
    annotation: str  # the HTML comment on the line before the fence, or ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def bad_input(self) -> bool:
        return self.annotation == "bad-input"

    @property
    def file_name(self) -> str | None:
        key, sep, name = self.annotation.partition(":")
        return name.strip() if sep and key.strip() == "file" else None


def fenced_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    start: int | None = None
    lang = ""
    for number, line in enumerate(lines, start=1):
        if start is None:
            match = FENCE.match(line)
            if match:
                start, lang = number, (match.group(1) or match.group(2)).lower()
        elif line.strip() == "```":
            before = ANNOTATION.match(lines[start - 2]) if start >= 2 else None
            text = "\n".join(lines[start : number - 1]) + "\n"
            blocks.append(Block(page, start, lang, text, before.group(1) if before else ""))
            start = None
    assert start is None, f"{page.relative_to(ROOT)}:{start}: fence never closed"
    return blocks


BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
# Each YAML block once: the README repeats a sweep file of the pages.
_yaml_blocks: dict[tuple[str, bool], Block] = {}
for _block in BLOCKS:
    if _block.lang in {"yaml", "yml"}:
        _yaml_blocks.setdefault((_block.text, _block.bad_input), _block)
FILE_BLOCKS = [block for block in BLOCKS if block.file_name]


def is_sweep_file(block: Block) -> bool:
    data = yaml.safe_load(block.text)
    return isinstance(data, dict) and bool(SWEEP_FILE_KEYS & data.keys())


def is_cli_config(block: Block) -> bool:
    """A LightningCLI config (``task.config``'s file): a model, and LightningCLI's keys only."""
    data = yaml.safe_load(block.text)
    return isinstance(data, dict) and "model" in data and data.keys() <= CLI_CONFIG_KEYS


CLI_BLOCKS = [block for block in _yaml_blocks.values() if is_cli_config(block)]
YAML_BLOCKS = [block for block in _yaml_blocks.values() if not is_cli_config(block)]


@dataclasses.dataclass(frozen=True)
class Command:
    block: Block
    args: tuple[str, ...]  # after "python -m versatil.sweep"


def shown_commands() -> list[Command]:
    """Every ``python -m versatil.sweep`` line of a fenced block: in a shell block any such
    line, in an output block the lines after a ``$`` prompt."""
    commands = []
    for block in BLOCKS:
        for line in block.text.splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:].strip()
            elif block.lang not in SHELL_LANGS:
                continue
            words = shlex.split(line, comments=True)
            if words[:3] == COMMAND.split():
                commands.append(Command(block, tuple(words[3:])))
    return commands


def plain_runs() -> list[Command]:
    """The commands that run a sweep (no subcommand), each once."""
    runs: dict[tuple[tuple[str, ...], bool], Command] = {}
    for command in shown_commands():
        if not command.args or command.args[0].startswith("-"):
            runs.setdefault((command.args, command.block.bad_input), command)
    return list(runs.values())


RUNS = plain_runs()
SUBCOMMANDS = sorted(
    {name for page in PAGES for name in SUBCOMMAND.findall(page.read_text(encoding="utf-8"))}
)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", MLFLOW_DISABLE_TELEMETRY="true")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if args[0] == "-m":  # a command of this project: forked, its imports made once
        return run_module(args[1], args[2:], cwd, env, TIMEOUT_S)
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def explain(result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit status {result.returncode}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the files the docs show as ``<!-- file: NAME -->`` blocks."""
    directory = tmp_path_factory.mktemp("docs-files")
    written: dict[str, Block] = {}
    for block in FILE_BLOCKS:
        name = block.file_name
        assert name and "/" not in name, f"{block.where}: file name {name!r}"
        first = written.setdefault(name, block)
        assert first.text == block.text, f"{block.where} and {first.where} differ for {name}"
        (directory / name).write_text(block.text, encoding="utf-8")
    return directory


@dataclasses.dataclass(frozen=True)
class BuiltSite:
    directory: Path
    result: subprocess.CompletedProcess[str]


_built: list[BuiltSite] = []


def build_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """``mkdocs build --strict``, once per test run: the tests that read the site share it."""
    if not _built:
        site = tmp_path_factory.mktemp("site")
        result = run(["-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], ROOT)
        _built.append(BuiltSite(site, result))
    return _built[0]


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    return build_site(tmp_path_factory)


def test_mkdocs_build_strict(built_site: BuiltSite) -> None:
    result = built_site.result
    assert result.returncode == 0, explain(result)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert not warnings, "\n".join(warnings)
    assert (built_site.directory / "index.html").is_file()


def test_readme_is_a_first_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_links_to_docs_exist() -> None:
    links = DOCS_LINK.findall(README.read_text(encoding="utf-8"))
    assert links, "README.md links to no page of docs/"
    missing = sorted({link for link in links if not (ROOT / link).is_file()})
    assert not missing, f"README.md links to missing pages: {missing}"


def test_the_docs_show_what_these_tests_check() -> None:
    assert any(is_sweep_file(block) for block in YAML_BLOCKS)
    assert RUNS and SUBCOMMANDS


@pytest.mark.parametrize("block", CLI_BLOCKS, ids=lambda block: block.where)
def test_lightning_cli_config_parses(block: Block) -> None:
    from versatil.training.tasks.cli_config import read_cli_config

    assert block.file_name, f"{block.where}: a LightningCLI config needs <!-- file: NAME -->"
    read_cli_config(block.text)  # LightningCLI's own parse: the classes import and fit


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda block: block.where)
def test_sweep_file_dry_run(block: Block, workdir: Path) -> None:
    data = yaml.safe_load(block.text)
    assert isinstance(data, dict), f"{block.where}: not a YAML mapping"
    if is_sweep_file(block):
        path = workdir / (block.file_name or f"block-{block.page.stem}-{block.line}.yaml")
        path.write_text(block.text, encoding="utf-8")
    else:  # a fragment: its sections replace the quickstart sweep's
        sweep = yaml.safe_load((SHIPPED_SWEEPS / "quickstart.yaml").read_text(encoding="utf-8"))
        sweep.update(data)
        path = workdir / f"fragment-{block.page.stem}-{block.line}.yaml"
        path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    result = run(["-m", "versatil.sweep", "--config", str(path), "--dry-run"], workdir)
    expected = 2 if block.bad_input else 0
    assert result.returncode == expected, f"{block.where}: {explain(result)}"


def config_of(args: tuple[str, ...]) -> str | None:
    for index, arg in enumerate(args):
        if arg == "--config" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--config="):
            return arg.partition("=")[2]
    return None


@pytest.mark.parametrize(
    "command",
    RUNS,
    ids=lambda command: f"{command.block.where}: {shlex.join(command.args) or 'no arguments'}",
)
def test_command_dry_run(command: Command, workdir: Path) -> None:
    config = config_of(command.args)
    cwd = ROOT
    if config and config.endswith((".yaml", ".yml")) and not (ROOT / config).is_file():
        if (workdir / config).is_file():
            cwd = workdir  # run from the directory holding the file, as the docs say
        else:
            pytest.fail(
                f"{command.block.where}: --config {config} is neither in the repository "
                "nor shown in the docs as a <!-- file: NAME --> block"
            )
    args = list(command.args)
    if "--dry-run" not in args:
        args.append("--dry-run")
    result = run(["-m", "versatil.sweep", *args], cwd)
    expected = 2 if command.block.bad_input else 0
    assert result.returncode == expected, f"{command.block.where}: {explain(result)}"


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_subcommand_help(subcommand: str) -> None:
    result = run(["-m", "versatil.sweep", subcommand, "--help"], ROOT)
    assert result.returncode == 0, explain(result)
    assert f"versatil.sweep {subcommand}" in result.stdout, result.stdout
