"""`genmem experiment`: the paper's analyses that are neither an evaluation nor training."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from genmem.cli.common import (
    CLIError,
    add_addresser_argument,
    add_budget_arguments,
    add_concurrency_argument,
    add_distill_argument,
    add_sid_model_argument,
    add_source_argument,
    addressing,
    check_concurrency,
    emit,
    positive_int,
)
from genmem.cli.fields import add_field_flags, field_help, model_from_args
from genmem.cli.tasks import add_task_arguments, check_task_source, environment, first_error
from genmem.cli.train import CONFIG_HELP
from genmem.policies.backends import DEFAULT_MODEL_SPEC

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem experiment`` and its sub-commands."""
    from genmem.envs.benches import seed_sources
    from genmem.experiments.codebook_ablation import AblationConfig
    from genmem.experiments.codebook_policy import CodebookPolicyConfig
    from genmem.experiments.fusion import FUSION_CONDITIONS, FusionConfig
    from genmem.experiments.symbols import CONDITIONS, SymbolsConfig

    p = sub.add_parser(
        "experiment", help="analyses of the memory: SID symbols, fusion, codebook ablations"
    )
    inner = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    s = inner.add_parser(
        "symbols",
        help="do a task's SIDs, shown as tokens, help a solver? (prefix depth, text, controls)",
        description=(
            "For each task the addresser gives k SIDs (--beams). The same solver (StackPlanner, "
            "one budget) answers under each condition: raw; the SIDs' first 1, 2, 3 levels "
            "(l1, l1_l2, l1_l3) or all of them (full), level-first, no text; the entries they "
            "look up rewritten by MemRetriever (rewrite) or as they are (retrieved); and two "
            "controls at full depth: another task's SIDs (shuffled) and random valid ones "
            "(random). Writes records.jsonl (resumable), summary.json (condition -> k -> mean "
            "with a bootstrap interval and the paired difference to raw) and symbols.png."
        ),
    )
    add_task_arguments(s, default="gsm8k-test")
    s.add_argument("--limit", type=positive_int, help="first N tasks")
    symbols = SymbolsConfig.model_fields
    # list flags: given as comma-separated text, read by _ints / _names
    s.add_argument("--beams", help=f"comma-separated k: {field_help(symbols['beams'])}")
    s.add_argument(
        "--conditions",
        help=f"comma-separated subset of {','.join(CONDITIONS)} (default all; raw always runs)",
    )
    s.add_argument(
        "--bank",
        help="bank URL (default: the GSM8K seed bank of reference digests, built once, cached)",
    )
    s.add_argument(
        "--model", default=DEFAULT_MODEL_SPEC, help="model spec of the solver and the rewrite"
    )
    add_addresser_argument(s)
    add_sid_model_argument(s)
    add_field_flags(
        s,
        SymbolsConfig,
        ["memory_k", "seed"],
        overrides={"memory_k": {"type": positive_int}, "seed": {"flag": "--control-seed"}},
    )
    add_budget_arguments(s)
    add_concurrency_argument(s)
    s.add_argument("--out", required=True, help="output folder")
    s.add_argument("--json", action="store_true", help="print one JSON summary object")
    s.set_defaults(func=_symbols)

    f = inner.add_parser(
        "fusion",
        help="does a fused entry help more than either of its two sources? (task score)",
        description=(
            "For each task the two bank entries most similar to it (--pair-by) are fused by the "
            "fusion graph into a scratch copy of the bank (the gate decides whether it is "
            "written; --bank never changes). The same solver then answers under each "
            "condition: none, a, b (one source), both (the two sources), fused (the fused "
            "entry if the gate wrote it, else nothing) and unchecked (the fused text whatever "
            "the gate said). Writes pairs.jsonl and records.jsonl (resumable), summary.json "
            "(means with bootstrap intervals; fused minus a, b, the better source, both and "
            "none, paired by task) and fusion.png."
        ),
    )
    add_task_arguments(f, default="gsm8k-test")
    f.add_argument("--limit", type=positive_int, help="first N tasks")
    f.add_argument(
        "--conditions",
        help=f"comma-separated subset of {','.join(FUSION_CONDITIONS)} (default all; fused "
        "always runs)",
    )
    add_field_flags(f, FusionConfig, ["pair_by"])
    f.add_argument(
        "--bank",
        help="bank URL (default: the GSM8K seed bank of reference digests, built once, cached)",
    )
    f.add_argument(
        "--model", default=DEFAULT_MODEL_SPEC, help="model spec of the fusion and the solver"
    )
    add_addresser_argument(f)
    add_sid_model_argument(f)
    add_budget_arguments(f)
    add_concurrency_argument(f)
    f.add_argument("--out", required=True, help="output folder")
    f.add_argument("--json", action="store_true", help="print one JSON summary object")
    f.set_defaults(func=_fusion)

    c = inner.add_parser(
        "codebooks",
        help="3 vs 4 levels and the encoder prefix: codebook metrics and retrieval, one table",
        description=(
            "Builds one seed bank per codebook shape (--configs) and encoding (with the "
            "experience prefix, as plain text, or both) from the same source rows, with the "
            "codebooks fitted on all but the last --heldout share. Reports per bank: "
            "utilisation, DUI, reconstruction error on the fitting rows and on the held-out "
            "rows, and the quantizer's Hit@1 / Hit@5 on the source questions (all, and held-out "
            "only) with bootstrap intervals. With --align-steps it aligns one policy per bank "
            "(addressing mappings, --config preset) and scores it, the quantizer and TF-IDF "
            "(same candidates, same reranker) on the questions alignment held out, the same "
            "in every bank; with --limit it runs the first N tasks of --bench / --data through "
            "the graph with each bank's addresser (its aligned policy, else its quantizer) and "
            "once without memory. Every two banks are compared, paired by question and by "
            "task. Writes codebooks.json and codebooks.md into --out (alignments in align/, "
            "task records in tasks/, both resumable)."
        ),
    )
    add_source_argument(c)
    add_distill_argument(c)
    add_field_flags(c, AblationConfig, ["size"])
    shapes = ";".join(",".join(map(str, s)) for s in AblationConfig.model_fields["configs"].default)
    c.add_argument(
        "--configs",
        default=shapes,
        help=f"codebook shapes compared (default '{shapes}': 4 and 3 levels, 49,152 addresses "
        "each)",
    )
    c.add_argument(
        "--prefix",
        choices=("both", "with", "without"),
        default="both",
        help="encode with the experience prefix, without it, or both (default)",
    )
    # --candidates: one flag for the quantizer's beam and every aligned policy's
    add_field_flags(c, AblationConfig, ["heldout", "candidates"])
    policy = CodebookPolicyConfig.model_fields
    add_field_flags(
        c,
        CodebookPolicyConfig,
        ["align_steps", "preset", "align_eval"],
        overrides={
            "align_steps": {"metavar": "N"},
            "preset": {
                "flag": "--config",
                "help": f"alignment preset (default {policy['preset'].default}): {CONFIG_HELP}",
            },
            "align_eval": {"flag": "--eval-size"},
        },
    )
    add_task_arguments(c, data_help="a task file (JSONL, or CSV for GPQA) for --limit")
    heldout = ", ".join(f"{s.heldout} for {name}" for name, s in seed_sources().items())
    c.add_argument(
        "--limit",
        type=positive_int,
        help="score the first N tasks per bank through the graph (default: no tasks; tasks "
        f"from --bench, by default the bench the --source rows leave out: {heldout})",
    )
    c.add_argument(
        "--model", default=DEFAULT_MODEL_SPEC, help="model spec of the graph's roles (tasks)"
    )
    add_budget_arguments(c)
    c.add_argument("--out", required=True, help="output folder")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=_codebooks)


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise CLIError(f"{flag} {text!r}: comma-separated whole numbers, e.g. 1,5,10") from None
    if not values:
        raise CLIError(f"{flag} {text!r}: name at least one")
    return values


