"""Benchmark: a bank under load from many processes, on SQLite and on a real PostgreSQL.

For each backend, an empty bank on a few SIDs gets ``--processes`` worker processes of ``--ops``
mixed operations each (inserts into slots seen empty, compare-and-set revisions, retentions,
deletions, lookups, snapshots: ``tests/memory/_stress.py``). Then every write a worker was told
went through is looked up in the bank's history, the versions of every slot are checked for gaps
and repeats, the event log is replayed from empty against the live versions, and the bank's own
``check()`` runs. Last, lookups/s of ``--readers`` reader processes alone and while ``--writers``
writer processes revise the same SIDs (the ratio is the cost of the writers to the readers).
Then ``--kills`` times a writer is killed with SIGKILL at a random moment, and the bank must open,
pass ``check()`` and hold exactly the writes the writer reported committed
(``tests/memory/_faults.py``).

SQLite is a file in a temporary directory (WAL, the store's defaults). PostgreSQL is a private
throwaway server (Debian's binaries, ``bash .ci/postgres.sh``) started **durable**: fsync and
synchronous commit on, as a deployment runs it (the test server switches them off for speed).

    python bench/stress.py                      # 16 processes x 1,000 operations, both backends
    python bench/stress.py --processes 4 --ops 100 --backends sqlite --json

``--json`` prints one object: ``backends`` -> name -> ``ops``, ``ops_per_s``, ``lost_updates``,
``version_errors``, ``contested_inserts``, ``p99_ms``, ... and ``lookup``. Every error count must
be 0; the exit status is 1 when one is not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: server, load, kills

from tests.memory._faults import kill_trials
from tests.memory._stress import STRESS_SPEC, StressConfig, lookup_throughput, run_stress

_MUST_BE_ZERO = (
    "lost_updates",
    "version_errors",
    "replay_errors",
    "integrity_problems",
    "unexpected_errors",
)


def _say(message: str) -> None:
    print(f"[stress] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _backend(name: str, folder: Path) -> Iterator[str]:
    """The URL of a store of backend ``name`` (a SQLite file, or a durable throwaway server)."""
    if name == "sqlite":
        yield f"sqlite:///{folder / 'stress.db'}"
        return
    from tests._postgres import Throwaway

    with Throwaway(durable=True) as url:
        yield url


def _fresh_bank(store_url: str, bank_id: str) -> str:
    from genmem.memory.location import open_store

    open_store(store_url).create_bank(bank_id, spec=STRESS_SPEC, codebook_hash="0" * 64)
    return f"{store_url}?bank={bank_id}"


def _one(name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    config = StressConfig(processes=args.processes, ops=args.ops, sids=args.sids, seed=args.seed)
    with _backend(name, folder) as store:
        _say(f"{name}: {args.processes} processes x {args.ops} operations on {args.sids} SIDs")
        result = run_stress(_fresh_bank(store, "load"), config, backend=name).to_dict()
        _say(f"{name}: {result['ops_per_s']} ops/s, lost {result['lost_updates']}")
        _say(f"{name}: lookups, {args.readers} readers, then with {args.writers} writers")
        result["lookup"] = lookup_throughput(
            _fresh_bank(store, "reads"),
            readers=args.readers,
            writers=args.writers,
            seconds=args.seconds,
            sids=args.sids,
        )
        _say(f"{name}: {args.kills} writers killed at random moments")
        kills = kill_trials(_fresh_bank(store, "kills"), trials=args.kills, seed=args.seed)
        result["kills"] = kills.to_dict()
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the table, or one JSON object with --json."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="sqlite,postgresql", help="comma-separated (both)")
    p.add_argument("--processes", type=int, default=16, help="writer processes (16)")
    p.add_argument("--ops", type=int, default=1000, help="operations per process (1000)")
    p.add_argument("--sids", type=int, default=8, help="SIDs the processes share (8)")
    p.add_argument("--readers", type=int, default=16, help="lookup processes (16)")
    p.add_argument("--writers", type=int, default=4, help="writers beside the readers (4)")
    p.add_argument("--seconds", type=float, default=10.0, help="timed lookup window (10)")
    p.add_argument("--kills", type=int, default=50, help="writers killed with SIGKILL (50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in names if b not in ("sqlite", "postgresql")]
    if unknown or not names:
        p.error(f"--backends {args.backends!r}: choose from sqlite, postgresql")
    with tempfile.TemporaryDirectory(prefix="genmem-stress-") as tmp:
        backends = {name: _one(name, args, Path(tmp)) for name in names}
    report = {
        "backends": backends,
        "settings": vars(args) | {"spec": str(STRESS_SPEC)},
        "machine": {
            "cpus": os.cpu_count(),
            "load": os.getloadavg()[0],
            "python": platform.python_version(),
        },
    }
    failed = [f"{b}: {k} = {r[k]}" for b, r in backends.items() for k in _MUST_BE_ZERO if r[k]]
    failed += [f"{b}: kills {k} = {r['kills'][k]}" for b, r in backends.items()
               for k in ("lost", "phantoms", "problems") if r["kills"][k]]  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("| backend | ops | ops/s | lost | version errors | replay errors | contested "
              "inserts | p50 ms | p99 ms | lookups/s alone | with writers | ratio |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for b, r in backends.items():
            lk = r["lookup"]
            print(f"| {b} | {r['ops']} | {r['ops_per_s']} | {r['lost_updates']} | "
                  f"{r['version_errors']} | {r['replay_errors']} | {r['contested_inserts']} | "
                  f"{r['p50_ms']} | {r['p99_ms']} | {lk['lookups_per_s_alone']} | "
                  f"{lk['lookups_per_s_with_writers']} | {lk['ratio']} |")  # fmt: skip
        print("\n| backend | kills | writes committed | under way, kept | under way, rolled "
              "back | lost | phantoms | check() problems |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for b, r in backends.items():
            k = r["kills"]
            print(
                f"| {b} | {k['trials']} | {k['committed']} | {k['in_flight_kept']} | "
                f"{k['in_flight_dropped']} | {k['lost']} | {k['phantoms']} | {k['problems']} |"
            )
        for line in failed:
            print(f"FAILED {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
