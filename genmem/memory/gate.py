"""The write gate: what a payload must be before any path writes it into a bank.

A small model writes junk as readily as lessons: records whose every field holds its own name,
"summaries" that are one long number or a fragment repeated to the reply cap, text that still
carries the prompt's markup. Once stored, such a payload is retrieved and read as experience. The
gate refuses it before the write, with a reason a summary can count:

- ``empty``: nothing, or too little to be an experience (fewer than ``min_words`` words);
- ``symbols``: mostly digits, punctuation or other non-letters;
- ``repetition``: one word or phrase repeated (few distinct word n-grams, or text that
  compresses to almost nothing);
- ``field_names``: a record whose fields hold field names (``Skill: skill_name`` in most lines)
  or the same text in most fields;
- ``markup``: prompt markup or delimiter tags (``<tool_response>``, ``</retrieved_memory>``, an
  escaped ``&lt;`` from a data block, chat-template tokens such as ``<|im_start|>``); SID
  tokens are the memory's own vocabulary and pass;
- ``unfinished``: the text stops mid-thought: an open bracket never closed, or a last word that
  cannot end a statement (``the``, ``of``, ``is``, ``He'll``) or a trailing operator;
- ``copied``: a new entry whose word 3-grams are mostly (``max_copied_share``) those of one text
  the writer read from the bank (the retrieved support, the neighbours of the slot): a copy adds
  nothing, and the small default model copies the unrelated entry it was shown (checked only
  for inserts, and only when the writer passes what it read);
- ``ungrounded``: not one content word shared with the task or trajectory it was written from
  (checked only when the writer passes those sources).

A revise whose text is the stored text up to spacing and case changes nothing: the gate says
``retain`` and the writer keeps the stored version. Checks are pure functions of the text; they
never call a model.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFAULT_GATE",
    "REASONS",
    "GateConfig",
    "GateVerdict",
    "Reason",
    "WriteGate",
    "check_join",
    "check_payload",
]

Reason = Literal[
    "empty", "symbols", "repetition", "field_names", "markup", "unfinished", "copied", "ungrounded"
]
REASONS: tuple[Reason, ...] = get_args(Reason)


@dataclass(frozen=True)
class GateConfig:
    """Thresholds of the write gate (defaults pass every bundled seed experience)."""

    min_words: int = 4
    """Fewer words than this is ``empty``."""
    min_letter_share: float = 0.45
    """Below this share of letters among the non-space characters is ``symbols``."""
    min_distinct_ngrams: float = 0.35
    """Below this share of distinct word 3-grams (texts of 12+ words) is ``repetition``."""
    max_word_share: float = 0.4
    """A single word above this share of the words (texts of 8+ words) is ``repetition``."""
    min_compression: float = 0.12
    """Compressed size over raw size below this (texts of 200+ bytes) is ``repetition``."""
    max_name_fields: float = 0.5
    """At least this share of ``name: value`` lines holding their own name is ``field_names``."""
    max_copied_share: float = 0.6
    """At least this share of an insert's word 3-grams found in one text read from the bank is
    ``copied`` (texts of 6+ words)."""


DEFAULT_GATE = GateConfig()
"""The thresholds every write path uses unless told otherwise."""


class GateVerdict(BaseModel):
    """What the gate decided about one payload."""

    model_config = ConfigDict(frozen=True)

    action: Literal["write", "retain", "reject"]
    reason: Reason | None = None
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Whether the write may go ahead (``write``) or is kept as a retention (``retain``)."""
        return self.action != "reject"


_WORD = re.compile(r"[^\W\d_]+|\d+")
_LETTER = re.compile(r"[^\W\d_]")
_MARKUP = re.compile(
    r"<\|[^|>]{1,40}\|>"  # chat-template tokens
    r"|<\s*/?\s*(?!SID_L\d+_\d+>)[A-Za-z_][\w-]*(?:\s[^<>]*)?>"  # tags, open or close
    r"|&lt;\s*/?\s*[A-Za-z_]",  # markup escaped by a data block and written back
)
_FIELD = re.compile(r"^\s*[-*]?\s*\"?([A-Za-z_][\w ]{1,40}?)\"?\s*[:=]\s*\"?(.*?)\"?,?\s*$")
_LONG_FIELD = 12
"""Words a field needs before it is checked for repetition on its own (units repeat in short
ones: ``5 minutes + 75 minutes = 80 minutes``)."""
_IDENTIFIER = re.compile(r"[a-z]+(?:_[a-z]+)+")
_STOP = frozenset(
    "about after again also because been before being between both could does doing each from "
    "have having here into just more most much must only other over same should some such than "
    "that their them then there these they this those through under until very were what when "
    "where which while will with would your".split()
)


