"""`genmem demo`: the main job on the embedded defaults, end to end on bundled data.

Encode seed experiences with the bundled encoder, fit frozen RQ-KMeans codebooks, build a
SQLite bank, then address a few held-out questions and read them back with `memory_lookup`
run as a real tool call through LangGraph's ToolNode.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from genmem._cli_common import CLIError, emit, positive_int

__all__ = ["register", "run_demo"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem demo``."""
    p = sub.add_parser(
        "demo",
        help="fit codebooks and build a bank on bundled GSM8K solutions, then look up SIDs",
        description=(
            "Runs the memory layer end to end on the embedded defaults: encoder "
            "all-MiniLM-L6-v2, 48x16x8x8 weighted RQ-KMeans, a SQLite bank, memory_lookup."
        ),
    )
    p.add_argument("--out", default="genmem-demo", help="output folder (default genmem-demo/)")
    p.add_argument(
        "--limit",
        type=positive_int,
        default=2000,
        help="seed experiences to use (default 2000 of 7,470; encoding costs ~15 ms each on 2 "
        "CPU cores)",
    )
    p.add_argument("--queries", type=positive_int, default=3, help="held-out questions to look up")
    p.add_argument("--sizes", default="48,16,8,8", help="codebook sizes (default 48,16,8,8)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the fit")
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from genmem.memory.sid import SIDSpec

    try:
        sizes = SIDSpec.from_string(args.sizes).sizes
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    summary = run_demo(
        Path(args.out),
        limit=args.limit,
        n_queries=args.queries,
        sizes=sizes,
        seed=args.seed,
        progress=not args.json,
    )
    if args.json:
        emit(summary, as_json=True)
    else:
        print(_render(summary))
    return 0


def run_demo(
    out: Path,
    *,
    limit: int | None = None,
    n_queries: int = 3,
    sizes: tuple[int, ...] = (48, 16, 8, 8),
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the demo, writing into ``out``; returns the summary."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from genmem.envs.bundled import gsm8k_seed_experiences
    from genmem.memory.build import ExperienceRecord, build_bank
    from genmem.memory.encoders import EXPERIENCE_PREFIX, default_encoder
    from genmem.memory.location import open_bank
    from genmem.memory.metrics import codebook_metrics
    from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig
    from genmem.tools import create_memory_lookup_tool

    timings: dict[str, float] = {}
    out.mkdir(parents=True, exist_ok=True)
    rows = gsm8k_seed_experiences()
    held_out, rows = rows[-n_queries:], rows[:-n_queries]  # the lookups use unseen problems
    if limit is not None:
        rows = rows[:limit]
    if len(rows) < max(sizes):
        raise CLIError(f"--limit {limit} leaves {len(rows)} experiences; need >= {max(sizes)}")
    with (out / "experiences.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    records = [ExperienceRecord.from_json(r) for r in rows]

    t = time.perf_counter()
    encoder = default_encoder(prefix=EXPERIENCE_PREFIX)
    embeddings = encoder.encode([r.text for r in records], progress=progress)
    timings["encode_s"] = time.perf_counter() - t

    t = time.perf_counter()
    config = RQKMeansConfig(
        sizes=sizes,
        distance="weighted",
        weight=0.5,
        seed=seed,
        encoder_id=encoder.id,
        encoder_prefix=EXPERIENCE_PREFIX,
    )
    codebooks = RQKMeans(config).fit(embeddings, progress=progress).codebooks_
    codebooks.save(out / "codebook", overwrite=True)
    timings["fit_s"] = time.perf_counter() - t
    codes = codebooks.quantize(embeddings)
    metrics = codebook_metrics(codes, codebooks.spec, embeddings=embeddings, codebooks=codebooks)
    _plot_code_usage(codes, codebooks.spec, out / "code_usage.png")

    t = time.perf_counter()
    # One bank per codebook hash: a rerun with the same fit continues, another fit starts anew.
    bank_url = f"sqlite:///{out.resolve()}/bank.db?bank=gsm8k-{codebooks.hash[:8]}"
    bank = open_bank(bank_url, codebooks=codebooks, create=True)
    sids = codebooks.sids(embeddings)
    report = build_bank(bank, records, sids, progress=progress)
    timings["build_s"] = time.perf_counter() - t

    # Cold-start addressing: quantise the question itself; a trained MemRetriever replaces this.
    questions = [
        r["text"].split("\nWorked solution:")[0].removeprefix("Problem: ") for r in held_out
    ]
    query_sids = codebooks.sids(encoder.encode(questions))
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([create_memory_lookup_tool(bank, k=3)]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    lookups = []
    for i, (question, sid) in enumerate(zip(questions, query_sids, strict=True)):
        call = {"name": "memory_lookup", "args": {"sid_list": [str(sid)]}, "id": f"demo-{i}"}
        msg = app.invoke({"messages": [AIMessage(content="", tool_calls=[call])]})["messages"][-1]
        lookups.append({"question": question, "sid": str(sid), "results": msg.artifact})
    return {
        "out": str(out),
        "experiences": len(records),
        "encoder": encoder.id,
        "codebook": {"dir": str(out / "codebook"), "hash": codebooks.hash, "sizes": list(sizes)},
        "metrics": metrics.model_dump(),
        "bank": {"url": bank_url, **report.model_dump(), **bank.stats().model_dump()},
        "lookups": lookups,
        "plot": str(out / "code_usage.png"),
        "timings": timings,
    }


def _plot_code_usage(codes: Any, spec: Any, path: Path) -> None:
    """Bar chart of each level's code shares (how evenly the codebooks are used)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from genmem.memory.metrics import code_shares

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


def _render(s: dict[str, Any]) -> str:
    m, b = s["metrics"], s["bank"]
    pct = lambda xs: "/".join(f"{100 * x:.0f}%" for x in xs)  # noqa: E731
    lines = [
        f"GenMem demo: {s['experiences']} GSM8K worked solutions, encoder {s['encoder']}",
        f"codebooks {'x'.join(map(str, s['codebook']['sizes']))} (weighted, w=0.5) "
        f"hash {s['codebook']['hash'][:12]} -> {s['codebook']['dir']}",
        f"  level utilisation {pct(m['utilization'])}, prefix utilisation "
        f"{pct(m['prefix_utilization'])}",
        f"  used leaves {m['used_leaves']} (UCR {m['ucr']:.3f}), DUI {m['dui']:.3f}, "
        f"ICR {m['icr']:.3f}, reconstruction MSE {m['recon_mse']:.4f}",
        f"bank {b['bank_id']!r}: {b['entries']} entries, {b['merged_slots']} merge several "
        f"solutions (max {b['max_records_per_slot']}), {b['url']}",
        f"plot of code usage per level: {s['plot']}",
        "",
        "memory_lookup on held-out questions (SID by quantising the question):",
    ]
    for q in s["lookups"]:
        lines.append(f"- {q['question'][:110]}")
        for r in q["results"]:
            kind = "exact hit" if r["exact"] else "nearest by prefix"
            lines.append(f"  {r['query']} -> {kind}")
            for h in r["hits"][:2]:
                first = h["payload"].split("\n")[0][:100]
                lines.append(f"    {h['sid']} (shares {h['match_depth']} levels): {first}")
    t = s["timings"]
    lines.append(
        f"\ntime: encode {t['encode_s']:.0f} s, fit {t['fit_s']:.0f} s, build {t['build_s']:.0f} s"
    )
    lines.append(f"try: genmem bank stats --bank '{b['url']}'")
    return "\n".join(lines)
