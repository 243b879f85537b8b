"""Run the closed-loop graph over a stream of queries and keep one record per query.

Used by ``genmem run`` and ``genmem demo``: every query goes through the compiled ``genmem``
graph in order (in ``evolve`` mode each update is applied before the next query), one JSON
line per query is appended to ``results.jsonl`` as soon as it finishes, and a summary is
written at the end. A rerun into the same folder skips the queries already recorded.

With ``concurrency`` > 1 that many queries run at once (``read_only`` and ``no_memory`` only:
in ``evolve`` mode a query must read the bank its predecessors left) and lines land in the
order queries finish; the records returned are in query order.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from genmem.envs.stats import DEFAULT_INTERVALS, IntervalConfig, mean_interval

__all__ = ["QueryRecord", "RunSummary", "load_queries", "memory_op", "run_stream", "summarize"]


class QueryRecord(BaseModel):
    """What one query did in the closed loop."""

    id: str
    query: str
    mode: str
    sid: str | None = None
    addresser: str | None = Field(
        default=None, description="What chose ``sid``: generative or quantizer."
    )
    retrieved: list[dict[str, Any]] = Field(default_factory=list)
    support: str | None = None
    answer: str | None = None
    reference: Any = None
    score: float | None = None
    outcome: str | None = None
    status: str | None = None
    trajectory: dict[str, Any] | None = None
    update: dict[str, Any] | None = None
    update_sid: str | None = None
    update_addresser: str | None = Field(
        default=None, description="What chose ``update_sid``: generative or quantizer."
    )
    evolve_error: dict[str, Any] | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = Field(default=None, description="Why the run failed, if it did.")
    seconds: float = 0.0

    def memory_op(self) -> str:
        """The memory operation in a word: inserted / revised / ..., rejected, or none."""
        return memory_op(self.update, self.evolve_error) or "none"


def memory_op(update: dict[str, Any] | None, evolve_error: dict[str, Any] | None) -> str | None:
    """What a run did to memory: the update's outcome, ``rejected (<why>)``, or None."""
    if update:
        return str(update.get("outcome"))
    if evolve_error:
        if evolve_error.get("kind") == "gated":
            return f"rejected (gate: {evolve_error.get('gate_reason')})"
        return f"rejected ({evolve_error.get('kind')})"
    return None


class RunSummary(BaseModel):
    """Totals over a run."""

    queries: int
    answered: int
    scored: int = Field(description="Queries with a score, errored ones with a reference included.")
    accuracy: float | None = Field(description="Mean score over the scored queries.")
    accuracy_ci: tuple[float, float] | None = Field(
        default=None, description="Bootstrap interval of the accuracy over the scored queries."
    )
    errors: int
    operations: dict[str, int]
    mean_seconds: float
    settings: dict[str, Any] = Field(default_factory=dict)
    intervals: IntervalConfig = DEFAULT_INTERVALS


