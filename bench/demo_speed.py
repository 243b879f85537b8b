"""Benchmark: seconds per `genmem demo` problem without and with the greedy reply memo.

Both runs start from the same cached seed bank on the same GSM8K test problems in one process,
the baseline first with the memo switched off, then with it on (emptied first). Greedy decoding
makes the two runs' records identical, which the bench checks::

    python bench/demo_speed.py                 # 2 problems
    python bench/demo_speed.py --problems 3 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from genmem.cli.demo import run_demo
from genmem.cli.main import build_parser
from genmem.policies.local import ReplyMemo, load_policy

_SAME = ("sid", "answer", "score", "support", "error")


def _run(problems: int, out: Path, memo: ReplyMemo | None) -> dict[str, Any]:
    load_policy().replies = memo
    args = build_parser().parse_args(["demo", "--problems", str(problems), "--out", str(out)])
    return run_demo(args, progress=False)


def main(argv: list[str] | None = None) -> int:
    """Run the baseline and the memo run; print seconds per problem and their ratio."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--problems", type=int, default=2, help="GSM8K test problems (default 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.problems < 1:
        p.error("--problems must be at least 1")
    memo = ReplyMemo()
    with tempfile.TemporaryDirectory() as tmp:
        base = _run(args.problems, Path(tmp) / "base", None)
        memo.clear()
        fast = _run(args.problems, Path(tmp) / "memo", memo)
    same = [
        {k: a.get(k) for k in _SAME} == {k: b.get(k) for k in _SAME}
        for a, b in zip(base["records"], fast["records"], strict=True)
    ]
    result = {
        "problems": args.problems,
        "base_s_per_problem": base["timings"]["loop_s"] / args.problems,
        "memo_s_per_problem": fast["timings"]["loop_s"] / args.problems,
        "speedup": base["timings"]["loop_s"] / fast["timings"]["loop_s"],
        "memo_hits": memo.hits,
        "memo_misses": memo.misses,
        "same_records": all(same),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"genmem demo, {args.problems} problems: {result['base_s_per_problem']:.1f} s/problem "
            f"without the memo, {result['memo_s_per_problem']:.1f} with it "
            f"({result['speedup']:.2f}x; {memo.hits} hits, {memo.misses} misses; "
            f"records {'identical' if result['same_records'] else 'DIFFERENT'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
