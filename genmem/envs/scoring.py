"""Answer scorers for benchmark evaluation, and the contrastive outcome score used as a reward.

- **Open QA** (HotpotQA, 2WikiMultiHopQA, Bamboogle, MuSiQue, NQ, TriviaQA): the usual SQuAD
  answer normalisation, exact match and token F1 (paper appendix E.2, "QA F1"), taking the best
  score over a question's acceptable answers. HotpotQA's rule applies: when either side is
  ``yes``, ``no`` or ``noanswer`` after normalisation and the two differ, F1 is 0.
- **Multiple choice** (GPQA, four options): the letter A-D an answer commits to, scored 1 or 0
  (the per-example success ``b_j`` of Eq. 34).
- **MATH-style final answers**: the last ``\\boxed{...}``, else a stated final answer, else the
  last number; compared as numbers when both sides read as one, else as normalised strings.
- :func:`contrastive_outcome`: the outcome reward of Eq. 8 (Section 3) and Eq. 29 (appendix
  C.3.3), computed from two task scores.

Every scorer returns a float in [0, 1]. A missing or empty prediction scores 0 rather than
raising: a model that gave no answer got it wrong. Gold values and argument types are checked,
and a bad one raises :class:`ValueError` naming it.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from numbers import Real
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_PARTIAL_BONUS",
    "MATH_TOLERANCE",
    "QAScore",
    "choice_letter",
    "contrastive_outcome",
    "exact_match",
    "extract_boxed",
    "math_answer",
    "math_equal",
    "normalize_answer",
    "qa_scores",
    "score_math",
    "score_multiple_choice",
    "token_f1",
]

DEFAULT_PARTIAL_BONUS = 0.2
"""``alpha_partial`` of Eq. 8 / Eq. 29, the bonus when both the memory run and the memory-free run
succeed; the one value training (GRPO's outcome reward) and evaluation (the contrastive column)
both use. The paper asks for a positive bonus and gives no value. 0.2 is positive, so keeping a
success ranks above two failures, and small next to the 1 of rescuing a failed task. Kept small
on purpose: in a reported mean it adds ``0.2 x P(both succeed)`` even when memory changes
nothing, an offset a larger bonus would inflate. (In GRPO the memory-free run is shared by a
whole group, so with 0/1 scores a group's outcomes take at most two values and the bonus only
rescales their gap, which group normalisation removes; it matters for graded scores such as
F1.)"""

MATH_TOLERANCE = 1e-6
"""Absolute tolerance when two final answers both read as numbers."""


def _check_text(value: Any, name: str) -> str:
    """``value`` itself when it is a string, else ValueError."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}: {value!r}")
    return value


def _is_blank(prediction: str | None, name: str = "prediction") -> bool:
    """True for None or whitespace; ValueError for anything that is not a string."""
    if prediction is None:
        return True
    return not _check_text(prediction, name).strip()


# -- open QA -------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)
_YES_NO = frozenset({"yes", "no", "noanswer"})


class QAScore(BaseModel):
    """Exact match and token F1 of one prediction, each the best over the acceptable answers."""

    model_config = ConfigDict(frozen=True)

    em: float = Field(ge=0.0, le=1.0, description="1.0 when some answer matches exactly.")
    f1: float = Field(ge=0.0, le=1.0, description="Highest token F1 against any answer.")


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation and the articles a/an/the, collapse whitespace."""
    text = _check_text(text, "text").lower().translate(_DROP_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when both strings are equal after :func:`normalize_answer`, else 0.0."""
    pred = normalize_answer(_check_text(prediction, "prediction"))
    return float(pred == normalize_answer(_check_text(gold, "gold")))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 of the normalised strings, with HotpotQA's yes/no/noanswer rule."""
    pred = normalize_answer(_check_text(prediction, "prediction"))
    ref = normalize_answer(_check_text(gold, "gold"))
    # A yes/no question is right or wrong: "no" shares no credit with "yes" or with a span.
    if (pred in _YES_NO or ref in _YES_NO) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    if not pred_tokens or not ref_tokens:
        # Nothing left after normalisation (e.g. "the"): equal only if both are empty.
        return float(pred_tokens == ref_tokens)
    overlap = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def _answer_list(answers: str | Sequence[str]) -> list[str]:
    """Acceptable answers as a non-empty list of strings."""
    if isinstance(answers, str):
        return [answers]
    if not isinstance(answers, Sequence):
        raise ValueError(
            f"answers must be a string or a list of strings, got {type(answers).__name__}"
        )
    if not answers:
        raise ValueError("answers is empty; give at least one acceptable answer")
    for i, answer in enumerate(answers):
        _check_text(answer, f"answers[{i}]")
    return list(answers)


