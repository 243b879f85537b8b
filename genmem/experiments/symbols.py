"""The SID-symbol experiment: do a task's addresses help a solver with no experience text?

For each task the addresser gives ``k`` SIDs (``k`` in ``beams``). The same solver (the
StackPlanner graph, one budget) then answers the task under each condition, the extra input
handed over as its support:

- ``raw``: the task alone (one run per task, shared by every ``k``);
- ``l1``, ``l1_l2``, ``l1_l3``, ``full``: the first 1, 2, 3 or all levels of the ``k`` SIDs,
  written level-first (every level-1 token of the ``k`` SIDs, then every level-2 token, ...), no
  text. A bank of fewer than 4 levels has no ``l1_l3`` (it would equal ``full``);
- ``rewrite``: MemRetriever's rewrite of the entries the ``k`` SIDs look up;
- ``retrieved``: those entries as they are, without the rewrite;
- controls at full depth: ``shuffled`` (the SIDs of another task of the run, a seeded
  permutation with no task keeping its own) and ``random`` (``k`` valid addresses drawn
  uniformly from the codebooks' address space, seeded by task and ``k``).

Every symbolic condition shows the same header before its tokens, so conditions differ only in
the tokens. A model whose tokenizer lacks the SID tokens reads them as text
(:func:`sid_token_form`). Each task's SIDs and text supports are made once and kept in
``addresses.jsonl``; runs are written to ``records.jsonl`` as they finish. A rerun into the same
folder reuses both and skips what is done; an errored run scores 0. The summary gives each
condition's mean score with a bootstrap interval and its paired difference against ``raw``, task
by task.
"""

from __future__ import annotations

import hashlib
import random
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
from genmem.memory.sid import SID, SIDSpec
from genmem.policies.prompts import NO_MEMORY_ANSWER, retriever_user_message
from genmem.policies.types import SIDCandidate, SIDGenerator

__all__ = [
    "CONDITIONS",
    "Condition",
    "ConditionResult",
    "Prepared",
    "SymbolRecord",
    "SymbolsConfig",
    "SymbolsReport",
    "conditions_for",
    "level_first",
    "random_sids",
    "run_symbols",
    "shuffled_order",
    "sid_token_form",
    "symbolic_support",
]

Condition = Literal[
    "raw", "l1", "l1_l2", "l1_l3", "full", "rewrite", "retrieved", "shuffled", "random"
]
CONDITIONS: tuple[Condition, ...] = get_args(Condition)
_DEPTH: dict[str, int] = {"l1": 1, "l1_l2": 2, "l1_l3": 3}
_TEXT = ("rewrite", "retrieved")
SYMBOLIC_HEADER = "Memory addresses (SID tokens) for this task, all level-1 codes first:"
"""The line before the tokens of every symbolic condition."""


class SymbolsConfig(BaseModel):
    """What the experiment runs: beam sizes, conditions, the solver's budget, seeds.

    Each field's description is the help of its ``genmem experiment symbols`` flag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    beams: tuple[int, ...] = Field(
        default=(1, 5, 10), description="SIDs per task (the addresser's beam width)."
    )
    conditions: tuple[Condition, ...] = Field(
        default=CONDITIONS,
        description="Which conditions run (raw always does: the others are paired with it).",
    )
    max_steps: int = Field(
        default=DEFAULT_MAX_STEPS, description="The solver's coordinator steps per run."
    )
    memory_k: int = Field(
        default=1,
        description="Entries one SID's lookup returns (its exact entry, else its nearest "
        "relatives).",
    )
    seed: int = Field(default=0, description="Seed of the shuffled and random SIDs (the controls).")

    @field_validator("conditions", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        return check_conditions(value, CONDITIONS)

    @model_validator(mode="after")
    def _check(self) -> SymbolsConfig:
        if not self.beams or any(not 1 <= k <= 50 for k in self.beams):
            raise ValueError(f"beams={self.beams}: each k must be 1 to 50")
        if len(set(self.beams)) != len(self.beams):
            raise ValueError(f"beams={self.beams}: each k once")
        if self.max_steps < 1 or self.memory_k < 1:
            raise ValueError("max_steps and memory_k must be >= 1")
        return self


def conditions_for(config: SymbolsConfig, levels: int) -> list[Condition]:
    """The conditions that run for a bank of ``levels`` levels, in the canonical order."""
    chosen = {"raw", *config.conditions}
    return [c for c in CONDITIONS if c in chosen and (c not in _DEPTH or _DEPTH[c] < levels)]


def level_first(sids: Sequence[SID], depth: int) -> str:
    """The first ``depth`` levels of ``sids``, level by level (all level-1 tokens first)."""
    return "".join(
        sid.spec.token(level + 1, sid.codes[level]) for level in range(depth) for sid in sids
    )


def symbolic_support(sids: Sequence[SID], depth: int) -> str:
    """What a symbolic condition hands the solver: the header, then the level-first tokens."""
    return f"{SYMBOLIC_HEADER}\n{level_first(sids, depth)}"


def shuffled_order(ids: Sequence[str], seed: int) -> dict[str, str]:
    """Each task id -> the id whose SIDs it gets: a seeded permutation with no fixed point."""
    if len(ids) < 2:
        return {}
    rng = random.Random(f"shuffle:{seed}")
    order = list(ids)
    while True:
        rng.shuffle(order)
        if all(a != b for a, b in zip(ids, order, strict=True)):
            return dict(zip(ids, order, strict=True))


def random_sids(spec: SIDSpec, k: int, key: str, seed: int) -> list[SID]:
    """``k`` distinct addresses drawn uniformly from ``spec``'s space, seeded by ``key``."""
    digest = hashlib.sha256(f"random:{seed}:{key}:{k}".encode()).hexdigest()
    rng = random.Random(int(digest, 16))
    seen: dict[tuple[int, ...], None] = {}
    while len(seen) < min(k, spec.capacity):
        seen[tuple(rng.randrange(n) for n in spec.sizes)] = None
    return [spec.make(codes) for codes in seen]


