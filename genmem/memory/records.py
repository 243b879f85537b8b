"""Records that flow in and out of a bank: updates, versions, events, lookup hits, statistics.

These are pydantic models because models write some of them (an :class:`Update` is what
MemEvolver emits) and users read the rest as JSON.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ApplyResult",
    "BankInfo",
    "BankStats",
    "Entry",
    "Event",
    "Hit",
    "LookupResult",
    "Op",
    "Outcome",
    "Update",
    "Version",
]

Op = Literal["insert", "revise"]
"""What a writer asks for: fill an empty slot, or replace the payload of an occupied one."""

Outcome = Literal["inserted", "revised", "retained", "deleted", "rejected"]
"""What a write did: a new entry, a new payload, the same payload kept, a tombstone, or nothing
because the write gate refused the payload (the event records the gate's reason)."""

_SID_SHAPE = re.compile(r"\s*(<SID_L\d+_\d+>)+\s*")


class Update(BaseModel):
    """One validated update tuple ``(op, sid, payload)``; the bank checks the SID against its spec.

    ``revise`` with the payload unchanged is a retention, with new text a revision, with an empty
    payload a deletion. ``insert`` needs a non-empty payload and an empty slot.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Op = Field(description="'insert' for an empty slot, 'revise' for an occupied one.")
    sid: str = Field(description="Target address, e.g. <SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>.")
    payload: str = Field(description="The experience text to store at the SID ('' deletes).")
    expected_version: int | None = Field(
        default=None,
        ge=1,
        description="Optional optimistic check for revise: the version the writer read.",
    )

    @field_validator("sid")
    @classmethod
    def _sid_shape(cls, value: str) -> str:
        if not _SID_SHAPE.fullmatch(value):
            raise ValueError(
                f"sid {value!r} is not a sequence of SID tokens like <SID_L1_3><SID_L2_0>..."
            )
        return value.strip()


class Version(BaseModel):
    """One stored version of a slot; a deletion is a version with ``deleted=True``."""

    model_config = ConfigDict(frozen=True)

    sid: str
    version: int = Field(ge=1)
    payload: str
    deleted: bool = False
    created_at: float
    actor: str = "api"
    metadata: dict[str, Any] = Field(default_factory=dict)


class Entry(BaseModel):
    """A live entry: the current version of an occupied slot."""

    model_config = ConfigDict(frozen=True)

    sid: str
    version: int
    payload: str
    updated_at: float
    actor: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_version(cls, v: Version) -> Entry:
        """The live view of a non-deleted version."""
        return cls(
            sid=v.sid,
            version=v.version,
            payload=v.payload,
            updated_at=v.created_at,
            actor=v.actor,
            metadata=v.metadata,
        )


class Event(BaseModel):
    """One line of a bank's append-only operation log."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(description="Position in the store-wide log; increases with time.")
    op: Op
    outcome: Outcome
    sid: str
    version_before: int | None = Field(description="Live version replaced, None if slot empty.")
    version_after: int | None = Field(description="Live version after, None after a deletion.")
    time: float
    actor: str
    reason: str | None = Field(
        default=None, description="Why the write gate refused the write (rejected events only)."
    )


class Hit(BaseModel):
    """One entry returned by a lookup."""

    sid: str
    match_depth: int = Field(description="Leading levels shared with the requested SID (L=exact).")
    version: int
    payload: str


class LookupResult(BaseModel):
    """The answer to one requested SID: an exact hit, or its nearest occupied relatives."""

    query: str
    exact: bool
    hits: list[Hit]


class ApplyResult(BaseModel):
    """What one write did."""

    op: Op
    outcome: Outcome
    sid: str
    version_before: int | None
    version_after: int | None
    seq: int
    reason: str | None = Field(default=None, description="The gate's reason for a rejection.")
    detail: str | None = Field(default=None, description="What the gate found, for people.")


class BankInfo(BaseModel):
    """A bank's identity: id, address space and the codebooks it was built with."""

    bank_id: str
    sizes: list[int]
    codebook_hash: str
    created_at: float
    read_only: bool = False
    parent: str | None = Field(default=None, description="Source bank of a snapshot.")
    snapshot_seq: int | None = Field(
        default=None, description="Last event of the parent included in a snapshot."
    )


class BankStats(BaseModel):
    """Counts that describe a bank."""

    bank_id: str
    sizes: list[int]
    codebook_hash: str
    read_only: bool
    entries: int = Field(description="Occupied slots (live entries).")
    versions: int = Field(description="Stored versions, tombstones included.")
    tombstones: int = Field(description="Slots whose latest version is a deletion.")
    events: int
    outcomes: dict[str, int] = Field(description="Event counts per outcome.")
    rejections: dict[str, int] = Field(
        default_factory=dict, description="Writes the gate refused, per reason."
    )
    occupied_prefixes: list[int] = Field(description="Distinct occupied prefixes per depth.")
    capacity: int
    leaf_utilization: float = Field(description="entries / capacity.")
