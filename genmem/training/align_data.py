"""Stage 1 data: the five text <-> SID mappings built from a bank and its provenance.

Every live entry of a bank gives (paper, appendix B.5):

- ``experience_sid`` (x -> z): the entry's payload -> its SID;
- ``sid_experience`` (z -> x): the SID -> the payload (clipped);
- ``sid_description`` (z -> d): the SID -> a one-line description (the record's problem type
  when the payload has one, else its first sentence; or one written by a model);
- ``query_sid`` (q -> z): each source query recorded in the entry's metadata -> the SID;
- ``trajectory_sid`` (tau -> z): each source trajectory, shown with its own query -> the SID.

Queries and trajectories come from ``metadata["sources"]``, kept as (query, trajectory) pairs:
cold-start banks record ``query`` and ``trajectory``; seed banks record the ``question`` (a GSM8K
one also its training problem's index, whose worked reference solution is the trajectory).

Forward mappings use exactly the prompt SID decoding uses at inference (the addressing
instruction, then the context as MemRetriever or MemEvolver phrases it), so what is trained is
what is decoded. The loss weights ``lambda`` of Eq. 6 are applied as sampling multiplicities: an
example of mapping ``m`` appears ``floor(lambda_m)`` times plus once more with probability
``frac(lambda_m)``, which weights the summed SFT loss by ``lambda_m`` in expectation (TRL's
SFTTrainer has no per-example loss weights).

A seeded fraction of the queries is held out: those pairs measure whether addressing generalises
to unseen queries, so nothing in the mix may contain one. A held-out query gives no ``query_sid``
example and its trajectory no ``trajectory_sid`` example (a GSM8K trajectory is the problem's
worked solution, as telling as the question). An entry whose payload quotes a held-out query
(seed digests open with their problem) gives no ``experience_sid``, ``sid_experience`` or
``sid_description`` example, since the description is cut from or written from that payload; an
entry whose payload does not quote it stays trained through those mappings, as in the paper,
where every entry is in the bank. Last, any example whose context or target still quotes a
held-out query (a run of :data:`QUOTE_WORDS` of its words, or all of a shorter one) is left out.
``AlignData.withheld`` counts what was left out per mapping.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from genmem.memory.build import source_query
from genmem.policies.prompts import (
    ADDRESS_PROMPT,
    DESCRIBER_PROMPT,
    SID_DESCRIPTION_PROMPT,
    SID_EXPERIENCE_PROMPT,
    evolver_user_message,
    experience_user_message,
    retriever_user_message,
)
from genmem.policies.sid_decoding import address_prompt

__all__ = [
    "MAPPINGS",
    "QUOTE_WORDS",
    "AlignData",
    "AlignDataConfig",
    "AlignExample",
    "EntrySource",
    "Mapping",
    "QueryPair",
    "SourcePair",
    "alignment_data",
    "describe_payload",
    "entry_sources",
    "model_describer",
    "with_queries",
]

Mapping = Literal[
    "query_sid", "trajectory_sid", "experience_sid", "sid_experience", "sid_description"
]
MAPPINGS: tuple[Mapping, ...] = (
    "query_sid",
    "trajectory_sid",
    "experience_sid",
    "sid_experience",
    "sid_description",
)

ADDRESSING: dict[Mapping, float] = {"query_sid": 1.0, "trajectory_sid": 1.0, "experience_sid": 1.0}
"""The weights of ``--weights addressing``: the three text -> SID mappings only."""

_WORD = re.compile(r"\w+")
QUOTE_WORDS = 12
"""A text quotes a held-out query when it has this many of its words in a row (casefolded)."""
_TYPE_LINE = re.compile(r"^\s*Problem type:\s*(.+)$", re.MULTILINE)
_SENTENCE = re.compile(r"(.+?[.!?])(\s|$)", re.DOTALL)


class AlignDataConfig(BaseModel):
    """How stage-1 examples are built and mixed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[Mapping, float] = Field(
        default_factory=lambda: dict.fromkeys(MAPPINGS, 1.0),
        description="lambda per mapping (Eq. 6), as sampling multiplicity; 0 drops a mapping.",
    )
    heldout: float = Field(
        default=0.1,
        ge=0.0,
        lt=1.0,
        description="Share of the queries kept out of training to measure the alignment (0 "
        "trains on all of them and measures no held-out accuracy).",
    )
    max_heldout: int = Field(default=200, ge=0, description="Cap on held-out query pairs.")
    max_context_tokens: int = Field(
        default=512, ge=16, description="Forward contexts keep their last N tokens."
    )
    max_target_chars: int = Field(default=1200, ge=40, description="Reverse-target cap.")
    seed: int = 0

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if v < 0}
        if bad:
            raise ValueError(f"mapping weights must be >= 0, got {bad}")
        if not any(v > 0 for v in value.values()):
            raise ValueError("at least one mapping needs a weight > 0")
        return {**dict.fromkeys(MAPPINGS, 0.0), **value}


