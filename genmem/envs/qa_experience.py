"""Abstract experiences for multi-hop QA questions: the question's form and a plan, no names.

A QA seed entry must not contain its question: a retrieval test whose payloads quote their
queries is won by word matching. The bundled QA files hold questions and answers only (no
supporting passages), so an experience is written from the question itself: its form with every
named entity as a placeholder (``A``, ``B``; years and counts as ``n1``), the kind of question
(comparison, yes/no, a chain of relations), a plan of searches for that kind, and a check on the
kind of answer. What it shares with its question are the relation words ("director", "born"),
which is what a similar question shares with it too.

The QA seed source (:func:`qa_seed_rows`) is the 300 bundled multi-hop questions that no QA bench
shares with ``hotpotqa-distractor``: HotpotQA dev 100-199 and 2WikiMultihopQA dev 0-199.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["QAForm", "qa_abstract_experience", "qa_form", "qa_seed_experience", "qa_seed_rows"]

QAKind = Literal["yes_no", "comparison", "chain"]

_QUESTION_WORDS = frozenset("who whom whose what which when where why how".split())
# lower-case words inside a name ("House of the Dragon"); not "and", which joins two names far
# more often than it sits inside one
_CONNECTORS = frozenset("of the de la le les von van der den du des del da di on upon".split())
_YES_NO = frozenset("are is was were did do does can could has have had".split())
_COMPARE = re.compile(
    r"\b(older|younger|earlier|later|first|last|longer|shorter|bigger|larger|smaller|more|"
    r"fewer|higher|lower|closer|farther|same|both|either)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"^\d[\d,.]*$")
_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”")
_TRAIL = ".,;:!?)"


class QAForm(BaseModel):
    """A question with its names and numbers replaced, and what kind of question it is."""

    form: str = Field(description="The question with entities as A, B and numbers as n1.")
    kind: QAKind
    entities: int = Field(ge=0, description="Distinct named entities replaced.")
    hops: int = Field(ge=1, description="Relations to follow for a chain question.")
    answer_type: str = Field(description="What the answer is: a person, a place, a date ...")


def _function_word(word: str) -> bool:
    """A sentence-initial word that starts the question rather than a name."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    low = word.casefold()
    return low in _QUESTION_WORDS or low in ENGLISH_STOP_WORDS


def _capitalised(token: str) -> bool:
    word = token.lstrip("(\"'“")
    return bool(word) and (word[0].isupper() or word[0].isdigit())


def qa_form(question: str, answers: list[str] | None = None) -> QAForm:
    """Mask the named entities and numbers of ``question`` and classify it."""
    labels: dict[str, str] = {}
    numbers: dict[str, str] = {}

    def label(name: str) -> str:
        key = name.strip('"“”').casefold()
        return labels.setdefault(key, chr(ord("A") + min(len(labels), 25)))

    # quoted titles are one entity whatever their case
    text = _QUOTED.sub(lambda m: f"\x00{label(m.group(0))}\x00", question.strip())
    tokens = text.split()
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        bare = tok.rstrip(_TRAIL)
        lead = i == 0 and _function_word(bare)
        if "\x00" in tok or lead or not _capitalised(bare):
            out.append(tok.replace("\x00", ""))
            i += 1
            continue
        if _NUMBER.match(bare):
            value = bare.replace(",", "")
            out.append(numbers.setdefault(value, f"n{len(numbers) + 1}") + tok[len(bare) :])
            i += 1
            continue
        # a run of capitalised words, joined by connectors between them ("House of the Dragon")
        j, end, tail = i, i, ""
        while j < len(tokens):
            word = tokens[j].rstrip(_TRAIL)
            if "\x00" in tokens[j]:
                break
            if _capitalised(word) and not _NUMBER.match(word):
                end, tail = j, tokens[j][len(word) :]
                initial = len(word) == 1 and tail == "."  # "Stefan I. Nenitescu"
                if tail and not initial:  # punctuation closes the name
                    break
                tail = ""
                j += 1
            elif word.casefold() in _CONNECTORS and j + 1 < len(tokens):
                j += 1
            else:
                break
        joined = " ".join(tokens[i : end + 1])
        name = joined[: len(joined) - len(tail)]
        if "(" in name and ")" not in name and tail.startswith(")"):  # "War (Film)?"
            name, tail = name + ")", tail[1:]
        possessive = ""
        for suffix in ("'s", "’s"):
            if name.endswith(suffix):
                name, possessive = name[: -len(suffix)], suffix
        out.append(label(name) + possessive + tail)
        i = end + 1
    form = " ".join(out)
    first = question.strip().split(" ", 1)[0].casefold()
    comparing = bool(_COMPARE.search(question)) or (" or " in question and len(labels) >= 2)
    if first in _YES_NO or re.search(r",\s*(?:did|do|does|are|is|was|were)\b", question):
        kind: QAKind = "yes_no"
    elif comparing and len(labels) >= 2:
        kind = "comparison"
    else:
        kind = "chain"
    hops = 1 + len(re.findall(r"\bof (?:the|a|an|his|her|their)\b|'s\b|’s\b", question))
    return QAForm(
        form=form,
        kind=kind,
        entities=len(labels),
        hops=max(1, hops),
        answer_type=_answer_type(question, answers or [], kind),
    )


