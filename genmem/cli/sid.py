"""`genmem sid ...`: generate SID candidates, fuse and decompose entries, time SID decoding."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from genmem.cli.common import (
    CLIError,
    add_addresser_argument,
    add_sid_model_argument,
    addressing,
    emit,
    fail,
    positive_int,
    sid_generator,
)
from genmem.policies.backends import DEFAULT_MODEL_SPEC
from genmem.policies.chat_local import DEFAULT_MAX_NEW_TOKENS
from genmem.policies.rerank import RerankConfig

__all__ = ["register"]

_MODEL_HELP = (
    "addressing policy: 'local' (embedded SmolLM2, default), 'local:DIR' or DIR (a policy "
    "directory), 'vllm:<base_url>#<model>' (a vLLM server; needs --tokenizer), or 'quantizer' "
    "(the discriminative baseline: encode + quantise; needs --codebook)"
)

_MAX_NEW_TOKENS_HELP = f"reply cap (default {DEFAULT_MAX_NEW_TOKENS})"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem sid`` and its sub-commands."""
    from genmem.graph.compose import ComposeConfig

    p = sub.add_parser(
        "sid", help="generate SIDs for a query; fuse or decompose entries; time decoding"
    )
    ssub = p.add_subparsers(dest="sid_command", required=True, metavar="SID_COMMAND")
    rerank = RerankConfig()  # the paper's protocol: its candidates and the entries it keeps

    g = ssub.add_parser("generate", help="ranked, distinct SID candidates for a query")
    g.add_argument("--bank", required=True, help="bank URL (sqlite:///..., postgresql://...)")
    g.add_argument("--query", required=True, help="the context to address (a task, a trajectory)")
    g.add_argument("--model", default=DEFAULT_MODEL_SPEC, help=_MODEL_HELP)
    g.add_argument(
        "--beam",
        type=positive_int,
        default=None,
        help=f"candidates (1 = greedy; default 1, or {rerank.max_candidates} with --rerank); at "
        "most 50",
    )
    g.add_argument(
        "--allowed",
        choices=["all", "occupied", "prefix"],
        default="all",
        help="all SIDs of the spec (default: the bare decoder's; eval, evolve and run read "
        "with occupied), only occupied leaves, or leaves under occupied parents",
    )
    g.add_argument(
        "--rerank",
        action="store_true",
        help=f"look the candidates up and keep the {rerank.top_n} best payloads (--top-n)",
    )
    g.add_argument(
        "--top-n", type=positive_int, default=rerank.top_n, help="entries kept by --rerank"
    )
    g.add_argument(
        "--codebook",
        default=None,
        help="codebook directory for the quantizer (default: the bank's, found by its hash)",
    )
    add_addresser_argument(g)
    g.add_argument(
        "--tokenizer",
        default=None,
        help="policy directory whose chat template a "
        "vLLM server's prompts use (for --model vllm:...)",
    )
    g.add_argument("--json", action="store_true", help='print a JSON list of {"sid", "score"}')
    g.set_defaults(func=_generate)

    f = ssub.add_parser(
        "fuse",
        help="write one entry that fuses the entries at two SIDs (A + B -> C)",
        description=(
            "Reads the entries at the two --sid, has the model write one entry that keeps what "
            "they share (problem type, evidence, failure modes, procedure), addresses it "
            "(--addresser) and writes it at that SID through the write gate: an insert into an "
            "empty slot, a revise of an occupied one. A fused entry that only joins its sources "
            "is refused as 'copied'. Prints the written SID and the bank's outcome."
        ),
    )
    f.add_argument("--bank", required=True, help="bank URL (sqlite:///..., postgresql://...)")
    f.add_argument("--sid", action="append", required=True, help="an entry's SID (twice)")
    f.add_argument(
        "--model",
        default=DEFAULT_MODEL_SPEC,
        help=f"model spec of the writer (default {DEFAULT_MODEL_SPEC})",
    )
    add_addresser_argument(f)
    add_sid_model_argument(f)
    f.add_argument("--max-new-tokens", type=positive_int, help=_MAX_NEW_TOKENS_HELP)
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=_fuse)

    d = ssub.add_parser(
        "decompose",
        help="rebuild the entry at an SID from the best pair of its neighbours (C -> A, B)",
        description=(
            "Reads the entry at --sid and its nearest neighbours (the entries sharing its "
            "longest prefix), has a judge score every pair of them (how well the two supply the "
            "skills the entry relies on), picks the best pair and revises the entry with its "
            "supporting steps made explicit, through the write gate. Prints the pair, every "
            "score and the bank's outcome."
        ),
    )
    d.add_argument("--bank", required=True, help="bank URL (sqlite:///..., postgresql://...)")
    d.add_argument("--sid", required=True, help="the entry to decompose")
    d.add_argument(
        "--model",
        default=DEFAULT_MODEL_SPEC,
        help=f"model spec of the writer (default {DEFAULT_MODEL_SPEC})",
    )
    d.add_argument("--judge", help="model spec of the judge (default: --model)")
    neighbours = ComposeConfig().neighbours
    d.add_argument(
        "--neighbours",
        type=positive_int,
        default=neighbours,
        help=f"neighbours whose pairs are scored ({neighbours})",
    )
    d.add_argument("--max-new-tokens", type=positive_int, help=_MAX_NEW_TOKENS_HELP)
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=_decompose)

    b = ssub.add_parser("bench", help="latency of greedy and beam decoding on the local model")
    b.add_argument("--model", default=DEFAULT_MODEL_SPEC, help="'local' or a policy directory")
    b.add_argument(
        "--contexts", type=positive_int, default=10, help="GSM8K questions timed per setting"
    )
    b.add_argument("--beams", default="1,5,10,20", help="comma-separated beam widths")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=_bench)