# words a statement cannot end on: articles, a few prepositions, conjunctions, possessives and
# the copula; not particles (``plug in``) or auxiliaries and modals (``as it does``, ``a can``)
_DANGLING = frozenset(
    "a an the of with from into onto per via and or but nor than because whose its their my "
    "your our is are was were".split()
)
_DANGLING_TAIL = re.compile(r"(?:['’](?:ll|d|re|ve)|[(\[{,:;=+\-*/×÷])$", re.IGNORECASE)
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"))
_OPEN_TAIL = 40
"""Characters after an unclosed bracket within which the text counts as cut off."""


def _unfinished(text: str, words: list[str]) -> str | None:
    """Why ``text`` stops mid-thought, or None."""
    for left, right in _PAIRS:
        # cut off inside brackets: the last one opened, nothing closed after it, near the end
        # (a typo's stray bracket in mid-text is not a cut)
        tail = text[text.rfind(left) :] if left in text else ""
        if tail and right not in tail and len(tail) <= _OPEN_TAIL:
            return f"{left!r} opened and never closed"
    if _DANGLING_TAIL.search(text):
        return f"it ends on {text[-8:]!r}"
    last = _WORD.findall(text)[-1] if words else ""
    if last in _DANGLING and text[-1].isalpha():  # lower case: "add April and May" ends well
        return f"it ends on {last!r}"
    return None


def _grams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return set(zip(words, words[1:], words[2:], strict=False))


def _repeated_share(words: list[str], texts: Sequence[str]) -> float:
    """The share of ``words``' 3-grams found in ``texts`` taken together."""
    grams = _grams(words)
    seen = set().union(*(_grams(_words(t)) for t in texts)) if texts else set()
    return len(grams & seen) / len(grams)


def _copied(words: list[str], memory: Sequence[str], config: GateConfig) -> str | None:
    """Whether ``words`` mostly repeat one of the ``memory`` texts, word 3-gram by 3-gram."""
    if len(words) < 6:
        return None
    for text in memory:
        share = _repeated_share(words, [text])
        if share >= config.max_copied_share:
            return f"{share:.0%} of its 3-word phrases repeat an entry it read from the bank"
    return None


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _stem(word: str) -> str:
    """A crude stem: the first four letters (rate/rates, percent/percentage meet)."""
    return word[:4]


def _content(words: Sequence[str]) -> set[str]:
    return {_stem(w) for w in words if len(w) >= 4 and w.isalpha() and w not in _STOP}


def check_join(payload: str, parts: Sequence[str], max_share: float = 0.85) -> GateVerdict:
    """``copied`` when ``payload`` is mostly ``parts`` put together (a join, not a fusion)."""
    words = _words(payload)
    share = _repeated_share(words, parts) if len(words) >= 6 else 0.0
    if share >= max_share:
        return _reject("copied", f"{share:.0%} of its 3-word phrases repeat the entries it joins")
    return GateVerdict(action="write")


