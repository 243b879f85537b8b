"""The bank's async methods: the same semantics as the sync ones on every backend, and an event
loop that keeps running while a bank call waits."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from langgraph.store.base import Op, Result
from langgraph.store.base.batch import AsyncBatchedBaseStore
from langgraph.store.memory import InMemoryStore

from genmem.errors import (
    BankNotFound,
    InvalidSID,
    InvalidUpdate,
    ReadOnlyBank,
    SlotEmpty,
    SlotOccupied,
    VersionConflict,
)
from genmem.memory.bank import Bank
from genmem.memory.gate import WriteGate
from genmem.memory.langgraph_store import LangGraphBankStore
from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.memory.store import BankStore
from tests.conftest import TEST_HASH

A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
A_SIB = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_2>"
B = "<SID_L1_40><SID_L2_15><SID_L3_0><SID_L4_7>"
LESSON = "Check the units of every quantity before adding them together."
T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    """Run one coroutine on a fresh event loop."""

    async def main() -> T:
        return await coro

    return asyncio.run(main())


def _state(bank: Bank) -> tuple:
    return (
        [e.model_dump() for e in bank.entries()],
        [v.model_dump() for v in bank.store.all_versions(bank.bank_id)],
        [e.model_dump() for e in bank.events()],
    )


async def _reads_and_writes(bank: Bank) -> None:
    """Every async method once, each checked against its sync twin."""
    r = await bank.ainsert(A, "check units first", actor="async", metadata={"n": 1})
    assert (r.op, r.outcome, r.version_after, r.seq) == ("insert", "inserted", 1, 1)
    assert await bank.aget(A) == bank.get(A)
    assert (await bank.aget(A)).actor == "async"
    assert await bank.aget(B) is None
    r = await bank.arevise(A, "check units, then add", expected_version=1)
    assert (r.outcome, r.version_before, r.version_after) == ("revised", 1, 2)
    r = await bank.aapply({"op": "revise", "sid": A, "payload": "check units, then add"})
    assert r.outcome == "retained"
    r = await bank.aapply({"op": "insert", "sid": A_SIB, "payload": "a sibling lesson"})
    assert r.outcome == "inserted"
    assert await bank.alookup([A, B], k=2) == bank.lookup([A, B], k=2)
    (near,) = await bank.alookup(["<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_5>"], k=5)
    assert not near.exact and [h.sid for h in near.hits] == [A, A_SIB]
    assert await bank.aentries("<SID_L1_3>") == bank.entries("<SID_L1_3>")
    assert await bank.ahistory(A) == bank.history(A)
    assert await bank.aevents(1, 2) == bank.events(1, 2)
    r = await bank.arevise(A, "")
    assert r.outcome == "deleted" and await bank.aget(A) is None


def _check_reads_and_writes(bank: Bank) -> None:
    assert [e.outcome for e in bank.events()] == [
        "inserted",
        "revised",
        "retained",
        "inserted",
        "deleted",
    ]
    assert bank.check() == []


def test_async_reads_and_writes_match_the_sync_ones(bank: Bank) -> None:
    run(_reads_and_writes(bank))
    _check_reads_and_writes(bank)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda b: b.ainsert(A, "taken"), SlotOccupied),
        (lambda b: b.arevise(B, "nothing there"), SlotEmpty),
        (lambda b: b.arevise(A, "stale", expected_version=7), VersionConflict),
        (lambda b: b.ainsert("<SID_L1_99>", "bad address"), InvalidSID),
        (lambda b: b.alookup([A, "not an sid"]), InvalidSID),
        (lambda b: b.alookup([A], k=0), InvalidUpdate),
        (lambda b: b.aapply({"op": "move", "sid": A, "payload": "x"}), InvalidUpdate),
        (
            lambda b: b.aapply({"op": "insert", "sid": B, "payload": "x", "expected_version": 1}),
            InvalidUpdate,
        ),
        (lambda b: b.ainsert(B, "   "), InvalidUpdate),
    ],
)
def test_bad_async_calls_raise_the_sync_errors_and_change_nothing(
    bank: Bank, call: Any, error: type[Exception]
) -> None:
    bank.insert(A, "one")
    before = _state(bank)
    with pytest.raises(error):
        run(call(bank))
    assert _state(bank) == before


def test_async_writes_pass_the_write_gate(bank: Bank) -> None:
    gate = WriteGate()
    result = run(bank.ainsert(A, "7 7 7 7 7 7 7 7 7 7 7 7", gate=gate))
    assert (result.outcome, result.reason) == ("rejected", "symbols")
    assert bank.get(A) is None and bank.events()[-1].reason == "symbols"
    assert run(bank.ainsert(A, LESSON, gate=gate)).outcome == "inserted"


def test_a_snapshot_refuses_async_writes(bank: Bank) -> None:
    bank.insert(A, "one")
    snap = bank.snapshot("s1")
    with pytest.raises(ReadOnlyBank):
        run(snap.arevise(A, "two"))
    assert run(snap.aget(A)).payload == "one"


def test_abank_opens_a_bank_or_names_the_ones_there(store: BankStore) -> None:
    store.create_bank("here", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    assert run(store.abank("here")).bank_id == "here"
    with pytest.raises(BankNotFound, match="'here'"):
        run(store.abank("elsewhere"))


N_WRITERS = 12


async def _async_and_thread_writers(bank: Bank, async_bank: Bank) -> None:
    """N threads revise A through ``bank`` while N coroutines revise it through ``async_bank``."""

    def thread_writer(i: int) -> None:
        bank.revise(A, f"thread lesson number {i}", actor="thread")

    threads = [threading.Thread(target=thread_writer, args=(i,)) for i in range(N_WRITERS)]
    for t in threads:
        t.start()
    writes = [async_bank.arevise(A, f"async lesson {i}", actor="async") for i in range(N_WRITERS)]
    await asyncio.gather(*writes)
    for t in threads:
        t.join()


def test_async_and_thread_writers_lose_no_update(bank: Bank) -> None:
    bank.insert(A, "v1")
    run(_async_and_thread_writers(bank, bank))
    _check_no_update_lost(bank)


def _check_no_update_lost(bank: Bank) -> None:
    n = N_WRITERS
    history = bank.history(A)
    assert [v.version for v in history] == list(range(1, 2 * n + 2))
    assert sorted(v.actor for v in history[1:]) == ["async"] * n + ["thread"] * n
    seqs = [e.seq for e in bank.events()]
    assert seqs == sorted(set(seqs)) and len(seqs) == 2 * n + 1
    assert bank.check() == []


# -- the event loop keeps running while a bank call waits -------------------------------------


async def ticks_during(work: Awaitable[T], period: float = 0.01) -> tuple[T, int, float]:
    """Await ``work`` beside a heartbeat coroutine; what it returned, the ticks, the seconds."""
    ticks = 0
    done = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(period)

    beat = asyncio.create_task(heartbeat())
    t0 = time.monotonic()
    try:
        result = await work
    finally:
        done.set()
        await beat
    return result, ticks, time.monotonic() - t0


def test_sqlite_write_waiting_on_a_lock_leaves_the_loop_running(tmp_path: Path) -> None:
    """A real wait: another connection holds SQLite's write lock for half a second."""
    store = SQLiteBankStore(tmp_path / "bank.db")
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    holder = sqlite3.connect(tmp_path / "bank.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, holder.rollback)
    release.start()
    try:
        result, ticks, seconds = run(ticks_during(bank.ainsert(A, LESSON)))
    finally:
        release.join()
        holder.close()
    assert result.outcome == "inserted" and seconds >= 0.45
    assert ticks >= 20, f"the heartbeat ticked {ticks} times in {seconds:.2f} s"
    store.close()


class _SlowStore(InMemoryStore):
    """An in-memory store whose async batches take a while, like a store across a network."""

    delay_s = 0.25

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        await asyncio.sleep(self.delay_s)
        return self.batch(ops)


def test_langgraph_store_lookup_awaits_the_store_without_a_thread() -> None:
    store = LangGraphBankStore(_SlowStore())
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(A, LESSON)
    before = threading.active_count()
    (result,), ticks, seconds = run(ticks_during(bank.alookup([A])))
    assert result.exact and result.hits[0].payload == LESSON
    assert seconds >= 0.2 and ticks >= 10, f"{ticks} ticks in {seconds:.2f} s"
    assert threading.active_count() == before  # abatch on the loop, no worker thread


class _SlowGate(WriteGate):
    """A gate that takes its time: a sync writer holds the store's lock while it runs."""

    def check(self, text: str, previous: str | None = None) -> Any:
        time.sleep(0.4)
        return super().check(text, previous)


def test_async_write_waits_for_a_thread_writer_without_blocking_the_loop() -> None:
    store = LangGraphBankStore(InMemoryStore())
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    writer = threading.Thread(target=bank.insert, args=(A, LESSON), kwargs={"gate": _SlowGate()})

    async def scenario() -> Any:
        writer.start()
        await asyncio.sleep(0.05)  # the thread now holds the store inside its write
        return await ticks_during(bank.arevise(A, "Add only quantities in the same unit."))

    result, ticks, seconds = run(scenario())
    writer.join()
    assert (result.outcome, result.version_before) == ("revised", 1)
    assert seconds >= 0.25 and ticks >= 10, f"{ticks} ticks in {seconds:.2f} s"


class ServerLikeStore(AsyncBatchedBaseStore):
    """Shaped like the LangGraph server's store: async, bound to the loop it was made on (make it
    inside a coroutine). A sync call on that loop raises; one from a worker thread is forwarded
    to the loop. ``delay_s``: each batch takes that long, as across a network."""

    def __init__(self, inner: InMemoryStore | None = None, delay_s: float = 0.0) -> None:
        super().__init__()
        self.inner = InMemoryStore() if inner is None else inner
        self.delay_s = delay_s
        self.calls = 0

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return self.inner.batch(ops)


def test_a_store_that_refuses_sync_calls_on_its_loop_serves_the_async_api() -> None:
    async def scenario() -> None:
        raw = ServerLikeStore()
        with pytest.raises(asyncio.InvalidStateError):
            LangGraphBankStore(raw).get_info("b")  # what a sync call on the loop meets
        store = LangGraphBankStore(raw)
        bank = await asyncio.to_thread(
            store.create_bank, "b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
        )
        bank = await store.abank("b")
        assert (await bank.ainsert(A, LESSON)).outcome == "inserted"
        (hit,) = await bank.alookup([A])
        assert hit.exact and hit.hits[0].payload == LESSON
        assert [e.outcome for e in await bank.aevents()] == ["inserted"]

    run(scenario())


# -- PostgreSQL on a caller's psycopg AsyncConnectionPool ----------------------------------


@pytest.mark.integration
def test_postgres_async_pool_serves_the_bank_on_the_loop() -> None:
    """The same async calls on psycopg's async pool, beside sync writers on the store's own pool,
    and a write that waits on a lock another session holds while the loop keeps running."""
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    import genmem.memory._sql as S
    from genmem.memory.postgres_store import PostgresBankStore
    from tests import _postgres

    conninfo = _postgres.fresh_schema()
    sync_store = PostgresBankStore(conninfo)
    sync_store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)

    async def scenario() -> None:
        pool = AsyncConnectionPool(conninfo, kwargs={"autocommit": True}, max_size=4, open=False)
        async with pool:
            store = PostgresBankStore(conninfo, async_pool=pool)
            try:
                assert store.native_async
                bank = await store.abank("default")
                await _reads_and_writes(bank)
                _check_reads_and_writes(bank)
                await bank.ainsert(B, "v1")
                # another session holds the store lock: the write waits, the loop does not
                holder = psycopg.connect(conninfo)
                holder.execute(S.PG_STORE_LOCK.replace("?", "%s"))
                release = threading.Timer(0.5, holder.rollback)
                release.start()
                result, ticks, seconds = await ticks_during(bank.arevise(B, LESSON))
                release.join()
                holder.close()
                assert result.outcome == "revised" and seconds >= 0.45 and ticks >= 20
                with pytest.raises(SlotOccupied):
                    await bank.ainsert(B, "taken")
            finally:
                store.close()

    run(scenario())
    bank = sync_store.bank("default")
    assert bank.get(B).payload == LESSON and bank.check() == []
    sync_store.close()


@pytest.mark.integration
def test_postgres_async_pool_and_threads_lose_no_update() -> None:
    from psycopg_pool import AsyncConnectionPool

    from genmem.memory.postgres_store import PostgresBankStore
    from tests import _postgres

    conninfo = _postgres.fresh_schema()
    sync_store = PostgresBankStore(conninfo)
    bank = sync_store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(A, "v1")

    async def scenario() -> None:
        pool = AsyncConnectionPool(conninfo, kwargs={"autocommit": True}, max_size=4, open=False)
        async with pool:
            store = PostgresBankStore(conninfo, async_pool=pool)
            try:
                await _async_and_thread_writers(bank, await store.abank("default"))
            finally:
                store.close()

    run(scenario())
    _check_no_update_lost(bank)
    sync_store.close()
