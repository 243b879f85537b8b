"""Benchmark: the opt-in int8 local engine against the float32 reference (the default), one run.

Prefill and decode tokens/s, greedy and beam-10 SID latency, their ratios, and how often the two
engines pick the same top-1 SID, on GSM8K test questions (see ``bench/engine_bench.py``)::

    python bench/local_inference.py                  # 200 SID contexts, 8 prompts
    python bench/local_inference.py --contexts 20 --json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from genmem.envs.bundled import read_gsm8k
from genmem.policies.local import DTYPES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/engine_bench.py

from engine_bench import run_engine_bench


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contexts", type=int, default=200, help="SID contexts (default 200)")
    p.add_argument("--prompts", type=int, default=8, help="prefill/decode prompts (default 8)")
    p.add_argument("--decode-tokens", type=int, default=48, help="tokens decoded per prompt")
    p.add_argument("--engine", choices=DTYPES, default="int8", help="engine under test")
    p.add_argument("--reference", choices=DTYPES, default="float32", help="reference engine")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.contexts < 1 or args.prompts < 1 or args.decode_tokens < 1:
        p.error("--contexts, --prompts and --decode-tokens must be at least 1")
    contexts = [r["question"] for r in read_gsm8k(limit=args.contexts)]
    report = run_engine_bench(
        contexts,
        engine=args.engine,
        reference=args.reference,
        prompts=args.prompts,
        decode_tokens=args.decode_tokens,
        progress=not args.json,
    )
    print(json.dumps(report.keys()) if args.json else report.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
