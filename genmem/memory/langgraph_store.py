"""LangGraph ``BaseStore`` backend: banks inside any LangGraph store, the platform's included.

So a bank can live in the store that ``langgraph dev`` or LangGraph Platform hands a graph,
:class:`LangGraphBankStore` maps the bank primitives onto ``BaseStore`` items (``InMemoryStore``,
``SqliteStore``, ``PostgresStore`` or any other implementation):

=======================================  =========================  ==========================
namespace                                key                        value
=======================================  =========================  ==========================
``("genmem", "banks")``                  bank id                    :class:`BankInfo`
``("genmem", "bank", B, "slots")``       ``sort_key(codes)``        current version, ``live``,
                                                                    ``p1..pL``
``("genmem", "bank", B, "versions")``    sort key + version number  one :class:`Version`
``("genmem", "bank", B, "events")``      zero-padded seq            one :class:`Event`
``("genmem", "bank", B, "meta")``        ``"log"``                  last seq and counters
=======================================  =========================  ==========================

``B`` is the bank id with ``.`` written as ``:`` (LangGraph forbids dots in namespace labels).
An adapter opened for an owner (``owner="alice"``: a user a LangGraph server authenticated) keeps
that owner's banks under ``("genmem", "user", "alice", ...)`` with the same layout below, and sees
no other banks; the server's store authorization (``genmem.served_auth``) lets a user's own store
requests reach only that prefix.
Keys are zero-padded, so key order is code order. ``current`` is one ``get``; ``live(prefix)``
is one filtered ``search`` on the stored prefix fields (``p<d>`` is the sort key of the SID's
first ``d`` codes) and ``live``, using only equality filters, which every store evaluates the
same way. Results are sorted by key here because stores order searches differently. Versions
get keys of their own and are never overwritten; sequence numbers count per bank from 1.

**Writers: one process.** ``BaseStore`` has no transactions and no compare-and-set, so the
adapter makes each write exclusive with a ``threading.RLock`` shared by every adapter over the
same underlying store in this process, and commits the write (version, slot, event, counters)
in one ``batch`` call, which SQLite and PostgreSQL stores run as one statement. Threads of one
process therefore never lose each other's updates. Writers in *several processes* on one
store are **not** serialised and could overwrite each other: for that, use the SQLite or
PostgreSQL bank backend (``sqlite:///...``, ``postgresql://...``), whose transactions and locks
cover processes. Reads take the same lock, because ``InMemoryStore`` is not safe to read while
another thread writes and because paging through a search must not race a writer.

**Async.** The adapter's ``a``-primitives (what ``Bank.aget``, ``alookup``, ``ainsert``, ...
call) go through the store's own ``abatch``, on the event loop: no worker thread, which is what a
store bound to the server's event loop needs (the LangGraph server's store refuses sync calls
made on its loop). langgraph's sync ``SqliteStore`` has no ``abatch``; over it the bank's async
methods run their sync twins in a worker thread instead (and the adapter's own ``a``-primitives
run its ``batch`` in one). A write reads the slot, runs the bank's checks and commits in one
``abatch`` while it holds an ``asyncio.Lock`` per event loop (coroutines of one loop, one at a
time) and the process-wide lock above, taken without blocking the loop (sync writers in
threads).

Every item is written with ``index=False`` (no embedding of payloads by a store configured for
semantic search) and ``ttl=None`` (a store's default TTL never expires a bank).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from genmem.errors import BankExists, IntegrityError, InvalidBankURL
from genmem.memory.records import BankInfo, Event, Op, Outcome, Version
from genmem.memory.sid import SID, SIDSpec
from genmem.memory.store import BankStore, SlotTx, sort_key

if TYPE_CHECKING:
    from genmem.memory.bank_url import BankURL

__all__ = ["LangGraphBankStore", "owner_label", "owner_root"]

_ROOT = "genmem"
_PAGE = 500  # items per search page and per write batch (SQLite caps bound parameters)
_META_KEY = "log"
_LOCK_POLL_S = 0.001  # how often an async writer looks again at a lock a thread holds
T = TypeVar("T")

_registry_lock = threading.Lock()
_memory_stores: dict[str, InMemoryStore] = {}


class _StoreLock:
    """The write lock of one underlying store: for threads, and one per event loop."""

    def __init__(self) -> None:
        self.thread = threading.RLock()
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def for_loop(self) -> asyncio.Lock:
        """The lock the coroutines of the running event loop share."""
        loop = asyncio.get_running_loop()
        with _registry_lock:
            lock = self._by_loop.get(loop)
            if lock is None:
                lock = self._by_loop[loop] = asyncio.Lock()
            return lock


# One write lock per underlying store, so two adapters over one store still exclude each other.
_locks_by_store: weakref.WeakKeyDictionary[BaseStore, _StoreLock] = weakref.WeakKeyDictionary()
_locks_by_location: dict[str, _StoreLock] = {}


def memory_store(name: str = "") -> InMemoryStore:
    """The process-wide ``InMemoryStore`` named by ``memory://NAME``, created on first use."""
    with _registry_lock:
        if name not in _memory_stores:
            _memory_stores[name] = InMemoryStore()
        return _memory_stores[name]


