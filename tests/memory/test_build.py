"""``build_bank`` through the write gate: junk records, refused merges, provenance grounding."""

from __future__ import annotations

from collections.abc import Sequence

from genmem.memory.bank import Bank
from genmem.memory.build import ExperienceRecord, build_bank, record_sources
from genmem.memory.sid import DEFAULT_SPEC, SID

S1, S2, S3 = (DEFAULT_SPEC.make(c) for c in [(1, 0, 0, 0), (2, 0, 0, 0), (3, 0, 0, 0)])
QUESTION = "A baker sells 12 loaves at $3 each. How much money does she make?"
GOOD = "Multiply the number of loaves sold by the price of each loaf to get the money made."
OTHER = "Check the units: loaves times dollars per loaf gives dollars, the money the baker makes."


def _rec(text: str, **meta: object) -> ExperienceRecord:
    return ExperienceRecord(text=text, metadata={"question": QUESTION, **meta})


def _bad_merge(sid: SID, records: Sequence[ExperienceRecord]) -> str:
    return (
        "merge merge merge merge merge merge merge merge merge"
        if len(records) > 1
        else (records[0].text)
    )


def test_junk_records_are_refused_and_counted(bank: Bank) -> None:
    records = [
        _rec(GOOD),
        _rec("15,000,000,000,000"),
        _rec("Water the tomato plants every morning in summer."),
    ]
    report = build_bank(bank, records, [S1, S2, S3], progress=False)
    assert report.inserted == 1 and report.rejected == {"symbols": 1, "ungrounded": 1}
    assert [str(e.sid) for e in bank.entries()] == [str(S1)]
    assert bank.stats().rejections == {"symbols": 1, "ungrounded": 1}
    assert bank.check() == []


def test_a_refused_merge_falls_back_to_the_records_themselves(bank: Bank) -> None:
    report = build_bank(
        bank,
        [_rec(GOOD, index=0), _rec(OTHER, index=1)],
        [S1, S1],
        consolidate=_bad_merge,
        progress=False,
    )
    assert report.rejected == {"repetition": 1} and report.merge_fallbacks == 1
    entry = bank.get(S1)
    assert entry is not None and GOOD in entry.payload and OTHER in entry.payload
    assert entry.metadata["merge_rejected"] == "repetition"
    assert [e.outcome for e in bank.events()] == ["rejected", "inserted"]


def test_without_the_gate_everything_is_written(bank: Bank) -> None:
    report = build_bank(bank, [_rec("15,000,000,000,000")], [S1], progress=False, gate=None)
    assert report.inserted == 1 and report.rejected == {}


def test_sources_are_provenance_first() -> None:
    assert record_sources([_rec(GOOD)]) == [QUESTION]
    assert record_sources([ExperienceRecord(text=GOOD)]) == [GOOD]


def test_a_join_of_good_records_is_kept_though_their_labels_repeat(bank: Bank) -> None:
    # Found building a procedure seed bank: two digests share the template line "Check: ...",
    # which the field check read as "2 of 4 fields hold the same text" in their join.
    check = "Check: redo each calculation and make sure the result answers the question asked."
    first = f"Procedure that solved it:\n1. The baker sells 12 loaves at $3: 12 * 3 = 36.\n{check}"
    second = f"Procedure that solved it:\n1. Each loaf brings 3 dollars: 10 * 3 = 30.\n{check}"
    records = [_rec(f"{first}\nResult: 36"), _rec(f"{second}\nResult: 30")]
    report = build_bank(bank, records, [S1, S1], progress=False)
    assert report.inserted == 1 and report.rejected == {} and report.merge_fallbacks == 0
    assert first in bank.get(S1).payload and second in bank.get(S1).payload


def test_an_entry_says_who_wrote_it_when_its_records_agree(bank: Bank) -> None:
    records = [
        _rec(GOOD, writer="template"),
        _rec(OTHER, writer="template"),
        _rec(GOOD, writer="template"),
        _rec(OTHER, writer="model"),
    ]
    build_bank(bank, records, [S1, S1, S2, S2], progress=False)
    one, mixed = bank.get(S1), bank.get(S2)
    assert one is not None and one.metadata["writer"] == "template"
    assert mixed is not None and "writer" not in mixed.metadata  # each source still says
    assert [s["writer"] for s in mixed.metadata["sources"]] == ["template", "model"]
