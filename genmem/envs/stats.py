"""Uncertainty on reported numbers: seeded percentile bootstrap intervals and paired differences.

The paper's appendix E asks for bootstrap intervals over tasks and paired differences between
methods run on the same tasks. Everything here works on small float arrays with numpy and is
deterministic for a given :class:`IntervalConfig` (its seed drives every resample), so a
reader who has the per-task values and the settings written beside a result gets the same
interval back.

- :func:`mean_interval`: the mean of per-task values and its percentile bootstrap interval
  (tasks resampled with replacement, the mean recomputed each time, the interval read off the
  ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those means).
- :func:`paired_difference`: per task, method minus baseline on the tasks both have; the mean
  difference, its bootstrap interval, and how many tasks the method won, lost or tied.
- :func:`task_means`: repeated runs of one task (decoding seeds) averaged into one value per
  task, so a bootstrap over tasks keeps a task's repeats together.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_INTERVALS",
    "Estimate",
    "IntervalConfig",
    "PairedDiff",
    "bootstrap_interval",
    "describe",
    "format_interval",
    "mean_interval",
    "paired_difference",
    "task_means",
]

K = TypeVar("K", bound=Hashable)

# Resampled means held in memory at once: a chunk of resamples times n values stays near 8 MB.
_CELLS_PER_CHUNK = 1_000_000
# Two scores closer than this are the same score: a tie, not a win.
_TIE = 1e-12


class IntervalConfig(BaseModel):
    """How every interval of a result was computed; written beside it so it can be redone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    confidence: float = Field(default=0.95, gt=0.0, lt=1.0, description="Coverage, e.g. 0.95.")
    resamples: int = Field(default=2000, ge=1000, description="Bootstrap resamples (>= 1000).")
    seed: int = Field(default=0, ge=0, description="Seed of the resampling generator.")
    method: str = Field(
        default="percentile bootstrap over tasks",
        description="What is resampled and how the interval is read off.",
    )


DEFAULT_INTERVALS = IntervalConfig()


class Estimate(BaseModel):
    """A mean over ``n`` values with its bootstrap interval."""

    mean: float
    ci: tuple[float, float]
    n: int = Field(ge=1)


class PairedDiff(BaseModel):
    """Method minus baseline over the tasks both ran: mean, interval, and the per-task tally."""

    diff: float = Field(description="Mean of (method - baseline) over the paired tasks.")
    ci: tuple[float, float]
    wins: int = Field(ge=0, description="Tasks where the method scored higher.")
    losses: int = Field(ge=0, description="Tasks where the method scored lower.")
    ties: int = Field(ge=0, description="Tasks with equal scores.")
    n: int = Field(ge=1, description="Tasks paired.")


def _array(values: Iterable[float]) -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"expected a flat list of numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values must be finite numbers; count a failed run as 0, not NaN")
    return arr


def bootstrap_interval(
    values: Iterable[float], settings: IntervalConfig = DEFAULT_INTERVALS
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (None for no values)."""
    arr = _array(values)
    n = len(arr)
    if n == 0:
        return None
    rng = np.random.default_rng(settings.seed)
    chunk = max(1, _CELLS_PER_CHUNK // n)
    means = np.empty(settings.resamples)
    for start in range(0, settings.resamples, chunk):
        stop = min(start + chunk, settings.resamples)
        means[start:stop] = arr[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = (1.0 - settings.confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def mean_interval(
    values: Iterable[float], settings: IntervalConfig = DEFAULT_INTERVALS
) -> Estimate | None:
    """The mean of ``values`` and its bootstrap interval (None for no values)."""
    arr = _array(values)
    ci = bootstrap_interval(arr, settings)
    if ci is None:
        return None
    return Estimate(mean=float(arr.mean()), ci=ci, n=len(arr))


def paired_difference(
    method: Mapping[K, float],
    baseline: Mapping[K, float],
    settings: IntervalConfig = DEFAULT_INTERVALS,
) -> PairedDiff | None:
    """``method - baseline`` on the keys (task ids) both hold; None when they share none.

    A task only one side ran is left out of the pair; ``n`` says how many were paired.
    """
    keys = [k for k in method if k in baseline]
    if not keys:
        return None
    diffs = _array(method[k] - baseline[k] for k in keys)
    ci = bootstrap_interval(diffs, settings)
    assert ci is not None
    return PairedDiff(
        diff=float(diffs.mean()),
        ci=ci,
        wins=int(np.sum(diffs > _TIE)),
        losses=int(np.sum(diffs < -_TIE)),
        ties=int(np.sum(np.abs(diffs) <= _TIE)),
        n=len(diffs),
    )


def task_means(rows: Iterable[tuple[K, float]]) -> dict[K, float]:
    """One value per key: the mean of that key's repeats, keys in first-seen order."""
    grouped: dict[K, list[float]] = defaultdict(list)
    for key, value in rows:
        grouped[key].append(float(value))
    return {k: float(np.mean(v)) for k, v in grouped.items()}


def format_interval(
    mean: float,
    ci: Sequence[float] | None,
    *,
    scale: float = 100.0,
    digits: int = 1,
    signed: bool = False,
) -> str:
    """``'41.0 [32.0, 50.0]'``: a mean and its interval, scaled (x100: a fraction in percent)."""
    sign = "+" if signed else ""
    text = f"{scale * mean:{sign}.{digits}f}"
    if ci is None:
        return text
    lo, hi = ci
    return f"{text} [{scale * lo:{sign}.{digits}f}, {scale * hi:{sign}.{digits}f}]"


def describe(settings: IntervalConfig) -> str:
    """One sentence saying how the intervals were computed."""
    return (
        f"Intervals: {100 * settings.confidence:g}% {settings.method}, "
        f"{settings.resamples} resamples, seed {settings.seed}."
    )
