"""GSM8K: gold numbers, the numeric scorer, and the bundled test split as queries."""

from __future__ import annotations

import pytest

from genmem.envs.gsm8k import GSM8K_TEST, extract_number, gold_number, gsm8k_queries, score_gsm8k


def test_gold_number_is_what_follows_the_marks() -> None:
    assert gold_number("She pays 3*4=12.\n#### 1,200") == "1200"
    with pytest.raises(ValueError, match="####"):
        gold_number("no marker here")


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The answer is 18.", "18"),
        ("$1,250.50 in total", "1250.5"),
        ("from 3 to -4", "-4"),
        ("5 apples cost 10.00", "10"),
        ("no digits at all", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_number_takes_the_last_number(text: str | None, number: str | None) -> None:
    assert extract_number(text) == number


def test_score_is_numeric_equality() -> None:
    assert score_gsm8k("So she earns $18.", "18") == 1.0
    assert score_gsm8k("18.0", 18) == 1.0
    assert score_gsm8k("1,200 dollars", "1200") == 1.0
    assert score_gsm8k("17", "18") == 0.0
    assert score_gsm8k(None, "18") == 0.0
    assert score_gsm8k("18", "not a number") == 0.0


def test_test_split_is_bundled_with_its_license() -> None:
    assert GSM8K_TEST.is_file() and (GSM8K_TEST.parent / "LICENSE").is_file()
    queries = gsm8k_queries(limit=3, offset=2)
    assert [q["id"] for q in queries] == ["test-2", "test-3", "test-4"]
    assert all(q["query"].strip() and extract_number(q["reference"]) for q in queries)
    assert len(gsm8k_queries()) == 1319
