"""Statistics of an online memory self-evolution run: operation mix, edit size, concentration.

Pure functions over bank :class:`~genmem.memory.records.Event` logs; the figures that draw them
live in :mod:`genmem.envs.evolution_plots`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field
from rapidfuzz.distance import Levenshtein

from genmem.memory.records import Event

__all__ = [
    "OPS",
    "BlockOperations",
    "block_operations",
    "concentration_curve",
    "edit_distance",
    "top_share",
]

OPS: tuple[str, ...] = ("inserted", "revised", "retained", "deleted", "no_write")
"""Per-query results of a block, in plotting order: the four write outcomes, then no write."""


class BlockOperations(BaseModel):
    """What the queries of one stream block did to the bank."""

    block: int = Field(ge=1, description="1-based block index.")
    queries: int = Field(ge=0, description="Queries processed in the block.")
    inserted: int = 0
    revised: int = 0
    retained: int = 0
    deleted: int = 0
    no_write: int = Field(default=0, description="Queries of the block that wrote nothing.")
    mean_edit_distance: float | None = Field(
        default=None,
        description="Mean Levenshtein distance old->new over revised/deleted events; None if none.",
    )
    mean_edit_ratio: float | None = Field(
        default=None,
        description="Mean of distance / max(len(old), len(new), 1) over the same events.",
    )


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between two payloads (unit cost insert/delete/substitute)."""
    return int(Levenshtein.distance(a, b))


def block_operations(
    block: int,
    queries: int,
    events: Sequence[Event],
    payload_pairs: Sequence[tuple[str, str]],
) -> BlockOperations:
    """Count a block's outcomes; payload_pairs are (old, new) of its revised/deleted events."""
    if len(events) > queries:
        raise ValueError(
            f"block {block} has {len(events)} events but only {queries} queries; each query "
            "writes at most one update, so pass the block's query count and only its events"
        )
    counts = dict.fromkeys(OPS, 0)
    for event in events:
        counts[event.outcome] += 1
    counts["no_write"] = queries - len(events)
    distance = ratio = None
    if payload_pairs:
        distances = [edit_distance(old, new) for old, new in payload_pairs]
        ratios = [
            d / max(len(old), len(new), 1)
            for d, (old, new) in zip(distances, payload_pairs, strict=True)
        ]
        distance = sum(distances) / len(distances)
        ratio = sum(ratios) / len(ratios)
    return BlockOperations(
        block=block,
        queries=queries,
        mean_edit_distance=distance,
        mean_edit_ratio=ratio,
        **counts,
    )


def _active_counts(counts: Mapping[str, int]) -> list[int]:
    """Positive event counts, most active SID first."""
    return sorted((c for c in counts.values() if c > 0), reverse=True)


def concentration_curve(counts: Mapping[str, int]) -> tuple[list[float], list[float]]:
    """Lorenz-style curve: fraction of active SIDs (most active first) vs cumulative event share."""
    active = _active_counts(counts)
    total = sum(active)
    if not total:
        return [0.0], [0.0]
    n = len(active)
    xs = [i / n for i in range(n + 1)]
    ys = [0.0]
    running = 0
    for c in active:
        running += c
        ys.append(running / total)
    return xs, ys


def top_share(counts: Mapping[str, int], fraction: float = 0.2) -> float:
    """Share of events on the most active ``fraction`` of active SIDs (rounded up); 0.0 if none."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r} must lie in (0, 1], e.g. 0.2 for the top 20%")
    active = _active_counts(counts)
    total = sum(active)
    if not total:
        return 0.0
    # the epsilon keeps float noise (0.7 * 10 = 7.000000000000001) from taking one SID too many
    k = math.ceil(fraction * len(active) - 1e-9)
    return sum(active[:k]) / total
