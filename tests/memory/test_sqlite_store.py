"""SQLite-specific guarantees: writers in several processes, a writer killed mid-run."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from genmem.memory._sql import MIGRATIONS
from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH
from tests.memory._releases import roll_back_to_first_release, write_as_first_release

SIDS = ["<SID_L1_1><SID_L2_2><SID_L3_3><SID_L4_4>", "<SID_L1_1><SID_L2_2><SID_L3_3><SID_L4_5>"]

_WRITER = textwrap.dedent(
    """
    import sys
    from genmem.memory.sqlite_store import SQLiteBankStore
    path, writer, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sids = {sids!r}
    bank = SQLiteBankStore(path).bank("default")
    for i in range(n):
        bank.revise(sids[i % len(sids)], f"p{{writer}} r{{i}}", actor=f"p{{writer}}")
        print(i, flush=True)
    """
).format(sids=SIDS)


def _seed(path: Path) -> None:
    store = SQLiteBankStore(path)
    bank = store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    for s in SIDS:
        bank.insert(s, "seed")
    store.close()


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_writers_in_several_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _seed(path)
    procs, n = 4, 25
    running = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(w), str(n)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        for w in range(procs)
    ]
    for p in running:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    bank = SQLiteBankStore(path).bank("default")
    stored = {v.payload for s in SIDS for v in bank.history(s)} - {"seed"}
    assert stored == {f"p{w} r{i}" for w in range(procs) for i in range(n)}
    for s in SIDS:
        numbers = [v.version for v in bank.history(s)]
        assert numbers == list(range(1, len(numbers) + 1))
    assert bank.stats().events == len(SIDS) + procs * n
    assert bank.check() == []


def test_writer_killed_mid_run_leaves_a_sound_bank(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _seed(path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), "0", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    done = 0
    while done < 200 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode() if proc.stderr else "writer died"
        done = int(line) + 1
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    bank = SQLiteBankStore(path).bank("default")
    assert bank.check() == []
    stats = bank.stats()
    assert stats.versions == stats.events >= len(SIDS) + done
    # still writable after the crash
    assert bank.revise(SIDS[0], "after the crash").outcome == "revised"


def test_callers_connection_and_conn_string(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "own.db")
    store = SQLiteBankStore(conn)
    store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH).insert(SIDS[0], "x")
    assert conn.execute("SELECT COUNT(*) FROM genmem_versions").fetchone()[0] == 1
    store.close()  # a caller's connection stays open
    assert conn.execute("SELECT 1").fetchone() == (1,)
    again = SQLiteBankStore.from_conn_string(tmp_path / "own.db")
    assert again.bank("b").get(SIDS[0]).payload == "x"


def test_setup_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _seed(path)
    for _ in range(3):
        store = SQLiteBankStore(path)
        store.setup()
        assert store.bank("default").stats().entries == 2
        store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM genmem_schema").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_from_the_first_release_opens_unchanged(tmp_path: Path, monkeypatch) -> None:

    path = tmp_path / "old.db"
    write_as_first_release(monkeypatch)
    _seed(path)
    old = SQLiteBankStore(path)
    old.bank("default").revise(SIDS[0], "")
    exported = io.StringIO()
    old.bank("default").export_jsonl(exported)
    old.close()
    monkeypatch.undo()
    with sqlite3.connect(path) as conn:
        roll_back_to_first_release(conn.execute)
        columns = [r[1] for r in conn.execute("PRAGMA table_info(genmem_events)")]
        assert "reason" not in columns
        assert conn.execute("SELECT MAX(version) FROM genmem_schema").fetchone()[0] == 1
    conn.close()
    new = SQLiteBankStore(path)
    bank = new.bank("default")
    again = io.StringIO()
    bank.export_jsonl(again)
    assert again.getvalue() == exported.getvalue()
    assert [str(s) for s in bank.occupied((1, 2))] == [SIDS[1]]
    assert bank.check() == []
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT MAX(version) FROM genmem_schema").fetchone()[0] == len(MIGRATIONS)
    new.close()


def _filled_bank(path: Path) -> list[str]:
    bank = SQLiteBankStore(path).create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    sids = [str(s) for s, _ in zip(DEFAULT_SPEC.all_sids(), range(3), strict=False)]
    for sid in sids:
        bank.insert(sid, f"entry at {sid}")
    return sids


def test_a_full_disk_is_a_typed_error_and_nothing_is_half_written(tmp_path: Path) -> None:
    import pytest

    from genmem.errors import BankStorageError

    path = tmp_path / "full.db"
    sids = _filled_bank(path)
    conn = sqlite3.connect(path)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # the disk holds 2 more pages
    bank = SQLiteBankStore(conn).bank("b")
    written = 0
    with pytest.raises(BankStorageError, match="rolled back"):
        for i in range(1000):
            bank.revise(sids[i % 3], f"revision {i}: " + "x" * 3000)
            written += 1
    assert written < 1000
    after = SQLiteBankStore(path).bank("b")
    assert after.check(raise_on_error=False) == []
    assert after.stats().versions == 3 + written  # every write whole or not there
    assert after.stats().events == 3 + written


def test_a_read_only_file_is_a_typed_error_and_changes_nothing(tmp_path: Path) -> None:
    import pytest

    from genmem.errors import BankStorageError

    path = tmp_path / "ro.db"
    sids = _filled_bank(path)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    bank = SQLiteBankStore(conn, setup=False).bank("b")
    assert bank.get(sids[0]).payload == f"entry at {sids[0]}"  # reads work
    with pytest.raises(BankStorageError, match="readonly"):
        bank.revise(sids[0], "changed")
    assert SQLiteBankStore(path).bank("b").get(sids[0]).version == 1
