"""Settings, records and summaries of an online evolution run (``experiments.evolution``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from genmem.envs.stats import DEFAULT_INTERVALS, IntervalConfig
from genmem.experiments.evolution_stats import (
    BlockOperations,
    CheckpointPair,
    CheckpointScore,
)
from genmem.experiments.run_config import GraphRunConfig

__all__ = [
    "ABLATION",
    "EVOLVE_METHODS",
    "EvolveConfig",
    "EvolveMethod",
    "EvolveSummary",
    "PooledEvolveSummary",
    "StreamRecord",
    "check_evolve_methods",
]

EvolveMethod = Literal["sid", "greedy", "frozen", "tfidf", "dense", "none"]
EVOLVE_METHODS: tuple[EvolveMethod, ...] = ("sid", "greedy", "frozen", "tfidf", "dense", "none")
ABLATION = {
    "sid": "full",
    "frozen": "w/o MemEvolver (frozen bank)",
    "tfidf": "TF-IDF + evolution",
    "dense": "dense + evolution",
    "none": "w/o MemRetriever (no memory)",
    "greedy": "greedy SID decoding (no beam)",
}


def check_evolve_methods(methods: Sequence[str] | str) -> list[EvolveMethod]:
    """Parse ``"sid,frozen"`` or a list into known, distinct methods (ValueError otherwise)."""
    from genmem.experiments.methods import check_methods

    return check_methods(methods, EVOLVE_METHODS)


class EvolveConfig(GraphRunConfig):
    """The schedule and the probe methods of an evolution run, beside the model and budgets of
    :class:`~genmem.experiments.run_config.GraphRunConfig`."""

    blocks: int = Field(ge=1, description="Stream blocks, B; a probe follows each.")
    block_size: int = Field(ge=1, description="Stream queries per block, S.")
    probe_size: int = Field(
        ge=1, description="Probe queries, P, sampled once, disjoint from the stream."
    )
    methods: list[EvolveMethod] = Field(default_factory=lambda: ["sid", "frozen", "tfidf", "dense"])
    seed: int = Field(default=0, ge=0, description="Seed of the probe sample.")
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        description="Sampling temperature of every role (default: the model's own; the local "
        "model decodes greedily).",
    )
    seeds: int = Field(
        default=1,
        ge=1,
        description="Repeat the run over N decoding seeds and pool the probes by task "
        "(sampling models only: a greedy model runs once, as every seed would decode the same).",
    )
    decode_seed: int = Field(
        default=0, ge=0, description="The decoding seed of this run (set per repeat by seeds)."
    )
    rerun_controls: bool = Field(
        default=False,
        description="Run the frozen and none controls at every checkpoint even with a greedy "
        "model (by default their t0 runs are reused: same graph, task and snapshot).",
    )

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, value: Any) -> list[EvolveMethod]:
        return check_evolve_methods(value)


class StreamRecord(BaseModel):
    """One stream query: what it read, how it scored, what it wrote."""

    index: int
    block: int
    id: str
    score: float | None = None
    success: bool = False
    sid: str | None = None
    addresser: str | None = Field(default=None, description="What chose ``sid``.")
    retrieved: list[str] = Field(default_factory=list)
    update: dict[str, Any] | None = None
    update_sid: str | None = None
    evolve_error: dict[str, Any] | None = None
    seconds: float = 0.0
    error: str | None = None


class EvolveSummary(BaseModel):
    """Everything ``summary.json`` holds."""

    bench: str
    config: EvolveConfig
    input_bank: str
    work_bank: str
    probe_ids: list[str]
    stream_ids: list[str]
    checkpoints: list[CheckpointScore]
    paired: list[CheckpointPair] = Field(
        default_factory=list,
        description="sid minus frozen at each checkpoint, by probe task (when both ran).",
    )
    blocks: list[BlockOperations]
    stream_score_per_block: list[float | None] = Field(
        description="Mean stream score per block, an errored query counting 0."
    )
    invariance: dict[str, Any]
    concentration: dict[str, float]
    ablation: dict[str, float | None]
    snapshots: list[str]
    files: dict[str, str]
    seconds: float
    intervals: IntervalConfig = DEFAULT_INTERVALS
    note: str | None = Field(default=None, description="How the seeds were used, if asked for.")


class PooledEvolveSummary(BaseModel):
    """``summary.json`` of a run repeated over decoding seeds: probe results pooled by task."""

    bench: str
    config: EvolveConfig
    decode_seeds: list[int]
    seed_runs: dict[str, str] = Field(description="Seed -> that repeat's own summary.json.")
    probe_ids: list[str]
    checkpoints: list[CheckpointScore]
    paired: list[CheckpointPair]
    stream_score_per_block: list[float | None] = Field(
        description="Mean stream score per block over every seed's queries (errors count 0)."
    )
    ablation: dict[str, float | None]
    files: dict[str, str]
    seconds: float
    intervals: IntervalConfig = DEFAULT_INTERVALS
    note: str
