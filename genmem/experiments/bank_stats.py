"""Statistics of a memory bank built from cold-start experience records (appendix tables).

Pure functions over plain mappings: the records before consolidation (``text``, ``source``,
``type``, ``evidence``), the bank entries after it (``sid``, ``payload``, ``n_records``) and the
records' integer codes. Composition, length percentiles, compression, merging, the long tail of
entry lengths and per-level codebook utilisation, as Markdown tables and a PNG figure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from genmem.errors import CodebookError
from genmem.experiments.plots import _pyplot
from genmem.memory.metrics import code_shares, codebook_metrics
from genmem.memory.sid import SIDSpec

__all__ = [
    "THRESHOLDS",
    "BankStatistics",
    "LevelUtilisation",
    "Percentiles",
    "Share",
    "TailRow",
    "bank_statistics",
    "percentiles",
    "plot_code_utilisation",
    "statistics_markdown",
]

THRESHOLDS: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384, 32768)
"""Entry payload lengths (characters) of the long-tail table: one row counts entries >= each."""

_UNKNOWN = "unknown"


class Percentiles(BaseModel):
    """Summary of a list of numbers; every field is 0 when the list is empty."""

    model_config = ConfigDict(frozen=True)

    n: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float


class Share(BaseModel):
    """How many items fall in one category, and their share of all items (0-1)."""

    model_config = ConfigDict(frozen=True)

    count: int
    share: float


class LevelUtilisation(BaseModel):
    """Code usage of one codebook level over the records' codes."""

    model_config = ConfigDict(frozen=True)

    level: int = Field(description="1-based level.")
    size: int = Field(description="Codebook size N_l.")
    used: int = Field(description="Distinct codes observed at this level.")
    shares: list[float] = Field(description="Share of records per code; index = code.")
    entropy_norm: float = Field(description="H_l / log N_l (1.0 when N_l = 1).")
    effective_codes: float = Field(description="exp(H_l).")


class TailRow(BaseModel):
    """Entries whose payload has at least ``threshold`` characters."""

    model_config = ConfigDict(frozen=True)

    threshold: int
    count: int
    fraction: float = Field(description="count / entries, 0-1.")


class BankStatistics(BaseModel):
    """Everything the appendix tables report about one built bank."""

    model_config = ConfigDict(frozen=True)

    records: int = Field(description="Experience records before consolidation.")
    entries: int = Field(description="Bank entries after consolidation.")
    by_source: dict[str, Share]
    by_type: dict[str, Share]
    by_evidence: dict[str, Share]
    record_chars: Percentiles
    entry_chars: Percentiles
    total_record_chars: int
    total_entry_chars: int
    compression: float | None = Field(
        description="total_record_chars / total_entry_chars; None when entries hold no text."
    )
    merged_per_entry: Percentiles
    long_tail: list[TailRow]
    utilisation: list[LevelUtilisation]
    dui: float = Field(description="Mean normalised entropy over levels.")
    used_leaves: int = Field(description="Distinct complete SIDs among the records.")
    singleton_fraction: float = Field(description="Share of records alone on their SID.")