def _lock_for(store: BaseStore, location: str | None) -> _StoreLock:
    with _registry_lock:
        if location is not None:
            return _locks_by_location.setdefault(location, _StoreLock())
        lock = _locks_by_store.get(store)
        if lock is None:
            lock = _locks_by_store[store] = _StoreLock()
        return lock


def _version_key(skey: str, number: int) -> str:
    return f"{skey}{number:010d}"


def _event_key(seq: int) -> str:
    return f"{seq:012d}"


def _put(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> PutOp:
    return PutOp(namespace, key, value, index=False, ttl=None)


def _get(namespace: tuple[str, ...], key: str) -> GetOp:
    return GetOp(namespace, key, refresh_ttl=False)


def _slot_value(codes: Sequence[int], v: Version) -> dict[str, Any]:
    """A slot item: the current version plus the fields prefix searches filter on."""
    value: dict[str, Any] = {"current": v.model_dump(), "live": not v.deleted}
    for depth in range(1, len(codes) + 1):
        value[f"p{depth}"] = sort_key(codes[:depth])
    return value


def _empty_log() -> dict[str, Any]:
    return {"last_seq": 0, "versions": 0, "tombstones": 0, "outcomes": {}, "rejections": {}}


def _count(log: dict[str, Any], outcome: str, reason: str | None) -> None:
    """Count one event in the log's per-outcome (and per-rejection-reason) tallies."""
    log["outcomes"][outcome] = log["outcomes"].get(outcome, 0) + 1
    if reason is not None:
        log["rejections"][reason] = log["rejections"].get(reason, 0) + 1


def _has_abatch(store: BaseStore) -> bool:
    """Whether the store's ``abatch`` works: langgraph's sync ``SqliteStore`` only raises there."""
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError:  # not installed, so not this store
        return True
    return type(store).abatch is not SqliteStore.abatch


def _live_filter(prefix: Sequence[int]) -> dict[str, Any]:
    """The search filter of the live slots under ``prefix``."""
    codes = tuple(prefix)
    filter_: dict[str, Any] = {"live": True}
    if codes:
        filter_[f"p{len(codes)}"] = sort_key(codes)
    return filter_


def _event_keys(last_seq: int, after_seq: int, limit: int | None) -> list[str]:
    """The keys of the events after ``after_seq`` (at most ``limit``) in a log at ``last_seq``."""
    stop = last_seq if limit is None else min(last_seq, after_seq + max(limit, 0))
    return [_event_key(s) for s in range(max(after_seq, 0) + 1, stop + 1)]


def _versions(
    bank_id: str, sid: SID, cur: Version, keys: list[str], items: list[Item | None]
) -> list[Version]:
    """A slot's versions from their items; IntegrityError when one is missing."""
    missing = [k for k, i in zip(keys, items, strict=True) if i is None]
    if missing:
        raise IntegrityError(
            f"bank {bank_id!r}: {sid} is at version {cur.version} but versions "
            f"{missing} are missing from the store",
            problems=[f"{sid}: missing version keys {missing}"],
        )
    return [Version.model_validate(i.value) for i in items if i is not None]


def owner_label(identity: str) -> str:
    """The namespace label of an owner's banks: the identity, ``.`` written as ``:``.

    Raises:
        ValueError: an empty identity.
    """
    if not isinstance(identity, str) or not identity.strip():
        raise ValueError(f"an owner identity must be a non-empty string, got {identity!r}")
    return identity.replace(".", ":")


def owner_root(owner: str | None) -> tuple[str, ...]:
    """The first labels of every namespace of ``owner``'s banks (``("genmem",)`` for no owner)."""
    return (_ROOT,) if owner is None else (_ROOT, "user", owner_label(owner))


class _Namespaces:
    """The namespaces of one bank."""

    def __init__(self, bank_id: str, root: tuple[str, ...] = (_ROOT,)) -> None:
        base = (*root, "bank", bank_id.replace(".", ":"))
        self.slots = (*base, "slots")
        self.versions = (*base, "versions")
        self.events = (*base, "events")
        self.meta = (*base, "meta")


class _LangGraphSlotTx:
    """The :class:`SlotTx` of the adapter: buffered puts, committed in one batch on exit."""

    def __init__(self, ns: _Namespaces, sid: SID, slot: Item | None, log: Item | None) -> None:
        """A transaction on the slot and log items just read with :meth:`reads`."""
        self._sid, self._ns = sid, ns
        self._skey = sort_key(sid.codes)
        self.current: Version | None = (
            None if slot is None else Version.model_validate(slot.value["current"])
        )
        self._log = _empty_log() if log is None else dict(log.value)
        self._log["outcomes"] = dict(self._log["outcomes"])
        self._log["rejections"] = dict(self._log.get("rejections", {}))  # logs before the gate
        self.puts: list[PutOp] = []

    @staticmethod
    def reads(ns: _Namespaces, sid: SID) -> list[GetOp]:
        """What a transaction on ``sid`` reads first: the slot and the bank's log counters."""
        return [_get(ns.slots, sort_key(sid.codes)), _get(ns.meta, _META_KEY)]

    def add_version(self, version: Version) -> None:
        before = self.current
        if before is not None and before.deleted:
            self._log["tombstones"] -= 1
        if version.deleted:
            self._log["tombstones"] += 1
        self._log["versions"] += 1
        self.puts.append(
            _put(self._ns.versions, _version_key(self._skey, version.version), version.model_dump())
        )
        self.puts.append(_put(self._ns.slots, self._skey, _slot_value(self._sid.codes, version)))
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
        seq = self._log["last_seq"] = self._log["last_seq"] + 1
        _count(self._log, outcome, reason)
        event = Event(
            seq=seq,
            op=op,
            outcome=outcome,
            sid=str(self._sid),
            version_before=version_before,
            version_after=version_after,
            time=at,
            actor=actor,
            reason=reason,
        )
        self.puts.append(_put(self._ns.events, _event_key(seq), event.model_dump()))
        return seq

    def writes(self) -> list[PutOp]:
        """The batch that commits the transaction (nothing when it wrote nothing)."""
        return [*self.puts, _put(self._ns.meta, _META_KEY, self._log)] if self.puts else []


class LangGraphBankStore(BankStore):
    """Banks kept in a LangGraph ``BaseStore``; writers serialised within this process."""

    def __init__(
        self,
        store: BaseStore,
        *,
        owner: str | None = None,
        setup: bool = False,
        _location: str | None = None,
        _closers: Sequence[Any] = (),
    ) -> None:
        """Wrap a caller's store (never closed here); ``setup=True`` calls its ``setup()``.

        Args:
            store: The LangGraph store the banks live in.
            owner: Whose banks these are. None: the store's shared banks, under
                ``("genmem", ...)``; an identity: that owner's banks only, under
                ``("genmem", "user", <identity>, ...)`` (what a LangGraph server with
                authentication gives each user; :func:`owner_root`).
            setup: Call the store's own ``setup()`` (its migrations).
        """
        if not isinstance(store, BaseStore):
            raise TypeError(f"LangGraphBankStore needs a langgraph BaseStore, not {type(store)}")
        self._store = store
        self.owner = owner
        self._root = owner_root(owner)
        self._banks = (*self._root, "banks")
        self._locks = _lock_for(store, _location)
        self._lock = self._locks.thread
        self.native_async = _has_abatch(store)
        self._closers = list(_closers)
        self.url = f"langgraph://{type(store).__name__}"
        if setup:
            self.setup()

    @classmethod
    def from_url(cls, parsed: BankURL) -> LangGraphBankStore:
        """Open ``memory://NAME``, ``langgraph+sqlite:///path.db`` or ``langgraph+postgresql://``."""
        if parsed.scheme == "memory":
            return cls(memory_store(parsed.location), owner=parsed.owner)
        if parsed.scheme == "langgraph+sqlite":
            from langgraph.store.sqlite import SqliteStore

            path = parsed.location
            if path != ":memory:":
                Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            if path != ":memory:":  # readers beside the writer; durable at commit under WAL
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            location = None if path == ":memory:" else f"sqlite:{Path(path).resolve()}"
            return cls(
                SqliteStore(conn),
                owner=parsed.owner,
                setup=True,
                _location=location,
                _closers=[conn],
            )
        if parsed.scheme == "langgraph+postgresql":
            from genmem.memory.postgres_store import import_psycopg

            psycopg, _ = import_psycopg()
            from langgraph.store.postgres import PostgresStore
            from psycopg.rows import dict_row

            pg = psycopg.Connection.connect(
                parsed.location, autocommit=True, prepare_threshold=0, row_factory=dict_row
            )
            return cls(PostgresStore(pg), owner=parsed.owner, setup=True, _closers=[pg])
        raise InvalidBankURL(
            f"{parsed.url!r} is not a LangGraph store URL (memory://, langgraph+sqlite:///, "
            "langgraph+postgresql://)",
            url=parsed.url,
        )

    def _ns(self, bank_id: str) -> _Namespaces:
        return _Namespaces(bank_id, self._root)

    @contextmanager
    def _locked(self) -> Iterator[BaseStore]:
        with self._lock:
            yield self._store

    def _search_all(
        self, namespace: tuple[str, ...], filter: dict[str, Any] | None = None
    ) -> list[Item]:
        """Every item a search matches, paged, sorted by key (stores order searches apart)."""
        items: dict[str, Item] = {}
        offset = 0
        with self._locked() as store:
            while True:
                op = SearchOp(
                    namespace, filter=filter, limit=_PAGE, offset=offset, refresh_ttl=False
                )
                page = store.batch([op])[0]
                for item in page:
                    if item.namespace == namespace:  # not a deeper namespace under it
                        items[item.key] = item
                if len(page) < _PAGE:
                    break
                offset += len(page)
        return [items[k] for k in sorted(items)]

    def _get_many(self, namespace: tuple[str, ...], keys: Sequence[str]) -> list[Item | None]:
        out: list[Item | None] = []
        with self._locked() as store:
            for start in range(0, len(keys), _PAGE):
                chunk = keys[start : start + _PAGE]
                out.extend(store.batch([_get(namespace, k) for k in chunk]))
        return out

    def _write_all(self, puts: Sequence[PutOp]) -> None:
        with self._locked() as store:
            for start in range(0, len(puts), _PAGE):
                store.batch(list(puts[start : start + _PAGE]))

    def _log(self, bank_id: str) -> dict[str, Any]:
        with self._locked() as store:
            item = store.batch([_get(self._ns(bank_id).meta, _META_KEY)])[0]
        return _empty_log() if item is None else dict(item.value)

    # -- registry -------------------------------------------------------------------------

    def setup(self) -> None:
        """Run the underlying store's own migrations (when it has any); idempotent."""
        store_setup = getattr(self._store, "setup", None)
        if callable(store_setup):
            with self._locked():
                store_setup()

    def get_info(self, bank_id: str) -> BankInfo | None:
        """The bank's identity, or None."""
        with self._locked() as store:
            item = store.batch([_get(self._banks, bank_id)])[0]
        return None if item is None else BankInfo.model_validate(item.value)

    def list_banks(self) -> list[BankInfo]:
        """Every bank in the store, by id."""
        return [BankInfo.model_validate(i.value) for i in self._search_all(self._banks)]

    def _create(self, info: BankInfo, versions: Sequence[Version], events: Sequence[Event]) -> None:
        spec = SIDSpec(tuple(info.sizes))
        ns = self._ns(info.bank_id)
        with self._locked():
            if self.get_info(info.bank_id) is not None:
                raise BankExists(
                    f"bank {info.bank_id!r} already exists in {self.url}", bank_id=info.bank_id
                )
            self._clear_orphans(ns)
            log = _empty_log()
            puts: list[PutOp] = []
            latest: dict[str, tuple[tuple[int, ...], Version]] = {}
            for v in versions:
                codes = spec.parse(v.sid).codes
                skey = sort_key(codes)
                puts.append(_put(ns.versions, _version_key(skey, v.version), v.model_dump()))
                if skey not in latest or v.version > latest[skey][1].version:
                    latest[skey] = (codes, v)
            for skey, (codes, v) in latest.items():
                puts.append(_put(ns.slots, skey, _slot_value(codes, v)))
            for seq, e in enumerate(events, 1):  # renumbered from 1, like a fresh bank
                event = e.model_copy(update={"seq": seq})
                puts.append(_put(ns.events, _event_key(seq), event.model_dump()))
                _count(log, e.outcome, e.reason)
            log.update(
                last_seq=len(events),
                versions=len(versions),
                tombstones=sum(1 for _, v in latest.values() if v.deleted),
            )
            puts.append(_put(ns.meta, _META_KEY, log))
            # The bank record goes last: a create cut short leaves no bank, only orphans that
            # the next create of this id clears.
            puts.append(_put(self._banks, info.bank_id, info.model_dump()))
            self._write_all(puts)

    def _clear_orphans(self, ns: _Namespaces) -> None:
        doomed = [
            PutOp(item.namespace, item.key, None)
            for part in (ns.slots, ns.versions, ns.events, ns.meta)
            for item in self._search_all(part)
        ]
        self._write_all(doomed)

    def _snapshot(self, source: str, info: BankInfo) -> None:
        src, ns = self._ns(source), self._ns(info.bank_id)
        with self._locked():
            if self.get_info(info.bank_id) is not None:
                raise BankExists(
                    f"snapshot {info.bank_id!r} already exists; pick another name",
                    bank_id=info.bank_id,
                )
            self._clear_orphans(ns)
            info = info.model_copy(update={"snapshot_seq": self._log(source)["last_seq"]})
            puts: list[PutOp] = []
            n_versions = 0
            for slot in self._search_all(src.slots, {"live": True}):
                current = Version.model_validate(slot.value["current"])
                keys = [_version_key(slot.key, n) for n in range(1, current.version + 1)]
                for key, item in zip(keys, self._get_many(src.versions, keys), strict=True):
                    if item is not None:
                        puts.append(_put(ns.versions, key, dict(item.value)))
                        n_versions += 1
                puts.append(_put(ns.slots, slot.key, dict(slot.value)))
            log = _empty_log()
            log["versions"] = n_versions
            puts.append(_put(ns.meta, _META_KEY, log))
            puts.append(_put(self._banks, info.bank_id, info.model_dump()))
            self._write_all(puts)

    # -- reads ----------------------------------------------------------------------------

    def current(self, bank_id: str, sid: SID) -> Version | None:
        """Latest version of a slot: one ``get``."""
        with self._locked() as store:
            item = store.batch([_get(self._ns(bank_id).slots, sort_key(sid.codes))])[0]
        return None if item is None else Version.model_validate(item.value["current"])

    def history(self, bank_id: str, sid: SID) -> list[Version]:
        """Every version of a slot: the slot's version count, then one batch of ``get``."""
        ns, skey = self._ns(bank_id), sort_key(sid.codes)
        with self._locked():
            cur = self.current(bank_id, sid)
            if cur is None:
                return []
            keys = [_version_key(skey, n) for n in range(1, cur.version + 1)]
            items = self._get_many(ns.versions, keys)
        return _versions(bank_id, sid, cur, keys, items)

    def live(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """Live entries under a prefix in code order: one filtered search."""
        rows = self._search_all(self._ns(bank_id).slots, _live_filter(prefix))
        return [Version.model_validate(i.value["current"]) for i in rows[:limit]]

    def events(self, bank_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """The log after ``after_seq``: sequence numbers are dense, so one batch of ``get``."""
        with self._locked():
            keys = _event_keys(int(self._log(bank_id)["last_seq"]), after_seq, limit)
            items = self._get_many(self._ns(bank_id).events, keys)
        return [Event.model_validate(i.value) for i in items if i is not None]

    def all_versions(self, bank_id: str) -> Iterator[Version]:
        """Every version, in code then version order."""
        items = self._search_all(self._ns(bank_id).versions)
        return iter([Version.model_validate(i.value) for i in items])

    def counts(self, bank_id: str) -> dict[str, object]:
        """Version, tombstone, event and per-outcome counts, kept with the log."""
        log = self._log(bank_id)
        return {
            "versions": int(log["versions"]),
            "tombstones": int(log["tombstones"]),
            "events": int(log["last_seq"]),
            "outcomes": {k: int(n) for k, n in log["outcomes"].items()},
            "rejections": {k: int(n) for k, n in log.get("rejections", {}).items()},
        }

    # -- writes ---------------------------------------------------------------------------

    @contextmanager
    def slot_tx(self, bank_id: str, sid: SID) -> Iterator[_LangGraphSlotTx]:
        """Exclusive within this process; the write lands in one ``batch`` on normal exit."""
        with self._locked() as store:
            ns = self._ns(bank_id)
            tx = _LangGraphSlotTx(ns, sid, *store.batch(_LangGraphSlotTx.reads(ns, sid)))
            yield tx
            writes = tx.writes()
            if writes:
                store.batch(writes)

    # -- async: the store's own abatch, on the event loop ------------------------------------

    @asynccontextmanager
    async def _alocked(self) -> AsyncIterator[None]:
        async with self._locks.for_loop():
            # A thread may hold the store: wait for it without blocking the event loop.
            while not self._lock.acquire(blocking=False):
                await asyncio.sleep(_LOCK_POLL_S)
            try:
                yield
            finally:
                self._lock.release()

    async def _abatch(self, ops: list[Any]) -> list[Any]:
        async with self._alocked():
            return await self._abatch_unlocked(ops)

    async def _abatch_unlocked(self, ops: list[Any]) -> list[Any]:
        """The store's ``abatch``, or its ``batch`` in a worker thread when it has none."""
        if self.native_async:
            return await self._store.abatch(ops)
        return await asyncio.to_thread(self._store.batch, ops)

    async def _asearch_all(
        self, namespace: tuple[str, ...], filter: dict[str, Any] | None = None
    ) -> list[Item]:
        """:meth:`_search_all` through ``abatch``."""
        items: dict[str, Item] = {}
        offset = 0
        async with self._alocked():
            while True:
                op = SearchOp(
                    namespace, filter=filter, limit=_PAGE, offset=offset, refresh_ttl=False
                )
                page = (await self._abatch_unlocked([op]))[0]
                items.update({i.key: i for i in page if i.namespace == namespace})
                if len(page) < _PAGE:
                    break
                offset += len(page)
        return [items[k] for k in sorted(items)]

    async def _aget_many(
        self, namespace: tuple[str, ...], keys: Sequence[str]
    ) -> list[Item | None]:
        out: list[Item | None] = []
        async with self._alocked():
            for start in range(0, len(keys), _PAGE):
                chunk = keys[start : start + _PAGE]
                out.extend(await self._abatch_unlocked([_get(namespace, k) for k in chunk]))
        return out

    async def aget_info(self, bank_id: str) -> BankInfo | None:
        """:meth:`get_info` through ``abatch``."""
        item = (await self._abatch([_get(self._banks, bank_id)]))[0]
        return None if item is None else BankInfo.model_validate(item.value)

    async def alist_banks(self) -> list[BankInfo]:
        """:meth:`list_banks` through ``abatch``."""
        return [BankInfo.model_validate(i.value) for i in await self._asearch_all(self._banks)]

    async def acurrent(self, bank_id: str, sid: SID) -> Version | None:
        """:meth:`current` through ``abatch``: one ``get``."""
        item = (await self._abatch([_get(self._ns(bank_id).slots, sort_key(sid.codes))]))[0]
        return None if item is None else Version.model_validate(item.value["current"])

    async def ahistory(self, bank_id: str, sid: SID) -> list[Version]:
        """:meth:`history` through ``abatch``."""
        cur = await self.acurrent(bank_id, sid)
        if cur is None:
            return []
        skey = sort_key(sid.codes)
        keys = [_version_key(skey, n) for n in range(1, cur.version + 1)]
        items = await self._aget_many(self._ns(bank_id).versions, keys)
        return _versions(bank_id, sid, cur, keys, items)

    async def alive(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """:meth:`live` through ``abatch``: one filtered search."""
        rows = await self._asearch_all(self._ns(bank_id).slots, _live_filter(prefix))
        return [Version.model_validate(i.value["current"]) for i in rows[:limit]]

    async def aevents(
        self, bank_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        """:meth:`events` through ``abatch``."""
        ns = self._ns(bank_id)
        log = (await self._abatch([_get(ns.meta, _META_KEY)]))[0]
        last = 0 if log is None else int(log.value["last_seq"])
        keys = _event_keys(last, after_seq, limit)
        return [Event.model_validate(i.value) for i in await self._aget_many(ns.events, keys) if i]

    async def arun_in_slot(self, bank_id: str, sid: SID, body: Callable[[SlotTx], T]) -> T:
        """Read the slot, run ``body`` (the bank's checks, no I/O), commit: one ``abatch`` each."""
        async with self._alocked():
            ns = self._ns(bank_id)
            read = await self._abatch_unlocked(_LangGraphSlotTx.reads(ns, sid))
            tx = _LangGraphSlotTx(ns, sid, *read)
            result = body(tx)
            writes = tx.writes()
            if writes:
                await self._abatch_unlocked(writes)
            return result

    def close(self) -> None:
        """Close what :meth:`from_url` opened (a caller's store stays open)."""
        closers, self._closers = self._closers, []
        for c in closers:
            c.close()
