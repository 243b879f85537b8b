"""Benchmark: hostile input to every parser and entry point, 10,000 examples each by default.

Runs each target of ``tests/fuzz_targets.py`` (SIDs, coordinator replies, ``memory_lookup``
arguments through a LangGraph ToolNode, bank URLs, task files, corrupted codebook directories,
policy records, update records, model replies to the closed loop, fusion and decomposition) and
counts how many examples were accepted and how many were refused with the input's typed error.
Anything else is a failure: Hypothesis shrinks it, the bench prints it and exits 1. Examples are
derandomised, so a rerun draws the same inputs.

    python bench/fuzz.py                       # 10,000 examples per target
    python bench/fuzz.py --examples 500 --targets sid,bank_url --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/fuzz_targets.py

from tests.fuzz_targets import TARGETS, fuzz


def main(argv: list[str] | None = None) -> int:
    """Run the targets; print a table, or one JSON object with --json."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=10_000, help="examples per target (10,000)")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in names if t not in TARGETS]
    if unknown or not names:
        p.error(f"--targets: unknown {unknown}; choose from {', '.join(TARGETS)}")
    results, failures = {}, {}
    for name in names:
        started = time.perf_counter()
        print(f"[fuzz] {name}: {args.examples} examples", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="genmem-fuzz-") as tmp:
            try:
                counts = fuzz(TARGETS[name], args.examples, Path(tmp))
            except Exception as exc:
                failures[name] = f"{type(exc).__name__}: {exc}"[:2000]
                continue
        results[name] = counts | {"seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps({"targets": results, "failures": failures}, indent=2))
    else:
        print("| target | examples | accepted | refused (typed) | failures | s |")
        print("|---|---|---|---|---|---|")
        for name, c in results.items():
            print(f"| {name} | {c['tried']} | {c.get('accepted', 0)} | {c.get('refused', 0)} | "
                  f"0 | {c['seconds']} |")  # fmt: skip
        for name, text in failures.items():
            print(f"FAILED {name}: {text}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
