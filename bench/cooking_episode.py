"""Benchmark: the time of a cooking episode through the graph with SID memory, with and without
MemRetriever's rewrite, in one process, and whether the games went the same way.

With the 135M model on cooking games the gate refused every rewrite (the planner got the entry
as stored), and the rewrite was most of a ``sid`` episode's time (py-spy on 2026-11-28: 89 % of
two minutes of an episode). ``--no-rewrite`` gives the planner that entry without the model call.
Both arms run the same ``cooking-valid`` games from the same bank (read-only, the action prior
at ``--prior-weight``); the ratio is the rewrite arm's seconds over the other's, and ``same``
counts games whose outcome, steps left and support text agree (they must, where every rewrite
was refused: what follows the retriever then sees the same input)::

    python bench/cooking_episode.py --bank URL --games 4
    python bench/cooking_episode.py --bank URL --games 4 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Run both arms and print a table (or one JSON object with --json)."""
    from genmem.envs.cooking import CookingConfig, CookingEnvironment
    from genmem.experiments.evaluate import EvalConfig, EvalRecord, evaluate, read_records

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bank", required=True, help="a cooking bank URL (genmem bank seed)")
    p.add_argument("--games", type=int, default=4, help="cooking-valid games (default 4)")
    p.add_argument("--prior-weight", type=float, default=5.0, help="action prior weight (5)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    env = CookingEnvironment(CookingConfig(split="valid", n_games=args.games))
    arms: dict[str, list[EvalRecord]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="genmem-episode-") as tmp:
        for name, rewrite in (("rewrite", True), ("no_rewrite", False)):
            settings = EvalConfig(
                methods=["sid"],
                bank_url=args.bank,
                limit=args.games,
                interactor="rank",
                prior_weight=args.prior_weight,
                rewrite=rewrite,
            )
            started = time.perf_counter()
            report = evaluate(env, settings, out=Path(tmp) / name, progress=not args.json)
            seconds[name] = time.perf_counter() - started
            arms[name] = read_records(Path(report.records))
    pairs = list(zip(arms["rewrite"], arms["no_rewrite"], strict=True))
    same = sum(
        a.success == b.success
        and a.metrics.get("budget_left") == b.metrics.get("budget_left")
        and a.support == b.support
        for a, b in pairs
    )
    result = {
        "games": len(pairs),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "speedup": round(seconds["rewrite"] / seconds["no_rewrite"], 2),
        "same": same,
        "rewrites_refused": sum(a.support_source == "entry" for a, _ in pairs),
        "won": {k: sum(r.success for r in v) for k, v in arms.items()},
        "load": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['games']} cooking-valid games, sid + prior x {args.prior_weight}")
    for name in arms:
        print(f"  {name:>10}: {seconds[name]:7.1f} s, won {result['won'][name]}")
    print(f"  speedup {result['speedup']}x; same outcome, steps, support: {same} of {len(pairs)}")
    print(f"  rewrites the gate refused: {result['rewrites_refused']}; load {result['load']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
