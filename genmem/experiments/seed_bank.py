"""A seed bank from bundled GSM8K training problems (or QA questions): distil, encode, quantise,
store (cached).

Each training problem with its reference solution becomes one experience: distilled by the
default model (a short structured lesson: problem type, procedure, check) or, for speed,
deterministically from the reference solution. Codebooks are always fitted on the
reference digests of ``fit_size`` problems, so the address space covers the domain even when
only a few entries are distilled by the model; entries get their SIDs from those frozen
codebooks. The result is cached per setting under ``$GENMEM_CACHE/seed/``; model distillation
appends to a JSONL file as it goes, so an interrupted build continues where it stopped.

``source`` names any environment that can seed a bank (:func:`genmem.envs.benches.seed_sources`):
its rows and, where it has one, its own experience writer come from its registration.
``source="qa"`` builds a QA bank from the 300 bundled multi-hop questions that no QA bench
shares with ``hotpotqa-distractor`` (HotpotQA dev 100-199 and 2WikiMultihopQA dev 0-199), each an
abstract experience (:mod:`genmem.envs.qa_experience`). The ``hotpotqa`` and ``2wiki``
benches read those same files: a loop evaluated on them with this bank would retrieve its own
questions' entries.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, model_validator

from genmem.envs.bundled import append_jsonl, jsonl_rows
from genmem.memory.build import source_query
from genmem.policies.backends import DEFAULT_MODEL_SPEC
from genmem.policies.prompts import SEED_LESSON_PROMPT, seed_lesson_user_message

__all__ = [
    "DEFAULT_DISTILL",
    "DEFAULT_SEED_SIZE",
    "DEFAULT_SOURCE",
    "MIN_FIT_SIZE",
    "MODEL_SEED_SIZE",
    "DistillMode",
    "SeedBank",
    "SeedBankConfig",
    "SeedLesson",
    "abstract_experience",
    "build_seed_bank",
    "fit_experience_codebooks",
    "model_experience",
    "procedure_experience",
    "reference_experience",
    "seed_pairs",
    "seed_texts",
]

DistillMode = Literal["model", "reference", "procedure", "abstract"]
"""Who writes the seed experiences: the default model, a digest of the reference solution with
its problem, the same procedure without the problem text (so a retrieval test is not won by
matching the query's words against its own copy in the payload), or that procedure with its
names and numbers replaced by placeholders (so it shares with its problem only the kind of
things counted and the operations)."""

DEFAULT_DISTILL: DistillMode = "procedure"
"""Who writes a seed bank's experiences unless told otherwise (every command's ``--distill``)."""

DEFAULT_SOURCE = "gsm8k"
"""What a seed bank is built from unless told otherwise (every command's ``--source``)."""

DEFAULT_SEED_SIZE = 300
"""Training rows a seed bank is built from unless told otherwise (``genmem bank seed --size``,
``genmem demo --seed-size``); the codebooks are fitted on as many unless told otherwise."""

MODEL_SEED_SIZE = 12
"""The demo's seed bank size when the chat model writes the experiences (``--distill model``):
one model call per row, so it stays small."""

MIN_FIT_SIZE = 48
"""Fewest digests the codebooks are fitted on (the first level has 48 centres by default)."""

_CALC = re.compile(r"<<[^>]*>>")
_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
_NOT_NAMES = frozenset({"yesterday", "today", "tomorrow", "tonight", "last", "next", "each"})


class SeedBankConfig(BaseModel):
    """What seed bank to build."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distill: DistillMode = Field(default=DEFAULT_DISTILL, description="Who writes the experiences.")
    size: int = Field(
        default=DEFAULT_SEED_SIZE, ge=1, description="Training problems turned into entries."
    )
    fit_size: int = Field(
        default=DEFAULT_SEED_SIZE,
        ge=MIN_FIT_SIZE,
        description=f"Reference digests to fit codebooks (default: size, at least {MIN_FIT_SIZE}).",
    )
    sizes: tuple[int, ...] = Field(default=(48, 16, 8, 8), description="Codebook sizes.")
    seed: int = 0
    model: str = Field(default=DEFAULT_MODEL_SPEC, description="Model spec for distill='model'.")
    gate: bool = Field(
        default=True,
        description="Refuse junk experiences (the write gate, grounded in the problem).",
    )
    source: str = Field(
        default=DEFAULT_SOURCE,
        description="The environment whose training data the experiences come from (one of "
        "genmem.envs.benches.seed_sources(): GSM8K training problems, the bundled QA questions, "
        "TextWorld training games, ...).",
    )
    prefix: bool = Field(
        default=True,
        description="Encode experiences with the experience prefix (False: as plain text, the "
        "encoder-prefix ablation).",
    )

    @model_validator(mode="before")
    @classmethod
    def _fit_on_the_size(cls, data: Any) -> Any:
        """No ``fit_size`` (or None): fit on as many rows as the bank holds, at least 48."""
        if isinstance(data, dict) and data.get("fit_size") is None:
            size = data.get("size", DEFAULT_SEED_SIZE)
            if isinstance(size, int) and not isinstance(size, bool):
                data = {**data, "fit_size": max(MIN_FIT_SIZE, size)}
        return data

    @model_validator(mode="after")
    def _fits_its_source(self) -> SeedBankConfig:
        from genmem.envs.benches import seeding

        source = seeding(self.source)  # an unknown one: the message lists them
        if source.write is not None and self.distill != "abstract":
            raise ValueError(
                f"--distill {self.distill}: a {self.source} seed bank is written as abstract "
                f"experiences only, by its environment's own writer ({source.about}); use "
                "--distill abstract"
            )
        n = source.size() if source.size is not None else None
        if n is not None and (self.size > n or self.fit_size > n):
            raise ValueError(
                f"--size {self.size} / --fit-size {self.fit_size}: the {self.source} source "
                f"has {n} {source.unit}"
            )
        return self

    def key(self) -> str:
        """A short stable id of these settings (the cache folder name)."""
        # GSM8K banks keep the keys they had before there was a second source
        exclude = {"source"} if self.source == "gsm8k" else set()
        if self.prefix:
            exclude.add("prefix")  # banks built before the ablation keep their keys
        dump = self.model_dump_json(exclude=exclude)
        digest = hashlib.sha256(dump.encode()).hexdigest()[:10]
        prefix = "" if self.source == "gsm8k" else f"{self.source}-"
        return f"{prefix}{self.distill}-{self.size}-{digest}"


class SeedLesson(BaseModel):
    """The lesson the model distils from one solved problem."""

    problem_type: str = Field(description="What kind of problem this is, in a few words.")
    procedure: str = Field(description="The steps that solve problems of this kind.")
    check: str = Field(description="How to verify the result before answering.")


class SeedBank(BaseModel):
    """A built seed bank on disk."""

    dir: str
    url: str
    bank_id: str
    codebook_dir: str
    codebook_hash: str
    entries: int
    experiences: int
    rejected: dict[str, int] = Field(
        default_factory=dict, description="Experiences the write gate refused, per reason."
    )
    reused: bool = Field(description="True when it came from the cache.")


def reference_experience(question: str, answer: str) -> str:
    """An experience written deterministically from a problem and its reference solution."""
    steps_text, _, final = answer.partition("####")
    steps = [s.strip() for s in _CALC.sub("", steps_text).splitlines() if s.strip()]
    numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return (
        f"Problem: {question.strip()}\n"
        f"Procedure that solved it:\n{numbered}\n"
        "Check: redo each calculation and make sure the result answers the question asked.\n"
        f"Result: {final.strip()}"
    )


def procedure_experience(question: str, answer: str) -> str:
    """The reference solution's procedure, check and result, without the problem text."""
    body = reference_experience(question, answer)
    return body.split("\n", 1)[1]  # everything after the "Problem: ..." line


def abstract_experience(question: str, answer: str) -> str:
    """The reference procedure and check with its names and numbers as placeholders (A, n1).

    A name is a capitalised word of the problem that never occurs in lower case and is no
    common function word; names become ``A``, ``B``, ... and numbers ``n1``, ``n2``, ... in
    order of first use (the same value, the same placeholder). The result line goes: it would
    read ``Result: n7``.
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    text = procedure_experience(question, answer).rsplit("\nResult:", 1)[0]
    lower = set(re.findall(r"\b[a-z]+\b", f"{question}\n{answer}"))
    names = {
        w
        for w in _CAPITALISED.findall(question)
        if w.lower() not in lower
        and w.lower() not in ENGLISH_STOP_WORDS
        and w.lower() not in _NOT_NAMES
    }
    labels: dict[str, str] = {}

    def name(m: re.Match[str]) -> str:
        word = m.group(0)
        if word not in names:
            return word
        return labels.setdefault(word, chr(ord("A") + min(len(labels), 25)))

    numbers: dict[str, str] = {}

    def number(m: re.Match[str]) -> str:
        value = m.group(0).replace(",", "")
        return numbers.setdefault(value, f"n{len(numbers) + 1}")

    head, _, body = text.partition("\n")
    steps = [re.sub(r"^(\d+)\. ", "", line) for line in body.split("\n")]
    check = steps.pop() if steps and steps[-1].startswith("Check:") else ""
    masked = [_NUMBER.sub(number, _CAPITALISED.sub(name, step)) for step in steps]
    numbered = "\n".join(f"{i}. {step}" for i, step in enumerate(masked, 1))
    return f"{head}\n{numbered}\n{check}".rstrip()


def model_experience(chat: Any, question: str, answer: str) -> str:
    """An experience the chat model distils from a problem and its reference solution."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from genmem.policies.json_reply import ask_json

    user = seed_lesson_user_message(question, _CALC.sub("", answer))
    schema = SeedLesson.model_json_schema()
    schema["properties"]["problem_type"]["maxLength"] = 80
    schema["properties"]["procedure"]["maxLength"] = 320
    schema["properties"]["check"]["maxLength"] = 140
    schema["required"] = ["problem_type", "procedure", "check"]
    reply = ask_json(chat, schema, [SystemMessage(SEED_LESSON_PROMPT), HumanMessage(user)])
    if reply.error is not None:
        raise reply.error
    lesson = SeedLesson.model_validate(reply.parsed)
    return (
        f"Problem type: {lesson.problem_type.strip()}\n"
        f"Procedure: {lesson.procedure.strip()}\n"
        f"Check: {lesson.check.strip()}\n"
        f"Example: {question.strip()[:300]}"
    )


def _distil(
    config: SeedBankConfig, rows: list[dict[str, Any]], path: Path, progress: bool
) -> list[str]:
    """Model digests of ``rows``, appended to ``path`` one per line (resumes a partial file)."""
    from tqdm.auto import tqdm

    from genmem.policies.backends import load_chat_model

    done = [row["text"] for row in jsonl_rows(path)]  # a torn last line is dropped and redone
    todo = rows[len(done) :]
    if not todo:
        return done[: len(rows)]
    chat = load_chat_model(config.model)
    for i, row in enumerate(tqdm(todo, desc="distil experiences", disable=not progress), len(done)):
        text = model_experience(chat, row["question"], row["answer"])
        append_jsonl(path, {"index": i, "text": text})
        done.append(text)
    return done


def build_seed_bank(
    config: SeedBankConfig | None = None, *, root: Path | None = None, progress: bool = True
) -> SeedBank:
    """Build the seed bank for ``config`` under ``root`` (default: the cache), or reuse it."""
    from genmem.policies.local import cache_root

    cfg = config or SeedBankConfig()
    base = (root or cache_root() / "seed") / cfg.key()
    done = base / "seed.json"
    if done.exists():
        return _reused(done)
    base.mkdir(parents=True, exist_ok=True)
    # One builder per bank: a second process waits, then finds the finished bank.
    with FileLock(str(base) + ".lock"):
        if done.exists():
            return _reused(done)
        return _build(cfg, base, progress)


def _reused(done: Path) -> SeedBank:
    """A finished seed bank; its codebooks are loaded once so the quantizer finds them by hash."""
    from genmem.memory.rqkmeans import Codebooks

    seed = SeedBank.model_validate({**json.loads(done.read_text()), "reused": True})
    if Codebooks.recall(seed.codebook_hash) is None:
        Codebooks.load(seed.codebook_dir)
    return seed


def _build(cfg: SeedBankConfig, base: Path, progress: bool) -> SeedBank:
    """Build (or finish building) the seed bank in ``base``."""
    from genmem.memory.build import ExperienceRecord, build_bank
    from genmem.memory.encoders import EXPERIENCE_PREFIX, default_encoder
    from genmem.memory.gate import DEFAULT_GATE
    from genmem.memory.location import open_bank
    from genmem.memory.rqkmeans import Codebooks

    done = base / "seed.json"
    rows = _rows(cfg)
    encoder = default_encoder(prefix=EXPERIENCE_PREFIX if cfg.prefix else None)
    codebook_dir = base / "codebook"
    if codebook_dir.is_dir() and any(codebook_dir.iterdir()):
        codebooks = Codebooks.load(codebook_dir)
    else:
        # codebooks fitted on texts like the ones the bank will hold
        digest = _writer(cfg, fallback=reference_experience)
        digests = [digest(r["question"], r["answer"]) for r in rows[: cfg.fit_size]]
        embeddings = encoder.encode(digests, progress=progress)
        codebooks = fit_experience_codebooks(
            embeddings,
            cfg.sizes,
            encoder.id,
            codebook_dir,
            seed=cfg.seed,
            prefix=encoder.prefix or "",
            progress=progress,
        )
    chosen = rows[: cfg.size]
    if cfg.distill == "model":
        texts = _distil(cfg, chosen, base / "experiences.jsonl", progress)
    else:
        write = _writer(cfg)
        texts = [write(r["question"], r["answer"]) for r in chosen]
    source = f"{cfg.source}-train"
    writer = _writer_name(cfg)
    records = [
        ExperienceRecord(
            text=t,
            metadata={
                "source": source,
                "index": i,
                "by": cfg.distill,
                "writer": writer,
                "question": chosen[i]["question"],
                **({"id": chosen[i]["id"]} if "id" in chosen[i] else {}),
            },
        )
        for i, t in enumerate(texts)
    ]
    bank_path = base / "seed.db"
    bank_path.unlink(missing_ok=True)  # a half-written bank from an interrupted run
    bank_id = f"{cfg.source}-seed-{codebooks.hash[:8]}"
    url = f"sqlite:///{bank_path}?bank={bank_id}"
    bank = open_bank(url, codebooks=codebooks, create=True)
    sids = codebooks.sids(encoder.encode([r.text for r in records], progress=False))
    report = build_bank(
        bank, records, sids, progress=progress, gate=DEFAULT_GATE if cfg.gate else None
    )
    built = SeedBank(
        dir=str(base),
        url=url,
        bank_id=bank_id,
        codebook_dir=str(codebook_dir),
        codebook_hash=codebooks.hash,
        entries=bank.stats().entries,
        experiences=len(records),
        rejected=report.rejected,
        reused=False,
    )
    done.write_text(built.model_dump_json(indent=2, exclude={"reused"}))
    return built


_WRITERS = {
    "reference": reference_experience,
    "procedure": procedure_experience,
    "abstract": abstract_experience,
}
"""The deterministic writers, by distill mode (codebooks of a model-distilled bank are fitted on
reference digests)."""


def _writer(cfg: SeedBankConfig, fallback: Any = None) -> Any:
    """The writer of ``cfg``'s experiences: ``(question, answer) -> text`` (the source's own,
    else the one of the distill mode)."""
    from genmem.envs.benches import seeding

    own = seeding(cfg.source).write
    if own is not None:
        return own
    return _WRITERS.get(cfg.distill, fallback) if fallback else _WRITERS[cfg.distill]


def _writer_name(cfg: SeedBankConfig) -> str:
    """Who writes ``cfg``'s experiences, as entries record it: ``model``, or the source's own
    writer (``template`` for cooking), else ``code``."""
    from genmem.envs.benches import seeding

    if cfg.distill == "model":
        return "model"
    source = seeding(cfg.source)
    return source.writer if source.write is not None else "code"


def _rows(cfg: SeedBankConfig) -> list[dict[str, Any]]:
    """The source rows a bank of ``cfg`` reads: enough for its entries and its codebook fit."""
    from genmem.envs.benches import seeding

    return seeding(cfg.source).rows(max(cfg.fit_size, cfg.size))


def seed_texts(cfg: SeedBankConfig) -> list[str]:
    """The experience text of each source row of ``cfg`` (the first ``max(size, fit_size)``),
    as the bank and its codebook fit see them; a model's distillation is not replayed here."""
    if cfg.distill == "model":
        raise ValueError("seed_texts: a model-written bank's texts are in its experiences.jsonl")
    write = _writer(cfg)
    return [write(r["question"], r["answer"]) for r in _rows(cfg)]


def fit_experience_codebooks(
    embeddings: Any,
    sizes: tuple[int, ...],
    encoder_id: str,
    out: Path,
    *,
    seed: int = 0,
    prefix: str | None = None,
    progress: bool = True,
) -> Any:
    """RQ-KMeans codebooks (the paper's weighted rule, w = 0.5) fitted and saved to ``out``.

    ``prefix`` is the one the embeddings were encoded with (None: the experience prefix).
    """
    from genmem.memory.encoders import EXPERIENCE_PREFIX
    from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig

    fit = RQKMeansConfig(
        sizes=tuple(sizes),
        distance="weighted",
        weight=0.5,
        seed=seed,
        encoder_id=encoder_id,
        encoder_prefix=EXPERIENCE_PREFIX if prefix is None else prefix,
    )
    codebooks = RQKMeans(fit).fit(embeddings, progress=progress).codebooks_
    codebooks.save(out, overwrite=True)
    return codebooks


def seed_pairs(bank: Any, limit: int | None = None) -> list[dict[str, str]]:
    """Retrieval pairs of a seed bank: each source question and its entry's SID.

    An entry built from several problems gives one pair per problem; the pairs come in SID
    order. These are the ``{"query", "reference_sid"}`` lines ``genmem eval --pairs`` reads. A
    problem's question is the one its provenance records (a game's opening for TextWorld).
    """
    from genmem.envs.benches import seed_sources

    kinds = {f"{source}-train" for source in seed_sources()}
    pairs = []
    for entry in bank.entries():
        for src in (entry.metadata or {}).get("sources", []):
            query = source_query(src)
            if src.get("source") in kinds and query:
                pairs.append({"query": query, "reference_sid": str(entry.sid)})
        if limit is not None and len(pairs) >= limit:
            return pairs[:limit]
    return pairs
