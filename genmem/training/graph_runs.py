"""Graph runs the training stages share: StackPlanner on a task, and scratch bank copies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from genmem.envs.base import Environment, Outcome, Task

__all__ = ["planner_graph", "scratch_bank", "solve"]


def planner_graph(chat: Any, env: Environment, max_steps: int) -> Any:
    """StackPlanner compiled with ``env``'s tools and a ``max_steps`` budget."""
    from genmem.graph.stackplanner import compile_planner

    return compile_planner(chat, env.tools(), max_steps)


def solve(
    planner: Any, env: Environment, task: Task, support: str | None
) -> tuple[str | None, Outcome, Any]:
    """Run ``planner`` on ``task`` with ``support``: the answer, its outcome, the trajectory."""
    env.start(task)
    try:
        out = planner.invoke({"query": task.query, "support": support})
        outcome = env.score(task, out.get("answer"))
    finally:
        env.finish(task)
    return out.get("answer"), outcome, out.get("trajectory") or ""


@contextlib.contextmanager
def scratch_bank(bank_url: str, path: Path) -> Iterator[str]:
    """A throw-away SQLite copy of ``bank_url`` at ``path``; its URL (files removed after).

    Whoever opens the copy closes it inside the block. On exit a store that
    :func:`~genmem.tools.lookup.resolve_bank` opened from the URL is closed too, before the
    files go: an open store would keep the removed files' descriptors, and a later copy at the
    same path would be read through the stale cached store.
    """
    from genmem.memory.bank_copy import copy_bank_file
    from genmem.memory.location import parse_bank_url
    from genmem.tools.lookup import close_resolved_banks

    loc = parse_bank_url(bank_url)
    copy_bank_file(Path(loc.location), path)
    url = f"sqlite:///{path}?bank={loc.bank_id}"
    try:
        yield url
    finally:
        close_resolved_banks(url)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