def percentiles(values: Sequence[float]) -> Percentiles:
    """Mean, P50/P90/P95/P99 (linear interpolation) and max of ``values``."""
    if len(values) == 0:
        return Percentiles(n=0, mean=0.0, p50=0.0, p90=0.0, p95=0.0, p99=0.0, max=0.0)
    a = np.asarray(values, dtype=np.float64)
    p50, p90, p95, p99 = np.percentile(a, [50, 90, 95, 99], method="linear")
    return Percentiles(
        n=int(a.size),
        mean=float(a.mean()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
        max=float(a.max()),
    )


def _shares(items: Sequence[Mapping[str, Any]], key: str) -> dict[str, Share]:
    """Count per value of ``key`` (missing or empty: 'unknown'), most frequent first."""
    counts = Counter(str(item.get(key) or _UNKNOWN) for item in items)
    total = len(items)
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {name: Share(count=c, share=c / total) for name, c in ordered}


def _chars(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(str(value))


def bank_statistics(
    records: Sequence[Mapping[str, Any]],
    entries: Sequence[Mapping[str, Any]],
    codes: np.ndarray,
    spec: SIDSpec,
) -> BankStatistics:
    """Statistics of a bank built from ``records`` into ``entries``.

    Args:
        records: ``{"text", "source", "type", "evidence"}`` per experience record (before
            consolidation).
        entries: ``{"sid", "payload", "n_records"}`` per bank entry (after consolidation);
            a missing ``n_records`` counts as 1.
        codes: ``(len(records), L)`` integer codes of the records under ``spec``.
        spec: the codebook sizes the codes were drawn from.

    Raises:
        ValueError: ``records`` or ``entries`` is empty.
        CodebookError: ``codes`` is not an (N, L) matrix or does not pair up with ``records``.
        InvalidSID: a code lies outside its level's codebook.
    """
    if len(records) == 0:
        raise ValueError("bank statistics need at least one experience record; got none")
    if len(entries) == 0:
        raise ValueError("bank statistics need at least one bank entry; build the bank first")
    metrics = codebook_metrics(codes, spec)  # validates the shape and range of codes
    if metrics.n != len(records):
        raise CodebookError(
            f"{metrics.n} code rows for {len(records)} records; pass one row of codes per record"
        )
    shares = code_shares(codes, spec)

    record_lengths = [_chars(r.get("text", "")) for r in records]
    entry_lengths = [_chars(e.get("payload", "")) for e in entries]
    total_records = sum(record_lengths)
    total_entries = sum(entry_lengths)
    lengths = np.asarray(entry_lengths)
    long_tail = []
    for t in THRESHOLDS:
        count = int(np.count_nonzero(lengths >= t))
        long_tail.append(TailRow(threshold=t, count=count, fraction=count / len(entries)))

    utilisation = [
        LevelUtilisation(
            level=lv + 1,
            size=size,
            used=int(np.count_nonzero(p)),
            shares=[float(x) for x in p],
            entropy_norm=metrics.entropy_norm[lv],
            effective_codes=metrics.effective_codes[lv],
        )
        for lv, (size, p) in enumerate(zip(spec.sizes, shares, strict=True))
    ]
    return BankStatistics(
        records=len(records),
        entries=len(entries),
        by_source=_shares(records, "source"),
        by_type=_shares(records, "type"),
        by_evidence=_shares(records, "evidence"),
        record_chars=percentiles(record_lengths),
        entry_chars=percentiles(entry_lengths),
        total_record_chars=total_records,
        total_entry_chars=total_entries,
        compression=total_records / total_entries if total_entries > 0 else None,
        merged_per_entry=percentiles([int(e.get("n_records", 1)) for e in entries]),
        long_tail=long_tail,
        utilisation=utilisation,
        dui=metrics.dui,
        used_leaves=metrics.used_leaves,
        singleton_fraction=metrics.singleton_fraction,
    )


def _num(x: float) -> str:
    """A number as the tables print it: integers bare, others with two decimals."""
    # interpolated percentiles land a rounding error off whole numbers (4625.000000000001)
    return f"{x:.0f}" if math.isclose(x, round(x), rel_tol=0, abs_tol=1e-9) else f"{x:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def statistics_markdown(stats: BankStatistics) -> str:
    """Markdown tables: composition, lengths, compression, merging, long tail, utilisation."""
    out = [f"## Bank statistics ({stats.records} records, {stats.entries} entries)", ""]

    out += ["### Composition", ""]
    rows = [
        [field, name, str(s.count), f"{100 * s.share:.1f}"]
        for field, shares in (
            ("source", stats.by_source),
            ("type", stats.by_type),
            ("evidence", stats.by_evidence),
        )
        for name, s in shares.items()
    ]
    out += [*_table(["Field", "Value", "Count", "%"], rows), ""]

    out += ["### Length (characters)", ""]
    rows = [
        [label, str(p.n), _num(p.p50), _num(p.p95), _num(p.p99), _num(p.max)]
        for label, p in (("records", stats.record_chars), ("entries", stats.entry_chars))
    ]
    out += [*_table(["", "n", "P50", "P95", "P99", "Max"], rows), ""]
    ratio = "n/a" if stats.compression is None else f"{stats.compression:.2f}x"
    rows = [[str(stats.total_record_chars), str(stats.total_entry_chars), ratio]]
    out += [*_table(["Record chars", "Entry chars", "Compression"], rows), ""]

    out += ["### Records merged per entry", ""]
    m = stats.merged_per_entry
    rows = [[_num(m.mean), _num(m.p50), _num(m.p90), _num(m.p95), _num(m.p99), _num(m.max)]]
    out += [*_table(["Mean", "P50", "P90", "P95", "P99", "Max"], rows), ""]

    out += ["### Long tail of entry lengths", ""]
    rows = [[f">= {r.threshold}", str(r.count), f"{100 * r.fraction:.1f}"] for r in stats.long_tail]
    out += [*_table(["Chars", "Entries", "%"], rows), ""]

    out += ["### Codebook utilisation", ""]
    rows = [
        [
            f"L{u.level}",
            str(u.size),
            str(u.used),
            f"{u.entropy_norm:.3f}",
            f"{u.effective_codes:.1f}",
        ]
        for u in stats.utilisation
    ]
    out += _table(["Level", "Size", "Used", "H_norm", "Effective codes"], rows)
    out += [
        "",
        f"DUI {stats.dui:.3f}; used leaves {stats.used_leaves}; "
        f"singleton fraction {100 * stats.singleton_fraction:.1f}%",
        "",
    ]
    return "\n".join(out)


def plot_code_utilisation(stats: BankStatistics, path: Path) -> Path:
    """One panel per level: code shares sorted descending against the uniform share 1/N_l."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    n = len(stats.utilisation)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.0 * rows), squeeze=False)
    flat = axes.ravel()
    for ax, u in zip(flat, stats.utilisation, strict=False):
        shares = sorted(u.shares, reverse=True)
        ax.bar(range(1, len(shares) + 1), shares, width=0.9, color="#4C72B0")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # ranks, never 0.5
        ax.axhline(1.0 / u.size, color="black", linestyle="--", linewidth=1, label="uniform")
        ax.set_title(
            f"L{u.level}: {u.used}/{u.size} codes, H_norm {u.entropy_norm:.2f}, "
            f"eff {u.effective_codes:.1f}",
            fontsize=9,
        )
        ax.set_xlabel("code rank (most used first)")
        ax.set_ylabel("share")
        ax.legend(fontsize=7, loc="best")
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
