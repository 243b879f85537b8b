"""Statistics of an online memory self-evolution run: probe scores, operations, concentration.

Pure functions over probe records and bank :class:`~genmem.memory.records.Event` logs; the
figures that draw them live in :mod:`genmem.experiments.evolution_plots`.

Probe scores (:func:`checkpoint_scores`) average over every probe run, a run that errored
counting as a failure (score 0, no hit). Each comes with a percentile bootstrap interval over
probe tasks; when a run was repeated over decoding seeds, a task's repeats are first averaged
into one value, so the bootstrap resamples tasks with their seeds kept together (the seeds of a
task share its difficulty and are not independent draws). :func:`paired_checkpoints` gives, at
each checkpoint, one method minus another (``sid`` minus ``frozen``: what evolution added) over
the probe tasks both ran, with its interval and wins / losses / ties.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field
from rapidfuzz.distance import Levenshtein

from genmem.envs.stats import (
    DEFAULT_INTERVALS,
    Estimate,
    IntervalConfig,
    PairedDiff,
    mean_interval,
    paired_difference,
    task_means,
)
from genmem.memory.records import Event

__all__ = [
    "HIT_KEYS",
    "OPS",
    "BlockOperations",
    "CheckpointPair",
    "CheckpointScore",
    "ProbeRecord",
    "block_operations",
    "checkpoint_scores",
    "concentration_curve",
    "edit_distance",
    "paired_checkpoints",
    "probe_values",
    "top_share",
]

HIT_KEYS: tuple[str, ...] = ("candidate_hit", "hit_at_1", "hit_at_5")
"""Retrieval hits of a probe run whose task has a reference SID."""


class ProbeRecord(BaseModel):
    """One read-only probe run of one method at one checkpoint."""

    checkpoint: int
    method: str
    id: str
    score: float = 0.0
    success: bool = False
    metrics: dict[str, float] = Field(default_factory=dict)
    sid: str | None = None
    addresser: str | None = Field(default=None, description="What chose ``sid``.")
    candidates: list[str] = Field(default_factory=list)
    ranked: list[str] = Field(default_factory=list)
    retrieved: list[str] = Field(default_factory=list)
    hits: dict[str, bool] | None = None
    prefix_depth: dict[str, int] | None = Field(
        default=None,
        description="With a reference SID: the deepest level l at which some SID among the "
        "first 1 ('at_1') or 5 ('at_5') ranked agrees with it on levels 1..l (0: none).",
    )
    seconds: float = 0.0
    error: str | None = None
    reused_from: str | None = Field(
        default=None,
        description="'t<c>/<method>' when this row repeats a run with the same inputs (a greedy "
        "model on the same snapshot) instead of running again; seconds is then 0.",
    )


class CheckpointScore(BaseModel):
    """One method's probe result at one checkpoint, with bootstrap intervals over tasks."""

    checkpoint: int
    processed: int = Field(description="Stream queries processed before this probe.")
    method: str
    n: int = Field(description="Probe runs (tasks x seeds), errored ones included.")
    score: float
    success_rate: float
    candidate_hit: float | None = None
    hit_at_1: float | None = None
    hit_at_5: float | None = None
    errors: int = Field(default=0, description="Runs that errored, each counted as a failure.")
    reused: int = Field(default=0, description="Rows that repeat an earlier run's result.")
    seeds: int = Field(default=1, description="Runs per task pooled into its value.")
    ci: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Interval over tasks of score, success_rate and each hit rate present.",
    )
    prefix_hits: dict[str, list[Estimate]] | None = Field(
        default=None,
        description="With reference SIDs: H_{1:l}@1 ('at_1') and @5 ('at_5') for l = 1..L.",
    )


class CheckpointPair(BaseModel):
    """``method`` minus ``baseline`` at one checkpoint, by probe task."""

    checkpoint: int
    processed: int
    method: str
    baseline: str
    paired: dict[str, PairedDiff] = Field(
        description="Per quantity (score, success_rate, hit rates both have)."
    )


def probe_values(record: ProbeRecord, levels: int) -> dict[str, float]:
    """A probe run as numbers: score, success, hits, prefix hits (all 0 if the run errored)."""
    failed = record.error is not None
    values = {
        "score": 0.0 if failed else float(record.score),
        "success_rate": 0.0 if failed else float(record.success),
    }
    if record.hits is not None:
        for key in HIT_KEYS:
            values[key] = 0.0 if failed else float(record.hits.get(key, False))
    if record.prefix_depth is not None:
        for at in ("at_1", "at_5"):
            depth = 0 if failed else record.prefix_depth.get(at, 0)
            for level in range(1, levels + 1):
                values[f"prefix_{at}_{level}"] = float(depth >= level)
    return values


