"""Training-dynamics curves from the GRPO rollout log and the SFT losses (paper appendix E.3).

The GRPO figure has one row per role. The left panel shows eligibility rates per step: the share
of rollouts whose SID turn parsed, whose address read something from the bank, whose SID equals
the reference, and whose with-memory answer was right. The right panel shows each reward part
and both channels. Light lines are per-step means; dark lines are trailing means over
``window`` steps (shorter at the start), as the paper smooths its curves.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "RATES",
    "eligibility_rates",
    "plot_grpo_dynamics",
    "plot_loss",
    "step_means",
    "trailing_mean",
]

RATES: dict[str, str] = {
    "sid_valid": "SID parsed",
    "retrieved": "lookup hit",
    "sid_match": "SID = reference",
    "answered": "answer right",
}
"""Eligibility flags each rollout log row carries, and their plot labels."""


def trailing_mean(values: Sequence[float], window: int) -> list[float]:
    """Mean of the last ``window`` values at each point (fewer at the start; NaN skipped)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out = []
    for i in range(len(values)):
        seen = [v for v in values[max(0, i - window + 1) : i + 1] if not math.isnan(v)]
        out.append(sum(seen) / len(seen) if seen else math.nan)
    return out


def _values(
    rows: Iterable[dict[str, Any]], role: str, keys: Sequence[str], *, by_step: bool
) -> dict[int, dict[str, list[float]]]:
    """``role``'s values of ``keys`` as floats, grouped by step (or all under 0).

    None (not applicable) and NaN (the part failed) are left out, never averaged in.
    """
    groups: dict[int, dict[str, list[float]]] = defaultdict(lambda: {k: [] for k in keys})
    for row in rows:
        if row.get("role") != role:
            continue
        group = groups[int(row.get("step", 0)) if by_step else 0]
        for key in keys:
            value = row.get(key)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                group[key].append(float(value))
    return groups


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def step_means(rows: Iterable[dict[str, Any]], role: str, keys: Sequence[str]) -> dict[str, Any]:
    """Per-step means of ``keys`` over ``role``'s rollouts: ``{"steps": [...], key: [...]}``.

    Booleans count as 0/1; a missing, None or NaN value is left out of its step's mean.
    """
    groups = _values(rows, role, keys, by_step=True)
    steps = sorted(groups)
    table: dict[str, Any] = {"steps": [s + 1 for s in steps]}
    for key in keys:
        means = [_mean(groups[s][key]) for s in steps]
        table[key] = [math.nan if m is None else m for m in means]
    return table


def eligibility_rates(rows: Iterable[dict[str, Any]], role: str) -> dict[str, float | None]:
    """Share of ``role``'s rollouts with each flag of :data:`RATES` (None: never recorded)."""
    seen = _values(rows, role, list(RATES), by_step=False)[0]
    return {k: None if (m := _mean(v)) is None else round(m, 4) for k, v in seen.items()}


def _curves(ax: Any, steps: list[int], series: dict[str, list[float]], window: int) -> None:
    marker = "o" if len(steps) <= 20 else None  # a short run's points stay visible
    for name, values in series.items():
        if all(math.isnan(v) for v in values):
            continue
        (raw,) = ax.plot(steps, values, alpha=0.3, linewidth=1)
        smooth = trailing_mean(values, window)
        ax.plot(steps, smooth, color=raw.get_color(), label=name, marker=marker, markersize=3)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=6, ncol=2)


def plot_grpo_dynamics(
    rows: Sequence[dict[str, Any]],
    parts: dict[str, Sequence[str]],
    path: Path,
    *,
    window: int = 7,
) -> str:
    """Write the per-role eligibility-rate and reward curves of a GRPO run to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    roles = [r for r in parts if any(row.get("role") == r for row in rows)] or list(parts)
    fig, axes = plt.subplots(len(roles), 2, figsize=(11, 3.4 * len(roles)), squeeze=False)
    for (ax_rate, ax_reward), role in zip(axes, roles, strict=True):
        rewards = [*parts[role], "process_channel", "outcome_channel"]
        table = step_means(rows, role, [*RATES, *rewards])
        steps = table["steps"]
        _curves(ax_rate, steps, {label: table[k] for k, label in RATES.items()}, window)
        ax_rate.set(ylim=(-0.05, 1.05), xlabel="step", ylabel="share of rollouts")
        ax_rate.set_title(f"{role}: eligibility (MA{window})", fontsize=9)
        _curves(ax_reward, steps, {k: table[k] for k in rewards}, window)
        ax_reward.set(xlabel="step", ylabel="mean reward")
        ax_reward.set_title(f"{role}: rewards (MA{window})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_loss(
    losses: Sequence[float], path: Path, *, title: str, steps: Sequence[int] | None = None
) -> str:
    """Write an SFT loss curve (per logged step, with its trailing mean) to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = list(steps) if steps is not None else list(range(1, len(losses) + 1))
    _curves(ax, xs, {"loss": list(losses)}, window=max(1, min(7, len(losses))))
    ax.set(xlabel="step", ylabel="SFT loss", title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