def _answer_type(question: str, answers: list[str], kind: QAKind) -> str:
    q = question.strip().casefold()
    gold = answers[0].strip().casefold() if answers else ""
    if kind == "yes_no" or gold in ("yes", "no"):
        return "yes or no"
    if kind == "comparison":
        return "one of the compared entities, as the question names it"
    if q.startswith("when") or re.search(r"\b(what|which) (year|date|month|day)\b", q):
        return "a date or year"
    if q.startswith(("how many", "how much", "how long", "how old")):
        return "a number or amount"
    if q.startswith("where"):
        return "a place"
    if q.startswith(("who", "whom", "whose")):
        return "a person or group"
    head = re.match(r"(?:[Ww]hich|[Ww]hat)\s+([a-z]+)\b", question.strip())
    if head and head.group(1) not in _YES_NO and head.group(1) not in ("kind", "type", "sort"):
        return f"the {head.group(1)} asked for"
    return "a name, as short as the sources write it"


_PLANS: dict[QAKind, str] = {
    "yes_no": (
        "1. Find the fact the question asks about for each named entity, one search each.\n"
        "2. Compare those facts with the claim (same place, same country, both true).\n"
        "3. Answer yes or no and nothing else."
    ),
    "comparison": (
        "1. Search each compared entity on its own and note the property in question "
        "(a date, a count, a place).\n"
        "2. Put the values side by side; convert dates and units before comparing.\n"
        "3. Answer with the entity that wins the comparison, spelt as the question spells it."
    ),
    "chain": (
        "1. Start from the innermost description (the part about the named entity) and find "
        "what it refers to.\n"
        "2. Follow each further relation outward, one search per step, using the entity the "
        "last step found.\n"
        "3. Answer with the entity the outermost relation names, not an intermediate one."
    ),
}


def qa_abstract_experience(question: str, answers: list[str] | None = None) -> str:
    """A QA experience: the masked question form, its kind, a plan and an answer check."""
    f = qa_form(question, answers)
    steps = f"{f.hops} relation{'s' if f.hops > 1 else ''}" if f.kind == "chain" else f.kind
    return (
        f"Question form: {f.form}\n"
        f"Kind: {f.kind.replace('_', '/')} ({steps}; answer: {f.answer_type})\n"
        f"Plan:\n{_PLANS[f.kind]}\n"
        "Check: the answer is the kind asked for, supported by what the searches found, and "
        "short (a name, a date, a number or yes/no)."
    )


def qa_seed_experience(question: str, answer: str) -> str:
    """The seed experience of one QA row (its question and its first answer)."""
    return qa_abstract_experience(question, [answer])


def qa_seed_rows() -> list[dict[str, Any]]:
    """The QA source: HotpotQA dev 100-199 and 2Wiki dev 0-199 as ``{id, question, answer}``.

    HotpotQA dev 0-99 are the ``hotpotqa-distractor`` bench and stay out of every bank.
    """
    from genmem.envs.qa import HOTPOTQA_DEV_200, TWOWIKI_DEV_200, read_qa_jsonl

    records = read_qa_jsonl(HOTPOTQA_DEV_200)[100:] + read_qa_jsonl(TWOWIKI_DEV_200)
    return [{"id": r.id, "question": r.question, "answer": r.answers[0]} for r in records]
