"""Reading a sweep file into plain data: each way a file is unusable is one ConfigError."""

import os
import re
import sys

import pytest
import yaml

from versatil.errors import ConfigError
from versatil.sweep.config.sweep_file import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_VALUES,
    check_plain_data,
    parse_yaml,
    read_text,
)

LABEL = "sweep file 'x.yaml'"


def label(path) -> str:
    return re.escape(f"sweep file {str(path)!r}")


# --- read_text ----------------------------------------------------------------------------


def test_a_sweep_file_reads_as_its_text_without_a_byte_order_mark(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: caf\xc3\xa9\n")
    assert read_text(path) == "name: café\n"


def test_a_missing_file_is_named(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=rf"^{label(path)} does not exist$"):
        read_text(path)


def test_a_directory_is_not_a_sweep_file(tmp_path):
    with pytest.raises(ConfigError, match=rf"^{label(tmp_path)} is a directory, not a sweep file$"):
        read_text(tmp_path)


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block: there is no writer
    with pytest.raises(ConfigError, match=rf"^{label(fifo)} is not a regular file$"):
        read_text(fifo)


def test_a_path_the_system_cannot_take_says_why():
    path = "sweep\0.yaml"
    with pytest.raises(ConfigError, match=rf"^{label(path)} cannot be read: .*null byte"):
        read_text(path)


def test_a_file_that_is_not_utf8_names_the_byte_and_its_offset(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: café\n".encode("latin-1"))
    message = rf"^{label(path)} is not UTF-8 text: byte 0xe9 at offset 9$"
    with pytest.raises(ConfigError, match=message):
        read_text(path)


def test_a_file_of_max_bytes_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * MAX_BYTES)
    assert len(read_text(path)) == MAX_BYTES
    path.write_bytes(b"#" * (MAX_BYTES + 1))
    message = rf"^{label(path)} is larger than {MAX_BYTES} bytes; is it a sweep file\?$"
    with pytest.raises(ConfigError, match=message):
        read_text(path)


# --- parse_yaml ---------------------------------------------------------------------------


def test_a_mapping_parses_as_it_is_written():
    assert parse_yaml("name: t\nspace:\n  lr: {grid: [0.1, 0.2]}\n", LABEL) == {
        "name": "t",
        "space": {"lr": {"grid": [0.1, 0.2]}},
    }


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_an_empty_document_says_what_a_sweep_file_holds(text):
    message = rf"^{re.escape(LABEL)} is empty; a sweep file is a mapping with at least a name$"
    with pytest.raises(ConfigError, match=message):
        parse_yaml(text, LABEL)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("- a\n- b\n", "list ['a', 'b']"),
        ("42\n", "int 42"),
        ("just words\n", "str 'just words'"),
    ],
)
def test_yaml_that_is_not_a_mapping_names_what_it_is(text, shown):
    message = rf"^{re.escape(LABEL)} must hold a mapping \(name: \.\.\., space: \.\.\.\), not "
    with pytest.raises(ConfigError, match=message + re.escape(shown) + "$"):
        parse_yaml(text, LABEL)


def test_a_long_value_that_is_not_a_mapping_is_cut_short():
    with pytest.raises(ConfigError) as raised:
        parse_yaml("- " + "x" * 500 + "\n", LABEL)
    shown = str(raised.value).split(", not list ", 1)[1]
    assert len(shown) == 80 and shown.endswith("...")


def test_malformed_yaml_names_the_line_and_column():
    message = (
        rf"^{re.escape(LABEL)} is not valid YAML: line 2, column 1: expected ',' or '\]', "
        r"but got '<stream end>' \(while parsing a flow sequence\)$"
    )
    with pytest.raises(ConfigError, match=message):
        parse_yaml("name: [unclosed\n", LABEL)


def test_an_integer_too_long_to_convert_is_invalid_yaml():
    with pytest.raises(ConfigError, match=rf"^{re.escape(LABEL)} is not valid YAML: .*4300 digits"):
        parse_yaml("seed: " + "9" * 5000 + "\n", LABEL)


def test_nesting_that_exhausts_the_parser_is_named_not_a_recursion_error():
    message = rf"^{re.escape(LABEL)} nests deeper than {MAX_DEPTH} levels$"
    with pytest.raises(ConfigError, match=message):
        # Each level costs the parser more than one frame: past the recursion limit, which
        # torch raises in the processes that import it.
        depth = sys.getrecursionlimit()
        parse_yaml("a: " + "[" * depth + "]" * depth + "\n", LABEL)


def test_aliases_parse_to_shared_values():
    data = parse_yaml("base: &lrs [0.1, 0.2]\nspace:\n  lr: {grid: *lrs}\n", LABEL)
    assert data["space"]["lr"]["grid"] == [0.1, 0.2]
    assert data["space"]["lr"]["grid"] is data["base"]


# --- check_plain_data ---------------------------------------------------------------------


def nested(levels: int):
    """``levels`` mappings, each holding the next under ``k``, around the value 1."""
    value = 1
    for _ in range(levels):
        value = {"k": value}
    return value


def test_plain_finite_data_passes():
    data = {"name": "t", "space": {"lr": {"grid": [0.1, 2, True, None, "x"]}}, "seed": 0}
    assert check_plain_data(data) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lr: .nan\n", r"^lr: nan is not a finite number$"),
        ("space:\n  lr: {choice: [0.1, .inf]}\n", r"^space\.lr\.choice\[1\]: inf is not a finite"),
        ("objective: {tolerance: -.inf}\n", r"^objective\.tolerance: -inf is not a finite number$"),
    ],
)
def test_a_non_finite_number_names_its_field(text, message):
    with pytest.raises(ConfigError, match=message):
        check_plain_data(parse_yaml(text, LABEL))


def test_max_depth_nested_mappings_pass_and_one_more_is_refused():
    check_plain_data(nested(MAX_DEPTH))
    field = ".".join(["k"] * MAX_DEPTH)
    message = rf"^{field}: nests deeper than {MAX_DEPTH} levels \(a recursive YAML alias\?\)$"
    with pytest.raises(ConfigError, match=message):
        check_plain_data(nested(MAX_DEPTH + 1))


def test_a_recursive_alias_is_refused_with_its_field_cut_short():
    data = parse_yaml("a: &a [*a]\n", LABEL)
    assert data["a"][0] is data["a"]  # YAML builds the cycle; walking it would never end
    with pytest.raises(ConfigError) as raised:
        check_plain_data(data)
    field, _, rest = str(raised.value).partition(": ")
    assert field.startswith("a[0][0][0]") and field.endswith("...") and len(field) == 80
    assert rest == f"nests deeper than {MAX_DEPTH} levels (a recursive YAML alias?)"


def test_aliases_that_expand_past_max_values_are_refused():
    # Six levels of ten aliases each: a few hundred bytes of YAML, a million values.
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n"
        for prev, name in zip("abcde", "bcdef", strict=True)
    )
    data = yaml.safe_load(text)
    message = rf"^the sweep holds more than {MAX_VALUES} values \(YAML aliases expanded\)$"
    with pytest.raises(ConfigError, match=message):
        check_plain_data(data)


def test_max_values_pass_and_one_more_is_refused():
    # The mapping and the list count as values too.
    check_plain_data({"x": list(range(MAX_VALUES - 2))})
    with pytest.raises(ConfigError, match=rf"more than {MAX_VALUES} values"):
        check_plain_data({"x": list(range(MAX_VALUES - 1))})
