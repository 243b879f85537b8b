"""PostgreSQL-specific guarantees: writers in several processes, a killed writer, the log order,
consistent snapshots under load, constructors and URLs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from genmem.errors import GenMemError, SlotEmpty, SlotOccupied
from genmem.memory._sql import MIGRATIONS
from genmem.memory.backend import RetryableWrite
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC
from tests import _postgres
from tests._writers import kill_after, spawn_writer
from tests.conftest import TEST_HASH
from tests.fakes import FakeCodebooks
from tests.memory._releases import roll_back_to_first_release, write_as_first_release

integration = pytest.mark.integration

SIDS = ["<SID_L1_1><SID_L2_2><SID_L3_3><SID_L4_4>", "<SID_L1_1><SID_L2_2><SID_L3_3><SID_L4_5>"]


@pytest.fixture
def conninfo() -> str:
    """A conninfo for a fresh schema on the test server."""
    return _postgres.fresh_schema()


def _store(conninfo: str, **kwargs):
    from genmem.memory.postgres_store import PostgresBankStore

    return PostgresBankStore(conninfo, **kwargs)


def _seed(conninfo: str) -> None:
    with _store(conninfo) as store:
        bank = store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
        for s in SIDS:
            bank.insert(s, "seed")


def _writer(conninfo: str, writer: int, n: int, **popen) -> subprocess.Popen:
    return spawn_writer(_postgres.as_url(conninfo), writer, n, SIDS, **popen)


@integration
def test_writers_in_several_processes_lose_nothing(conninfo: str) -> None:
    _seed(conninfo)
    procs, n = 4, 20
    running = [_writer(conninfo, w, n, stderr=subprocess.PIPE) for w in range(procs)]
    # Tail the log while they write: sequence numbers must appear in order, never behind us.
    store = _store(conninfo)
    bank = store.bank("default")
    seen: list[int] = []
    while any(p.poll() is None for p in running):
        seen += [e.seq for e in bank.events(after_seq=seen[-1] if seen else 0)]
        time.sleep(0.02)
    for p in running:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    seen += [e.seq for e in bank.events(after_seq=seen[-1] if seen else 0)]
    assert seen == [e.seq for e in bank.events()]
    stored = {v.payload for s in SIDS for v in bank.history(s)} - {"seed"}
    assert stored == {f"p{w} r{i}" for w in range(procs) for i in range(n)}
    for s in SIDS:
        numbers = [v.version for v in bank.history(s)]
        assert numbers == list(range(1, len(numbers) + 1))
        after = [e.version_after for e in bank.events() if e.sid == s]
        assert after == sorted(after) and len(set(after)) == len(after)
    assert bank.stats().events == len(SIDS) + procs * n
    assert bank.check() == []
    store.close()


@integration
def test_writer_killed_mid_run_leaves_a_sound_bank(conninfo: str) -> None:
    _seed(conninfo)
    done = kill_after(_postgres.as_url(conninfo), 50, SIDS)
    with _store(conninfo) as store:
        bank = store.bank("default")
        assert bank.check() == []
        stats = bank.stats()
        assert stats.versions == stats.events >= len(SIDS) + done
        # the server released the dead writer's locks: the bank is still writable
        assert bank.revise(SIDS[0], "after the crash").outcome == "revised"


@integration
def test_sequence_numbers_follow_commit_order(conninfo: str) -> None:
    store = _store(conninfo)
    bank = store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(SIDS[1], "seed")
    other = threading.Thread(target=bank.revise, args=(SIDS[1], "other slot"))
    with store.slot_tx("default", bank.sid(SIDS[0])) as tx:
        first = tx.add_event("insert", "inserted", None, None, time.time(), "test")
        other.start()
        other.join(0.3)
        # A writer to another slot may run, but cannot take a later seq and commit before us.
        assert other.is_alive() and [e.seq for e in bank.events()] == [first - 1]
    other.join(10)
    assert [e.seq for e in bank.events()] == [first - 1, first, first + 1]
    store.close()


@integration
def test_snapshots_under_load_are_consistent(conninfo: str) -> None:
    store = _store(conninfo)
    bank = store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    sids = [DEFAULT_SPEC.make((1, 2, 3, c)) for c in range(6)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(w: int) -> None:
        i = 0
        while not stop.is_set():
            s, i = sids[(w + i) % len(sids)], i + 1
            try:
                if bank.get(s) is None:
                    bank.insert(s, f"w{w} i{i}")
                else:
                    bank.revise(s, "" if i % 5 == 0 else f"w{w} i{i}")
            except (SlotOccupied, SlotEmpty):
                continue  # another writer got there between our read and our write
            except BaseException as exc:  # pragma: no cover - surfaced below
                errors.append(exc)
                return

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    snaps = []
    try:
        for k in range(5):
            time.sleep(0.05)
            snaps.append(bank.snapshot(f"s{k}"))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert len(bank.events()) > 20  # the snapshots really raced writers
    log = bank.events()
    for snap in snaps:
        # Replaying the parent's log up to snapshot_seq gives exactly the snapshot's entries.
        state: dict[str, int | None] = {}
        for e in log:
            if e.seq <= snap.info.snapshot_seq:
                state[e.sid] = e.version_after
        expected = {sid: v for sid, v in state.items() if v is not None}
        assert {e.sid: e.version for e in snap.entries()} == expected
        assert snap.check() == []
    store.close()


@integration
def test_lock_wait_is_bounded_and_retryable(conninfo: str) -> None:
    import psycopg

    store = _store(conninfo, lock_timeout_s=0.05)
    bank = store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    holder = psycopg.connect(conninfo, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(hashtextextended('genmem|' || current_schema(), 0))")
    try:
        with pytest.raises(RetryableWrite), store.slot_tx("default", bank.sid(SIDS[0])):
            pass
    finally:
        holder.close()
    assert bank.insert(SIDS[0], "after the lock").outcome == "inserted"
    store.close()


@integration
def test_conn_string_connection_and_pool(conninfo: str) -> None:
    import psycopg
    from psycopg_pool import ConnectionPool

    from genmem.memory.postgres_store import PostgresBankStore

    first = PostgresBankStore.from_conn_string(conninfo)
    first.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH).insert(SIDS[0], "x")
    assert "password" not in first.url
    first.close()

    for autocommit in (True, False):
        conn = psycopg.connect(conninfo, autocommit=autocommit)
        store = PostgresBankStore(conn)
        bank = store.bank("b")
        bank.revise(SIDS[0], f"via connection, autocommit={autocommit}")
        assert bank.get(SIDS[0]).payload.endswith(str(autocommit))
        store.close()  # a caller's connection stays open, and no transaction is left open
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT COUNT(*) FROM genmem_versions").fetchone()[0] >= 2
        conn.close()

    with ConnectionPool(conninfo, min_size=1, max_size=2, open=True) as pool:
        store = PostgresBankStore(pool)
        assert len(store.bank("b").history(SIDS[0])) == 3
        store.close()  # a caller's pool stays open
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(TypeError, match="conninfo"):
        PostgresBankStore(42)  # type: ignore[arg-type]


@integration
def test_setup_is_idempotent_and_safe_in_parallel(conninfo: str) -> None:
    import psycopg

    errors: list[BaseException] = []

    def open_close() -> None:
        try:
            _store(conninfo).close()
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=open_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with psycopg.connect(conninfo) as conn:
        applied = conn.execute("SELECT COUNT(*) FROM genmem_schema").fetchone()[0]
    assert applied == len(MIGRATIONS)


def _populate(bank) -> list[str]:
    """Entries under several prefixes, a revision and a deletion; returns the live SIDs, sorted."""
    sids = [DEFAULT_SPEC.make(c) for c in [(3, 1, 2, 0), (3, 1, 2, 5), (3, 9, 0, 0), (40, 0, 0, 1)]]
    for s in sids:
        bank.insert(s, f"text of {s}")
    bank.revise(sids[0], "revised")
    bank.revise(sids[3], "")
    return [str(s) for s in sorted(sids[:3])]


@integration
def test_migration_makes_prefix_queries_byte_wise_on_an_existing_icu_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    import psycopg

    conninfo = _postgres.fresh_schema(icu=True)
    # The schema exactly as a release with only the first migration left it, with data in it.
    write_as_first_release(monkeypatch)
    with _store(conninfo) as old:
        bank = old.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
        live = _populate(bank)
        assert bank.occupied() == []  # the defect: no key falls inside [lo, lo || '~')
        before = io.StringIO()
        bank.export_jsonl(before)
    monkeypatch.undo()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        roll_back_to_first_release(conn.execute)

    with _store(conninfo) as new:  # opening applies the pending migration
        bank = new.bank("default")
        assert [str(s) for s in bank.occupied()] == live
        assert [e.sid for e in bank.entries((3, 1))] == live[:2]
        [near] = bank.lookup(["<SID_L1_3><SID_L2_1><SID_L3_2><SID_L4_7>"])
        assert [h.sid for h in near.hits] == live[:2] and near.hits[0].payload == "revised"
        assert bank.stats().occupied_prefixes == [1, 2, 2, 3]
        after = io.StringIO()
        bank.export_jsonl(after)
        assert after.getvalue() == before.getvalue()  # nothing lost or changed
        assert bank.check() == []
    with psycopg.connect(conninfo) as conn:
        collations = conn.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND column_name IN ('skey', 'bank_id') "
            "AND table_name IN ('genmem_versions', 'genmem_slots', 'genmem_banks')"
        ).fetchall()
        applied = conn.execute("SELECT MAX(version) FROM genmem_schema").fetchone()[0]
    assert {c for _, col, c in collations if col == "skey"} == {"C"}
    assert ("genmem_banks", "bank_id", "C") in collations
    assert applied == len(MIGRATIONS)


@integration
def test_url_through_open_bank(conninfo: str) -> None:
    url = _postgres.as_url(conninfo, bank="x")
    bank = open_bank(url, codebooks=FakeCodebooks(TEST_HASH), create=True)
    assert bank.bank_id == "x" and bank.store.url.startswith("postgresql://")
    bank.insert(SIDS[0], "via URL")
    again = open_bank(url)
    assert again.get(SIDS[0]).payload == "via URL"
    bank.store.close()
    again.store.close()


def test_ci_run_makes_a_missing_server_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2]
    script = (root / ".ci" / "run").read_text()
    exports = "\n".join(x for x in script.splitlines() if x.strip().startswith("export "))
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # whatever the caller had
    shown = subprocess.run(
        ["bash", "-c", f'{exports}\nprintf %s "${{CI:-}}"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == "true", ".ci/run must export CI=true before running the tests"
    assert script.index("export CI=true") < script.index("python -m pytest")
    # ... and under CI=true the test helper fails where it would otherwise skip.
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must test against PostgreSQL"):
        _postgres._unavailable("no server")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _postgres._unavailable("no server")


@pytest.mark.parametrize("missing", ["psycopg", "psycopg_pool"])
def test_missing_driver_says_how_to_install(monkeypatch, missing: str) -> None:
    from genmem.memory.postgres_store import PostgresBankStore, PostgresUnavailable

    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(PostgresUnavailable, match=r"pip install 'genmem\[postgres\]'") as info:
        PostgresBankStore("postgresql://nowhere/db")
    assert isinstance(info.value, ImportError) and isinstance(info.value, GenMemError)


@integration
def test_a_server_restart_gives_typed_errors_and_loses_no_write() -> None:
    """Writers during a restart get BankUnavailable (or succeed); every write they were told
    went through is stored, and writing goes on once the server is back."""
    from genmem.errors import BankUnavailable, GenMemError
    from genmem.memory.location import open_bank

    server = _postgres.Throwaway()
    try:
        url = server.start()
    except RuntimeError as exc:
        _postgres._unavailable(str(exc))
    try:
        bank_url = f"{url}?bank=restart"
        _store(url).create_bank("restart", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
        bank = open_bank(bank_url)
        bank.insert(SIDS[0], "start")
        stop, done, errors = threading.Event(), [], []

        def write() -> None:
            i = 0
            while not stop.is_set():
                try:
                    entry = bank.get(SIDS[0])
                    r = bank.revise(SIDS[0], f"w {i}", expected_version=entry.version)
                    done.append((r.version_after, f"w {i}", time.monotonic()))
                except GenMemError as exc:  # anything untyped fails the test
                    errors.append(exc)
                    time.sleep(0.02)
                i += 1

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.5)
        server.restart()
        back = time.monotonic()
        time.sleep(1.0)
        stop.set()
        writer.join(timeout=60)
        assert not writer.is_alive()
        assert all(isinstance(e, BankUnavailable) for e in errors), errors
        assert any(t > back for *_, t in done)  # it writes again after the restart
        stored = {v.version: v.payload for v in bank.history(SIDS[0])}
        assert [(v, p) for v, p, _ in done if stored.get(v) != p] == []
        assert bank.check(raise_on_error=False) == []
    finally:
        server.stop()


@integration
def test_a_lost_connection_is_a_typed_error_for_reads_and_writes(conninfo: str) -> None:
    import psycopg

    from genmem.errors import BankUnavailable

    _seed(conninfo)
    conn = psycopg.connect(conninfo, autocommit=True)
    bank = _store(conn).bank("default")
    assert bank.get(SIDS[0]).payload == "seed"
    with psycopg.connect(conninfo, autocommit=True) as admin:  # the server ends the session
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    with pytest.raises(BankUnavailable, match="read the slot again"):
        bank.get(SIDS[0])
    with pytest.raises(BankUnavailable):
        bank.revise(SIDS[0], "after", expected_version=1)
    assert _store(conninfo).bank("default").get(SIDS[0]).version == 1  # nothing written


@integration
def test_a_read_only_server_is_a_typed_error_and_changes_nothing(conninfo: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from genmem.errors import BankStorageError

    _seed(conninfo)
    options = conninfo_to_dict(conninfo).get("options", "")
    read_only = make_conninfo(conninfo, options=f"{options} -cdefault_transaction_read_only=on")
    bank = _store(read_only, setup=False).bank("default")
    assert bank.get(SIDS[0]).payload == "seed"
    with pytest.raises(BankStorageError, match="ReadOnlySqlTransaction"):
        bank.revise(SIDS[0], "changed")
    assert _store(conninfo).bank("default").get(SIDS[0]).version == 1
