"""A paginated read model of one bank for the explorer: occupancy by prefix and a filterable log.

A bank answers reads by slot and by prefix, and its log from a sequence number on; a page of a
100,000-entry bank must not read the whole bank. :class:`BankView` reads the bank once (the
occupied SIDs and the log) and then follows it: before each page it reads only the events after
the last one it has seen, and an ``inserted`` event marks its slot occupied, a ``deleted`` one
frees it. Replaying events that the first read already reflects changes nothing (setting a slot
occupied twice is setting it once), so the view is exact whatever writes ran while it loaded. A
snapshot has no log of its own and never changes; its first read is its state.

Occupied SIDs are kept as a sorted list of code tuples (code order), so the count under any
prefix is two binary searches and a page of entries under a prefix is a slice. The log is kept
as columns (numpy arrays, rebuilt when new events arrive) so a filter over the whole log is a
vector comparison and a page is a slice of the matching rows, newest first.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from genmem.errors import InvalidSID, InvalidUpdate
from genmem.memory.metrics import CodebookMetrics, codebook_metrics
from genmem.memory.records import Event

if TYPE_CHECKING:
    from genmem.memory.bank import Bank
    from genmem.policies.baselines import TfidfRetriever

__all__ = [
    "OPS",
    "OUTCOMES",
    "BankView",
    "Child",
    "EventFilter",
    "EventPage",
    "LevelUse",
    "TextIndex",
    "describe_filter",
    "parse_codes",
]

OPS = ("insert", "revise")
OUTCOMES = ("inserted", "revised", "retained", "deleted", "rejected")
_LOAD_CHUNK = 20_000  # events read per call while loading, so no single read holds the whole log


def parse_codes(text: str, bank: Bank, *, exact: bool = False) -> tuple[int, ...]:
    """Codes from a path like ``3-0-7`` or SID tokens like ``<SID_L1_3><SID_L2_0>`` (InvalidSID)."""
    body = text.strip()
    if body.startswith("<"):
        return bank.sid(body).codes if exact else bank.spec.parse_prefix(body)
    parts = [p for p in body.replace(",", "-").replace(".", "-").split("-") if p != ""]
    if not all(p.isdigit() for p in parts):
        raise InvalidSID(
            f"{text!r} is neither SID tokens like {bank.spec.form} nor codes like 3-0-7",
            text=text,
        )
    codes = tuple(int(p) for p in parts)
    bank.spec.prefix_string(codes)  # InvalidSID names the level and its range
    if exact and len(codes) != bank.spec.levels:
        raise InvalidSID(
            f"{text!r} has {len(codes)} of {bank.spec.levels} levels; an entry needs a full SID "
            f"such as {'-'.join('0' * bank.spec.levels)}",
            text=text,
        )
    return codes


class Child(BaseModel):
    """One child of a prefix in the tree: its code, live entries under it and their share."""

    code: int
    path: str = Field(description="The child's codes joined with '-', e.g. 3-0-7.")
    sid: str = Field(description="The child prefix as SID tokens.")
    entries: int = Field(description="Live entries under the child.")
    capacity: int = Field(description="Addresses under the child.")
    occupancy: float = Field(description="entries / capacity.")


class LevelUse(BaseModel):
    """How the live entries use one level's codes."""

    level: int
    size: int
    used: int = Field(description="Codes of this level that some live entry uses.")
    counts: list[int] = Field(description="Live entries per code.")


