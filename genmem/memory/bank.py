"""The SID-keyed bank: one codebook hash plus entries keyed by SID, with full history.

Semantics (the same on every backend):

* ``insert(sid, payload)`` fills an empty slot (never used, or freed by a deletion); a
  non-empty payload is required; an occupied slot raises :class:`SlotOccupied`.
* ``revise(sid, payload)`` needs an occupied slot (else :class:`SlotEmpty`). The same text is a
  *retention*: logged, no new version. New text is a new version. Empty (or blank) text is a
  *deletion*: a tombstone version that frees the slot. ``expected_version`` turns the write into
  a compare-and-set (:class:`VersionConflict`).
* Nothing is lost: every version stays in ``history``; every write, retentions included, is an
  event in the append-only log. An update never moves an entry to another SID.
* ``lookup(sids, k)``: an occupied leaf answers with itself (``match_depth == L``); otherwise the
  live entries that share the longest prefix with the request (depth ``>= min_depth``), in code
  order, at most ``k``.

Bad input raises a typed :class:`~genmem.errors.GenMemError` before anything is written.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from genmem.errors import (
    BankExists,
    CodebookMismatch,
    IntegrityError,
    InvalidUpdate,
    ReadOnlyBank,
    SlotEmpty,
    SlotOccupied,
    VersionConflict,
)
from genmem.memory._bank_async import (
    AsyncBankMethods,
    Retry,
    check_update,
    exact_result,
    first_error,
    live_entry,
    near_result,
)
from genmem.memory.backend import (
    BANK_ID_RE,
    RetryableWrite,
    SlotTx,
    StoreBackend,
    check_new_bank,
    sort_key,
)
from genmem.memory.gate import GateVerdict, WriteGate
from genmem.memory.records import (
    ApplyResult,
    BankInfo,
    BankStats,
    Entry,
    Event,
    LookupResult,
    Update,
    Version,
)
from genmem.memory.sid import SID, SIDSpec, coerce_sid

if TYPE_CHECKING:
    from genmem.memory.rqkmeans import Codebooks

__all__ = ["MAX_PAYLOAD_CHARS", "Bank", "import_bank"]

MAX_PAYLOAD_CHARS = 100_000
"""Longest payload a bank accepts; an experience is a paragraph, not a document."""

_HASH_RE = re.compile(r"[0-9a-f]{64}")  # Codebooks.hash: a sha256 hex digest
T = TypeVar("T")


class Bank(AsyncBankMethods):
    """One bank inside a store; obtain it with ``store.bank(id)`` or ``open_bank``.

    Every read and write has an async twin (``aget``, ``alookup``, ``ainsert``, ``arevise``,
    ``aapply``, ...; :mod:`genmem.memory._bank_async`) that never blocks the event loop.
    """

    def __init__(self, store: StoreBackend, info: BankInfo) -> None:
        self.store = store
        self.info = info
        self.spec = SIDSpec(tuple(info.sizes))

    # -- identity ---------------------------------------------------------------------------

    @property
    def bank_id(self) -> str:
        """The bank's id inside its store."""
        return self.info.bank_id

    @property
    def codebook_hash(self) -> str:
        """Content hash of the codebooks the bank was built with."""
        return self.info.codebook_hash

    @property
    def read_only(self) -> bool:
        """True for snapshots."""
        return self.info.read_only

    def __repr__(self) -> str:
        ro = ", read_only" if self.read_only else ""
        return f"Bank({self.bank_id!r} in {self.store.url!r}, spec={self.spec}{ro})"

    def sid(self, value: SID | str | Sequence[int]) -> SID:
        """Parse or check an SID against this bank's spec (InvalidSID on any mismatch)."""
        return coerce_sid(value, self.spec)

    def check_codebook_hash(self, codebook_hash: str) -> None:
        """Refuse codebooks other than the ones the bank was built with."""
        if codebook_hash != self.codebook_hash:
            raise CodebookMismatch(
                f"bank {self.bank_id!r} was built with codebooks {self.codebook_hash[:12]}... "
                f"but codebooks {codebook_hash[:12]}... were given; codebooks are frozen once a "
                "bank exists: load the bank's own codebook directory or build a new bank",
                expected=self.codebook_hash,
                got=codebook_hash,
            )

    def check_codebook(self, codebooks: Codebooks) -> None:
        """Refuse codebooks whose hash or spec differs from the bank's."""
        self.check_codebook_hash(codebooks.hash)

    # -- reads ------------------------------------------------------------------------------

    def get(self, sid: SID | str) -> Entry | None:
        """The live entry at ``sid``, or None for an empty slot."""
        return live_entry(self.store.current(self.bank_id, self.sid(sid)))

    def lookup(
        self, sids: Iterable[SID | str], k: int = 5, *, min_depth: int = 1
    ) -> list[LookupResult]:
        """Answer each SID with its exact entry or its nearest occupied relatives (read-only)."""
        parsed = self._lookup_args(sids, k, min_depth)
        return [self._lookup_one(s, k, min_depth) for s in parsed]

    def _lookup_args(self, sids: Iterable[SID | str], k: int, min_depth: int) -> list[SID]:
        """The parsed SIDs of a lookup, after checking ``k`` and ``min_depth``."""
        if not isinstance(k, int) or k < 1:
            raise InvalidUpdate(f"lookup k must be an int >= 1, got {k!r}")
        if not 0 <= min_depth <= self.spec.levels:
            raise InvalidUpdate(f"min_depth must be in 0..{self.spec.levels}, got {min_depth}")
        return [self.sid(s) for s in sids]  # all or nothing: parse before reading

    def _lookup_one(self, sid: SID, k: int, min_depth: int) -> LookupResult:
        exact = self.store.current(self.bank_id, sid)
        if exact is not None and not exact.deleted:
            return exact_result(sid, exact, self.spec.levels)
        for depth in range(self.spec.levels - 1, min_depth - 1, -1):
            rows = self.store.live(self.bank_id, sid.prefix(depth), k)
            if rows:
                return near_result(sid, depth, rows)
        return LookupResult(query=str(sid), exact=False, hits=[])

    def entries(self, prefix: SID | str | Sequence[int] = ()) -> list[Entry]:
        """Live entries under a prefix (all by default), in code order."""
        return [
            Entry.from_version(v) for v in self.store.live(self.bank_id, self._prefix(prefix), None)
        ]

    def is_empty(self) -> bool:
        """Whether no SID holds a live entry (reads at most one row)."""
        return not self.store.live(self.bank_id, (), 1)

    def occupied(self, prefix: SID | str | Sequence[int] = ()) -> list[SID]:
        """Occupied SIDs under a prefix (all by default), in code order."""
        return [
            self.spec.parse(v.sid)
            for v in self.store.live(self.bank_id, self._prefix(prefix), None)
        ]

    def _prefix(self, prefix: SID | str | Sequence[int]) -> tuple[int, ...]:
        if isinstance(prefix, SID):
            return self.sid(prefix).codes
        if isinstance(prefix, str):
            return self.spec.parse_prefix(prefix)
        codes = tuple(prefix)
        self.spec.prefix_string(codes)  # validates range and length
        return codes

    def history(self, sid: SID | str) -> list[Version]:
        """Every version ever stored at ``sid``, tombstones included, oldest first."""
        return self.store.history(self.bank_id, self.sid(sid))

    def events(self, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """The operation log after ``after_seq``, oldest first."""
        return self.store.events(self.bank_id, after_seq, limit)

    def stats(self) -> BankStats:
        """Entry, version, event and prefix counts."""
        live = self.store.live(self.bank_id, (), None)
        codes = [self.spec.parse(v.sid).codes for v in live]
        prefixes = [len({c[:d] for c in codes}) for d in range(1, self.spec.levels + 1)]
        counts = self.store.counts(self.bank_id)
        return BankStats(
            bank_id=self.bank_id,
            sizes=list(self.spec.sizes),
            codebook_hash=self.codebook_hash,
            read_only=self.read_only,
            entries=len(live),
            versions=int(counts["versions"]),  # type: ignore[call-overload]
            tombstones=int(counts["tombstones"]),  # type: ignore[call-overload]
            events=int(counts["events"]),  # type: ignore[call-overload]
            outcomes=dict(counts["outcomes"]),  # type: ignore[call-overload]
            rejections=dict(counts.get("rejections", {})),  # type: ignore[call-overload]
            occupied_prefixes=prefixes,
            capacity=self.spec.capacity,
            leaf_utilization=len(live) / self.spec.capacity,
        )

    # -- writes -----------------------------------------------------------------------------

    def insert(
        self,
        sid: SID | str,
        payload: str,
        *,
        actor: str = "api",
        metadata: dict[str, Any] | None = None,
        gate: WriteGate | None = None,
    ) -> ApplyResult:
        """Fill an empty slot with a new entry (``gate``: refuse junk as a ``rejected`` event)."""
        return self._run_write(*self._insert_body(sid, payload, actor, metadata, gate))

    def _insert_body(
        self,
        sid: SID | str,
        payload: str,
        actor: str,
        metadata: dict[str, Any] | None,
        gate: WriteGate | None,
    ) -> tuple[SID, Callable[[SlotTx], ApplyResult]]:
        """The checked target of an insert and the write to run in its slot transaction."""
        target = self.sid(sid)
        text = _check_payload(payload)
        if not text.strip():
            raise InvalidUpdate(
                f"insert at {target} needs a non-empty payload; to delete an entry use revise "
                "with an empty payload"
            )
        meta = _check_metadata(metadata)

        def body(tx: SlotTx) -> ApplyResult:
            cur = tx.current
            if cur is not None and not cur.deleted:
                raise SlotOccupied(
                    f"slot {target} already holds version {cur.version}; use revise to change "
                    "it, or insert at another SID",
                    sid=str(target),
                    version=cur.version,
                )
            return self._write(tx, target, "insert", text, actor, meta, gate)

        return target, body

    def revise(
        self,
        sid: SID | str,
        payload: str,
        *,
        expected_version: int | None = None,
        actor: str = "api",
        metadata: dict[str, Any] | None = None,
        gate: WriteGate | None = None,
    ) -> ApplyResult:
        """Replace, keep (same text) or delete (empty text) the payload of an occupied slot.

        With a ``gate``, a new text the gate refuses is a ``rejected`` event and one it finds
        unchanged is a retention; a deletion is never gated.
        """
        return self._run_write(
            *self._revise_body(sid, payload, expected_version, actor, metadata, gate)
        )

    def _revise_body(
        self,
        sid: SID | str,
        payload: str,
        expected_version: int | None,
        actor: str,
        metadata: dict[str, Any] | None,
        gate: WriteGate | None,
    ) -> tuple[SID, Callable[[SlotTx], ApplyResult]]:
        """The checked target of a revision and the write to run in its slot transaction."""
        target = self.sid(sid)
        text = _check_payload(payload)
        meta = _check_metadata(metadata)
        if expected_version is not None and (
            isinstance(expected_version, bool)
            or not isinstance(expected_version, int)
            or expected_version < 1
        ):
            raise InvalidUpdate(f"expected_version must be an int >= 1, got {expected_version!r}")

        def body(tx: SlotTx) -> ApplyResult:
            cur = tx.current
            if cur is None or cur.deleted:
                raise SlotEmpty(
                    f"slot {target} is empty; revise needs an existing entry: use insert to "
                    "create one",
                    sid=str(target),
                )
            if expected_version is not None and cur.version != expected_version:
                raise VersionConflict(
                    f"slot {target} is at version {cur.version}, not the expected "
                    f"{expected_version}; read it again and retry the revision",
                    sid=str(target),
                    expected=expected_version,
                    actual=cur.version,
                )
            return self._write(tx, target, "revise", text, actor, meta, gate)

        return target, body

    def apply(
        self,
        update: Update | dict[str, Any],
        *,
        actor: str = "api",
        gate: WriteGate | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ApplyResult:
        """Apply a validated ``(op, sid, payload)`` update, through ``gate`` when given."""
        return self._run_write(*self._apply_body(update, actor, metadata, gate))

    def _apply_body(
        self,
        update: Update | dict[str, Any],
        actor: str,
        metadata: dict[str, Any] | None,
        gate: WriteGate | None,
    ) -> tuple[SID, Callable[[SlotTx], ApplyResult]]:
        """The checked target of an update record and the insert or revision to run there."""
        update = check_update(update)
        if update.op == "insert":
            return self._insert_body(update.sid, update.payload, actor, metadata, gate)
        return self._revise_body(
            update.sid, update.payload, update.expected_version, actor, metadata, gate
        )

    def refuse(
        self, sid: SID | str, op: str, verdict: GateVerdict, *, actor: str = "api"
    ) -> ApplyResult:
        """Log that the gate refused a payload for ``sid`` (a ``rejected`` event, nothing else).

        For writers that run the gate themselves, e.g. a build that checks each record before
        joining the ones that pass.
        """
        target = self.sid(sid)
        if op not in ("insert", "revise") or verdict.action != "reject":
            raise InvalidUpdate(f"refuse needs op insert/revise and a rejection, got {op!r}")

        def body(tx: SlotTx) -> ApplyResult:
            return self._reject(tx, target, op, verdict, actor)

        return self._run_write(target, body)

    def _reject(
        self, tx: SlotTx, sid: SID, op: str, verdict: GateVerdict, actor: str
    ) -> ApplyResult:
        cur = tx.current
        live = None if cur is None or cur.deleted else cur.version
        seq = tx.add_event(op, "rejected", live, live, time.time(), actor, verdict.reason)  # type: ignore[arg-type]
        return ApplyResult(
            op=op,  # type: ignore[arg-type]
            outcome="rejected",
            sid=str(sid),
            version_before=live,
            version_after=live,
            seq=seq,
            reason=verdict.reason,
            detail=verdict.detail,
        )

    def _write(
        self,
        tx: SlotTx,
        sid: SID,
        op: str,
        text: str,
        actor: str,
        meta: dict[str, Any],
        gate: WriteGate | None = None,
    ) -> ApplyResult:
        cur = tx.current
        live_before = None if cur is None or cur.deleted else cur.version
        now = time.time()
        deleting = op == "revise" and not text.strip()
        if gate is not None and not deleting:
            verdict = gate.check(text, None if live_before is None or cur is None else cur.payload)
            if verdict.action == "reject":
                return self._reject(tx, sid, op, verdict, actor)
            if verdict.action == "retain":
                text = cur.payload  # type: ignore[union-attr]
        if op == "revise" and cur is not None and text == cur.payload:
            seq = tx.add_event("revise", "retained", live_before, live_before, now, actor)
            return ApplyResult(
                op="revise",
                outcome="retained",
                sid=str(sid),
                version_before=live_before,
                version_after=live_before,
                seq=seq,
            )
        number = 1 if cur is None else cur.version + 1
        tx.add_version(
            Version(
                sid=str(sid),
                version=number,
                payload="" if deleting else text,
                deleted=deleting,
                created_at=now,
                actor=actor,
                metadata=meta,
            )
        )
        outcome = "inserted" if op == "insert" else ("deleted" if deleting else "revised")
        after = None if deleting else number
        seq = tx.add_event(op, outcome, live_before, after, now, actor)  # type: ignore[arg-type]
        return ApplyResult(
            op=op,  # type: ignore[arg-type]
            outcome=outcome,  # type: ignore[arg-type]
            sid=str(sid),
            version_before=live_before,
            version_after=after,
            seq=seq,
        )

    def _run_write(self, sid: SID, body: Callable[[SlotTx], T]) -> T:
        self._check_writable()
        retry = Retry()
        while True:
            try:
                return self.store.run_in_slot(self.bank_id, sid, body)
            except RetryableWrite:
                # Another writer held the slot or the database; back off and read again.
                wait = retry.next_wait()
                if wait is None:
                    raise
                time.sleep(wait)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyBank(
                f"bank {self.bank_id!r} is a read-only snapshot; write to {self.info.parent!r}",
                bank_id=self.bank_id,
            )

    # -- snapshots, export, integrity ---------------------------------------------------------

    def snapshot(self, name: str) -> Bank:
        """Freeze the current live entries into a read-only bank ``<bank_id>@<name>``."""
        if "@" in name or not BANK_ID_RE.fullmatch(name):
            raise InvalidUpdate(
                f"snapshot name {name!r} is not allowed; use letters, digits, '_', '.', '-'"
            )
        if self.read_only:
            raise ReadOnlyBank(f"{self.bank_id!r} is already a snapshot", bank_id=self.bank_id)
        info = BankInfo(
            bank_id=f"{self.bank_id}@{name}",
            sizes=list(self.spec.sizes),
            codebook_hash=self.codebook_hash,
            created_at=time.time(),
            read_only=True,
            parent=self.bank_id,
        )
        self.store._snapshot(self.bank_id, info)
        return _reopen(self.store, info.bank_id)

    def snapshots(self) -> list[BankInfo]:
        """Snapshots taken of this bank, oldest first."""
        snaps = [b for b in self.store.list_banks() if b.parent == self.bank_id]
        return sorted(snaps, key=lambda b: b.created_at)

    def export_jsonl(self, out: str | Path | IO[str]) -> int:
        """Write the whole bank (identity, every version, the log) as JSONL; returns lines."""
        if isinstance(out, (str, Path)):
            with Path(out).open("w", encoding="utf-8") as fh:
                return self.export_jsonl(fh)
        n = 0
        out.write(json.dumps({"type": "bank", **self.info.model_dump()}) + "\n")
        n += 1
        for v in self.store.all_versions(self.bank_id):
            out.write(json.dumps({"type": "version", **v.model_dump()}, ensure_ascii=False) + "\n")
            n += 1
        for e in self.store.events(self.bank_id):
            # an event without a reason is written as before the gate existed
            event = e.model_dump(exclude={"reason"} if e.reason is None else None)
            out.write(json.dumps({"type": "event", **event}) + "\n")
            n += 1
        return n

    def check(self, *, raise_on_error: bool = True) -> list[str]:
        """Verify the stored invariants; returns the problems (raises IntegrityError if any)."""
        versions = list(self.store.all_versions(self.bank_id))
        problems = self.store.storage_problems()
        problems += _check_content(self.spec, versions, self.store.events(self.bank_id))
        top: dict[str, int] = {}
        for v in versions:
            top[v.sid] = max(top.get(v.sid, 0), v.version)
        for sid, latest in top.items():
            cur = self.store.current(self.bank_id, self.spec.parse(sid))
            if cur is None or cur.version != latest:
                problems.append(f"{sid}: current pointer is not the latest version {latest}")
        if problems and raise_on_error:
            raise IntegrityError(
                f"bank {self.bank_id!r} fails {len(problems)} integrity checks: {problems[0]}",
                problems=problems,
            )
        return problems


def _check_payload(payload: object) -> str:
    if not isinstance(payload, str):
        raise InvalidUpdate(f"payload must be a string, got {type(payload).__name__}")
    if len(payload) > MAX_PAYLOAD_CHARS:
        raise InvalidUpdate(
            f"payload has {len(payload)} characters; the limit is {MAX_PAYLOAD_CHARS}: "
            "condense the experience"
        )
    if "\x00" in payload:
        raise InvalidUpdate("payload contains a NUL character, which no backend can store")
    return payload


def _check_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidUpdate(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        return json.loads(json.dumps(metadata))
    except (TypeError, ValueError) as exc:
        raise InvalidUpdate(f"metadata must be JSON-serialisable: {exc}") from None


def _check_content(spec: SIDSpec, versions: list[Version], events: list[Event]) -> list[str]:
    """Invariants of a bank's content, shared by ``check()`` and import."""
    problems: list[str] = []
    slots: dict[str, dict[int, Version]] = {}
    numbers: dict[str, list[int]] = {}
    for v in versions:
        try:
            sid = str(spec.parse(v.sid))
        except ValueError as exc:
            problems.append(f"version of {v.sid!r}: {exc}")
            continue
        if sid != v.sid:  # two spellings of one slot would pass as two slots
            problems.append(f"version {v.version} of {v.sid!r} is not written canonically ({sid})")
            continue
        problems += _version_problems(v)
        numbers.setdefault(sid, []).append(v.version)
        slots.setdefault(sid, {})[v.version] = v
    for sid, got in numbers.items():
        got.sort()
        if got != list(range(1, len(got) + 1)):
            problems.append(f"{sid}: versions {got} are not 1..{len(got)}")
            continue
        slot = slots[sid]
        if slot[1].deleted:
            problems.append(f"{sid}: version 1 is a tombstone; a slot's first version is an insert")
        for n in range(2, len(got) + 1):
            if slot[n].deleted and slot[n - 1].deleted:
                problems.append(
                    f"{sid}: version {n} is a tombstone after tombstone {n - 1}; only a live "
                    "entry can be deleted"
                )
    return problems + _log_problems(slots, events)


def _version_problems(v: Version) -> list[str]:
    where = f"{v.sid} version {v.version}"
    problems = []
    if v.deleted and v.payload != "":
        problems.append(f"{where} is a tombstone but carries a payload; a deletion stores ''")
    if not v.deleted and not v.payload.strip():
        problems.append(f"{where} has an empty payload but is not a tombstone")
    try:
        _check_payload(v.payload)
    except InvalidUpdate as exc:
        problems.append(f"{where}: {exc}")
    if not math.isfinite(v.created_at):
        problems.append(f"{where}: created_at {v.created_at} is not a finite time")
    return problems


def _log_problems(slots: dict[str, dict[int, Version]], events: list[Event]) -> list[str]:
    """The log against the versions: each event fits the slot, each version has one event."""
    problems: list[str] = []
    written_by: dict[tuple[str, int], int] = {}
    last_seq = 0
    for e in events:
        if e.seq <= last_seq:
            problems.append(f"event {e.seq} is out of order (after {last_seq})")
        last_seq = e.seq
        where = f"event {e.seq} ({e.op} -> {e.outcome} at {e.sid})"
        if not math.isfinite(e.time):
            problems.append(f"{where}: time {e.time} is not a finite time")
        wrote, problem = _event_effect(e, slots.get(e.sid, {}))
        if problem is not None:
            problems.append(f"{where}: {problem}")
        elif wrote is not None:
            if (e.sid, wrote) in written_by:
                problems.append(
                    f"{where}: version {wrote} was already written by event "
                    f"{written_by[e.sid, wrote]}"
                )
            written_by[e.sid, wrote] = e.seq
    if events:  # a snapshot has versions but no log of its own
        for sid, slot in slots.items():
            missing = sorted(n for n in slot if (sid, n) not in written_by)
            if missing:
                problems.append(f"{sid}: versions {missing} have no event in the log")
    return problems


def _event_effect(e: Event, slot: dict[int, Version]) -> tuple[int | None, str | None]:
    """The version an event wrote (None for a retention), or what is wrong with it."""

    def kind(n: int | None) -> str:
        if n is None or n not in slot:
            return "missing"
        return "tombstone" if slot[n].deleted else "live"

    before, after = e.version_before, e.version_after
    if e.outcome == "rejected":
        if not e.reason:
            return None, "a rejection names the gate's reason"
        if after != before or (before is not None and kind(before) != "live"):
            return None, f"a rejection keeps the slot as it was, but {before} -> {after}"
        return None, None
    if e.reason is not None:
        return None, f"only a rejection has a reason, not outcome {e.outcome!r}"
    if e.op == "insert":
        if e.outcome != "inserted":
            return None, f"op 'insert' cannot have outcome {e.outcome!r}"
        if before is not None:
            return None, f"an insert fills an empty slot, but version_before is {before}"
        if after is None or kind(after) != "live":
            return None, f"version {after} is not a live version of the slot"
        if after > 1 and kind(after - 1) != "tombstone":
            return None, f"version {after} is inserted over version {after - 1}, not a tombstone"
        return after, None
    if e.outcome == "inserted":
        return None, "op 'revise' cannot have outcome 'inserted'"
    if before is None or kind(before) != "live":
        return None, f"version_before {before} is not a live version of the slot"
    if e.outcome == "retained":
        if after != before:
            return None, f"a retention keeps version {before}, but version_after is {after}"
        return None, None
    if e.outcome == "deleted":
        if after is not None or kind(before + 1) != "tombstone":
            return None, f"a deletion writes tombstone {before + 1} and leaves version_after None"
        return before + 1, None
    if after != before + 1 or kind(after) != "live":
        return None, f"a revision of version {before} writes live version {before + 1}, not {after}"
    return after, None


def import_bank(
    store: StoreBackend, source: str | Path | IO[str], *, bank_id: str | None = None
) -> Bank:
    """Create a bank from an export (every version and the log); the target must not exist.

    The file is read and validated completely (the target id by the rule of
    :meth:`genmem.memory.store.BankStore.create_bank`, the bank record, every version and event
    and their consistency) before anything is written, so a bad file or an existing bank
    changes nothing.
    """
    if isinstance(source, (str, Path)):
        with Path(source).open(encoding="utf-8") as fh:
            return import_bank(store, fh, bank_id=bank_id)
    info, versions, events = _read_export(source)
    spec = _export_spec(info)
    target = bank_id if bank_id is not None else info.bank_id
    check_new_bank(target, spec)
    problems = _check_content(spec, versions, events)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise InvalidUpdate(f"export is inconsistent: {problems[0]}{more}; nothing was imported")
    target_info = info.model_copy(
        update={"bank_id": target, "read_only": False, "parent": None, "snapshot_seq": None}
    )
    if store.get_info(target) is not None:
        raise BankExists(
            f"bank {target!r} already exists in {store.url}; import into a new bank id",
            bank_id=target,
        )
    versions.sort(key=lambda v: (sort_key(spec.parse(v.sid).codes), v.version))
    store._create(target_info, versions, events)
    return _reopen(store, target)


def _reopen(store: StoreBackend, bank_id: str) -> Bank:
    """The bank ``bank_id`` that this module just wrote into ``store``, as the store records it."""
    info = store.get_info(bank_id)
    if info is None:  # written a moment ago: only a store that lost it gets here
        raise IntegrityError(f"bank {bank_id!r} vanished from {store.url} right after its write")
    return Bank(store, info)


def _read_export(source: IO[str]) -> tuple[BankInfo, list[Version], list[Event]]:
    """The records of an export file; InvalidUpdate names the first line that is not one."""
    info: BankInfo | None = None
    versions: list[Version] = []
    events: list[Event] = []
    try:
        for lineno, line in enumerate(source, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                kind = obj.pop("type")
                if kind == "bank":
                    if info is not None:
                        raise ValueError("a second bank record; an export holds one bank")
                    info = BankInfo.model_validate(obj)
                elif kind == "version":
                    versions.append(Version.model_validate(obj))
                elif kind == "event":
                    events.append(Event.model_validate(obj))
                else:
                    raise ValueError(f"unknown record type {kind!r}")
            except (ValueError, KeyError, AttributeError, TypeError, ValidationError) as exc:
                msg = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
                raise InvalidUpdate(f"export line {lineno}: {msg}") from None
            if info is None:
                raise InvalidUpdate(
                    f"export line {lineno} must be the bank record ({{'type': 'bank', ...}})"
                )
    except UnicodeDecodeError as exc:
        raise InvalidUpdate(f"the export is not UTF-8 text: {exc}") from None
    if info is None:
        raise InvalidUpdate("the export holds no bank record")
    return info, versions, events


def _export_spec(info: BankInfo) -> SIDSpec:
    """The address space of an export's bank record, after checking the record."""
    try:
        spec = SIDSpec(tuple(info.sizes))
    except ValueError as exc:
        raise InvalidUpdate(f"export bank record: {exc}") from None
    if not _HASH_RE.fullmatch(info.codebook_hash):
        raise InvalidUpdate(
            f"export bank record: codebook hash {info.codebook_hash!r} is not the 64 hex digits "
            "of a codebook content hash (Codebooks.hash); re-export the bank from its store"
        )
    if not math.isfinite(info.created_at):
        raise InvalidUpdate(f"export bank record: created_at {info.created_at} is not finite")
    return spec
