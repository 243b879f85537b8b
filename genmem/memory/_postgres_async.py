"""The PostgreSQL backend's async I/O, on a caller's psycopg ``AsyncConnectionPool``.

A :class:`~genmem.memory.postgres_store.PostgresBankStore` given ``async_pool=`` answers the
bank's async methods on that pool, on the event loop, with the same SQL, locks and error
mapping as its sync path:

* reads run on a pooled ``AsyncConnection`` in autocommit;
* a slot write takes, as the sync one does, the shared store lock and the slot's lock, then the
  bank's log lock, and reserves the event's sequence number from the events table's own
  sequence under it (the sync path numbers its event at the same lock, just later). Then it
  reads the slot, runs the bank's body (its checks and the gate: no I/O of its own) on a slot
  transaction that only records statements, and executes them in the same database
  transaction. Sequence numbers stay in commit order within a bank; a write the body refuses
  leaves a gap in the store-wide numbering, as a rolled-back sync write does.

The pool is the caller's: an async pool belongs to the event loop that opened it, and only its
owner knows when that loop's work is done (``async with AsyncConnectionPool(...) as pool``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import genmem.memory._sql as S
from genmem.errors import BankStorageError, GenMemError
from genmem.memory.backend import RetryableWrite, SlotTx, sort_key
from genmem.memory.records import BankInfo, Event, Op, Outcome, Version
from genmem.memory.sid import SID

__all__ = ["AsyncPostgres"]

T = TypeVar("T")
_RESERVE_SEQ = "SELECT nextval(pg_get_serial_sequence('genmem_events', 'seq'))"
_INSERT_EVENT_AT = (
    "INSERT INTO genmem_events "
    "(seq, bank_id, op, outcome, sid, version_before, version_after, time, actor, reason) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _q(sql: str) -> str:
    return S.q(sql, "postgres")


class _RecordedSlotTx:
    """A :class:`SlotTx` that records its statements, to run after the bank's body returns."""

    def __init__(self, bank_id: str, sid: SID, current: Version | None, seq: int) -> None:
        self._bank_id, self._sid, self._seq = bank_id, sid, seq
        self._skey = sort_key(sid.codes)
        self.current = current
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def add_version(self, version: Version) -> None:
        self.statements.append(
            (S.INSERT_VERSION, S.version_params(self._bank_id, self._skey, version))
        )
        slot = (self._bank_id, self._skey, version.version, int(not version.deleted))
        self.statements.append((S.UPSERT_SLOT, slot))
        self.current = version

    def add_event(
        self,
        op: Op,
        outcome: Outcome,
        version_before: int | None,
        version_after: int | None,
        at: float,
        actor: str,
        reason: str | None = None,
    ) -> int:
        params = (self._seq, self._bank_id, op, outcome, str(self._sid))
        self.statements.append(
            (_INSERT_EVENT_AT, (*params, version_before, version_after, at, actor, reason))
        )
        return self._seq


class AsyncPostgres:
    """The store's async primitives on a caller's async pool, with its locks and errors."""

    def __init__(
        self,
        pool: Any,
        lock_timeout_s: float,
        errors: Callable[[BaseException, Any, bool], BaseException | None],
    ) -> None:
        self._pool = pool
        self._lock_timeout_s = lock_timeout_s
        self._errors = errors

    @asynccontextmanager
    async def _cursor(self, *, write_key: str | None = None) -> AsyncIterator[Any]:
        """A cursor (inside a transaction holding ``write_key``'s locks when given)."""
        conn = None
        try:
            async with self._pool.connection() as conn:
                if write_key is None:
                    async with conn.cursor() as cur:
                        yield cur
                    return
                async with conn.transaction(), conn.cursor() as cur:
                    wait = f"{int(self._lock_timeout_s * 1000)}ms"
                    await self._x(cur, S.PG_LOCK_TIMEOUT, (wait,))
                    await self._x(cur, S.PG_STORE_LOCK_SHARED)
                    await self._x(cur, S.PG_KEY_LOCK, (write_key,))
                    yield cur
        except (RetryableWrite, BankStorageError, GenMemError):
            raise  # the bank's own refusals (SlotOccupied, ...) and already mapped errors
        except Exception as exc:
            mapped = self._errors(exc, conn, write_key is not None)
            if mapped is None:
                raise
            raise mapped from exc

    async def _x(self, cur: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        await cur.execute(_q(sql), tuple(params))
        return cur

    async def _one(self, sql: str, params: Sequence[Any]) -> Any:
        async with self._cursor() as cur:
            return await (await self._x(cur, sql, params)).fetchone()

    async def _all(self, sql: str, params: Sequence[Any]) -> list[Any]:
        async with self._cursor() as cur:
            return list(await (await self._x(cur, sql, params)).fetchall())

    # -- the store's async primitives -------------------------------------------------------

    async def get_info(self, bank_id: str) -> BankInfo | None:
        """The bank's identity, or None."""
        row = await self._one(S.GET_INFO, (bank_id,))
        return None if row is None else BankInfo.model_validate_json(row[0])

    async def list_banks(self) -> list[BankInfo]:
        """Every bank in the store."""
        return [BankInfo.model_validate_json(r[0]) for r in await self._all(S.LIST_BANKS, ())]

    async def current(self, bank_id: str, sid: SID) -> Version | None:
        """Latest version of a slot."""
        row = await self._one(S.CURRENT, (bank_id, sort_key(sid.codes)))
        return None if row is None else S.version_from_row(row)

    async def history(self, bank_id: str, sid: SID) -> list[Version]:
        """Every version of a slot."""
        rows = await self._all(S.HISTORY, (bank_id, sort_key(sid.codes)))
        return [S.version_from_row(r) for r in rows]

    async def live(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """Live entries under a prefix, in code order."""
        sql, params = S.live_query(bank_id, prefix, limit)
        return [S.version_from_row(r) for r in await self._all(sql, params)]

    async def events(self, bank_id: str, after_seq: int, limit: int | None) -> list[Event]:
        """The log after ``after_seq``."""
        sql, params = S.events_query(bank_id, after_seq, limit)
        return [S.event_from_row(r) for r in await self._all(sql, params)]

    async def run_in_slot(self, bank_id: str, sid: SID, body: Callable[[SlotTx], T]) -> T:
        """Lock the slot and the log, reserve a seq, run ``body``, write what it recorded."""
        skey = sort_key(sid.codes)
        async with self._cursor(write_key=f"{bank_id}|{skey}") as cur:
            await self._x(cur, S.PG_KEY_LOCK, (f"log:{bank_id}",))
            seq = int((await (await self._x(cur, _RESERVE_SEQ)).fetchone())[0])
            row = await (await self._x(cur, S.CURRENT, (bank_id, skey))).fetchone()
            current = None if row is None else S.version_from_row(row)
            tx = _RecordedSlotTx(bank_id, sid, current, seq)
            result = body(tx)
            for sql, params in tx.statements:
                await self._x(cur, sql, params)
            return result
