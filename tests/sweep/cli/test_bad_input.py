"""Fuzzing the sweep CLI with bad input: each case is one clear message and exit status 2.

Every case runs through the real entry point (``run_main`` on the CLI's ``main``, as
``python -m versatil.sweep`` does) in this process, with ``--dry-run`` so that nothing
starts. A case starts from a valid sweep (or valid arguments) and breaks exactly one thing;
the message must name the broken field or value, and nothing may escape as a traceback.
"""

import contextlib
import inspect
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lightning.pytorch import Trainer

from versatil.cli_common import run_main
from versatil.sweep.cli.main import build_parser, build_report_parser, main
from versatil.sweep.config.shipped import shipped_sweeps

MIN_CASES = 1000
TRAINER_ARGS = list(inspect.signature(Trainer.__init__).parameters)

BASE = {
    "name": "fuzz",
    "task": {"name": "reaching", "params": {"n_episodes": 8, "horizon": 5}},
    "objective": {"metric": "val_loss", "mode": "min"},
    "space": {
        "precision": ["32", "bf16-mixed"],
        "compile_mode": ["none"],
        "matmul_precision": {"values": ["highest"], "exclude": []},
        "lr": {"loguniform": [1.0e-4, 1.0e-2]},
        "width": {"choice": [16, 32]},
        "data_seed": {"randint": [1, 4]},
        "depth": 2,
    },
    "search": {"algorithm": "random", "num_samples": 2, "seed": 0},
    "scheduler": {"type": "fifo", "grace_period": 1, "reduction_factor": 2.0},
    "resources": {"cpu": 1, "gpu": 0, "workers_per_trial": 1},
    "max_concurrent_trials": 1,
    "max_failures": 0,
    "trainer": {"max_epochs": 1, "accelerator": "cpu", "seed": 0},
    "storage_path": "runs/sweeps",
    "mlflow": {"experiment": "fuzz", "log_checkpoints": "best"},
    "post_training": {"int8": "none"},
}

SECTIONS = {
    "": list(BASE),
    "task": ["name", "params"],
    "objective": ["metric", "mode", "metrics", "tolerance"],
    "search": ["algorithm", "num_samples", "seed"],
    "scheduler": [
        "type",
        "metric",
        "grace_period",
        "reduction_factor",
        "perturbation_interval",
        "hyperparam_mutations",
        "synch",
        "quantile_fraction",
    ],
    "resources": ["cpu", "gpu", "workers_per_trial"],
    # The section also takes every argument of Lightning's Trainer.
    "trainer": ["max_epochs", "accelerator", "seed", "compile_cache", *TRAINER_ARGS],
    "mlflow": ["experiment", "tracking_uri", "log_checkpoints", "register", "register_best"],
    "post_training": ["int8"],
    "space.lr": ["choice", "grid", "uniform", "loguniform", "randint"],
    "space.matmul_precision": ["values", "exclude"],
}

# What each enum axis accepts (any case for "none"; precision also Lightning's aliases).
ENUM_ACCEPTS = {
    "precision": {"32", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "64"}
    | {"32-true", "64-true", "16", "bf16"},
    "compile_mode": {"none", "default", "reduce-overhead", "max-autotune"}
    | {"max-autotune-no-cudagraphs"},
    "matmul_precision": {"none", "highest", "high", "medium"},
}


@dataclass(frozen=True)
class Place:
    """A path made by the test, named in a case: ``file`` (the written sweep file),
    ``directory``, ``loop`` (a symlink to itself) or ``fifo``."""

    name: str


FILE = Place("file")


@dataclass(frozen=True)
class Case:
    """One bad input: the arguments, the sweep file's bytes (if any) and what to expect.

    Attributes:
        category: What is broken, for the tally.
        argv: The CLI arguments.
        content: The sweep file's bytes, or ``None`` when the case writes none.
        needles: The message must hold at least one of these (the field or the value).
    """

    category: str
    argv: tuple[str | Place, ...]
    content: bytes | None
    needles: tuple[str | Place, ...]


def dump(data: object) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode()


