"""`genmem demo`: the closed loop on the embedded defaults, from nothing, in minutes.

1. Seed bank (built once, cached): GSM8K training problems with their reference solutions,
   distilled into experiences by the default model (or deterministically, ``--distill
   reference``), addressed with frozen RQ-KMeans codebooks, stored in SQLite.
2. A fresh working copy of the seed bank for this run, so every demo starts from the same bank.
3. The ``genmem`` graph on a few GSM8K test problems: MemRetriever generates an SID and looks it
   up, StackPlanner answers with that support, MemEvolver writes an update. A table shows the
   question, the SID used, the answer, whether it is correct, and the memory operation.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from genmem.cli.common import add_distill_argument, emit, fail, positive_int
from genmem.cli.run import add_loop_arguments, build_loop_app, render_details, render_table
from genmem.experiments.cooking_demo import CookingDemoConfig
from genmem.experiments.seed_bank import DEFAULT_SEED_SIZE, MIN_FIT_SIZE, MODEL_SEED_SIZE

__all__ = ["register", "run_demo"]

_GSM8K_OUT = "genmem-demo"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem demo``."""
    p = sub.add_parser(
        "demo",
        help="build a seed bank from bundled GSM8K and run the closed loop on test problems",
        description=(
            "The main job on the embedded defaults (SmolLM2-135M-Instruct, all-MiniLM-L6-v2, "
            "48x16x8x8 RQ-KMeans, SQLite): seed bank (cached), then retrieve -> StackPlanner -> "
            "evolve on GSM8K test problems, with a table of what happened."
        ),
    )
    p.add_argument(
        "--bench",
        choices=("gsm8k", "cooking"),
        default="gsm8k",
        help="gsm8k (default): the closed loop on GSM8K test problems from a seed bank; "
        "cooking: cooking-valid games in order from an empty bank, each game's experience "
        "written before the next (lose, update, win)",
    )
    p.add_argument("--problems", type=positive_int, default=3, help="GSM8K test problems (3)")
    p.add_argument(
        "--games",
        type=positive_int,
        default=CookingDemoConfig.model_fields["games"].default,
        help="--bench cooking: games played in order (default "
        f"{CookingDemoConfig.model_fields['games'].default}, at least 2)",
    )
    p.add_argument(
        "--seed-games",
        type=int,
        default=CookingDemoConfig.model_fields["seed_games"].default,
        help="--bench cooking: training walkthroughs whose procedures seed the bank (default "
        f"{CookingDemoConfig.model_fields['seed_games'].default}; 0: start empty)",
    )
    add_distill_argument(p)
    p.add_argument(
        "--seed-size",
        type=positive_int,
        help=f"training problems in the seed bank (default {DEFAULT_SEED_SIZE}; "
        f"{MODEL_SEED_SIZE} with --distill model)",
    )
    p.add_argument(
        "--fit-size",
        type=positive_int,
        default=DEFAULT_SEED_SIZE,
        help="training problems whose digests the codebooks are fitted on (default "
        f"{DEFAULT_SEED_SIZE}, at least {MIN_FIT_SIZE})",
    )
    p.add_argument(
        "--out",
        default=_GSM8K_OUT,
        help="output folder (default genmem-demo/; genmem-demo-cooking/ with --bench cooking)",
    )
    # a coordinator step to delegate and one to answer: the third step of `genmem run`'s
    # budget bought the small default model only a repeat of the same delegation (bench/README)
    add_loop_arguments(p, max_steps=2)
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    if args.bench == "cooking":
        return _cooking(args)
    summary = run_demo(args, progress=not args.json)
    emit(summary, as_json=args.json, text=summary["table"])
    return 0


def _cooking(args: argparse.Namespace) -> int:
    from genmem.experiments.cooking_demo import render_demo, run_cooking_demo

    try:
        config = CookingDemoConfig(games=args.games, seed_games=args.seed_games, model=args.model)
    except ValueError as exc:
        return fail(f"genmem demo --bench cooking: {exc}", 2)
    out = Path(args.out if args.out != _GSM8K_OUT else "genmem-demo-cooking")
    report = run_cooking_demo(config, out, progress=not args.json)
    emit(report.model_dump(), as_json=args.json, text=render_demo(report))
    return 0


