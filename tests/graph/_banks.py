"""A one-entry SQLite bank for graph tests, and the evolver reply that revises its entry."""

from __future__ import annotations

import json
from pathlib import Path

from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH

A = SID((3, 0, 7, 1))
"""The occupied slot of :func:`one_entry_bank`."""


def one_entry_bank(directory: Path, payload: str, name: str = "gsm") -> str:
    """Create ``directory/bank.db`` holding ``payload`` at :data:`A`; returns the bank URL."""
    bank = SQLiteBankStore(directory / "bank.db").create_bank(
        name, spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(A, payload)
    return f"sqlite:///{directory}/bank.db?bank={name}"


def revise_reply(payload: str) -> str:
    """An evolver decision that revises the entry at :data:`A`."""
    return json.dumps({"analysis": "a", "op": "revise", "sid": str(A), "payload": payload})