def sid_token_form(chat: Any, spec: SIDSpec) -> Literal["vocabulary", "text"]:
    """``vocabulary`` when the solver's tokenizer holds the SID tokens, else ``text``."""
    from genmem.policies.chat_local import ChatLocal

    if not isinstance(chat, ChatLocal):
        return "text"  # a served model: the tokens reach it as plain text
    vocab = chat.policy.tokenizer.get_vocab()
    return "vocabulary" if all(t in vocab for t in spec.tokens()) else "text"


class SymbolRecord(SolverRun):
    """One solver run: a task under one condition and beam size."""

    k: int = Field(description="SIDs per task; 0 for raw, which does not depend on k.")
    sids: list[str] = Field(default_factory=list, description="The SIDs the condition used.")
    support_source: str | None = Field(
        default=None, description="rewrite: the model's rewrite, entry, or none (text only)."
    )
    support_refused: str | None = None


class ConditionResult(BaseModel):
    """A condition at one ``k``: its mean score and the difference to ``raw``, task by task."""

    condition: str
    k: int
    n: int = Field(description="Tasks scored (an errored run scores 0).")
    errors: int
    score: Estimate
    vs_raw: PairedDiff | None = Field(description="This condition minus raw; None for raw.")


class SymbolsReport(BaseModel):
    """The whole experiment: settings, what addressed, and every condition's result."""

    bench: str
    metric: str
    tasks: int
    beams: list[int]
    levels: int
    addresser: str
    sid_tokens: Literal["vocabulary", "text"] = Field(
        description="How the solver reads SID tokens: as vocabulary items or as plain text."
    )
    conditions: dict[str, dict[str, ConditionResult]] = Field(
        description="condition -> k -> result; raw is one set of runs, shown under every k."
    )
    skipped: dict[str, str] = Field(default_factory=dict, description="Condition -> why not.")
    settings: dict[str, Any] = Field(default_factory=dict)
    records: str
    intervals: IntervalConfig = DEFAULT_INTERVALS