def run_demo(args: argparse.Namespace, *, progress: bool = True) -> dict[str, Any]:
    """Run the demo for parsed ``args``; returns the summary (records, table, paths)."""
    from genmem.cli.run import scorer_for
    from genmem.envs.gsm8k import gsm8k_queries
    from genmem.experiments.runner import run_stream, summarize
    from genmem.experiments.seed_bank import SeedBankConfig, build_seed_bank
    from genmem.memory.bank_copy import copy_bank_file
    from genmem.memory.location import open_bank

    size = args.seed_size or (MODEL_SEED_SIZE if args.distill == "model" else DEFAULT_SEED_SIZE)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    seed = build_seed_bank(
        SeedBankConfig(
            distill=args.distill,
            size=size,
            fit_size=max(MIN_FIT_SIZE, args.fit_size),
            model=args.model,
        ),
        progress=progress,
    )
    timings["seed_bank_s"] = round(time.perf_counter() - t, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.jsonl").unlink(missing_ok=True)  # a demo always starts over
    bank_path = out / "bank.db"
    copy_bank_file(Path(seed.dir) / "seed.db", bank_path)
    bank_url = f"sqlite:///{bank_path.resolve()}?bank={seed.bank_id}"
    before = open_bank(bank_url).stats()
    _plot_seed_codes(open_bank(bank_url), out / "seed_code_usage.png")

    queries = gsm8k_queries(limit=args.problems)
    app = build_loop_app(args, scorer_for("gsm8k", []))
    t = time.perf_counter()
    records = run_stream(
        app, queries, context={"bank_url": bank_url}, mode=args.mode, out=out, progress=progress
    )
    timings["loop_s"] = round(time.perf_counter() - t, 1)
    after = open_bank(bank_url).stats()
    summary = summarize(
        records,
        {
            "mode": args.mode,
            "model": args.model,
            "max_steps": args.max_steps,
            "max_new_tokens": args.max_new_tokens,
            "seed": size,
        },
    )
    (out / "summary.json").write_text(summary.model_dump_json(indent=2))
    head = [
        f"GenMem demo: seed bank of {seed.entries} entries from {seed.experiences} GSM8K "
        f"training problems (distilled by {args.distill}; "
        f"{'cached' if seed.reused else 'built'} in {timings['seed_bank_s']:.0f} s)",
        f"closed loop ({args.mode}) on {len(records)} GSM8K test problems with model "
        f"{args.model!r}, in {timings['loop_s']:.0f} s",
        "",
    ]
    refused = after.rejections
    gate = ", ".join(f"{k} {n}" for k, n in sorted(refused.items())) or "none"
    tail = [
        "",
        f"bank history: {before.events} -> {after.events} events, {before.entries} -> "
        f"{after.entries} entries ({bank_url}); write gate refusals: {gate}",
        f"per-query records (SIDs, support, trajectories, updates): {out / 'results.jsonl'}",
        f"seed bank code usage per level: {out / 'seed_code_usage.png'}",
        f"next: genmem run --bank '{bank_url}' --bench gsm8k-test --limit 10 --out runs/gsm8k",
    ]
    details = render_details(records, open_bank(bank_url))
    table = render_table(records, summary)
    return {
        "table": "\n".join(head) + table + "\n\n" + details + "\n" + "\n".join(tail),
        "seed": seed.model_dump(),
        "bank_url": bank_url,
        "bank_events": {"before": before.events, "after": after.events},
        "summary": summary.model_dump(),
        "records": [r.model_dump() for r in records],
        "timings": timings,
        "out": str(out),
    }


def _plot_seed_codes(bank: Any, path: Path) -> None:
    """Bar chart of each level's code shares over the seed bank's occupied SIDs."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from genmem.memory.metrics import code_shares

    spec = bank.spec
    codes = np.array([sid.codes for sid in bank.occupied()], dtype=np.int64)
    if not len(codes):
        return
    shares = code_shares(codes, spec)
    fig, axes = plt.subplots(1, spec.levels, figsize=(3.2 * spec.levels, 2.6), squeeze=False)
    for level, (ax, p) in enumerate(zip(axes[0], shares, strict=True), 1):
        ax.bar(range(len(p)), p, color="#4C72B0")
        ax.axhline(1 / len(p), color="#C44E52", lw=1, ls="--", label="uniform")
        ax.set_title(f"level {level} ({len(p)} codes)")
        ax.set_xlabel("code")
    axes[0][0].set_ylabel("share of entries")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
