from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from genmem.errors import CodebookError, InvalidSID
from genmem.experiments.bank_stats import (
    THRESHOLDS,
    BankStatistics,
    bank_statistics,
    percentiles,
    plot_code_utilisation,
    statistics_markdown,
)
from genmem.memory.sid import SIDSpec

SPEC = SIDSpec(sizes=(4, 2))
# Four records, lengths 1000/1500/2500/5000 chars (10,000 in all); the first three share SID
# (0, 1) and became one entry of 4096 chars, the last is alone on (2, 0) in 904 chars.
RECORDS = [
    {"text": "a" * 1000, "source": "alfworld", "type": "success", "evidence": "trajectory"},
    {"text": "b" * 1500, "source": "alfworld", "type": "failure", "evidence": "trajectory"},
    {"text": "c" * 2500, "source": "webshop", "type": "success", "evidence": "trajectory"},
    {"text": "d" * 5000, "source": "alfworld", "evidence": "trajectory"},
]
ENTRIES = [
    {"sid": "<SID_L1_0><SID_L2_1>", "payload": "x" * 4096, "n_records": 3},
    {"sid": "<SID_L1_2><SID_L2_0>", "payload": "y" * 904, "n_records": 1},
]
CODES = np.array([[0, 1], [0, 1], [0, 1], [2, 0]])
# Both levels split the records 3:1.
H = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))


@pytest.fixture(scope="module")
def stats() -> BankStatistics:
    return bank_statistics(RECORDS, ENTRIES, CODES, SPEC)


def test_percentiles_of_known_lists() -> None:
    p = percentiles(list(range(1, 11)))
    assert p.n == 10
    assert p.mean == pytest.approx(5.5)
    assert p.p50 == pytest.approx(5.5)
    assert p.p90 == pytest.approx(9.1)
    assert p.p95 == pytest.approx(9.55)
    assert p.p99 == pytest.approx(9.91)
    assert p.max == 10.0
    one = percentiles([7])
    assert (one.p50, one.p99, one.max, one.mean) == (7.0, 7.0, 7.0, 7.0)


def test_percentiles_of_empty_list_are_zero() -> None:
    p = percentiles([])
    assert p.n == 0
    assert p.mean == p.p50 == p.p90 == p.p95 == p.p99 == p.max == 0.0


def test_counts_and_composition(stats: BankStatistics) -> None:
    assert (stats.records, stats.entries) == (4, 2)
    assert {k: (v.count, v.share) for k, v in stats.by_source.items()} == {
        "alfworld": (3, 0.75),
        "webshop": (1, 0.25),
    }
    assert list(stats.by_source) == ["alfworld", "webshop"]  # most frequent first
    assert {k: v.count for k, v in stats.by_type.items()} == {
        "success": 2,
        "failure": 1,
        "unknown": 1,
    }
    assert stats.by_evidence["trajectory"].share == 1.0
    for shares in (stats.by_source, stats.by_type, stats.by_evidence):
        assert sum(s.share for s in shares.values()) == pytest.approx(1.0)
        assert sum(s.count for s in shares.values()) == stats.records


def test_lengths_and_compression(stats: BankStatistics) -> None:
    r = stats.record_chars
    assert (r.n, r.mean, r.p50, r.max) == (4, 2500.0, 2000.0, 5000.0)
    assert r.p90 == pytest.approx(4250.0)
    assert r.p95 == pytest.approx(4625.0)
    assert r.p99 == pytest.approx(4925.0)
    assert (stats.entry_chars.n, stats.entry_chars.max) == (2, 4096.0)
    assert stats.total_record_chars == 10_000
    assert stats.total_entry_chars == 5_000
    assert stats.compression == pytest.approx(2.0)


def test_merged_per_entry(stats: BankStatistics) -> None:
    m = stats.merged_per_entry
    assert (m.n, m.mean, m.p50, m.max) == (2, 2.0, 2.0, 3.0)
    assert m.p90 == pytest.approx(2.8)


