"""The docs' outputs were made with the code's settings: rounds and the race's alpha as today.

An output regenerated before a default changed (the re-timing's rounds, say) shows a number
the code no longer gives; this fails until ``python docs/regenerate.py`` runs again. A
command that sets one of them (``--set confirm.rounds=12``) is held to its own value.
"""

from __future__ import annotations

import re

import pytest

from tests.docs.test_outputs import BY_NAME
from versatil.sweep.config.sections import ConfirmSection, RaceSection

# What an output says of each setting, and the setting's field under --set.
SAID = {
    "confirm.rounds": re.compile(r"in (\d+) paired, interleaved rounds on one device"),
    "search.race.rounds": re.compile(r"race: screening .* \(at most (\d+);"),
    "search.race.alpha": re.compile(r"family-wise error ([\d.]+)\)"),
}
DEFAULTS = {
    "confirm.rounds": ConfirmSection().rounds,
    "search.race.rounds": RaceSection().rounds,
    "search.race.alpha": RaceSection().alpha,
}


def expected(command: str, field: str) -> float:
    """The value the command runs with: its own ``--set FIELD=V``, else the code's default."""
    found = re.search(rf"--set '?{re.escape(field)}=([\d.]+)", command)
    return float(found.group(1)) if found else float(DEFAULTS[field])


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_output_shows_the_settings_the_code_runs_with(name):
    output = BY_NAME[name]
    text = output.path.read_text(encoding="utf-8")
    for field, said in SAID.items():
        for value in said.findall(text):
            assert float(value) == expected(output.command, field), (
                f"docs/outputs/{name}.txt shows {field} {value}; the code runs "
                f"{expected(output.command, field):g}: run python docs/regenerate.py {name}"
            )


def test_the_check_reads_the_settings_an_output_shows():
    line = "confirm: re-timing 2 settings (a, b) in 7 paired, interleaved rounds on one device"
    assert SAID["confirm.rounds"].findall(line) == ["7"]
    assert expected("python -m versatil.sweep --set confirm.rounds=7", "confirm.rounds") == 7
    assert expected("python -m versatil.sweep", "confirm.rounds") == ConfirmSection().rounds
