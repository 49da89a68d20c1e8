"""A sweep whose space has no eager fp32: its own reference, the first listed settings."""

import json

import pytest

from tests.sweep.results.test_verdict import row
from versatil.errors import ConfigError
from versatil.sweep.config.planning import make_plan
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.conclude import sweep_reference
from versatil.sweep.results.judgement import judge
from versatil.sweep.results.verdict import make_verdict, reference_objective
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.run_tags import SweepTags

# bf16-mixed is listed first but is not the slowest: bf16-true is.
ROWS = [
    row("a", "bf16-mixed", "none", 0.200, 100.0),
    row("b", "bf16-true", "none", 0.300, 60.0),
    row("c", "bf16-mixed", "default", 0.2005, 150.0),
]
LISTED = ("bf16-mixed", "none", "highest")


def config(precision):
    return SweepConfig.model_validate(
        {
            "name": "listed",
            "task": {"name": "tests.user_tasks.dict_batches:build"},
            "objective": {"metric": "val_loss", "mode": "min"},
            "space": {"precision": precision, "compile_mode": ["none", "default"]},
        }
    )


def test_the_reference_is_each_settings_axis_at_its_first_listed_value():
    assert sweep_reference(make_plan(config(["bf16-mixed", "bf16-true"]))) == LISTED
    assert sweep_reference(make_plan(config(["bf16-true", "32"]))) == ("32", "none", "highest")


def test_the_verdict_compares_with_the_listed_reference_and_says_so():
    verdict = make_verdict(ROWS, "val_loss", "min", reference=LISTED)
    assert verdict.reference.setting == LISTED and not verdict.is_baseline
    assert verdict.listed_reference
    assert verdict.text.startswith(
        "This sweep's space has no eager fp32 baseline (precision 32, compile_mode none, "
        "matmul_precision highest), so settings are compared with its reference, "
        "bf16-mixed + eager (each settings axis at its first listed value)."
    )
    assert "Recommended: bf16-mixed + default: 1.50x bf16-mixed + eager (95% CI" in verdict.text
    assert reference_objective(ROWS, "val_loss", "min", LISTED) == pytest.approx(0.200)
    # Without it (an older sweep's report), the slowest finished setting, as before.
    slowest = make_verdict(ROWS, "val_loss", "min")
    assert slowest.reference.setting == ("bf16-true", "none", "highest")
    assert not slowest.listed_reference and "slowest finished setting" in slowest.text


def test_a_listed_reference_that_did_not_finish_falls_back_to_the_slowest():
    verdict = make_verdict(ROWS[1:], "val_loss", "min", reference=LISTED)
    assert verdict.reference.setting == ("bf16-true", "none", "highest")
    assert not verdict.listed_reference


def test_the_reference_tag_round_trips_and_a_bad_one_is_named():
    judgement = judge(ROWS, [("val_loss", "min")], 0.01, reference=LISTED)
    held = {
        tags.OBJECTIVE: "val_loss",
        tags.REFERENCE: json.dumps(list(judgement.verdict.reference.setting)),
    }
    assert SweepTags.read(held).reference == LISTED
    assert SweepTags.read({tags.OBJECTIVE: "val_loss"}).reference is None
    with pytest.raises(ConfigError, match=r"versatil.reference: \['32'\] is not"):
        SweepTags.read({tags.OBJECTIVE: "val_loss", tags.REFERENCE: '["32"]'})
