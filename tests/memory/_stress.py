"""Many processes on one bank at once: a mixed load, then a check of what they saw against the bank.

:func:`run_stress` starts ``processes`` worker processes on a bank URL (any backend). Each makes
``ops`` operations on a few SIDs, drawn from a seeded mix: inserts (into a slot it saw empty, so
several workers race for it), compare-and-set revisions, retentions (the same text), deletions,
lookups and snapshots. Every write carries a payload no other write has. A worker records what
each operation returned: the bank's result for a write that went through, the type of a refusal
(``SlotOccupied``, ``VersionConflict``, ``SlotEmpty``: the typed errors a race may give), and
anything else as an unexpected error.

:func:`verify` then compares those records with the bank:

- ``lost_updates``: a write a worker was told went through whose version is not in the history
  with that worker's payload (or, for a deletion, is not a tombstone);
- ``version_errors``: versions of a slot that are not 1, 2, ... without gaps or repeats, or that
  no reported write made;
- ``contested_inserts``: inserts refused because another worker filled the slot first; every
  loser must be a typed ``SlotOccupied`` and each slot state has one winner;
- ``replay_errors``: the event log replayed from empty does not reach the live versions, or an
  event's ``version_before`` is not the version the replay holds;
- ``integrity_problems``: what :meth:`~genmem.memory.bank.Bank.check` reports.

All of these must be 0. Throughput and latency (p50, p99 per operation) come with them.

Used by ``tests/memory/test_stress.py`` (a small load) and ``bench/stress.py`` (the full one).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from genmem.errors import GenMemError, SlotEmpty, SlotOccupied, VersionConflict
from genmem.memory.sid import SIDSpec

__all__ = [
    "OPS",
    "StressConfig",
    "StressResult",
    "lookup_throughput",
    "run_stress",
    "stress_sids",
    "verify",
    "written_version",
]

OPS = ("insert", "revise", "retain", "delete", "lookup", "snapshot")
_TYPED = (SlotOccupied, VersionConflict, SlotEmpty)
"""Refusals a race may legitimately give; anything else is an unexpected error."""
_WRITES = ("inserted", "revised", "deleted")
STRESS_SPEC = SIDSpec((4, 4, 4))
"""The stress banks' address space: small, so that workers meet on the same slots."""


