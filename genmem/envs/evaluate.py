"""Benchmark evaluation through the graph: every method, the same model, budgets and stream.

For each method the ``genmem`` graph is built once with the environment's tools and that
method's addressing policy (:mod:`genmem.envs.methods`). Tasks run in a fixed order, every
method on a task before the next task, so a partial run compares the methods on equal terms.
``none`` runs in ``no_memory`` mode; the memory methods run ``read_only`` (the frozen-bank
control, the default) or ``evolve`` (each method on its own copy of the bank, so one method's
writes never reach another's). Every task is scored by its environment right after its run;
one JSON line per (method, task) is appended to ``records.jsonl`` as it finishes, and a rerun
into the same folder skips what is recorded. The summary holds the benchmark's metrics per
method, success per subtask, time per task and, when ``none`` ran too, the paper's contrastive
outcome of each memory method (with memory minus without, plus the bonus when both succeed).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from genmem.envs.base import Environment, Outcome, Task
from genmem.envs.methods import Method, check_methods, method_generator

__all__ = [
    "EvalRecord",
    "EvalReport",
    "EvalSettings",
    "MethodSummary",
    "evaluate",
    "summary_markdown",
]


class EvalSettings(BaseModel):
    """What an evaluation runs: methods, tasks, model, bank and budgets."""

    model_config = ConfigDict(extra="forbid")

    methods: list[Method] = Field(default_factory=lambda: ["none", "tfidf", "dense", "sid"])
    limit: int | None = Field(default=None, ge=1, description="First N tasks.")
    model: str = Field(default="local", description="Chat model spec for every role.")
    bank_url: str | None = Field(default=None, description="The bank memory methods read.")
    mode: Literal["read_only", "evolve"] = "read_only"
    candidates: int = Field(default=8, ge=1, le=50, description="Candidate budget per method.")
    allowed: Literal["all", "occupied", "prefix"] = Field(
        default="occupied", description="SIDs the sid method may decode."
    )
    rerank: bool = Field(default=True, description="Rerank candidates against the task.")
    memory_k: int = Field(default=5, ge=1, le=50, description="Entries a lookup returns.")
    max_steps: int = Field(default=3, ge=1, description="StackPlanner's step budget.")
    max_new_tokens: int | None = Field(
        default=None, ge=1, description="Reply cap of every model call (None: the backend's)."
    )

    def model_post_init(self, __context: Any) -> None:
        """Validate the method list and that memory methods have a bank."""
        self.methods = check_methods(self.methods)
        if any(m != "none" for m in self.methods) and not self.bank_url:
            raise ValueError("memory methods need a bank: set bank_url (or run only 'none')")


class EvalRecord(BaseModel):
    """One (method, task) run."""

    bench: str
    method: str
    id: str
    query: str
    answer: str | None = None
    reference: Any = None
    score: float = 0.0
    success: bool = False
    metrics: dict[str, float] = Field(default_factory=dict)
    subtask: str | None = None
    contrastive: float | None = None
    sid: str | None = None
    retrieved: list[dict[str, Any]] = Field(default_factory=list)
    support: str | None = None
    status: str | None = None
    memory_op: str | None = None
    seconds: float = 0.0
    error: str | None = None


class MethodSummary(BaseModel):
    """One method's results on one benchmark."""

    bench: str
    method: str
    n: int
    metrics: dict[str, float]
    success_rate: float
    per_subtask: dict[str, float] = Field(default_factory=dict)
    contrastive: float | None = None
    mean_seconds: float
    errors: int


class EvalReport(BaseModel):
    """Summaries per method, the settings, and where the records are."""

    bench: str
    settings: EvalSettings
    summaries: list[MethodSummary]
    records: str


def _records(path: Path) -> list[EvalRecord]:
    from genmem.envs.bundled import jsonl_rows

    return [EvalRecord.model_validate(row) for row in jsonl_rows(path)]