def qa_scores(prediction: str | None, answers: str | Sequence[str]) -> QAScore:
    """EM and F1 of ``prediction``, each maximised over the acceptable ``answers``."""
    golds = _answer_list(answers)
    if _is_blank(prediction):
        return QAScore(em=0.0, f1=0.0)
    assert prediction is not None
    return QAScore(
        em=max(exact_match(prediction, g) for g in golds),
        f1=max(token_f1(prediction, g) for g in golds),
    )


# -- multiple choice -----------------------------------------------------------------------------

_LETTERS = "ABCD"
# Wrappers a model may put around the letter it picks: bold, \boxed{, \text{, $, spaces.
_WRAP = r"(?:\*\*|\\boxed\{|\\text(?:bf)?\{|\$|\s)*"
# The letter stands alone: "A" in "Argon" or "A-type" is not a choice.
_ALONE = r"(?![A-Za-z0-9\-])"
_ANSWER_LETTER = re.compile(
    r"(?i:answer)(?i:\s+(?:choice|option))?(?i:\s+(?:is|would\s+be|will\s+be|should\s+be))?"
    r"(?:\s*[:=])?" + _WRAP + r"(?i:(?:option|choice)\s+)?[(\[]?([A-D])[)\]]?" + _ALONE
)
_BARE_LETTER = re.compile(r"[(\[]?([A-D])[)\].:]?")
_LEADING_LETTER = re.compile(r"\s*(?:\*\*)?[(\[]?([A-D])[)\].:](?:\*\*)?(?:\s|$)")
_OPTION_LETTER = re.compile(r"(?i:option|choice)\s*[(\[]?([A-D])[)\]]?" + _ALONE)
_PAREN_LETTER = re.compile(r"\(([A-D])\)")


def _bare_letter(text: str) -> str | None:
    """The letter when ``text`` is nothing but one choice letter in light markup."""
    stripped = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", text)
    stripped = stripped.replace("**", "").replace("$", "").strip()
    m = _BARE_LETTER.fullmatch(stripped)
    return m.group(1) if m else None


def choice_letter(text: str | None) -> str | None:
    """The option letter (A-D) an answer commits to, or None when it names none.

    In order of trust: the last "answer is X" / "Answer: (X)" phrase; the last ``\\boxed{X}``;
    a reply that is only a letter ("B", "(C)", "D."); a reply that opens with one ("B) ...");
    the last "option X"; the last parenthesised "(X)". Only capital letters count, so the
    article "a" is never read as option A.
    """
    if _is_blank(text, "text"):
        return None
    assert text is not None
    found = _ANSWER_LETTER.findall(text)
    if found:
        return found[-1]
    boxed = extract_boxed(text)
    if boxed is not None and (letter := _bare_letter(boxed)) is not None:
        return letter
    if (letter := _bare_letter(text)) is not None:
        return letter
    if m := _LEADING_LETTER.match(text):
        return m.group(1)
    for pattern in (_OPTION_LETTER, _PAREN_LETTER):
        found = pattern.findall(text)
        if found:
            return found[-1]
    return None


def _gold_letter(gold_letter: Any) -> str:
    """The gold option as one capital letter A-D ("b", "(B)" and " B " are accepted)."""
    text = _check_text(gold_letter, "gold_letter").strip().strip("()").strip().upper()
    if len(text) != 1 or text not in _LETTERS:
        raise ValueError(f"gold_letter {gold_letter!r} must be one of the letters A, B, C or D")
    return text


def score_multiple_choice(prediction: str | None, gold_letter: str) -> float:
    """1.0 when the letter chosen in ``prediction`` is ``gold_letter`` (A-D), else 0.0."""
    gold = _gold_letter(gold_letter)
    return float(choice_letter(prediction) == gold)