def with_value(dotted: str, value: object) -> dict:
    """BASE with ``dotted`` set to ``value``."""
    data = yaml.safe_load(yaml.safe_dump(BASE))
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return data


def sweep_case(category: str, data: object, *needles: str) -> Case:
    return Case(category, ("--config", FILE), dump(data), needles)


# --- values ---------------------------------------------------------------------------

words = st.from_regex(r"[a-z][a-z0-9_]{0,14}", fullmatch=True)
finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
plain = st.one_of(st.integers(-5, 5), words, st.lists(st.integers(0, 3), max_size=2))
non_finite = st.sampled_from([float("inf"), float("-inf"), float("nan")])
non_numeric_text = words.filter(lambda w: w not in {"nan", "inf", "infinity"})
containers = st.one_of(st.lists(plain, max_size=3), st.dictionaries(words, plain, max_size=2))
not_an_int = st.one_of(
    non_numeric_text,
    containers,
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)),
)
not_a_number = st.one_of(non_numeric_text, containers)
not_a_string = st.one_of(st.integers(), finite, containers, st.booleans())
huge = st.one_of(st.integers(2**32, 10**300), st.integers(-(10**300), -1))

# (field, strategy of values it rejects)
BAD_VALUES = [
    ("name", not_a_string),
    ("task.name", not_a_string),
    ("task.params", st.one_of(words, st.integers(), st.lists(plain, min_size=1, max_size=2))),
    ("objective.metric", not_a_string),
    ("objective.mode", st.one_of(words.filter(lambda w: w not in ("min", "max")), not_a_string)),
    ("objective.metrics", st.one_of(words, st.integers(), st.lists(plain, min_size=1))),
    ("objective.metrics.val_loss", st.one_of(words.filter(lambda w: w not in ("min", "max")))),
    ("objective.tolerance", st.one_of(not_a_number, st.floats(max_value=-1e-9))),
    ("scheduler.metric", st.one_of(words, not_a_string)),
    (
        "search.algorithm",
        st.one_of(
            words.filter(lambda w: w not in ("grid", "random", "optuna", "race")), containers
        ),
    ),
    ("search.num_samples", st.one_of(not_an_int, st.integers(-(10**6), 0), st.integers(10_001))),
    ("search.seed", st.one_of(not_a_number, huge)),
    ("scheduler.type", st.one_of(words.filter(lambda w: w not in ("fifo", "asha", "pbt")))),
    ("scheduler.grace_period", st.one_of(not_an_int, st.integers(max_value=0))),
    ("scheduler.reduction_factor", st.one_of(not_a_number, st.floats(max_value=1.0))),
    ("scheduler.perturbation_interval", st.one_of(not_an_int, st.integers(max_value=0))),
    ("scheduler.quantile_fraction", st.one_of(st.floats(max_value=0.0), st.floats(0.51, 1e9))),
    (
        "scheduler.synch",
        st.one_of(
            words.filter(lambda w: w not in {"y", "n", "t", "f", "yes", "no", "on", "off"}).filter(
                lambda w: w not in {"true", "false"}
            ),
            st.integers(2, 10**6),
            containers,
        ),
    ),
    ("scheduler.hyperparam_mutations", st.one_of(words, st.lists(plain, min_size=1))),
    ("resources.cpu", st.one_of(not_a_number, st.floats(max_value=0.0))),
    ("resources.gpu", st.one_of(not_a_number, st.floats(max_value=-1e-9))),
    ("resources.workers_per_trial", st.one_of(not_an_int, st.integers(max_value=0))),
    ("max_concurrent_trials", st.one_of(not_an_int, st.integers(max_value=0))),
    ("max_failures", st.one_of(not_an_int, st.integers(max_value=-1))),
    ("trainer.max_epochs", st.one_of(not_an_int, st.integers(-(10**30), 0))),
    ("trainer.seed", st.one_of(not_a_number, huge)),
    ("storage_path", not_a_string),
    ("mlflow.tracking_uri", not_a_string),
    (
        "mlflow.log_checkpoints",
        st.one_of(words.filter(lambda w: w not in ("best", "all", "none")), containers),
    ),
    ("mlflow.register", st.one_of(st.integers(), containers)),
    ("mlflow.register_best", st.one_of(st.integers(), containers)),
    (
        "post_training.int8",
        st.one_of(
            words.filter(lambda w: w not in ("pareto", "best", "none")),
            st.integers(),
            st.fixed_dictionaries({"top": st.one_of(st.integers(max_value=0), words)}),
        ),
    ),
    ("space", st.one_of(words, st.integers(), st.lists(plain, min_size=1))),
    ("task", st.one_of(words, st.integers(), st.lists(plain, min_size=1))),
    ("trainer", st.one_of(words, st.integers(), st.lists(plain, min_size=1))),
    ("space.lr", st.fixed_dictionaries({"loguniform": st.lists(finite, max_size=1)})),
    ("space.width", st.fixed_dictionaries({"choice": st.just([])})),
    ("space.width", st.fixed_dictionaries({"grid": containers.filter(lambda c: not c)})),
    ("space.lr", st.fixed_dictionaries({"colour": plain})),
]

