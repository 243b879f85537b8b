"""Per-channel advantage normalisation, by hand and as TRL's normalize_then_sum computes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genmem.training.advantages import EPS, channel_advantages, group_normalise


def test_group_normalise_by_hand() -> None:
    out = group_normalise([1.0, 3.0, 10.0, 10.0], 2)
    std = np.std([1.0, 3.0], ddof=1)
    assert out[:2] == pytest.approx([-1 / (std + EPS), 1 / (std + EPS)])
    assert out[2:] == pytest.approx([0.0, 0.0])  # a group with no spread carries no signal
    with pytest.raises(ValueError, match="groups of 2"):
        group_normalise([1.0, 2.0, 3.0], 2)


def test_channels_are_normalised_separately() -> None:
    # The outcome channel's scale (hundreds) must not drown the process channel's.
    process = [0.0, 1.0, 0.0, 1.0]
    outcome = [0.0, 0.0, 100.0, 300.0]
    adv = channel_advantages(process, outcome, 2, batch_scale=False)
    p = group_normalise(process, 2)
    o = group_normalise(outcome, 2)
    assert adv == pytest.approx(p + o)
    assert adv[1] - adv[0] == pytest.approx(adv[3] - adv[2] - 2 * o[3])
    summed = group_normalise(np.add(process, outcome), 2)  # TRL's default would do this
    assert not np.allclose(summed, adv)


def _trl_normalize_then_sum(per_func: np.ndarray, weights: list[float], g: int) -> np.ndarray:
    """TRL 1.16's normalize_then_sum branch (grpo_trainer.py), on torch tensors."""
    from trl.trainer.utils import nanstd

    rewards_per_func = torch.tensor(per_func, dtype=torch.float32)
    grouped = rewards_per_func.view(-1, g, rewards_per_func.shape[1])
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = nanstd(grouped, dim=1, keepdim=True)
    reward_k = ((grouped - mean_k) / (std_k + 1e-4)).view(-1, rewards_per_func.shape[1])
    rewards = (reward_k * torch.tensor(weights).unsqueeze(0)).nansum(dim=1)
    return ((rewards - torch.nanmean(rewards)) / (nanstd(rewards) + 1e-4)).numpy()


def test_trl_aggregation_with_zero_weight_parts_equals_channel_advantages() -> None:
    rng = np.random.default_rng(0)
    g, groups = 4, 3
    parts = rng.random((g * groups, 3))  # format, sid, judge: logged, weight 0
    process = parts.sum(axis=1)
    outcome = rng.choice([-1.0, 0.0, 0.2, 1.0], size=g * groups)
    per_func = np.column_stack([parts, process, outcome])
    trl = _trl_normalize_then_sum(per_func, [0, 0, 0, 1, 1], g)
    ours = channel_advantages(process, outcome, g)
    assert trl == pytest.approx(ours, abs=1e-4)
