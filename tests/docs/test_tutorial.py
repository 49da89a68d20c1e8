"""The tutorial (docs/tutorial.md): its example trains through a sweep, and the page cannot drift.

- The example in ``examples/own_model/`` runs through the real command, in this process, on
  the session's Ray cluster, on a tiny budget (its sweep file with one epoch, fewer points,
  one learning rate, eager, no re-timing): the answer's lines are printed, and the best
  checkpoint reloads with plain Lightning and with ``load_for_inference``.
- The page quotes the example's files whole: each file is the page's blocks marked
  ``<!-- quote: PATH -->``, in order, with nothing but blank lines between them.
- The page includes the outputs of the example (``docs/outputs/*.txt``, written by
  ``docs/regenerate.py``; ``test_outputs.py`` checks them all), and every trial id, speedup,
  accuracy and time the page's prose quotes is in the sweep's output.
"""

from __future__ import annotations

import datetime
import importlib.util
import io
import re
import sys
import types
from pathlib import Path

import pytest

from tests.docs.test_docs import ROOT, fenced_blocks

PAGE = ROOT / "docs" / "tutorial.md"
EXAMPLE = ROOT / "examples" / "own_model"
SWEEP = EXAMPLE / "sweep.yaml"
SWEEP_OUTPUT = ROOT / "docs" / "outputs" / "tutorial.txt"
QUOTE = re.compile(r"^quote:\s*(\S+)$")
INCLUDE = re.compile(r'^--8<-- "outputs/([\w-]+)\.txt"$', re.MULTILINE)
# What the prose quotes of the run: trial ids, numbers of two decimals and more (speedups,
# accuracies, compile times), and durations such as the count line's ``46.1s``.
QUOTED = (
    re.compile(r"\b[0-9a-f]{5}_\d{5}\b"),
    re.compile(r"(?<![\w.])\d+\.\d{2,}(?![\d.])"),
    re.compile(r"(?<![\w.])\d+\.\ds\b"),
)
# The header regenerate.py writes: the command, then the date, the machine and the time.
HEADER = re.compile(
    r"^\$ (?P<command>.+?)  # (?P<date>\d{4}-\d{2}-\d{2}), (?P<cpus>\d+) CPUs\b.*"
    r", torch (?P<torch>\S+), (?:no GPU|GPU .+); (?P<wall>\d+\.\d) s$"
)


def load_regenerate() -> types.ModuleType:
    path = ROOT / "docs" / "regenerate.py"
    spec = importlib.util.spec_from_file_location("docs_regenerate", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


regenerate = load_regenerate()


def quoted_files() -> dict[Path, list[str]]:
    """The page's quoted blocks, by the file each quotes, in page order."""
    quotes: dict[Path, list[str]] = {}
    for block in fenced_blocks(PAGE):
        match = QUOTE.match(block.annotation)
        if match:
            quotes.setdefault(ROOT / match.group(1), []).append(block.text)
    return quotes


def prose(page: str) -> str:
    """The page without its fenced blocks: the words that quote the output."""
    return re.sub(r"^```.*?^```$", "", page, flags=re.MULTILINE | re.DOTALL)


# -- the page against the example's files -------------------------------------------------


def test_every_file_of_the_example_is_quoted():
    files = {p for p in EXAMPLE.iterdir() if p.is_file() and p.suffix in {".py", ".yaml"}}
    assert files, f"no example files in {EXAMPLE}"
    assert set(quoted_files()) == files


@pytest.mark.parametrize(
    "path", sorted(quoted_files()), ids=lambda path: str(path.relative_to(ROOT))
)
def test_the_page_quotes_the_file_whole_and_in_order(path):
    text = path.read_text(encoding="utf-8")
    position = 0
    for number, block in enumerate(quoted_files()[path], start=1):
        found = text.find(block, position)
        assert found >= 0, (
            f"block {number} quoting {path.relative_to(ROOT)} is not in the file "
            f"(after what the blocks before it quote):\n{block}"
        )
        gap = text[position:found]
        assert not gap.strip(), f"the page leaves out of {path.name}, before block {number}:\n{gap}"
        position = found + len(block)
    assert not text[position:].strip(), f"the page leaves out the end of {path.name}"


# -- the outputs the page includes --------------------------------------------------------


def test_the_page_includes_the_outputs_of_the_example():
    included = INCLUDE.findall(PAGE.read_text(encoding="utf-8"))
    example = [o.name for o in regenerate.OUTPUTS if set(o.files) & {str(SWEEP.relative_to(ROOT))}]
    assert example and sorted(included) == sorted(example)


def test_the_sweep_output_holds_the_whole_answer():
    text = SWEEP_OUTPUT.read_text(encoding="utf-8")
    for pattern in (
        r"^confirm: re-timing \d+ settings",
        r"^\s+trial\s+precision\s+compile_mode\s+lr\s+val_acc\s",
        r"^\* the recommended trial, P other trials on the Pareto front",
        r"^ceiling of cpu",
        r"^setting\s+samples_per_sec\s",
        r"Recommended: .+\(trial [0-9a-f]{5}_\d{5}\)\.$",
        r"^8 trials in [\d.]+s: 8 completed$",
        r"^best: [0-9a-f]{5}_\d{5} val_acc=",
        r"^best checkpoint: /\S+/checkpoint_\d+$",
        r"^results: /\S+$",
        r"^plots: /\S+\.png, /\S+\.png$",
        r"^mlflow: experiment 'own-model', parent run \w+ at sqlite:///",
    ):
        assert re.search(pattern, text, re.MULTILINE), f"{pattern!r} not in {SWEEP_OUTPUT.name}"


def test_the_prose_quotes_only_what_the_sweep_printed():
    text = prose(PAGE.read_text(encoding="utf-8"))
    output = SWEEP_OUTPUT.read_text(encoding="utf-8")
    quoted = {value for pattern in QUOTED for value in pattern.findall(text)}
    assert quoted, "the page quotes nothing of its output"
    missing = sorted(value for value in quoted if value not in output)
    assert not missing, (
        f"docs/tutorial.md quotes {missing}, which {SWEEP_OUTPUT.name} does not hold: "
        "after `python docs/regenerate.py tutorial`, quote the new run"
    )


def test_the_header_regex_reads_what_regenerate_writes():
    output = regenerate.OUTPUTS[-1]
    when = datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)
    about = "2 CPUs (Some CPU), Linux x86_64, torch 2.13.0+cpu, no GPU"
    match = HEADER.match(regenerate.header(output, when, about, 47.04))
    assert match and match["date"] == "2026-12-05" and match["cpus"] == "2"
    assert match["torch"] == "2.13.0+cpu" and match["wall"] == "47.0"