class _Given:
    """An addresser that answers with SIDs chosen beforehand (the same ones every condition)."""

    def __init__(self, spec: SIDSpec, table: dict[tuple[str, int], list[SIDCandidate]], name: str):
        self._spec, self.table, self.addresser = spec, table, name

    @property
    def spec(self) -> SIDSpec:
        """The address space."""
        return self._spec

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """The candidates chosen for ``context`` at ``k``."""
        return self.table[(context, k)]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for each context."""
        return [self.generate(c, k) for c in contexts]


def _records(path: Path) -> list[SymbolRecord]:
    from genmem.envs.bundled import jsonl_rows

    return [SymbolRecord.model_validate(row) for row in jsonl_rows(path)]


def run_symbols(
    env: Environment,
    bank_url: str,
    config: SymbolsConfig,
    *,
    out: Path,
    chat: Any,
    generator: SIDGenerator,
    limit: int | None = None,
    progress: bool = True,
    concurrency: int = 1,
    intervals: IntervalConfig = DEFAULT_INTERVALS,
    on_record: Callable[[SymbolRecord], None] | None = None,
) -> SymbolsReport:
    """Run every condition on ``env``'s first ``limit`` tasks; write records and the summary.

    ``generator`` addresses each task (``k`` candidates per beam size); ``chat`` is the one
    model behind the solver and MemRetriever's rewrite.
    """
    from tqdm.auto import tqdm

    from genmem.envs.bundled import append_jsonl
    from genmem.envs.pool import run_tasks, task_workers
    from genmem.experiments.contamination import check_bank_is_clean
    from genmem.graph.stackplanner import compile_planner
    from genmem.memory.location import open_bank

    bank = open_bank(bank_url)
    tasks = env.tasks(limit)
    check_bank_is_clean(bank, tasks)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "records.jsonl"
    conditions = conditions_for(config, bank.spec.levels)
    skipped = {c: "the bank has no more than 3 levels: l1_l3 is full" for c in config.conditions
               if c in _DEPTH and c not in conditions}  # fmt: skip
    if "shuffled" in conditions and len(tasks) < 2:
        conditions.remove("shuffled")
        skipped["shuffled"] = "needs at least 2 tasks to reassign SIDs"
    text = any(c in conditions for c in _TEXT)
    prepared = _prepare(out, bank_url, bank, generator, chat, tasks, config, text, progress)
    sids = {key: [bank.sid(x) for x in row.sids] for key, row in prepared.items()}
    other = shuffled_order([t.id for t in tasks], config.seed)
    solver = compile_planner(chat, env.tools(), config.max_steps)

    def support_of(task: Task, condition: str, k: int) -> tuple[list[SID], dict[str, Any]]:
        if condition == "raw":
            return [], {"support": None}
        own = sids[(task.id, k)]
        if condition in _TEXT:
            return own, dict(getattr(prepared[(task.id, k)], condition) or {})
        if condition == "shuffled":
            chosen = sids[(other[task.id], k)]
        elif condition == "random":
            chosen = random_sids(bank.spec, k, task.id, config.seed)
        else:
            chosen = own
        depth = _DEPTH.get(condition, bank.spec.levels)
        return chosen, {"support": symbolic_support(chosen, depth) if chosen else None}

    def run(item: tuple[Task, str, int]) -> SymbolRecord:
        task, condition, k = item
        chosen, given_support = support_of(task, condition, k)
        base = {"id": task.id, "condition": condition, "k": k, "sids": [str(s) for s in chosen]}
        base |= given_support
        return SymbolRecord(**base, **solve_task(env, solver, task, base["support"]))

    done = {(r.id, r.condition, r.k) for r in _records(path)}
    plan = [(t, c, 0 if c == "raw" else k) for t in tasks for c in conditions
            for k in (config.beams[:1] if c == "raw" else config.beams)]  # fmt: skip
    todo = [(t, c, k) for t, c, k in plan if (t.id, c, k) not in done]
    workers = task_workers(concurrency, env, what="solver runs")
    bar = tqdm(total=len(todo), desc=f"symbols {env.name}", unit="run", disable=not progress)
    for _, record in run_tasks(run, todo, concurrency=workers):
        append_jsonl(path, record)
        if on_record is not None:
            on_record(record)
        bar.update(1)
    bar.close()
    records = [r for r in _records(path) if r.id in {t.id for t in tasks}]
    report = SymbolsReport(
        bench=env.name,
        metric=env.metric_names[0] if env.metric_names else "score",
        tasks=len(tasks),
        beams=list(config.beams),
        levels=bank.spec.levels,
        addresser=next(iter(prepared.values())).addresser if prepared else "none",
        sid_tokens=sid_token_form(chat, bank.spec),
        conditions=_summaries(records, conditions, config.beams, intervals),
        skipped=skipped,
        settings={
            "bank": bank_url,
            "max_steps": config.max_steps,
            "memory_k": config.memory_k,
            "seed": config.seed,
        },
        records=str(path),
        intervals=intervals,
    )
    (out / "summary.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return report


class Prepared(BaseModel):
    """A task's SIDs at one ``k`` and, for the text conditions, what they look up."""

    id: str
    k: int
    sids: list[str]
    addresser: str
    retrieved: dict[str, Any] | None = None
    rewrite: dict[str, Any] | None = None


