"""Stage 2, memory-operation mid-training: SFT on graph traces kept by rejection sampling.

For each training task the graphs run with a *teacher* chat model (any backend spec, e.g. a
vLLM-served larger model) for the text turns, and the student policy (the stage-1 checkpoint)
for the SID turns, whose constrained decoder keeps every address valid:

- MemRetriever: address -> ``memory_lookup`` -> rewrite; StackPlanner then solves the task with
  the rewritten support and the scorer says whether the answer is right;
- MemEvolver: address -> ``memory_lookup`` -> decision (op, payload) on a scratch copy of the
  bank, from the trajectory and outcome of that run.

Every trace is written to ``traces.jsonl``. Rejection sampling keeps a retriever trace when it
is well formed (a valid SID, something retrieved, a non-empty rewrite) and, with
``keep="correct"`` (the paper's rule), the supported answer was right; an evolver trace when its
decision was applied and, with ``keep="correct"``, the run it distils succeeded. Each kept trace
gives SFT examples of the role's turns, rendered exactly as the policy sees them at inference:
the SID turn (addressing prompt -> SID) and the text turn (the conversation up to it -> the
teacher's reply: the rewrite, or the decision call). One role per run: the paper trains the two
policies separately.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from tqdm.auto import tqdm

from genmem.envs.base import Environment, Task
from genmem.policies.prompts import (
    ADDRESS_PROMPT,
    NO_MEMORY_ANSWER,
    evolver_user_message,
    retriever_user_message,
)
from genmem.policies.sid_decoding import address_prompt
from genmem.training.adapters import merge_adapter
from genmem.training.config import (
    MID_TASKS,
    TRAINING_LOOKUP_K,
    TRAINING_MAX_NEW_TOKENS,
    TrainConfig,
    partitions,
    training_device,
)
from genmem.training.distributed import shard, unshard
from genmem.training.dynamics import plot_loss
from genmem.training.graph_runs import planner_graph, scratch_bank, solve
from genmem.training.policy_io import (
    START_DIR,
    TrainingRun,
    join_run,
    load_started,
    load_trainable,
    save_start,
    write_policy,
)
from genmem.training.rollouts import Role
from genmem.training.sft import logged_losses, sft_arguments, sft_train

__all__ = ["Keep", "MidReport", "TraceExample", "run_mid", "trace_examples"]

Keep = Literal["correct", "valid"]


class TraceExample(BaseModel):
    """One SFT example cut from a trace."""

    turn: Literal["sid", "text"]
    prompt: str
    completion: str


class MidReport(BaseModel):
    """What a mid-training run collected, kept and trained."""

    out: str
    role: str
    keep: str
    tasks: int
    traces: int
    kept: int
    examples: int
    steps: int
    seconds: float
    losses: list[float]
    files: dict[str, str]


def trace_examples(
    tokenizer: Any, context: str, sid: str, messages: Sequence[Any], tools: Any
) -> list[TraceExample]:
    """The SID turn and the final text turn of a trace, as the policy sees them."""
    from genmem.policies.chat_local import to_chat_messages

    sid_prompt = address_prompt(tokenizer, context, system_prompt=ADDRESS_PROMPT)
    history = to_chat_messages(list(messages[:-1]), tools)
    reply = to_chat_messages([messages[-1]])[0]["content"]
    text_prompt = tokenizer.apply_chat_template(history, add_generation_prompt=True, tokenize=False)
    return [
        TraceExample(turn="sid", prompt=sid_prompt, completion=sid),
        TraceExample(turn="text", prompt=text_prompt, completion=reply),
    ]


class _Collector:
    """Runs the graphs for one role with the teacher's text turns and the student's SIDs."""

    def __init__(self, env: Environment, bank_url: str, teacher: Any, student: Any, scratch: Path):
        from genmem.graph.evolver import build_evolver_graph
        from genmem.graph.retriever import build_retriever_graph
        from genmem.memory.location import open_bank
        from genmem.policies.sid_decoding import TransformersSIDGenerator

        self.env, self.bank_url, self.scratch = env, bank_url, scratch
        self.bank = open_bank(bank_url)
        addresser = TransformersSIDGenerator(student, self.bank.spec)
        self.retriever = build_retriever_graph(teacher, sid_generator=addresser).compile()
        self.evolver = build_evolver_graph(teacher, sid_generator=addresser).compile()
        self.planner = planner_graph(teacher, env, max_steps=1)

    def solve(self, task: Task, support: str | None) -> tuple[bool, Any]:
        """Whether StackPlanner answers ``task`` right with ``support``, and its trajectory."""
        _, outcome, trajectory = solve(self.planner, self.env, task, support)
        return bool(outcome.success), trajectory

    def retriever_trace(self, task: Task) -> dict[str, Any]:
        state = self.retriever.invoke(
            {"query": task.query},
            context={"bank_url": self.bank_url, "memory_k": TRAINING_LOOKUP_K},
        )
        support = state.get("support") or ""
        valid = (
            bool(state.get("sid"))
            and bool(state.get("retrieved"))
            and (support.strip() not in ("", NO_MEMORY_ANSWER))
            # a rewrite the gate refused is not a target to learn from
            and state.get("support_source") == "rewrite"
        )
        correct = self.solve(task, support)[0] if valid else False
        return {
            "context": retriever_user_message(task.query),
            "sid": state.get("sid"),
            "messages": state.get("messages", []),
            "tools": (),
            "valid": valid,
            "correct": correct,
            "support": support,
        }

    def evolver_trace(self, task: Task) -> dict[str, Any]:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        from genmem.graph.trajectory import render_trajectory
        from genmem.policies.prompts import EvolverDecision

        ok, trajectory = self.solve(task, None)
        outcome = "success" if ok else "failure"
        with scratch_bank(self.bank_url, self.scratch / "scratch.db") as url:
            state = self.evolver.invoke(
                {"query": task.query, "trajectory": trajectory, "outcome": outcome},
                context={"bank_url": url, "memory_k": TRAINING_LOOKUP_K},
            )
        applied = bool(state.get("update"))
        return {
            "context": evolver_user_message(task.query, render_trajectory(trajectory), outcome),
            "sid": state.get("sid"),
            "messages": state.get("messages", []),
            "tools": [convert_to_openai_tool(EvolverDecision)],
            "valid": applied and bool(state.get("sid")),
            "correct": applied and ok,
            "decision": state.get("decision"),
        }


def run_mid(
    bank_url: str,
    env: Environment,
    out: Path,
    *,
    preset: TrainConfig,
    role: Role = "retriever",
    model: str | None = None,
    teacher: str | Any = "local",
    keep: Keep = "correct",
    limit: int = MID_TASKS,
    max_new_tokens: int = TRAINING_MAX_NEW_TOKENS,
    max_steps: int | None = None,
    progress: bool = True,
) -> MidReport:
    """Collect ``role`` traces on ``env``'s first ``limit`` tasks, keep, and fine-tune on them.

    ``teacher`` writes the text turns: a model spec, or a chat model.

    Under a launcher every process collects the traces of its share of the tasks (every
    ``world``-th) with its own scratch bank; the traces are gathered, so every process trains
    on the same examples, and the main process writes ``traces.jsonl`` in task order.
    """
    from genmem.memory.bank_copy import working_copy
    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    ranks, preset = join_run(preset)
    run = TrainingRun.start(out, "mid", preset, ranks)
    device = training_device(preset, ranks.local_rank)
    with ranks.main_first() as main:
        work_url = working_copy(bank_url, out) if main else None
        if main and ranks.launched:
            save_start(model, open_bank(work_url), out)
    work_url = ranks.broadcast(work_url)
    if ranks.launched:  # a whole copy to write SIDs with while collecting; freed before training
        student = load_started(out, device, partitioned=False)
    else:
        student = load_trainable(model, open_bank(work_url), device)
    tasks = env.tasks(limit)
    with tempfile.TemporaryDirectory(prefix="genmem-mid-") as scratch:
        teacher_model = (
            capped_chat_model(teacher, max_new_tokens) if isinstance(teacher, str) else teacher
        )
        collector = _Collector(env, work_url, teacher_model, student, Path(scratch))
        mine = [
            _trace(collector, task, role, keep, student.tokenizer)
            for task in tqdm(
                shard(tasks, ranks),
                desc=f"{role} traces",
                unit="task",
                disable=not progress or not ranks.is_main,
            )
        ]
        spec = collector.bank.spec
        collector.bank.store.close()
    traces = unshard(ranks.gather(mine), len(tasks))
    traces_path = out / "traces.jsonl"
    if ranks.is_main:
        with traces_path.open("w", encoding="utf-8") as fh:
            for task, (record, _) in zip(tasks, traces, strict=True):
                fh.write(json.dumps({"task": task.id, **record}, default=str) + "\n")
    examples = [x for _, found in traces for x in found]
    kept = sum(1 for record, _ in traces if record["kept"])
    if not examples:
        raise ValueError(
            f"no {role} trace passed rejection sampling (keep={keep!r}) on {len(tasks)} tasks; see "
            f"{traces_path}. Use more tasks, a stronger --teacher, or --keep valid"
        )
    pairs = [(x.prompt, x.completion) for x in examples]
    args = sft_arguments(preset, out, "mid", max_steps, progress, started=ranks.launched)
    if ranks.launched:
        del student
        policy = load_started(out, device, partitioned=partitions(preset))
    else:
        policy = student
    piece = sft_train(policy, pairs, preset, out, args, spec=spec, ranks=ranks)
    trainer, seconds = piece.trainer, piece.seconds
    merge_adapter(policy)
    notes = {"stage": "mid", "role": role, "keep": keep, "adapter": preset.adapter}
    files = write_policy(policy, out, run, notes=notes, trainer=trainer, ranks=ranks)
    files["traces"] = str(traces_path)
    loss_steps, losses = logged_losses(trainer)
    report = MidReport(
        out=str(out),
        role=role,
        keep=keep,
        tasks=len(tasks),
        traces=len(tasks),
        kept=kept,
        examples=len(examples),
        steps=int(trainer.state.global_step),
        seconds=round(seconds, 2),
        losses=losses,
        files=files,
    )
    if ranks.is_main:
        report.files["plot"] = plot_loss(
            losses, out / "mid.png", title=f"mid-training loss ({role})", steps=loss_steps
        )
        if ranks.launched:
            shutil.rmtree(out / START_DIR, ignore_errors=True)
        run.finish(report.model_dump(mode="json"))
    return report


def _trace(
    collector: _Collector, task: Task, role: Role, keep: Keep, tokenizer: Any
) -> tuple[dict[str, Any], list[TraceExample]]:
    """One task's trace record (as ``traces.jsonl`` keeps it) and the examples it gives."""
    trace = (
        collector.retriever_trace(task) if role == "retriever" else collector.evolver_trace(task)
    )
    keep_it = trace["valid"] and (keep == "valid" or trace["correct"])
    found = (
        trace_examples(tokenizer, trace["context"], trace["sid"], trace["messages"], trace["tools"])
        if keep_it
        else []
    )
    record = {k: v for k, v in trace.items() if k not in ("messages", "tools")}
    # JSON-safe now: the record travels between processes and into traces.jsonl as it is
    record = json.loads(json.dumps({"kept": keep_it, **record}, default=str))
    return record, found