def _generator(args: argparse.Namespace, bank: Any) -> Any:
    """The SID generator --model and --addresser name (auto: quantise unless aligned)."""
    from genmem.policies.addressing import resolve_addresser

    if args.model == "quantizer" or args.addresser == "quantizer":
        return _quantizer(args, bank)
    gen = sid_generator(
        args.model, bank, allowed=args.allowed, codebook=args.codebook, tokenizer=args.tokenizer
    )
    if resolve_addresser(args.addresser, getattr(gen, "policy", None), bank) == "generative":
        return gen
    return _quantizer(args, bank)


def _quantizer(args: argparse.Namespace, bank: Any) -> Any:
    """The quantizer on ``--codebook``, else on the bank's codebooks found by hash."""
    if args.codebook:
        return sid_generator("quantizer", bank, allowed=args.allowed, codebook=args.codebook)
    from genmem.policies.addressing import bank_quantizer

    return bank_quantizer(bank, args.allowed)


def _generate(args: argparse.Namespace) -> int:
    from genmem.memory.location import open_bank
    from genmem.policies.addressing import addresser_name

    beam = args.beam or (RerankConfig().max_candidates if args.rerank else 1)
    if beam > 50:
        raise CLIError(f"--beam {beam}: at most 50 candidates")
    if not args.query.strip():
        raise CLIError("--query is empty")
    bank = open_bank(args.bank)
    gen = _generator(args, bank)
    candidates = gen.generate(args.query, k=beam)
    by = addresser_name(gen)
    if not args.rerank:
        rows = [{"sid": c.sid, "score": c.score, "addresser": by} for c in candidates]
        text = "\n".join(f"{r['score']:10.4f}  {r['sid']}" for r in rows) or "(no candidates)"
        emit(rows, as_json=args.json, text=text)
        return 0
    from genmem.policies.rerank import Reranker

    ranked = Reranker(bank, RerankConfig(top_n=args.top_n)).rerank(args.query, candidates)
    rows = [
        {
            "sid": r.sid,
            "score": r.score,
            "candidate_rank": r.candidate_rank,
            "payload": r.payload,
            "addresser": by,
        }
        for r in ranked
    ]
    lines = [
        f"{r['score']:7.4f}  {r['sid']}  (candidate #{r['candidate_rank']})\n"
        f"         {r['payload'][:160]}"
        for r in rows
    ]
    emit(
        rows,
        as_json=args.json,
        text="\n".join(lines) or f"(none of the {len(candidates)} candidates is occupied)",
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from genmem.policies.decode_bench import run_decode_bench

    try:
        beams = [int(b) for b in args.beams.split(",") if b.strip()]
    except ValueError:
        raise CLIError(f"--beams {args.beams!r} must be comma-separated integers") from None
    if not beams or any(not 1 <= b <= 50 for b in beams):
        raise CLIError(f"--beams {args.beams!r}: each width must be 1 to 50")
    from genmem.envs.bundled import read_gsm8k

    contexts = [r["question"] for r in read_gsm8k(limit=args.contexts)]
    from genmem.policies.addressing import local_policy_path

    path = local_policy_path(args.model)
    report = run_decode_bench(path, contexts, beams=beams, progress=not args.json)
    emit(report.model_dump(), as_json=args.json, text=report.table())
    sys.stdout.flush()
    return 0


_USAGE_ERRORS = ("invalid_sid",)


def _composed(out: dict[str, Any], as_json: bool, head: str) -> int:
    """Print a composition's result; an error is one line and its exit code."""
    error = out.get("error")
    if error:
        return fail(error["message"], 2 if error["kind"] in _USAGE_ERRORS else 1)
    update = out.get("update") or {}
    result = {
        "sid": update.get("sid"),
        "outcome": update.get("outcome"),
        "reason": update.get("reason"),
        "version": update.get("version_after"),
        "payload": out.get("payload"),
    } | {k: out[k] for k in ("sources", "addresser", "chosen", "pairs") if k in out}
    why = f" ({result['reason']})" if result["reason"] else ""
    text = f"{head} -> {result['sid']}: {result['outcome']}{why}\n{result['payload']}"
    emit(result, as_json=as_json, text=text)
    return 0


def _fuse(args: argparse.Namespace) -> int:
    from genmem.graph.compose import ComposeConfig, build_fuse_graph
    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    if len(args.sid) != 2:
        raise CLIError(f"--sid: fusion takes exactly two SIDs, got {len(args.sid)}")
    open_bank(args.bank)  # a bad URL or bank fails here, before a model loads
    factory = addressing(args.model, args.sid_model)
    chat = capped_chat_model(args.model, args.max_new_tokens)
    app = build_fuse_graph(
        chat, sid_generator=factory, config=ComposeConfig(addresser=args.addresser)
    ).compile()
    out = app.invoke({"sids": list(args.sid)}, context={"bank_url": args.bank})
    return _composed(out, args.json, " + ".join(args.sid))


def _decompose(args: argparse.Namespace) -> int:
    from genmem.graph.compose import ComposeConfig, build_decompose_graph
    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    open_bank(args.bank)
    try:
        config = ComposeConfig(neighbours=args.neighbours)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    chat = capped_chat_model(args.model, args.max_new_tokens)
    judge = capped_chat_model(args.judge, args.max_new_tokens) if args.judge else None
    app = build_decompose_graph(chat, judge=judge, config=config).compile()
    out = app.invoke({"sid": args.sid}, context={"bank_url": args.bank})
    return _composed(out, args.json, args.sid)
