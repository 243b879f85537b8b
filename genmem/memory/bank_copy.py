"""Copies of a bank: a whole, consistent copy of a SQLite bank file, and a run's working copy.

A run that writes to a bank (online evolution, GRPO and mid-training rollouts, a demo) works on a
SQLite copy in its own output folder, so the input bank is never changed and a rerun of the same
folder picks up where the last one left off.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from genmem.memory.bank import import_bank
from genmem.memory.location import open_bank, open_store, parse_bank_url

__all__ = ["copy_bank_file", "working_copy"]


def copy_bank_file(source: Path, target: Path) -> None:
    """Copy a SQLite bank file consistently (the backup API, WAL included), all or nothing.

    The copy goes to a temporary file beside ``target`` that is renamed over it once complete,
    so a run killed mid-copy leaves no half-written bank that a rerun would take for its own.
    ``target``'s old WAL files go first: they belong to the file being replaced.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(source)
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def working_copy(bank_url: str, out: Path) -> str:
    """A working copy of the input bank in ``out/bank.db`` (made once); its URL.

    A SQLite bank is copied file to file; a bank in any other store is exported and imported.
    """
    loc = parse_bank_url(bank_url)
    target = (out / "bank.db").resolve()
    url = f"sqlite:///{target}?bank={loc.bank_id}"
    if target.exists():
        return url
    if loc.scheme == "sqlite":
        source = Path(loc.location).resolve()
        if source == target:
            raise ValueError(f"--bank is {source}, the run's own working copy; use another --out")
        copy_bank_file(source, target)
        return url
    exported = out / "input-bank.jsonl"
    open_bank(bank_url).export_jsonl(exported)
    import_bank(open_store(f"sqlite:///{target}"), exported, bank_id=loc.bank_id)
    return url
