"""`genmem evolve`: online self-evolution with read-only probes after every stream block."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from genmem.cli.common import (
    CLIError,
    add_addresser_argument,
    add_budget_arguments,
    add_concurrency_argument,
    add_interactor_argument,
    add_sid_model_argument,
    addressing,
    check_interactor,
    emit,
)
from genmem.cli.fields import add_field_flags, model_from_args
from genmem.cli.tasks import add_task_arguments, check_task_source, environment

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem evolve``."""
    from genmem.experiments.evolution_config import EVOLVE_METHODS, EvolveConfig

    p = sub.add_parser(
        "evolve",
        help="online self-evolution: stream blocks, read-only probes, snapshots and plots",
        description=(
            "Weights and codebooks stay frozen. A held-out stream runs in fixed order through "
            "the closed loop (retrieve, execute, score, evolve) on a copy of --bank; after each "
            "block the bank is snapshotted and a fixed probe set, disjoint from the stream, is "
            "run read-only by each method on that snapshot (sid: SID generation; greedy: one "
            "candidate; frozen: the bank before any write; tfidf/dense: indexes rebuilt from "
            "the current payloads; none: no memory). --out gets stream.jsonl and probes.jsonl "
            "(resumable), snapshots/, logs/, summary.json/md and the plots. Every probe mean "
            "counts an errored run as a failure and carries a 95% bootstrap interval over probe "
            "tasks; sid minus frozen is paired by task at each checkpoint. --seeds N repeats "
            "the run per decoding seed (a sampling model: --temperature > 0) into seed<s>/ and "
            "pools the probes by task. --concurrency N runs a checkpoint's probe runs N at a "
            "time; the stream itself always runs in order, each update applied before the next "
            "query."
        ),
    )
    p.add_argument("--bank", required=True, help="the starting bank (never written; copied)")
    add_task_arguments(p)
    add_field_flags(p, EvolveConfig, ["blocks", "block_size", "probe_size"])
    p.add_argument(
        "--methods",
        default="sid,frozen,tfidf,dense",
        help=f"probe methods, comma-separated, from {','.join(EVOLVE_METHODS)} "
        "(default sid,frozen,tfidf,dense)",
    )
    add_field_flags(p, EvolveConfig, ["model"])
    add_addresser_argument(p)
    add_sid_model_argument(p)
    add_field_flags(
        p,
        EvolveConfig,
        ["candidates", "rerank", "memory_k", "temperature", "seeds", "rerun_controls"],
        overrides={"temperature": {"type": _temperature}, "seeds": {"metavar": "N"}},
    )
    add_budget_arguments(p)
    add_interactor_argument(p)
    add_concurrency_argument(p)
    p.add_argument("--out", required=True, help="output folder (rerun it to resume)")
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_evolve)


def _temperature(value: str) -> float:
    """argparse type: a sampling temperature, a number >= 0."""
    try:
        t = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not t >= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be >= 0 (0 decodes greedily)")
    return t


def _reference_sids(args: argparse.Namespace, env: Any) -> dict[str, str]:
    """Task id -> ``reference_sid`` from the lines of --data that carry one."""
    if not args.data:
        return {}
    from genmem.envs.bundled import read_jsonl

    by_query: dict[str, str] = {}
    if Path(args.data).suffix == ".jsonl":
        for _, row in read_jsonl(args.data):
            text = row.get("question") or row.get("query") or row.get("problem")
            if isinstance(text, str) and isinstance(row.get("reference_sid"), str):
                by_query[text.strip()] = row["reference_sid"]
    if not by_query:
        return {}
    return {t.id: by_query[t.query.strip()] for t in env.tasks() if t.query.strip() in by_query}


def _evolve(args: argparse.Namespace) -> int:
    from genmem.experiments.evolution import EvolveConfig, run_evolution
    from genmem.memory.location import open_bank

    check_task_source(args)  # no tasks: exit 2 before any work
    check_interactor(args)

    config = model_from_args(EvolveConfig, args, seed=max(args.seed, 0))
    if config.rerank and config.candidates < 2 and "sid" in config.methods:
        raise CLIError("reranking needs --candidates >= 2 (or pass --no-rerank)")
    open_bank(args.bank)  # a bad URL or a missing bank fails before any work
    env = environment(args)
    try:
        summary = run_evolution(
            env,
            config,
            bank_url=args.bank,
            out=Path(args.out),
            sid_generator=addressing(args.model, args.sid_model),
            reference_sids=_reference_sids(args, env),
            progress=not args.json,
            concurrency=args.concurrency,
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    text = (Path(args.out) / "summary.md").read_text(encoding="utf-8")
    emit(summary.model_dump(), as_json=args.json, text=text + f"\n{summary.seconds:.0f} s\n")
    return 0