# -- MATH-style final answers --------------------------------------------------------------------

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(rf"[+-]?{_NUM}")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SLASH = re.compile(rf"([+-]?{_NUM})/([+-]?{_NUM})")
_FRAC = re.compile(rf"([+-]?)\\frac\{{([+-]?{_NUM})\}}\{{([+-]?{_NUM})\}}")
_LAST_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+(?:\.\d+)?)?|-?\.\d+")
# A number at the start of a stated answer, followed by words at most ("12 apples").
_LEADING_NUMBER = re.compile(r"\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?:\s+[A-Za-z][A-Za-z\s]*)?")
_ANSWER_IS = re.compile(r"(?i:answer)\s*(?:is|:|=)\s*:?")
_SENTENCE_END = re.compile(r"\n|\.\s")
_UNITS = re.compile(r"(.+?)\\(?:text|mbox)\{\s*[A-Za-z][A-Za-z ]*\}")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")


def extract_boxed(text: str | None) -> str | None:
    """Contents of the last ``\\boxed{...}`` (or ``\\fbox{...}``), nested braces included.

    ``\\boxed 5`` (no braces) gives ``5``. None when there is no box, or when the last one
    never closes (a truncated reply).
    """
    if _is_blank(text, "text"):
        return None
    assert text is not None
    start, command = max((text.rfind(c), c) for c in _BOX_COMMANDS)
    if start < 0:
        return None
    pos = start + len(command)
    if pos < len(text) and text[pos].isspace():
        rest = text[pos:].lstrip()
        m = re.match(r"[^\s$]+", rest)
        return m.group(0) if m else None
    if pos >= len(text) or text[pos] != "{":
        return None
    depth = 0
    for i in range(pos, len(text)):
        ch = text[i]
        if i > pos and text[i - 1] == "\\":  # \{ and \} are literal braces, not grouping
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[pos + 1 : i].strip()
    return None