def load_queries(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Queries from a JSONL file: ``query`` or ``question``; ``reference``/``answer(s)``; ``id``.

    A GSM8K-style ``answer`` ending in ``#### <number>`` becomes that number. An optional
    ``outcome`` (e.g. ``"success"``) is the caller's own verdict on the task, which MemEvolver may
    see; the reference is only ever used for scoring.
    """
    from genmem.envs.bundled import read_jsonl
    from genmem.envs.gsm8k import gold_number

    rows: list[dict[str, Any]] = []
    for n, row in read_jsonl(path):
        text = row.get("query") or row.get("question")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}:{n}: needs a non-empty 'query' or 'question' string")
        ref = row.get("reference", row.get("answers", row.get("answer")))
        if isinstance(ref, str) and "####" in ref:
            ref = gold_number(ref)
        outcome = row.get("outcome")
        if outcome is not None and (not isinstance(outcome, str) or not outcome.strip()):
            raise ValueError(f"{path}:{n}: 'outcome' must be a non-empty string when given")
        item = {"id": str(row.get("id", f"{path.stem}-{n}")), "query": text, "reference": ref}
        if outcome is not None:
            item["outcome"] = outcome.strip()
        rows.append(item)
        if limit is not None and len(rows) >= limit:
            break
    return rows


def run_stream(
    app: Any,
    queries: Sequence[dict[str, Any]],
    *,
    context: dict[str, Any],
    mode: str = "evolve",
    out: Path | None = None,
    progress: bool = True,
    on_record: Callable[[QueryRecord], None] | None = None,
    concurrency: int = 1,
) -> list[QueryRecord]:
    """Run ``app`` (a compiled ``genmem`` graph) on each query; returns the records in order.

    ``concurrency`` runs that many queries at once (not in ``evolve`` mode: ValueError).
    """
    from tqdm.auto import tqdm

    from genmem.envs.bundled import append_jsonl, jsonl_rows
    from genmem.envs.pool import run_tasks

    if concurrency > 1 and mode == "evolve":
        raise ValueError(
            f"concurrency {concurrency} in evolve mode: each update must be applied before the "
            "next query; run read_only or no_memory, or with concurrency 1"
        )
    results = out / "results.jsonl" if out is not None else None
    # One read of what an earlier run finished (a line torn by a kill is dropped and redone).
    rows = jsonl_rows(results) if results is not None else []
    records = [QueryRecord.model_validate(row) for row in rows]
    done = {r.id for r in records}
    todo = [q for q in queries if q["id"] not in done]

    def run(q: dict[str, Any]) -> QueryRecord:
        started = time.perf_counter()
        payload = {"query": q["query"], "mode": mode}
        for key in ("reference", "outcome"):
            if q.get(key) is not None:
                payload[key] = q[key]
        try:
            state = app.invoke(payload, context=context)
            fields = {k: v for k, v in state.items() if k in QueryRecord.model_fields}
            record = QueryRecord(**{**fields, "id": q["id"], "query": q["query"], "mode": mode})
        except Exception as exc:  # one failing query must not lose the stream
            record = QueryRecord(id=q["id"], query=q["query"], mode=mode, error=repr(exc))
        record.reference = q.get("reference")
        record.seconds = round(time.perf_counter() - started, 2)
        return record

    bar = tqdm(total=len(todo), desc=f"closed loop ({mode})", disable=not progress, unit="query")
    new: dict[int, QueryRecord] = {}
    jobs = list(enumerate(todo))
    for (i, _), record in run_tasks(lambda job: run(job[1]), jobs, concurrency=concurrency):
        new[i] = record
        if results is not None:
            results.parent.mkdir(parents=True, exist_ok=True)
            append_jsonl(results, record)
        if on_record is not None:
            on_record(record)
        bar.update(1)
    bar.close()
    return records + [new[i] for i in sorted(new)]


def summarize(
    records: Sequence[QueryRecord],
    settings: dict[str, Any] | None = None,
    *,
    scoring: bool = True,
    intervals: IntervalConfig = DEFAULT_INTERVALS,
) -> RunSummary:
    """Totals: answers, accuracy over scored queries, memory operations, time per query.

    With ``scoring`` on (a scorer ran), a query that errored but had a reference is scored 0:
    a crash is a wrong answer, never a query left out of the accuracy.
    """
    scored = [
        r.score if r.score is not None else 0.0
        for r in records
        if r.score is not None or (scoring and r.error and r.reference is not None)
    ]
    estimate = mean_interval(scored, intervals)
    ops = Counter(r.memory_op() for r in records if r.mode == "evolve" and not r.error)
    return RunSummary(
        queries=len(records),
        answered=sum(1 for r in records if r.answer),
        scored=len(scored),
        accuracy=None if estimate is None else estimate.mean,
        accuracy_ci=None if estimate is None else estimate.ci,
        errors=sum(1 for r in records if r.error),
        operations=dict(ops),
        mean_seconds=sum(r.seconds for r in records) / len(records) if records else 0.0,
        settings=settings or {},
        intervals=intervals,
    )
