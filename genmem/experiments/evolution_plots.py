"""PNG figures of an online memory self-evolution run (matplotlib, headless)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from genmem.experiments.evolution_stats import (
    OPS,
    BlockOperations,
    concentration_curve,
    top_share,
)
from genmem.experiments.plots import _pyplot

__all__ = [
    "plot_edit_distance",
    "plot_operation_mix",
    "plot_paired_difference",
    "plot_probe_curves",
    "plot_sid_lineage",
    "plot_update_concentration",
]

_DPI = 120
_MAX_LABELLED_ROWS = 40
_OP_COLORS = {
    "inserted": "#55A868",
    "revised": "#4C72B0",
    "retained": "#8172B3",
    "deleted": "#C44E52",
    "rejected": "#DD8452",
    "no_write": "#CCCCCC",
}
_SID_CODE = re.compile(r"<SID_L\d+_(\d+)>")


def _short_sid(sid: str) -> str:
    """'<SID_L1_3><SID_L2_0>...' -> '3-0-...'; other strings unchanged."""
    codes = _SID_CODE.findall(sid)
    return "-".join(codes) if codes else sid


def _note_empty(ax: Any, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")


def _integer_x(ax: Any) -> None:
    """Query counts on the x axis: integer ticks only."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _save(plt: Any, fig: Any, path: Path) -> Path:
    path = Path(path)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def plot_probe_curves(
    curves: Mapping[str, Sequence[tuple[float, ...]]],
    path: Path,
    *,
    metric: str = "task score",
) -> Path:
    """Probe score (%) against stream queries processed, one line per method.

    A point is ``(processed, score)`` or ``(processed, score, lo, hi)``; with an interval the
    line gets error bars and a light band.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    drawn = False
    for i, (method, points) in enumerate(curves.items()):
        if not points:
            continue
        pts = sorted(points)
        xs = [p[0] for p in pts]
        ys = [100 * p[1] for p in pts]
        (line,) = ax.plot(  # markers shrink method by method, so equal scores stay visible
            xs,
            ys,
            marker="osD^vx"[i % 6],
            markersize=max(9 - 1.2 * i, 3),
            markerfacecolor="none",
            label=method,
        )
        if all(len(p) == 4 for p in pts):
            lo = [100 * p[2] for p in pts]
            hi = [100 * p[3] for p in pts]
            below = [max(y - low, 0.0) for y, low in zip(ys, lo, strict=True)]
            above = [max(high - y, 0.0) for y, high in zip(ys, hi, strict=True)]
            # a small sideways shift per method keeps overlapping bars apart
            shifted = [x + 0.01 * (i - len(curves) / 2) * max(max(xs), 1) for x in xs]
            ax.errorbar(
                shifted, ys, yerr=[below, above], fmt="none", ecolor=line.get_color(),
                elinewidth=0.8, capsize=2,
            )  # fmt: skip
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.08, linewidth=0)
        drawn = True
    if drawn:
        ax.legend(fontsize=8)
    else:
        _note_empty(ax, "no checkpoints")
    ax.set_ylim(-4, 104)  # a line at 0 stays above the axis
    _integer_x(ax)
    ax.set_xlabel("stream queries processed")
    ax.set_ylabel(f"{metric} (%)")
    ax.set_title(f"Probe {metric} during self-evolution (bars: bootstrap interval)", fontsize=10)
    return _save(plt, fig, path)


def plot_paired_difference(
    points: Sequence[tuple[float, float, float, float]],
    path: Path,
    *,
    label: str = "sid - frozen",
    metric: str = "task score",
) -> Path:
    """A paired difference (percentage points) with its interval at each checkpoint."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.axhline(0.0, color="#999999", lw=1, ls="--")
    if points:
        pts = sorted(points)
        xs = [p[0] for p in pts]
        diff = [100 * p[1] for p in pts]
        lo = [100 * p[2] for p in pts]
        hi = [100 * p[3] for p in pts]
        ax.fill_between(xs, lo, hi, color=_OP_COLORS["revised"], alpha=0.2, linewidth=0)
        ax.errorbar(
            xs,
            diff,
            yerr=[[max(d - a, 0.0) for d, a in zip(diff, lo, strict=True)],
                  [max(b - d, 0.0) for d, b in zip(diff, hi, strict=True)]],
            marker="o", color=_OP_COLORS["revised"], capsize=3, label=label,
        )  # fmt: skip
        ax.legend(fontsize=8)
        ax.set_ylim(min(-5.0, *lo) - 5, max(5.0, *hi) + 5)
    else:
        _note_empty(ax, "no paired checkpoints")
    _integer_x(ax)
    ax.set_xlabel("stream queries processed")
    ax.set_ylabel(f"{metric} difference (points)")
    ax.set_title(f"Paired difference by probe task: {label}", fontsize=10)
    return _save(plt, fig, path)


