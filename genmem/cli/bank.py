"""`genmem bank ...`: build, read, write, export and check SID-keyed banks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from genmem.cli.common import (
    CLIError,
    add_distill_argument,
    add_gate_argument,
    add_source_argument,
    emit,
    gate_config,
    gate_summary,
    iter_jsonl,
    positive_int,
)
from genmem.experiments.seed_bank import DEFAULT_SEED_SIZE
from genmem.policies.backends import DEFAULT_MODEL_SPEC
from genmem.tools.lookup import DEFAULT_LOOKUP_K

__all__ = ["register"]

_URL_HELP = (
    "bank URL: sqlite:///relative.db, sqlite:////abs/path.db, postgresql://..., memory://; "
    "add ?bank=NAME to pick a bank in the store (default: 'default')"
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem bank`` and its sub-commands."""
    from genmem.envs.benches import seed_sources

    p = sub.add_parser("bank", help="build, read and maintain SID-keyed memory banks")
    bsub = p.add_subparsers(dest="bank_command", required=True, metavar="BANK_COMMAND")

    b = bsub.add_parser("build", help="quantise seed experiences and write one entry per SID")
    b.add_argument("--experiences", required=True, help='JSONL of {"text": ..., ...metadata}')
    b.add_argument("--codebook", required=True, help="codebook directory (genmem codebook fit)")
    b.add_argument("--bank", required=True, help=_URL_HELP)
    b.add_argument(
        "--encoder",
        default=None,
        help="encoder to embed the texts (default: the one recorded in the codebook)",
    )
    add_gate_argument(b)
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=_build)

    sources = ", ".join(seed_sources())
    sd = bsub.add_parser(
        "seed",
        help=f"build (or reuse) a seed bank ({sources}) and write its retrieval pairs",
        description=(
            "Turns the first --size training rows of --source (by default bundled GSM8K "
            "training problems; --source lists every environment that can seed a bank) into "
            "experiences, fits codebooks on --fit-size of the same kind of text, quantises "
            "and stores them "
            "through the write gate (cached under $GENMEM_CACHE/seed/). --pairs writes one "
            '{"query", "reference_sid"} line per training problem, the input of train align '
            "and eval --pairs."
        ),
    )
    add_distill_argument(sd)
    add_source_argument(sd)
    sd.add_argument(
        "--size",
        type=positive_int,
        default=DEFAULT_SEED_SIZE,
        help=f"training problems ({DEFAULT_SEED_SIZE})",
    )
    sd.add_argument(
        "--fit-size", type=positive_int, help="problems the codebooks are fitted on (--size)"
    )
    sd.add_argument(
        "--model",
        default=DEFAULT_MODEL_SPEC,
        help=f"model spec for --distill model ({DEFAULT_MODEL_SPEC})",
    )
    sd.add_argument("--pairs", help="write the retrieval pairs (JSONL) here")
    sd.add_argument("--json", action="store_true", help="print one JSON object")
    sd.set_defaults(func=_seed)

    lk = bsub.add_parser("lookup", help="read entries by SID (exact, else nearest by prefix)")
    lk.add_argument("--bank", required=True, help=_URL_HELP)
    lk.add_argument("--sid", action="append", required=True, help="SID to read (repeatable)")
    lk.add_argument(
        "-k",
        type=positive_int,
        default=DEFAULT_LOOKUP_K,
        help=f"most entries per SID (default {DEFAULT_LOOKUP_K})",
    )
    lk.add_argument("--min-depth", type=int, default=1, help="shortest shared prefix to return")
    lk.add_argument("--json", action="store_true", help="print a JSON list of hits")
    lk.set_defaults(func=_lookup)

    st = bsub.add_parser("stats", help="entry, version and event counts")
    st.add_argument("--bank", required=True, help=_URL_HELP)
    st.add_argument("--json", action="store_true", help="print one JSON object")
    st.set_defaults(func=_stats)

    sh = bsub.add_parser("show", help="list live entries (optionally under a prefix)")
    sh.add_argument("--bank", required=True, help=_URL_HELP)
    sh.add_argument("--prefix", default="", help="SID prefix such as <SID_L1_3><SID_L2_0>")
    sh.add_argument("--limit", type=positive_int, default=20, help="most entries shown")
    sh.add_argument("--json", action="store_true", help="print a JSON list")
    sh.set_defaults(func=_show)

    hi = bsub.add_parser("history", help="every version ever stored at an SID")
    hi.add_argument("--bank", required=True, help=_URL_HELP)
    hi.add_argument("--sid", required=True, help="the SID")
    hi.add_argument("--json", action="store_true", help="print a JSON list")
    hi.set_defaults(func=_history)

    ev = bsub.add_parser("events", help="the append-only operation log")
    ev.add_argument("--bank", required=True, help=_URL_HELP)
    ev.add_argument("--after", type=int, default=0, help="only events after this sequence number")
    ev.add_argument("--limit", type=positive_int, default=None, help="most events shown")
    ev.add_argument("--json", action="store_true", help="print a JSON list")
    ev.set_defaults(func=_events)

    ap = bsub.add_parser("apply", help="apply one update: insert or revise a payload")
    ap.add_argument("--bank", required=True, help=_URL_HELP)
    ap.add_argument("--op", required=True, choices=["insert", "revise"], help="the operation")
    ap.add_argument("--sid", required=True, help="target SID")
    ap.add_argument("--payload", required=True, help="text to store ('' with revise deletes)")
    ap.add_argument("--expected-version", type=positive_int, default=None, help="revise only")
    ap.add_argument("--actor", default="cli", help="who is writing (recorded in the log)")
    add_gate_argument(ap)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.set_defaults(func=_apply)

    ex = bsub.add_parser("export", help="write the whole bank (all versions and the log) as JSONL")
    ex.add_argument("--bank", required=True, help=_URL_HELP)
    ex.add_argument("--out", required=True, help="output .jsonl file")
    ex.set_defaults(func=_export)

    im = bsub.add_parser("import", help="create a bank from an export file")
    im.add_argument("file", help="a file written by `genmem bank export`")
    im.add_argument(
        "--bank",
        required=True,
        help=_URL_HELP + "; without ?bank=NAME the exported bank's id is kept",
    )
    im.add_argument("--json", action="store_true", help="print the new bank's stats as JSON")
    im.set_defaults(func=_import)

    sn = bsub.add_parser("snapshot", help="freeze the live entries into a read-only bank")
    sn.add_argument("--bank", required=True, help=_URL_HELP)
    sn.add_argument("--name", required=True, help="snapshot name; its id is <bank>@<name>")
    sn.add_argument("--json", action="store_true", help="print one JSON object")
    sn.set_defaults(func=_snapshot)

    ck = bsub.add_parser("check", help="verify the bank's integrity (exit 1 on problems)")
    ck.add_argument("--bank", required=True, help=_URL_HELP)
    ck.add_argument("--json", action="store_true", help="print one JSON object")
    ck.set_defaults(func=_check)

    ls = bsub.add_parser("list", help="banks and snapshots in a store")
    ls.add_argument("--bank", required=True, help="store URL (any ?bank= is ignored)")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    ls.set_defaults(func=_list)

    from genmem.cli.bank_serve import register as register_serve
    from genmem.cli.coldstart import register as register_coldstart

    register_coldstart(bsub, _URL_HELP)
    register_serve(bsub, _URL_HELP)


