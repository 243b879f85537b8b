"""The background evolver's job journal: one SQLite row per job, written before the job runs.

A job is inserted as ``pending`` when it is queued, marked ``running`` when a worker takes it
and given its final status when it ends, each in its own committed transaction. After a crash
the rows still ``pending`` or ``running`` are the work that was lost in flight.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["OPEN_STATUSES", "EvolveJob", "JobStatus", "Journal"]

JobStatus = Literal["pending", "running", "applied", "rejected", "failed", "superseded"]
"""``pending`` (queued, maybe waiting for its delay), ``running``, then one final status:
``applied`` (MemEvolver's update is in the bank), ``rejected`` (MemEvolver wrote nothing and said
why: the write gate, a bad decision, a refusing bank), ``failed`` (the run raised) or
``superseded`` (a newer run of the same thread replaced it before it started)."""

OPEN_STATUSES: tuple[str, ...] = ("pending", "running")
"""Statuses of jobs that have not finished: after a crash, the work to recover."""


class EvolveJob(BaseModel):
    """One background MemEvolver update: what it reads, when it may run, how it ended."""

    id: str
    thread_id: str | None = None
    """The run's ``configurable.thread_id``: a newer job of the same thread supersedes it."""
    status: JobStatus = "pending"
    submitted_at: float
    """Wall-clock time (``time.time()``) the job was queued."""
    due_at: float
    """Earliest wall-clock time it runs (``submitted_at`` plus the delay)."""
    input: dict[str, Any]
    """MemEvolver's input: ``query``, ``trajectory``, ``outcome``."""
    context: dict[str, Any] = Field(default_factory=dict)
    """The run context MemEvolver runs with (the JSON-safe part; see ``detached``)."""
    detached: list[str] = Field(default_factory=list)
    """Context keys holding live objects (a ``Bank``) that the journal cannot keep."""
    uses_store: bool = False
    """Whether its bank is the graph store's (the context names no ``bank``/``bank_url``)."""
    started_at: float | None = None
    finished_at: float | None = None
    update: dict[str, Any] | None = None
    """The bank's ``ApplyResult`` of an ``applied`` job."""
    error: dict[str, Any] | None = None
    """Why nothing was written: MemEvolver's rejection, or ``{"kind": "exception", ...}``."""
    events: list[dict[str, Any]] = Field(default_factory=list)
    """MemEvolver's event log for the run."""
    superseded_by: str | None = None
    recoveries: int = 0
    """How often :meth:`BackgroundEvolver.recover` re-queued it after its process ended."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS evolve_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    job TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS evolve_jobs_status ON evolve_jobs (status);
"""


class Journal:
    """Jobs kept in a SQLite file (or in memory for ``path=None``), safe across threads."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = ":memory:" if self.path is None else str(self.path)
        self._conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            if self.path is not None:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(_SCHEMA)

    def put(self, job: EvolveJob, owner: str) -> None:
        """Insert or replace ``job`` (committed before this returns)."""
        row = (job.id, owner, job.status, job.model_dump_json())
        with self._lock:
            self._conn.execute(
                "INSERT INTO evolve_jobs (id, owner, status, job) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, "
                "status = excluded.status, job = excluded.job",
                row,
            )

    def get(self, job_id: str) -> EvolveJob | None:
        """The job with ``job_id``, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT job FROM evolve_jobs WHERE id = ?", (job_id,)
            ).fetchone()
        return None if row is None else EvolveJob.model_validate_json(row[0])

    def jobs(self, *, open_only: bool = False) -> list[EvolveJob]:
        """Jobs in the order they were queued; ``open_only``: those not finished yet."""
        if open_only:
            return [job for job, _ in self.open_jobs()]
        with self._lock:
            rows = self._conn.execute("SELECT job FROM evolve_jobs ORDER BY seq").fetchall()
        return [EvolveJob.model_validate_json(r[0]) for r in rows]

    def open_jobs(self) -> list[tuple[EvolveJob, str]]:
        """Unfinished jobs and their owners, in the order they were queued."""
        marks = ", ".join("?" * len(OPEN_STATUSES))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT job, owner FROM evolve_jobs WHERE status IN ({marks}) ORDER BY seq",
                OPEN_STATUSES,
            ).fetchall()
        return [(EvolveJob.model_validate_json(job), owner) for job, owner in rows]
