"""PostgreSQL backend: the same schema and queries as SQLite, for many writers on many machines.

Concurrency model (psycopg 3, READ COMMITTED, one transaction per write):

* A slot write takes, in this order, a *shared* store-wide advisory lock and an *exclusive*
  advisory lock on a 64-bit hash of ``bank|slot`` (``pg_advisory_xact_lock`` with
  ``hashtextextended``), then reads the slot and writes the version, the slot pointer and the
  event. Writers to different slots run in parallel; writers to one slot queue, and each reads
  the slot only once it holds the lock, so no update is lost.
* Just before its event gets a sequence number, a writer also takes the bank's *log* lock and
  holds it to commit, so within a bank sequence numbers are handed out in commit order: a
  reader that tails ``events(after_seq=...)`` never sees seq 11 before seq 10 exists.
* Whole-store work (``setup()``, bank creation, import, snapshots) takes the store-wide lock
  *exclusively*, which waits for every in-flight slot writer to commit and holds new ones off.
  Under READ COMMITTED each later statement then sees every committed write and no partial
  one, so a snapshot is consistent. (REPEATABLE READ would be wrong here: its snapshot would
  be taken by the lock statement itself, before the wait ends.)
* Lock waits are bounded by ``lock_timeout`` (``lock_timeout_s`` for slot writes, which the
  bank retries; a minute for whole-store work, which it does not). A timeout, a deadlock, a
  serialisation failure or a unique violation from a race becomes :class:`RetryableWrite`.

Given ``async_pool=`` (a caller's psycopg ``AsyncConnectionPool``), the store answers the bank's
async methods on it (:mod:`genmem.memory._postgres_async`: the same statements, locks and
errors); without one they run the sync call in a worker thread.

Advisory-lock keys include ``current_schema()``, so stores in different schemas of one
database do not contend. Install the driver with ``pip install 'genmem[postgres]'``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import genmem.memory._sql as S
from genmem.errors import BankStorageError, BankUnavailable, GenMemError
from genmem.memory._postgres_async import AsyncPostgres
from genmem.memory._sqlbase import SQLBankStore
from genmem.memory.backend import RetryableWrite, SlotTx
from genmem.memory.records import BankInfo, Event, Version
from genmem.memory.sid import SID

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresBankStore", "PostgresUnavailable", "import_psycopg"]

T = TypeVar("T")

_POOL_MAX_SIZE = 8  # a caller who needs more connections passes their own pool
# Whole-store work is rare and the bank does not retry it, so it waits as long as a slot write
# would keep retrying before giving up.
_STORE_WAIT_S = 60.0

_LOCK_TIMEOUT = S.PG_LOCK_TIMEOUT
_STORE_LOCK_SHARED = S.PG_STORE_LOCK_SHARED
_STORE_LOCK = S.PG_STORE_LOCK
_KEY_LOCK = S.PG_KEY_LOCK


def _unavailable(url: str, exc: BaseException) -> BankUnavailable:
    return BankUnavailable(
        f"lost the connection to PostgreSQL at {url} ({type(exc).__name__}: "
        f"{str(exc).strip()[:200]}); a write under way may or may not have been committed: "
        "read the slot again before retrying it"
    )


class PostgresUnavailable(GenMemError, ImportError):
    """The PostgreSQL driver (psycopg 3 and psycopg-pool) is not installed."""


def import_psycopg() -> tuple[Any, Any]:
    """Import ``psycopg`` and ``psycopg_pool``, or say how to install them."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise PostgresUnavailable(
            f"the PostgreSQL backend needs psycopg 3 and psycopg-pool ({exc}); install them "
            "with: pip install 'genmem[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