def test_long_tail_counts_at_thresholds(stats: BankStatistics) -> None:
    assert [row.threshold for row in stats.long_tail] == list(THRESHOLDS)
    counts = {row.threshold: (row.count, row.fraction) for row in stats.long_tail}
    assert counts[1024] == (1, 0.5)
    assert counts[4096] == (1, 0.5)  # >= is inclusive: the 4096-char entry counts
    assert counts[8192] == (0, 0.0)
    assert counts[32768] == (0, 0.0)


def test_utilisation_from_codes(stats: BankStatistics) -> None:
    l1, l2 = stats.utilisation
    assert (l1.level, l1.size, l1.used) == (1, 4, 2)
    assert l1.shares == [0.75, 0.0, 0.25, 0.0]
    assert (l2.level, l2.size, l2.used) == (2, 2, 2)
    assert l2.shares == [0.25, 0.75]
    for u in stats.utilisation:
        assert sum(u.shares) == pytest.approx(1.0)
        assert u.effective_codes == pytest.approx(math.exp(H))
    assert l1.entropy_norm == pytest.approx(H / math.log(4))
    assert l2.entropy_norm == pytest.approx(H / math.log(2))
    assert stats.dui == pytest.approx((H / math.log(4) + H / math.log(2)) / 2)
    assert stats.used_leaves == 2
    assert stats.singleton_fraction == pytest.approx(0.25)


def test_compression_is_none_when_entries_are_empty_text() -> None:
    entries = [{"sid": "<SID_L1_0><SID_L2_1>", "payload": "", "n_records": 4}]
    s = bank_statistics(RECORDS, entries, CODES, SPEC)
    assert s.compression is None
    assert "n/a" in statistics_markdown(s)


def test_markdown_contains_the_numbers(stats: BankStatistics) -> None:
    md = statistics_markdown(stats)
    assert "| source | alfworld | 3 | 75.0 |" in md
    assert "| type | unknown | 1 | 25.0 |" in md
    assert "| records | 4 | 2000 | 4625 | 4925 | 5000 |" in md
    assert "| entries | 2 |" in md
    assert "| 10000 | 5000 | 2.00x |" in md
    assert "| 2 | 2 | 2.80 | 2.90 | 2.98 | 3 |" in md
    assert "| >= 4096 | 1 | 50.0 |" in md
    assert "| >= 8192 | 0 | 0.0 |" in md
    assert f"| L1 | 4 | 2 | {H / math.log(4):.3f} | {math.exp(H):.1f} |" in md
    assert f"| L2 | 2 | 2 | {H / math.log(2):.3f} |" in md
    for heading in ("Composition", "Length", "merged", "Long tail", "utilisation"):
        assert heading in md


def test_plot_writes_a_png(stats: BankStatistics, tmp_path: Path) -> None:
    out = plot_code_utilisation(stats, tmp_path / "util.png")
    assert out == tmp_path / "util.png"
    assert out.read_bytes().startswith(b"\x89PNG")


def test_plot_with_an_odd_number_of_levels(tmp_path: Path) -> None:
    spec = SIDSpec(sizes=(3, 2, 1))
    codes = np.array([[0, 0, 0], [1, 1, 0], [2, 1, 0], [0, 0, 0]])
    s = bank_statistics(RECORDS, ENTRIES, codes, spec)
    assert s.utilisation[2].entropy_norm == 1.0  # a one-code level is balanced by definition
    out = plot_code_utilisation(s, tmp_path / "three.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("records", "entries", "match"),
    [([], ENTRIES, "experience record"), (RECORDS, [], "bank entry")],
)
def test_empty_input_raises(records: list, entries: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bank_statistics(records, entries, CODES, SPEC)


def test_bad_codes_raise_codebook_error() -> None:
    with pytest.raises(CodebookError):
        bank_statistics(RECORDS, ENTRIES, np.array([[0, 1, 0]] * 4), SPEC)  # wrong levels
    with pytest.raises(InvalidSID):
        bank_statistics(RECORDS, ENTRIES, np.array([[4, 0]] * 4), SPEC)  # code out of range
    with pytest.raises(CodebookError, match="one row of codes per record"):
        bank_statistics(RECORDS, ENTRIES, CODES[:3], SPEC)
