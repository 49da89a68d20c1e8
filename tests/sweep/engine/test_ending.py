"""The one end of a sweep: its rows judged once, and once more with a re-timing's rounds."""

from __future__ import annotations

from typing import Any

import pytest

import versatil.sweep.results.judgement as judgement_module
from tests.sweep.results.test_confirmation import ROWS, document
from versatil.sweep.config.load import validate_sweep
from versatil.sweep.config.planning import make_plan
from versatil.sweep.engine.ending import judge_end
from versatil.sweep.results.verdict import make_verdict

RATES = {
    "32 + eager": [100.0, 101.0, 99.0, 100.0, 100.5, 99.5],
    "bf16-mixed + eager": [150.0, 151.0, 149.0, 150.0, 150.5, 149.5],
    "32 + default": [101.0, 100.0, 100.0, 99.0, 100.0, 101.0],
}


@pytest.fixture
def verdicts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every verdict the judgement makes, in order (the real one, recorded)."""
    made: list[Any] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(make_verdict(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(judgement_module, "make_verdict", recording)
    return made


def test_an_end_without_a_re_timing_makes_one_verdict(verdicts: list[Any]) -> None:
    config = make_plan(validate_sweep({"name": "x", "objective": {"metric": "val_loss"}}))
    concluded = judge_end(config, ROWS, [])
    assert len(verdicts) == 1
    assert concluded.judgement.verdict is verdicts[0]
    assert concluded.confirmation is None


def test_a_re_timed_end_makes_its_verdict_again_with_the_rounds(verdicts: list[Any]) -> None:
    config = make_plan(validate_sweep({"name": "x", "objective": {"metric": "val_loss"}}))
    asked: list[list[str]] = []

    def retime(found: list[Any]) -> dict[str, Any]:
        asked.append([c.label for c in found])
        return document(RATES)

    concluded = judge_end(config, ROWS, [], retime)
    assert asked and asked[0][0] == "32 + eager"  # the reference first
    assert len(verdicts) == 2
    final = concluded.judgement.verdict
    assert final is verdicts[1]
    assert final.recommended_setting == "bf16-mixed + eager"
    by_label = {s.label: s for s in final.settings}
    assert by_label["bf16-mixed + eager"].rounds == 6  # decided by the paired rounds


def test_a_failed_re_timing_keeps_the_one_verdict(verdicts: list[Any]) -> None:
    config = make_plan(validate_sweep({"name": "x", "objective": {"metric": "val_loss"}}))
    concluded = judge_end(config, ROWS, [], lambda found: None)
    assert len(verdicts) == 1
    assert concluded.judgement.verdict is verdicts[0]