def _bank_for(method: Method, settings: EvalSettings, out: Path) -> str | None:
    """The bank URL a method uses: the given one, or its own copy in ``evolve`` mode."""
    if method == "none" or settings.bank_url is None:
        return settings.bank_url
    if settings.mode == "read_only":
        return settings.bank_url
    from genmem.envs.seed_bank import copy_bank_file
    from genmem.memory.location import parse_bank_url

    loc = parse_bank_url(settings.bank_url)
    if loc.scheme != "sqlite":
        raise ValueError("evolve mode copies the bank per method: give a sqlite:/// bank URL")
    target = out / "banks" / f"{method}.db"
    if not target.exists():
        copy_bank_file(Path(loc.location), target)
    return f"sqlite:///{target}?bank={loc.bank_id}"


def _memory_op(state: dict[str, Any]) -> str | None:
    update, error = state.get("update"), state.get("evolve_error")
    if update:
        return str(update.get("outcome"))
    if error:
        return f"rejected ({error.get('kind')})"
    return None


def evaluate(
    env: Environment,
    settings: EvalSettings,
    *,
    out: Path,
    model: Any = None,
    sid_generator: Any = None,
    progress: bool = True,
    on_record: Callable[[EvalRecord], None] | None = None,
) -> EvalReport:
    """Run every method over ``env``'s tasks through the graph; write records and a summary.

    ``model`` (a chat model) and ``sid_generator`` override ``settings.model`` and the SID
    method's own decoding, for tests and for trained policies.
    """
    from tqdm.auto import tqdm

    from genmem.envs.bundled import append_jsonl
    from genmem.graph.loop import build_genmem_graph
    from genmem.graph.retriever import RetrieverConfig
    from genmem.graph.stack import StackBudget
    from genmem.graph.stackplanner import StackPlannerConfig
    from genmem.policies.backends import capped_chat_model

    out.mkdir(parents=True, exist_ok=True)
    path = out / "records.jsonl"
    done = {(r.method, r.id) for r in _records(path)}
    tasks = env.tasks(settings.limit)
    tools = env.tools()
    current: dict[str, Task] = {}

    def scorer(answer: str | None, reference: Any) -> float:
        return env.score(current["task"], answer).score

    def observer(answer: str | None) -> str | None:
        return env.signal(env.score(current["task"], answer))

    chat = model
    if chat is None:
        chat = capped_chat_model(settings.model, settings.max_new_tokens)
    graphs: dict[str, tuple[Any, str, dict[str, Any]]] = {}

    def graph_for(method: Method) -> tuple[Any, str, dict[str, Any]]:
        """The compiled graph, mode and context of ``method`` (built on first use)."""
        if method not in graphs:
            app = build_genmem_graph(
                chat,
                sid_generator=sid_generator if method == "sid" else method_generator(method),
                retriever_config=RetrieverConfig(
                    beam=settings.candidates,
                    rerank=settings.rerank and settings.candidates > 1,
                    allowed=settings.allowed,
                ),
                planner_config=StackPlannerConfig(budget=StackBudget(max_steps=settings.max_steps)),
                solver_tools=tools.solver,
                research_tools=tools.research,
                interactor_tools=tools.interactor,
                scorer=scorer,
                # Only an environment's own verdict may reach MemEvolver, never the score.
                observer=observer if env.outcome_observable else None,
            ).compile()
            context: dict[str, Any] = {
                "max_steps": settings.max_steps,
                "memory_k": settings.memory_k,
            }
            bank_url = _bank_for(method, settings, out)
            if bank_url:
                context["bank_url"] = bank_url
            graphs[method] = (app, "no_memory" if method == "none" else settings.mode, context)
        return graphs[method]

    # Task by task, every method on a task before the next one: a partial run (or one stopped
    # and resumed) always compares the methods on the same tasks.
    todo = [(m, t) for t in tasks for m in settings.methods if (m, t.id) not in done]
    bar = tqdm(total=len(todo), desc=f"eval {env.name}", unit="run", disable=not progress)
    for method, task in todo:
        app, mode, context = graph_for(method)
        bar.set_postfix_str(f"{method} {task.id}")
        record = _run_one(env, app, task, method, mode, context, current)
        append_jsonl(path, record)  # cuts away a line torn by a killed run first
        if on_record is not None:
            on_record(record)
        bar.update(1)
    bar.close()
    records = _with_contrastive(_records(path))
    path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    report = EvalReport(
        bench=env.name,
        settings=settings,
        summaries=_summaries(env, records, settings.methods),
        records=str(path),
    )
    (out / "summary.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(report, env.metric_names), encoding="utf-8")
    return report


def _run_one(
    env: Environment,
    app: Any,
    task: Task,
    method: str,
    mode: str,
    context: dict[str, Any],
    current: dict[str, Task],
) -> EvalRecord:
    started = time.perf_counter()
    base = {
        "bench": env.name,
        "method": method,
        "id": task.id,
        "query": task.query,
        "reference": task.reference,
        "subtask": task.meta.get("subtask"),
    }
    current["task"] = task
    try:
        env.start(task)
        try:
            payload = {"query": task.query, "mode": mode, "reference": task.reference}
            state = app.invoke(payload, context=context)
            outcome: Outcome = env.score(task, state.get("answer"))
        finally:
            env.finish(task)
    except Exception as exc:  # one failing task must not lose the run
        seconds = round(time.perf_counter() - started, 2)
        return EvalRecord(**base, error=repr(exc), seconds=seconds)
    return EvalRecord(
        **base,
        answer=state.get("answer"),
        score=outcome.score,
        success=outcome.success,
        metrics=outcome.metrics,
        sid=state.get("sid"),
        retrieved=list(state.get("retrieved") or []),
        support=state.get("support"),
        status=state.get("status"),
        memory_op=_memory_op(state),
        seconds=round(time.perf_counter() - started, 2),
    )


def _with_contrastive(records: list[EvalRecord]) -> list[EvalRecord]:
    """Each memory method's record gets its contrastive outcome against ``none`` on that task."""
    from genmem.envs.scoring import contrastive_outcome

    baseline = {r.id: r for r in records if r.method == "none" and r.error is None}
    out = []
    for r in records:
        base = baseline.get(r.id)
        if r.method != "none" and base is not None and r.error is None:
            r = r.model_copy(update={"contrastive": contrastive_outcome(r.score, base.score)})
        out.append(r)
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _summaries(
    env: Environment, records: list[EvalRecord], methods: list[Method]
) -> list[MethodSummary]:
    by_method: dict[str, list[EvalRecord]] = defaultdict(list)
    for r in records:
        by_method[r.method].append(r)
    out = []
    for method in methods:
        rows = by_method.get(method, [])
        ok = [r for r in rows if r.error is None]
        names = sorted({k for r in ok for k in r.metrics}) or list(env.metric_names)
        subtasks: dict[str, list[float]] = defaultdict(list)
        for r in ok:
            if r.subtask:
                subtasks[r.subtask].append(float(r.success))
        contrast = [r.contrastive for r in ok if r.contrastive is not None]
        out.append(
            MethodSummary(
                bench=env.name,
                method=method,
                n=len(rows),
                metrics={k: _mean([r.metrics.get(k, 0.0) for r in ok]) for k in names},
                success_rate=_mean([float(r.success) for r in ok]),
                per_subtask={k: _mean(v) for k, v in sorted(subtasks.items())},
                contrastive=_mean(contrast) if contrast else None,
                mean_seconds=_mean([r.seconds for r in rows]),
                errors=len(rows) - len(ok),
            )
        )
    return out


def summary_markdown(report: EvalReport, metric_names: tuple[str, ...] = ()) -> str:
    """The summary as a Markdown table (one row per method), then the settings."""
    names = list(metric_names) or sorted({k for s in report.summaries for k in s.metrics})
    subtasks = sorted({k for s in report.summaries for k in s.per_subtask})
    head = ["method", "n", *names, "success", *subtasks, "contrastive", "s/task", "errors"]
    lines = [f"## {report.bench}", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for s in report.summaries:
        cells = [s.method, str(s.n)]
        cells += [f"{100 * s.metrics.get(k, 0.0):.1f}" for k in names]
        cells.append(f"{100 * s.success_rate:.1f}")
        cells += [f"{100 * s.per_subtask[k]:.1f}" if k in s.per_subtask else "-" for k in subtasks]
        cells.append("-" if s.contrastive is None else f"{s.contrastive:+.3f}")
        cells += [f"{s.mean_seconds:.1f}", str(s.errors)]
        lines.append("| " + " | ".join(cells) + " |")
    settings = json.dumps(report.settings.model_dump(), sort_keys=True)
    lines += ["", "Metrics and success in %, contrastive as a score difference.", "", settings, ""]
    return "\n".join(lines)