def check_payload(
    payload: str,
    *,
    sources: Sequence[str] = (),
    previous: str | None = None,
    memory: Sequence[str] = (),
    config: GateConfig = GateConfig(),
) -> GateVerdict:
    """The gate's verdict on writing ``payload`` (``previous``: the stored text a revise replaces).

    ``sources`` are the texts the payload was written from (task, trajectory, merged records);
    without them the grounding check is skipped. ``memory`` are the bank entries the writer read
    (not the slot's own text): an insert that copies one of them is refused.
    """
    if previous is not None and previous.strip() and _norm(payload) == _norm(previous):
        return GateVerdict(action="retain", detail="the same text as the stored version")
    text = payload.strip()
    words = _words(text)
    if len(words) < config.min_words:
        return _reject("empty", f"{len(words)} words (at least {config.min_words})")
    if m := _MARKUP.search(text):
        return _reject("markup", f"prompt markup {m.group(0)[:40]!r}")
    visible = [c for c in text if not c.isspace()]
    letters = sum(1 for c in visible if _LETTER.match(c))
    if letters < config.min_letter_share * len(visible):
        share = letters / len(visible)
        return _reject("symbols", f"{share:.0%} letters (at least {config.min_letter_share:.0%})")
    # the whole text, then each field of a record (one field can loop while the rest is fine)
    fields = _fields(text)
    parts = [(text, words), *((v, w) for _, v in fields if len(w := _words(v)) >= _LONG_FIELD)]
    for part, part_words in parts:
        if reason := _repetition(part, part_words, config):
            return _reject("repetition", reason)
    if reason := _field_names(fields, config):
        return _reject("field_names", reason)
    if reason := _unfinished(text, words):
        return _reject("unfinished", reason)
    if previous is None and (reason := _copied(words, memory, config)):
        return _reject("copied", reason)
    if sources:
        known = _content([w for s in sources for w in _words(s)])
        own = _content(words)
        if own and not own & known:
            return _reject("ungrounded", "no content word in common with the task or run")
    return GateVerdict(action="write")


@dataclass(frozen=True)
class WriteGate:
    """The gate as a writer hands it to a bank write: the texts the payload was written from."""

    sources: tuple[str, ...] = ()
    """Task, trajectory or merged records; empty skips the grounding check."""
    config: GateConfig = GateConfig()
    memory: tuple[str, ...] = ()
    """Entries the writer read from the bank, other than the slot's own: an insert may not copy
    one of them."""

    def check(self, payload: str, previous: str | None = None) -> GateVerdict:
        """The verdict on writing ``payload`` over ``previous`` (None: an empty slot)."""
        return check_payload(
            payload,
            sources=self.sources,
            previous=previous,
            memory=self.memory,
            config=self.config,
        )


def _repetition(text: str, words: list[str], config: GateConfig) -> str | None:
    if len(words) >= 8:
        word, count = Counter(words).most_common(1)[0]
        if count > config.max_word_share * len(words):
            return f"{word!r} is {count} of {len(words)} words"
    if len(words) >= 12:
        grams = list(zip(words, words[1:], words[2:], strict=False))
        distinct = len(set(grams)) / len(grams)
        if distinct < config.min_distinct_ngrams:
            return f"{distinct:.0%} distinct 3-word phrases"
    raw = text.encode("utf-8")
    if len(raw) >= 200:
        ratio = len(zlib.compress(raw, 9)) / len(raw)
        if ratio < config.min_compression:
            return f"compresses to {ratio:.0%} of its size"
    return None


def _fields(text: str) -> list[tuple[str, str]]:
    """The ``name: value`` lines of a record's text."""
    return [m.groups() for line in text.splitlines() if (m := _FIELD.match(line))]


def _field_names(fields: list[tuple[str, str]], config: GateConfig) -> str | None:
    if len(fields) < 2:
        return None

    def key(s: str) -> str:
        return _norm(s).replace(" ", "_")

    names = {key(k) for k, _ in fields}
    # a value that is a field name (its own, another's, or a schema identifier like skill_name)
    named = [k for k, v in fields if key(v) in names or _IDENTIFIER.fullmatch(v.strip())]
    if len(named) >= config.max_name_fields * len(fields):
        return f"{len(named)} of {len(fields)} fields hold a field name"
    texts = [key(v) for _, v in fields if _LETTER.search(v)]  # equal numbers are fine
    if not texts:
        return None
    value, count = Counter(texts).most_common(1)[0]
    if len(fields) >= 3 and value and count >= config.max_name_fields * len(fields):
        return f"{count} of {len(fields)} fields hold the same text {value[:30]!r}"
    return None


def _reject(reason: Reason, detail: str) -> GateVerdict:
    return GateVerdict(action="reject", reason=reason, detail=detail)
