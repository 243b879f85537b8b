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
)
from genmem.cli.fields import add_field_flags, model_from_args
from genmem.cli.tasks import add_task_arguments, check_task_source, environment
from genmem.memory.sid import DEFAULT_SIZES

__all__ = ["register"]


def register(bsub: argparse._SubParsersAction, url_help: str) -> None:
    """Add ``genmem bank coldstart`` to the ``genmem bank`` sub-commands."""
    from genmem.experiments.coldstart import ColdStartConfig

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
    add_field_flags(p, ColdStartConfig, ["limit", "attempts"])
    p.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help=f"codebook sizes to fit ({','.join(map(str, DEFAULT_SIZES))})",
    )
    add_field_flags(
        p,
        ColdStartConfig,
        [
            "codebook",
            "model",
            "merge",
            "max_steps",
            "max_new_tokens",
            "max_field_chars",
            "max_records",
            "synthesise_prefix_depth",
            "temperature",
            "retries",
        ],
        overrides={"synthesise_prefix_depth": {"metavar": "D"}},
    )
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
    return model_from_args(
        ColdStartConfig, args, sizes=sizes, seed=max(args.seed, 0), gate=not args.no_gate
    )


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
