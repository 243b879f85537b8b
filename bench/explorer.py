"""Benchmark: page times of the bank explorer (`genmem bank serve`) on a 100,000-entry bank.

Builds a SQLite bank of ``--entries`` live entries (default 100,000; spec 64x32x16x8, seeded
random SIDs, GSM8K-derived payloads as in ``bench/lookup.py``) with a history: 10% of the
entries revised once or twice, 1% deleted, 1% of writes refused by the gate, four actors, times
spread over 30 days. It is written in one transaction through the bank's bulk path
(``import_bank`` of an export stream, validated like any import). A bank of ``--small`` entries
(1,000) built the same way is the baseline. Both are served by the explorer's ASGI app in this
process and called through Starlette's TestClient (HTTP semantics, no socket), page kind by
page kind, taking turns between the two banks request by request:

- ``tree``: a prefix page at a random depth 0-3 (root, then occupied prefixes);
- ``entry``: an occupied entry's page (history, word diffs), half of them revised ones;
- ``log``: a log page under a random filter (none, op, outcome, actor, a time window, one SID),
  half of them a later page (a ``before`` cursor);
- ``search``: a text search through the TF-IDF index (three words of a payload), index built
  before timing (its build time is reported).

It prints p50/p99 per page kind on both banks and their ratio (large / small: 1.0 would mean
the page does not grow with the bank), and, for the tree and the log, the time of the naive
read the paged view replaces (every live entry under the prefix, or the whole log filtered in
Python) on the large bank::

    python bench/explorer.py                     # 100,000 vs 1,000 entries, 200 requests each
    python bench/explorer.py --entries 20000 --requests 50 --json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/lookup.py's data helpers

from lookup import LARGE_SPEC, load_records, payload_text, random_codes
from starlette.testclient import TestClient

from genmem.explorer import ExplorerConfig, create_app
from genmem.memory.bank import Bank, import_bank
from genmem.memory.location import open_store
from genmem.memory.sid import SID

CODEBOOK_HASH = "0" * 64
ACTORS = ("build", "evolver", "api", "reviewer")
KINDS = ("tree", "entry", "log", "search")
DAY = 86_400.0


def export_lines(n: int, seed: int, records: Sequence[dict[str, str]]) -> tuple[str, dict]:
    """An export (JSONL) of an ``n``-entry bank with history, and what it holds."""
    rng = random.Random(seed)
    spec = LARGE_SPEC
    slots = n + n // 100  # one slot in 100 ends deleted, so ``n`` entries stay live
    codes = random_codes(slots, spec, seed)
    t0 = time.time() - 30 * DAY
    lines = [
        json.dumps(
            {
                "type": "bank",
                "bank_id": "bench",
                "sizes": list(spec.sizes),
                "codebook_hash": CODEBOOK_HASH,
                "created_at": t0,
            }
        )
    ]
    versions: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    clock = t0

    def event(op: str, outcome: str, sid: str, before: Any, after: Any, actor: str, **kw: Any):
        nonlocal clock
        clock += rng.random() * 2 * 30 * DAY / (1.2 * slots)
        events.append(
            {
                "type": "event",
                "seq": len(events) + 1,
                "op": op,
                "outcome": outcome,
                "sid": sid,
                "version_before": before,
                "version_after": after,
                "time": clock,
                "actor": actor,
                **kw,
            }
        )
        return clock

    def version(sid: str, v: int, payload: str, at: float, actor: str, deleted: bool = False):
        versions.append(
            {
                "type": "version",
                "sid": sid,
                "version": v,
                "payload": payload,
                "deleted": deleted,
                "created_at": at,
                "actor": actor,
                "metadata": {},
            }
        )

    sids = [str(SID(tuple(int(c) for c in row), spec)) for row in codes]
    for i, sid in enumerate(sids):
        at = event("insert", "inserted", sid, None, 1, "build")
        version(sid, 1, payload_text(i, records), at, "build")
    revised = deleted = rejected = 0
    touched = rng.sample(range(slots), slots // 10)
    to_delete = set(rng.sample(touched, slots - n))
    for i in touched:
        sid, v = sids[i], 1
        for _ in range(rng.choice((1, 2))):
            actor = rng.choice(ACTORS[1:])
            text = payload_text(i, records) + f"\nRevision {v}: check units before the answer."
            at = event("revise", "revised", sid, v, v + 1, actor)
            version(sid, v + 1, text, at, actor)
            v += 1
            revised += 1
        if i in to_delete:
            at = event("revise", "deleted", sid, v, None, "evolver")
            version(sid, v + 1, "", at, "evolver", deleted=True)
            deleted += 1
        elif rng.random() < 0.1:
            event("revise", "rejected", sid, v, v, "evolver", reason="symbols")
            rejected += 1
    lines += [json.dumps(v) for v in versions] + [json.dumps(e) for e in events]
    info = {
        "entries": slots - deleted,
        "versions": len(versions),
        "events": len(events),
        "revisions": revised,
        "deletions": deleted,
        "rejections": rejected,
    }
    return "\n".join(lines) + "\n", info


def build(path: Path, n: int, seed: int, records: Sequence[dict[str, str]]) -> tuple[Bank, dict]:
    """Write the bank into a new SQLite file through ``import_bank``; returns it and its facts."""
    text, info = export_lines(n, seed, records)
    t0 = time.perf_counter()
    bank = import_bank(open_store(f"sqlite:///{path}"), io.StringIO(text))
    info["build_seconds"] = time.perf_counter() - t0
    info["disk_mib"] = path.stat().st_size / 2**20
    return bank, info


def requests_for(
    bank: Bank, kind: str, count: int, seed: int, records: Sequence[dict[str, str]]
) -> list[str]:
    """``count`` request paths of one page kind on ``bank`` (seeded)."""
    rng = random.Random(seed)
    live = [bank.spec.parse(e.sid).codes for e in bank.entries()]
    events = bank.events()
    revised = sorted({e.sid for e in events if e.outcome == "revised"})
    times = [e.time for e in events]

    def path(codes: Sequence[int]) -> str:
        return "-".join(map(str, codes))

    out = []
    for _ in range(count):
        if kind == "tree":
            depth = rng.randrange(4)
            out.append(f"/tree/{path(rng.choice(live)[:depth])}")
        elif kind == "entry":
            sid = rng.choice(revised) if rng.random() < 0.5 else None
            codes = bank.spec.parse(sid).codes if sid else rng.choice(live)
            out.append(f"/entry/{path(codes)}")
        elif kind == "log":
            lo = rng.choice(times)
            flt = rng.choice(
                [
                    "",
                    "op=revise",
                    "outcome=deleted",
                    f"actor={rng.choice(ACTORS)}",
                    f"since={lo:.3f}&until={lo + DAY:.3f}",
                    f"sid={path(rng.choice(live))}",
                ]
            )
            cursor = f"&before={rng.choice(events).seq}" if rng.random() < 0.5 else ""
            out.append(f"/log?{flt}{cursor}")
        else:
            words = payload_text(rng.randrange(len(live)), records).split()
            start = rng.randrange(max(1, len(words) - 3))
            out.append("/search?mode=text&q=" + "+".join(words[start : start + 3]))
    return out


def percentiles(latencies: Sequence[float]) -> dict[str, float]:
    """p50, p99 and mean in milliseconds."""
    ms = np.asarray(latencies) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
    }


def time_pages(clients: dict[str, TestClient], paths: dict[str, list[str]]) -> dict[str, list]:
    """Each client's latencies over its paths, taking turns request by request."""
    out: dict[str, list[float]] = {name: [] for name in clients}
    for i in range(len(next(iter(paths.values())))):
        for name, client in clients.items():
            t0 = time.perf_counter()
            r = client.get(paths[name][i], follow_redirects=False)
            out[name].append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise SystemExit(f"{paths[name][i]} answered {r.status_code}: {r.text[:300]}")
    return out