def _names(text: str | None, every: tuple[str, ...]) -> tuple[str, ...]:
    """``--conditions``: the comma-separated names given, or ``every`` one."""
    return tuple(c.strip() for c in (text or ",".join(every)).split(",") if c.strip())


def _symbols(args: argparse.Namespace) -> int:
    from genmem.cli.eval import bank_or_seed
    from genmem.envs.stats import format_interval
    from genmem.experiments.plots import plot_symbols
    from genmem.experiments.symbols import CONDITIONS, SymbolsConfig, run_symbols

    check_task_source(args)
    check_concurrency(args)
    factory = addressing(args.model, args.sid_model)  # a bad spec: exit 2 first
    lists: dict[str, Any] = {}
    if args.beams is not None:
        lists["beams"] = _ints(args.beams, "--beams")
    if args.conditions is not None:
        lists["conditions"] = _names(args.conditions, CONDITIONS)
    config = model_from_args(SymbolsConfig, args, ["max_steps", "memory_k", "seed"], **lists)
    env = environment(args)
    out = Path(args.out)
    bank_url = bank_or_seed(args.bank, out, progress=not args.json)
    chat, generator = _addressing(args, bank_url, factory)
    started = time.perf_counter()
    report = run_symbols(
        env,
        bank_url,
        config,
        out=out,
        chat=chat,
        generator=generator,
        limit=args.limit,
        progress=not args.json,
        concurrency=args.concurrency,
    )
    plot_symbols(report, out / "symbols.png")
    result = report.model_dump(mode="json") | {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "files": {k: str(out / k) for k in ("records.jsonl", "summary.json", "symbols.png")},
    }
    lines = [
        f"{report.bench}: {report.tasks} tasks, {report.metric} in %, addresser "
        f"{report.addresser}, SID tokens read as {report.sid_tokens}",
        "| condition | k | score | minus raw | wins / losses | errors |",
        "|---|---|---|---|---|---|",
    ]
    for condition, cells in report.conditions.items():
        for k, cell in cells.items():
            if condition == "raw" and k != str(report.beams[0]):
                continue
            diff = cell.vs_raw
            shown = "-" if diff is None else format_interval(diff.diff, diff.ci, signed=True)
            tally = "-" if diff is None else f"{diff.wins} / {diff.losses}"
            lines.append(
                f"| {condition} | {'any' if condition == 'raw' else k} | "
                f"{format_interval(cell.score.mean, cell.score.ci)} | {shown} | {tally} | "
                f"{cell.errors} |"
            )
    lines += [f"not run: {c} ({why})" for c, why in report.skipped.items()]
    lines.append(f"records: {report.records}")
    emit(result, as_json=args.json, text="\n".join(lines))
    return 0