def test_regenerate_leaves_out_what_would_redirect_the_sweep(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    monkeypatch.setenv("CI", "true")
    env = regenerate.environment()
    assert not {"MLFLOW_TRACKING_URI", "RAY_ADDRESS", "CI"} & env.keys()
    assert env["PYTHONUNBUFFERED"] == "1"


# -- the example, trained through the sweep ------------------------------------------------


@pytest.mark.slow  # a sweep of 2 trials on the session's Ray cluster
def test_the_example_trains_through_the_sweep_command(ray_cluster, mlflow_sqlite, tmp_path):
    import torch

    from versatil.cli_common import run_main
    from versatil.inference import load_for_inference
    from versatil.sweep.cli.main import main

    out = io.StringIO()
    argv = [
        "--config",
        str(SWEEP),
        "--storage-path",
        str(tmp_path),  # its MLflow store is mlflow_sqlite's
        "--set",
        "trainer.max_epochs=1",
        "--set",
        "task.params.n_train=2048",
        "--set",
        "space.lr=0.01",
        # Eager only: a compiled trial compiles cold on each node (30 s and more on a busy
        # 2-core machine); docs/outputs/tutorial.txt shows the module's compiled trials.
        "--set",
        "space.compile_mode=[none]",
        "--no-confirm",
    ]
    code = run_main(lambda args: main(args, out=out), argv)
    text = out.getvalue()
    assert code == 0, text[-3000:]
    assert re.search(r"^2 trials in [\d.]+s: 2 completed$", text, re.MULTILINE), text[-3000:]
    assert re.search(r"^\s+trial\s+precision\s+compile_mode\s+lr\s+val_acc\s", text, re.MULTILINE)
    assert re.search(r"Recommended: .+\(trial \w+\)\.$", text, re.MULTILINE), text[-3000:]
    assert re.search(r"^best: \w+ val_acc=0\.\d+ precision=", text, re.MULTILINE)
    assert "mlflow: experiment 'own-model', parent run " in text
    assert mlflow_sqlite in text
    checkpoint = Path(re.search(r"^best checkpoint: (.+)$", text, re.MULTILINE).group(1))
    results = Path(re.search(r"^results: (.+)$", text, re.MULTILINE).group(1))
    plots = re.search(r"^plots: (.+)$", text, re.MULTILINE).group(1).split(", ")
    assert checkpoint.parent.parent == results and results.parent == tmp_path
    assert len(plots) == 2 and all(Path(plot).is_file() for plot in plots)

    from examples.own_model.classifier import Classifier

    model = Classifier.load_from_checkpoint(checkpoint / "last.ckpt")
    assert model.hparams.hidden == 64 and model.hparams.lr == 0.01
    points = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    assert load_for_inference(checkpoint)(points).shape == (8, 4)
    assert model(points).shape == (8, 4)
