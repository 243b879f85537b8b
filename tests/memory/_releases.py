"""Databases as an earlier release left them, written with today's code and then rolled back.

Today's writes need today's columns, so a test that wants the schema of the first release (only
migration 1) runs migration 1 plus the columns later migrations add, writes its data, then
removes those columns and their schema rows: what remains is the first release's schema with
the data a first-release writer would have stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from genmem.memory import _sql
from genmem.memory._sql import MIGRATIONS

ADDED_COLUMNS = [("genmem_events", "reason")]
"""Columns migrations after the first one add (migration 3: a rejection's reason)."""


def write_as_first_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Until ``monkeypatch.undo()``, stores apply migration 1 and the column migrations only."""
    monkeypatch.setattr(_sql, "MIGRATIONS", [MIGRATIONS[0], MIGRATIONS[2]])


def roll_back_to_first_release(execute: Callable[[str], Any]) -> None:
    """Drop the later columns and schema rows (run on a connection no store holds)."""
    for table, column in ADDED_COLUMNS:
        execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    execute("DELETE FROM genmem_schema WHERE version > 1")
