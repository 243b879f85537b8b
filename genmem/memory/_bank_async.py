"""The bank's async methods, and the pieces they share with the sync ones.

:class:`~genmem.memory.bank.Bank` inherits :class:`AsyncBankMethods`. Each ``a``-method checks
its arguments with the same code as its sync twin, before anything is read or written, and
writes through the same slot-transaction body (so the same validation, typed errors and write
gate apply). How the I/O runs depends on the backend:

* a store with async I/O of its own (``store.native_async``: a LangGraph ``BaseStore``, through
  its ``abatch``) is awaited primitive by primitive, on the event loop;
* any other store (SQLite, PostgreSQL) runs the sync method whole in one worker thread
  (``asyncio.to_thread``), so the loop is free while the database works.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from genmem.errors import InvalidUpdate
from genmem.memory.backend import RetryableWrite, SlotTx
from genmem.memory.gate import WriteGate
from genmem.memory.records import ApplyResult, Entry, Event, Hit, LookupResult, Update, Version
from genmem.memory.sid import SID

if TYPE_CHECKING:
    from genmem.memory.bank import Bank

__all__ = ["AsyncBankMethods"]

T = TypeVar("T")
_WRITE_DEADLINE_S = 60.0


class AsyncBankMethods:
    """``aget``, ``alookup``, ``ainsert``, ``arevise``, ``aapply`` and the other async reads."""

    async def aget(self: Bank, sid: SID | str) -> Entry | None:
        """:meth:`Bank.get` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(self.get, sid)
        return live_entry(await self.store.acurrent(self.bank_id, self.sid(sid)))

    async def alookup(
        self: Bank, sids: Iterable[SID | str], k: int = 5, *, min_depth: int = 1
    ) -> list[LookupResult]:
        """:meth:`Bank.lookup` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(self.lookup, list(sids), k, min_depth=min_depth)
        parsed = self._lookup_args(sids, k, min_depth)
        return [await self._alookup_one(s, k, min_depth) for s in parsed]

    async def _alookup_one(self: Bank, sid: SID, k: int, min_depth: int) -> LookupResult:
        exact = await self.store.acurrent(self.bank_id, sid)
        if exact is not None and not exact.deleted:
            return exact_result(sid, exact, self.spec.levels)
        for depth in range(self.spec.levels - 1, min_depth - 1, -1):
            rows = await self.store.alive(self.bank_id, sid.prefix(depth), k)
            if rows:
                return near_result(sid, depth, rows)
        return LookupResult(query=str(sid), exact=False, hits=[])

    async def aentries(self: Bank, prefix: SID | str | Sequence[int] = ()) -> list[Entry]:
        """:meth:`Bank.entries` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(self.entries, prefix)
        rows = await self.store.alive(self.bank_id, self._prefix(prefix), None)
        return [Entry.from_version(v) for v in rows]

    async def ahistory(self: Bank, sid: SID | str) -> list[Version]:
        """:meth:`Bank.history` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(self.history, sid)
        return await self.store.ahistory(self.bank_id, self.sid(sid))

    async def aevents(self: Bank, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """:meth:`Bank.events` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(self.events, after_seq, limit)
        return await self.store.aevents(self.bank_id, after_seq, limit)

    async def ainsert(
        self: Bank,
        sid: SID | str,
        payload: str,
        *,
        actor: str = "api",
        metadata: dict[str, Any] | None = None,
        gate: WriteGate | None = None,
    ) -> ApplyResult:
        """:meth:`Bank.insert` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(
                self.insert, sid, payload, actor=actor, metadata=metadata, gate=gate
            )
        return await self._arun_write(*self._insert_body(sid, payload, actor, metadata, gate))

    async def arevise(
        self: Bank,
        sid: SID | str,
        payload: str,
        *,
        expected_version: int | None = None,
        actor: str = "api",
        metadata: dict[str, Any] | None = None,
        gate: WriteGate | None = None,
    ) -> ApplyResult:
        """:meth:`Bank.revise` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(
                self.revise,
                sid,
                payload,
                expected_version=expected_version,
                actor=actor,
                metadata=metadata,
                gate=gate,
            )
        return await self._arun_write(
            *self._revise_body(sid, payload, expected_version, actor, metadata, gate)
        )

    async def aapply(
        self: Bank,
        update: Update | dict[str, Any],
        *,
        actor: str = "api",
        gate: WriteGate | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ApplyResult:
        """:meth:`Bank.apply` without blocking the event loop (see the module docstring)."""
        if not self.store.native_async:
            return await asyncio.to_thread(
                self.apply, update, actor=actor, gate=gate, metadata=metadata
            )
        return await self._arun_write(*self._apply_body(update, actor, metadata, gate))

    async def _arun_write(self: Bank, sid: SID, body: Callable[[SlotTx], T]) -> T:
        self._check_writable()
        retry = Retry()
        while True:
            try:
                return await self.store.arun_in_slot(self.bank_id, sid, body)
            except RetryableWrite:
                wait = retry.next_wait()
                if wait is None:
                    raise
                await asyncio.sleep(wait)


class Retry:
    """Backoff between tries of a write that met a transient conflict, up to a deadline."""

    def __init__(self) -> None:
        self._deadline = time.monotonic() + _WRITE_DEADLINE_S
        self._delay = 0.002

    def next_wait(self) -> float | None:
        """Seconds to wait before the next try, None once the deadline has passed."""
        if time.monotonic() > self._deadline:
            return None
        wait = self._delay * (1 + random.random())
        self._delay = min(self._delay * 2, 0.2)
        return wait


def first_error(exc: ValidationError) -> str:
    """Where and what the first validation error is, for a message."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "update"
    return f"{where}: {err['msg']}"


def check_update(update: Update | dict[str, Any]) -> Update:
    """An update record, validated (InvalidUpdate names the first problem)."""
    if not isinstance(update, Update):
        try:
            update = Update.model_validate(update)
        except ValidationError as exc:
            raise InvalidUpdate(f"invalid update: {first_error(exc)}") from None
    if update.op == "insert" and update.expected_version is not None:
        raise InvalidUpdate("expected_version applies to revise only, not insert")
    return update


def live_entry(v: Version | None) -> Entry | None:
    """The entry a slot's current version shows (None when never used or deleted)."""
    return None if v is None or v.deleted else Entry.from_version(v)


def exact_result(sid: SID, v: Version, levels: int) -> LookupResult:
    """A lookup answered by the entry at the SID itself."""
    hit = Hit(sid=v.sid, match_depth=levels, version=v.version, payload=v.payload)
    return LookupResult(query=str(sid), exact=True, hits=[hit])


def near_result(sid: SID, depth: int, rows: Sequence[Version]) -> LookupResult:
    """A lookup answered by the live entries that share the SID's first ``depth`` codes."""
    hits = [Hit(sid=v.sid, match_depth=depth, version=v.version, payload=v.payload) for v in rows]
    return LookupResult(query=str(sid), exact=False, hits=hits)