def _open(url: str):
    from genmem.memory.location import open_bank

    return open_bank(url)


def _build(args: argparse.Namespace) -> int:
    from genmem.memory.build import ExperienceRecord, build_bank
    from genmem.memory.encoders import encode_for_codebook
    from genmem.memory.location import open_store, parse_bank_url
    from genmem.memory.rqkmeans import Codebooks

    records = []
    for lineno, obj in iter_jsonl(args.experiences):
        try:
            records.append(ExperienceRecord.from_json(obj))
        except ValueError:
            raise CLIError(
                f"{args.experiences}:{lineno}: needs a non-empty string 'text'"
            ) from None
    if not records:
        raise CLIError(f"{args.experiences} holds no experiences")
    codebooks = Codebooks.load(args.codebook)
    parsed = parse_bank_url(args.bank)
    store = open_store(parsed)
    if store.get_info(parsed.bank_id) is not None:  # refuse other codebooks before any work
        store.bank(parsed.bank_id).check_codebook(codebooks)
    embeddings = encode_for_codebook(
        codebooks, [r.text for r in records], encoder=args.encoder, progress=not args.json
    )
    sids = codebooks.sids(embeddings)
    bank = store.create_bank(
        parsed.bank_id, spec=codebooks.spec, codebook_hash=codebooks.hash, exist_ok=True
    )
    report = build_bank(bank, records, sids, progress=not args.json, gate=gate_config(args))
    out = {**report.model_dump(), "bank": args.bank, "codebook_hash": codebooks.hash}
    emit(
        out,
        as_json=args.json,
        text=(
            f"bank {report.bank_id!r} at {args.bank}: {report.records} experiences -> "
            f"{report.slots} SIDs; inserted {report.inserted}, kept {report.skipped_occupied} "
            f"existing; {report.merged_slots} entries merge several experiences "
            f"(max {report.max_records_per_slot}); {gate_summary(report.rejected)}; "
            f"{report.seconds:.1f} s"
        ),
    )
    return 0


