"""One solver run of a task with a given support, the unit of the condition experiments.

The symbols and fusion experiments hand the same StackPlanner graph one task with one support
text per condition. :func:`solve_task` runs it and returns the record's outcome fields (an
exception becomes the run's ``error``, which scores 0); :func:`entries_support` shows entries as
the solver reads them (it puts the whole support inside its data block); :func:`scores_by_task`
turns records into the per-task scores that paired differences compare.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from genmem.envs.base import Environment, Task

__all__ = [
    "ScoredRun",
    "SolverRun",
    "check_conditions",
    "entries_support",
    "scores_by_task",
    "seconds_since",
    "solve_task",
]


def check_conditions(given: Iterable[str], known: Sequence[str]) -> tuple[str, ...]:
    """An experiment's ``conditions`` as given, if each is one of ``known``; a ValueError names
    the unknown ones and the choices."""
    given = tuple(given)
    unknown = [c for c in given if c not in known]
    if unknown:
        raise ValueError(f"unknown conditions {unknown}: use {', '.join(known)}")
    return given


class SolverRun(BaseModel):
    """One solver run: a task under one condition, with what the solver answered."""

    id: str
    condition: str
    support: str | None = None
    answer: str | None = None
    score: float | None = None
    success: bool | None = None
    status: str | None = None
    error: str | None = None
    seconds: float = 0.0


class ScoredRun(Protocol):
    """What :func:`scores_by_task` reads from a record."""

    id: str
    score: float | None
    error: str | None


def seconds_since(started: float) -> float:
    """Seconds since ``started`` (a ``perf_counter`` value), rounded to hundredths."""
    return round(time.perf_counter() - started, 2)


def solve_task(env: Environment, solver: Any, task: Task, support: str | None) -> dict[str, Any]:
    """Run ``solver`` on ``task`` with ``support``: answer, score, success, status, error,
    seconds. A failing run returns its ``error`` (repr of the exception) instead of raising."""
    started = time.perf_counter()
    try:
        env.start(task)
        try:
            state = solver.invoke({"query": task.query, "support": support})
            outcome = env.score(task, state.get("answer"))
        finally:
            env.finish(task)
    except Exception as exc:  # one failing run must not lose the experiment
        return {"error": repr(exc), "seconds": seconds_since(started)}
    return {
        "answer": state.get("answer"),
        "score": outcome.score,
        "success": outcome.success,
        "status": state.get("status"),
        "seconds": seconds_since(started),
    }


def entries_support(payloads: Sequence[str]) -> str | None:
    """Entries as a solver's support, numbered, without their addresses (None for none)."""
    shown = "\n\n".join(f"Entry {i}:\n{p}" for i, p in enumerate(payloads, start=1))
    return shown or None


def scores_by_task(records: Iterable[ScoredRun]) -> dict[str, float]:
    """Task id -> score; an errored or unscored run counts as 0."""
    return {r.id: 0.0 if r.error or r.score is None else float(r.score) for r in records}
