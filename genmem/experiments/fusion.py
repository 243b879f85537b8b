"""Does a fused entry help more than either of its sources? (issue 22, composition)

For each task the two entries most similar to it (TF-IDF or dense over the bank's payloads) are
the sources ``A`` and ``B``. The fusion graph (:mod:`genmem.graph.compose`) fuses them: the
model writes one entry, the addresser places it, and the write goes through the bank's gate.
It writes into a scratch copy of the bank made for that task (``out/scratch.db``), so the
input bank never changes and no task sees another task's fusion. Then the same solver
(StackPlanner, one budget) answers the task under each condition, the text handed over as its
support:

- ``none``: the task alone;
- ``a``, ``b``: one source entry;
- ``both``: the two sources, one after the other (what fusion has to beat to be worth a write);
- ``fused``: the fused entry if the gate let it into the bank; a refused fusion leaves the task
  with no support, which is what an agent reading that bank would get;
- ``unchecked``: the model's fused text whatever the gate said (what the gate's refusals cost
  or spared).

``pairs.jsonl`` keeps each task's sources and fusion (made once); ``records.jsonl`` keeps the
runs as they finish. A rerun into the same folder reuses both. An errored run scores 0. The
summary holds every condition's mean with a bootstrap interval and the paired differences of
``fused`` against ``a``, ``b``, the better of the two per task, ``both`` and ``none``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from genmem.envs.base import Environment, Task
from genmem.envs.stats import (
    DEFAULT_INTERVALS,
    Estimate,
    IntervalConfig,
    PairedDiff,
    mean_interval,
    paired_difference,
)
from genmem.experiments.solve import (
    SolverRun,
    check_conditions,
    entries_support,
    scores_by_task,
    solve_task,
)
from genmem.graph.stack import DEFAULT_MAX_STEPS
from genmem.policies.addressing import Addresser, check_addresser

__all__ = [
    "FUSION_CONDITIONS",
    "FusionCondition",
    "FusionConfig",
    "FusionPair",
    "FusionRecord",
    "FusionReport",
    "fusion_table",
    "run_fusion",
]

FusionCondition = Literal["none", "a", "b", "both", "fused", "unchecked"]
FUSION_CONDITIONS: tuple[FusionCondition, ...] = get_args(FusionCondition)
_COMPARED = ("a", "b", "best_source", "both", "none")
"""What ``fused`` is compared with; ``best_source`` is the better of ``a`` and ``b`` per task."""
_WRITTEN = ("inserted", "revised")


class FusionConfig(BaseModel):
    """What the experiment runs: how sources are found, how the fusion is addressed, budgets.

    Each field's description is the help of its ``genmem experiment fusion`` flag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conditions: tuple[FusionCondition, ...] = Field(
        default=FUSION_CONDITIONS,
        description="Which conditions run (fused always does: the others are compared with it).",
    )
    pair_by: Literal["tfidf", "dense"] = Field(
        default="tfidf", description="How each task's two source entries are found."
    )
    addresser: Addresser = Field(
        default="auto",
        description="What places the fused entry (auto: an aligned policy, else the quantizer).",
    )
    max_steps: int = Field(
        default=DEFAULT_MAX_STEPS, description="The solver's coordinator steps per run."
    )

    @field_validator("conditions", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        return check_conditions(value, FUSION_CONDITIONS)

    @field_validator("pair_by", mode="before")
    @classmethod
    def _pair_by(cls, value: Any) -> Any:
        if value not in ("tfidf", "dense"):
            raise ValueError(f"pair_by={value!r}: use tfidf or dense")
        return value

    @field_validator("addresser", mode="before")
    @classmethod
    def _addresser(cls, value: Any) -> Any:
        return check_addresser(value)

    @model_validator(mode="after")
    def _check(self) -> FusionConfig:
        if self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        return self


class FusionPair(BaseModel):
    """A task's two sources and what fusing them gave."""

    id: str
    sources: list[str] = Field(description="The SIDs of A and B.")
    payloads: list[str] = Field(description="Their entries, as read.")
    fused: str | None = Field(default=None, description="The model's fused text.")
    sid: str | None = Field(default=None, description="Where the fusion was written (C).")
    addresser: str | None = None
    outcome: str | None = Field(
        default=None, description="The bank's outcome: inserted, revised, retained or rejected."
    )
    reason: str | None = Field(default=None, description="The gate's reason for a refusal.")
    error: str | None = Field(default=None, description="Why there is no fusion at all.")
    scratch: str | None = Field(
        default=None, description="URL of the scratch copy of the bank the fusion went into."
    )

    @property
    def written(self) -> bool:
        """True when the fused entry went into the (scratch) bank."""
        return self.outcome in _WRITTEN


class FusionRecord(SolverRun):
    """One solver run: a task under one condition."""


class FusionReport(BaseModel):
    """The whole experiment: settings, what the gate did, every condition and comparison."""

    bench: str
    metric: str
    tasks: int
    fusions: dict[str, int] = Field(
        description="Fusion outcomes over the tasks: inserted, revised, rejected, error."
    )
    refusals: dict[str, int] = Field(description="The gate's reasons for refused fusions.")
    conditions: dict[str, Estimate]
    fused_vs: dict[str, PairedDiff] = Field(
        description="fused minus a, b, best_source (the better of a and b per task), both, none."
    )
    errors: dict[str, int] = Field(description="Errored runs per condition (each scored 0).")
    settings: dict[str, Any] = Field(default_factory=dict)
    records: str
    intervals: IntervalConfig = DEFAULT_INTERVALS


def _rows(path: Path, model: type[BaseModel]) -> list[Any]:
    from genmem.envs.bundled import jsonl_rows

    return [model.model_validate(row) for row in jsonl_rows(path)]


def _scratch_bank(export: Path, scratch: Path, task_id: str) -> str:
    """A fresh copy of the input bank for ``task_id`` in ``scratch``; its URL."""
    from genmem.memory.bank import import_bank
    from genmem.memory.location import open_store

    bank_id = "fuse-" + hashlib.sha256(task_id.encode()).hexdigest()[:16]
    url = f"sqlite:///{scratch.resolve()}?bank={bank_id}"
    store = open_store(url)
    if store.get_info(bank_id) is None:
        import_bank(store, export, bank_id=bank_id)
    return url


def _pairs(
    out: Path,
    bank_url: str,
    tasks: Sequence[Task],
    fuse: Any,
    config: FusionConfig,
    progress: bool,
) -> dict[str, FusionPair]:
    """Task id -> its sources and fusion, from ``pairs.jsonl`` or made now and appended."""
    from tqdm.auto import tqdm

    from genmem.envs.bundled import append_jsonl
    from genmem.experiments.methods import PayloadAddresser
    from genmem.memory.location import open_bank

    path = out / "pairs.jsonl"
    known = {p.id: p for p in _rows(path, FusionPair)}
    todo = [t for t in tasks if t.id not in known]
    if not todo:
        return known
    bank = open_bank(bank_url)
    export = out / "input-bank.jsonl"
    if not export.exists():
        bank.export_jsonl(export)
    index = PayloadAddresser(bank, config.pair_by)
    for task in tqdm(todo, desc="sources + fusion", unit="task", disable=not progress):
        found = [str(c.sid) for c in index.generate_batch([task.query], k=2)[0]]
        entries = [bank.get(s) for s in found]
        pair = FusionPair(
            id=task.id, sources=found, payloads=[e.payload for e in entries if e is not None]
        )
        if len(found) < 2:
            pair.error = f"{config.pair_by} found {len(found)} entries sharing words with the task"
        else:
            pair = _fuse(pair, fuse, _scratch_bank(export, out / "scratch.db", task.id), config)
        known[task.id] = pair
        append_jsonl(path, pair)
    return known


def _fuse(pair: FusionPair, fuse: Any, scratch_url: str, config: FusionConfig) -> FusionPair:
    """``pair`` with the fusion graph's result on the scratch bank."""
    context = {"bank_url": scratch_url, "addresser": config.addresser}
    pair = pair.model_copy(update={"scratch": scratch_url})
    try:
        state = fuse.invoke({"sids": pair.sources}, context=context)
    except Exception as exc:  # a failed fusion is this task's result, not the experiment's end
        return pair.model_copy(update={"error": repr(exc)})
    update = state.get("update") or {}
    error = state.get("error")
    return pair.model_copy(
        update={
            "fused": state.get("payload"),
            "sid": state.get("sid"),
            "addresser": state.get("addresser"),
            "outcome": update.get("outcome"),
            "reason": update.get("reason"),
            "error": None if not error else f"{error.get('kind')}: {error.get('message')}",
        }
    )


def _support(pair: FusionPair, condition: str) -> str | None:
    """What ``condition`` hands the solver for ``pair``'s task."""
    if condition == "none":
        return None
    chosen = {
        "a": pair.payloads[:1],
        "b": pair.payloads[1:2],
        "both": pair.payloads,
        "fused": [pair.fused] if pair.written and pair.fused else [],
        "unchecked": [pair.fused] if pair.fused else [],
    }[condition]
    return entries_support([p for p in chosen if p])


def run_fusion(
    env: Environment,
    bank_url: str,
    config: FusionConfig,
    *,
    out: Path,
    chat: Any,
    sid_generator: Any = None,
    limit: int | None = None,
    progress: bool = True,
    concurrency: int = 1,
    intervals: IntervalConfig = DEFAULT_INTERVALS,
    on_record: Callable[[FusionRecord], None] | None = None,
) -> FusionReport:
    """Fuse each task's two nearest entries and run every condition; write records and summary.

    ``chat`` is the one model behind the fusion and the solver; ``sid_generator`` (a generator
    or a factory, as the fusion graph takes it) places the fused entry.
    """
    from tqdm.auto import tqdm

    from genmem.envs.bundled import append_jsonl
    from genmem.envs.pool import run_tasks, task_workers
    from genmem.experiments.contamination import check_bank_is_clean
    from genmem.graph.compose import ComposeConfig, build_fuse_graph
    from genmem.graph.stackplanner import compile_planner
    from genmem.memory.location import open_bank

    tasks = env.tasks(limit)
    check_bank_is_clean(open_bank(bank_url), tasks)
    out.mkdir(parents=True, exist_ok=True)
    fuse = build_fuse_graph(
        chat, sid_generator=sid_generator, config=ComposeConfig(addresser=config.addresser)
    ).compile()
    pairs = _pairs(out, bank_url, tasks, fuse, config, progress)
    conditions = [c for c in FUSION_CONDITIONS if c in {"fused", *config.conditions}]
    solver = compile_planner(chat, env.tools(), config.max_steps)

    def run(item: tuple[Task, str]) -> FusionRecord:
        task, condition = item
        support = _support(pairs[task.id], condition)
        return FusionRecord(
            id=task.id,
            condition=condition,
            support=support,
            **solve_task(env, solver, task, support),
        )

    path = out / "records.jsonl"
    done = {(r.id, r.condition) for r in _rows(path, FusionRecord)}
    todo = [(t, c) for t in tasks for c in conditions if (t.id, c) not in done]
    workers = task_workers(concurrency, env, what="solver runs")
    bar = tqdm(total=len(todo), desc=f"fusion {env.name}", unit="run", disable=not progress)
    for _, record in run_tasks(run, todo, concurrency=workers):
        append_jsonl(path, record)
        if on_record is not None:
            on_record(record)
        bar.update(1)
    bar.close()
    ids = {t.id for t in tasks}
    records = [r for r in _rows(path, FusionRecord) if r.id in ids]
    report = _report(env, tasks, pairs, records, conditions, config, bank_url, intervals)
    report.records = str(path)
    (out / "summary.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return report


def _report(
    env: Environment,
    tasks: Sequence[Task],
    pairs: dict[str, FusionPair],
    records: Sequence[FusionRecord],
    conditions: Sequence[str],
    config: FusionConfig,
    bank_url: str,
    intervals: IntervalConfig,
) -> FusionReport:
    """The summary of ``records``: means, fused's paired differences, what the gate did."""
    scores = {c: scores_by_task(r for r in records if r.condition == c) for c in conditions}
    if "a" in scores and "b" in scores:
        a, b = scores["a"], scores["b"]
        scores["best_source"] = {k: max(a[k], b[k]) for k in a if k in b}
    means = {c: mean_interval(list(scores[c].values()), intervals) for c in conditions}
    versus = {
        other: paired_difference(scores["fused"], scores[other], intervals)
        for other in _COMPARED
        if other in scores
    }
    outcomes: dict[str, int] = {}
    refusals: dict[str, int] = {}
    for task in tasks:
        pair = pairs[task.id]
        kind = "error" if pair.error and not pair.outcome else pair.outcome or "error"
        outcomes[kind] = outcomes.get(kind, 0) + 1
        if pair.outcome == "rejected":
            reason = pair.reason or "unknown"
            refusals[reason] = refusals.get(reason, 0) + 1
    return FusionReport(
        bench=env.name,
        metric=env.metric_names[0] if env.metric_names else "score",
        tasks=len(tasks),
        fusions=outcomes,
        refusals=refusals,
        conditions={c: e for c, e in means.items() if e is not None},
        fused_vs={k: v for k, v in versus.items() if v is not None},
        errors={c: sum(1 for r in records if r.condition == c and r.error) for c in conditions},
        settings={
            "bank": bank_url,
            "pair_by": config.pair_by,
            "addresser": config.addresser,
            "max_steps": config.max_steps,
        },
        records="",
        intervals=intervals,
    )


def fusion_table(report: FusionReport) -> str:
    """The report as a short markdown summary: conditions, comparisons, what the gate did."""
    from genmem.envs.stats import format_interval

    lines = [
        f"{report.bench}: {report.tasks} tasks, {report.metric} in %; fusions: "
        + ", ".join(f"{k} {v}" for k, v in sorted(report.fusions.items()))
        + (
            " (refused: " + ", ".join(f"{k} {v}" for k, v in sorted(report.refusals.items())) + ")"
            if report.refusals
            else ""
        ),
        "| condition | score | errors |",
        "|---|---|---|",
    ]
    for name, est in report.conditions.items():
        shown = format_interval(est.mean, est.ci)
        lines.append(f"| {name} | {shown} | {report.errors.get(name, 0)} |")
    lines += ["", "| fused minus | difference | wins / losses / ties |", "|---|---|---|"]
    for name, diff in report.fused_vs.items():
        shown = format_interval(diff.diff, diff.ci, signed=True)
        lines.append(f"| {name} | {shown} | {diff.wins} / {diff.losses} / {diff.ties} |")
    lines.append(f"records: {report.records}")
    return "\n".join(lines)