def _per_task(rows: Iterable[ProbeRecord], levels: int) -> dict[str, dict[str, float]]:
    """Quantity -> task id -> that task's value, its repeats (seeds) averaged."""
    pairs: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for row in rows:
        for key, value in probe_values(row, levels).items():
            pairs[key].append((row.id, value))
    return {key: task_means(items) for key, items in pairs.items()}


def checkpoint_scores(
    probes: Sequence[ProbeRecord],
    *,
    checkpoints: int,
    block_size: int,
    methods: Sequence[str],
    levels: int,
    intervals: IntervalConfig = DEFAULT_INTERVALS,
) -> list[CheckpointScore]:
    """Each method's probe means at checkpoints ``0..checkpoints - 1``, with intervals."""
    grouped: dict[tuple[int, str], list[ProbeRecord]] = defaultdict(list)
    for p in probes:
        grouped[(p.checkpoint, p.method)].append(p)
    out = []
    for c in range(checkpoints):
        for method in methods:
            rows = grouped.get((c, method), [])
            per_task = _per_task(rows, levels)
            est = {k: mean_interval(list(v.values()), intervals) for k, v in per_task.items()}

            def mean(key: str, est: dict[str, Estimate | None] = est) -> float | None:
                e = est.get(key)
                return None if e is None else e.mean

            prefix = None
            if "prefix_at_1_1" in est:  # every level of both depths is present, or none
                prefix = {
                    at: [est[f"prefix_{at}_{lv}"] for lv in range(1, levels + 1)]
                    for at in ("at_1", "at_5")
                }
            repeats = defaultdict(int)
            for row in rows:
                repeats[row.id] += 1
            out.append(
                CheckpointScore(
                    checkpoint=c,
                    processed=c * block_size,
                    method=method,
                    n=len(rows),
                    score=mean("score") or 0.0,
                    success_rate=mean("success_rate") or 0.0,
                    candidate_hit=mean("candidate_hit"),
                    hit_at_1=mean("hit_at_1"),
                    hit_at_5=mean("hit_at_5"),
                    errors=sum(r.error is not None for r in rows),
                    reused=sum(r.reused_from is not None for r in rows),
                    seeds=max(repeats.values(), default=1),
                    ci={
                        k: e.ci
                        for k in ("score", "success_rate", *HIT_KEYS)
                        if (e := est.get(k)) is not None
                    },
                    prefix_hits=prefix,
                )
            )
    return out


def paired_checkpoints(
    probes: Sequence[ProbeRecord],
    *,
    checkpoints: int,
    block_size: int,
    levels: int,
    method: str = "sid",
    baseline: str = "frozen",
    intervals: IntervalConfig = DEFAULT_INTERVALS,
) -> list[CheckpointPair]:
    """``method`` minus ``baseline`` at each checkpoint on the probe tasks both ran."""
    out = []
    for c in range(checkpoints):
        mine = _per_task((p for p in probes if (p.checkpoint, p.method) == (c, method)), levels)
        base = _per_task((p for p in probes if (p.checkpoint, p.method) == (c, baseline)), levels)
        paired = {}
        for key in ("score", "success_rate", *HIT_KEYS):
            if key in mine and key in base:
                pair = paired_difference(mine[key], base[key], intervals)
                if pair is not None:
                    paired[key] = pair
        if paired:
            out.append(
                CheckpointPair(
                    checkpoint=c,
                    processed=c * block_size,
                    method=method,
                    baseline=baseline,
                    paired=paired,
                )
            )
    return out


OPS: tuple[str, ...] = ("inserted", "revised", "retained", "deleted", "rejected", "no_write")
"""Per-query results of a block, in plotting order: the write outcomes (``rejected``: the gate
refused the payload), then no write."""


class BlockOperations(BaseModel):
    """What the queries of one stream block did to the bank."""

    block: int = Field(ge=1, description="1-based block index.")
    queries: int = Field(ge=0, description="Queries processed in the block.")
    inserted: int = 0
    revised: int = 0
    retained: int = 0
    deleted: int = 0
    rejected: int = Field(default=0, description="Updates the write gate refused.")
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
