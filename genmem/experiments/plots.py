"""PNG figures of evaluation results (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genmem.envs.stats import Estimate
    from genmem.experiments.evaluate import EvalReport
    from genmem.experiments.fusion import FusionReport
    from genmem.experiments.symbols import SymbolsReport

__all__ = [
    "plot_estimates",
    "plot_eval_summary",
    "plot_fusion",
    "plot_prefix_hits",
    "plot_symbols",
]

_COLORS = {"none": "#8C8C8C", "tfidf": "#DD8452", "dense": "#55A868", "sid": "#4C72B0"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _yerr(values: Sequence[float], cis: Sequence[Sequence[float] | None]) -> list[list[float]]:
    """Matplotlib's asymmetric error bars (below, above) from intervals in the values' units."""
    below = [v - ci[0] if ci else 0.0 for v, ci in zip(values, cis, strict=True)]
    above = [ci[1] - v if ci else 0.0 for v, ci in zip(values, cis, strict=True)]
    return [[max(b, 0.0) for b in below], [max(a, 0.0) for a in above]]


def plot_estimates(
    table: Mapping[str, Estimate | None], path: Path, *, ylabel: str, title: str
) -> Path:
    """One bar per named estimate (a share in [0, 1], drawn in %) with its bootstrap interval;
    a missing estimate is left out."""
    plt = _pyplot()
    keys = [k for k, e in table.items() if e is not None]
    values = [100 * table[k].mean for k in keys]  # type: ignore[union-attr]
    cis = [[100 * c for c in table[k].ci] for k in keys]  # type: ignore[union-attr]
    long = max((len(k) for k in keys), default=0) > 10
    fig, ax = plt.subplots(figsize=(max(5.0, 0.85 * len(keys)), 4.0))
    ax.bar(range(len(keys)), values, yerr=_yerr(values, cis), capsize=3, color="#6a8caf")
    if long:
        ax.set_xticks(range(len(keys)), keys, rotation=35, ha="right", fontsize=8)
    else:
        ax.set_xticks(range(len(keys)), keys)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_eval_summary(report: EvalReport, metric_names: Sequence[str], path: Path) -> Path:
    """Grouped bars: each metric (and success) per method with its bootstrap interval."""
    plt = _pyplot()
    names = [*dict.fromkeys([*metric_names, "success"])]
    summaries = report.summaries
    width = 0.8 / max(1, len(summaries))
    fig, ax = plt.subplots(figsize=(3.8 + 1.4 * len(names), 3.4))
    for i, s in enumerate(summaries):
        rates = s.metrics | {"success": s.success_rate}
        values = [100 * rates.get(n, 0.0) for n in names]
        cis = [s.metrics_ci.get("success_rate" if n == "success" else n) for n in names]
        cis = [None if ci is None else [100 * c for c in ci] for ci in cis]
        xs = [j + (i - (len(summaries) - 1) / 2) * width for j in range(len(names))]
        bars = ax.bar(
            xs,
            values,
            width,
            yerr=_yerr(values, cis),
            capsize=3,
            error_kw={"elinewidth": 0.8, "ecolor": "#333333"},
            label=f"{s.method} (n={s.n}, {s.errors} errors, {s.mean_seconds:.0f} s/task)",
            color=_COLORS.get(s.method),
        )
        # a white box keeps each value readable across its error bar
        box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}
        ax.bar_label(bars, fmt="%.0f", fontsize=7, label_type="center", bbox=box)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"% (error bars: {100 * report.intervals.confidence:g}% interval)")
    ax.set_title(f"{report.bench}: methods through the same graph")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_prefix_hits(reports: Mapping[str, Mapping[str, Any]], levels: int, path: Path) -> Path:
    """Cumulative prefix hit rate H_{1:l}@1 and @5 per level, one line per method.

    A row with ``intervals`` (as ``genmem eval --pairs`` writes them) gets a shaded band.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    depth = list(range(1, levels + 1))
    for ax, key in zip(axes, ("prefix_at_1", "prefix_at_5"), strict=True):
        for method, row in reports.items():
            values = [100 * v for v in row["rates"][key]]
            color = _COLORS.get(method)
            ax.plot(depth, values, marker="o", label=method, color=color)
            bands = (row.get("intervals") or {}).get(key)
            if bands:
                lo, hi = ([100 * b[i] for b in bands] for i in (0, 1))
                ax.fill_between(depth, lo, hi, color=color, alpha=0.15, linewidth=0)
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


def plot_symbols(report: SymbolsReport, path: Path) -> Path:
    """Score per condition, one line per beam size k, with interval bars; raw as a band."""
    plt = _pyplot()
    names = [c for c in report.conditions if c != "raw"]
    fig, ax = plt.subplots(figsize=(2.0 + 0.8 * max(1, len(names)), 3.4))
    raw = next(iter(report.conditions.get("raw", {}).values()), None)
    if raw is not None:
        lo, hi = (100 * c for c in raw.score.ci)
        ax.axhspan(lo, hi, color="#8C8C8C", alpha=0.15, linewidth=0)
        ax.axhline(100 * raw.score.mean, color="#8C8C8C", linestyle="--", label="raw")
    for i, k in enumerate(report.beams):
        cells = [report.conditions[c].get(str(k)) for c in names]
        xs = [j + (i - (len(report.beams) - 1) / 2) * 0.12 for j, c in enumerate(cells) if c]
        values = [100 * c.score.mean for c in cells if c]
        cis = [[100 * b for b in c.score.ci] for c in cells if c]
        ax.errorbar(xs, values, yerr=_yerr(values, cis), marker="o", capsize=3, label=f"k={k}")
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"{report.metric}, % ({100 * report.intervals.confidence:g}% interval)")
    ax.set_title(f"{report.bench}: SID symbols (n={report.tasks}, tokens as {report.sid_tokens})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_fusion(report: FusionReport, path: Path) -> Path:
    """Score per condition with interval bars; ``fused`` in its own colour."""
    plt = _pyplot()
    names = list(report.conditions)
    values = [100 * report.conditions[c].mean for c in names]
    cis = [[100 * b for b in report.conditions[c].ci] for c in names]
    fig, ax = plt.subplots(figsize=(2.0 + 0.7 * max(1, len(names)), 3.4))
    colours = ["#C44E52" if c == "fused" else "#4C72B0" for c in names]
    ax.bar(range(len(names)), values, yerr=_yerr(values, cis), capsize=3, color=colours)
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"{report.metric}, % ({100 * report.intervals.confidence:g}% interval)")
    written = sum(report.fusions.get(k, 0) for k in ("inserted", "revised"))
    ax.set_title(f"{report.bench}: fusion (n={report.tasks}, {written} fusions written)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
