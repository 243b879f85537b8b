"""`genmem bank coldstart`: build a bank from StackPlanner's attempts at training tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from genmem.cli.common import (
    CLIError,
    add_concurrency_argument,
    add_gate_argument,
    emit,
    fail,
    gate_summary,
    positive_int,
)
from genmem.cli.tasks import add_task_arguments, check_task_source, environment, first_error
from genmem.graph.stack import DEFAULT_MAX_STEPS

__all__ = ["register"]


def register(bsub: argparse._SubParsersAction, url_help: str) -> None:
    """Add ``genmem bank coldstart`` to the ``genmem bank`` sub-commands."""
    p = bsub.add_parser(
        "coldstart",
        help="attempts -> assessment -> contrastive extraction -> SIDs -> bank",
        description=(
            "For each training task StackPlanner makes K attempts; each gets a verdict from the "
            "reference or the environment's signal (none: unverified) and a faithful summary; "
            "the model then extracts experience records per task by contrasting the attempts. "
            "The records' rich summaries are encoded, quantised with fitted (or --codebook) "
            "codebooks, merged per SID and written to --bank. --out gets attempts, "
            "assessments, experiences, failures (JSONL, resumable), stats.json/stats.md and "
            "utilisation.png. --concurrency N runs the attempts, summaries and extractions of "
            "different tasks N at a time."
        ),
    )
    add_task_arguments(p)
    p.add_argument("--limit", type=positive_int, help="first N tasks")
    p.add_argument("--attempts", type=positive_int, default=2, help="tries per task, K (2)")
    p.add_argument("--sizes", default="48,16,8,8", help="codebook sizes to fit (48,16,8,8)")
    p.add_argument("--codebook", help="reuse these codebooks instead of fitting")
    p.add_argument("--model", default="local", help="model spec for every stage (default local)")
    p.add_argument(
        "--merge",
        choices=("llm", "concat"),
        default="llm",
        help="how records on one SID become one entry (llm: the model merges; concat: joined)",
    )
    p.add_argument(
        "--max-steps",
        type=positive_int,
        default=DEFAULT_MAX_STEPS,
        help=f"steps per attempt ({DEFAULT_MAX_STEPS})",
    )
    p.add_argument("--max-new-tokens", type=positive_int, help="reply cap of an attempt's calls")
    p.add_argument(
        "--max-field-chars",
        type=positive_int,
        default=100,
        help="cap per field the model writes (100; a small model must close its JSON)",
    )
    p.add_argument("--max-records", type=positive_int, default=2, help="experiences per task (2)")
    p.add_argument(
        "--synthesise-prefix-depth",
        type=positive_int,
        metavar="D",
        help="also write one general skill card per cluster of records sharing their first D "
        "SID levels (2 or more records), through the write gate; off by default",
    )
    p.add_argument("--temperature", type=float, default=0.7, help="sampling of tries 2..K (0.7)")
    p.add_argument("--retries", type=int, default=2, help="retries of an unparsable reply (2)")
    add_concurrency_argument(p)
    add_gate_argument(p)
    p.add_argument("--bank", required=True, help=url_help)
    p.add_argument("--out", required=True, help="output folder (rerun it to resume)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_coldstart)


def _config(args: argparse.Namespace):
    from genmem.experiments.coldstart import ColdStartConfig
    from genmem.memory.sid import SIDSpec

    try:
        sizes = SIDSpec.from_string(args.sizes).sizes
    except ValueError as exc:
        raise CLIError(f"--sizes {args.sizes!r}: {exc}") from None
    if args.codebook and not Path(args.codebook).is_dir():
        raise CLIError(f"--codebook {args.codebook!r} is not a folder")
    try:
        return ColdStartConfig(
            attempts=args.attempts,
            limit=args.limit,
            sizes=sizes,
            codebook=args.codebook,
            model=args.model,
            max_new_tokens=args.max_new_tokens,
            max_steps=args.max_steps,
            temperature=args.temperature,
            merge=args.merge,
            retries=args.retries,
            max_field_chars=args.max_field_chars,
            max_records=args.max_records,
            seed=max(args.seed, 0),
            gate=not args.no_gate,
            synthesise_prefix_depth=args.synthesise_prefix_depth,
        )
    except ValueError as exc:
        raise CLIError(first_error(exc)) from None


def _coldstart(args: argparse.Namespace) -> int:
    from genmem.experiments.coldstart import build_coldstart_bank
    from genmem.memory.location import parse_bank_url

    check_task_source(args)  # no tasks: exit 2 before any work

    config = _config(args)
    parse_bank_url(args.bank)  # a bad URL fails before any work
    if not config.codebook and args.limit and args.limit * config.max_records < max(config.sizes):
        raise CLIError(
            f"--limit {args.limit} tasks give at most {args.limit * config.max_records} "
            f"experiences, fewer than the {max(config.sizes)} codes of the first level: "
            "raise --limit, pass smaller --sizes, or reuse codebooks with --codebook"
        )
    env = environment(args)
    try:
        report = build_coldstart_bank(
            env,
            config,
            bank_url=args.bank,
            out=Path(args.out),
            progress=not args.json,
            concurrency=args.concurrency,
        )
    except ValueError as exc:  # nothing extracted, or too few records to fit codebooks
        return fail(str(exc), 1)
    out = Path(args.out)
    emit(
        report.model_dump()
        | {"files": {k: str(out / k) for k in ("stats.json", "stats.md", "utilisation.png")}},
        as_json=args.json,
        text=(
            f"bank {report.bank_id!r} at {report.bank}: {report.queries} tasks, "
            f"{report.attempts} attempts {report.verdicts}, {report.records} experiences -> "
            f"{report.entries} entries ({report.merged_entries} merged, {report.skills} skill "
            f"cards); failures: "
            f"{report.assessment_failures} assessments, {report.extraction_failures} "
            f"extractions; {gate_summary(report.gate_rejections)}; {report.seconds:.0f} s\n"
            + (out / "stats.md").read_text(encoding="utf-8")
        ),
    )
    return 0
