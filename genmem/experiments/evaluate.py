"""Benchmark evaluation through the graph: every method, the same model, budgets and stream.

For each method the ``genmem`` graph is built once with the environment's tools and that
method's addressing policy (:mod:`genmem.experiments.methods`). Tasks run in a fixed order, every
method on a task before the next task, so a partial run compares the methods on equal terms.
``none`` runs in ``no_memory`` mode; the memory methods run ``read_only`` (the frozen-bank
control, the default) or ``evolve`` (each method on its own copy of the bank, so one method's
writes never reach another's). Every task is scored by its environment right after its run;
one JSON line per (method, task) is appended to ``records.jsonl`` as it finishes, and a rerun
into the same folder skips what is recorded. With ``concurrency`` > 1 (``read_only`` only) that
many runs go at once (:mod:`genmem.envs.pool`) and lines land as runs finish; the file
is rewritten in task order at the end, so its content never depends on timing. The summary
holds the benchmark's metrics per method, success per subtask, time per task and, when ``none``
ran too, the paper's contrastive outcome of each memory method (with memory minus without, plus
the bonus when both succeed).

Every mean is over all ``n`` runs of a method (the paper's Eq. 34): a run that errored counts
as a failure, score 0 and every metric 0, and the error count is reported beside it. The same
holds for the baseline: an errored ``none`` run is a failed one, so the memory run on that task
is compared with a score of 0. Each mean comes with a seeded percentile bootstrap interval over
tasks (``metrics_ci``), and each memory method with its paired difference against ``none``
(method minus none, pairs by task id, with wins / losses / ties; ``paired``) and against every
memory method listed before it (``versus``: sid minus tfidf, say). The interval settings are
written beside them (``intervals``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from genmem.envs.base import Environment, Outcome, Task
from genmem.envs.bundled import append_jsonl, jsonl_rows, replace_jsonl
from genmem.envs.pool import run_tasks, task_workers
from genmem.envs.stats import (
    DEFAULT_INTERVALS,
    IntervalConfig,
    PairedDiff,
    mean_interval,
    paired_difference,
)
from genmem.errors import GenMemError
from genmem.experiments.methods import Method, check_methods, method_generator
from genmem.experiments.run_config import GraphRunConfig
from genmem.experiments.runner import memory_op

__all__ = [
    "EvalConfig",
    "EvalRecord",
    "EvalReport",
    "EvalResumeMismatch",
    "MethodSummary",
    "RecordsInUse",
    "evaluate",
    "read_records",
    "summary_markdown",
]

# The task of the run in this thread: the graph's scorer and observer score that one, so runs
# going at once never see each other's task (LangGraph carries it into its node threads).
_TASK: ContextVar[Task] = ContextVar("genmem_eval_task")


class EvalConfig(GraphRunConfig):
    """What an evaluation runs: methods, tasks and bank, beside the model and budgets of
    :class:`~genmem.experiments.run_config.GraphRunConfig`."""

    methods: list[Method] = Field(default_factory=lambda: ["none", "tfidf", "dense", "sid"])
    limit: int | None = Field(default=None, ge=1, description="First N tasks.")
    bank_url: str | None = Field(default=None, description="The bank memory methods read.")
    mode: Literal["read_only", "evolve"] = "read_only"
    shard: str | None = Field(
        default=None,
        pattern=r"^\d+/\d+$",
        description="Run only part I/N of the tasks (0-based: tasks I, I+N, ...; read-only "
        "runs): N processes given the same --out split one evaluation; each keeps its own "
        "records file, and the summary covers every part found there.",
    )

    def model_post_init(self, __context: Any) -> None:
        """Validate the method list, that memory methods have a bank, and the shard."""
        self.methods = check_methods(self.methods)
        if any(m != "none" for m in self.methods) and not self.bank_url:
            raise ValueError("memory methods need a bank: set bank_url (or run only 'none')")
        if self.shard is not None:
            part, parts = self.part
            if not 0 <= part < parts:
                raise ValueError(f"shard {self.shard}: use I/N with 0 <= I < N")
            if self.mode == "evolve" and parts > 1:
                raise ValueError(
                    f"shard {self.shard} in evolve mode: each method's updates must land in task "
                    "order, in one process; shard read-only runs"
                )

    @property
    def part(self) -> tuple[int, int]:
        """``(I, N)`` of :attr:`shard` (``(0, 1)``: the whole run)."""
        if self.shard is None:
            return 0, 1
        part, parts = self.shard.split("/")
        return int(part), int(parts)


SETTINGS_FILE = "settings.json"
"""What an evaluation folder's records were made with (checked when a run resumes there)."""
_NOT_IN_A_RECORD = frozenset({"methods", "limit", "shard"})
"""Settings that choose which runs happen, not how one goes: they may change on a resume."""


