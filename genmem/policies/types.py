"""Shared contracts of the policies layer: SID candidates and the interfaces that produce them.

Every way of addressing a memory entry (a generative policy decoding SIDs, the quantizer
baseline, a content retriever over payloads) answers with the same thing: a ranked list of
:class:`SIDCandidate`, best first, distinct SIDs, each with a score where higher is better.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from genmem.memory.sid import SIDSpec

__all__ = ["RETRIEVER_ALLOWED", "AllowedMode", "SIDCandidate", "SIDGenerator"]

AllowedMode = Literal["all", "occupied", "prefix"]
"""Which SIDs constrained decoding may produce: every address of the spec, only occupied
leaves of a bank, or any leaf under an occupied parent (the depth L-1 prefix of some entry)."""

RETRIEVER_ALLOWED: AllowedMode = "occupied"
"""Which SIDs a memory reader (MemRetriever) decodes by default: only addresses that hold an
entry, so every candidate's lookup finds a payload. Writers (MemEvolver, composition) and the
bare decoders keep ``all``: an update may go to an empty address, and a decoder may have no bank
to read the occupied ones from."""


class SIDCandidate(BaseModel):
    """One ranked address: a canonical SID string and its score (higher is better)."""

    model_config = ConfigDict(frozen=True)

    sid: str = Field(description="Canonical SID, e.g. <SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>.")
    score: float = Field(description="Log-probability, similarity or negative distance.")


@runtime_checkable
class SIDGenerator(Protocol):
    """Context in, ``k`` ranked distinct SID candidates out."""

    @property
    def spec(self) -> SIDSpec:
        """The address space the candidates belong to."""
        ...

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """Up to ``k`` distinct candidates for one context, best first."""
        ...

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts (one list per context, in order)."""
        ...
