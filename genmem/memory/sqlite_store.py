"""SQLite backend: the default bank store, one file, WAL, one transaction per write.

Writers take SQLite's write lock up front (``BEGIN IMMEDIATE``), read the slot, and write the
new version, the slot pointer and the event in the same transaction, so concurrent writers from
threads or processes never lose each other's updates: a writer that finds the lock held waits
(``busy_timeout``) and is retried by the bank. WAL lets readers proceed during writes, and a
writer killed mid-transaction leaves the file at its last commit.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from genmem.errors import BankStorageError
from genmem.memory._sqlbase import SQLBankStore
from genmem.memory.backend import RetryableWrite

__all__ = ["SQLiteBankStore"]

_TRANSIENT = ("locked", "busy")
_STORAGE = ("full", "readonly", "read-only", "disk i/o", "unable to open")
"""SQLite messages of a write the storage refused (SQLITE_FULL, _READONLY, _IOERR, _CANTOPEN)."""


class SQLiteBankStore(SQLBankStore):
    """Banks in one SQLite file (or an in-process ``:memory:`` database, or your connection)."""

    dialect = "sqlite"

    def __init__(
        self,
        conn: sqlite3.Connection | str | Path = ":memory:",
        *,
        busy_timeout_s: float = 5.0,
        setup: bool = True,
    ) -> None:
        """Open a store on a path (a connection per thread) or on a caller's connection.

        A caller's connection is shared by all threads under a lock and switched to autocommit
        (``isolation_level=None``) because the store issues its own ``BEGIN IMMEDIATE``.
        """
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        if isinstance(conn, sqlite3.Connection):
            self._path: str | None = None
            self._shared: sqlite3.Connection | None = conn
            self._configure(conn)
            self.url = "sqlite://(connection)"
        else:
            path = str(conn)
            if path != ":memory:":
                Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
            self._path = path
            # ':memory:' is private to its connection: share one, like a caller's connection.
            self._shared = self._connect() if path == ":memory:" else None
            self.url = "sqlite://" if path == ":memory:" else f"sqlite:///{path}"
        self._shared_lock = threading.RLock()
        if setup:
            self.setup()

    @classmethod
    def from_conn_string(cls, path: str | Path, **kwargs: Any) -> SQLiteBankStore:
        """Open (creating if needed) the store in the SQLite file at ``path``."""
        return cls(path, **kwargs)

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.isolation_level = None
        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable at commit under WAL, and fast

    def _connect(self) -> sqlite3.Connection:
        assert self._path is not None
        conn = sqlite3.connect(
            self._path, timeout=self._busy_ms / 1000, isolation_level=None, check_same_thread=False
        )
        self._configure(conn)
        if self._path != ":memory:":
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":  # e.g. a network filesystem refused it
                conn.execute("PRAGMA journal_mode = DELETE")
        with self._guard:
            self._all.append(conn)
        return conn

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        if self._shared is not None:
            with self._shared_lock:
                yield self._shared
            return
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        yield conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Cursor]:
        with self._conn() as conn:
            cur = conn.cursor()
            try:
                yield cur
            finally:
                cur.close()

    @contextmanager
    def _transaction(self, lock_key: str | None) -> Iterator[sqlite3.Cursor]:
        # SQLite has one writer at a time, so the per-slot key needs no lock of its own.
        with self._conn() as conn:
            cur = conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur
                    conn.commit()
                except BaseException:
                    conn.rollback()
                    raise
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if any(t in message for t in _TRANSIENT):
                    raise RetryableWrite(str(exc)) from exc  # lock held: the bank retries
                if any(t in message for t in _STORAGE):
                    raise BankStorageError(
                        f"{self.url}: the storage refused the write ({exc}); it was rolled "
                        "back and the bank is unchanged: free space or make the file writable"
                    ) from exc
                raise
            finally:
                cur.close()

    def storage_problems(self) -> list[str]:
        """SQLite's own ``quick_check`` of the file."""
        with self._read() as cur:
            rows = [r[0] for r in cur.execute("PRAGMA quick_check").fetchall()]
        return [] if rows == ["ok"] else [f"sqlite quick_check: {r}" for r in rows]

    def close(self) -> None:
        """Close every connection this store opened (not a caller's connection)."""
        with self._guard:
            conns, self._all = self._all, []
        for c in conns:
            c.close()
        self._local = threading.local()