class EvalResumeMismatch(GenMemError, ValueError):
    """An evaluation resumed in a folder whose records were made with other settings."""


def check_resume(out: Path, settings: EvalConfig, bench: str) -> None:
    """Refuse to add runs to ``out`` when its records were made with other settings (a
    different model, bank, budget or prior weight would mix two experiments in one table);
    the first run there writes :data:`SETTINGS_FILE`. ``methods``, ``limit`` and ``shard``
    may change: they choose which runs happen.

    Raises:
        EvalResumeMismatch: naming each setting that differs, the folder's and this run's.
    """
    mine = {"bench": bench, **settings.model_dump(mode="json", exclude=set(_NOT_IN_A_RECORD))}
    path = out / SETTINGS_FILE
    if path.exists():
        theirs = json.loads(path.read_text())
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        if differ:
            said = "; ".join(f"{k}: {theirs.get(k)!r} there, {mine.get(k)!r} now" for k in differ)
            raise EvalResumeMismatch(
                f"{out} holds records made with other settings ({said}); resume with the same "
                "settings, or give another --out"
            )
        return
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # shards (processes) may start together
    tmp.write_text(json.dumps(mine, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


class RecordsInUse(GenMemError, RuntimeError):
    """Another process is writing the same records file (the same --out and --shard)."""


def hold_records(path: Path) -> Any:
    """An exclusive lock on ``path``'s runs for this process: a second process given the same
    ``--out`` and ``--shard`` would run the same tasks again beside it. The lock goes when
    the returned file is closed (or the process ends).

    Raises:
        RecordsInUse: another process holds it.
    """
    import fcntl

    handle = (path.parent / f".{path.name}.lock").open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RecordsInUse(
            f"another process is running the tasks of {path} (the same --out and --shard); "
            "wait for it, or give this one another --out or --shard"
        ) from None
    return handle


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
    addresser: str | None = Field(
        default=None, description="What chose ``sid``: generative, quantizer, tfidf or dense."
    )
    retrieved: list[dict[str, Any]] = Field(default_factory=list)
    support: str | None = None
    support_source: str | None = Field(
        default=None,
        description="rewrite, entry (the rewrite was refused by the gate's checks) or none.",
    )
    support_refused: str | None = Field(
        default=None, description="Why the gate's checks refused the rewrite (markup, ...)."
    )
    status: str | None = None
    memory_op: str | None = None
    update_sid: str | None = Field(default=None, description="Where MemEvolver wrote (evolve).")
    memory_note: str | None = Field(
        default=None,
        description="Why MemEvolver wrote what it did (its decision's analysis), or why it "
        "wrote nothing.",
    )
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
    errors: int = Field(description="Runs that errored; each counts as a failure (score 0).")
    metrics_ci: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Bootstrap interval over tasks of each metric, success_rate and contrastive.",
    )
    paired: dict[str, PairedDiff] = Field(
        default_factory=dict,
        description="Per metric and success_rate: this method minus none on the tasks both ran.",
    )
    versus: dict[str, dict[str, PairedDiff]] = Field(
        default_factory=dict,
        description="Per earlier memory method, then per metric: this method minus that one.",
    )


class EvalReport(BaseModel):
    """Summaries per method, the settings, the interval settings and where the records are."""

    bench: str
    settings: EvalConfig
    summaries: list[MethodSummary]
    records: str
    intervals: IntervalConfig = DEFAULT_INTERVALS


def read_records(path: Path) -> list[EvalRecord]:
    """The records written so far (a torn last line is dropped and runs again)."""
    return [EvalRecord.model_validate(row) for row in jsonl_rows(path)]


def _bank_for(method: Method, settings: EvalConfig, out: Path) -> str | None:
    """The bank URL a method uses: the given one, or its own copy in ``evolve`` mode."""
    if method == "none" or settings.bank_url is None:
        return settings.bank_url
    if settings.mode == "read_only":
        return settings.bank_url
    from genmem.memory.bank_copy import copy_bank_file
    from genmem.memory.location import parse_bank_url

    loc = parse_bank_url(settings.bank_url)
    if loc.scheme != "sqlite":
        raise ValueError("evolve mode copies the bank per method: give a sqlite:/// bank URL")
    target = out / "banks" / f"{method}.db"
    if not target.exists():
        copy_bank_file(Path(loc.location), target)
    return f"sqlite:///{target}?bank={loc.bank_id}"


def evaluate(
    env: Environment,
    settings: EvalConfig,
    *,
    out: Path,
    model: Any = None,
    sid_generator: Any = None,
    progress: bool = True,
    on_record: Callable[[EvalRecord], None] | None = None,
    intervals: IntervalConfig = DEFAULT_INTERVALS,
    concurrency: int = 1,
) -> EvalReport:
    """Run every method over ``env``'s tasks through the graph; write records and a summary.

    ``model`` (a chat model) and ``sid_generator`` override ``settings.model`` and the SID
    method's own decoding, for tests and for trained policies; ``intervals`` sets the bootstrap.
    ``concurrency`` runs that many (method, task) runs at once; an environment that holds one
    episode at a time runs them one by one (with a warning).

    Raises:
        ValueError: ``concurrency`` > 1 in ``evolve`` mode, where each method's updates must
            land in task order.
    """
    from tqdm.auto import tqdm

    from genmem.graph.evolver import EvolverConfig
    from genmem.graph.loop import build_genmem_graph
    from genmem.graph.stack import StackBudgetConfig
    from genmem.graph.stackplanner import StackPlannerConfig
    from genmem.policies.backends import capped_chat_model

    if concurrency > 1 and settings.mode == "evolve":
        raise ValueError(
            f"concurrency {concurrency} in evolve mode: each method's updates must land in task "
            "order; evaluate read_only, or with concurrency 1"
        )
    workers = task_workers(concurrency, env, what="evaluation runs")
    out.mkdir(parents=True, exist_ok=True)
    check_resume(out, settings, env.name)
    part, parts = settings.part
    path = out / ("records.jsonl" if parts == 1 else f"records-{part}of{parts}.jsonl")
    lock = hold_records(path)  # released when this call returns (the file closes)
    done = {(r.method, r.id) for r in read_records(path)}
    every = env.tasks(settings.limit)
    tasks = every[part::parts]
    if settings.bank_url:
        from genmem.experiments.contamination import check_bank_is_clean
        from genmem.memory.location import open_bank

        check_bank_is_clean(open_bank(settings.bank_url), tasks)
    tools = env.tools()

    def scorer(answer: str | None, reference: Any) -> float:
        return env.score(_TASK.get(), answer).score

    def observer(answer: str | None) -> str | None:
        return env.signal(env.score(_TASK.get(), answer))

    chat = model
    if chat is None:
        chat = capped_chat_model(settings.model, settings.max_new_tokens)
    reader = settings.reader_model()
    graphs: dict[str, tuple[Any, str, dict[str, Any]]] = {}
    building = threading.Lock()

    def graph_for(method: Method) -> tuple[Any, str, dict[str, Any]]:
        """The compiled graph, mode and context of ``method`` (built once, on first use)."""
        with building:
            if method not in graphs:
                app = build_genmem_graph(
                    chat,
                    sid_generator=sid_generator if method == "sid" else method_generator(method),
                    retriever_config=settings.retriever_config(),
                    evolver_config=EvolverConfig(
                        addresser=settings.addresser, writer=settings.experience_writer(env)
                    ),
                    planner_config=StackPlannerConfig(
                        budget=StackBudgetConfig(max_steps=settings.max_steps),
                        interactor=settings.interactor,
                        rank_score=settings.rank_score,
                        prior_weight=settings.prior_weight,
                    ),
                    solver_tools=tools.solver,
                    research_tools=tools.research,
                    interactor_tools=tools.interactor,
                    interactor_prior=env.action_prior(),
                    reader_model=reader,
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

    def run(item: tuple[Method, Task]) -> EvalRecord:
        method, task = item
        app, mode, context = graph_for(method)
        return _run_one(env, app, task, method, mode, context)

    # Task by task, every method on a task before the next one: a partial run (or one stopped
    # and resumed) always compares the methods on the same tasks.
    order = [(m, t) for t in tasks for m in settings.methods]
    todo = [(m, t) for m, t in order if (m, t.id) not in done]
    bar = tqdm(total=len(todo), desc=f"eval {env.name}", unit="run", disable=not progress)
    for (method, task), record in run_tasks(run, todo, concurrency=workers):
        bar.set_postfix_str(f"{method} {task.id}")
        append_jsonl(path, record)  # cuts away a line torn by a killed run first
        if on_record is not None:
            on_record(record)
        bar.update(1)
    bar.close()
    rank = {(m, t.id): i for i, (m, t) in enumerate(order)}
    records = sorted(read_records(path), key=lambda r: rank.get((r.method, r.id), len(rank)))
    records = _with_contrastive(records)
    replace_jsonl(path, records)  # a kill here keeps the old file, never half of it
    if parts > 1:  # the summary covers every part's records found in --out
        whole = [(m, t.id) for t in every for m in settings.methods]
        rank = {key: i for i, key in enumerate(whole)}
        found = [r for f in sorted(out.glob(f"records-*of{parts}.jsonl")) for r in read_records(f)]
        records = sorted(found, key=lambda r: rank.get((r.method, r.id), len(rank)))
        path = out / f"records-*of{parts}.jsonl"
    report = EvalReport(
        bench=env.name,
        settings=settings,
        summaries=_summaries(env, records, settings.methods, intervals),
        records=str(path),
        intervals=intervals,
    )
    (out / "summary.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(report, env.metric_names), encoding="utf-8")
    lock.close()
    return report


def _run_one(
    env: Environment,
    app: Any,
    task: Task,
    method: str,
    mode: str,
    context: dict[str, Any],
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
    token = _TASK.set(task)
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
    finally:
        _TASK.reset(token)
    return EvalRecord(
        **base,
        answer=state.get("answer"),
        score=outcome.score,
        success=outcome.success,
        metrics=outcome.metrics,
        sid=state.get("sid"),
        addresser=state.get("addresser"),
        retrieved=list(state.get("retrieved") or []),
        support=state.get("support"),
        support_source=state.get("support_source"),
        support_refused=state.get("support_refused"),
        status=state.get("status"),
        memory_op=memory_op(state.get("update"), state.get("evolve_error")),
        update_sid=state.get("update_sid"),
        memory_note=_memory_note(state),
        seconds=round(time.perf_counter() - started, 2),
    )


def _memory_note(state: dict[str, Any]) -> str | None:
    error = state.get("evolve_error") or {}
    if error.get("message"):
        return str(error["message"])
    decision = state.get("decision") or {}
    return str(decision["analysis"]) if decision.get("analysis") else None


def _with_contrastive(records: list[EvalRecord]) -> list[EvalRecord]:
    """Each memory method's record gets its contrastive outcome against ``none`` on that task.

    An errored run on either side counts as a failed one (score 0): a memory run that errored
    where ``none`` succeeded is a loss, and one that succeeded where ``none`` errored a win.
    """
    from genmem.envs.scoring import contrastive_outcome

    baseline = {r.id: _score(r) for r in records if r.method == "none"}
    out = []
    for r in records:
        if r.method != "none" and r.id in baseline:
            r = r.model_copy(update={"contrastive": contrastive_outcome(_score(r), baseline[r.id])})
        out.append(r)
    return out


def _score(record: EvalRecord) -> float:
    """The record's score, 0 for a run that errored."""
    return 0.0 if record.error is not None else record.score


def _values(record: EvalRecord, names: list[str]) -> dict[str, float]:
    """Each metric and success of one run as numbers (all 0 for a run that errored)."""
    if record.error is not None:
        return dict.fromkeys([*names, "success_rate"], 0.0)
    values = {k: float(record.metrics.get(k, 0.0)) for k in names}
    return values | {"success_rate": float(record.success)}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _summaries(
    env: Environment,
    records: list[EvalRecord],
    methods: list[Method],
    intervals: IntervalConfig = DEFAULT_INTERVALS,
) -> list[MethodSummary]:
    """Per method: means over all runs (errored ones as failures), intervals, pairs vs none."""
    by_method: dict[str, list[EvalRecord]] = defaultdict(list)
    for r in records:
        by_method[r.method].append(r)
    names = list(
        dict.fromkeys([*env.metric_names, *sorted({k for r in records for k in r.metrics})])
    )
    per_task = {m: {r.id: _values(r, names) for r in rows} for m, rows in by_method.items()}
    out = []
    for method in methods:
        rows = by_method.get(method, [])
        values = per_task.get(method, {})
        subtasks: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            if r.subtask:
                subtasks[r.subtask].append(float(r.success and r.error is None))
        contrast = [r.contrastive for r in rows if r.contrastive is not None]
        columns = {k: [v[k] for v in values.values()] for k in [*names, "success_rate"]}
        if contrast:
            columns["contrastive"] = contrast
        ci = {k: est.ci for k, v in columns.items() if (est := mean_interval(v, intervals))}
        keys = [*names, "success_rate"]
        paired = {}
        if method != "none" and "none" in per_task:
            paired = _paired(values, per_task["none"], keys, intervals)
        earlier = [m for m in methods[: methods.index(method)] if m != "none" and m in per_task]
        versus = {}
        if method != "none":
            versus = {m: _paired(values, per_task[m], keys, intervals) for m in earlier}
        out.append(
            MethodSummary(
                bench=env.name,
                method=method,
                n=len(rows),
                metrics={k: _mean(columns[k]) for k in names},
                success_rate=_mean(columns["success_rate"]),
                per_subtask={k: _mean(v) for k, v in sorted(subtasks.items())},
                contrastive=_mean(contrast) if contrast else None,
                mean_seconds=_mean([r.seconds for r in rows]),
                errors=sum(r.error is not None for r in rows),
                metrics_ci=ci,
                paired=paired,
                versus={m: pairs for m, pairs in versus.items() if pairs},
            )
        )
    return out


def _paired(
    values: dict[str, dict[str, float]],
    other: dict[str, dict[str, float]],
    keys: list[str],
    intervals: IntervalConfig,
) -> dict[str, PairedDiff]:
    """Per key: ``values`` minus ``other`` on the tasks both ran (keys without a pair left out)."""
    out = {}
    for k in keys:
        pair = paired_difference(
            {t: v[k] for t, v in values.items()}, {t: v[k] for t, v in other.items()}, intervals
        )
        if pair is not None:
            out[k] = pair
    return out


def _pair_row(name: str, key: str, p: PairedDiff) -> str:
    """One Markdown row of a paired difference (percentage points)."""
    from genmem.envs.stats import format_interval

    diff = format_interval(p.diff, p.ci, signed=True)
    label = "success" if key == "success_rate" else key
    return f"| {name} | {label} | {diff} | {p.wins} | {p.losses} | {p.ties} | {p.n} |"


def summary_markdown(report: EvalReport, metric_names: tuple[str, ...] = ()) -> str:
    """The summary as Markdown: one row per method, the paired differences, then the settings."""
    from genmem.envs.stats import describe, format_interval

    names = list(metric_names) or sorted({k for s in report.summaries for k in s.metrics})
    # a game's only metric is its success, already the success column
    names = [k for k in names if k != "success"]
    subtasks = sorted({k for s in report.summaries for k in s.per_subtask})
    head = ["method", "n", *names, "success", *subtasks, "contrastive", "s/task", "errors"]
    lines = [f"## {report.bench}", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for s in report.summaries:
        cells = [s.method, str(s.n)]
        cells += [format_interval(s.metrics.get(k, 0.0), s.metrics_ci.get(k)) for k in names]
        cells.append(format_interval(s.success_rate, s.metrics_ci.get("success_rate")))
        cells += [f"{100 * s.per_subtask[k]:.1f}" if k in s.per_subtask else "-" for k in subtasks]
        contrast = s.contrastive
        ci = s.metrics_ci.get("contrastive")
        cells.append(
            "-"
            if contrast is None
            else format_interval(contrast, ci, scale=1, digits=3, signed=True)
        )
        cells += [f"{s.mean_seconds:.1f}", str(s.errors)]
        lines.append("| " + " | ".join(cells) + " |")
    paired = [
        (s.method, k, p) for s in report.summaries for k, p in s.paired.items() if k != "success"
    ]
    if paired:
        lines += [
            "",
            "Paired against none (method minus none on the same tasks, percentage points):",
            "",
            "| method | metric | difference | wins | losses | ties | pairs |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [_pair_row(method, key, p) for method, key, p in paired]
    versus = [
        (f"{s.method} - {other}", k, p)
        for s in report.summaries
        for other, pairs in s.versus.items()
        for k, p in pairs.items()
        if k != "success"
    ]
    if versus:
        lines += [
            "",
            "Memory methods paired with each other (the first minus the second, same tasks):",
            "",
            "| methods | metric | difference | wins | losses | ties | pairs |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [_pair_row(name, key, p) for name, key, p in versus]
    settings = json.dumps(report.settings.model_dump(), sort_keys=True)
    lines += [
        "",
        "Metrics and success in %, contrastive as a score difference; each mean is over all n "
        "runs, an errored run counting as a failure (score 0). "
        + describe(report.intervals).replace("Intervals:", "Brackets:"),
        "",
        settings,
        "",
    ]
    return "\n".join(lines)
