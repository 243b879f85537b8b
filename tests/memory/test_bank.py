"""The bank's semantics, run on every backend through the parametrised ``bank`` fixture."""

from __future__ import annotations

import io
import json
import random
import threading

import pytest

from genmem.errors import (
    BankExists,
    BankNotFound,
    CodebookMismatch,
    InvalidSID,
    InvalidUpdate,
    ReadOnlyBank,
    SlotEmpty,
    SlotOccupied,
    VersionConflict,
)
from genmem.memory.bank import MAX_PAYLOAD_CHARS, Bank, import_bank
from genmem.memory.gate import WriteGate
from genmem.memory.records import Update
from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec
from tests.conftest import TEST_HASH

A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
A_SIB = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_2>"
A_COUSIN = "<SID_L1_3><SID_L2_0><SID_L3_2><SID_L4_0>"
A_FAR = "<SID_L1_3><SID_L2_9><SID_L3_0><SID_L4_0>"
B = "<SID_L1_40><SID_L2_15><SID_L3_0><SID_L4_7>"


def _state(bank: Bank) -> tuple:
    """Everything observable about a bank, to prove a failed call changed nothing."""
    return (
        [e.model_dump() for e in bank.entries()],
        [v.model_dump() for v in bank.store.all_versions(bank.bank_id)],
        [e.model_dump() for e in bank.events()],
    )


def test_insert_then_get(bank: Bank) -> None:
    r = bank.insert(A, "check units first", actor="tester", metadata={"source": "gsm8k"})
    assert (r.op, r.outcome, r.version_before, r.version_after) == ("insert", "inserted", None, 1)
    e = bank.get(A)
    assert e is not None and e.payload == "check units first" and e.version == 1
    assert e.actor == "tester" and e.metadata == {"source": "gsm8k"}
    assert bank.get(SID.parse(A)) == e
    assert bank.get(B) is None


def test_insert_into_occupied_slot_changes_nothing(bank: Bank) -> None:
    bank.insert(A, "one")
    before = _state(bank)
    with pytest.raises(SlotOccupied) as info:
        bank.insert(A, "two")
    assert info.value.version == 1 and "revise" in str(info.value)
    assert _state(bank) == before


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ("", InvalidUpdate),
        ("   \n", InvalidUpdate),
        (None, InvalidUpdate),
        (42, InvalidUpdate),
        ("x" * (MAX_PAYLOAD_CHARS + 1), InvalidUpdate),
        ("a\x00b", InvalidUpdate),
    ],
)
def test_bad_insert_payload_changes_nothing(bank: Bank, payload, error) -> None:
    bank.insert(B, "kept")
    before = _state(bank)
    with pytest.raises(error):
        bank.insert(A, payload)
    assert _state(bank) == before


@pytest.mark.parametrize(
    "sid",
    [
        "<SID_L1_48><SID_L2_0><SID_L3_0><SID_L4_0>",
        "<SID_L1_3><SID_L2_0><SID_L3_7>",
        "hello",
        "",
        "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1><SID_L5_0>",
        SIDSpec((4, 4)).make((1, 1)),
    ],
)
def test_invalid_sid_is_rejected_everywhere(bank: Bank, sid) -> None:
    bank.insert(A, "kept")
    before = _state(bank)
    for call in (
        lambda: bank.insert(sid, "x"),
        lambda: bank.revise(sid, "x"),
        lambda: bank.get(sid),
        lambda: bank.history(sid),
        lambda: bank.lookup([A, sid]),
    ):
        with pytest.raises(InvalidSID):
            call()
    assert _state(bank) == before


def test_revise_empty_slot(bank: Bank) -> None:
    with pytest.raises(SlotEmpty, match="insert"):
        bank.revise(A, "text")
    assert _state(bank) == ([], [], [])


def test_retention_is_logged_without_a_version(bank: Bank) -> None:
    bank.insert(A, "same")
    r = bank.revise(A, "same")
    assert (r.outcome, r.version_before, r.version_after) == ("retained", 1, 1)
    assert len(bank.history(A)) == 1
    assert [e.outcome for e in bank.events()] == ["inserted", "retained"]