class SourcePair(BaseModel):
    """One source of an entry: the query it came from and that query's trajectory ("" if none)."""

    query: str = ""
    trajectory: str = ""


class EntrySource(BaseModel):
    """What one entry offers to the mappings."""

    sid: str
    payload: str
    description: str
    sources: list[SourcePair] = Field(default_factory=list)

    @property
    def queries(self) -> list[str]:
        """The distinct source queries, in source order."""
        return list(dict.fromkeys(p.query for p in self.sources if p.query))


class AlignExample(BaseModel):
    """One SFT example: a chat-templated prompt and the completion the loss is taken on."""

    mapping: Mapping
    prompt: str
    completion: str
    sid: str


class AlignData(BaseModel):
    """The training mix and the held-out query pairs."""

    train: list[AlignExample]
    heldout: list[dict[str, str]] = Field(description="{query, reference_sid} pairs not trained.")
    trained_queries: list[dict[str, str]] = Field(description="{query, reference_sid} trained.")
    counts: dict[str, int] = Field(description="Examples per mapping in the mix.")
    withheld: dict[str, int] = Field(
        default_factory=dict,
        description="Examples per mapping left out because they carried a held-out query.",
    )
    entries: int


def _clip_words(text: str, max_words: int) -> str:
    """``text`` on one line, cut to ``max_words`` words ("..." when cut)."""
    words = text.split()
    return " ".join(words[:max_words]) + ("..." if len(words) > max_words else "")


def describe_payload(payload: str, *, max_words: int = 24) -> str:
    """A one-line description of a payload: its problem-type line, else its first sentence."""
    found = _TYPE_LINE.search(payload)
    text = found.group(1) if found else payload.strip()
    if not found:
        body = re.sub(r"^\s*\w[\w ]{0,20}:\s*", "", text)  # drop a leading "Problem:" label
        match = _SENTENCE.match(body)
        text = match.group(1) if match else body
    return _clip_words(text, max_words)


def model_describer(chat: Any, *, max_words: int = 24) -> Callable[[str], str]:
    """A ``describe`` for :func:`entry_sources` that asks ``chat`` for a one-line description.

    The first non-empty line of the reply is kept (clipped to ``max_words``); an empty reply or a
    failed call falls back to :func:`describe_payload`, so an entry is never left undescribed.
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    from genmem.policies.chat_local import content_text

    def describe(payload: str) -> str:
        try:
            reply = chat.invoke([SystemMessage(DESCRIBER_PROMPT), HumanMessage(payload[:2000])])
        except Exception:  # a backend error costs this one description, not the run
            return describe_payload(payload, max_words=max_words)
        lines = [x.strip() for x in content_text(reply.content).splitlines() if x.strip()]
        if not lines:
            return describe_payload(payload, max_words=max_words)
        return _clip_words(lines[0], max_words)

    return describe


def _gsm8k_rows() -> list[dict[str, str]]:
    from genmem.envs.bundled import GSM8K_TRAIN, read_gsm8k

    return read_gsm8k(GSM8K_TRAIN)


def entry_sources(bank: Any, describe: Callable[[str], str] | None = None) -> list[EntrySource]:
    """Each live entry with its description and its (query, trajectory) sources."""
    rows: list[dict[str, str]] | None = None
    out = []
    for entry in bank.entries():
        pairs: list[SourcePair] = []
        for src in (entry.metadata or {}).get("sources", []):
            if not isinstance(src, dict):
                continue
            query, trajectory = source_query(src), src.get("trajectory")
            gsm8k = src.get("source") == "gsm8k-train" and "index" in src
            if gsm8k and not (query and trajectory):
                rows = rows if rows is not None else _gsm8k_rows()
                i = int(src["index"])
                if 0 <= i < len(rows):
                    query = query or rows[i]["question"]
                    trajectory = trajectory or rows[i]["answer"].split("####")[0].strip()
            pair = SourcePair(query=str(query or ""), trajectory=str(trajectory or ""))
            if (pair.query or pair.trajectory) and pair not in pairs:
                pairs.append(pair)
        payload = entry.payload
        if not payload.strip():
            continue  # a cleared entry has nothing to align with
        out.append(
            EntrySource(
                sid=str(entry.sid),
                payload=payload,
                description=(describe or describe_payload)(payload),
                sources=pairs,
            )
        )
    return out


class QueryPair(BaseModel):
    """A query and the entry it should address: by ``sid``, or by a ``text`` that the bank's
    codebooks quantise to that entry's SID (e.g. the text the entry was built from)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, description="A task or question, as MemRetriever sees it.")
    sid: str | None = Field(default=None, description="The entry's SID.")
    text: str | None = Field(default=None, description="A text whose SID is the entry's.")

    @model_validator(mode="after")
    def _one_target(self) -> QueryPair:
        if not self.query.strip():
            raise ValueError("query is blank")
        if (self.sid is None) == (self.text is None):
            raise ValueError("give exactly one of 'sid' and 'text'")
        return self


