"""`genmem run`: the closed loop (retrieve -> StackPlanner -> evolve) over a query stream."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

from genmem.cli.common import (
    CLIError,
    add_addresser_argument,
    add_budget_arguments,
    add_concurrency_argument,
    add_sid_model_argument,
    check_concurrency,
    emit,
    positive_int,
)
from genmem.cli.fields import add_field_flags
from genmem.cli.tasks import add_task_arguments, check_task_source
from genmem.experiments.run_config import GraphRunConfig
from genmem.graph.stack import DEFAULT_MAX_STEPS

__all__ = [
    "RUN_BENCHES",
    "add_loop_arguments",
    "build_loop_app",
    "register",
    "render_details",
    "scorer_for",
]

RUN_BENCHES = ("gsm8k-train", "gsm8k-test")
"""The benches ``run`` reads as a query stream (other benches run through ``genmem eval``)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem run``."""
    p = sub.add_parser(
        "run",
        help="run the closed loop over a query stream, one JSON line per query",
        description=(
            "Each query goes through the genmem graph: MemRetriever generates an SID and looks "
            "it up, StackPlanner solves the task with that support, MemEvolver writes one update "
            "(mode evolve) before the next query. Writes results.jsonl (query, SID, retrieved, "
            "support, answer, score, trajectory, update) and summary.json into --out; a rerun "
            "into the same folder continues after the recorded queries. --concurrency N runs N "
            "queries at once in read_only and no_memory mode; in evolve mode each update is "
            "applied before the next query reads the bank, so N must be 1 (exit 2 otherwise)."
        ),
    )
    p.add_argument("--bank", required=True, help="bank URL, e.g. sqlite:///bank.db?bank=gsm8k")
    add_task_arguments(
        p,
        benches=RUN_BENCHES,
        env_options=False,
        data_help="JSONL of {query|question, reference|answer(s), id, outcome}: the reference "
        "only scores answers; an optional outcome is your own verdict, which MemEvolver may see",
    )
    p.add_argument("--limit", type=positive_int, help="first N queries only")
    p.add_argument("--out", required=True, help="output folder")
    add_loop_arguments(p)
    add_concurrency_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_run)


def add_loop_arguments(p: argparse.ArgumentParser, *, max_steps: int = DEFAULT_MAX_STEPS) -> None:
    """Options shared by ``run`` and ``demo``: mode, model, budgets, addressing, scoring."""
    p.add_argument(
        "--mode",
        choices=("evolve", "read_only", "no_memory"),
        default="evolve",
        help="evolve (default): write updates; read_only: never write; no_memory: baseline",
    )
    add_field_flags(p, GraphRunConfig, ["model"])
    add_budget_arguments(p, max_steps=max_steps)
    p.add_argument("--beam", type=positive_int, default=1, help="SID candidates (1 = greedy)")
    add_addresser_argument(p)
    add_sid_model_argument(p)
    p.add_argument(
        "--scorer",
        choices=("auto", "gsm8k", "exact", "none"),
        default="auto",
        help="how answers are scored against references (auto: numeric for numbers)",
    )


def scorer_for(name: str, references: list[Any]) -> Any:
    """The scoring function for ``name`` (``auto`` picks numeric when references are numbers)."""
    from genmem.envs.gsm8k import extract_number, score_gsm8k

    if name == "none":
        return None
    if name == "auto":
        refs = [r for r in references if r is not None]
        if not refs:
            return None
        numeric = all(extract_number(str(r)) == str(r).replace(",", "").strip() for r in refs)
        name = "gsm8k" if numeric else "exact"
    if name == "gsm8k":
        return score_gsm8k

    def exact(answer: str | None, reference: Any) -> float:
        options = reference if isinstance(reference, list) else [reference]
        said = " ".join((answer or "").lower().split())
        return float(any(said == " ".join(str(o).lower().split()) for o in options))

    return exact


def build_loop_app(args: argparse.Namespace, scorer: Any) -> Any:
    """The compiled closed loop for these options (:func:`genmem.graph.wiring.closed_loop`)."""
    from genmem.graph.wiring import closed_loop

    try:
        return closed_loop(
            args.model,
            sid_model=args.sid_model,
            max_new_tokens=args.max_new_tokens,
            beam=args.beam,
            allowed=args.allowed,
            addresser=args.addresser,
            max_steps=args.max_steps,
            scorer=scorer,
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _queries(args: argparse.Namespace) -> list[dict[str, Any]]:
    from genmem.envs.benches import BENCHES
    from genmem.envs.gsm8k import gsm8k_queries
    from genmem.experiments.runner import load_queries

    check_task_source(args)
    if args.bench:
        return gsm8k_queries(BENCHES[args.bench].file, limit=args.limit)
    path = Path(args.data)
    if not path.is_file():
        raise CLIError(f"--data {args.data!r} does not exist")
    try:
        rows = load_queries(path, limit=args.limit)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if not rows:
        raise CLIError(f"--data {args.data!r} holds no queries")
    return rows


def _run(args: argparse.Namespace) -> int:
    from genmem.experiments.runner import run_stream, summarize
    from genmem.memory.location import open_bank

    check_concurrency(args)
    queries = _queries(args)
    bank = open_bank(args.bank)  # fails early, with a clear error, on a bad URL or bank
    if args.mode == "evolve" and bank.read_only:
        raise CLIError(f"bank {bank.bank_id!r} is read-only; use --mode read_only or another bank")
    before = bank.stats()
    scorer = scorer_for(args.scorer, [q.get("reference") for q in queries])
    app = build_loop_app(args, scorer)
    out = Path(args.out)
    started = time.perf_counter()
    records = run_stream(
        app,
        queries,
        context={"bank_url": args.bank},
        mode=args.mode,
        out=out,
        progress=not args.json,
        concurrency=args.concurrency,
    )
    settings = {
        "bank": args.bank,
        "source": args.bench or args.data,
        "mode": args.mode,
        "model": args.model,
        "max_steps": args.max_steps,
        "max_new_tokens": args.max_new_tokens,
        "allowed": args.allowed,
        "beam": args.beam,
        "scorer": args.scorer,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "bank_events_before": before.events,
        "bank_events_after": open_bank(args.bank).stats().events,
    }
    summary = summarize(records, settings, scoring=scorer is not None)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2))
    emit(summary.model_dump(), as_json=args.json, text=render_table(records, summary))
    return 0


def render_table(records: list[Any], summary: Any) -> str:
    """A plain-text table: question, SID used and who chose it, answer, correct?, memory op."""
    rows = [("#", "question", "SID used", "by", "answer", "correct", "memory op")]
    for i, r in enumerate(records, 1):
        correct = "-" if r.score is None else ("yes" if r.score >= 1 else "no")
        if r.error:
            correct = "error"
        rows.append(
            (
                str(i),
                _clip(r.query, 48),
                _short_sid(r.sid),
                r.addresser or "-",
                _clip(r.answer or "", 14),
                correct,
                r.memory_op(),
            )
        )
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    acc = "n/a"
    if summary.accuracy is not None:
        lo, hi = summary.accuracy_ci or (summary.accuracy, summary.accuracy)
        acc = f"{summary.accuracy:.0%} [{lo:.0%}, {hi:.0%}] of {summary.scored}"
        if any(r.error and r.reference is not None for r in records):
            acc += " (errored runs count as wrong)"
    ops = ", ".join(f"{k} {v}" for k, v in sorted(summary.operations.items())) or "none"
    lines += [
        "",
        f"answered {summary.answered}/{summary.queries}, correct {acc}, memory ops: {ops}, "
        f"{summary.mean_seconds:.0f} s per query",
    ]
    return "\n".join(lines)


def render_details(records: list[Any], bank: Any) -> str:
    """Per query: the addresser and SID, the entry read and its source, answer, memory write."""
    blocks = []
    for i, r in enumerate(records, 1):
        verdict = "" if r.score is None else (" (correct)" if r.score >= 1 else " (wrong)")
        lines = [f"[{i}] {_clip(r.query, 90)}  (reference {r.reference})"]
        if r.error:
            lines.append(f"    error: {_clip(r.error, 100)}")
        if r.sid:
            hit = r.retrieved[0] if r.retrieved else None
            read = "nothing"
            if hit is not None:
                kind = "exact entry" if hit.get("sid") == r.sid else "nearest entry"
                read = f"{kind} {hit.get('sid')} v{hit.get('version')}"
            lines.append(f"    addresser: {r.addresser or '-'} -> {r.sid}; read {read}")
            if hit is not None:
                lines.append(f"    entry: {_clip(str(hit.get('payload', '')), 100)}")
                source = _provenance(bank, hit.get("sid"), hit.get("version"))
                lines.append(f"    came from: {source}")
            lines.append(f"    support given: {_clip(r.support or '', 100)}")
        lines.append(f"    answer: {_clip(r.answer or '(none)', 60)}{verdict}")
        lines.append(f"    memory: {_memory_line(r)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _provenance(bank: Any, sid: str | None, version: int | None) -> str:
    """The training problem a seed entry came from, or who wrote the version read."""
    if sid is None:
        return "-"
    versions = {v.version: v for v in bank.history(sid)}
    v = versions.get(version) if version is not None else None
    if v is None:
        return "-"
    sources = v.metadata.get("sources") or []
    questions = [s.get("question") or s.get("query") for s in sources if isinstance(s, dict)]
    questions = [q for q in questions if q]
    if questions:
        more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
        return f"training problem {_clip(questions[0], 80)!r}{more}"
    return f"written by {v.actor}"


def _memory_line(r: Any) -> str:
    """What happened to the memory after the answer, in words."""
    if r.update:
        u = r.update
        before = "empty" if u.get("version_before") is None else f"v{u['version_before']}"
        after = "empty" if u.get("version_after") is None else f"v{u['version_after']}"
        by = f" (addressed by {r.update_addresser})" if r.update_addresser else ""
        return f"{u.get('outcome')} at {u.get('sid')}: {before} -> {after}{by}"
    e = r.evolve_error
    if e and e.get("kind") == "gated":
        said = _clip(str(e.get("output") or ""), 60)
        return f"the write gate refused the update ({e.get('gate_reason')}): {said!r}"
    if e:
        return f"no write ({e.get('kind')}): {_clip(str(e.get('message') or ''), 80)}"
    return "no write (read-only run)"


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _short_sid(sid: str | None) -> str:
    if not sid:
        return "-"
    return "(" + ",".join(re.findall(r"_(\d+)>", sid)) + ")"
