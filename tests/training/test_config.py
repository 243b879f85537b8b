"""Training presets: parsed, consistent, and built into TRL's trainer arguments on CPU."""

from __future__ import annotations

import json

import pytest
import yaml

from genmem.training.config import (
    PRESETS,
    config_file,
    grpo_args,
    grpo_kwargs,
    load_preset,
    sft_args,
    sft_kwargs,
)


def test_cpu_preset_builds_trl_arguments(tmp_path) -> None:
    preset = load_preset("cpu")
    sft = sft_args(preset, tmp_path, "align", max_steps=2)
    assert sft.use_cpu and not sft.bf16 and sft.max_steps == 2 and sft.completion_only_loss
    assert sft.lr_scheduler_type == "cosine" and sft.optim == "adamw_torch"
    grpo = grpo_args(preset, tmp_path, max_steps=2)
    assert grpo.num_generations == preset.num_generations and grpo.beta == 0.04
    assert grpo.multi_objective_aggregation == "normalize_then_sum" and not grpo.use_vllm
    assert grpo.generation_batch_size % grpo.num_generations == 0


def test_a100_preset_is_the_papers_table(tmp_path) -> None:
    p = PRESETS["a100x8"]
    assert p.global_batch == 256 and p.num_generations == 8 and p.rollout_batch == 32
    assert (p.align_learning_rate, p.grpo_learning_rate, p.beta) == (2e-5, 3e-5, 0.04)
    assert p.grpo_max_steps == 200 and p.use_vllm and p.bf16
    kw = grpo_kwargs(p, tmp_path, None)
    assert kw["deepspeed"] == str(config_file("zero3.json"))
    assert kw["vllm_mode"] == "colocate" and kw["per_device_train_batch_size"] == 32
    assert sft_kwargs(p, tmp_path, "align", None)["learning_rate"] == 2e-5
    # Everything but the GPU-only parts builds on this CPU machine.
    cpu_view = {**kw, "use_cpu": True, "deepspeed": None}
    from trl import GRPOConfig

    built = GRPOConfig(**cpu_view)
    assert built.vllm_mode == "colocate" and built.num_generations == 8
    assert built.generation_batch_size == 32


def test_deepspeed_and_accelerate_files_parse() -> None:
    ds = json.loads(config_file("zero3.json").read_text())
    assert ds["zero_optimization"]["stage"] == 3
    assert ds["train_micro_batch_size_per_gpu"] == "auto" and ds["bf16"]["enabled"] == "auto"
    acc = yaml.safe_load(config_file("accelerate_zero3.yaml").read_text())
    assert acc["distributed_type"] == "DEEPSPEED" and acc["num_processes"] == 8
    assert acc["deepspeed_config"]["deepspeed_config_file"].endswith("zero3.json")


def test_preset_file_overrides_its_base(tmp_path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("base: cpu\nalign_learning_rate: 0.001\nnum_generations: 4\n")
    p = load_preset(str(f))
    assert p.name == "mine" and p.align_learning_rate == 0.001 and p.num_generations == 4
    assert p.use_cpu


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("base: nope\n", "base 'nope'"),
        ("use_vllm: true\n", "cannot use vLLM"),
        ("num_generations: 3\nrollout_batch: 1\nnum_processes: 2\n", "split evenly"),
        ("learning_rat: 1\n", "Extra inputs"),
        ("- 1\n", "mapping"),
        ("adapter: qlora\n", "'full' or 'lora'"),
        ("train_sampling_strategy: sorted\n", "'random' or 'group_by_length'"),
    ],
)
def test_bad_preset_files_are_refused(tmp_path, body, message) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(ValueError, match=message):
        load_preset(str(f))


def test_cpu_lora_preset_trains_adapters_on_short_grouped_batches(tmp_path) -> None:
    preset = load_preset("cpu-lora")
    assert preset.adapter == "lora" and preset.use_cpu and preset.max_length == 256
    kwargs = sft_kwargs(preset, tmp_path, "align", None)
    assert kwargs["train_sampling_strategy"] == "group_by_length"
    assert kwargs["learning_rate"] == preset.align_learning_rate
    assert sft_kwargs(load_preset("cpu"), tmp_path, "align", None)["train_sampling_strategy"] == (
        "random"
    )


def test_unknown_preset_name() -> None:
    with pytest.raises(ValueError, match="use cpu, cpu-lora, gpu-lora, a100x8"):
        load_preset("h100x64")


def test_rollout_config_defaults_and_refusals() -> None:
    from pydantic import ValidationError

    from genmem.envs.scoring import DEFAULT_PARTIAL_BONUS
    from genmem.training.config import RolloutConfig

    cfg = RolloutConfig()
    assert cfg.completion == "whole" and cfg.max_failures == 10
    assert cfg.alpha_partial == DEFAULT_PARTIAL_BONUS
    for bad in ({"completion": "all"}, {"max_failures": -1}, {"alpha_partial": -0.1}):
        with pytest.raises(ValidationError):
            RolloutConfig(**bad)


def test_grpo_flags_take_their_help_from_the_rollout_config() -> None:
    from genmem.cli.train import _rollout_help
    from genmem.training.config import RolloutConfig

    for name in ("completion", "max_failures"):
        description = str(RolloutConfig.model_fields[name].description)
        assert _rollout_help(name).startswith(description.rstrip("."))


def test_a_stage_starts_on_the_gpu_only_for_a_single_gpu_preset_on_a_gpu_machine(
    monkeypatch,
) -> None:
    import torch

    from genmem.training.config import PRESETS, training_device

    one_gpu = PRESETS["cpu-lora"].model_copy(update={"use_cpu": False, "bf16": True})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert training_device(PRESETS["cpu-lora"]) == training_device(one_gpu) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert training_device(one_gpu) == "cuda"
    assert training_device(PRESETS["cpu"]) == "cpu"
    assert training_device(PRESETS["a100x8"]) == "cpu"  # accelerate places it on the 8 GPUs
