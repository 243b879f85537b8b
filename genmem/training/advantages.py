"""Per-channel GRPO advantages, and how they map onto TRL without patching it.

The paper normalises advantages separately for the process channel (format + strategy + SID)
and the outcome channel (contrastive gain) within each group of G completions, then adds them.
TRL's ``GRPOConfig(multi_objective_aggregation="normalize_then_sum")`` normalises *each reward
function* within its group, ``(r - mean_g) / (std_g + 1e-4)``, sums them with
``reward_weights`` and finally rescales the sum by the batch's standard deviation. So GenMem
hands TRL:

- one reward function per part (format, SID agreement, judge, r_faithful, r_loc, r_op, outcome)
  with weight 0: TRL logs each (``rewards/<name>/mean``) but they do not move the policy;
- two channel functions, ``process_channel`` (the sum of the process parts) and
  ``outcome_channel``, with weight 1: these carry the gradient.

The result is ``A = norm_g(process) + norm_g(outcome)``, up to one positive scale per batch
(the final batch standardisation; group-normalised terms already have mean zero per group, so
the shift is zero). :func:`channel_advantages` computes the same numbers; the GRPO tests check
TRL's advantages against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["CHANNELS", "EPS", "channel_advantages", "group_normalise"]

CHANNELS = ("process_channel", "outcome_channel")
EPS = 1e-4
"""TRL's epsilon in the group standardisation."""


def group_normalise(values: Sequence[float], group_size: int) -> np.ndarray:
    """``(v - mean) / (std + eps)`` within consecutive groups (std with Bessel's correction)."""
    x = np.asarray(values, dtype=np.float64)
    if group_size < 2 or x.size % group_size:
        raise ValueError(f"{x.size} values do not split into groups of {group_size} (>= 2)")
    groups = x.reshape(-1, group_size)
    mean = groups.mean(axis=1, keepdims=True)
    std = groups.std(axis=1, ddof=1, keepdims=True)
    return ((groups - mean) / (std + EPS)).reshape(-1)


def channel_advantages(
    process: Sequence[float], outcome: Sequence[float], group_size: int, *, batch_scale: bool = True
) -> np.ndarray:
    """Advantages with each channel normalised in its group, summed (and batch-standardised)."""
    total = group_normalise(process, group_size) + group_normalise(outcome, group_size)
    if not batch_scale:
        return total
    std = total.std(ddof=1) if total.size > 1 else 0.0
    return (total - total.mean()) / (std + EPS)