def with_queries(
    sources: Sequence[EntrySource], queries: Sequence[QueryPair], bank: Any
) -> list[EntrySource]:
    """``sources`` with each query added to the entry it names (a copy; nothing is written).

    Raises:
        ValueError: a query names an empty slot or a SID of other sizes (which one, and why).
        CodebookError: a ``text`` target, but the bank's codebooks are not on this machine.
    """
    from genmem.policies.addressing import bank_codebooks

    by_sid = {s.sid: s.model_copy(deep=True) for s in sources}
    texts = [q.text for q in queries if q.text is not None]
    quantised: dict[str, str] = {}
    if texts:
        from genmem.memory.encoders import encode_for_codebook

        books = bank_codebooks(bank)
        sids = books.sids(encode_for_codebook(books, texts))
        quantised = {text: str(sid) for text, sid in zip(texts, sids, strict=True)}
    for n, q in enumerate(queries, 1):
        if q.sid is not None:
            try:
                sid = str(bank.sid(q.sid))
            except ValueError as exc:
                raise ValueError(f"query {n}: {exc}") from None
        else:
            sid = quantised[str(q.text)]
        if sid not in by_sid:
            how = "" if q.sid is not None else f" (its text quantises to {sid})"
            raise ValueError(f"query {n} names an empty slot{how}: no entry to align it with")
        pair = SourcePair(query=q.query.strip())
        if pair not in by_sid[sid].sources:
            by_sid[sid].sources.append(pair)
    return list(by_sid.values())


def _chat(tokenizer: Any, system: str, user: str) -> str:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


class _Quotes:
    """Recognises text that quotes one of some queries (word runs, casefolded)."""

    def __init__(self, queries: set[str]) -> None:
        words = [w for q in queries if (w := _WORD.findall(q.casefold()))]
        self._short = [" ".join(w) for w in words if len(w) < QUOTE_WORDS]
        self._runs = {run for w in words for run in _runs(w)}

    def __call__(self, text: str) -> bool:
        words = _WORD.findall(text.casefold())
        if any(run in self._runs for run in _runs(words)):
            return True
        padded = f" {' '.join(words)} "
        return any(f" {q} " in padded for q in self._short)


def _runs(words: list[str]) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)]


def _contents(
    src: EntrySource, cfg: AlignDataConfig, heldout: set[str], quotes: _Quotes
) -> list[tuple[Mapping, str, bool]]:
    """(mapping, forward context or reverse target, withheld?) of every example of an entry."""
    # The description is cut from (or written from) the payload, so it goes where the payload goes.
    payload_held = quotes(src.payload)
    pairs = dict.fromkeys((p.query, p.trajectory) for p in src.sources if p.trajectory)
    items: list[tuple[Mapping, str, bool]] = [
        ("query_sid", retriever_user_message(q), q in heldout) for q in src.queries
    ]
    items += [
        ("trajectory_sid", evolver_user_message(q or "(unknown)", t), q in heldout)
        for q, t in pairs
    ]
    return [
        *items,
        ("experience_sid", experience_user_message(src.payload), payload_held),
        ("sid_experience", src.payload[: cfg.max_target_chars], payload_held),
        ("sid_description", src.description[: cfg.max_target_chars], payload_held),
    ]


