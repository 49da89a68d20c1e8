"""The reference pages generated from the code (``docs/reference_gen.py``).

They must equal what the generator writes today, list every field of the sweep file's
schema with its description, list every option of every command with its help, and show
every shipped sweep file whole.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from versatil.sweep.cli.main import SUBCOMMANDS, build_parser, standalone_parser
from versatil.sweep.config.axes import EnumAxis, NumericAxis
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.shipped import shipped_sweeps
from versatil.training import __main__ as training_main

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "reference_gen.py"
REGENERATE = "python docs/reference_gen.py"


def load_generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("reference_gen", GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = load_generator()


@pytest.fixture(scope="module")
def pages() -> dict[Path, str]:
    return gen.pages()


@pytest.mark.parametrize("name", ["sweep-file.md", "cli.md", "sweeps.md"])
def test_committed_page_is_up_to_date(name: str, pages: dict[Path, str]) -> None:
    path = ROOT / "docs" / "reference" / name
    assert path in pages, f"the generator writes no {name}"
    committed = path.read_text(encoding="utf-8") if path.is_file() else ""
    assert committed == pages[path], (
        f"docs/reference/{name} is out of date with the code; regenerate it with `{REGENERATE}`"
    )


# -- the sweep file ------------------------------------------------------------------------


def models_in(annotation: Any) -> Iterator[tuple[str, type[pydantic.BaseModel]]]:
    """The models a field holds, each with the path part that leads into it."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        yield "", annotation
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        yield from ((f".{gen.KEY}{part}", m) for part, m in models_in(args[1]))
    elif origin is list:
        yield from ((f"[]{part}", m) for part, m in models_in(args[0]))
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from models_in(arg)


def schema_fields(
    model: type[pydantic.BaseModel], prefix: str = ""
) -> Iterator[tuple[str, pydantic.fields.FieldInfo]]:
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path, field
        for part, inner in models_in(field.annotation):
            yield from schema_fields(inner, f"{path}{part}.")


SCHEMA_FIELDS = dict(schema_fields(SweepConfig))
AXIS_FIELDS = {
    **dict(schema_fields(EnumAxis, "space.AXIS.")),
    **dict(schema_fields(NumericAxis, f"space.{gen.KEY}.")),
}


def row_of(page: str, path: str) -> str:
    rows = [line for line in page.splitlines() if line.startswith(f"| `{path}` |")]
    assert len(rows) == 1, f"{path}: {len(rows)} rows on the sweep-file page"
    return rows[0]


def test_schema_walk_reaches_nested_fields() -> None:
    expected = {
        "scheduler.reduction_factor",
        "scheduler.perturbation_interval",
        "scheduler.quantile_fraction",
        "scheduler.hyperparam_mutations",
        f"scheduler.hyperparam_mutations.{gen.KEY}.loguniform",
        "mlflow.log_checkpoints",
        "runtime_env.env_vars",
        "post_training.int8.top",
    }
    assert expected <= SCHEMA_FIELDS.keys()


@pytest.mark.parametrize("path", [*SCHEMA_FIELDS, *AXIS_FIELDS])
def test_every_schema_field_has_a_row(path: str, pages: dict[Path, str]) -> None:
    row_of(pages[gen.SWEEP_FILE_PAGE], path)


def test_rows_show_choices_defaults_and_descriptions(pages: dict[Path, str]) -> None:
    page = pages[gen.SWEEP_FILE_PAGE]
    for path, field in SCHEMA_FIELDS.items():
        row = row_of(page, path)
        for choice in literal_values(field.annotation):
            assert f"`{choice}`" in row, f"{path}: choice {choice!r} missing from {row}"
        if field.is_required():
            assert "| required |" in row, row
        elif isinstance(field.default, str | int | float) and not isinstance(field.default, bool):
            assert f"| `{field.default}` |" in row, row
        if field.description:
            words = " ".join(field.description.split())
            assert words.split(":")[0] in row, f"{path}: description missing from {row}"


def test_every_schema_field_has_a_description() -> None:
    assert gen.gaps() == [], "fields without a description; give each a Field(description=...)"


def literal_values(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(v) for v in typing.get_args(annotation)]
    return [v for arg in typing.get_args(annotation) for v in literal_values(arg)]