NUMERIC_FIELDS = [
    "objective.tolerance",
    "search.num_samples",
    "search.seed",
    "scheduler.grace_period",
    "scheduler.reduction_factor",
    "scheduler.quantile_fraction",
    "resources.cpu",
    "resources.gpu",
    "max_concurrent_trials",
    "trainer.max_epochs",
    "trainer.seed",
    "task.params.horizon",
    "space.depth",
    "space.width.choice",
    "space.lr.loguniform",
]

BAD_NAMES = st.one_of(
    st.sampled_from(
        [
            *("", " ", "\t", "..", ".", "../../etc", "a/b", "/abs", "a\\b", "a b", "-x"),
            *(".hidden", "_x", "x\n", "x\x00", "caf\u00e9", "a" * 101, "b" * 300, "x;rm"),
        ]
    ),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{100,299}", fullmatch=True),
    st.from_regex(r"[._-][A-Za-z0-9._-]{0,20}", fullmatch=True),
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufeff"), max_size=40
    ).filter(lambda t: any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in t)),
)


# --- cases ----------------------------------------------------------------------------


@st.composite
def unknown_key(draw):
    section = draw(st.sampled_from(sorted(SECTIONS)))
    key = draw(words.filter(lambda w: w not in SECTIONS[section]))
    dotted = f"{section}.{key}" if section else key
    return sweep_case("unknown key", with_value(dotted, draw(plain)), key)


@st.composite
def wrong_value(draw):
    field, values = draw(st.sampled_from(BAD_VALUES))
    value = draw(values)
    return sweep_case("wrong type or range", with_value(field, value), field)


@st.composite
def non_finite_number(draw):
    field = draw(st.sampled_from(NUMERIC_FIELDS))
    value = draw(non_finite)
    if field.endswith((".choice", ".loguniform")):
        value = [1e-3, value] if draw(st.booleans()) else [value, 1e-2]
    as_text = draw(st.booleans()) and field.split(".")[0] in ("resources", "scheduler")
    if as_text:  # a float field also rejects "inf" and "nan" written as text
        value = str(value)
    return sweep_case("non-finite number", with_value(field, value), field)


@st.composite
def low_not_below_high(draw):
    kind = draw(st.sampled_from(["uniform", "loguniform", "randint"]))
    if kind == "randint":
        high = draw(st.integers(-(10**6), 10**6))
        low = draw(st.integers(high, high + 10**6))
    else:
        high = draw(finite)
        low = draw(st.floats(min_value=high, allow_infinity=False, width=32))
        if kind == "loguniform" and draw(st.booleans()):
            low, high = draw(st.floats(-1e6, 0.0)), abs(high) + 1
    axis = draw(st.sampled_from(["lr", "width", "new_axis"]))
    return sweep_case("low >= high", with_value(f"space.{axis}", {kind: [low, high]}), axis)


