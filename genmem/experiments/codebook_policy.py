"""What a codebook shape does for an aligned policy and for an agent: one ablation row's extras.

The codebook ablation (:mod:`genmem.experiments.codebook_ablation`) scores each bank's
codebooks and its quantizer. With ``align_steps`` it also aligns one policy per bank
(:func:`~genmem.training.align.run_align`, addressing mappings only) and scores that policy's
addresses on the questions alignment held out, beside the quantizer and TF-IDF with the same
candidate budget and reranker. Every bank holds the same source questions and the held-out
ones are drawn by text, so the rows score the same questions and their differences pair by
question. With ``tasks`` the row's addresser (its aligned policy, else its quantizer) serves
the ``sid`` method of an evaluation through the graph, and a ``none`` run, made once for all
rows, is the baseline each row's score pairs with.

Each piece is resumable: a finished alignment (``run.json`` says ``done``) is not trained
again (one of another step count is refused, never replaced), and evaluations resume from
their records. An alignment stopped part-way starts again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from genmem.envs.stats import DEFAULT_INTERVALS, IntervalConfig, PairedDiff
from genmem.errors import GenMemError
from genmem.graph.stack import DEFAULT_MAX_STEPS
from genmem.policies.backends import DEFAULT_MODEL_SPEC
from genmem.policies.baselines import DEFAULT_K
from genmem.policies.types import RETRIEVER_ALLOWED, AllowedMode

__all__ = [
    "METHODS",
    "AlignedHits",
    "AlignmentMismatch",
    "CodebookPolicyConfig",
    "Rate",
    "TaskScores",
    "align_and_score",
    "none_scores",
    "paired_rows",
    "rate",
    "score_tasks",
]


class AlignmentMismatch(GenMemError, ValueError):
    """An output folder holds a finished alignment of another step count (kept, not replaced)."""


class Rate(BaseModel):
    """A rate (or mean score) with its bootstrap interval."""

    rate: float
    ci: tuple[float, float]


def rate(values: Sequence[float | bool], settings: IntervalConfig = DEFAULT_INTERVALS) -> Rate:
    """The mean of ``values`` with its bootstrap interval (0 [0, 0] for none)."""
    from genmem.envs.stats import mean_interval

    estimate = mean_interval([float(v) for v in values], settings)
    return (
        Rate(rate=0.0, ci=(0.0, 0.0))
        if estimate is None
        else Rate(rate=estimate.mean, ci=estimate.ci)
    )


class CodebookPolicyConfig(BaseModel):
    """How each row's policy is aligned and how its tasks are run (0 turns a part off).

    Each field's description is the help of its ``genmem experiment codebooks`` flag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    align_steps: int = Field(
        default=0,
        description="Optimiser steps of each bank's alignment, whose policy's held-out hits are "
        "scored (0: no alignment).",
    )
    preset: str = Field(
        default="cpu-lora",
        description="Training preset of the alignments (as genmem train align --config).",
    )
    candidates: int = Field(
        default=DEFAULT_K, description="Candidates every addresser proposes per question."
    )
    align_eval: int = Field(
        default=32,
        description="Queries per split of each alignment's own before/after prefix accuracy (0: "
        "none; the held-out hits are scored on every held-out question either way).",
    )
    tasks: int = Field(default=0, description="Tasks scored through the graph per bank (0: none).")
    bench: str = Field(default="gsm8k-test", description="Bench the tasks come from.")
    model: str = Field(default=DEFAULT_MODEL_SPEC, description="Chat model of the graph's roles.")
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, description="StackPlanner's step budget.")
    max_new_tokens: int | None = Field(default=None, description="Reply cap of every model call.")
    allowed: AllowedMode = Field(
        default=RETRIEVER_ALLOWED,
        description="SIDs MemRetriever may decode in the task runs (all, occupied, prefix).",
    )

    @model_validator(mode="after")
    def _check(self) -> CodebookPolicyConfig:
        if min(self.align_steps, self.tasks, self.align_eval) < 0:
            raise ValueError("align steps, eval size and tasks are counts: 0 or more")
        if self.candidates < 5:
            raise ValueError(f"candidates={self.candidates}: Hit@5 needs at least 5")
        return self


METHODS = ("sid", "sid_reranked", "tfidf", "tfidf_reranked", "quantizer_reranked")
"""What :class:`AlignedHits` scores: the aligned policy's own beam and TF-IDF's own list, each
also through the reranker, and the quantizer's candidates through the reranker."""