def plot_sid_lineage(
    reads: Sequence[tuple[int, str]],
    writes: Sequence[tuple[int, str, str]],
    path: Path,
) -> Path:
    """Reads (hollow) and writes (filled, coloured by outcome) of each SID along the stream."""
    plt = _pyplot()
    marks = sorted(
        [(q, 0, sid, "read") for q, sid in reads] + [(q, 1, sid, o) for q, sid, o in writes]
    )
    rows: dict[str, int] = {}
    for _, _, sid, _ in marks:
        rows.setdefault(sid, len(rows))
    fig, ax = plt.subplots(figsize=(8, min(2.4 + 0.18 * len(rows), 12)))
    if not marks:
        _note_empty(ax, "no reads or writes")
        ax.set_xlabel("stream query")
        ax.set_ylabel("SID")
        ax.set_title("SID lineage")
        return _save(plt, fig, path)

    # a thin line per SID makes reuse after a revision visible as one continuous row
    for sid, row in rows.items():
        qs = [q for q, _, s, _ in marks if s == sid]
        if len(qs) > 1:
            ax.plot([qs[0], qs[-1]], [row, row], color="#BBBBBB", lw=0.6, zorder=1)
    if reads:
        ax.scatter(
            [q for q, _ in reads],
            [rows[s] for _, s in reads],
            facecolors="none",
            edgecolors="#333333",
            s=28,
            lw=0.8,
            label="read",
            zorder=2,
        )
    for outcome in (*OPS[:-1], *sorted({o for _, _, o in writes} - set(OPS))):
        pts = [(q, rows[s]) for q, s, o in writes if o == outcome]
        if pts:
            ax.scatter(
                [q for q, _ in pts],
                [r for _, r in pts],
                color=_OP_COLORS.get(outcome, "#937860"),
                marker="s" if outcome == "deleted" else "o",
                s=22,
                label=outcome,
                zorder=3,
            )
    if len(rows) <= _MAX_LABELLED_ROWS:
        ax.set_yticks(list(rows.values()), [_short_sid(s) for s in rows], fontsize=7)
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"SID ({len(rows)} rows, by first appearance)")
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("stream query")
    if len(rows) <= _MAX_LABELLED_ROWS:
        ax.set_ylabel("SID")
    ax.set_title("SID lineage: reads and writes per address")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(plt, fig, path)


def plot_update_concentration(counts: Mapping[str, int], path: Path) -> Path:
    """Concentration curve of events over SIDs against the uniform diagonal."""
    plt = _pyplot()
    xs, ys = concentration_curve(counts)
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    ax.plot([0, 1], [0, 1], ls="--", color="#999999", lw=1, label="uniform")
    if len(xs) > 1:
        n = len(xs) - 1
        ax.plot(xs, ys, marker="o" if n <= 30 else None, ms=3, label=f"events ({n} SIDs)")
    else:
        _note_empty(ax, "no events")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("fraction of active SIDs (most active first)")
    ax.set_ylabel("cumulative share of events")
    share = 100 * top_share(counts)
    ax.set_title(f"Update concentration\ntop 20% of SIDs get {share:.0f}% of events", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path)


def plot_operation_mix(blocks: Sequence[BlockOperations], path: Path) -> Path:
    """Stacked bars per block: inserted, revised, retained, deleted, rejected, no-write queries."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(3.8 + 0.5 * max(len(blocks), 4), 3.4))
    xs = [b.block for b in blocks]
    bottom = [0] * len(blocks)
    if blocks:
        for op in OPS:
            values = [getattr(b, op) for b in blocks]
            label = "revised (content-changing)" if op == "revised" else op.replace("_", " ")
            ax.bar(xs, values, bottom=bottom, color=_OP_COLORS[op], label=label)
            bottom = [a + v for a, v in zip(bottom, values, strict=True)]
        ax.set_xticks(xs)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # query counts
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        _note_empty(ax, "no blocks")
    ax.set_xlabel("block")
    ax.set_ylabel("queries")
    ax.set_title("Memory operations per block")
    return _save(plt, fig, path)


def plot_edit_distance(blocks: Sequence[BlockOperations], path: Path) -> Path:
    """Mean edit distance of revisions/deletions per block, labelled with the normalised ratio."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.8 + 0.5 * max(len(blocks), 4), 3.4))
    if blocks:
        xs = [b.block for b in blocks]
        values = [b.mean_edit_distance or 0.0 for b in blocks]
        bars = ax.bar(xs, values, color=_OP_COLORS["revised"])
        labels = [
            "n/a"
            if b.mean_edit_distance is None
            else f"{b.mean_edit_distance:.1f}\n({100 * (b.mean_edit_ratio or 0.0):.0f}%)"
            for b in blocks
        ]
        ax.bar_label(bars, labels=labels, fontsize=7)
        ax.set_xticks(xs)
        ax.set_ylim(0, max([*values, 1.0]) * 1.25)
    else:
        _note_empty(ax, "no blocks")
    ax.set_xlabel("block")
    ax.set_ylabel("mean Levenshtein distance (chars)")
    ax.set_title("Edit size of revisions/deletions\n(label: distance, % of length)", fontsize=10)
    return _save(plt, fig, path)