def _prepare(
    out: Path,
    bank_url: str,
    bank: Any,
    generator: SIDGenerator,
    chat: Any,
    tasks: Sequence[Task],
    config: SymbolsConfig,
    text: bool,
    progress: bool,
) -> dict[tuple[str, int], Prepared]:
    """(task, k) -> its SIDs and text supports, from ``addresses.jsonl`` or made now and added.

    A rerun reuses what the file holds, so every condition of a task keeps the same SIDs.
    """
    from tqdm.auto import tqdm

    from genmem.envs.bundled import append_jsonl, jsonl_rows
    from genmem.policies.addressing import addresser_name

    path = out / "addresses.jsonl"
    known = {(r.id, r.k): r for r in map(Prepared.model_validate, jsonl_rows(path))}
    name = addresser_name(generator)
    jobs = [(t, k) for k in config.beams for t in tasks
            if (t.id, k) not in known or (text and known[(t.id, k)].rewrite is None)]  # fmt: skip
    bar = tqdm(total=len(jobs), desc="address + lookup", unit="run", disable=not progress)
    for k in config.beams:
        todo = [t for t, j in jobs if j == k]
        fresh = [t for t in todo if (t.id, k) not in known]
        contexts = [retriever_user_message(t.query) for t in fresh]
        for task, found in zip(fresh, generator.generate_batch(contexts, k=k), strict=True):
            known[(task.id, k)] = Prepared(
                id=task.id, k=k, sids=[str(bank.sid(c.sid)) for c in found], addresser=name
            )
        for task in todo:
            row = known[(task.id, k)]
            if text:
                row = row.model_copy(update=_read(bank_url, bank, chat, task, row, config))
            known[(task.id, k)] = row
            append_jsonl(path, row)
            bar.update(1)
    bar.close()
    return {(t.id, k): known[(t.id, k)] for t in tasks for k in config.beams}


def _read(
    bank_url: str, bank: Any, chat: Any, task: Task, row: Prepared, config: SymbolsConfig
) -> dict[str, Any]:
    """The ``retrieved`` and ``rewrite`` supports of ``row``'s SIDs, read through MemRetriever."""
    from genmem.graph.retriever import RetrieverConfig, build_retriever_graph

    candidates = [SIDCandidate(sid=s, score=-float(i)) for i, s in enumerate(row.sids)]
    given = _Given(
        bank.spec, {(retriever_user_message(task.query), row.k): candidates}, row.addresser
    )
    retriever = build_retriever_graph(
        chat, sid_generator=given, config=RetrieverConfig(beam=row.k, lookup="candidates")
    ).compile()
    context = {"bank_url": bank_url, "memory_k": config.memory_k}
    state = retriever.invoke({"query": task.query}, context=context)
    hits = list(dict.fromkeys(h["payload"] for h in state.get("retrieved") or []))
    # text only: the entries without their addresses, which are the symbolic conditions'
    shown = entries_support(hits)
    return {
        "retrieved": {
            "support": shown or NO_MEMORY_ANSWER,
            "support_source": "entry" if shown else "none",
        },
        "rewrite": {
            "support": state.get("support") or NO_MEMORY_ANSWER,
            "support_source": state.get("support_source"),
            "support_refused": state.get("support_refused"),
        },
    }


def _summaries(
    records: Sequence[SymbolRecord],
    conditions: Sequence[str],
    beams: Sequence[int],
    intervals: IntervalConfig,
) -> dict[str, dict[str, ConditionResult]]:
    def scores(condition: str, k: int) -> dict[str, float]:
        return scores_by_task(r for r in records if r.condition == condition and r.k == k)

    raw = scores("raw", 0)
    out: dict[str, dict[str, ConditionResult]] = {}
    for condition in conditions:
        out[condition] = {}
        for k in beams:
            values = raw if condition == "raw" else scores(condition, k)
            estimate = mean_interval(list(values.values()), intervals)
            if estimate is None:
                continue
            at = 0 if condition == "raw" else k
            source = [r for r in records if r.condition == condition and r.k == at]
            out[condition][str(k)] = ConditionResult(
                condition=condition,
                k=k,
                n=len(values),
                errors=sum(1 for r in source if r.error),
                score=estimate,
                vs_raw=None if condition == "raw" else paired_difference(values, raw, intervals),
            )
    return out
