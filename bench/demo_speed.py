"""Benchmark: seconds per `genmem demo` problem: plain engine, + reply memo, + prefix cache.

An untimed one-problem warm-up first pays what the first run of a process pays (model and
seed bank loads, the JSON-schema enforcer's tokenizer tables). Then three runs start from the
same cached seed bank on the same GSM8K test problems, in that order: the baseline with both
switched off, then the greedy reply memo (new and empty), then the memo and the prefix cache
(both new and empty). Greedy decoding makes
the runs' records identical, which the bench checks::

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
from genmem.policies.prefix_cache import PrefixCache

_SAME = ("sid", "answer", "score", "support", "error")


def _run(problems: int, out: Path, memo: ReplyMemo | None, prefixes: PrefixCache | None) -> Any:
    policy = load_policy()
    policy.replies, policy.prefixes = memo, prefixes
    args = build_parser().parse_args(["demo", "--problems", str(problems), "--out", str(out)])
    return run_demo(args, progress=False)


def main(argv: list[str] | None = None) -> int:
    """Run the three arms; print seconds per problem, ratios to the baseline, and reuse counts."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--problems", type=int, default=2, help="GSM8K test problems (default 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.problems < 1:
        p.error("--problems must be at least 1")
    memo, memo2, prefixes = ReplyMemo(), ReplyMemo(), PrefixCache()
    with tempfile.TemporaryDirectory() as tmp:
        _run(1, Path(tmp) / "warm-up", ReplyMemo(), PrefixCache())
        base = _run(args.problems, Path(tmp) / "base", None, None)
        with_memo = _run(args.problems, Path(tmp) / "memo", memo, None)
        both = _run(args.problems, Path(tmp) / "both", memo2, prefixes)
    runs = {"base": base, "memo": with_memo, "memo_prefix": both}
    same = all(
        {k: a.get(k) for k in _SAME} == {k: r.get(k) for k in _SAME}
        for run in (with_memo, both)
        for a, r in zip(base["records"], run["records"], strict=True)
    )
    seconds = {name: run["timings"]["loop_s"] / args.problems for name, run in runs.items()}
    result = {
        "problems": args.problems,
        **{f"{name}_s_per_problem": s for name, s in seconds.items()},
        "speedup_memo": seconds["base"] / seconds["memo"],
        "speedup": seconds["base"] / seconds["memo_prefix"],
        "memo_hits": memo.hits,
        "memo_misses": memo.misses,
        "prefix_reused_tokens": prefixes.reused_tokens,
        "prefix_prompt_tokens": prefixes.prompt_tokens,
        "same_records": same,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"genmem demo, {args.problems} problems, s/problem: {seconds['base']:.1f} plain, "
            f"{seconds['memo']:.1f} with the reply memo ({result['speedup_memo']:.2f}x; "
            f"{memo.hits} hits, {memo.misses} misses), {seconds['memo_prefix']:.1f} with the "
            f"memo and the prefix cache ({result['speedup']:.2f}x; {prefixes.reused_tokens} of "
            f"{prefixes.prompt_tokens} prompt tokens reused); records "
            f"{'identical' if same else 'DIFFERENT'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
