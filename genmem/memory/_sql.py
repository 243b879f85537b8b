"""SQL shared by the SQLite and PostgreSQL backends: schema migrations and queries.

Pure query building, no I/O. Queries use ``?`` placeholders; :func:`q` rewrites them for
psycopg. Tables:

* ``genmem_banks``: one row per bank, its :class:`BankInfo` as JSON.
* ``genmem_versions``: every version ever written, keyed by ``(bank_id, skey, version)``.
  ``skey`` is :func:`genmem.memory.store.sort_key` of the SID: zero-padded codes, so byte
  order is code order and a prefix query is a range scan. Keys (and bank ids) compare
  byte-wise whatever the database's collation: SQLite's default ``BINARY`` does, and on
  PostgreSQL migration 2 gives the columns ``COLLATE "C"`` (under ICU or glibc ``en_US``
  ``'00003.00001.' < '00003.~'`` is false, which emptied every prefix range).
* ``genmem_slots``: the current version of each slot and whether it is live, for lookups.
* ``genmem_events``: the append-only log; ``seq`` is store-wide and increasing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from genmem.memory.backend import sort_key
from genmem.memory.records import BankInfo, Event, Version

Dialect = Literal["sqlite", "postgres"]
Migration = str | dict[Dialect, str]
"""One schema change: a script for both dialects, or one per dialect ("" for none)."""

__all__ = [
    "EVENT_COLS",
    "MIGRATIONS",
    "VERSION_COLS",
    "Dialect",
    "Migration",
    "event_from_row",
    "event_params",
    "info_params",
    "migrations",
    "prefix_range",
    "q",
    "version_from_row",
    "version_params",
]

# Append-only: never edit a released migration, add a new one.
MIGRATIONS: list[Migration] = [
    """
    CREATE TABLE IF NOT EXISTS genmem_banks (
        bank_id TEXT PRIMARY KEY,
        info TEXT NOT NULL,
        parent TEXT,
        created_at {float} NOT NULL
    );
    CREATE TABLE IF NOT EXISTS genmem_versions (
        bank_id TEXT NOT NULL,
        skey TEXT NOT NULL,
        version INTEGER NOT NULL,
        sid TEXT NOT NULL,
        payload TEXT NOT NULL,
        deleted INTEGER NOT NULL,
        created_at {float} NOT NULL,
        actor TEXT NOT NULL,
        metadata TEXT NOT NULL,
        PRIMARY KEY (bank_id, skey, version)
    );
    CREATE TABLE IF NOT EXISTS genmem_slots (
        bank_id TEXT NOT NULL,
        skey TEXT NOT NULL,
        version INTEGER NOT NULL,
        live INTEGER NOT NULL,
        PRIMARY KEY (bank_id, skey)
    );
    CREATE INDEX IF NOT EXISTS genmem_slots_live ON genmem_slots (bank_id, live, skey);
    CREATE TABLE IF NOT EXISTS genmem_events (
        seq {serial},
        bank_id TEXT NOT NULL,
        op TEXT NOT NULL,
        outcome TEXT NOT NULL,
        sid TEXT NOT NULL,
        version_before INTEGER,
        version_after INTEGER,
        time {float} NOT NULL,
        actor TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS genmem_events_bank ON genmem_events (bank_id, seq);
    """,
    # 2: keys compare byte-wise, so prefix ranges and ORDER BY are code order on a database
    # whose default collation is not C. Rebuilds the indexes on those columns; keeps the rows.
    {
        "sqlite": "",  # BINARY, SQLite's default collation, already compares bytes
        "postgres": """
        ALTER TABLE genmem_versions ALTER COLUMN skey TYPE TEXT COLLATE "C";
        ALTER TABLE genmem_slots ALTER COLUMN skey TYPE TEXT COLLATE "C";
        ALTER TABLE genmem_banks ALTER COLUMN bank_id TYPE TEXT COLLATE "C";
        """,
    },
    # 3: the write gate's reason on a rejected event (NULL on every other event).
    "ALTER TABLE genmem_events ADD COLUMN reason TEXT",
]

_TYPES = {
    "sqlite": {"float": "REAL", "serial": "INTEGER PRIMARY KEY AUTOINCREMENT"},
    "postgres": {"float": "DOUBLE PRECISION", "serial": "BIGSERIAL PRIMARY KEY"},
}


def migrations(dialect: Dialect) -> list[list[str]]:
    """Each migration as a list of single statements for ``dialect``."""
    out = []
    for migration in MIGRATIONS:
        script = migration if isinstance(migration, str) else migration[dialect]
        text = script.format(**_TYPES[dialect])
        out.append([s.strip() for s in text.split(";") if s.strip()])
    return out


def q(sql: str, dialect: Dialect) -> str:
    """Rewrite ``?`` placeholders for the dialect's driver."""
    return sql if dialect == "sqlite" else sql.replace("?", "%s")


VERSION_COLS = "v.sid, v.version, v.payload, v.deleted, v.created_at, v.actor, v.metadata"
EVENT_COLS = "seq, op, outcome, sid, version_before, version_after, time, actor, reason"

CREATE_SCHEMA_TABLE = (
    "CREATE TABLE IF NOT EXISTS genmem_schema (version INTEGER PRIMARY KEY, applied_at {float})"
)
SCHEMA_VERSION = "SELECT COALESCE(MAX(version), 0) FROM genmem_schema"
RECORD_MIGRATION = "INSERT INTO genmem_schema (version, applied_at) VALUES (?, ?)"

GET_INFO = "SELECT info FROM genmem_banks WHERE bank_id = ?"
LIST_BANKS = "SELECT info FROM genmem_banks ORDER BY bank_id"
INSERT_BANK = "INSERT INTO genmem_banks (bank_id, info, parent, created_at) VALUES (?, ?, ?, ?)"

CURRENT = (
    f"SELECT {VERSION_COLS} FROM genmem_slots s JOIN genmem_versions v "
    "ON v.bank_id = s.bank_id AND v.skey = s.skey AND v.version = s.version "
    "WHERE s.bank_id = ? AND s.skey = ?"
)
HISTORY = (
    f"SELECT {VERSION_COLS} FROM genmem_versions v WHERE v.bank_id = ? AND v.skey = ? "
    "ORDER BY v.version"
)
LIVE = (
    f"SELECT {VERSION_COLS} FROM genmem_slots s JOIN genmem_versions v "
    "ON v.bank_id = s.bank_id AND v.skey = s.skey AND v.version = s.version "
    "WHERE s.bank_id = ? AND s.live = 1 AND s.skey >= ? AND s.skey < ? ORDER BY s.skey"
)
ALL_VERSIONS = (
    f"SELECT {VERSION_COLS} FROM genmem_versions v WHERE v.bank_id = ? ORDER BY v.skey, v.version"
)
EVENTS = f"SELECT {EVENT_COLS} FROM genmem_events WHERE bank_id = ? AND seq > ? ORDER BY seq"
COUNT_VERSIONS = "SELECT COUNT(*) FROM genmem_versions WHERE bank_id = ?"
COUNT_TOMBSTONES = "SELECT COUNT(*) FROM genmem_slots WHERE bank_id = ? AND live = 0"
COUNT_OUTCOMES = "SELECT outcome, COUNT(*) FROM genmem_events WHERE bank_id = ? GROUP BY outcome"
COUNT_REASONS = (
    "SELECT reason, COUNT(*) FROM genmem_events WHERE bank_id = ? AND outcome = 'rejected' "
    "GROUP BY reason"
)
LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM genmem_events WHERE bank_id = ?"

INSERT_VERSION = (
    "INSERT INTO genmem_versions "
    "(bank_id, skey, version, sid, payload, deleted, created_at, actor, metadata) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPSERT_SLOT = (
    "INSERT INTO genmem_slots (bank_id, skey, version, live) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (bank_id, skey) DO UPDATE SET version = excluded.version, live = excluded.live"
)
INSERT_EVENT = (
    "INSERT INTO genmem_events "
    "(bank_id, op, outcome, sid, version_before, version_after, time, actor, reason) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq"
)
# Snapshots: the full history of every live slot, and the slots themselves.
SNAPSHOT_VERSIONS = (
    "INSERT INTO genmem_versions "
    "(bank_id, skey, version, sid, payload, deleted, created_at, actor, metadata) "
    "SELECT ?, v.skey, v.version, v.sid, v.payload, v.deleted, v.created_at, v.actor, "
    "v.metadata FROM genmem_slots s JOIN genmem_versions v "
    "ON v.bank_id = s.bank_id AND v.skey = s.skey WHERE s.bank_id = ? AND s.live = 1"
)
SNAPSHOT_SLOTS = (
    "INSERT INTO genmem_slots (bank_id, skey, version, live) "
    "SELECT ?, skey, version, live FROM genmem_slots WHERE bank_id = ? AND live = 1"
)


def prefix_range(prefix: Sequence[int]) -> tuple[str, str]:
    """``[lo, hi)`` bounds on ``skey`` that select exactly the SIDs under ``prefix``."""
    lo = sort_key(prefix)
    return lo, lo + "~"  # byte-wise, '~' sorts after the digits and '.' used in keys


def version_from_row(row: Sequence[Any]) -> Version:
    """A :class:`Version` from a row of ``VERSION_COLS``."""
    sid, version, payload, deleted, created_at, actor, metadata = row
    return Version(
        sid=sid,
        version=int(version),
        payload=payload,
        deleted=bool(deleted),
        created_at=float(created_at),
        actor=actor,
        metadata=json.loads(metadata) if metadata else {},
    )


def version_params(bank_id: str, skey: str, v: Version) -> tuple[Any, ...]:
    """Parameters of ``INSERT_VERSION`` for one version."""
    return (
        bank_id,
        skey,
        v.version,
        v.sid,
        v.payload,
        int(v.deleted),
        v.created_at,
        v.actor,
        json.dumps(v.metadata, ensure_ascii=False),
    )


def event_from_row(row: Sequence[Any]) -> Event:
    """An :class:`Event` from a row of ``EVENT_COLS``."""
    seq, op, outcome, sid, before, after, at, actor, reason = row
    return Event(
        seq=int(seq),
        op=op,
        outcome=outcome,
        sid=sid,
        version_before=before,
        version_after=after,
        time=float(at),
        actor=actor,
        reason=reason,
    )


def event_params(bank_id: str, e: Event) -> tuple[Any, ...]:
    """Parameters of ``INSERT_EVENT`` for one event (its ``seq`` is the database's)."""
    return (
        bank_id,
        e.op,
        e.outcome,
        e.sid,
        e.version_before,
        e.version_after,
        e.time,
        e.actor,
        e.reason,
    )


def info_params(info: BankInfo) -> tuple[Any, ...]:
    """Parameters of ``INSERT_BANK``."""
    return (info.bank_id, info.model_dump_json(), info.parent, info.created_at)


def live_query(bank_id: str, prefix: Sequence[int], limit: int | None) -> tuple[str, list[Any]]:
    """``LIVE`` under ``prefix`` (at most ``limit`` rows) and its parameters."""
    lo, hi = prefix_range(prefix)
    sql, params = LIVE, [bank_id, lo, hi]
    if limit is not None:
        sql, params = sql + " LIMIT ?", [*params, int(limit)]
    return sql, params


def events_query(bank_id: str, after_seq: int, limit: int | None) -> tuple[str, list[Any]]:
    """``EVENTS`` after ``after_seq`` (at most ``limit`` rows) and its parameters."""
    sql, params = EVENTS, [bank_id, int(after_seq)]
    if limit is not None:
        sql, params = sql + " LIMIT ?", [*params, int(limit)]
    return sql, params


# PostgreSQL's locks (see genmem.memory.postgres_store). Every key is hashed with the schema so
# that stores in other schemas never contend.
PG_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', ?, true)"
PG_STORE_LOCK_SHARED = (
    "SELECT pg_advisory_xact_lock_shared(hashtextextended('genmem|' || current_schema(), 0))"
)
PG_STORE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('genmem|' || current_schema(), 0))"
PG_KEY_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtextextended('genmem|' || current_schema() || '|' || ?, 0))"
)