def _seed(args: argparse.Namespace) -> int:
    from genmem.cli.tasks import first_error
    from genmem.experiments.retrieval_eval import RetrievalPair, query_payload_overlap
    from genmem.experiments.seed_bank import (
        MIN_FIT_SIZE,
        SeedBankConfig,
        build_seed_bank,
        seed_pairs,
    )
    from genmem.memory.location import open_bank

    # an explicit --fit-size below the least is raised to it, as the default (--size) is
    fit = max(MIN_FIT_SIZE, args.fit_size) if args.fit_size else None
    try:
        cfg = SeedBankConfig(
            distill=args.distill, size=args.size, fit_size=fit, model=args.model, source=args.source
        )
    except ValueError as exc:
        raise CLIError(first_error(exc)) from None
    seed = build_seed_bank(cfg, progress=not args.json)
    bank = open_bank(seed.url)
    pairs = seed_pairs(bank)
    overlap = query_payload_overlap([RetrievalPair(**p) for p in pairs], bank)
    if args.pairs:
        path = Path(args.pairs)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    info = seed.model_dump(mode="json") | {"pairs": len(pairs), "overlap": overlap}
    text = (
        f"{seed.url}\n{seed.entries} entries from {seed.experiences} problems "
        f"({args.distill}; {'cached' if seed.reused else 'built'}); "
        f"{gate_summary(seed.rejected)}; {len(pairs)} pairs, query-payload word overlap "
        f"{overlap['mean']:.0%} ({overlap['verbatim']} verbatim)"
    )
    emit(info, as_json=args.json, text=text)
    return 0


