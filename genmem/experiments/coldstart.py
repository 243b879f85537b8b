"""Cold-start bank construction: attempts, assessment, contrastive extraction, SIDs, bank.

The paper's cold-start pipeline (section 2 and its appendix on experience generation), run on
any environment's training tasks:

1. **Attempts.** StackPlanner makes ``attempts`` tries at each query (the first greedy, the
   rest sampled), asked to leave visible evidence and checks; each try is recorded with its
   trajectory, final answer and the environment's signal.
2. **Assessment.** Each try gets a verdict from evidence only (a reference or the environment's
   own signal; with neither it is ``unverified``, never a failure) and a faithful summary the
   model writes (:class:`~genmem.experiments.experience_schemas.TrajectorySummary`).
3. **Extraction.** From the query, its reference and all assessed tries, the model writes one or
   more experience records (:class:`~genmem.experiments.experience_schemas.ExperienceFields`),
   contrasting what worked with what failed.
4. **Bank.** Each record's rich summary is encoded with the experience prefix; codebooks are
   fitted on them (or reused); records that share a leaf are merged (by the model, or by a
   deterministic concatenation) and written, one entry per SID.

Model replies that do not parse are retried with shorter fields, then written to
``failures.jsonl``: nothing is dropped silently or made up. Every stage appends to its own JSONL
file in the output folder as it goes, so an interrupted run continues where it stopped. With
``concurrency`` > 1 the tries, summaries and extractions of different tasks go that many at once
(:mod:`genmem.envs.pool`; tries one at a time when the environment holds one episode or
the local model samples them) and lines land as they finish.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from genmem.envs.base import Environment, Task
from genmem.envs.bundled import append_jsonl, jsonl_rows, replace_jsonl
from genmem.envs.pool import run_tasks, task_workers
from genmem.experiments.experience_schemas import (
    AttemptProse,
    ExperienceFields,
    ExtractedExperiences,
    SkillCard,
    TrajectorySummary,
    Verdict,
    capped_schema,
    experience_text,
)
from genmem.graph.stack import DEFAULT_MAX_STEPS
from genmem.memory.data_block import data_block
from genmem.memory.gate import check_payload
from genmem.memory.sid import DEFAULT_SIZES
from genmem.policies.backends import DEFAULT_MODEL_SPEC
from genmem.policies.prompts import (
    ASSESS_PROMPT,
    ATTEMPT_PROMPT,
    EXTRACT_PROMPT,
    INTERACTIVE_ATTEMPT_PROMPT,
    MERGE_PROMPT,
    RETRY_PROMPT,
    SYNTHESIS_PROMPT,
    assess_user_message,
    extract_user_message,
    synthesis_user_message,
)

__all__ = [
    "AttemptRecord",
    "ColdStartConfig",
    "ColdStartReport",
    "ExperienceLine",
    "build_coldstart_bank",
    "final_answer",
    "query_evidence",
    "synthesise_skills",
    "verdict_of",
]

M = TypeVar("M", bound=BaseModel)


class ColdStartConfig(BaseModel):
    """How a cold-start bank is built."""

    model_config = ConfigDict(extra="forbid")

    attempts: int = Field(default=2, ge=1, le=16, description="StackPlanner tries per task, K.")
    limit: int | None = Field(default=None, ge=1, description="First N tasks.")
    sizes: tuple[int, ...] = Field(default=DEFAULT_SIZES, description="Codebook sizes to fit.")
    codebook: str | None = Field(
        default=None, description="Reuse these codebooks instead of fitting."
    )
    model: str = Field(default=DEFAULT_MODEL_SPEC, description="Model spec for every stage.")
    max_new_tokens: int | None = Field(
        default=None, ge=1, description="Reply cap of an attempt's calls."
    )
    max_steps: int = Field(
        default=DEFAULT_MAX_STEPS, ge=1, description="StackPlanner's steps per attempt."
    )
    temperature: float = Field(default=0.7, ge=0.0, description="Sampling of tries 2..K.")
    merge: Literal["llm", "concat"] = Field(
        default="llm",
        description="How records on one SID become one entry (llm: the model merges; concat: "
        "joined).",
    )
    retries: int = Field(default=2, ge=0, le=5, description="Retries of an unparsable reply.")
    max_field_chars: int | None = Field(
        default=100,
        ge=10,
        description="Cap per field the model writes (a small model must close its JSON).",
    )
    max_records: int = Field(default=2, ge=1, le=8, description="Experiences per task, at most.")
    merge_tokens: int = Field(default=400, ge=16, description="Reply cap of an LLM merge.")
    structured_tokens: int = Field(
        default=640,
        ge=64,
        description="Reply cap of an assessment or extraction (a served model without a cap "
        "writes to its own limit when it does not close the JSON).",
    )
    seed: int = Field(default=0, ge=0, description="Seed of the sampled tries and the fit.")
    gate: bool = Field(
        default=True,
        description="Pass every record (against its task and run) and every merged entry "
        "through the write gate; a refused record is logged in failures.jsonl (stage 'gate').",
    )
    synthesise_prefix_depth: int | None = Field(
        default=None,
        ge=1,
        description="Also write one general skill card per cluster of records sharing their "
        "first D SID levels (2 or more records), through the write gate; off by default.",
    )
    synthesise_min_records: int = Field(
        default=2, ge=2, description="Records a cluster needs before a skill card is written."
    )


class AttemptRecord(BaseModel):
    """One try at one query: what StackPlanner did and what the evidence says."""

    query_id: str
    k: int
    answer: str | None = None
    status: str | None = None
    trajectory: dict[str, Any] | None = None
    verdict: Verdict = "unverified"
    score: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None


class ExperienceLine(BaseModel):
    """One extracted experience with its provenance."""

    query_id: str
    index: int
    source: str
    type: str
    evidence: str = Field(description="success / failure / mixed / unverified over the tries.")
    fields: ExperienceFields | SkillCard
    text: str
    query: str = Field(default="", description="The task text (provenance for SID alignment).")
    trajectory: str = Field(
        default="", description="The rendered run it came from: a success first, else the first."
    )
    of_query: int | None = Field(
        default=None,
        description="How many records its query gave. A rerun extracts a query again when fewer "
        "are on disk (a run killed between them); None: written before this field existed.",
    )


class ColdStartReport(BaseModel):
    """What a cold-start run produced and where."""

    out: str
    bank: str
    bank_id: str
    codebook_dir: str
    codebook_hash: str
    queries: int
    attempts: int
    verdicts: dict[str, int]
    assessment_failures: int
    extraction_failures: int
    records: int
    entries: int
    merged_entries: int
    gate_rejections: dict[str, int] = Field(
        default_factory=dict,
        description="Records and merges the write gate refused, per reason.",
    )
    skills: int = Field(default=0, description="Skill cards synthesised from clusters.")
    synthesis_failures: int = Field(default=0, description="Clusters whose card failed.")
    seconds: float


def final_answer(text: str | None) -> str | None:
    """The text after the last 'Final answer:' marker (the whole text when there is none)."""
    if text is None:
        return None
    _, sep, tail = text.rpartition("Final answer:")
    return tail.strip() if sep else text.strip()


def verdict_of(success: bool | None) -> Verdict:
    """success / failure from a reference or an environment signal; else unverified."""
    if success is None:
        return "unverified"
    return "success" if success else "failure"


def query_evidence(verdicts: Sequence[str]) -> str:
    """The evidence class of one query's tries: success, failure, unverified or mixed."""
    kinds = set(verdicts)
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _structured(
    chat: Any,
    model: type[M],
    messages: list[Any],
    *,
    retries: int,
    max_chars: int | None,
    max_items: int | None = None,
) -> tuple[M | None, list[str]]:
    """Ask for a reply in ``model``'s schema; retry with halved field caps; errors if all fail."""
    from langchain_core.messages import HumanMessage

    from genmem.policies.json_reply import ask_json

    errors: list[str] = []
    for attempt in range(retries + 1):
        cap = None if max_chars is None else max(10, max_chars >> attempt)
        schema = capped_schema(model, cap, max_items=max_items)
        ask = list(messages)
        if errors:
            ask.append(HumanMessage(RETRY_PROMPT.format(error=errors[-1][:200], cap=cap)))
        try:
            reply = ask_json(chat, schema, ask)
            if reply.error is not None:
                raise reply.error  # a reply that did not parse: handled as one below
            return model.model_validate(reply.parsed), errors
        except (ValidationError, ValueError, TypeError) as exc:
            errors.append(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        except Exception as exc:  # a parser error of another backend: still a bad reply
            if type(exc).__name__ != "OutputParserException":
                raise
            errors.append(f"OutputParserException: {' '.join(str(exc).split())[:300]}")
    return None, errors


def _log_failure(
    path: Path, stage: str, query_id: str, k: int | None, errors: list[str], reason: str | None
) -> None:
    """One line of ``failures.jsonl``: the stage, what failed, why."""
    row = {"stage": stage, "query_id": query_id, "k": k, "errors": errors, "time": time.time()}
    append_jsonl(path, row if reason is None else {**row, "reason": reason})


class _Stages:
    """The model-driven stages, their files in ``out`` and what each has done."""

    def __init__(
        self, env: Environment, config: ColdStartConfig, out: Path, chat: Any, concurrency: int = 1
    ) -> None:
        self.env = env
        self.config = config
        self.out = out
        self.chat = chat
        self.concurrency = concurrency
        self.attempts_path = out / "attempts.jsonl"
        self.assess_path = out / "assessments.jsonl"
        self.experiences_path = out / "experiences.jsonl"
        self.failures_path = out / "failures.jsonl"
        self.interactive = bool(env.tools().interactor)

    def _failure(
        self,
        stage: str,
        query_id: str,
        k: int | None,
        errors: list[str],
        reason: str | None = None,
    ) -> None:
        _log_failure(self.failures_path, stage, query_id, k, errors, reason)

    def attempts(self, tasks: Sequence[Task], progress: bool) -> dict[str, list[AttemptRecord]]:
        """Run every missing try; returns the tries per query id."""
        from tqdm.auto import tqdm

        done = [AttemptRecord.model_validate(r) for r in jsonl_rows(self.attempts_path)]
        have = {(a.query_id, a.k) for a in done}
        todo = [(t, k) for t in tasks for k in range(self.config.attempts) if (t.id, k) not in have]
        if todo:
            planners, sampler = self._planners()
            sampled = sampler if self.config.attempts > 1 else None
            workers = task_workers(self.concurrency, self.env, chat=sampled, what="attempts")
            bar = tqdm(total=len(todo), desc="attempts", unit="try", disable=not progress)

            def attempt(item: tuple[Task, int]) -> AttemptRecord:
                return self._attempt(planners[min(item[1], 1)], *item)

            for _, record in run_tasks(attempt, todo, concurrency=workers):
                append_jsonl(self.attempts_path, record)
                done.append(record)
                bar.update(1)
            bar.close()
        by_query: dict[str, list[AttemptRecord]] = {}
        for a in sorted(done, key=lambda a: a.k):
            by_query.setdefault(a.query_id, []).append(a)
        return by_query

    def _planners(self) -> tuple[list[Any], Any]:
        """Compiled StackPlanner graphs, greedy (first try) and sampled (the others); the
        sampled tries' model."""
        from genmem.graph.stack import StackBudgetConfig
        from genmem.graph.stackplanner import StackPlannerConfig, build_stackplanner_graph
        from genmem.policies.backends import capped_chat_model

        tools = self.env.tools()
        cfg = StackPlannerConfig(budget=StackBudgetConfig(max_steps=self.config.max_steps))
        graphs = []
        for temperature in (None, self.config.temperature):
            chat = capped_chat_model(
                self.config.model, self.config.max_new_tokens, temperature=temperature
            )
            graphs.append(
                build_stackplanner_graph(
                    chat,
                    solver_tools=tools.solver,
                    research_tools=tools.research,
                    interactor_tools=tools.interactor,
                    config=cfg,
                ).compile()
            )
        return graphs, chat

    def _attempt(self, planner: Any, task: Task, k: int) -> AttemptRecord:
        import torch

        started = time.perf_counter()
        seed = int(hashlib.sha256(f"{self.config.seed}:{task.id}:{k}".encode()).hexdigest(), 16)
        torch.manual_seed(seed % 2**31)
        prompt = (INTERACTIVE_ATTEMPT_PROMPT if self.interactive else ATTEMPT_PROMPT).format(
            query=task.query
        )
        try:
            self.env.start(task)
            try:
                out = planner.invoke({"query": prompt, "support": None})
                answer = final_answer(out.get("answer"))
                verifiable = self.interactive or task.reference is not None
                outcome = self.env.score(task, answer) if verifiable else None
            finally:
                self.env.finish(task)
        except Exception as exc:  # one failing try must not lose the run
            return AttemptRecord(
                query_id=task.id,
                k=k,
                error=repr(exc),
                seconds=round(time.perf_counter() - started, 2),
            )
        return AttemptRecord(
            query_id=task.id,
            k=k,
            answer=answer,
            status=out.get("status"),
            trajectory=out.get("trajectory"),
            verdict=verdict_of(None if outcome is None else outcome.success),
            score=None if outcome is None else outcome.score,
            metrics={} if outcome is None else outcome.metrics,
            seconds=round(time.perf_counter() - started, 2),
        )

    def assess(
        self, tasks: Sequence[Task], tries: dict[str, list[AttemptRecord]], progress: bool
    ) -> dict[tuple[str, int], TrajectorySummary]:
        """Summarise every try not yet summarised; returns the summaries by (query id, k)."""
        from tqdm.auto import tqdm

        summaries: dict[tuple[str, int], TrajectorySummary] = {}
        for row in jsonl_rows(self.assess_path):
            summaries[(row["query_id"], row["k"])] = TrajectorySummary.model_validate(
                row["summary"]
            )
        failed = {
            (r["query_id"], r["k"])
            for r in jsonl_rows(self.failures_path)
            if r["stage"] == "assess"
        }
        todo = [
            (t, a)
            for t in tasks
            for a in tries.get(t.id, [])
            if (t.id, a.k) not in summaries and (t.id, a.k) not in failed
        ]
        bar = tqdm(total=len(todo), desc="assess", unit="try", disable=not progress)
        for (task, attempt), summary in run_tasks(
            lambda item: self._summarise(*item), todo, concurrency=self.concurrency
        ):
            if summary is not None:
                summaries[(task.id, attempt.k)] = summary
            bar.update(1)
        bar.close()
        return summaries

    def _summarise(self, task: Task, attempt: AttemptRecord) -> TrajectorySummary | None:
        from langchain_core.messages import HumanMessage, SystemMessage

        from genmem.graph.trajectory import render_trajectory

        run = render_trajectory(attempt.trajectory or {}, clip=600) if attempt.trajectory else ""
        reference = "none" if task.reference is None else json.dumps(task.reference)
        user = assess_user_message(
            task.query,
            reference,
            verdict=attempt.verdict,
            answer=attempt.answer,
            error=attempt.error,
            run=run,
        )
        prose, errors = _structured(
            self.chat,
            AttemptProse,
            [SystemMessage(ASSESS_PROMPT), HumanMessage(user)],
            retries=self.config.retries,
            max_chars=self.config.max_field_chars,
        )
        if prose is None:
            self._failure("assess", task.id, attempt.k, errors)
            return None
        summary = TrajectorySummary(
            **prose.model_dump(),
            run_id=f"{task.id}#{attempt.k}",
            evaluation=attempt.verdict,
            prediction=attempt.answer or "",
        )
        append_jsonl(
            self.assess_path,
            {"query_id": task.id, "k": attempt.k, "summary": summary.model_dump()},
        )
        return summary

    def extract(
        self,
        tasks: Sequence[Task],
        tries: dict[str, list[AttemptRecord]],
        summaries: dict[tuple[str, int], TrajectorySummary],
        progress: bool,
    ) -> list[ExperienceLine]:
        """Extract experiences for every query not yet extracted; returns all of them."""
        from tqdm.auto import tqdm

        lines = _whole_queries(self.experiences_path)
        done = {x.query_id for x in lines}
        failed = jsonl_rows(self.failures_path)
        done |= {r["query_id"] for r in failed if r["stage"] in ("extract", "gate")}
        todo = [t for t in tasks if t.id not in done and tries.get(t.id)]
        bar = tqdm(total=len(todo), desc="extract", unit="query", disable=not progress)
        for _, new in run_tasks(
            lambda task: self._extract_one(task, tries[task.id], summaries),
            todo,
            concurrency=self.concurrency,
        ):
            lines.extend(new)
            bar.update(1)
        bar.close()
        order = {t.id: i for i, t in enumerate(tasks)}
        return sorted(lines, key=lambda x: (order.get(x.query_id, len(order)), x.index))

    def _extract_one(
        self,
        task: Task,
        tries: list[AttemptRecord],
        summaries: dict[tuple[str, int], TrajectorySummary],
    ) -> list[ExperienceLine]:
        from langchain_core.messages import HumanMessage, SystemMessage

        from genmem.graph.trajectory import render_trajectory

        blocks = []
        for a in tries:
            s = summaries.get((task.id, a.k))
            body = (
                json.dumps(s.model_dump(), ensure_ascii=False)
                if s is not None
                else f"(no summary) final answer: {a.answer or '(none)'}; error: {a.error}"
            )
            blocks.append(data_block("attempt", body, number=a.k + 1, verdict=a.verdict))
        reference = "none" if task.reference is None else json.dumps(task.reference)
        user = extract_user_message(
            task.query, reference, blocks, max_records=self.config.max_records
        )
        extracted, errors = _structured(
            self.chat,
            ExtractedExperiences,
            [SystemMessage(EXTRACT_PROMPT), HumanMessage(user)],
            retries=self.config.retries,
            max_chars=self.config.max_field_chars,
            max_items=self.config.max_records,
        )
        if extracted is None:
            self._failure("extract", task.id, None, errors)
            return []
        evidence = query_evidence([a.verdict for a in tries])
        best = next((a for a in tries if a.verdict == "success"), tries[0] if tries else None)
        run = render_trajectory(best.trajectory, clip=600) if best and best.trajectory else ""
        out, refused = [], []
        for i, fields in enumerate(extracted.experiences[: self.config.max_records]):
            text = experience_text(fields)
            if not text.strip():
                refused.append(("extract", [f"experience {i} has only empty fields"], None))
                continue
            if self.config.gate:
                verdict = check_payload(text, sources=(task.query, run, *blocks))
                if verdict.action == "reject":
                    refused.append(("gate", [f"experience {i}: {verdict.detail}"], verdict.reason))
                    continue
            out.append(
                ExperienceLine(
                    query_id=task.id,
                    index=i,
                    source=self.env.name,
                    type=self.env.experience_type,
                    evidence=evidence,
                    fields=fields,
                    text=text,
                    query=task.query,
                    trajectory=run,
                )
            )
        out = [x.model_copy(update={"of_query": len(out)}) for x in out]
        # The records first, then the refusals: a query counts as extracted once all its
        # records are on disk, or (none kept) once a refusal is.
        for line in out:
            append_jsonl(self.experiences_path, line)
        for stage, errors, reason in refused:
            self._failure(stage, task.id, None, errors, reason=reason)
        return out


def _whole_queries(path: Path) -> list[ExperienceLine]:
    """The records in ``path`` of the queries whose records are all there.

    A run killed between two records of one query leaves only some: those are dropped from
    the file (rewritten whole) so that the query is extracted again, once.
    """
    lines = [ExperienceLine.model_validate(r) for r in jsonl_rows(path)]
    count = Counter(x.query_id for x in lines)
    whole = [x for x in lines if x.of_query is None or count[x.query_id] == x.of_query]
    if len(whole) < len(lines):
        replace_jsonl(path, whole)
    return whole


def _clusters(codes: Any, depth: int, minimum: int) -> dict[tuple[int, ...], list[int]]:
    """Line indexes grouped by their first ``depth`` codes: the groups of ``minimum`` or more."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(codes.tolist()):
        groups.setdefault(tuple(row[:depth]), []).append(i)
    return {k: v for k, v in sorted(groups.items()) if len(v) >= minimum}


def synthesise_skills(
    chat: Any,
    lines: Sequence[ExperienceLine],
    codes: Any,
    spec: Any,
    config: ColdStartConfig,
    out: Path,
    progress: bool = True,
) -> tuple[list[ExperienceLine], int]:
    """One skill card per cluster of ``lines`` sharing a depth-D SID prefix (``skills.jsonl``).

    Returns the cards that passed the gate and the number of clusters whose card failed
    (unparsable, empty or refused: logged in ``failures.jsonl``, stage ``synthesis``). A rerun
    reuses the cards already written.
    """
    from langchain_core.messages import HumanMessage, SystemMessage
    from tqdm.auto import tqdm

    depth = config.synthesise_prefix_depth
    if depth is None:
        return [], 0
    if depth > spec.levels:
        raise ValueError(f"synthesise_prefix_depth={depth}: the codebooks have {spec.levels}")
    out.mkdir(parents=True, exist_ok=True)
    path, failures = out / "skills.jsonl", out / "failures.jsonl"
    done = {row["key"]: row for row in jsonl_rows(path)}
    cards: list[ExperienceLine] = []
    failed = 0
    clusters = _clusters(codes, depth, config.synthesise_min_records)
    for prefix, members in tqdm(clusters.items(), desc="synthesis", disable=not progress):
        texts = [lines[i].text for i in members]
        name = spec.prefix_string(prefix)
        key = hashlib.sha256(json.dumps([name, texts]).encode()).hexdigest()
        if key not in done:
            types = Counter(str(getattr(lines[i].fields, "problem_type", "")) for i in members)
            user = synthesis_user_message(name, texts, [t for t, _ in types.most_common(3)])
            system = SYNTHESIS_PROMPT.format(prefix=name)
            card, errors = _structured(
                chat,
                SkillCard,
                [SystemMessage(system), HumanMessage(user)],
                retries=config.retries,
                max_chars=config.max_field_chars,
            )
            row: dict[str, Any] = {"key": key, "prefix": name, "members": members}
            if card is None:
                row["error"] = errors[-1] if errors else "no reply"
            else:
                text = experience_text(card)
                verdict = check_payload(text, sources=texts, memory=texts)
                row |= {"card": card.model_dump(), "text": text}
                if config.gate and verdict.action == "reject":
                    row |= {"error": f"gate: {verdict.detail}", "reason": verdict.reason}
            append_jsonl(path, row)
            if "error" in row:
                _log_failure(failures, "synthesis", name, None, [row["error"]], row.get("reason"))
            done[key] = row
        row = done[key]
        if "error" in row:
            failed += 1
            continue
        sources = [lines[i] for i in members]
        cards.append(
            ExperienceLine(
                query_id=f"skill:{name}",
                index=0,
                source="synthesis",
                type="skill",
                evidence=query_evidence([x.evidence for x in sources]),
                fields=SkillCard.model_validate(row["card"]),
                text=row["text"],
            )
        )
    return cards, failed


def _llm_merger(chat: Any, path: Path) -> Callable[[Any, Sequence[Any]], str]:
    """A consolidator that merges with the model, cached in ``path`` by SID and texts."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from genmem.memory.build import concat_consolidate

    cache = {row["key"]: row["payload"] for row in jsonl_rows(path)}

    def merge(sid: Any, records: Sequence[Any]) -> str:
        texts = list(dict.fromkeys(r.text.strip() for r in records))
        if len(texts) == 1:
            return texts[0]
        key = hashlib.sha256(json.dumps([str(sid), texts]).encode()).hexdigest()
        if key in cache:
            return cache[key]
        system = MERGE_PROMPT.format(sid=sid, n=len(texts))
        user = "\n\n".join(data_block("note", t, number=i) for i, t in enumerate(texts, 1))
        text = str(chat.invoke([SystemMessage(system), HumanMessage(user)]).content).strip()
        by = "llm"
        if not text:  # an empty merge would lose the notes: keep them all, and say so
            text, by = concat_consolidate(sid, records), "concat-fallback"
        append_jsonl(
            path, {"key": key, "sid": str(sid), "n": len(texts), "by": by, "payload": text}
        )
        cache[key] = text
        return text

    return merge


def build_coldstart_bank(
    env: Environment,
    config: ColdStartConfig,
    *,
    bank_url: str,
    out: Path,
    chat: Any = None,
    progress: bool = True,
    concurrency: int = 1,
) -> ColdStartReport:
    """Run the cold-start pipeline on ``env``'s tasks into ``out`` and the bank ``bank_url``.

    ``chat`` overrides the model of the summary, extraction and merge stages (tests);
    ``concurrency`` runs that many tries, summaries or extractions at once.

    Raises:
        ValueError: fewer records than the largest codebook size (fit) and no ``codebook``.
        GenMemError: the bank exists with other codebooks (nothing is written).
    """
    from genmem.memory.build import ExperienceRecord, build_bank, concat_consolidate
    from genmem.memory.gate import DEFAULT_GATE
    from genmem.memory.location import open_store, parse_bank_url
    from genmem.memory.sid import SID
    from genmem.policies.backends import capped_chat_model

    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    parsed = parse_bank_url(bank_url)
    store = open_store(parsed)
    tasks = env.tasks(config.limit)
    stages = _Stages(
        env,
        config,
        out,
        chat or capped_chat_model(config.model, config.structured_tokens),
        concurrency,
    )
    tries = stages.attempts(tasks, progress)
    summaries = stages.assess(tasks, tries, progress)
    lines = stages.extract(tasks, tries, summaries, progress)
    if not lines:
        gated = sum(1 for f in jsonl_rows(stages.failures_path) if f["stage"] == "gate")
        refused = f" ({gated} refused by the write gate)" if gated else ""
        raise ValueError(
            f"no experience was extracted from {len(tasks)} queries{refused}; see "
            f"{stages.failures_path}"
        )
    codebooks, codes = _codes(config, [x.text for x in lines], out, progress)
    skills, synthesis_failed = synthesise_skills(
        chat or capped_chat_model(config.model, config.structured_tokens),
        lines,
        codes,
        codebooks.spec,
        config,
        out,
        progress,
    )
    if skills:  # quantised with the same codebooks (the fit saw the records only)
        import numpy as np

        from genmem.memory.encoders import encode_for_codebook

        embedded = encode_for_codebook(codebooks, [x.text for x in skills])
        codes = np.vstack([codes, codebooks.quantize(embedded)])
        lines = [*lines, *skills]
    if store.get_info(parsed.bank_id) is not None:
        store.bank(parsed.bank_id).check_codebook(codebooks)
    bank = store.create_bank(
        parsed.bank_id, spec=codebooks.spec, codebook_hash=codebooks.hash, exist_ok=True
    )
    records = [
        ExperienceRecord(
            text=x.text,
            metadata={
                "source": x.source,
                "type": x.type,
                "evidence": x.evidence,
                "query_id": x.query_id,
                "index": x.index,
                "query": x.query,
                "trajectory": x.trajectory,
            },
        )
        for x in lines
    ]
    for record, x in zip(records, lines, strict=True):
        if x.source == "synthesis":  # a card's provenance: its cluster, not a task
            record.metadata["prefix"] = x.query_id.removeprefix("skill:")
    sids = [SID(tuple(c), codebooks.spec) for c in codes.tolist()]
    merge = (
        concat_consolidate
        if config.merge == "concat"
        else _llm_merger(
            chat or capped_chat_model(config.model, config.merge_tokens),
            out / "merges.jsonl",
        )
    )
    report = build_bank(
        bank,
        records,
        sids,
        consolidate=merge,
        actor="coldstart",
        progress=progress,
        gate=DEFAULT_GATE if config.gate else None,
    )
    _write_stats(out, lines, bank, codes, codebooks.spec)
    all_tries = [a for v in tries.values() for a in v]
    verdicts = dict(Counter(a.verdict if a.error is None else "error" for a in all_tries))
    failures = jsonl_rows(stages.failures_path)
    refused = Counter(f.get("reason", "?") for f in failures if f["stage"] == "gate")
    refused.update(report.rejected)
    result = ColdStartReport(
        out=str(out),
        bank=bank_url,
        bank_id=bank.bank_id,
        codebook_dir=str(out / "codebook") if config.codebook is None else config.codebook,
        codebook_hash=codebooks.hash,
        queries=len(tasks),
        attempts=len(all_tries),
        verdicts=verdicts,
        assessment_failures=sum(1 for f in failures if f["stage"] == "assess"),
        extraction_failures=sum(1 for f in failures if f["stage"] == "extract"),
        records=len(lines),
        entries=bank.stats().entries,
        merged_entries=report.merged_slots,
        gate_rejections=dict(refused),
        skills=len(skills),
        synthesis_failures=synthesis_failed,
        seconds=round(time.perf_counter() - started, 1),
    )
    (out / "report.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return result


def _codes(config: ColdStartConfig, texts: list[str], out: Path, progress: bool) -> tuple[Any, Any]:
    """The codebooks (reused or fitted into ``out/codebook``) and the texts' codes."""
    from genmem.experiments.seed_bank import fit_experience_codebooks
    from genmem.memory.encoders import EXPERIENCE_PREFIX, default_encoder, encode_for_codebook
    from genmem.memory.rqkmeans import Codebooks

    if config.codebook is not None:
        codebooks = Codebooks.load(config.codebook)
        embeddings = encode_for_codebook(codebooks, texts, progress=progress)
        return codebooks, codebooks.quantize(embeddings)
    fitted = out / "codebook"
    encoder = default_encoder(prefix=EXPERIENCE_PREFIX)
    embeddings = encoder.encode(texts, progress=progress)
    if fitted.is_dir() and any(fitted.iterdir()):
        codebooks = Codebooks.load(fitted)
        if codebooks.spec.sizes != tuple(config.sizes):
            raise ValueError(f"{fitted} holds codebooks of sizes {codebooks.spec.sizes}")
    else:
        if len(texts) < max(config.sizes):
            raise ValueError(
                f"{len(texts)} experiences cannot fit a codebook of size {max(config.sizes)}: "
                "run more queries, pass smaller --sizes, or reuse codebooks with --codebook"
            )
        codebooks = fit_experience_codebooks(
            embeddings, config.sizes, encoder.id, fitted, seed=config.seed, progress=progress
        )
    return codebooks, codebooks.quantize(embeddings)


def _write_stats(out: Path, lines: list[ExperienceLine], bank: Any, codes: Any, spec: Any) -> None:
    """``stats.json``, ``stats.md`` and ``utilisation.png`` of the built bank."""
    from genmem.experiments.bank_stats import (
        bank_statistics,
        plot_code_utilisation,
        statistics_markdown,
    )

    entries = [
        {"sid": e.sid, "payload": e.payload, "n_records": int(e.metadata.get("n_records", 1))}
        for e in bank.entries()
    ]
    stats = bank_statistics([x.model_dump() for x in lines], entries, codes, spec)
    (out / "stats.json").write_text(stats.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "stats.md").write_text(statistics_markdown(stats), encoding="utf-8")
    plot_code_utilisation(stats, out / "utilisation.png")