def _fusion(args: argparse.Namespace) -> int:
    from genmem.cli.eval import bank_or_seed
    from genmem.experiments.fusion import FUSION_CONDITIONS, FusionConfig, fusion_table, run_fusion
    from genmem.experiments.plots import plot_fusion
    from genmem.policies.backends import capped_chat_model

    check_task_source(args)
    check_concurrency(args)
    factory = addressing(args.model, args.sid_model)  # a bad spec: exit 2 first
    lists = {}
    if args.conditions is not None:
        lists["conditions"] = _names(args.conditions, FUSION_CONDITIONS)
    config = model_from_args(FusionConfig, args, ["pair_by", "addresser", "max_steps"], **lists)
    env = environment(args)
    out = Path(args.out)
    bank_url = bank_or_seed(args.bank, out, progress=not args.json)
    started = time.perf_counter()
    report = run_fusion(
        env,
        bank_url,
        config,
        out=out,
        chat=capped_chat_model(args.model, args.max_new_tokens),
        sid_generator=factory,
        limit=args.limit,
        progress=not args.json,
        concurrency=args.concurrency,
    )
    plot_fusion(report, out / "fusion.png")
    files = ("pairs.jsonl", "records.jsonl", "summary.json", "fusion.png")
    result = report.model_dump(mode="json") | {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "files": {k: str(out / k) for k in files},
    }
    emit(result, as_json=args.json, text=fusion_table(report))
    return 0


def _addressing(args: argparse.Namespace, bank_url: str, factory: Any) -> tuple[Any, Any]:
    """The solver's chat model and the addresser of --addresser / --sid-model for the bank."""
    from genmem.graph.addressing import BankGenerators
    from genmem.graph.retriever import RetrieverConfig
    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    chat = capped_chat_model(args.model, args.max_new_tokens)
    config = RetrieverConfig(addresser=args.addresser, allowed=args.allowed)
    generators = BankGenerators(chat, factory, config, role="MemRetriever")
    return chat, generators(open_bank(bank_url))


def _codebooks(args: argparse.Namespace) -> int:
    from genmem.experiments.codebook_ablation import (
        AblationConfig,
        ablation_table,
        run_codebook_ablation,
    )
    from genmem.experiments.codebook_policy import CodebookPolicyConfig
    from genmem.memory.search import parse_configs

    try:
        configs = tuple(parse_configs(args.configs))
    except ValueError as exc:
        raise CLIError(f"--configs {args.configs!r}: {exc}") from None
    env = None
    if args.limit:
        if not (args.bench or args.data):
            from genmem.envs.benches import seeding

            args.bench = seeding(args.source).heldout  # the tasks its rows leave out
        env = environment(args)
    elif args.bench or args.data:
        raise CLIError("--bench / --data name the tasks of --limit N: give --limit too")
    try:
        from genmem.training.config import load_preset

        load_preset(args.preset)  # a bad preset: exit 2 before any bank is built
    except ValueError as exc:
        raise CLIError(first_error(exc)) from None
    policy = model_from_args(
        CodebookPolicyConfig,
        args,
        [
            "align_steps",
            "preset",
            "candidates",
            "align_eval",
            "model",
            "max_steps",
            "max_new_tokens",
            "allowed",
        ],
        tasks=args.limit or 0,
    )
    prefixes = {"both": (True, False), "with": (True,), "without": (False,)}[args.prefix]
    config = model_from_args(
        AblationConfig,
        args,
        ["source", "distill", "size", "heldout", "candidates"],
        configs=configs,
        prefixes=prefixes,
    )
    started = time.perf_counter()
    report = run_codebook_ablation(
        config, Path(args.out), policy=policy, env=env, progress=not args.json
    )
    result = report.model_dump(mode="json") | {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "files": {k: str(Path(args.out) / k) for k in ("codebooks.json", "codebooks.md")},
    }
    emit(result, as_json=args.json, text=ablation_table(report))
    return 0
