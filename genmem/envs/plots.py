"""PNG figures of evaluation results (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genmem.envs.evaluate import EvalReport

__all__ = ["plot_eval_summary", "plot_prefix_hits"]

_COLORS = {"none": "#8C8C8C", "tfidf": "#DD8452", "dense": "#55A868", "sid": "#4C72B0"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_eval_summary(report: EvalReport, metric_names: Sequence[str], path: Path) -> Path:
    """Grouped bars: each metric (and success) per method, with s/task in the legend."""
    plt = _pyplot()
    names = [*dict.fromkeys([*metric_names, "success"])]
    summaries = report.summaries
    width = 0.8 / max(1, len(summaries))
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(names), 3.2))
    for i, s in enumerate(summaries):
        rates = s.metrics | {"success": s.success_rate}
        values = [100 * rates.get(n, 0.0) for n in names]
        xs = [j + (i - (len(summaries) - 1) / 2) * width for j in range(len(names))]
        bars = ax.bar(
            xs,
            values,
            width,
            label=f"{s.method} (n={s.n}, {s.mean_seconds:.0f} s/task)",
            color=_COLORS.get(s.method),
        )
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 105)
    ax.set_ylabel("%")
    ax.set_title(f"{report.bench}: methods through the same graph")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_prefix_hits(reports: Mapping[str, Mapping[str, Any]], levels: int, path: Path) -> Path:
    """Cumulative prefix hit rate H_{1:l}@1 and @5 per level, one line per method."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    depth = list(range(1, levels + 1))
    for ax, key in zip(axes, ("prefix_at_1", "prefix_at_5"), strict=True):
        for method, row in reports.items():
            values = [100 * v for v in row["rates"][key]]
            ax.plot(depth, values, marker="o", label=method, color=_COLORS.get(method))
        ax.set_xticks(depth, [f"1:{d}" for d in depth])
        ax.set_xlabel("SID levels matched")
        ax.set_title(key.replace("prefix_at_", "prefix hit @"))
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("% of queries")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
