"""`genmem eval`: benchmark methods through the graph, or score addressing on reference SIDs."""

from __future__ import annotations

import argparse
import json
import time
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
    check_concurrency,
    check_interactor,
    emit,
    positive_int,
    sid_generator,
)
from genmem.cli.fields import add_field_flags, field_help, model_from_args
from genmem.cli.tasks import add_task_arguments, check_task_source, environment

__all__ = ["bank_or_seed", "register"]

# eval's own bank when none is given: reference digests of 2000 problems, codebooks fitted on
# 1000 (not the seed bank defaults: this is the bank eval's figures were measured on)
_DEFAULT_BANK_SIZE = 2000
_DEFAULT_BANK_FIT = 1000


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem eval``."""
    from genmem.envs.benches import BENCHES
    from genmem.experiments.evaluate import EvalConfig
    from genmem.experiments.run_config import DEFAULT_CANDIDATES
    from genmem.policies.baselines import DEFAULT_K

    benches = "; ".join(f"{b.name}: {b.about}" for b in BENCHES.values())
    p = sub.add_parser(
        "eval",
        help="evaluate none/tfidf/dense/sid through the same graph on a benchmark",
        description=(
            "Every method runs through the same genmem graph with the same model and budgets; "
            "only how support is chosen differs (none: no memory; tfidf/dense: the top payloads "
            "by similarity; sid: SID generation + lookup), with the same candidate budget and "
            "reranker. Writes records.jsonl (resumable), summary.md, summary.json and "
            "summary.png into --out: each mean over all tasks (an errored run counts as a "
            "failure) with a 95% bootstrap interval, and each memory method minus none task by "
            "task. With --pairs, scores addressing alone: Candidate Hit, Hit@1/5 and per-level "
            "prefix hits, with intervals. --concurrency N runs N (method, task) runs at once "
            "in read_only mode (evolve mode writes each method's bank in task order: N must be "
            f"1). Benches: {benches}."
        ),
    )
    src = add_task_arguments(p)
    src.add_argument(
        "--pairs", help='retrieval only: JSONL of {"query", "reference_sid"} (needs --bank)'
    )
    p.add_argument(
        "--methods",
        default="none,tfidf,dense,sid",
        help="comma-separated (none,tfidf,dense,quantizer,sid; sid follows --addresser, except "
        "with --pairs, where it is always the policy's own generation)",
    )
    p.add_argument("--limit", type=positive_int, help="first N tasks")
    add_field_flags(p, EvalConfig, ["model"])
    add_addresser_argument(p)
    add_sid_model_argument(p)
    p.add_argument(
        "--bank",
        help="bank URL the memory methods read (default: the GSM8K seed bank of reference "
        "digests, built once and cached)",
    )
    p.add_argument(
        "--mode",
        choices=("read_only", "evolve"),
        default="read_only",
        help="read_only (default): memory methods never write; evolve: each method writes to "
        "its own copy of the bank",
    )
    candidates = field_help(EvalConfig.model_fields["candidates"], default=False)
    add_field_flags(
        p,
        EvalConfig,
        ["candidates", "rerank", "memory_k"],
        overrides={
            "candidates": {
                "default": None,  # the field's default, or DEFAULT_K with --pairs
                "help": f"{candidates} (default {DEFAULT_CANDIDATES}; {DEFAULT_K} with --pairs, "
                "as the paper)",
            }
        },
    )
    add_budget_arguments(p)
    add_interactor_argument(p)
    add_concurrency_argument(p)
    add_field_flags(p, EvalConfig, ["shard"])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_eval)


def _methods(args: argparse.Namespace) -> list[str]:
    from genmem.experiments.methods import check_methods

    try:
        return check_methods(args.methods)
    except ValueError as exc:
        raise CLIError(f"--methods: {exc}") from None


def bank_or_seed(bank: str | None, out: Path, *, progress: bool) -> str:
    """The bank to run with: ``bank`` (--bank), or a copy of the cached seed bank in ``out``."""
    from genmem.memory.location import open_bank

    if bank:
        open_bank(bank)  # fails early, with a clear error, on a bad URL or bank
        return str(bank)
    from genmem.experiments.seed_bank import SeedBankConfig, build_seed_bank
    from genmem.memory.bank_copy import copy_bank_file

    seed = build_seed_bank(
        SeedBankConfig(distill="reference", size=_DEFAULT_BANK_SIZE, fit_size=_DEFAULT_BANK_FIT),
        progress=progress,
    )
    target = out / "bank.db"
    if not target.exists():
        copy_bank_file(Path(seed.dir) / "seed.db", target)
    return f"sqlite:///{target.resolve()}?bank={seed.bank_id}"


def _eval(args: argparse.Namespace) -> int:
    check_task_source(args)
    check_concurrency(args)
    check_interactor(args)
    sid_generator = addressing(args.model, args.sid_model)  # a bad spec: exit 2 first
    methods = _methods(args)
    out = Path(args.out)
    if args.pairs:
        return _eval_retrieval(args, methods, out)
    from genmem.experiments.evaluate import EvalConfig, evaluate, summary_markdown
    from genmem.experiments.plots import plot_eval_summary

    env = environment(args)
    out.mkdir(parents=True, exist_ok=True)
    memory = any(m != "none" for m in methods)
    bank_url = bank_or_seed(args.bank, out, progress=not args.json) if memory else None
    settings = model_from_args(EvalConfig, args, methods=methods, bank_url=bank_url)
    started = time.perf_counter()
    report = evaluate(
        env,
        settings,
        out=out,
        sid_generator=sid_generator,
        progress=not args.json,
        concurrency=args.concurrency,
    )
    plot_eval_summary(report, env.metric_names, out / "summary.png")
    result = report.model_dump() | {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "files": {k: str(out / k) for k in ("summary.md", "summary.json", "summary.png")},
    }
    text = summary_markdown(report, env.metric_names) + f"\nrecords: {report.records}\n"
    emit(result, as_json=args.json, text=text)
    return 0


def _eval_retrieval(args: argparse.Namespace, methods: list[str], out: Path) -> int:
    """Candidate Hit, Hit@1/5 and prefix hits of each addressing method on reference SIDs."""
    from genmem.envs.stats import DEFAULT_INTERVALS
    from genmem.experiments.methods import cached_payload_encoder
    from genmem.experiments.plots import plot_prefix_hits
    from genmem.experiments.retrieval_eval import (
        baseline_ranker,
        evaluate_retrieval,
        load_pairs,
        paired_hits,
        query_payload_overlap,
        reranker_fn,
        sid_ranker,
    )
    from genmem.memory.location import open_bank
    from genmem.policies.addressing import bank_quantizer, is_aligned
    from genmem.policies.baselines import DEFAULT_K, DenseRetriever, TfidfRetriever
    from genmem.policies.rerank import RerankConfig, Reranker

    if not args.bank:
        raise CLIError("--pairs needs --bank: the bank whose SIDs the pairs reference")
    if "none" in methods:
        raise CLIError(
            "--pairs scores addressing; 'none' has no addresses (use tfidf,dense,quantizer,sid)"
        )
    bank = open_bank(args.bank)
    pairs_path = Path(args.pairs)
    if not pairs_path.is_file():
        raise CLIError(f"--pairs {args.pairs!r} does not exist")
    try:
        pairs = load_pairs(pairs_path, spec=bank.spec)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    pairs = pairs[: args.limit] if args.limit else pairs
    k = args.candidates or DEFAULT_K
    rerank = reranker_fn(Reranker(bank, RerankConfig())) if args.rerank else None
    reports = {}
    scored = {}
    for method in methods:
        about: dict[str, Any] = {"addresser": method}
        if method == "sid":
            policy = sid_generator(args.model, bank, allowed=args.allowed)
            rank = sid_ranker(policy)
            aligned = is_aligned(getattr(policy, "policy", None), bank)
            about = {"addresser": "generative", "aligned": aligned}
        elif method == "quantizer":
            rank = sid_ranker(bank_quantizer(bank, args.allowed))
        elif method == "tfidf":
            rank = baseline_ranker(TfidfRetriever.from_bank(bank))
        else:
            rank = baseline_ranker(DenseRetriever.from_bank(bank, encoder=cached_payload_encoder()))
        started = time.perf_counter()
        report = evaluate_retrieval(
            pairs, rank, k, rerank=rerank, spec=bank.spec, progress=not args.json
        )
        scored[method] = report
        rates = report.model_dump(exclude={"per_query"})
        intervals = report.intervals(DEFAULT_INTERVALS).model_dump(exclude={"settings"})
        reports[method] = {
            **about,
            **{key: rates[key] for key in intervals},
            **{f"{key}_ci": value for key, value in intervals.items()},
            "rates": rates,
            "intervals": intervals,
            "seconds_per_query": round((time.perf_counter() - started) / len(pairs), 4),
        }
    out.mkdir(parents=True, exist_ok=True)
    result = {"pairs": str(pairs_path), "n": len(pairs), "k": k, "bank": args.bank}
    result["query_payload_overlap"] = query_payload_overlap(pairs, bank)
    result |= {"reranked": rerank is not None, "methods": reports}
    # Every two methods, paired by query: "a - b" for a listed before b.
    names = list(scored)
    result["paired"] = {
        f"{a} - {b}": {
            rate: diff.model_dump(mode="json")
            for rate, diff in paired_hits(scored[a], scored[b], DEFAULT_INTERVALS).items()
        }
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    }
    result["intervals"] = DEFAULT_INTERVALS.model_dump()
    (out / "retrieval.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot_prefix_hits(reports, bank.spec.levels, out / "retrieval.png")
    emit(result, as_json=args.json, text=_retrieval_table(result))
    return 0


def _retrieval_table(result: dict[str, Any]) -> str:
    from genmem.envs.stats import IntervalConfig, describe, format_interval

    head = ["method", "cand. hit", "hit@1", "hit@5", "prefix@1 per level", "s/query"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for method, row in result["methods"].items():
        if row.get("aligned") is False:
            notes.append(
                f"{method}: the policy was never SID-aligned to this bank's codebooks, so its "
                "SIDs are arbitrary among the allowed slots (genmem train align first)"
            )
        r, ci = row["rates"], row["intervals"]
        prefix = " / ".join(
            format_interval(v, c) for v, c in zip(r["prefix_at_1"], ci["prefix_at_1"], strict=True)
        )
        cells = [format_interval(r[k], ci[k]) for k in ("candidate_hit", "hit_at_1", "hit_at_5")]
        lines.append(
            f"| {method} | " + " | ".join(cells) + f" | {prefix} | {row['seconds_per_query']} |"
        )
    if result.get("paired"):
        lines += ["", "| paired by query | cand. hit | hit@1 | hit@5 | hit@5 wins / losses |"]
        lines.append("|---|---|---|---|---|")
        for name, diffs in result["paired"].items():
            cells = [
                f"{100 * d['diff']:+.1f} [{100 * d['ci'][0]:+.1f}, {100 * d['ci'][1]:+.1f}]"
                for d in (diffs[r] for r in ("candidate_hit", "hit_at_1", "hit_at_5"))
            ]
            h5 = diffs["hit_at_5"]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {h5['wins']} / {h5['losses']} |")
    settings = describe(IntervalConfig.model_validate(result["intervals"]))
    overlap = result["query_payload_overlap"]
    text = (
        "\n".join(lines)
        + f"\n\n{result['n']} pairs, {result['k']} candidates, rates in %. {settings}\n"
        + f"query words found in the reference payload: {overlap['mean']:.0%} on average "
        + f"({overlap['verbatim']} of {result['n']} payloads contain their query verbatim)"
    )
    return "\n".join([text, *notes])
