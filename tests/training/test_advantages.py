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


def test_nan_is_left_out_of_its_group_not_scored_zero() -> None:
    process = [np.nan, 1.0, 0.0, 2.0]
    adv = group_normalise(process, 4)
    assert np.isnan(adv[0])
    expected = group_normalise([1.0, 0.0, 2.0, 1.0], 4)[:3]  # the three real values alone...
    spread = np.std([1.0, 0.0, 2.0], ddof=1)
    assert adv[1:] == pytest.approx([0.0, -1 / (spread + EPS), 1 / (spread + EPS)])
    assert not np.allclose(adv[1:], expected)  # ...not with a 0 (or anything) in the NaN's place
    assert np.isnan(group_normalise([np.nan, 1.0], 2)).all()  # one value: no spread


@pytest.mark.slow
def test_trl_leaves_failed_rollouts_out_of_the_group() -> None:
    """TRL 1.16's own scoring path (GRPOTrainer._generate_and_score_completions) on NaN parts.

    Group 1 has a crashed rollout (every part NaN), group 2 one whose judge raised (its process
    channel NaN, its outcome real). The crashed one gets advantage 0, nothing is NaN, and every
    advantage is the per-channel one with the NaN left out (issue 18 item 5).
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from genmem.policies.local import load_policy
    from genmem.training.rollouts import reward_functions

    nan = float("nan")
    rows = [  # format, sid_agreement, strategy_judge, outcome; three completions per group
        (nan, nan, nan, nan),
        (1.0, 0.5, 1.0, 1.0),
        (1.0, 0.25, 0.0, 0.0),
        (1.0, 1.0, nan, -1.0),
        (0.0, 0.0, 0.0, 0.2),
        (1.0, 0.75, 0.5, 0.0),
    ]
    parts = []
    for fmt, agree, judge, outcome in rows:
        proc = nan if nan in (fmt, agree, judge) or judge != judge else fmt + agree + judge
        parts.append({
            "format": fmt, "sid_agreement": agree, "strategy_judge": judge,
            "outcome": outcome, "process_channel": proc, "outcome_channel": outcome,
        })  # fmt: skip
    policy = load_policy(None, fresh=True, dtype="float32")
    tok = policy.tokenizer
    prompt_ids = tok("Task: 3 pens at $2", add_special_tokens=False)["input_ids"]

    def rollout(prompts: list, trainer: GRPOTrainer) -> dict:
        n = len(prompts)
        return {
            "prompt_ids": [prompt_ids] * n,
            "completion_ids": [[tok.eos_token_id]] * n,
            "logprobs": None,
            "parts": parts[:n],
        }

    funcs, weights = reward_functions(["retriever"])
    args = GRPOConfig(
        output_dir="/tmp/unused-grpo", use_cpu=True, per_device_train_batch_size=6,
        num_generations=3, max_completion_length=4, beta=0.0, report_to=[],
        multi_objective_aggregation="normalize_then_sum", reward_weights=weights,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=policy.model,
        reward_funcs=funcs,
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "p"}] * 6),
        processing_class=tok,
        rollout_func=rollout,
    )
    batch = trainer._generate_and_score_completions([{"prompt": "p"} for _ in range(6)])
    adv = batch["advantages"].reshape(-1).numpy()
    assert np.isfinite(adv).all() and adv[0] == 0.0
    process = [p["process_channel"] for p in parts]
    outcome = [p["outcome_channel"] for p in parts]
    assert adv == pytest.approx(channel_advantages(process, outcome, 3), abs=1e-3)
    # Group 1 without its crashed member: the same ranking as if it had never been sampled.
    assert adv[1] > adv[2]