@st.composite
def bad_enum(draw):
    axis = draw(st.sampled_from(sorted(ENUM_ACCEPTS)))
    value = draw(
        st.one_of(
            st.sampled_from(["bf16-mix", "fp32", "int8", "8", "half", "32.0", "cuda", "max"]),
            st.from_regex(r"[a-zA-Z0-9-]{1,16}", fullmatch=True),
            st.integers(-100, 100),
        )
    )
    assume(str(value).strip().lower() not in ENUM_ACCEPTS[axis] or str(value) == "8")
    assume(str(value).strip().lower() != "all")
    if axis == "compile_mode":
        assume(str(value) == str(value).strip())  # CompileMode has no case folding
    form = draw(st.sampled_from(["list", "scalar", "values", "exclude"]))
    if form == "list":
        raw = ["32" if axis == "precision" else "none", value]
    elif form == "scalar":
        raw = value
    elif form == "values":
        raw = {"values": [value]}
    else:
        raw = {"values": "all", "exclude": [value]}
    return sweep_case("unknown enum value", with_value(f"space.{axis}", raw), str(value))


@st.composite
def bad_name(draw):
    field = draw(st.sampled_from(["name", "mlflow.experiment"]))
    value = draw(BAD_NAMES)
    data = with_value(field, value)
    loaded = yaml.safe_load(dump(data))
    assume((loaded["name"] if field == "name" else loaded["mlflow"]["experiment"]) == value)
    return sweep_case("unsafe name", data, repr(value))