def _example(
    src: EntrySource, mapping: Mapping, content: str, tokenizer: Any, cfg: AlignDataConfig
) -> AlignExample:
    """A forward example (context -> SID) or a reverse one (SID -> target)."""
    if mapping.endswith("_sid"):
        prompt = address_prompt(
            tokenizer,
            content,
            system_prompt=ADDRESS_PROMPT,
            max_context_tokens=cfg.max_context_tokens,
        )
        return AlignExample(mapping=mapping, prompt=prompt, completion=src.sid, sid=src.sid)
    system = SID_EXPERIENCE_PROMPT if mapping == "sid_experience" else SID_DESCRIPTION_PROMPT
    prompt = _chat(tokenizer, system, src.sid)
    return AlignExample(mapping=mapping, prompt=prompt, completion=content, sid=src.sid)


def _repeat(items: Sequence[AlignExample], weight: float, rng: random.Random) -> list[AlignExample]:
    whole, frac = int(weight), weight - int(weight)
    out = []
    for item in items:
        out += [item] * (whole + (1 if rng.random() < frac else 0))
    return out


def alignment_data(
    sources: Sequence[EntrySource], tokenizer: Any, config: AlignDataConfig | None = None
) -> AlignData:
    """The weighted, shuffled stage-1 mix and the held-out query pairs (seeded)."""
    cfg = config or AlignDataConfig()
    if not sources:
        raise ValueError("the bank has no entries with a payload: nothing to align with")
    rng = random.Random(cfg.seed)
    pairs = [{"query": q, "reference_sid": s.sid} for s in sources for q in s.queries]
    if cfg.heldout > 0 and len(pairs) < 2:
        raise ValueError(
            f"{len(pairs)} entries of this bank name the query they came from (metadata "
            "'sources', key 'query' or 'question'): at least 2 are needed to hold some out, so "
            "the alignment could not be measured. Give queries for its entries "
            "(--queries FILE: JSONL of {query, sid} or {query, text}), build the bank with its "
            "sources, or train without a measurement (--heldout 0)"
        )
    n_held = min(cfg.max_heldout, round(len(pairs) * cfg.heldout))
    if cfg.heldout > 0 and len(pairs) >= 2:
        n_held = max(1, min(n_held, len(pairs) - 1))
    # drawn from the queries in text order, so two banks of the same questions under other
    # codebooks hold out the same ones and their alignments can be compared task by task
    ordered = sorted(pairs, key=lambda p: (p["query"], p["reference_sid"]))
    held = rng.sample(ordered, n_held) if n_held else []
    held_queries = {p["query"] for p in held}
    quotes = _Quotes(held_queries)
    by_mapping: dict[Mapping, list[AlignExample]] = {m: [] for m in MAPPINGS}
    withheld = dict.fromkeys(MAPPINGS, 0)
    trained: set[str] = set()
    for src in sources:
        for mapping, content, held_out in _contents(src, cfg, held_queries, quotes):
            # quotes(): a trained source's text may still quote a held-out query.
            if held_out or quotes(content):
                withheld[mapping] += 1
                continue
            by_mapping[mapping].append(_example(src, mapping, content, tokenizer, cfg))
            if mapping == "query_sid":
                trained.add(content)
    train: list[AlignExample] = []
    counts: dict[str, int] = {}
    for mapping in MAPPINGS:
        mixed = _repeat(by_mapping[mapping], cfg.weights[mapping], rng)
        counts[mapping] = len(mixed)
        train += mixed
    if not train:
        raise ValueError(
            f"no training examples: weights {cfg.weights} select only mappings this bank has no "
            "data for (queries and trajectories come from entry metadata 'sources')"
        )
    rng.shuffle(train)
    return AlignData(
        train=train,
        heldout=held,
        trained_queries=[p for p in pairs if retriever_user_message(p["query"]) in trained],
        counts=counts,
        withheld=withheld,
        entries=len(sources),
    )
