"""Building a bank from seed experiences: quantise, group by SID, consolidate, insert.

Each seed experience gets the SID its embedding quantises to under the frozen codebooks.
Experiences that land on the same SID become one entry, merged by a *consolidator*: a
deterministic concatenation by default, an LLM merge once a model backend is plugged in (any
callable with the :data:`Consolidator` signature). Slots that are already occupied are left as
they are, so rerunning a build after an interruption continues where it stopped.

With a ``gate`` every record passes the write gate (:mod:`genmem.memory.gate`) on its own,
grounded in its provenance (its task, question or run) or, without any, in its own text; a
refused record is logged as a ``rejected`` event at its slot and left out. A model-written merge
of the records that passed is checked too; if the gate refuses it, that is logged and the slot
gets the records' concatenation instead (a join of records that passed is not checked again).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from tqdm.auto import tqdm

from genmem.errors import InvalidUpdate
from genmem.memory.bank import Bank
from genmem.memory.gate import DEFAULT_GATE, GateConfig, WriteGate
from genmem.memory.sid import SID

__all__ = [
    "BuildReport",
    "Consolidator",
    "ExperienceRecord",
    "build_bank",
    "concat_consolidate",
    "group_by_sid",
    "record_sources",
    "source_query",
]

PROVENANCE_KEYS = ("query", "question", "answer", "trajectory")
"""Metadata fields that hold what a record was written from (the gate's grounding)."""
QUERY_KEYS = ("query", "question")
"""Where a source names its task: cold-start runs write ``query``, seed rows ``question``."""


class ExperienceRecord(BaseModel):
    """One seed experience: its text and whatever else its source line carried."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The experience summary that is encoded and stored.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Provenance fields.")

    @field_validator("text")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("an experience needs non-empty text")
        return value

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ExperienceRecord:
        """``{"text": ..., **metadata}`` as read from a JSONL line."""
        rest = {k: v for k, v in obj.items() if k != "text"}
        return cls(text=obj.get("text", ""), metadata=rest)


Consolidator = Callable[[SID, Sequence[ExperienceRecord]], str]
"""Merge the experiences that share one SID into one payload."""


def concat_consolidate(sid: SID, records: Sequence[ExperienceRecord]) -> str:
    """Deterministic merge: distinct texts in input order, numbered when there are several."""
    texts = list(dict.fromkeys(r.text.strip() for r in records))
    if len(texts) == 1:
        return texts[0]
    body = "\n\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1))
    return f"{len(texts)} experiences share this address:\n\n{body}"


def group_by_sid(
    records: Sequence[ExperienceRecord], sids: Sequence[SID]
) -> dict[SID, list[ExperienceRecord]]:
    """Records grouped by their SID, slots in code order, records in input order."""
    if len(records) != len(sids):
        raise InvalidUpdate(f"{len(records)} records but {len(sids)} SIDs; they must pair up")
    groups: dict[SID, list[ExperienceRecord]] = {}
    for rec, sid in zip(records, sids, strict=True):
        groups.setdefault(sid, []).append(rec)
    return dict(sorted(groups.items()))


def record_sources(records: Sequence[ExperienceRecord]) -> list[str]:
    """What the records at one slot were written from: their provenance, else their texts."""
    found = [str(r.metadata[k]) for r in records for k in PROVENANCE_KEYS if r.metadata.get(k)]
    return found or [r.text for r in records]


def source_query(source: object) -> str:
    """The task text one ``metadata["sources"]`` item names, else ``""``."""
    if not isinstance(source, dict):
        return ""
    for key in QUERY_KEYS:
        value = source.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


class BuildReport(BaseModel):
    """What a build did."""

    bank_id: str
    records: int = Field(description="Seed experiences read.")
    slots: int = Field(description="Distinct SIDs they quantised to.")
    inserted: int = Field(description="Entries written by this run.")
    skipped_occupied: int = Field(description="Slots already filled (earlier run): untouched.")
    merged_slots: int = Field(description="Slots holding more than one record.")
    max_records_per_slot: int
    rejected: dict[str, int] = Field(
        default_factory=dict, description="Payloads the write gate refused, per reason."
    )
    merge_fallbacks: int = Field(
        default=0, description="Refused merges replaced by the records' concatenation."
    )
    seconds: float


def build_bank(
    bank: Bank,
    records: Sequence[ExperienceRecord],
    sids: Sequence[SID],
    *,
    consolidate: Consolidator = concat_consolidate,
    actor: str = "bank-build",
    progress: bool = True,
    gate: GateConfig | None = DEFAULT_GATE,
) -> BuildReport:
    """Write one consolidated entry per SID into ``bank`` (occupied slots are skipped).

    ``gate`` (on by default; None writes every payload) refuses junk as explained above.
    """
    started = time.perf_counter()
    for s in sids:
        bank.sid(s)  # every SID must fit the bank before anything is written
    groups = group_by_sid(records, sids)
    inserted = skipped = fallbacks = 0
    rejected: Counter[str] = Counter()
    items: Iterable[tuple[SID, list[ExperienceRecord]]] = groups.items()
    if progress:
        items = tqdm(items, total=len(groups), desc="bank build", unit="slot")
    for sid, recs in items:
        if bank.get(sid) is not None:
            skipped += 1
            continue
        if gate is not None:  # each record on its own, grounded in its own provenance
            verdicts = [WriteGate(tuple(record_sources([r])), gate).check(r.text) for r in recs]
            for v in verdicts:
                if v.action == "reject":
                    rejected[str(v.reason)] += 1
                    bank.refuse(sid, "insert", v, actor=actor)
            recs = [r for r, v in zip(recs, verdicts, strict=True) if v.action != "reject"]
            if not recs:
                continue
        payload = consolidate(sid, recs)
        meta = {"n_records": len(recs), "sources": [r.metadata for r in recs]}
        writers = {r.metadata.get("writer") for r in recs}
        if len(writers) == 1 and None not in writers:  # who wrote the entry, at a glance
            meta["writer"] = writers.pop()
        joined = concat_consolidate(sid, recs)
        # A join of records that passed is not checked again (repeated labels such as
        # "Check:" across records are not junk); a merge the model wrote is.
        merged = gate is not None and payload != joined
        check = WriteGate(tuple(record_sources(recs)), gate) if merged else None  # type: ignore[arg-type]
        result = bank.insert(sid, payload, actor=actor, metadata=meta, gate=check)
        if result.outcome == "rejected":  # the merge failed, not the records: join them
            rejected[str(result.reason)] += 1
            meta["merge_rejected"] = result.reason
            result = bank.insert(sid, joined, actor=actor, metadata=meta)
            fallbacks += 1
        inserted += result.outcome == "inserted"
    sizes = [len(r) for r in groups.values()]
    return BuildReport(
        bank_id=bank.bank_id,
        records=len(records),
        slots=len(groups),
        inserted=inserted,
        skipped_occupied=skipped,
        merged_slots=sum(1 for n in sizes if n > 1),
        max_records_per_slot=max(sizes, default=0),
        rejected=dict(rejected),
        merge_fallbacks=fallbacks,
        seconds=time.perf_counter() - started,
    )
