"""``summary.md`` of an online evolution run: probe tables with intervals, pairs, operations."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from genmem.envs.stats import describe, format_interval

if TYPE_CHECKING:
    from genmem.experiments.evolution_config import EvolveSummary, PooledEvolveSummary
    from genmem.experiments.evolution_stats import CheckpointScore

__all__ = ["summary_markdown"]

_RATES = (
    ("task score", "score"),
    ("success", "success_rate"),
    ("Cand. Hit", "candidate_hit"),
    ("Hit@1", "hit_at_1"),
    ("Hit@5", "hit_at_5"),
)


def _cell(score: CheckpointScore | None, key: str) -> str | None:
    """``'mean [lo, hi]'`` of one quantity, in %; None when the checkpoint lacks it."""
    value = None if score is None else getattr(score, key)
    if value is None:
        return None
    return format_interval(value, score.ci.get(key))  # type: ignore[union-attr]


def _prefix_cell(score: CheckpointScore | None, at: str) -> str | None:
    """Cumulative prefix hit rates per level, ``'a / b / ...'`` in %."""
    if score is None or not score.prefix_hits:
        return None
    return " / ".join(f"{100 * e.mean:.1f}" for e in score.prefix_hits[at])


def _probe_table(summary: EvolveSummary | PooledEvolveSummary) -> list[str]:
    cps = sorted({s.checkpoint for s in summary.checkpoints})
    head = "| method | metric | " + " | ".join(f"t={c}" for c in cps) + " |"
    lines = [head, "|---|---|" + "---|" * len(cps)]
    for method in summary.config.methods:
        rows = {s.checkpoint: s for s in summary.checkpoints if s.method == method}
        cells_by_label = [(label, [_cell(rows.get(c), key) for c in cps]) for label, key in _RATES]
        for at, label in (("at_1", "prefix@1 (1:l)"), ("at_5", "prefix@5 (1:l)")):
            cells_by_label.append((label, [_prefix_cell(rows.get(c), at) for c in cps]))
        errors = [str(rows[c].errors) if c in rows else None for c in cps]
        if any(e not in (None, "0") for e in errors):
            cells_by_label.append(("errors (as failures)", errors))
        for label, cells in cells_by_label:
            if all(c is None for c in cells):
                continue
            text = ["-" if c is None else c for c in cells]
            lines.append(f"| {method} | {label} | " + " | ".join(text) + " |")
    return lines


def _paired_table(summary: EvolveSummary | PooledEvolveSummary) -> list[str]:
    if not summary.paired:
        return []
    lines = [
        "",
        "sid minus frozen by probe task (what evolution added; percentage points):",
        "",
        "| t | processed | metric | difference | wins | losses | ties | pairs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    labels = dict((key, label) for label, key in _RATES)
    for pair in summary.paired:
        for key, p in pair.paired.items():
            diff = format_interval(p.diff, p.ci, signed=True)
            lines.append(
                f"| {pair.checkpoint} | {pair.processed} | {labels.get(key, key)} | {diff} | "
                f"{p.wins} | {p.losses} | {p.ties} | {p.n} |"
            )
    return lines


def _operations(summary: EvolveSummary) -> list[str]:
    lines = [
        "",
        "| block | queries | inserted | revised | retained | deleted | rejected by gate | "
        "no write | mean edit distance |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in summary.blocks:
        edit = "-" if b.mean_edit_distance is None else f"{b.mean_edit_distance:.0f}"
        lines.append(
            f"| {b.block} | {b.queries} | {b.inserted} | {b.revised} | {b.retained} | "
            f"{b.deleted} | {b.rejected} | {b.no_write} | {edit} |"
        )
    reused = sorted({s.method for s in summary.checkpoints if s.reused})
    if reused:
        lines += [
            "",
            f"Greedy model: the {' and '.join(reused)} rows after their first run repeat it "
            "(same graph, task and snapshot; `reused_from` in probes.jsonl); "
            "`--rerun-controls` runs them again.",
        ]
    inv = summary.invariance
    lines += [
        "",
        f"Addressing invariance over {inv.get('queries')} probe queries: "
        + json.dumps({k: v for k, v in inv.items() if k != "queries"}),
    ]
    return lines


def summary_markdown(summary: EvolveSummary | PooledEvolveSummary) -> str:
    """The probe table (methods x checkpoints, with intervals), sid - frozen, the operations."""
    probes = len(summary.probe_ids)
    seeds = getattr(summary, "decode_seeds", None)
    over = f"{probes} probe tasks" + (f" x {len(seeds)} seeds" if seeds else "")
    lines = [
        f"## online evolution on {summary.bench}",
        "",
        f"Probe results in % over {over}; each mean counts an errored run as a failure "
        "(score 0, no hit). " + describe(summary.intervals).replace("Intervals:", "Brackets:"),
        "",
        *_probe_table(summary),
        *_paired_table(summary),
    ]
    if hasattr(summary, "blocks"):
        lines += _operations(summary)  # type: ignore[arg-type]
    if summary.note:
        lines += ["", summary.note]
    lines.append("")
    return "\n".join(lines)