# -- the command line ----------------------------------------------------------------------


def training_options() -> set[str]:
    """The options ``python -m versatil.training --help`` lists."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        training_main.parse_args(["--help"])
    listed = re.findall(r"^ {2}(-\S.*?)(?: {2,}|$)", out.getvalue(), re.M)
    return {flag.split()[0] for line in listed for flag in line.split(", ")}


def sweep_parsers() -> dict[str, argparse.ArgumentParser]:
    parsers = {"python -m versatil.sweep": build_parser()}
    for name, command in SUBCOMMANDS.items():
        parsers[f"python -m versatil.sweep {name}"] = standalone_parser(command)
    return parsers


def command_section(page: str, prog: str) -> str:
    match = re.search(rf"^## `{re.escape(prog)}`\n(.*?)(?=^## |\Z)", page, re.M | re.S)
    assert match, f"no section for {prog}"
    return match.group(1)


@pytest.mark.parametrize("prog", list(sweep_parsers()))
def test_every_option_of_a_sweep_command_is_listed(prog: str, pages: dict[Path, str]) -> None:
    section = command_section(pages[gen.CLI_PAGE], prog)
    parser = sweep_parsers()[prog]
    for action in parser._actions:
        for flag in action.option_strings:
            assert f"`{flag}`" in section, f"{prog}: {flag} is not on the CLI page"
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            assert f"| `{action.metavar or action.dest}` |" in section, f"{prog}: {action.dest}"


def test_every_option_of_the_training_command_is_listed(pages: dict[Path, str]) -> None:
    section = command_section(pages[gen.CLI_PAGE], "python -m versatil.training")
    options = training_options()
    assert {"--precision", "--compile-mode", "--help"} <= options
    missing = sorted(o for o in options if f"`{o}`" not in section)
    assert not missing, f"python -m versatil.training: {missing} not on the CLI page"


def test_the_training_command_is_documented_from_its_own_parser() -> None:
    documented = {parser.prog: parser for parser, _ in gen.commands()}
    parser = documented["python -m versatil.training"]
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert flags == training_options()


@pytest.mark.parametrize("parser", [parser for parser, _ in gen.commands()], ids=lambda p: p.prog)
def test_every_option_has_help(parser: argparse.ArgumentParser) -> None:
    silent = [
        action.option_strings[0] if action.option_strings else action.dest
        for action in parser._actions
        if not action.help and not isinstance(action, argparse._SubParsersAction)
    ]
    assert not silent, f"{parser.prog}: no help for {silent}"


def test_usage_lines_do_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    wide = gen.cli_page()
    monkeypatch.setenv("COLUMNS", "40")
    assert gen.cli_page() == wide


# -- the shipped sweeps --------------------------------------------------------------------


def sweep_section(page: str, name: str) -> str:
    match = re.search(rf"^## `{re.escape(name)}`\n(.*?)(?=^## |\Z)", page, re.M | re.S)
    assert match, f"no section for the shipped sweep {name}"
    return match.group(1)


@pytest.mark.parametrize("name", list(shipped_sweeps()))
def test_every_shipped_sweep_is_shown_whole(name: str, pages: dict[Path, str]) -> None:
    section = sweep_section(pages[gen.SWEEPS_PAGE], name)
    text = shipped_sweeps()[name].read_text(encoding="utf-8").rstrip()
    assert f"```yaml\n{text}\n```" in section, f"sweeps/{name}.yaml is not shown whole"
    assert gen.SWEEP_QUESTIONS[name] in section
    assert f"`{gen.run_command(name)}`" in section


def test_the_sweeps_page_lists_no_other_sweep(pages: dict[Path, str]) -> None:
    listed = re.findall(r"^## `([^`]+)`$", pages[gen.SWEEPS_PAGE], re.M)
    assert listed == list(shipped_sweeps())


def test_a_shipped_sweep_without_its_sentence_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    questions = dict(gen.SWEEP_QUESTIONS)
    del questions["quickstart"]
    questions["retired"] = "What did it answer?"
    monkeypatch.setattr(gen, "SWEEP_QUESTIONS", questions)
    with pytest.raises(ValueError, match=r"\['quickstart'\].*\['retired'\]"):
        gen.sweeps_page()