@st.composite
def too_many_trials(draw):
    count = draw(st.integers(101, 2000))
    data = with_value("space.width", {"grid": list(range(count))})
    data = with_value("search.algorithm", "grid") | {"space": data["space"]}
    data["search"]["num_samples"] = draw(st.integers(10**4 // (count * 2) + 1, 10**9))
    return sweep_case("too many trials", data, "search.num_samples")


def broken_yaml() -> st.SearchStrategy[Case]:
    templates = st.sampled_from(
        [
            "name: [unclosed\n",
            "name: {a: 1\n",
            "name: 'open\n",
            'name: "open\n',
            "name: x\n  bad: indent\n",
            "name: x\n\tspace: {}\n",
            "- a\nb: c\n",
            "name: x\nname: y: z\n",
            "a: &x 1\nb: *y\n",
            "name: !!python/object:os.system x\n",
            "name: x\n%YAML 1.1\n",
            "{: : :}\n",
            "name: @x\n",
            "name: `x`\n",
            "name: 2024-13-45\n",
            "seed: " + "9" * 5000 + "\n",
        ]
    )
    noise = st.text(st.sampled_from(list("[]{}:,'\"&*!|>-?% \n\tx1")), min_size=1, max_size=30)

    def parses(text: str) -> bool:
        try:
            yaml.safe_load(text)
        except Exception:  # any failure makes it a broken file
            return False
        return True

    text = st.one_of(templates, noise.filter(lambda t: not parses(t)))
    return text.map(lambda t: Case("YAML error", ("--config", FILE), t.encode(), (FILE,)))


def not_a_mapping() -> st.SearchStrategy[Case]:
    values = st.one_of(st.lists(plain, min_size=1, max_size=3), words, st.integers(), finite)
    return values.map(lambda v: Case("not a mapping", ("--config", FILE), dump(v), (FILE,)))


def empty_file() -> st.SearchStrategy[Case]:
    blank = st.lists(st.sampled_from([" ", "\n", "# a comment\n", "  # indented\n"])).map("".join)
    null = st.sampled_from(["---\n", "~\n", "null\n", "--- ~\n", "---\n...\n"])
    return st.one_of(blank, null).map(
        lambda text: Case("empty file", ("--config", FILE), text.encode(), (FILE,))
    )


def non_text_key() -> st.SearchStrategy[Case]:
    keys = st.dictionaries(st.one_of(st.integers(), st.booleans()), plain, min_size=1, max_size=2)
    return keys.map(lambda d: sweep_case("non-text key", {**BASE, **d}, *(f"{k!r}" for k in d)))


@st.composite
def not_utf8(draw):
    prefix = dump(BASE)[: draw(st.integers(0, 60))]
    junk = draw(st.binary(max_size=8))
    content = prefix + junk + b"\xff"  # never valid UTF-8
    return Case("not UTF-8", ("--config", FILE), content, (FILE, "UTF-8"))


@st.composite
def deep_or_recursive(draw):
    depth = draw(st.integers(33, 400))
    kind = draw(st.sampled_from(["list", "mapping", "alias", "laughs"]))
    if kind == "list":
        text = "name: x\nspace: {depth: " + "[" * depth + "]" * depth + "}\n"
    elif kind == "mapping":
        text = "name: x\ntask: {params: " + "{a: " * depth + "1" + "}" * depth + "}\n"
    elif kind == "alias":
        text = "name: x\ntask: {params: {loop: &a [*a]}}\n"
    else:  # aliases expanding to far more values than the file holds
        lines = ["name: x", "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
        for i in range(1, draw(st.integers(6, 9))):
            lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
        text = "\n".join(lines) + "\n"
    return Case("deep or recursive", ("--config", FILE), text.encode(), (FILE,))


@st.composite
def bad_path(draw):
    kind = draw(st.sampled_from(["directory", "loop", "fifo", "proc", "large", "missing", "name"]))
    if kind == "name":  # not a file here, and no shipped sweep has this name
        text = draw(
            st.text(st.characters(blacklist_categories=("Cs",)), max_size=300).filter(
                lambda t: "/" not in t and t.removesuffix(".yaml") not in shipped_sweeps()
            )
        )
        assume(not os.path.lexists(text) and not text.startswith("-"))
        return Case("no such sweep", ("--config", text), None, (repr(text),))
    if kind == "missing":
        text = "missing/" + draw(words) + ".yaml"
        return Case("no such file", ("--config", text), None, (repr(text),))
    if kind == "proc":
        assume(os.path.exists("/proc/self/mem"))
        return Case("unreadable", ("--config", "/proc/self/mem"), None, ("'/proc/self/mem'",))
    if kind == "large":
        content = b"name: x\n" + b"#" * 1_000_001
        return Case("too large", ("--config", FILE), content, (FILE,))
    return Case(f"special path: {kind}", ("--config", Place(kind)), None, (Place(kind),))


@st.composite
def bad_override(draw):
    kind = draw(st.sampled_from(["syntax", "empty part", "yaml", "not a section", "unknown"]))
    if kind == "syntax":
        text = draw(st.one_of(words, st.just(""), words.map(lambda w: f" ={w}")))
        return Case("--set syntax", (f"--set={text}",), None, (repr(text),))
    if kind == "empty part":
        key = draw(st.sampled_from(["trainer..max_epochs", ".name", "trainer.", "a. .b"]))
        return Case("--set syntax", (f"--set={key}=1",), None, (key,))
    if kind == "yaml":
        value = draw(st.sampled_from(["[1", "{a", "'x", '"x', "a: b: c", "- a\nb", "*x", "&"]))
        return Case("--set bad YAML", (f"--set=trainer.seed={value}",), None, (repr(value),))
    if kind == "not a section":
        key = draw(
            st.sampled_from(
                ["name", "trainer.max_epochs", "space.precision", "storage_path", "search.seed"]
            )
        )
        return Case("--set not a section", (f"--set={key}.{draw(words)}=1",), None, (key,))
    section = draw(st.sampled_from([s for s in SECTIONS if s and not s.startswith("space")]))
    leaf = draw(words.filter(lambda w: w not in SECTIONS[section]))
    return Case("--set unknown field", (f"--set={section}.{leaf}=1",), None, (leaf,))


MAIN_OPTIONS = [o for a in build_parser()._actions for o in a.option_strings]
REPORT_OPTIONS = [o for a in build_report_parser()._actions for o in a.option_strings]


@st.composite
def bad_arguments(draw):
    kind = draw(st.sampled_from(["unknown", "missing value", "positional"]))
    if kind == "unknown":
        flag = "--" + draw(words.map(lambda w: w.replace("_", "-")))
        assume(not any(o.startswith(flag) for o in MAIN_OPTIONS))  # argparse takes prefixes
        return Case("unknown option", (flag,), None, (flag,))
    if kind == "missing value":
        flag = draw(st.sampled_from(["--config", "--set", "--address", "--storage-path"]))
        return Case("option without value", (flag,), None, (flag,))
    word = draw(words.filter(lambda w: w != "report"))
    return Case("stray argument", ("--dry-run", word), None, (word,))


@st.composite
def report_arguments(draw):
    sub = draw(st.sampled_from(["no name", "format", "unknown", "name"]))
    if sub == "no name":
        return Case("report arguments", ("report",), None, ("experiment",))
    if sub == "format":
        fmt = draw(words.filter(lambda w: w not in ("table", "csv", "json", "markdown")))
        return Case("report arguments", ("report", "x", "--format", fmt), None, (repr(fmt),))
    if sub == "unknown":
        flag = "--" + draw(words)
        assume(not any(o.startswith(flag) for o in REPORT_OPTIONS))
        return Case("report arguments", ("report", "x", flag), None, (flag,))
    name = draw(BAD_NAMES)
    return Case("report unsafe name", ("report", "--", name), None, (repr(name),))


@st.composite
def tracking_uri(draw):
    trackable = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks")
    uri = draw(
        st.one_of(
            st.sampled_from(["http://127.0.0.1:9", "ftp://x", "file:///tmp/x", "mlruns"]),
            words.filter(lambda w: w not in trackable).map(lambda w: f"{w}://host"),
            st.integers(1, 65535).map(lambda port: f"http://[::1:{port}"),
        )
    )
    argv = ("report", "x", "--tracking-uri", uri)
    return Case("report tracking URI", argv, None, (repr(uri),))


CATEGORIES = [
    unknown_key(),
    wrong_value(),
    non_finite_number(),
    low_not_below_high(),
    bad_enum(),
    bad_name(),
    too_many_trials(),
    broken_yaml(),
    not_a_mapping(),
    empty_file(),
    non_text_key(),
    not_utf8(),
    deep_or_recursive(),
    bad_path(),
    bad_override(),
    bad_arguments(),
    report_arguments(),
    tracking_uri(),
]

# Each family of cases is drawn about as often as any other.
BAD_INPUT = st.sampled_from(CATEGORIES).flatmap(lambda family: family)


# --- running --------------------------------------------------------------------------


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``python -m versatil.sweep ARGV``, in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_main(main, argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Special paths, by name; the CLI runs in an empty directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "directory").mkdir()
    (tmp_path / "loop").symlink_to("loop")
    os.mkfifo(tmp_path / "fifo")  # never opened: a FIFO with no writer would block
    return {name: str(tmp_path / name) for name in ("directory", "loop", "fifo")}


def test_the_base_sweep_is_valid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_bytes(dump(BASE))
    code, out, err = run_cli(["--config", "base.yaml", "--dry-run"])
    assert (code, err) == (0, ""), err
    assert "sweep 'fuzz': 2 trials" in out


def test_every_bad_input_is_one_clear_message_and_exit_status_2(places):
    seen: dict[Case, None] = {}
    categories: dict[str, int] = {}
    sweep_file = Path(tempfile.mkdtemp(dir=".")) / "sweep.yaml"

    @settings(
        max_examples=1500,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=BAD_INPUT)
    def check(case: Case) -> None:
        paths = {**places, "file": str(sweep_file)}

        def text(part: str | Place) -> str:
            return paths[part.name] if isinstance(part, Place) else part

        if case.content is not None:
            sweep_file.write_bytes(case.content)
        argv = [text(arg) for arg in case.argv]
        if argv[0] != "report":
            argv.append("--dry-run")
        code, out, err = run_cli(argv)
        shown = f"argv={argv!r} content={case.content[:300] if case.content else None!r}\n{err}"
        assert code == 2, shown + out[-500:]
        assert "Traceback" not in out + err, shown
        assert out == "", shown + out[-500:]
        if err.startswith("error: "):  # ours: one line
            assert err.count("\n") == 1, shown
        else:  # argparse's: the usage, then one line
            assert err.splitlines()[-1].startswith("python -m versatil.sweep"), shown
            assert ": error: " in err.splitlines()[-1], shown
        needles = [text(n) for n in case.needles]
        assert any(n in err for n in needles), f"none of {needles} named in: {shown}"
        seen[case] = None
        categories[case.category] = categories.get(case.category, 0) + 1

    check()
    tally = ", ".join(f"{name}: {n}" for name, n in sorted(categories.items()))
    print(f"\n{len(seen)} distinct bad inputs, each exit 2 with one message ({tally})")
    assert len(seen) >= MIN_CASES, tally
    assert len(categories) >= 25, tally


@pytest.mark.parametrize(
    "argv",
    [
        ["--storage-path", "ftp://host/sweeps", "--dry-run"],
        ["--set", "storage_path=http://host/sweeps", "--dry-run"],
        ["report", "quickstart", "--storage-path", "ftp://host/sweeps"],
        ["sync", "quickstart", "--storage-path", "ftp://host/sweeps"],
        ["confirm", "quickstart", "--storage-path", "ftp://host/sweeps"],
        ["compress", "quickstart", "--storage-path", "ftp://host/sweeps"],
    ],
)
def test_a_uri_no_file_system_serves_is_refused_never_a_local_directory_named_after_it(
    argv, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(argv)
    assert code == 2 and out == "", err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "URI, which versatil cannot store results on" in err and "host/sweeps'" in err
    assert "shared mount" in err and "s3://, gs://" in err
    assert list(tmp_path.iterdir()) == []  # nothing written, no "ftp:" directory


@pytest.mark.parametrize(
    "argv",
    [
        ["--storage-path", "s3://my-bucket/sweeps"],
        ["report", "quickstart", "--storage-path", "s3://my-bucket/sweeps"],
        ["compress", "quickstart", "--storage-path", "s3://my-bucket/sweeps"],
    ],
)
def test_object_storage_without_an_mlflow_server_asks_for_one(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(argv)
    assert code == 2 and out == "", err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "'s3://my-bucket/sweeps' is on object storage" in err, err
    assert "--tracking-uri http://HOST:PORT" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [[], ["sync", "quickstart"], ["report", "quickstart"]])
def test_credentials_in_a_storage_uri_are_refused_unechoed(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli([*command, "--storage-path", "s3://AKIA:hush@bucket/x"])
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "'s3://bucket/x' carries credentials in the URI" in err, err
    assert "hush" not in err and "AKIA" not in err


def test_a_bucketless_uri_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["--storage-path", "s3:///sweeps", "--dry-run"])
    assert (code, out) == (2, "")
    assert "storage_path: 's3:///sweeps' names no bucket; give s3://BUCKET/PREFIX" in err, err


def test_resume_and_auto_resume_together_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["--resume", "--auto-resume", "--dry-run"])
    assert (code, out) == (2, "")
    assert "argument --auto-resume: not allowed with argument --resume" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [[], ["report", "quickstart"], ["compress", "quickstart"]])
def test_an_unreachable_mlflow_tracking_uri_is_named_as_the_variable(
    command, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # discard: nothing listens
    code, out, err = run_cli(command)
    assert (code, out) == (2, "") and "Traceback" not in err, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "MLFLOW_TRACKING_URI: no MLflow server answers at 'http://127.0.0.1:9'" in err, err
    assert "unset MLFLOW_TRACKING_URI to use the embedded SQLite store" in err, err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--tracking-uri", "ftp://flag"], "--tracking-uri: 'ftp://flag'"),
        (["--set", "mlflow.tracking_uri=ftp://file"], "mlflow.tracking_uri: 'ftp://file'"),
        (["report", "quickstart", "--tracking-uri", "ftp://flag"], "--tracking-uri: 'ftp://flag'"),
    ],
)
def test_an_option_or_the_sweep_file_comes_before_mlflow_tracking_uri(
    argv, named, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "ftp://variable")
    code, out, err = run_cli(argv)
    assert (code, out) == (2, ""), err
    assert f"{named} is not a tracking URI MLflow can use" in err, err
    assert "variable" not in err