def test_revision_keeps_every_version(bank: Bank) -> None:
    bank.insert(A, "v1")
    r = bank.revise(A, "v2", actor="evolver")
    assert (r.outcome, r.version_before, r.version_after) == ("revised", 1, 2)
    assert bank.get(A).payload == "v2"
    assert [v.payload for v in bank.history(A)] == ["v1", "v2"]
    assert bank.history(A)[1].actor == "evolver"


def test_deletion_leaves_tombstone_and_frees_slot(bank: Bank) -> None:
    assert bank.is_empty()
    bank.insert(A, "v1")
    assert not bank.is_empty()
    r = bank.revise(A, "")
    assert bank.is_empty()  # a tombstone is not an entry
    assert (r.outcome, r.version_before, r.version_after) == ("deleted", 1, None)
    assert bank.get(A) is None
    hist = bank.history(A)
    assert [(v.version, v.deleted) for v in hist] == [(1, False), (2, True)]
    with pytest.raises(SlotEmpty):
        bank.revise(A, "again")
    r = bank.insert(A, "reborn")
    assert (r.version_before, r.version_after) == (None, 3)
    assert [v.payload for v in bank.history(A)] == ["v1", "", "reborn"]
    assert bank.stats().tombstones == 0


def test_expected_version(bank: Bank) -> None:
    bank.insert(A, "v1")
    bank.revise(A, "v2", expected_version=1)
    before = _state(bank)
    with pytest.raises(VersionConflict) as info:
        bank.revise(A, "v3", expected_version=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert _state(bank) == before


def test_apply_update_records(bank: Bank) -> None:
    bank.apply(Update(op="insert", sid=A, payload="v1"))
    bank.apply({"op": "revise", "sid": A, "payload": "v2"})
    assert bank.get(A).payload == "v2"
    before = _state(bank)
    for bad in (
        {"op": "delete", "sid": A, "payload": ""},
        {"op": "insert", "sid": "not an sid", "payload": "x"},
        {"op": "insert", "sid": B},
        {"op": "insert", "sid": B, "payload": "x", "extra": 1},
        {"op": "insert", "sid": B, "payload": "x", "expected_version": 1},
        {"op": "insert", "sid": A, "payload": ""},
    ):
        with pytest.raises(InvalidUpdate):
            bank.apply(bad)
    with pytest.raises(SlotOccupied):
        bank.apply({"op": "insert", "sid": A, "payload": "x"})
    assert _state(bank) == before


def test_lookup_exact_and_nearest(bank: Bank) -> None:
    for sid in (A, A_SIB, A_COUSIN, A_FAR, B):
        bank.insert(sid, f"payload of {sid}")
    [exact] = bank.lookup([A])
    assert exact.exact and [(h.sid, h.match_depth) for h in exact.hits] == [(A, 4)]
    # an empty leaf next to A and A_SIB: both share three levels
    [near] = bank.lookup(["<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_6>"], k=5)
    assert not near.exact
    assert [(h.sid, h.match_depth) for h in near.hits] == [(A, 3), (A_SIB, 3)]
    [two] = bank.lookup(["<SID_L1_3><SID_L2_0><SID_L3_5><SID_L4_0>"])
    # order is code order: L3 code 2 before 7
    assert [(h.sid, h.match_depth) for h in two.hits] == [(A_COUSIN, 2), (A, 2), (A_SIB, 2)]
    [one] = bank.lookup(["<SID_L1_3><SID_L2_4><SID_L3_0><SID_L4_0>"], k=2)
    assert [h.sid for h in one.hits] == [A_COUSIN, A] and one.hits[0].match_depth == 1
    [none] = bank.lookup(["<SID_L1_0><SID_L2_0><SID_L3_0><SID_L4_0>"])
    assert none.hits == [] and not none.exact
    [zero] = bank.lookup(["<SID_L1_0><SID_L2_0><SID_L3_0><SID_L4_0>"], k=3, min_depth=0)
    assert len(zero.hits) == 3 and {h.match_depth for h in zero.hits} == {0}


def test_lookup_is_read_only_and_validates(bank: Bank) -> None:
    bank.insert(A, "x")
    before = _state(bank)
    bank.lookup([A, B, A_SIB], k=3)
    assert _state(bank) == before
    with pytest.raises(InvalidUpdate):
        bank.lookup([A], k=0)
    with pytest.raises(InvalidUpdate):
        bank.lookup([A], min_depth=5)


def test_lookup_skips_deleted_entries(bank: Bank) -> None:
    bank.insert(A, "x")
    bank.insert(A_SIB, "y")
    bank.revise(A, "")
    [r] = bank.lookup([A])
    assert not r.exact and [h.sid for h in r.hits] == [A_SIB]


def test_order_is_code_order_whatever_the_insert_order(bank: Bank) -> None:
    rng = random.Random(7)
    sids = [DEFAULT_SPEC.make((c1, c2, 1, 1)) for c1 in (2, 10, 11) for c2 in (0, 3, 12)]
    for s in rng.sample(sids, len(sids)):
        bank.insert(s, str(s))
    assert bank.occupied() == sorted(sids)
    assert bank.occupied("<SID_L1_10>") == [s for s in sorted(sids) if s.codes[0] == 10]
    assert bank.occupied((11, 12)) == [DEFAULT_SPEC.make((11, 12, 1, 1))]
    assert [e.sid for e in bank.entries((2,))] == [str(s) for s in sorted(sids) if s.codes[0] == 2]
    with pytest.raises(InvalidSID):
        bank.occupied("<SID_L2_1>")


def test_banks_are_isolated(store) -> None:
    one = store.create_bank("one", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    two = store.create_bank("two", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    one.insert(A, "in one")
    assert two.get(A) is None and two.lookup([A])[0].hits == []
    two.insert(A, "in two")
    two.revise(A, "in two, v2")
    assert one.get(A).payload == "in one" and one.get(A).version == 1
    assert len(one.events()) == 1 and len(two.events()) == 2
    assert sorted(b.bank_id for b in store.list_banks()) == ["one", "two"]
    with pytest.raises(BankNotFound, match="one"):
        store.bank("three")


def test_banks_are_listed_in_byte_order_of_their_ids(store) -> None:
    # Punctuation orders differently under ICU en-US ('_' before '-' before '.'); every backend
    # must list the way Python sorts strings.
    ids = ["b", "a_b", "a.b", "a-b", "A", "a9", "ab"]
    for bank_id in ids:
        store.create_bank(bank_id, spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    assert [b.bank_id for b in store.list_banks()] == sorted(ids)


def test_codebook_hash_is_enforced(store) -> None:
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    with pytest.raises(BankExists):
        store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    assert store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH, exist_ok=True)
    with pytest.raises(CodebookMismatch) as info:
        store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash="f" * 64, exist_ok=True)
    assert info.value.expected == TEST_HASH
    with pytest.raises(CodebookMismatch):
        bank.check_codebook_hash("f" * 64)
    with pytest.raises(InvalidUpdate):
        store.create_bank("b", spec=SIDSpec((4, 4)), codebook_hash=TEST_HASH, exist_ok=True)
    with pytest.raises(InvalidUpdate):
        store.create_bank("bad id!", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)


def test_stats_and_events(bank: Bank) -> None:
    bank.insert(A, "a")
    bank.insert(A_SIB, "b")
    bank.insert(B, "c")
    bank.revise(A, "a2")
    bank.revise(A_SIB, "b")
    bank.revise(B, "")
    s = bank.stats()
    assert (s.entries, s.versions, s.tombstones, s.events) == (2, 5, 1, 6)
    assert s.outcomes == {"inserted": 3, "revised": 1, "retained": 1, "deleted": 1}
    assert s.occupied_prefixes == [1, 1, 1, 2]
    assert s.capacity == 49152 and s.leaf_utilization == pytest.approx(2 / 49152)
    ev = bank.events()
    assert [e.seq for e in ev] == sorted(e.seq for e in ev)
    assert len({e.seq for e in ev}) == 6
    assert [e.outcome for e in bank.events(after_seq=ev[3].seq)] == ["retained", "deleted"]
    assert len(bank.events(limit=2)) == 2


def test_snapshot_is_frozen_and_readable(bank: Bank) -> None:
    bank.insert(A, "v1")
    bank.insert(B, "b")
    bank.revise(B, "")
    snap = bank.snapshot("probe-1")
    assert snap.read_only and snap.bank_id == "default@probe-1" and snap.info.parent == "default"
    assert snap.info.snapshot_seq == bank.events()[-1].seq
    bank.revise(A, "v2")
    bank.insert(A_SIB, "new")
    assert snap.get(A).payload == "v1" and snap.get(A_SIB) is None and snap.get(B) is None
    assert [h.sid for h in snap.lookup([A_SIB])[0].hits] == [A]
    with pytest.raises(ReadOnlyBank):
        snap.insert(A_SIB, "x")
    with pytest.raises(ReadOnlyBank):
        snap.revise(A, "x")
    with pytest.raises(BankExists):
        bank.snapshot("probe-1")
    with pytest.raises(InvalidUpdate):
        bank.snapshot("a@b")
    assert [s.bank_id for s in bank.snapshots()] == ["default@probe-1"]
    assert snap.check() == []


LESSON = "Convert every quantity to the same unit before adding the totals."


def test_the_gate_refuses_junk_as_a_rejected_event_and_stores_nothing(bank: Bank) -> None:
    gate = WriteGate(sources=("How many minutes are 2 hours and 30 minutes in total?",))
    r = bank.insert(A, "15,000,000,000,000 = 15,000,000,000,000", gate=gate)
    assert (r.outcome, r.reason, r.version_before, r.version_after) == (
        "rejected",
        "symbols",
        None,
        None,
    )
    assert "letters" in r.detail and bank.get(A) is None and bank.history(A) == []
    bank.insert(A, LESSON, gate=gate)
    r = bank.revise(A, "skill_name: skill_name\nsteps: steps\npitfalls: pitfalls", gate=gate)
    assert (r.outcome, r.reason, r.version_after) == ("rejected", "field_names", 1)
    r = bank.revise(A, "  " + LESSON.upper(), gate=gate)  # the same lesson, respelt
    assert (r.outcome, r.version_after) == ("retained", 1)
    r = bank.revise(A, "Bake a cake with flour and sugar, then frost it nicely.", gate=gate)
    assert (r.outcome, r.reason) == ("rejected", "ungrounded")
    r = bank.revise(A, "Add the minutes of each part only after converting hours.", gate=gate)
    assert (r.outcome, r.version_after) == ("revised", 2)
    assert bank.revise(A, "", gate=gate).outcome == "deleted"  # a deletion is never gated
    assert bank.insert(B, "1234567890 1234567890").outcome == "inserted"  # no gate, no check
    rejected = [e for e in bank.events() if e.outcome == "rejected"]
    assert [(e.op, e.reason) for e in rejected] == [
        ("insert", "symbols"),
        ("revise", "field_names"),
        ("revise", "ungrounded"),
    ]
    stats = bank.stats()
    assert stats.outcomes["rejected"] == 3 and stats.versions == 4
    assert stats.rejections == {"symbols": 1, "field_names": 1, "ungrounded": 1}
    assert bank.check() == []


def test_a_rejection_needs_the_slot_it_saw(bank: Bank) -> None:
    bank.insert(A, LESSON)
    with pytest.raises(SlotOccupied):  # an occupied slot is an error before any gate
        bank.insert(A, "!!!!", gate=WriteGate())
    with pytest.raises(SlotEmpty):
        bank.revise(B, "!!!!", gate=WriteGate())
    assert [e.outcome for e in bank.events()] == ["inserted"]


def test_export_import_round_trip(store, bank: Bank) -> None:
    bank.insert(A, "v1", metadata={"sources": [1, 2]})
    bank.revise(A, "v2")
    bank.revise(A, "v2")
    bank.insert(B, "b ünïcode")
    bank.revise(B, "")
    bank.insert(A_FAR, "<|im_start|> assistant text here", gate=WriteGate())
    buf = io.StringIO()
    lines = bank.export_jsonl(buf)
    assert lines == 1 + 4 + 6
    events = [json.loads(x) for x in buf.getvalue().splitlines() if '"event"' in x]
    assert [e.get("reason") for e in events] == [None] * 5 + ["markup"]
    assert "reason" not in events[0]  # events without one are written as before the gate
    buf.seek(0)
    copy = import_bank(store, buf, bank_id="copy")
    assert [v.model_dump() for v in store.all_versions("copy")] == [
        v.model_dump() for v in store.all_versions("default")
    ]
    strip = lambda evs: [e.model_dump(exclude={"seq"}) for e in evs]  # noqa: E731
    assert strip(copy.events()) == strip(bank.events())
    assert copy.stats().model_dump(exclude={"bank_id"}) == bank.stats().model_dump(
        exclude={"bank_id"}
    )
    assert copy.check() == []
    buf.seek(0)
    before = _state(bank)
    with pytest.raises(BankExists):
        import_bank(store, buf)
    assert _state(bank) == before


def _store_state(store) -> tuple:
    """Every bank in a store with all its versions and its log."""
    banks = sorted(store.list_banks(), key=lambda b: b.bank_id)
    return tuple(
        (
            info.model_dump(),
            [v.model_dump() for v in store.all_versions(info.bank_id)],
            [e.model_dump() for e in store.events(info.bank_id)],
        )
        for info in banks
    )


def _export_rows(bank: Bank) -> list[dict]:
    """An export of ``bank`` with A at v1, v2, a retention, a deletion (v3), v4; B at v1."""
    bank.insert(A, "v1")
    bank.revise(A, "v2")
    bank.revise(A, "v2")
    bank.revise(A, "")
    bank.insert(A, "v4")
    bank.insert(A_SIB, "12 + 12 = 24 = 24", gate=WriteGate())
    bank.insert(B, "b")
    buf = io.StringIO()
    bank.export_jsonl(buf)
    return [json.loads(x) for x in buf.getvalue().splitlines()]


def _edit(rows: list[dict], kind: str, match: dict, **changes) -> list[dict]:
    """Rows with ``changes`` applied to the one record of ``kind`` whose fields equal ``match``."""
    hits = [i for i, r in enumerate(rows) if r["type"] == kind and match.items() <= r.items()]
    assert len(hits) == 1, (kind, match, hits)
    out = [dict(r) for r in rows]
    out[hits[0]].update(changes)
    return out


def _version(sid: str, n: int) -> dict:
    return {"sid": sid, "version": n}


def _event(sid: str, outcome: str) -> dict:
    return {"sid": sid, "outcome": outcome}


BAD_EXPORTS = {
    "no bank record first": (lambda rows: rows[1:], "bank record"),
    "unknown record type": (lambda rows: [*rows, {"type": "nonsense"}], "nonsense"),
    "missing version 1": (
        lambda rows: [r for r in rows if not (r["type"] == "version" and r["version"] == 1)],
        "are not 1..",
    ),
    "SID outside the spec": (
        lambda rows: _edit(rows, "version", _version(B, 1), sid="<SID_L1_99>"),
        "SID_L1_99",
    ),
    "duplicate version": (
        lambda rows: [*rows, next(r for r in rows if r.get("version") == 2)],
        "are not 1..",
    ),
    "same slot spelt twice": (
        lambda rows: [*rows, {**next(r for r in rows if r.get("sid") == B), "sid": " " + B}],
        "canonical",
    ),
    "bank id with ':'": (lambda rows: _edit(rows, "bank", {}, bank_id="a:b"), "not allowed"),
    "snapshot id": (lambda rows: _edit(rows, "bank", {}, bank_id="x@t0"), "snapshot"),
    "no codebook hash": (lambda rows: _edit(rows, "bank", {}, codebook_hash=""), "codebook hash"),
    "malformed codebook hash": (
        lambda rows: _edit(rows, "bank", {}, codebook_hash="not-a-hash"),
        "codebook hash",
    ),
    "bad sizes": (lambda rows: _edit(rows, "bank", {}, sizes=[48, 0]), "size"),
    "tombstone with text": (
        lambda rows: _edit(rows, "version", _version(A, 3), payload="still here"),
        "tombstone",
    ),
    "live version without text": (
        lambda rows: _edit(rows, "version", _version(B, 1), payload="  "),
        "empty payload",
    ),
    "version 1 is a tombstone": (
        lambda rows: _edit(rows, "version", _version(B, 1), deleted=True, payload=""),
        "tombstone",
    ),
    "tombstone after a tombstone": (
        lambda rows: _edit(rows, "version", _version(A, 4), deleted=True, payload=""),
        "tombstone",
    ),
    "payload with NUL": (
        lambda rows: _edit(rows, "version", _version(B, 1), payload="a\x00b"),
        "NUL",
    ),
    "time not finite": (
        lambda rows: _edit(rows, "version", _version(B, 1), created_at=float("nan")),
        "finite",
    ),
    "event points at a missing version": (
        lambda rows: _edit(rows, "event", _event(B, "inserted"), version_after=7),
        "version 7",
    ),
    "event outcome does not fit its op": (
        lambda rows: _edit(rows, "event", _event(B, "inserted"), op="revise"),
        "revise",
    ),
    "deletion event at a live version": (
        lambda rows: _edit(rows, "event", _event(A, "deleted"), version_before=3),
        "deleted",
    ),
    "event for an empty slot": (
        lambda rows: [*rows, {**rows[-1], "seq": rows[-1]["seq"] + 1, "sid": A_FAR}],
        "not a live version",
    ),
    "one version claimed by two events": (
        lambda rows: _edit(
            rows, "event", _event(A, "retained"), outcome="revised", version_before=1
        ),
        "already written by event",
    ),
    "second bank record": (lambda rows: [*rows, rows[0]], "second bank record"),
    "rejection without a reason": (
        lambda rows: _edit(rows, "event", _event(A_SIB, "rejected"), reason=None),
        "reason",
    ),
    "reason on a revision": (
        lambda rows: _edit(rows, "event", _event(A, "revised"), reason="symbols"),
        "only a rejection",
    ),
    "rejection that wrote a version": (
        lambda rows: _edit(rows, "event", _event(A_SIB, "rejected"), version_after=1),
        "keeps the slot",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_EXPORTS))
def test_bad_import_changes_nothing(store, bank: Bank, name: str) -> None:
    mutate, needle = BAD_EXPORTS[name]
    bad = "\n".join(json.dumps(r) for r in mutate(_export_rows(bank)))
    before = _store_state(store)
    with pytest.raises(InvalidUpdate, match=needle):
        import_bank(store, io.StringIO(bad), bank_id=None if "id" in name else "copy")
    assert _store_state(store) == before


@pytest.mark.parametrize(
    ("target", "needle"),
    [("a:b", "not allowed"), ("x@t0", "snapshot"), ("", "not allowed"), ("bad id!", "allowed")],
)
def test_import_refuses_a_bad_target_id(store, bank: Bank, target: str, needle: str) -> None:
    good = "\n".join(json.dumps(r) for r in _export_rows(bank))
    before = _store_state(store)
    with pytest.raises(InvalidUpdate, match=needle):
        import_bank(store, io.StringIO(good), bank_id=target)
    assert _store_state(store) == before
    assert import_bank(store, io.StringIO(good), bank_id="a.b").check() == []


def test_import_of_an_unreadable_file_is_a_typed_error(store, tmp_path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"type": "bank", "bank_id": "caf\xe9"}\n')
    with pytest.raises(InvalidUpdate, match="UTF-8"):
        import_bank(store, path)
    assert _store_state(store) == ()


def test_check_passes_on_a_busy_bank(bank: Bank) -> None:
    rng = random.Random(0)
    sids = [DEFAULT_SPEC.make((rng.randrange(48), rng.randrange(16), 0, 0)) for _ in range(20)]
    for i in range(200):
        s = rng.choice(sids)
        cur = bank.get(s)
        if cur is None:
            bank.insert(s, f"text {i}")
        else:
            bank.revise(s, rng.choice([f"text {i}", cur.payload, ""]))
    assert bank.check() == []
    total = sum(len(bank.history(s)) for s in set(sids))
    assert total == bank.stats().versions


def test_concurrent_writers_lose_nothing(bank: Bank) -> None:
    sids = [A, A_SIB, B]
    for s in sids:
        bank.insert(s, "seed")
    writers, revisions = 8, 15
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(revisions):
                bank.revise(sids[(w + i) % len(sids)], f"writer {w} revision {i}", actor=f"w{w}")
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    written = {f"writer {w} revision {i}" for w in range(writers) for i in range(revisions)}
    stored = {v.payload for s in sids for v in bank.history(s)} - {"seed"}
    assert stored == written
    for s in sids:
        numbers = [v.version for v in bank.history(s)]
        assert numbers == list(range(1, len(numbers) + 1))
    assert bank.stats().events == len(sids) + writers * revisions
    assert bank.check() == []
