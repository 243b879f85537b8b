"""The part of the SQL backends that does not depend on the driver.

Subclasses supply a read cursor, an exclusive write transaction per slot, and the dialect; this
class turns the shared SQL of :mod:`genmem.memory._sql` into the :class:`BankStore` primitives.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import genmem.memory._sql as S
from genmem.errors import BankExists
from genmem.memory.records import BankInfo, Event, Op, Outcome, Version
from genmem.memory.sid import SID, SIDSpec
from genmem.memory.store import BankStore, sort_key

__all__ = ["SQLBankStore"]


class _SQLSlotTx:
    """The :class:`SlotTx` of SQL backends: a cursor inside an open write transaction."""

    def __init__(self, store: SQLBankStore, cur: Any, bank_id: str, sid: SID) -> None:
        self._store, self._cur, self._bank_id = store, cur, bank_id
        self._skey = sort_key(sid.codes)
        self._sid = str(sid)
        row = store._x(cur, S.CURRENT, (bank_id, self._skey)).fetchone()
        self.current: Version | None = None if row is None else S.version_from_row(row)

    def add_version(self, version: Version) -> None:
        self._store._x(
            self._cur, S.INSERT_VERSION, S.version_params(self._bank_id, self._skey, version)
        )
        self._store._x(
            self._cur,
            S.UPSERT_SLOT,
            (self._bank_id, self._skey, version.version, int(not version.deleted)),
        )
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
        params = (
            self._bank_id,
            op,
            outcome,
            self._sid,
            version_before,
            version_after,
            at,
            actor,
            reason,
        )
        self._store._lock_log(self._cur, self._bank_id)
        return int(self._store._x(self._cur, S.INSERT_EVENT, params).fetchone()[0])


class SQLBankStore(BankStore):
    """Shared logic of :class:`SQLiteBankStore` and :class:`PostgresBankStore`."""

    dialect: S.Dialect

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]:
        """A cursor for reads."""

    @abstractmethod
    def _transaction(self, lock_key: str | None) -> AbstractContextManager[Any]:
        """A cursor inside one write transaction, exclusive for ``lock_key`` (None: whole store).

        Commits on normal exit, rolls back on error, and raises ``RetryableWrite`` for
        transient contention so the bank can retry.
        """

    def _x(self, cur: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        cur.execute(S.q(sql, self.dialect), tuple(params))
        return cur

    def _lock_log(self, cur: Any, bank_id: str) -> None:
        """Before an event is numbered: backends with parallel writers keep seq in commit order."""

    # -- schema -----------------------------------------------------------------------------

    def setup(self) -> None:
        """Apply pending migrations (idempotent, safe to run from several processes)."""
        with self._transaction(None) as cur:
            float_type = "REAL" if self.dialect == "sqlite" else "DOUBLE PRECISION"
            self._x(cur, S.CREATE_SCHEMA_TABLE.format(float=float_type))
            done = int(self._x(cur, S.SCHEMA_VERSION).fetchone()[0])
            for number, statements in enumerate(S.migrations(self.dialect), 1):
                if number <= done:
                    continue
                for stmt in statements:
                    self._x(cur, stmt)
                self._x(cur, S.RECORD_MIGRATION, (number, time.time()))

    # -- registry ---------------------------------------------------------------------------

    def get_info(self, bank_id: str) -> BankInfo | None:
        """The bank's identity, or None."""
        with self._read() as cur:
            row = self._x(cur, S.GET_INFO, (bank_id,)).fetchone()
        return None if row is None else BankInfo.model_validate_json(row[0])

    def list_banks(self) -> list[BankInfo]:
        """Every bank in the store."""
        with self._read() as cur:
            rows = self._x(cur, S.LIST_BANKS).fetchall()
        return [BankInfo.model_validate_json(r[0]) for r in rows]

    def _create(self, info: BankInfo, versions: Sequence[Version], events: Sequence[Event]) -> None:
        spec = SIDSpec(tuple(info.sizes))
        with self._transaction(None) as cur:
            if self._x(cur, S.GET_INFO, (info.bank_id,)).fetchone() is not None:
                raise BankExists(
                    f"bank {info.bank_id!r} already exists in {self.url}", bank_id=info.bank_id
                )
            self._x(cur, S.INSERT_BANK, S.info_params(info))
            latest: dict[str, Version] = {}
            for v in versions:
                skey = sort_key(spec.parse(v.sid).codes)
                self._x(cur, S.INSERT_VERSION, S.version_params(info.bank_id, skey, v))
                if skey not in latest or v.version > latest[skey].version:
                    latest[skey] = v
            for skey, v in latest.items():
                self._x(cur, S.UPSERT_SLOT, (info.bank_id, skey, v.version, int(not v.deleted)))
            for e in events:
                self._x(cur, S.INSERT_EVENT, S.event_params(info.bank_id, e)).fetchone()

    def _snapshot(self, source: str, info: BankInfo) -> None:
        with self._transaction(None) as cur:
            if self._x(cur, S.GET_INFO, (info.bank_id,)).fetchone() is not None:
                raise BankExists(
                    f"snapshot {info.bank_id!r} already exists; pick another name",
                    bank_id=info.bank_id,
                )
            last = int(self._x(cur, S.LAST_SEQ, (source,)).fetchone()[0])
            info = info.model_copy(update={"snapshot_seq": last})
            self._x(cur, S.INSERT_BANK, S.info_params(info))
            self._x(cur, S.SNAPSHOT_VERSIONS, (info.bank_id, source))
            self._x(cur, S.SNAPSHOT_SLOTS, (info.bank_id, source))

    # -- reads ------------------------------------------------------------------------------

    def current(self, bank_id: str, sid: SID) -> Version | None:
        """Latest version of a slot."""
        with self._read() as cur:
            row = self._x(cur, S.CURRENT, (bank_id, sort_key(sid.codes))).fetchone()
        return None if row is None else S.version_from_row(row)

    def history(self, bank_id: str, sid: SID) -> list[Version]:
        """Every version of a slot."""
        with self._read() as cur:
            rows = self._x(cur, S.HISTORY, (bank_id, sort_key(sid.codes))).fetchall()
        return [S.version_from_row(r) for r in rows]

    def live(self, bank_id: str, prefix: Sequence[int], limit: int | None) -> list[Version]:
        """Live entries under a prefix, in code order."""
        sql, params = S.live_query(bank_id, prefix, limit)
        with self._read() as cur:
            rows = self._x(cur, sql, params).fetchall()
        return [S.version_from_row(r) for r in rows]

    def events(self, bank_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """The log after ``after_seq``."""
        sql, params = S.events_query(bank_id, after_seq, limit)
        with self._read() as cur:
            rows = self._x(cur, sql, params).fetchall()
        return [S.event_from_row(r) for r in rows]

    def all_versions(self, bank_id: str) -> Iterator[Version]:
        """Every version, in code then version order."""
        with self._read() as cur:
            rows = self._x(cur, S.ALL_VERSIONS, (bank_id,)).fetchall()
        return iter([S.version_from_row(r) for r in rows])

    def counts(self, bank_id: str) -> dict[str, object]:
        """Version, tombstone, event and per-outcome counts."""
        with self._read() as cur:
            versions = int(self._x(cur, S.COUNT_VERSIONS, (bank_id,)).fetchone()[0])
            tombstones = int(self._x(cur, S.COUNT_TOMBSTONES, (bank_id,)).fetchone()[0])
            outcomes = {o: int(n) for o, n in self._x(cur, S.COUNT_OUTCOMES, (bank_id,)).fetchall()}
            reasons = {r: int(n) for r, n in self._x(cur, S.COUNT_REASONS, (bank_id,)).fetchall()}
        return {
            "versions": versions,
            "tombstones": tombstones,
            "events": sum(outcomes.values()),
            "outcomes": outcomes,
            "rejections": reasons,
        }

    # -- writes -----------------------------------------------------------------------------

    @contextmanager
    def slot_tx(self, bank_id: str, sid: SID) -> Iterator[_SQLSlotTx]:
        """An exclusive transaction on one slot."""
        with self._transaction(f"{bank_id}|{sort_key(sid.codes)}") as cur:
            yield _SQLSlotTx(self, cur, bank_id, sid)
