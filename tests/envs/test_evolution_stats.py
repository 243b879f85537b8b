from __future__ import annotations

from pathlib import Path

import pytest

from genmem.envs.evolution_plots import (
    plot_edit_distance,
    plot_operation_mix,
    plot_probe_curves,
    plot_sid_lineage,
    plot_update_concentration,
)
from genmem.envs.evolution_stats import (
    BlockOperations,
    block_operations,
    concentration_curve,
    edit_distance,
    top_share,
)
from genmem.memory.records import Event

SID_A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
SID_B = "<SID_L1_5><SID_L2_2><SID_L3_0><SID_L4_4>"


def _event(seq: int, outcome: str, sid: str = SID_A) -> Event:
    op = "insert" if outcome == "inserted" else "revise"
    return Event(
        seq=seq,
        op=op,
        outcome=outcome,
        sid=sid,
        version_before=None if op == "insert" else 1,
        version_after=None if outcome == "deleted" else 2,
        time=float(seq),
        actor="test",
    )


def test_edit_distance_hand_values() -> None:
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "") == 0
    assert edit_distance("abc", "") == 3
    assert edit_distance("same", "same") == 0


def test_block_operations_counts_and_means() -> None:
    events = [
        _event(1, "inserted"),
        _event(2, "inserted", SID_B),
        _event(3, "revised"),
        _event(4, "retained"),
        _event(5, "deleted", SID_B),
    ]
    ops = block_operations(2, 8, events, [("kitten", "sitting"), ("abc", "")])
    assert (ops.block, ops.queries) == (2, 8)
    assert (ops.inserted, ops.revised, ops.retained, ops.deleted) == (2, 1, 1, 1)
    assert ops.no_write == 3
    # distances 3 and 3; ratios 3/7 and 3/3
    assert ops.mean_edit_distance == pytest.approx(3.0)
    assert ops.mean_edit_ratio == pytest.approx((3 / 7 + 1.0) / 2)


def test_block_operations_without_edits_or_events() -> None:
    ops = block_operations(1, 4, [], [])
    assert ops.no_write == 4
    assert ops.inserted == ops.revised == ops.retained == ops.deleted == 0
    assert ops.mean_edit_distance is None and ops.mean_edit_ratio is None
    assert block_operations(1, 0, [], [("", "")]).mean_edit_ratio == 0.0


def test_block_operations_rejects_more_events_than_queries() -> None:
    with pytest.raises(ValueError, match="2 events but only 1 queries"):
        block_operations(1, 1, [_event(1, "inserted"), _event(2, "revised")], [])


def test_concentration_curve() -> None:
    assert concentration_curve({"a": 3, "b": 1}) == ([0.0, 0.5, 1.0], [0.0, 0.75, 1.0])
    # order of the mapping does not matter; inactive SIDs are left out
    assert concentration_curve({"z": 0, "b": 1, "a": 3}) == ([0.0, 0.5, 1.0], [0.0, 0.75, 1.0])
    assert concentration_curve({}) == ([0.0], [0.0])
    assert concentration_curve({"a": 0}) == ([0.0], [0.0])
    xs, ys = concentration_curve({s: 1 for s in "abcd"})
    assert xs == ys == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_top_share() -> None:
    counts = {"a": 6, "b": 2, "c": 1, "d": 1, "e": 0}
    # 4 active SIDs: ceil(0.2 * 4) = 1 -> 6 of 10
    assert top_share(counts) == pytest.approx(0.6)
    assert top_share(counts, 0.5) == pytest.approx(0.8)
    assert top_share(counts, 1.0) == pytest.approx(1.0)
    # 0.7 * 10 is 7.000000000000001 in floats; still seven SIDs
    assert top_share({str(i): 1 for i in range(10)}, 0.7) == pytest.approx(0.7)
    assert top_share({}) == 0.0
    with pytest.raises(ValueError, match="fraction"):
        top_share(counts, 0.0)


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:4] == b"\x89PNG"


def test_plots_write_png(tmp_path: Path) -> None:
    blocks = [
        block_operations(1, 5, [_event(1, "inserted"), _event(2, "revised")], [("ab", "abc")]),
        block_operations(2, 5, [_event(3, "retained")], []),
    ]
    outputs = [
        plot_probe_curves(
            {"sid": [(0, 0.2), (10, 0.5)], "none": [(0, 0.2), (10, 0.25)]},
            tmp_path / "probe.png",
            metric="success",
        ),
        plot_sid_lineage(
            [(0, SID_A), (2, SID_A), (3, SID_B)],
            [(0, SID_A, "inserted"), (1, SID_A, "revised"), (3, SID_B, "deleted")],
            tmp_path / "lineage.png",
        ),
        plot_update_concentration({SID_A: 3, SID_B: 1}, tmp_path / "conc.png"),
        plot_operation_mix(blocks, tmp_path / "mix.png"),
        plot_edit_distance(blocks, tmp_path / "edit.png"),
    ]
    for out in outputs:
        assert out.exists() and _is_png(out)


def test_plots_handle_empty_inputs(tmp_path: Path) -> None:
    outputs = [
        plot_probe_curves({}, tmp_path / "probe.png"),
        plot_probe_curves({"sid": []}, tmp_path / "probe2.png"),
        plot_sid_lineage([], [], tmp_path / "lineage.png"),
        plot_update_concentration({}, tmp_path / "conc.png"),
        plot_operation_mix([], tmp_path / "mix.png"),
        plot_edit_distance([], tmp_path / "edit.png"),
        plot_edit_distance([BlockOperations(block=1, queries=3, no_write=3)], tmp_path / "e2.png"),
    ]
    for out in outputs:
        assert _is_png(out)


def test_sid_lineage_many_rows_unlabelled(tmp_path: Path) -> None:
    sids = [f"<SID_L1_{i}><SID_L2_0>" for i in range(45)]
    out = plot_sid_lineage(
        [(i, s) for i, s in enumerate(sids)],
        [(i, s, "inserted") for i, s in enumerate(sids)],
        tmp_path / "many.png",
    )
    assert _is_png(out)
