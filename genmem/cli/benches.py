"""`genmem benches`: the benchmark registry every ``--bench`` flag names."""

from __future__ import annotations

import argparse
from typing import Any

from genmem.cli.common import emit

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem benches``."""
    p = sub.add_parser(
        "benches",
        help="list the benchmarks --bench names: tasks, metrics and what each needs",
        description=(
            "Every command that takes tasks (run, eval, evolve, bank coldstart, train mid, train "
            "grpo) takes --bench NAME from this list or --data FILE. Task counts are those of "
            "the bundled files; TextWorld's is --games (10 by default); ALFWorld's and "
            "WebShop's come from their data and server."
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.set_defaults(func=_benches)


def _benches(args: argparse.Namespace) -> int:
    from genmem.envs.benches import BENCHES, bench_tasks

    rows: list[dict[str, Any]] = [
        {
            "name": b.name,
            "tasks": bench_tasks(b.name),
            "metrics": list(b.metrics),
            "needs": b.needs or None,
            "about": b.about,
        }
        for b in BENCHES.values()
    ]
    emit(rows, as_json=args.json, text=_table(rows))
    return 0


def _table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned text table."""
    head = ("bench", "tasks", "metrics", "needs")
    cells = [
        (r["name"], "-" if r["tasks"] is None else str(r["tasks"]), ", ".join(r["metrics"]),
         r["needs"] or "nothing more")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *cells, strict=False)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in (head, *cells)]  # fmt: skip
    return "\n".join(lines)