def naive_reads(bank: Bank, client: TestClient, count: int) -> dict[str, dict[str, float]]:
    """The root page and a filtered log page against the reads they replace: every live entry
    (to count the root's children) and the whole log filtered in Python."""
    sides: dict[str, Callable[[], object]] = {
        "root page": lambda: client.get("/tree/"),
        "root naive": lambda: len(bank.entries()),
        "log page": lambda: client.get("/log?actor=evolver"),
        "log naive": lambda: [e for e in bank.events() if e.actor == "evolver"][-50:],
    }
    out = {}
    for name, fn in sides.items():
        fn()
        lat = []
        for _ in range(count):
            t0 = time.perf_counter()
            fn()
            lat.append(time.perf_counter() - t0)
        out[name] = percentiles(lat)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and print a table (or JSON); returns the report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, default=100_000, help="entries of the large bank")
    p.add_argument("--small", type=int, default=1_000, help="entries of the baseline bank")
    p.add_argument("--requests", type=int, default=200, help="timed requests per page kind")
    p.add_argument("--warmup", type=int, default=20, help="untimed requests per page kind")
    p.add_argument("--naive", type=int, default=10, help="timed naive reads per kind")
    p.add_argument("--seed", type=int, default=0, help="seed of SIDs, history and requests")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = p.parse_args(argv)
    load_start = os.getloadavg()[0]
    records = load_records()
    report: dict[str, Any] = {"banks": {}, "pages": {}}
    with tempfile.TemporaryDirectory(prefix="genmem-bench-explorer-") as tmp:
        clients, banks = {}, {}
        for name, n in (("large", args.entries), ("small", args.small)):
            bank, info = build(Path(tmp) / f"{name}.db", n, args.seed, records)
            t0 = time.perf_counter()
            app = create_app(bank, ExplorerConfig())
            info["view_load_seconds"] = time.perf_counter() - t0
            client = TestClient(app, base_url="http://127.0.0.1:8765")
            t0 = time.perf_counter()
            client.get("/search?mode=text&q=apples")
            info["tfidf_build_seconds"] = time.perf_counter() - t0
            clients[name], banks[name] = client, bank
            report["banks"][name] = info
        for k, kind in enumerate(KINDS):
            total = args.warmup + args.requests
            paths = {
                name: requests_for(b, kind, total, args.seed + k, records)
                for name, b in banks.items()
            }
            time_pages(clients, {n: ps[: args.warmup] for n, ps in paths.items()})
            lat = time_pages(clients, {n: ps[args.warmup :] for n, ps in paths.items()})
            report["pages"][kind] = {name: percentiles(v) for name, v in lat.items()}
        report["naive_large"] = naive_reads(banks["large"], clients["large"], args.naive)
        for client in clients.values():
            client.close()
        for bank in banks.values():
            bank.store.close()
    report["config"] = vars(args)
    report["machine"] = {
        "cpus": os.cpu_count(),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return report


def format_table(report: dict[str, Any]) -> str:
    """A readable table of one report."""
    cfg, m, banks = report["config"], report["machine"], report["banks"]
    lines = [
        f"bank explorer pages: {cfg['requests']} requests per kind (+{cfg['warmup']} warm-up), "
        f"TestClient in-process, seed {cfg['seed']}",
        f"machine: {m['cpus']} CPUs, load average {m['load_start']:.1f} at start, "
        f"{m['load_end']:.1f} at end; Python {m['python']}; peak memory "
        f"{m['max_rss_mib']:,.0f} MiB",
    ]
    for name, b in banks.items():
        lines.append(
            f"{name}: {b['entries']:,} live entries, {b['versions']:,} versions, "
            f"{b['events']:,} events ({b['revisions']:,} revisions, {b['deletions']:,} "
            f"deletions, {b['rejections']:,} rejections); bulk import {b['build_seconds']:.1f} s, "
            f"{b['disk_mib']:.0f} MiB; view load {b['view_load_seconds']:.2f} s; TF-IDF index "
            f"{b['tfidf_build_seconds']:.2f} s"
        )
    lines += [
        "",
        f"{'page':<8}{'large p50':>11}{'p99':>9}{'small p50':>11}{'p99':>9}"
        f"{'p50 x':>8}{'p99 x':>8}  ms; x = large / small",
    ]
    for kind, sides in report["pages"].items():
        lg, sm = sides["large"], sides["small"]
        x50, x99 = lg["p50_ms"] / sm["p50_ms"], lg["p99_ms"] / sm["p99_ms"]
        lines.append(
            f"{kind:<8}{lg['p50_ms']:>11.1f}{lg['p99_ms']:>9.1f}{sm['p50_ms']:>11.1f}"
            f"{sm['p99_ms']:>9.1f}{x50:>8.2f}{x99:>8.2f}"
        )
    naive = report["naive_large"]
    lines.append("")
    for kind, label in (("root", "every live entry"), ("log", "the whole log, filtered")):
        page, read = naive[f"{kind} page"], naive[f"{kind} naive"]
        lines.append(
            f"{kind} page on the large bank p50 {page['p50_ms']:.1f} ms; reading {label} instead "
            f"p50 {read['p50_ms']:.1f} ms ({read['p50_ms'] / page['p50_ms']:.1f}x)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
