"""The cost line of the local report says what its figure means, also when spot lost."""

from __future__ import annotations

import re

from localcloud.report import savings_phrase


def test_savings_read_as_a_percentage() -> None:
    assert savings_phrase(0.655, 0.7) == "65.5% saved"
    assert savings_phrase(0.0, 0.7) == "0.0% saved"


def test_a_run_that_cost_more_than_on_demand_says_how_much_and_why() -> None:
    phrase = savings_phrase(-2.78, 0.7)
    assert phrase.startswith("3.78x the on-demand run: ") and "70% discount" in phrase
    assert not re.search(r"-\d", phrase) and "saved" not in phrase