class AlignedHits(BaseModel):
    """An aligned policy's addresses on the questions its alignment held out, beside TF-IDF."""

    policy: str = Field(description="The policy directory (--model local:DIR).")
    steps: int
    train_seconds: float
    candidates: int = Field(description="Candidates each method proposed per question.")
    heldout: int = Field(description="Held-out questions scored.")
    hit_at_1: dict[str, Rate] = Field(description="Per method of METHODS.")
    hit_at_5: dict[str, Rate] = Field(description="Per method of METHODS.")
    vs_tfidf: dict[str, PairedDiff] = Field(
        description="Hit@5, paired by question: 'sid - tfidf' (each its own list) and "
        "'sid_reranked - tfidf_reranked' (both through the reranker)."
    )
    per_query: dict[str, dict[str, bool]] = Field(
        description="Question -> method -> Hit@5, for differences paired across rows."
    )


class TaskScores(BaseModel):
    """The ``sid`` method's task score with one bank's addresser, against ``none``."""

    bench: str
    n: int
    addresser: str = Field(description="What addressed: generative (aligned) or quantizer.")
    score: Rate
    errors: int = Field(description="Runs that errored; each scores 0.")
    vs_none: PairedDiff | None = None
    per_task: dict[str, float]


def align_and_score(
    bank_url: str, out: Path, settings: CodebookPolicyConfig, *, progress: bool = True
) -> AlignedHits:
    """Align a policy on ``bank_url`` into ``out`` (unless done) and score its held-out hits."""
    from genmem.envs.bundled import replace_text
    from genmem.envs.stats import paired_difference
    from genmem.experiments.retrieval_eval import (
        baseline_ranker,
        evaluate_retrieval,
        load_pairs,
        reranker_fn,
        sid_ranker,
    )
    from genmem.memory.location import open_bank
    from genmem.policies.addressing import bank_quantizer
    from genmem.policies.baselines import TfidfRetriever
    from genmem.policies.rerank import RerankConfig, Reranker

    done = _finished(out)  # checked before the bank opens: a mismatch changes nothing
    if done is not None and done.get("steps") != settings.align_steps:
        raise AlignmentMismatch(
            f"{out} holds a finished alignment of {done.get('steps')} steps, not "
            f"{settings.align_steps}: give that step count, or another --out"
        )
    saved = out / "hits.json"  # the scores of this policy, kept for a rerun
    if done is not None and saved.is_file():
        try:
            hits = AlignedHits.model_validate_json(saved.read_text(encoding="utf-8"))
        except ValueError:  # written by an older version: scored again
            hits = None
        if hits and hits.candidates == settings.candidates and hits.steps == settings.align_steps:
            return hits
    bank = open_bank(bank_url)
    report = done or _align(bank, out, settings, progress)
    pairs = load_pairs(out / "heldout_pairs.jsonl", spec=bank.spec)
    rerank = reranker_fn(Reranker(bank, RerankConfig()))
    policy = _once(sid_ranker(_generator(out, bank)))  # one beam, scored twice
    tfidf = _once(baseline_ranker(TfidfRetriever.from_bank(bank)))
    rankers = {
        "sid": (policy, False),
        "sid_reranked": (policy, True),
        "tfidf": (tfidf, False),
        "tfidf_reranked": (tfidf, True),
        "quantizer_reranked": (sid_ranker(bank_quantizer(bank, "occupied")), True),
    }
    reports = {
        name: evaluate_retrieval(
            pairs,
            rank,
            settings.candidates,
            rerank=rerank if reranked else None,
            spec=bank.spec,
            progress=progress,
        )
        for name, (rank, reranked) in rankers.items()
    }
    per_query = {
        p.query: {name: r.per_query[i].hit_at_5 for name, r in reports.items()}
        for i, p in enumerate(pairs)
    }
    flags = {
        name: {p.query: float(h[name]) for p, h in zip(pairs, per_query.values(), strict=True)}
        for name in reports
    }
    vs = {
        f"{a} - {b}": paired_difference(flags[a], flags[b])
        for a, b in (("sid", "tfidf"), ("sid_reranked", "tfidf_reranked"))
    }
    hits = AlignedHits(
        policy=str(out),
        candidates=settings.candidates,
        steps=int(report["steps"]),
        train_seconds=float(report.get("seconds", 0.0)),
        heldout=len(pairs),
        hit_at_1={n: rate([q.hit_at_1 for q in r.per_query]) for n, r in reports.items()},
        hit_at_5={n: rate([q.hit_at_5 for q in r.per_query]) for n, r in reports.items()},
        vs_tfidf={name: d for name, d in vs.items() if d is not None},
        per_query=per_query,
    )
    replace_text(saved, hits.model_dump_json(indent=2) + "\n")
    return hits


def _once(rank: Any) -> Any:
    """``rank``, asked once per (query, k): later calls get the first answer."""
    seen: dict[tuple[str, int], list[str]] = {}

    def cached(query: str, k: int) -> list[str]:
        if (query, k) not in seen:
            seen[query, k] = list(rank(query, k))
        return seen[query, k]

    return cached