@dataclass(frozen=True, kw_only=True)
class EventFilter:
    """Which log events a page shows; None leaves a field unfiltered."""

    op: str | None = None
    """insert or revise."""
    outcome: str | None = None
    """inserted, revised, retained, deleted or rejected."""
    actor: str | None = None
    """Exact actor name."""
    sid: str | None = None
    """Canonical SID of one slot."""
    since: float | None = None
    """Earliest event time, Unix seconds (inclusive)."""
    until: float | None = None
    """Latest event time, Unix seconds (inclusive)."""

    def __post_init__(self) -> None:
        if self.op is not None and self.op not in OPS:
            raise InvalidUpdate(f"op {self.op!r} is not one of {', '.join(OPS)}")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise InvalidUpdate(f"outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise InvalidUpdate(f"{name} {value!r} is not a finite time")
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InvalidUpdate(
                f"since ({self.since}) is after until ({self.until}); swap them or widen the range"
            )


class TextIndex(BaseModel):
    """The TF-IDF index a text search used."""

    entries: int = Field(description="Payloads indexed.")
    as_of_seq: int = Field(description="The last log event the index reflects.")
    events_behind: int = Field(description="Events written since (0: up to date).")
    build_seconds: float = Field(description="Time spent (re)building it for this search.")


class EventPage(BaseModel):
    """One page of the filtered log, newest first, and the cursor of the next (older) page."""

    events: list[Event]
    matching: int = Field(description="Events in the whole log that pass the filter.")
    next_before: int | None = Field(description="Pass as ``before`` for the next page; None: end.")


class _Log:
    """The log as numpy columns, grown chunk by chunk, for vector filters."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.actors: dict[str, int] = {}
        self.cols: dict[str, np.ndarray] = {
            "seq": np.zeros(0, np.int64),
            "time": np.zeros(0, np.float64),
            "op": np.zeros(0, np.int8),
            "outcome": np.zeros(0, np.int8),
            "actor": np.zeros(0, np.int32),
            "sid": np.zeros(0, np.str_),
        }

    def extend(self, events: Sequence[Event]) -> None:
        if not events:
            return
        for e in events:
            self.actors.setdefault(e.actor, len(self.actors))
        n = len(events)
        new = {
            "seq": np.fromiter((e.seq for e in events), np.int64, n),
            "time": np.fromiter((e.time for e in events), np.float64, n),
            "op": np.fromiter((OPS.index(e.op) for e in events), np.int8, n),
            "outcome": np.fromiter((OUTCOMES.index(e.outcome) for e in events), np.int8, n),
            "actor": np.fromiter((self.actors[e.actor] for e in events), np.int32, n),
            "sid": np.asarray([e.sid for e in events], dtype=np.str_),
        }
        self.cols = {k: np.concatenate([self.cols[k], v]) for k, v in new.items()}
        self.events.extend(events)


class BankView:
    """Occupancy by prefix, a filterable log and a lazily built TF-IDF index over one bank."""

    def __init__(self, bank: Bank, *, index_max_age: float = 60.0) -> None:
        """``index_max_age``: seconds a stale TF-IDF index may serve before a rebuild."""
        self.bank = bank
        self.index_max_age = index_max_age
        self._lock = threading.RLock()
        self._log = _Log()
        self._last_seq = 0
        self._load_events()
        self._occupied = [self.bank.spec.parse(s).codes for s in self._live_sids()]
        self._occupied.sort()
        self._tfidf: TfidfRetriever | None = None
        self._tfidf_seq = -1
        self._tfidf_at = 0.0
        self._metrics: tuple[int, CodebookMetrics | None] | None = None
        self._codes = np.zeros((0, bank.spec.levels), dtype=np.int64)

    def _live_sids(self) -> list[str]:
        return [e.sid for e in self.bank.entries()]

    def _load_events(self) -> list[Event]:
        new: list[Event] = []
        while True:
            chunk = self.bank.events(self._last_seq, _LOAD_CHUNK)
            if not chunk:
                break
            new.extend(chunk)
            self._last_seq = chunk[-1].seq
            if len(chunk) < _LOAD_CHUNK:
                break
        self._log.extend(new)
        return new

    def refresh(self) -> int:
        """Read the events written since the last call and apply them; returns their number."""
        with self._lock:
            new = self._load_events()
            for e in new:
                codes = self.bank.spec.parse(e.sid).codes
                i = bisect.bisect_left(self._occupied, codes)
                there = i < len(self._occupied) and self._occupied[i] == codes
                if e.outcome == "inserted" and not there:
                    self._occupied.insert(i, codes)
                elif e.outcome == "deleted" and there:
                    del self._occupied[i]
            return len(new)

    @property
    def last_seq(self) -> int:
        """The newest event the view has applied (0: none)."""
        return self._last_seq

    # -- tree -------------------------------------------------------------------------------

    def _range(self, prefix: tuple[int, ...]) -> tuple[int, int]:
        lo = bisect.bisect_left(self._occupied, prefix)
        # Codes are below 10**5 (the bank's limit), so this tuple sorts after the whole prefix.
        hi = bisect.bisect_left(self._occupied, (*prefix, 10**9), lo)
        return lo, hi

    @property
    def entries(self) -> int:
        """Live entries in the bank."""
        return len(self._occupied)

    def count(self, prefix: Sequence[int] = ()) -> int:
        """Live entries under ``prefix``."""
        with self._lock:
            lo, hi = self._range(tuple(prefix))
            return hi - lo

    def capacity(self, depth: int) -> int:
        """Addresses under one prefix of ``depth`` levels."""
        return math.prod(self.bank.spec.sizes[depth:])

    def children(
        self,
        prefix: Sequence[int],
        *,
        offset: int = 0,
        limit: int = 100,
        occupied_only: bool = False,
    ) -> tuple[list[Child], int]:
        """A page of the children of a non-leaf ``prefix`` and how many there are in all."""
        spec = self.bank.spec
        prefix = tuple(prefix)
        if len(prefix) >= spec.levels:
            raise InvalidSID(f"{spec.prefix_string(prefix)} is a full SID; it has no children")
        depth = len(prefix) + 1
        cap = self.capacity(depth)
        with self._lock:
            codes = range(spec.sizes[depth - 1])
            counts = [(c, self.count((*prefix, c))) for c in codes]
        if occupied_only:
            counts = [(c, n) for c, n in counts if n]
        page = counts[offset : offset + limit]
        out = [
            Child(
                code=c,
                path="-".join(map(str, (*prefix, c))),
                sid=spec.prefix_string((*prefix, c)),
                entries=n,
                capacity=cap,
                occupancy=n / cap,
            )
            for c, n in page
        ]
        return out, len(counts)

    def sids_under(
        self, prefix: Sequence[int], *, offset: int = 0, limit: int = 50
    ) -> tuple[list[tuple[int, ...]], int]:
        """A page of the occupied SIDs under ``prefix`` (code order) and their number."""
        with self._lock:
            lo, hi = self._range(tuple(prefix))
            start = min(lo + max(offset, 0), hi)
            return self._occupied[start : min(start + limit, hi)], hi - lo

    # -- log --------------------------------------------------------------------------------

    def event_page(
        self, flt: EventFilter, *, before: int | None = None, limit: int = 50
    ) -> EventPage:
        """Events passing ``flt`` with seq below ``before`` (None: the newest), newest first."""
        with self._lock:
            cols = self._log.cols
            mask = np.ones(len(cols["seq"]), dtype=bool)
            if flt.op is not None:
                mask &= cols["op"] == OPS.index(flt.op)
            if flt.outcome is not None:
                mask &= cols["outcome"] == OUTCOMES.index(flt.outcome)
            if flt.actor is not None:
                mask &= cols["actor"] == self._log.actors.get(flt.actor, -1)
            if flt.since is not None:
                mask &= cols["time"] >= flt.since
            if flt.until is not None:
                mask &= cols["time"] <= flt.until
            if flt.sid is not None:
                mask &= cols["sid"] == flt.sid
            rows = np.flatnonzero(mask)
            matching = len(rows)
            if before is not None:
                rows = rows[: np.searchsorted(cols["seq"][rows], before)]
            page = rows[::-1][:limit]
            events = [self._log.events[i] for i in page]
            more = len(rows) > limit
            return EventPage(
                events=events,
                matching=matching,
                next_before=events[-1].seq if more and events else None,
            )

    def actors(self) -> list[str]:
        """Every actor named in the log, sorted."""
        with self._lock:
            return sorted(self._log.actors)

    # -- text search and utilisation --------------------------------------------------------

    def search_text(self, query: str, k: int) -> tuple[list[tuple[str, float]], TextIndex]:
        """The ``k`` best TF-IDF matches as (SID, score), and the state of the index used.

        The index is rebuilt when the bank has changed since it was built, but at most once per
        ``index_max_age`` seconds: on a bank being written to all the time, a search answers
        from the last index (the page says how many events behind it is) instead of rebuilding
        100,000 payloads for every query.
        """
        from genmem.policies.baselines import TfidfRetriever

        built = 0.0
        with self._lock:
            stale = self._tfidf_seq != self._last_seq
            old = time.monotonic() - self._tfidf_at >= self.index_max_age
            if self._tfidf is None or (stale and old):
                t0 = time.perf_counter()
                self._tfidf = TfidfRetriever.from_bank(self.bank)
                self._tfidf_seq, self._tfidf_at = self._last_seq, time.monotonic()
                built = time.perf_counter() - t0
            hits = self._tfidf.retrieve(query, k)
            state = TextIndex(
                entries=self._tfidf.size,
                as_of_seq=self._tfidf_seq,
                events_behind=int(np.count_nonzero(self._log.cols["seq"] > self._tfidf_seq)),
                build_seconds=built,
            )
        return [(h.sid, h.score) for h in hits], state

    def utilisation(self) -> tuple[CodebookMetrics | None, list[LevelUse]]:
        """Codebook metrics of the live SIDs (None for an empty bank) and per-level code use."""
        spec = self.bank.spec
        with self._lock:
            if self._metrics is None or self._metrics[0] != self._last_seq:
                codes = np.asarray(self._occupied, dtype=np.int64).reshape(-1, spec.levels)
                metrics = codebook_metrics(codes, spec) if len(codes) else None
                self._metrics = (self._last_seq, metrics)
                self._codes = codes
            codes = self._codes
        levels = []
        for lvl, size in enumerate(spec.sizes):
            counts = np.bincount(codes[:, lvl], minlength=size) if len(codes) else np.zeros(size)
            levels.append(
                LevelUse(
                    level=lvl + 1,
                    size=size,
                    used=int(np.count_nonzero(counts)),
                    counts=[int(c) for c in counts],
                )
            )
        return self._metrics[1], levels


def describe_filter(flt: EventFilter) -> dict[str, Any]:
    """The filter's set fields, for JSON answers."""
    return {k: v for k, v in vars(flt).items() if v is not None}