@dataclass(frozen=True, kw_only=True)
class StressConfig:
    """The load: how many processes, operations each, on how many SIDs, in which mix."""

    processes: int = 16
    ops: int = 1000
    """Operations per process."""
    sids: int = 8
    """Distinct SIDs the workers share (few: they contend for them)."""
    mix: tuple[float, ...] = (0.2, 0.3, 0.1, 0.1, 0.25, 0.05)
    """Weights of :data:`OPS`, in order."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.processes < 1 or self.ops < 1:
            raise ValueError("processes and ops must be >= 1")
        if not 1 <= self.sids <= STRESS_SPEC.capacity:
            raise ValueError(f"sids={self.sids}: use 1 to {STRESS_SPEC.capacity}")
        if len(self.mix) != len(OPS) or any(w < 0 for w in self.mix) or not sum(self.mix):
            raise ValueError(f"mix: {len(OPS)} non-negative weights for {', '.join(OPS)}")


@dataclass
class StressResult:
    """What the load did and what the check found (every count after ``ops_per_s`` must be 0,
    except ``contested_inserts``, which counts races that were resolved correctly)."""

    backend: str
    processes: int
    ops: int
    seconds: float
    ops_per_s: float
    lost_updates: int
    version_errors: int
    replay_errors: int
    integrity_problems: int
    unexpected_errors: int
    contested_inserts: int
    insert_winners: int
    outcomes: dict[str, int]
    refusals: dict[str, int]
    p50_ms: float
    p99_ms: float
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    """Up to 5 problems found, for people."""

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return asdict(self)


def written_version(outcome: str, before: int | None, after: int | None) -> int:
    """The version a write created: ``after``, or for a deletion its tombstone (``before + 1``)."""
    return after if outcome != "deleted" and after is not None else (before or 0) + 1


def stress_sids(count: int) -> list[str]:
    """The first ``count`` SIDs of the stress space (neighbours: they share prefixes)."""
    return [str(s) for s in itertools.islice(STRESS_SPEC.all_sids(), count)]


def _worker(url: str, index: int, config: StressConfig, barrier: Any, out: str) -> None:
    """One worker's operations and what each returned, as JSON in ``out`` (own process).

    It opens the bank, waits at ``barrier`` for every other worker, then runs; the file also
    holds when its operations started and ended."""
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    rng = random.Random(f"{config.seed}:{index}")
    sids = stress_sids(config.sids)
    actor = f"w{index}"
    records = []
    barrier.wait()
    began = time.time()
    for i in range(config.ops):
        op = rng.choices(OPS, weights=config.mix)[0]
        sid = rng.choice(sids)
        payload = f"worker {index} operation {i}: {op} at {sid}"
        row: dict[str, Any] = {"op": op, "sid": sid, "worker": index}
        started = time.perf_counter()
        text = payload  # what a write sends; a retention sends the text it read
        try:
            if op == "insert":
                result = bank.insert(sid, payload, actor=actor)
            elif op == "lookup":
                bank.lookup([sid], k=3)
                result = None
            elif op == "snapshot":
                bank.snapshot(f"w{index}-{i}")
                result = None
            else:
                entry = bank.get(sid)
                version = None if entry is None else entry.version
                if op == "delete":
                    text = ""
                elif op == "retain" and entry is not None:
                    text = entry.payload
                # an empty slot is revised without a version: SlotEmpty, or a race won
                result = bank.revise(sid, text, expected_version=version, actor=actor)
            if result is not None:
                row |= result.model_dump(include={"outcome", "version_before", "version_after",
                                                  "seq"})  # fmt: skip
                row["payload"] = text
        except _TYPED as exc:
            row["refused"] = type(exc).__name__
        except Exception as exc:  # a fault the check must count, never hide
            row["error"] = f"{type(exc).__name__}: {exc}"
        row["ms"] = 1000 * (time.perf_counter() - started)
        records.append(row)
    window = {"began": began, "ended": time.time()}
    Path(out).write_text(json.dumps({"records": records, **window}), encoding="utf-8")


def run_stress(url: str, config: StressConfig, *, backend: str = "") -> StressResult:
    """Run the load on the (empty) bank at ``url`` and verify it; the figures.

    Throughput counts from the moment every worker has opened the bank to the last one's end
    (process start-up is not load)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(config.processes)
    with tempfile.TemporaryDirectory(prefix="genmem-stress-") as tmp:
        files = [str(Path(tmp) / f"w{i}.json") for i in range(config.processes)]
        procs = [ctx.Process(target=_worker, args=(url, i, config, barrier, files[i]))
                 for i in range(config.processes)]  # fmt: skip
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        failed = [i for i, proc in enumerate(procs) if proc.exitcode != 0]
        if failed:
            barrier.abort()
            raise RuntimeError(f"stress workers {failed} died (exit codes "
                               f"{[procs[i].exitcode for i in failed]})")  # fmt: skip
        parts = [json.loads(Path(f).read_text(encoding="utf-8")) for f in files]
    records = [r for part in parts for r in part["records"]]
    seconds = max(p["ended"] for p in parts) - min(p["began"] for p in parts)
    return verify(url, records, backend=backend or url.split(":", 1)[0], seconds=seconds,
                  processes=config.processes)  # fmt: skip


def _percentile(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3) if values else 0.0


def verify(
    url: str, records: Sequence[dict[str, Any]], *, backend: str, seconds: float, processes: int
) -> StressResult:
    """Compare the workers' ``records`` with the bank at ``url`` (see the module docstring)."""
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    problems: list[str] = []
    lost = _lost_updates(bank, records, problems)
    version_errors = _version_errors(bank, records, problems)
    replay = _replay_errors(bank, problems)
    integrity = bank.check(raise_on_error=False)
    problems += integrity
    unexpected = [r for r in records if "error" in r]
    problems += [r["error"] for r in unexpected]
    inserts = [r for r in records if r["op"] == "insert"]
    by_op: dict[str, list[float]] = defaultdict(list)
    for r in records:
        by_op[r["op"]].append(r["ms"])
    every = [r["ms"] for r in records]
    return StressResult(
        backend=backend,
        processes=processes,
        ops=len(records),
        seconds=round(seconds, 2),
        ops_per_s=round(len(records) / seconds, 1) if seconds else 0.0,
        lost_updates=lost,
        version_errors=version_errors,
        replay_errors=replay,
        integrity_problems=len(integrity),
        unexpected_errors=len(unexpected),
        contested_inserts=sum(1 for r in inserts if r.get("refused") == "SlotOccupied"),
        insert_winners=sum(1 for r in inserts if r.get("outcome") == "inserted"),
        outcomes=dict(Counter(r["outcome"] for r in records if "outcome" in r)),
        refusals=dict(Counter(f"{r['op']}:{r['refused']}" for r in records if "refused" in r)),
        p50_ms=_percentile(every, 50),
        p99_ms=_percentile(every, 99),
        latency_ms={
            op: {"p50": _percentile(v, 50), "p99": _percentile(v, 99)} for op, v in by_op.items()
        },
        examples=problems[:5],
    )