def _balanced(text: str) -> bool:
    """True when every brace in ``text`` closes in order."""
    depth = 0
    for ch in text:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _normalize_math(text: str) -> str:
    """A final answer with presentation stripped: $, spaces, \\left/\\right, \\!, units."""
    s = text.strip()
    for spacing in ("\\!", "\\,", "\\;", "\\:", "\\displaystyle"):
        s = s.replace(spacing, "")
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("^\\circ", "").replace("^{\\circ}", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    if (m := _UNITS.fullmatch(s.strip())) is not None:
        s = m.group(1)  # "5 \text{ cm}" -> "5"
    s = _TEXT_WRAPPER.sub(r"\1", s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)  # \frac12 shorthand
    while s.startswith("{") and s.endswith("}") and _balanced(s[1:-1]):
        s = s[1:-1]  # "{5}" is 5
    if s.count("=") == 1:
        left, right = s.split("=")
        if 0 < len(left) <= 2 and right:  # "x=5" states the value 5
            s = right
    return s


def _as_number(text: str) -> float | None:
    """The value of a normalised answer that is one number, decimal or simple fraction."""
    if _PLAIN.fullmatch(text):
        return float(text)
    if _THOUSANDS.fullmatch(text):
        return float(text.replace(",", ""))
    if m := _SLASH.fullmatch(text):
        num, den = float(m.group(1)), float(m.group(2))
        return num / den if den else None
    if m := _FRAC.fullmatch(text):
        num, den = float(m.group(2)), float(m.group(3))
        if not den:
            return None
        return -num / den if m.group(1) == "-" else num / den
    return None


def math_equal(answer: str, gold: str) -> bool:
    """True when two final answers agree: numerically within 1e-6, else as normalised text."""
    a = _normalize_math(_check_text(answer, "answer"))
    b = _normalize_math(_check_text(gold, "gold"))
    if not a or not b:
        return False
    x, y = _as_number(a), _as_number(b)
    if x is not None and y is not None:
        return abs(x - y) <= MATH_TOLERANCE
    return a == b


def _stated_answer(text: str) -> str | None:
    """What follows the last "answer is" / "answer:" up to the end of its sentence."""
    matches = list(_ANSWER_IS.finditer(text))
    if not matches:
        return None
    tail = text[matches[-1].end() :]
    tail = _SENTENCE_END.split(tail, maxsplit=1)[0].strip().rstrip(".").strip("*").strip()
    if not tail:
        return None
    # "12 apples" states 12; "2\sqrt{5}" is not the number 2, so it is kept whole.
    if _as_number(_normalize_math(tail)) is None and (m := _LEADING_NUMBER.fullmatch(tail)):
        return m.group(1)
    return tail


def math_answer(text: str | None) -> str | None:
    """The final answer a solution states: last box, else "answer is ...", else last number."""
    if _is_blank(text, "text"):
        return None
    assert text is not None
    boxed = extract_boxed(text)
    if boxed:
        return boxed
    stated = _stated_answer(text)
    if stated:
        return stated
    numbers = _LAST_NUMBER.findall(text)
    return numbers[-1] if numbers else None


def score_math(prediction: str | None, gold: str | int | float) -> float:
    """1.0 when the final answer of ``prediction`` equals ``gold``, else 0.0.

    ``gold`` may be the bare answer or a full reference solution; a solution's last box is used.
    """
    if isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
        raise ValueError(f"gold must be a string or a number, got {type(gold).__name__}")
    gold_text = str(gold)
    target = extract_boxed(gold_text) or gold_text
    if not _normalize_math(target):
        raise ValueError(f"gold {gold!r} is empty after normalisation; give the final answer")
    answer = math_answer(prediction)
    return float(answer is not None and math_equal(answer, target))


# -- contrastive outcome reward ------------------------------------------------------------------


def _unit_interval(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1], else ValueError."""
    if not isinstance(value, Real):
        raise ValueError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
    x = float(value)
    if not 0.0 <= x <= 1.0:  # also rejects NaN
        raise ValueError(f"{name}={value!r} is outside [0, 1]; pass the task scorer's score")
    return x


def contrastive_outcome(
    with_memory: float,
    without_memory: float,
    bonus: float = DEFAULT_PARTIAL_BONUS,
    *,
    success_threshold: float = 1.0,
) -> float:
    """Outcome reward: task score with memory minus without it, plus ``bonus`` if both succeed.

    This is ``R_out`` of the paper (Eq. 8 in Section 3, restated as Eq. 29 in appendix C.3.3):
    the same query is solved once with the retrieved experience and once with no memory, both
    answers are scored by the benchmark's scorer, and the reward is the difference plus
    ``alpha_partial`` when both runs succeed. With 0/1 scores it is 1 when only the memory run
    succeeds, -1 when only the memory-free run does, ``bonus`` when both do and 0 when neither
    does, so it rewards what the memory adds rather than accuracy itself. GRPO's outcome reward
    (:mod:`genmem.training.rollouts`) and evaluation's contrastive column both call this one.

    Args:
        with_memory: Task score in [0, 1] of the run that used the memory support.
        without_memory: Task score in [0, 1] of the run without memory.
        bonus: ``alpha_partial``, finite and >= 0 (the paper asks for a positive value and
            states none; see :data:`DEFAULT_PARTIAL_BONUS`). 0 gives the plain difference.
        success_threshold: A run "succeeds" when its score reaches this value, in (0, 1]. The
            default 1.0 is exact for binary scores; graded scores such as F1 need a full score.

    Raises:
        ValueError: A score outside [0, 1], a negative or non-finite bonus, or a threshold
            outside (0, 1].
    """
    with_score = _unit_interval(with_memory, "with_memory")
    without_score = _unit_interval(without_memory, "without_memory")
    if isinstance(bonus, bool) or not isinstance(bonus, Real) or not math.isfinite(bonus):
        raise ValueError(f"bonus={bonus!r} must be a finite number >= 0")
    if bonus < 0:
        raise ValueError(f"bonus={bonus!r} is negative; the bonus rewards keeping a success")
    threshold = _unit_interval(success_threshold, "success_threshold")
    if threshold == 0.0:
        raise ValueError("success_threshold=0 would count every run as a success; use (0, 1]")
    both = with_score >= threshold and without_score >= threshold
    return with_score - without_score + (float(bonus) if both else 0.0)