def _lookup(args: argparse.Namespace) -> int:
    bank = _open(args.bank)
    results = bank.lookup(args.sid, k=args.k, min_depth=args.min_depth)
    rows = [{"query": r.query, "exact": r.exact, **h.model_dump()} for r in results for h in r.hits]
    if args.json:
        emit(rows, as_json=True)
        return 0
    for r in results:
        print(f"{r.query}: " + ("exact" if r.exact else f"{len(r.hits)} nearest"))
        for h in r.hits:
            print(f"  {h.sid} depth={h.match_depth} v{h.version}: {_clip(h.payload)}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    s = _open(args.bank).stats()
    emit(
        s.model_dump(),
        as_json=args.json,
        text=(
            f"bank {s.bank_id!r} ({'read-only ' if s.read_only else ''}spec "
            f"{'x'.join(map(str, s.sizes))}, codebooks {s.codebook_hash[:12]})\n"
            f"  entries {s.entries} ({s.leaf_utilization:.2%} of {s.capacity} addresses), "
            f"versions {s.versions}, tombstones {s.tombstones}, events {s.events}\n"
            f"  occupied prefixes per depth {s.occupied_prefixes}\n"
            f"  outcomes {s.outcomes}"
        ),
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    entries = _open(args.bank).entries(args.prefix)[: args.limit]
    if args.json:
        emit([e.model_dump() for e in entries], as_json=True)
    for e in [] if args.json else entries:
        print(f"{e.sid} v{e.version}: {_clip(e.payload)}")
    return 0


def _history(args: argparse.Namespace) -> int:
    versions = _open(args.bank).history(args.sid)
    if args.json:
        emit([v.model_dump() for v in versions], as_json=True)
    for v in [] if args.json else versions:
        print(f"v{v.version} {'(deleted) ' if v.deleted else ''}by {v.actor}: {_clip(v.payload)}")
    return 0


def _events(args: argparse.Namespace) -> int:
    events = _open(args.bank).events(args.after, args.limit)
    if args.json:
        emit([e.model_dump() for e in events], as_json=True)
    for e in [] if args.json else events:
        print(
            f"#{e.seq} {e.op:<6} {e.outcome:<8} {e.sid} "
            f"v{e.version_before}->v{e.version_after} by {e.actor}"
            + (f" (gate: {e.reason})" if e.reason else "")
        )
    return 0


def _apply(args: argparse.Namespace) -> int:
    from genmem.memory.gate import WriteGate

    bank = _open(args.bank)
    update: dict[str, Any] = {"op": args.op, "sid": args.sid, "payload": args.payload}
    if args.expected_version is not None:
        update["expected_version"] = args.expected_version
    gate = gate_config(args)
    r = bank.apply(update, actor=args.actor, gate=None if gate is None else WriteGate(config=gate))
    text = f"{r.outcome} {r.sid} -> v{r.version_after}"
    if r.outcome == "rejected":
        text = f"rejected by the write gate ({r.reason}: {r.detail}); {r.sid} unchanged"
    emit(r.model_dump(), as_json=args.json, text=text)
    return 0 if r.outcome != "rejected" else 1


def _export(args: argparse.Namespace) -> int:
    bank = _open(args.bank)
    out = Path(args.out)
    if out.parent and not out.parent.exists():
        raise CLIError(f"output folder {str(out.parent)!r} does not exist")
    n = bank.export_jsonl(out)
    print(f"wrote {n} lines to {out}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from genmem.errors import InvalidUpdate
    from genmem.memory.bank import import_bank
    from genmem.memory.location import open_store, parse_bank_url

    if not Path(args.file).is_file():
        raise CLIError(f"export file {args.file!r} does not exist")
    parsed = parse_bank_url(args.bank)
    named = "bank=" in args.bank.partition("?")[2]
    try:
        bank = import_bank(open_store(parsed), args.file, bank_id=parsed.bank_id if named else None)
    except InvalidUpdate as exc:  # a bad file or target id is bad input; nothing was written
        raise CLIError(f"cannot import {args.file}: {exc}") from None
    s = bank.stats()
    emit(
        s.model_dump(),
        as_json=args.json,
        text=f"imported bank {s.bank_id!r}: {s.entries} entries, {s.versions} versions",
    )
    return 0


def _snapshot(args: argparse.Namespace) -> int:
    snap = _open(args.bank).snapshot(args.name)
    emit(snap.info.model_dump(), as_json=args.json, text=f"snapshot {snap.bank_id!r} taken")
    return 0


def _check(args: argparse.Namespace) -> int:
    bank = _open(args.bank)
    problems = bank.check(raise_on_error=False)
    emit(
        {"bank_id": bank.bank_id, "ok": not problems, "problems": problems},
        as_json=args.json,
        text="ok" if not problems else "\n".join(problems),
    )
    return 1 if problems else 0


def _list(args: argparse.Namespace) -> int:
    from genmem.memory.location import open_store

    infos = open_store(args.bank).list_banks()
    if args.json:
        emit([json.loads(i.model_dump_json()) for i in infos], as_json=True)
    for i in [] if args.json else infos:
        kind = f"snapshot of {i.parent!r}" if i.read_only else "bank"
        print(f"{i.bank_id}: {kind}, spec {'x'.join(map(str, i.sizes))}")
    return 0


def _clip(text: str, n: int = 100) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 3] + "..."
