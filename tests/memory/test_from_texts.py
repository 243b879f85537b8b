"""A bank from plain texts in one call (real default encoder, real SQLite banks)."""

from __future__ import annotations

import pytest

from genmem.errors import CodebookError, CodebookMismatch
from genmem.memory.build import ExperienceRecord
from genmem.memory.from_texts import PAPER_SIZES_FROM, bank_from_texts, sizes_for
from genmem.memory.location import open_bank
from genmem.memory.rqkmeans import Codebooks
from genmem.policies.addressing import bank_quantizer

LESSONS = [
    "To split a bill evenly, add the tip to the total first, then divide by the number of people.",
    "For distance, multiply speed by time and keep the units the same throughout.",
    "When items come in packs, divide the count needed by the pack size and round up.",
    "For an average, add the values and divide by how many values there are.",
    "Convert every duration to minutes before adding them up.",
    "A percentage discount comes off the original price, not the reduced one.",
]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "cache"))


def test_sizes_grow_with_the_texts_up_to_the_papers() -> None:
    assert sizes_for(2) == (2, 2)
    assert sizes_for(6) == (3, 3)
    assert sizes_for(100) == (10, 10)
    assert sizes_for(PAPER_SIZES_FROM) == (48, 16, 8, 8)
    with pytest.raises(ValueError, match="at least 2 texts"):
        sizes_for(1)


def test_one_call_fits_codebooks_and_fills_the_bank(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/bank.db?bank=lessons"
    built = bank_from_texts(LESSONS, url)
    assert built.fitted and built.codebooks.spec.sizes == (3, 3)
    report = built.report
    assert report.records == 6 and report.rejected == {}
    assert report.inserted == report.slots == len(built.bank.occupied())
    # every lesson is in the bank, at the SID its text quantises to
    stored = " ".join(built.bank.get(s).payload for s in built.bank.occupied())
    assert all(lesson in stored for lesson in LESSONS)
    # the codebooks are kept by hash: the quantizer addresses from the bank alone
    reopened = open_bank(url)
    assert Codebooks.recall(reopened.codebook_hash) is not None
    sid = bank_quantizer(reopened).generate(LESSONS[2], k=1)[0].sid
    assert LESSONS[2] in reopened.get(sid).payload


def test_a_second_call_reuses_the_banks_codebooks_and_keeps_what_is_there(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/bank.db?bank=lessons"
    first = bank_from_texts(LESSONS[:4], url)
    before = {s: first.bank.get(s).payload for s in first.bank.occupied()}
    second = bank_from_texts([ExperienceRecord(text=LESSONS[4], metadata={"query": "q"})], url)
    assert not second.fitted and second.codebooks.hash == first.codebooks.hash
    assert second.report.inserted + second.report.skipped_occupied == 1
    for sid, payload in before.items():  # nothing already there changed
        assert second.bank.get(sid).payload == payload


def test_given_codebooks_are_used_and_other_ones_refused(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/bank.db?bank=lessons"
    built = bank_from_texts(LESSONS, url)
    folder = built.codebooks.save(tmp_path / "books")
    again = bank_from_texts(LESSONS[:2], f"sqlite:///{tmp_path}/two.db?bank=b", codebooks=folder)
    assert not again.fitted and again.codebooks.hash == built.codebooks.hash
    other = bank_from_texts(LESSONS[:4], f"sqlite:///{tmp_path}/other.db?bank=o").codebooks
    events = built.bank.stats().events
    with pytest.raises(CodebookMismatch):
        bank_from_texts(LESSONS[:1], url, codebooks=other)
    assert open_bank(url).stats().events == events


def test_bad_input_is_refused_and_changes_nothing(tmp_path, monkeypatch) -> None:
    path = tmp_path / "bank.db"
    url = f"sqlite:///{path}?bank=lessons"
    with pytest.raises(ValueError, match="at least one text"):
        bank_from_texts([], url)
    with pytest.raises(ValueError, match="non-empty"):
        bank_from_texts(["a lesson", "   "], url)
    with pytest.raises(ValueError, match="at least 2 texts"):
        bank_from_texts(["only one lesson"], url)
    assert not path.exists()
    built = bank_from_texts(LESSONS, url)
    with pytest.raises(ValueError, match=r"sizes=.*fixed"):
        bank_from_texts(LESSONS[:2], url, sizes=(2, 2))
    # a bank whose codebooks this machine has never seen: say so, write nothing
    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "elsewhere"))
    events = built.bank.stats().events
    with pytest.raises(CodebookError, match="has not seen"):
        bank_from_texts(LESSONS[:2], url)
    assert open_bank(url).stats().events == events


def test_the_write_gate_keeps_junk_out(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/bank.db?bank=lessons"
    built = bank_from_texts([*LESSONS, "ok ok ok ok ok ok ok ok"], url)
    assert sum(built.report.rejected.values()) == 1
    stored = " ".join(built.bank.get(s).payload for s in built.bank.occupied())
    assert "ok ok ok" not in stored
