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

A value that could not be computed (a judge call or a rollout that raised) reaches TRL as NaN
(a reward function's None), never as 0. TRL's statistics skip NaN: a channel's group mean and
spread come from the completions that have a value, a completion without one adds nothing from
that channel, a completion with no value at all gets advantage 0, and the rest of its group is
normalised as if it were not there. :func:`channel_advantages` does the same.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

__all__ = ["CHANNELS", "EPS", "channel_advantages", "group_normalise"]

CHANNELS = ("process_channel", "outcome_channel")
EPS = 1e-4
"""TRL's epsilon in the group standardisation."""


def _nanstd(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Standard deviation with Bessel's correction, NaN skipped; NaN below two values (TRL's)."""
    count = np.sum(~np.isnan(x), axis=axis, keepdims=True)
    mean = np.nanmean(x, axis=axis, keepdims=True)
    var = np.nanmean((x - mean) ** 2, axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 1, np.sqrt(var * count / (count - 1)), np.nan)


def group_normalise(values: Sequence[float], group_size: int) -> np.ndarray:
    """``(v - mean) / (std + eps)`` within consecutive groups (std with Bessel's correction).

    NaN values are left out of their group's mean and spread and stay NaN; a group with fewer
    than two values gives NaN throughout (no spread to normalise by).
    """
    x = np.asarray(values, dtype=np.float64)
    if group_size < 2 or x.size % group_size:
        raise ValueError(f"{x.size} values do not split into groups of {group_size} (>= 2)")
    groups = x.reshape(-1, group_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN group's mean is NaN
        mean = np.nanmean(groups, axis=1, keepdims=True)
        std = _nanstd(groups, axis=1)
    return ((groups - mean) / (std + EPS)).reshape(-1)


def channel_advantages(
    process: Sequence[float], outcome: Sequence[float], group_size: int, *, batch_scale: bool = True
) -> np.ndarray:
    """Advantages with each channel normalised in its group, summed (and batch-standardised).

    A NaN channel value adds nothing; a completion with both channels NaN gets 0.
    """
    p = group_normalise(process, group_size)
    o = group_normalise(outcome, group_size)
    total = np.nansum(np.stack([p, o]), axis=0)
    total[np.isnan(np.asarray(process, float)) & np.isnan(np.asarray(outcome, float))] = np.nan
    if batch_scale:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            std = _nanstd(total) if total.size > 1 else np.zeros(1)
            total = (total - np.nanmean(total)) / (std.reshape(-1)[0] + EPS)
    return np.nan_to_num(total, nan=0.0)