class PostgresBankStore(SQLBankStore):
    """Banks in a PostgreSQL database, from a conninfo/URL, a caller's connection, or a pool."""

    dialect = "postgres"

    def __init__(
        self,
        conn: str | psycopg.Connection[Any] | psycopg_pool.ConnectionPool[Any],
        *,
        lock_timeout_s: float = 5.0,
        setup: bool = True,
        async_pool: psycopg_pool.AsyncConnectionPool[Any] | None = None,
    ) -> None:
        """Open a store; a string gets a pool of its own (closed by :meth:`close`).

        A caller's connection is shared by all threads under a lock and used as it is: each
        store call runs in ``conn.transaction()``, so on a connection with no transaction open
        every write commits on its own, while inside a caller's open transaction the store's
        work joins it and commits with it. A caller's pool is borrowed, never closed.

        ``async_pool``: an open ``psycopg_pool.AsyncConnectionPool`` on the same database (the
        caller's, never closed here). The bank's async methods then run on it, on its event
        loop; without it they run the sync call in a worker thread.
        """
        psycopg, psycopg_pool = import_psycopg()
        self._errors = psycopg.errors
        self._lock_timeout_s = lock_timeout_s
        self._conn: Any = None
        self._pool: Any = None
        self._own_pool = False
        self._conn_lock = threading.RLock()
        self._async: AsyncPostgres | None = None
        if async_pool is not None:
            if not isinstance(async_pool, psycopg_pool.AsyncConnectionPool):
                raise TypeError(
                    "async_pool takes a psycopg_pool.AsyncConnectionPool, not "
                    f"{type(async_pool).__name__}"
                )
            self._async = AsyncPostgres(async_pool, lock_timeout_s, self._async_error)
            self.native_async = True
        if isinstance(conn, psycopg.Connection):
            self._conn = conn
            self.url = "postgresql://(connection)"
        elif isinstance(conn, psycopg_pool.ConnectionPool):
            self._pool = conn
            self.url = "postgresql://(pool)"
        elif isinstance(conn, str):
            # Connect once up front: a bad conninfo fails here with the server's own message,
            # where the pool would only log it and time out.
            psycopg.connect(conn).close()
            self._pool = psycopg_pool.ConnectionPool(
                conn,
                min_size=1,
                max_size=_POOL_MAX_SIZE,
                kwargs={"autocommit": True},
                open=True,
                name="genmem",
            )
            self._own_pool = True
            self.url = _redact(conn)
        else:
            raise TypeError(
                "PostgresBankStore takes a conninfo/URL string, a psycopg.Connection or a "
                f"psycopg_pool.ConnectionPool, not {type(conn).__name__}"
            )
        if setup:
            self.setup()

    @classmethod
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> PostgresBankStore:
        """Open the store in the database a conninfo or ``postgresql://`` URL names."""
        return cls(conn_string, **kwargs)

    # -- connections --------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection; losing it (a server restart or shutdown) is :class:`BankUnavailable`."""
        psycopg, psycopg_pool = import_psycopg()
        conn = None
        try:
            if self._pool is not None:
                with self._pool.connection() as conn:
                    yield conn
                return
            with self._conn_lock:  # a psycopg connection runs one statement at a time
                conn = self._conn
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if conn is not None and not (conn.broken or conn.closed):
                raise  # a query's own failure (lock timeout, serialisation): not the link
            raise _unavailable(self.url, exc) from exc
        except psycopg_pool.PoolTimeout as exc:
            raise _unavailable(self.url, exc) from exc

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._connection() as conn:
            if conn.autocommit:
                with conn.cursor() as cur:
                    yield cur
            else:  # end the implicit transaction a read would otherwise leave open
                with conn.transaction(), conn.cursor() as cur:
                    yield cur

    def _write_error(self, exc: BaseException, slot: bool) -> BaseException | None:
        """What a failed write becomes: RetryableWrite, BankStorageError, or None (as it is)."""
        errors = self._errors
        transient: tuple[type[BaseException], ...] = (
            errors.SerializationFailure,
            errors.DeadlockDetected,
            errors.LockNotAvailable,
        )
        if slot:
            # Slot locks serialise writers of one slot, so a duplicate key there means another
            # writer raced us outside the locks (e.g. a bank created concurrently): retry.
            transient = (*transient, errors.UniqueViolation)
        if isinstance(exc, transient):
            return RetryableWrite(f"postgres: {type(exc).__name__}: {exc}")
        if isinstance(exc, (errors.DiskFull, errors.ReadOnlySqlTransaction, errors.IoError)):
            return BankStorageError(
                f"{self.url}: the server refused the write ({type(exc).__name__}: {exc}); it was "
                "rolled back and the bank is unchanged"
            )
        return None

    def _async_error(self, exc: BaseException, conn: Any, slot: bool) -> BaseException | None:
        """:meth:`_write_error`, then a lost link as BankUnavailable (the async path's map)."""
        psycopg, psycopg_pool = import_psycopg()
        mapped = self._write_error(exc, slot)
        if mapped is not None:
            return mapped
        if isinstance(exc, psycopg_pool.PoolTimeout) or (
            isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
            and (conn is None or conn.broken or conn.closed)
        ):
            return _unavailable(self.url, exc)
        return None

    @contextmanager
    def _transaction(self, lock_key: str | None) -> Iterator[Any]:
        try:
            with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
                wait_s = (
                    self._lock_timeout_s if lock_key else max(self._lock_timeout_s, _STORE_WAIT_S)
                )
                self._x(cur, _LOCK_TIMEOUT, (f"{int(wait_s * 1000)}ms",))
                if lock_key is None:
                    self._x(cur, _STORE_LOCK)
                else:
                    self._x(cur, _STORE_LOCK_SHARED)
                    self._x(cur, _KEY_LOCK, (lock_key,))
                yield cur
        except Exception as exc:
            mapped = self._write_error(exc, lock_key is not None)
            if mapped is None:
                raise
            raise mapped from exc

    def _lock_log(self, cur: Any, bank_id: str) -> None:
        """Hold the bank's log lock to commit, so sequence numbers follow commit order."""
        self._x(cur, _KEY_LOCK, (f"log:{bank_id}",))

    # -- async: on the caller's async pool when one was given --------------------------------

    def _aio(self) -> AsyncPostgres:
        assert self._async is not None  # native_async is only set with it
        return self._async

    async def aget_info(self, bank_id: str) -> BankInfo | None:
        """:meth:`get_info` on the async pool (a worker thread without one)."""
        if self._async is None:
            return await super().aget_info(bank_id)
        return await self._async.get_info(bank_id)

    async def alist_banks(self) -> list[BankInfo]:
        """:meth:`list_banks` on the async pool (a worker thread without one)."""
        if self._async is None:
            return await super().alist_banks()
        return await self._async.list_banks()

    async def acurrent(self, bank_id: str, sid: SID) -> Version | None:
        """:meth:`current` on the async pool."""
        return await self._aio().current(bank_id, sid)

    async def ahistory(self, bank_id: str, sid: SID) -> list[Version]:
        """:meth:`history` on the async pool."""
        return await self._aio().history(bank_id, sid)

    async def alive(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """:meth:`live` on the async pool."""
        return await self._aio().live(bank_id, prefix, limit)

    async def aevents(
        self, bank_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        """:meth:`events` on the async pool."""
        return await self._aio().events(bank_id, after_seq, limit)

    async def arun_in_slot(self, bank_id: str, sid: SID, body: Callable[[SlotTx], T]) -> T:
        """:meth:`run_in_slot` in an async transaction with the same locks."""
        return await self._aio().run_in_slot(bank_id, sid, body)

    def close(self) -> None:
        """Close the pool this store opened (a caller's connection or pool stays open)."""
        if self._own_pool and self._pool is not None:
            self._pool.close()


def _redact(conninfo: str) -> str:
    """The conninfo without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(conninfo)
    except Exception:  # a message must not fail on an odd string
        return "postgresql://(conninfo)"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)
