"""The primitives a bank lives on, and the key and id rules every backend shares.

A :class:`StoreBackend` holds many banks, isolated by bank id, through a handful of primitives:
a registry of banks, reads by slot and by prefix, the operation log, and one atomic write per
slot (:meth:`StoreBackend.slot_tx`). The semantics of insert / revise / lookup live once, in
:class:`genmem.memory.bank.Bank`, on top of these primitives, so every backend behaves the same
and runs the same test-suite. Backends subclass :class:`genmem.memory.store.BankStore`, which
adds opening and creating banks; this module imports no bank, so ``bank`` depends on it and
``store`` on both.

Every read primitive a bank's async methods need has an ``a``-prefixed twin. By default the
twin runs the sync primitive in a worker thread (``asyncio.to_thread``); a backend with async
I/O of its own sets :attr:`StoreBackend.native_async` and overrides them.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, Self, TypeVar

from genmem.errors import InvalidUpdate
from genmem.memory.records import BankInfo, Event, Op, Outcome, Version
from genmem.memory.sid import SID, SIDSpec

__all__ = [
    "BANK_ID_RE",
    "RetryableWrite",
    "SlotTx",
    "StoreBackend",
    "check_bank_id",
    "check_new_bank",
    "sort_key",
]

BANK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-@]{0,127}")
"""Bank ids: letters, digits, ``_ . - @``; ``@`` separates a snapshot name from its parent."""

T = TypeVar("T")
_KEY_WIDTH = 5  # codes are written zero-padded so that string order equals code order
_MAX_SIZE = 10**_KEY_WIDTH


class RetryableWrite(Exception):
    """A backend's transient write failure (lock held, serialisation); the bank retries."""


def sort_key(codes: Sequence[int]) -> str:
    """A string whose order is code order and whose prefixes are the SID's prefixes."""
    return "".join(f"{c:0{_KEY_WIDTH}d}." for c in codes)


def check_bank_id(bank_id: str) -> str:
    """Validate a bank id (raises ValueError naming the rule)."""
    if not isinstance(bank_id, str) or not BANK_ID_RE.fullmatch(bank_id):
        raise InvalidUpdate(
            f"bank id {bank_id!r} is not allowed; use 1-128 letters, digits, '_', '.', '-' "
            "('@' only for snapshots), starting with a letter or digit"
        )
    return bank_id


def check_new_bank(bank_id: str, spec: SIDSpec) -> None:
    """Refuse an id or an address space that a new, writable bank may not have."""
    check_bank_id(bank_id)
    if "@" in bank_id:
        raise InvalidUpdate(
            f"bank id {bank_id!r}: '@' is reserved for snapshots; pick an id without it"
        )
    if any(n >= _MAX_SIZE for n in spec.sizes):
        raise InvalidUpdate(f"level sizes {spec.sizes} exceed the bank limit {_MAX_SIZE - 1}")


class SlotTx(Protocol):
    """An open, exclusive transaction on one slot of one bank."""

    current: Version | None
    """The slot's latest version (a tombstone when the entry was deleted), None if never used."""

    def add_version(self, version: Version) -> None:
        """Store a new version (its number is ``current.version + 1`` or 1)."""

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
        """Append one event to the bank's log (``reason``: a rejection's) and return its seq."""


class StoreBackend(ABC):
    """A place that holds banks: SQLite file, PostgreSQL database, or a LangGraph BaseStore."""

    url: str = ""
    """Where the store lives, for messages and for reopening it."""

    native_async: bool = False
    """True when the ``a``-prefixed primitives do async I/O of their own. When False, a bank's
    async methods run their sync twin whole in one worker thread instead of calling them."""

    # -- registry -------------------------------------------------------------------------

    @abstractmethod
    def setup(self) -> None:
        """Create or migrate the schema; idempotent."""

    @abstractmethod
    def get_info(self, bank_id: str) -> BankInfo | None:
        """The bank's identity, or None if no such bank."""

    @abstractmethod
    def list_banks(self) -> list[BankInfo]:
        """Every bank in the store, by id."""

    @abstractmethod
    def _create(self, info: BankInfo, versions: Sequence[Version], events: Sequence[Event]) -> None:
        """Atomically create a bank with the given content; raise BankExists if it exists."""

    # -- reads ----------------------------------------------------------------------------

    @abstractmethod
    def current(self, bank_id: str, sid: SID) -> Version | None:
        """Latest version at a slot (tombstones included), None if never written."""

    @abstractmethod
    def history(self, bank_id: str, sid: SID) -> list[Version]:
        """Every version ever stored at a slot, oldest first."""

    @abstractmethod
    def live(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """Live entries whose SID starts with ``prefix`` (codes), in code order, up to ``limit``."""

    @abstractmethod
    def events(self, bank_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """The operation log after ``after_seq``, oldest first."""

    @abstractmethod
    def all_versions(self, bank_id: str) -> Iterator[Version]:
        """Every stored version, in code order then version order."""

    @abstractmethod
    def counts(self, bank_id: str) -> dict[str, object]:
        """``versions``, ``tombstones``, ``events``, ``outcomes`` and ``rejections`` (dicts)."""

    # -- writes ---------------------------------------------------------------------------

    @abstractmethod
    def slot_tx(self, bank_id: str, sid: SID) -> AbstractContextManager[SlotTx]:
        """Open an exclusive, atomic transaction on one slot; commit on normal exit."""

    @abstractmethod
    def _snapshot(self, source: str, info: BankInfo) -> None:
        """Atomically copy the live entries of ``source`` into a new read-only bank ``info``."""

    def run_in_slot(self, bank_id: str, sid: SID, body: Callable[[SlotTx], T]) -> T:
        """Run ``body`` inside :meth:`slot_tx` and return what it returns."""
        with self.slot_tx(bank_id, sid) as tx:
            return body(tx)

    # -- async twins: a worker thread each unless a backend overrides them ----------------

    async def aget_info(self, bank_id: str) -> BankInfo | None:
        """:meth:`get_info` for async code."""
        return await asyncio.to_thread(self.get_info, bank_id)

    async def alist_banks(self) -> list[BankInfo]:
        """:meth:`list_banks` for async code."""
        return await asyncio.to_thread(self.list_banks)

    async def acurrent(self, bank_id: str, sid: SID) -> Version | None:
        """:meth:`current` for async code."""
        return await asyncio.to_thread(self.current, bank_id, sid)

    async def ahistory(self, bank_id: str, sid: SID) -> list[Version]:
        """:meth:`history` for async code."""
        return await asyncio.to_thread(self.history, bank_id, sid)

    async def alive(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """:meth:`live` for async code."""
        return await asyncio.to_thread(self.live, bank_id, prefix, limit)

    async def aevents(
        self, bank_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        """:meth:`events` for async code."""
        return await asyncio.to_thread(self.events, bank_id, after_seq, limit)

    async def arun_in_slot(self, bank_id: str, sid: SID, body: Callable[[SlotTx], T]) -> T:
        """:meth:`run_in_slot` for async code: the whole transaction in one worker thread."""
        return await asyncio.to_thread(self.run_in_slot, bank_id, sid, body)

    def storage_problems(self) -> list[str]:
        """Backend-level integrity findings (e.g. SQLite's quick_check); none by default."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook, most stores hold nothing to close
        """Release connections."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
