from __future__ import annotations

from pathlib import Path

import pytest

from genmem.experiments.evolution_plots import (
    plot_edit_distance,
    plot_operation_mix,
    plot_paired_difference,
    plot_probe_curves,
    plot_sid_lineage,
    plot_update_concentration,
)
from genmem.experiments.evolution_stats import (
    HIT_KEYS,
    BlockOperations,
    ProbeRecord,
    block_operations,
    checkpoint_scores,
    concentration_curve,
    edit_distance,
    paired_checkpoints,
    probe_values,
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


# -- probe scores: errors as failures, intervals, seeds pooled by task, pairs ---------------------


def _probe(c: int, method: str, task: str, ok: bool | None, depth: int | None = None):
    """A probe run: ``ok`` None is a run that errored; ``depth`` the reference prefix matched."""
    hits = None if depth is None else dict.fromkeys(HIT_KEYS, depth == 2)
    prefix = None if depth is None else {"at_1": depth, "at_5": depth}
    if ok is None:
        return ProbeRecord(
            checkpoint=c, method=method, id=task, error="boom", hits=hits, prefix_depth=prefix
        )
    return ProbeRecord(
        checkpoint=c, method=method, id=task, score=float(ok), success=ok, hits=hits,
        prefix_depth=prefix,
    )  # fmt: skip


def test_checkpoint_scores_count_errors_as_failures_and_pool_seeds_by_task() -> None:
    probes = [
        # t0, sid: task a twice (two seeds: one success, one failure), b errored with a depth
        # recorded before the crash (ignored: an errored run hits nothing), c fine.
        _probe(0, "sid", "a", True, depth=2),
        _probe(0, "sid", "a", False, depth=1),
        _probe(0, "sid", "b", None, depth=2),
        _probe(0, "sid", "b", True, depth=2),
        _probe(0, "sid", "c", True, depth=0),
        _probe(0, "sid", "c", True, depth=0),
        _probe(0, "none", "a", False),
        _probe(0, "none", "b", False),
        _probe(0, "none", "c", True),
    ]
    sid, none = checkpoint_scores(
        probes, checkpoints=1, block_size=5, methods=["sid", "none"], levels=2
    )
    # per task: a 0.5, b 0.5 (the crash is a failure), c 1.0
    assert (sid.n, sid.errors, sid.seeds) == (6, 1, 2)
    assert sid.score == pytest.approx(2 / 3) and sid.success_rate == pytest.approx(2 / 3)
    assert sid.hit_at_1 == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    at_1 = sid.prefix_hits["at_1"]  # type: ignore[index]
    assert [e.mean for e in at_1] == pytest.approx([(1 + 0.5 + 0) / 3, (0.5 + 0.5 + 0) / 3])
    lo, hi = sid.ci["score"]
    assert 0.5 <= lo <= 2 / 3 <= hi <= 1.0
    assert none.score == pytest.approx(1 / 3) and none.hit_at_1 is None
    assert none.prefix_hits is None and "hit_at_1" not in none.ci
    assert (sid.processed, sid.checkpoint) == (0, 0)


def test_paired_checkpoints_are_method_minus_baseline_by_task() -> None:
    probes = [
        _probe(1, "sid", "a", True),
        _probe(1, "sid", "b", True),
        _probe(1, "sid", "c", None),  # sid crashed where frozen succeeded: a loss
        _probe(1, "sid", "d", True),  # frozen never ran d: left out of the pair
        _probe(1, "frozen", "a", False),
        _probe(1, "frozen", "b", True),
        _probe(1, "frozen", "c", True),
    ]
    (pair,) = paired_checkpoints(probes, checkpoints=2, block_size=10, levels=4)
    assert (pair.checkpoint, pair.processed, pair.method, pair.baseline) == (1, 10, "sid", "frozen")
    score = pair.paired["score"]
    assert (score.wins, score.losses, score.ties, score.n) == (1, 1, 1, 3)
    assert score.diff == 0.0 and score.ci[0] <= 0.0 <= score.ci[1]
    assert probe_values(probes[2], 4) == {"score": 0.0, "success_rate": 0.0}


def test_probe_curves_draw_the_intervals(tmp_path: Path, errorbars) -> None:
    out = plot_probe_curves(
        {"sid": [(0, 0.5, 0.25, 0.75), (10, 0.6, 0.4, 0.9)], "frozen": [(0, 0.5), (10, 0.5)]},
        tmp_path / "probe.png",
    )
    assert _is_png(out)
    (bars,) = errorbars  # the curve without intervals gets none
    assert bars["y"] == pytest.approx([50.0, 60.0])
    assert [list(side) for side in bars["yerr"]] == [
        pytest.approx([25.0, 20.0]),
        pytest.approx([25.0, 30.0]),
    ]
    diff = plot_paired_difference([(0, 0.0, -0.1, 0.1), (10, 0.2, 0.05, 0.3)], tmp_path / "d.png")
    assert _is_png(diff) and len(errorbars) == 2
    assert [list(side) for side in errorbars[1]["yerr"]] == [
        pytest.approx([10.0, 15.0]),
        pytest.approx([10.0, 10.0]),
    ]
    assert _is_png(plot_paired_difference([], tmp_path / "empty.png"))