def _lost_updates(bank: Any, records: Sequence[dict[str, Any]], problems: list[str]) -> int:
    """Writes reported as done whose version is not in the history as they wrote it."""
    lost = 0
    histories = {sid: {v.version: v for v in bank.history(sid)} for sid in _touched(records)}
    for r in records:
        if r.get("outcome") not in _WRITES:
            continue
        number = written_version(r["outcome"], r["version_before"], r["version_after"])
        found = histories[r["sid"]].get(number)
        if r["outcome"] == "deleted":
            ok = found is not None and found.deleted
        else:
            ok = found is not None and found.payload == r["payload"] and not found.deleted
        if not ok:
            lost += 1
            problems.append(f"{r['outcome']} {r['sid']} v{number} by w{r['worker']} is not stored")
    return lost


def _touched(records: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({r["sid"] for r in records})


def _version_errors(bank: Any, records: Sequence[dict[str, Any]], problems: list[str]) -> int:
    """Gaps, repeats, and versions no reported write made, over every touched slot."""
    made: Counter[tuple[str, int]] = Counter()
    for r in records:
        if r.get("outcome") in _WRITES:
            number = written_version(r["outcome"], r["version_before"], r["version_after"])
            made[(r["sid"], number)] += 1
    errors = sum(n - 1 for n in made.values() if n > 1)  # two writers told they made one version
    for sid in _touched(records):
        numbers = [v.version for v in bank.history(sid)]
        if numbers != list(range(1, len(numbers) + 1)):
            errors += 1
            problems.append(f"{sid} has versions {numbers[:10]}, not 1..{len(numbers)}")
        errors += sum(1 for n in numbers if (sid, n) not in made)
    return errors


def _replay_errors(bank: Any, problems: list[str]) -> int:
    """Replay the event log from empty; count events that do not follow and final mismatches."""
    live: dict[str, int | None] = {}
    errors = 0
    for e in bank.events():
        if live.get(e.sid) != e.version_before:
            errors += 1
            problems.append(f"event {e.seq} at {e.sid} starts from v{e.version_before}")
        if e.outcome in _WRITES:
            live[e.sid] = e.version_after
    for sid, version in live.items():
        entry = bank.get(sid)
        if (None if entry is None else entry.version) != version:
            errors += 1
            problems.append(f"the log ends {sid} at v{version}; the bank holds {entry}")
    return errors


def _reader(
    url: str, sids: list[str], barrier: Any, seconds: float, counts: Any, slot: int
) -> None:
    """Lookups for ``seconds`` after every process is ready; the count goes to ``counts``."""
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    bank.lookup(sids[:1], k=3)  # connected and warm before the clock starts
    barrier.wait()
    until, done = time.monotonic() + seconds, 0
    while time.monotonic() < until:
        bank.lookup(sids[done % len(sids) : done % len(sids) + 1], k=3)
        done += 1
    counts[slot] = done


def _writer(
    url: str, sids: list[str], barrier: Any, seconds: float, counts: Any, slot: int
) -> None:
    """Revisions for ``seconds`` after every process is ready; the count goes to ``counts``."""
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    bank.get(sids[0])
    barrier.wait()
    until, done = time.monotonic() + seconds, 0
    while time.monotonic() < until:
        try:
            bank.revise(sids[done % len(sids)], f"writer {slot} write {done}", actor=f"r{slot}")
        except GenMemError:
            pass  # a race; the load is the point here, not the outcome
        done += 1
    counts[slot] = done


def lookup_throughput(
    url: str, *, readers: int = 16, writers: int = 4, seconds: float = 10.0, sids: int = 8
) -> dict[str, float]:
    """Lookups/s of ``readers`` processes alone, then while ``writers`` revise the same SIDs.

    Each phase's clock starts when all its processes have opened the bank (a barrier)."""
    from genmem.memory.location import open_bank

    names = stress_sids(sids)
    bank = open_bank(url)
    for sid in names:
        if bank.get(sid) is None:
            bank.insert(sid, f"seed entry at {sid}")
    ctx = multiprocessing.get_context("spawn")
    out: dict[str, float] = {}
    for label, n_writers in (("alone", 0), ("with_writers", writers)):
        counts = ctx.Array("q", readers + n_writers)
        barrier = ctx.Barrier(readers + n_writers)
        roles = [_reader] * readers + [_writer] * n_writers
        procs = [ctx.Process(target=f, args=(url, names, barrier, seconds, counts, i))
                 for i, f in enumerate(roles)]  # fmt: skip
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        if any(proc.exitcode != 0 for proc in procs):
            raise RuntimeError(f"lookup bench processes died: {[p.exitcode for p in procs]}")
        out[f"lookups_per_s_{label}"] = round(sum(counts[:readers]) / seconds, 1)
        if n_writers:
            out["writes_per_s"] = round(sum(counts[readers:]) / seconds, 1)
    out["ratio"] = round(out["lookups_per_s_with_writers"] / out["lookups_per_s_alone"], 3)
    return out