def _align(bank: Any, out: Path, settings: CodebookPolicyConfig, progress: bool) -> dict[str, Any]:
    """Align a policy on ``bank`` into ``out``; its report."""
    from genmem.training.align import run_align
    from genmem.training.align_data import ADDRESSING, AlignDataConfig
    from genmem.training.config import load_preset

    preset = load_preset(settings.preset)
    report = run_align(
        bank,
        out,
        preset=preset,
        max_steps=settings.align_steps,
        data=AlignDataConfig(seed=preset.seed, weights=dict(ADDRESSING)),
        max_eval=settings.align_eval,
        progress=progress,
    )
    return report.model_dump(mode="json")


def _finished(out: Path) -> dict[str, Any] | None:
    """The report of a finished alignment in ``out`` (None: none, or not finished)."""
    try:
        run = json.loads((out / "run.json").read_text(encoding="utf-8"))
        if run.get("status") != "done":
            return None
        return json.loads((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _generator(policy_dir: Path, bank: Any) -> Any:
    """The aligned policy's SID decoder over ``bank``'s occupied SIDs."""
    from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator

    return TransformersSIDGenerator.load(
        str(policy_dir), bank=bank, config=SIDDecodingConfig(allowed="occupied")
    )


def _task_settings(settings: CodebookPolicyConfig, methods: list[str], bank_url: str | None) -> Any:
    from genmem.experiments.evaluate import EvalConfig

    return EvalConfig(
        methods=methods,  # type: ignore[arg-type]
        limit=settings.tasks,
        model=settings.model,
        bank_url=bank_url,
        addresser="auto",
        allowed=settings.allowed,
        max_steps=settings.max_steps,
        max_new_tokens=settings.max_new_tokens,
    )


def _scores(records: Sequence[Any]) -> dict[str, float]:
    """Task id -> score; an errored run scores 0."""
    return {r.id: 0.0 if r.error else float(r.score) for r in records}


def none_scores(
    env: Any, out: Path, settings: CodebookPolicyConfig, *, progress: bool = True
) -> dict[str, float]:
    """The ``none`` method's score per task (run once, shared by every row)."""
    from genmem.experiments.evaluate import evaluate, read_records

    report = evaluate(env, _task_settings(settings, ["none"], None), out=out, progress=progress)
    return _scores(read_records(Path(report.records)))


def score_tasks(
    env: Any,
    bank_url: str,
    out: Path,
    settings: CodebookPolicyConfig,
    baseline: Mapping[str, float],
    *,
    policy_dir: Path | None = None,
    progress: bool = True,
) -> TaskScores:
    """The ``sid`` method on ``bank_url``, addressed by the aligned policy in ``policy_dir``
    (else the bank's quantizer), paired with ``baseline`` (the ``none`` scores)."""
    from genmem.envs.stats import paired_difference
    from genmem.experiments.evaluate import evaluate, read_records
    from genmem.graph.addressing import choose_generator

    factory = None
    if policy_dir is not None:

        def factory(bank: Any, config: Any) -> Any:
            policy = _generator(policy_dir, bank)
            return choose_generator(bank, config, policy.policy, lambda: policy, "MemRetriever")

    report = evaluate(
        env,
        _task_settings(settings, ["sid"], bank_url),
        out=out,
        sid_generator=factory,
        progress=progress,
    )
    records = read_records(Path(report.records))
    scores = _scores(records)
    addressers = sorted({r.addresser for r in records if r.addresser})
    return TaskScores(
        bench=env.name,
        n=len(scores),
        addresser=",".join(addressers) or "none",
        score=rate(list(scores.values())),
        errors=sum(1 for r in records if r.error),
        vs_none=paired_difference(scores, baseline),
        per_task=scores,
    )


def paired_rows(
    rows: Sequence[tuple[str, AlignedHits | None, TaskScores | None]],
) -> dict[str, dict[str, PairedDiff]]:
    """Every two rows, ``a - b`` (a listed first): aligned Hit@5 per question, task score."""
    from genmem.envs.stats import paired_difference

    out: dict[str, dict[str, PairedDiff]] = {}
    for i, (a, hits_a, tasks_a) in enumerate(rows):
        for b, hits_b, tasks_b in rows[i + 1 :]:
            diffs: dict[str, PairedDiff | None] = {}
            if hits_a is not None and hits_b is not None:
                for method in ("sid", "sid_reranked"):
                    diffs[f"{method}_hit_at_5"] = paired_difference(
                        {q: float(h[method]) for q, h in hits_a.per_query.items()},
                        {q: float(h[method]) for q, h in hits_b.per_query.items()},
                    )
            if tasks_a is not None and tasks_b is not None:
                diffs["task_score"] = paired_difference(tasks_a.per_task, tasks_b.per_task)
            kept = {name: d for name, d in diffs.items() if d is not None}
            if kept:
                out[f"{a} - {b}"] = kept
    return out
