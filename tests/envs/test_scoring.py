"""Scorers: QA normalisation / EM / F1, multiple-choice letters, MATH final answers, and the
contrastive outcome reward. Hand-computed cases, properties, and refused input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genmem.envs.scoring import (
    DEFAULT_PARTIAL_BONUS,
    QAScore,
    choice_letter,
    contrastive_outcome,
    exact_match,
    extract_boxed,
    math_answer,
    math_equal,
    normalize_answer,
    qa_scores,
    score_math,
    score_multiple_choice,
    token_f1,
)

# -- open QA -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an   apple, a pear ", "apple pear"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
        ("1,000", "1000"),
        ("U.S.A.", "usa"),
        ("the", ""),
        ("", ""),
        ("Tab\tand\nnewline", "tab and newline"),
    ],
)
def test_normalize_answer(text: str, normal: str) -> None:
    assert normalize_answer(text) == normal


def test_exact_match_ignores_case_punctuation_and_articles() -> None:
    assert exact_match("The Beatles.", "beatles") == 1.0
    assert exact_match("$1,000", "1000") == 1.0  # commas and $ are punctuation
    assert exact_match("Beatles band", "beatles") == 0.0


def test_token_f1_by_hand() -> None:
    # "cat sat on mat" vs "cat on mat": 3 shared tokens, P = 3/4, R = 1.
    assert token_f1("the cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)
    # repeated tokens count as often as both sides have them: P = 1/3, R = 1/2
    assert token_f1("red red blue", "red green") == pytest.approx(0.4)
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("Paris, France", "paris france") == 1.0


def test_token_f1_yes_no_rule() -> None:
    # HotpotQA: a yes/no/noanswer side that differs from the other side earns nothing.
    assert token_f1("no it is not", "no") == 0.0
    assert token_f1("no", "no it is not") == 0.0
    assert token_f1("yes", "no") == 0.0
    assert token_f1("Yes.", "yes") == 1.0
    assert token_f1("noanswer", "no answer") == 0.0
    # plain SQuAD F1 would give 0.4 here; ordinary spans still share credit:
    assert token_f1("no idea at all", "an idea") == pytest.approx(0.4)


def test_token_f1_when_normalisation_leaves_nothing() -> None:
    assert token_f1("the", "a") == 1.0  # both empty: the same (non-)answer
    assert token_f1("the", "paris") == 0.0
    assert token_f1("paris", "...") == 0.0


def test_qa_scores_take_the_best_answer() -> None:
    score = qa_scores("Barack Obama", ["Obama", "Barack Hussein Obama"])
    # vs "obama": P = 1/2, R = 1 -> 2/3; vs the full name: P = 1, R = 2/3 -> 0.8.
    assert (score.em, score.f1) == (0.0, pytest.approx(0.8))
    assert qa_scores("obama", ("Barack Obama", "Obama")) == QAScore(em=1.0, f1=1.0)
    # "it was 1000 years" vs "1000 years": P = 2/4, R = 1 -> 2/3
    commas = qa_scores("It was 1,000 years", "1000 years")
    assert (commas.em, commas.f1) == (0.0, pytest.approx(2 / 3))
    assert qa_scores("1,000", "1000").em == 1.0


@pytest.mark.parametrize("prediction", [None, "", "   \n"])
def test_qa_scores_missing_prediction_is_zero(prediction: str | None) -> None:
    assert qa_scores(prediction, ["anything", ""]) == QAScore(em=0.0, f1=0.0)


@pytest.mark.parametrize(
    ("prediction", "answers", "match"),
    [
        ("x", [], "empty"),
        ("x", None, "string or a list"),
        ("x", {"a"}, "string or a list"),
        ("x", ["ok", 3], r"answers\[1\]"),
        (42, "42", "prediction must be a string"),
    ],
)
def test_qa_scores_refuses_bad_input(prediction, answers, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        qa_scores(prediction, answers)


def test_string_scorers_refuse_non_strings() -> None:
    with pytest.raises(ValueError, match="text must be a string"):
        normalize_answer(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gold must be a string"):
        token_f1("a", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prediction must be a string"):
        exact_match(b"a", "a")  # type: ignore[arg-type]


_words = st.lists(
    st.sampled_from(["the", "a", "cat", "dog", "Paris", "yes", "no", "1,000", "red!", "x"]),
    max_size=6,
).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(_words, _words)
def test_f1_properties(a: str, b: str) -> None:
    f1 = token_f1(a, b)
    assert 0.0 <= f1 <= 1.0
    assert f1 == pytest.approx(token_f1(b, a))  # symmetric
    assert exact_match(a, b) <= f1  # an exact match is a full F1
    assert token_f1(a, a) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_normalize_answer_is_idempotent(text: str) -> None:
    once = normalize_answer(text)
    assert normalize_answer(once) == once
    assert once == once.strip() and "  " not in once


@settings(max_examples=100, deadline=None)
@given(_words.filter(str.strip), st.lists(_words, min_size=1, max_size=4))
def test_qa_scores_is_the_max_over_answers(prediction: str, answers: list[str]) -> None:
    score = qa_scores(prediction, answers)
    assert score.f1 == max(token_f1(prediction, g) for g in answers)
    assert score.em == max(exact_match(prediction, g) for g in answers)


# -- multiple choice -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("(B)", "B"),
        ("B", "B"),
        (" C. ", "C"),
        ("**D**", "D"),
        ("Answer: C", "C"),
        ("answer:(a) is wrong... Answer: (C)", "C"),
        ("the answer is D.", "D"),
        ("**Answer:** B", "B"),
        ("The correct answer is **A** because", "A"),
        ("The answer is: option B", "B"),
        ("answer choice (B)", "B"),
        ("Final answer: $\\boxed{C}$", "C"),
        ("so we get \\boxed{\\text{D}}", "D"),
        ("Option A is tempting, but the answer is C, not option A.", "C"),
        ("A) 12 kelvin, since the gas expands", "A"),
        ("I would go with option D", "D"),
        ("Both (A) and (C) fit the data, but (C) is simpler", "C"),
        ("A good approach is to compare the energies.", None),  # the article is not option A
        ("The answer is Argon", None),
        ("The answer is a noble gas", None),
        ("I cannot tell", None),
        ("", None),
        (None, None),
    ],
)
def test_choice_letter(text: str | None, letter: str | None) -> None:
    assert choice_letter(text) == letter


def test_score_multiple_choice() -> None:
    assert score_multiple_choice("The answer is (B).", "B") == 1.0
    assert score_multiple_choice("The answer is (B).", "(b)") == 1.0
    assert score_multiple_choice("The answer is (B).", "C") == 0.0
    assert score_multiple_choice(None, "A") == 0.0
    assert score_multiple_choice("no idea", "A") == 0.0


@pytest.mark.parametrize("gold", ["E", "AB", "", 1, None, "option A"])
def test_score_multiple_choice_refuses_bad_gold(gold) -> None:
    with pytest.raises(ValueError, match="gold_letter"):
        score_multiple_choice("A", gold)


def test_choice_letter_refuses_non_strings() -> None:
    with pytest.raises(ValueError, match="text must be a string"):
        choice_letter(3)  # type: ignore[arg-type]


# -- MATH final answers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("so $\\boxed{5}$.", "5"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{a^{2}+\\sqrt{b_{1}}}", "a^{2}+\\sqrt{b_{1}}"),  # nested braces
        ("first \\boxed{1}, then \\boxed{ 2 }", "2"),  # the last box, stripped
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces do not nest
        ("\\fbox{7}", "7"),
        ("\\boxed 5$ done", "5"),
        ("\\boxed{1 + \\frac{2}{3}", None),  # never closes (truncated)
        ("\\boxed", None),
        ("no box here", None),
        (None, None),
    ],
)
def test_extract_boxed(text: str | None, content: str | None) -> None:
    assert extract_boxed(text) == content


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("We get \\boxed{12}. Check: 13", "12"),
        ("The final answer is $\\frac{3}{4}$.", "$\\frac{3}{4}$"),
        ("So the answer is 12 apples. Then 7 more", "12"),
        ("Answer: 2\\sqrt{5}", "2\\sqrt{5}"),
        ("first 3, then 1,250.5 in total", "1,250.5"),
        ("nothing numeric", None),
        ("", None),
    ],
)
def test_math_answer(text: str, answer: str | None) -> None:
    assert math_answer(text) == answer


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("\\boxed{\\dfrac{1}{2}}", "0.5"),
        ("\\boxed{\\frac12}", "\\frac{1}{2}"),
        ("\\boxed{1/2}", "\\tfrac{1}{2}"),
        ("\\boxed{.5}", "1/2"),
        ("\\boxed{-\\frac{3}{4}}", "-0.75"),
        ("\\boxed{\\frac{-3}{4}}", "-\\frac{3}{4}"),
        ("\\boxed{1,000}", "1000"),
        ("\\boxed{10.0}", 10),
        ("\\boxed{ 50\\% }", "50"),
        ("\\boxed{90^\\circ}", "90"),
        ("\\boxed{5\\text{ cm}}", "5"),
        ("\\boxed{x = 5}", "5"),
        ("\\boxed{{7}}", "7"),
        ("\\boxed{\\left( 1, 2 \\right)}", "(1,2)"),
        ("\\boxed{\\sqrt{2}}", "\\sqrt{2}"),
        ("\\boxed{2\\!\\sqrt{3}}.", "2\\sqrt{3}"),
        ("The answer is $12$.", "12"),
        ("It costs \\$1,250 in total.", "1250"),
        ("0.3333333", "\\frac{1}{3}"),  # within 1e-6
        ("\\boxed{3}", "Since ... we get $\\boxed{3}$."),  # gold as a full solution
    ],
)
def test_score_math_matches(prediction: str, gold: str | int) -> None:
    assert score_math(prediction, gold) == 1.0


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("\\boxed{0.333}", "\\frac{1}{3}"),  # off by more than 1e-6
        ("\\boxed{2\\sqrt{5}}", "5"),  # not read as the number 5 or 2
        ("\\boxed{\\frac{1}{0}}", "0"),
        ("\\boxed{1,2}", "12"),  # a list, not a thousands separator
        ("\\boxed{x}", "y"),
        ("\\boxed{}", "0"),
        ("no answer", "3"),
        (None, "3"),
        ("", "3"),
    ],
)
def test_score_math_mismatches(prediction: str | None, gold: str) -> None:
    assert score_math(prediction, gold) == 0.0


def test_math_equal_is_symmetric_on_examples() -> None:
    pairs = [("\\frac{1}{2}", "0.5"), ("(1,2)", "\\left(1,2\\right)"), ("3", "4")]
    for a, b in pairs:
        assert math_equal(a, b) == math_equal(b, a)
    assert not math_equal("", "")


@pytest.mark.parametrize(
    ("gold", "match"), [(None, "gold must be"), (True, "gold must be"), ("$ $", "empty")]
)
def test_score_math_refuses_bad_gold(gold, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        score_math("\\boxed{1}", gold)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**6), 10**6), st.integers(1, 999))
def test_score_math_fractions_equal_their_decimals(num: int, den: int) -> None:
    value = num / den
    assert score_math(f"\\boxed{{\\frac{{{num}}}{{{den}}}}}", f"{value:.9f}") == 1.0
    assert score_math(f"so the answer is {num}/{den}.", f"{value:.9f}") == 1.0
    assert score_math(f"\\boxed{{{num + 1}}}", str(num)) == 0.0


# -- contrastive outcome -------------------------------------------------------------------------


def test_contrastive_outcome_binary_table() -> None:
    # Eq. 8 / Eq. 29 with 0/1 scores.
    assert contrastive_outcome(1, 0) == 1.0
    assert contrastive_outcome(0, 1) == -1.0
    assert contrastive_outcome(1, 1) == DEFAULT_PARTIAL_BONUS
    assert contrastive_outcome(0, 0) == 0.0
    assert contrastive_outcome(True, True, bonus=0.2) == pytest.approx(0.2)
    assert contrastive_outcome(1.0, 1.0, bonus=0) == 0.0


def test_contrastive_outcome_graded_scores() -> None:
    assert contrastive_outcome(0.75, 0.25) == pytest.approx(0.5)
    assert contrastive_outcome(0.9, 0.9) == 0.0  # neither run reached a full score
    assert contrastive_outcome(0.9, 0.8, bonus=0.5, success_threshold=0.8) == pytest.approx(0.6)
    assert contrastive_outcome(0.9, 0.7, bonus=0.5, success_threshold=0.8) == pytest.approx(0.2)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(0, 2),
)
def test_contrastive_outcome_range(a: float, b: float, bonus: float) -> None:
    r = contrastive_outcome(a, b, bonus)
    assert -1.0 <= r <= 1.0 + bonus
    assert math.isclose(r - contrastive_outcome(b, a, bonus), 2 * (a - b), abs_tol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"with_memory": 1.5, "without_memory": 0}, "with_memory=1.5 is outside"),
        ({"with_memory": 0, "without_memory": -0.1}, "without_memory=-0.1 is outside"),
        ({"with_memory": float("nan"), "without_memory": 0}, "outside"),
        ({"with_memory": "1", "without_memory": 0}, "must be a number"),
        ({"with_memory": None, "without_memory": 0}, "must be a number"),
        ({"with_memory": 1, "without_memory": 1, "bonus": -0.1}, "negative"),
        ({"with_memory": 1, "without_memory": 1, "bonus": float("inf")}, "finite"),
        ({"with_memory": 1, "without_memory": 1, "bonus": True}, "finite"),
        ({"with_memory": 1, "without_memory": 1, "success_threshold": 0}, "every run"),
        ({"with_memory": 1, "without_memory": 1, "success_threshold": 2}, "outside"),
    ],
)
def test_contrastive_outcome_refuses_bad_input(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        contrastive_outcome(**kwargs)
