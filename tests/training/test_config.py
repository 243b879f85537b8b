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
    # GRPO: the appendix table (global batch 256 = 32 prompts x G 8, LR 3e-5, beta 0.04, 200
    # steps); alignment LR from the table, its steps and batch 48 from section 4; mid-training
    # from section 4 (LR 2e-6, 157 steps, batch 32).
    assert p.stage_batch("grpo") == 256 and p.num_generations == 8 and p.rollout_batch == 32
    assert (p.align_learning_rate, p.grpo_learning_rate, p.beta) == (2e-5, 3e-5, 0.04)
    assert (p.mid_learning_rate, p.mid_max_steps, p.stage_batch("mid")) == (2e-6, 157, 32)
    assert (p.align_max_steps, p.stage_batch("align")) == (17465, 48)
    assert p.grpo_max_steps == 200 and p.use_vllm and p.bf16
    kw = grpo_kwargs(p, tmp_path, None)
    assert kw["deepspeed"] == str(config_file("zero3.json"))
    assert kw["vllm_mode"] == "colocate"
    # 8 GPUs x 8 per pass x 4 accumulated = the 256 completions of one generation batch
    assert (kw["per_device_train_batch_size"], kw["gradient_accumulation_steps"]) == (8, 4)
    align = sft_kwargs(p, tmp_path, "align", None)
    assert align["learning_rate"] == 2e-5 and align["max_steps"] == 17465
    assert align["per_device_train_batch_size"] * align["gradient_accumulation_steps"] * 8 == 48
    mid = sft_kwargs(p, tmp_path, "mid", None)
    assert mid["per_device_train_batch_size"] * mid["gradient_accumulation_steps"] * 8 == 32
    # Everything but the GPU-only parts builds on this CPU machine.
    cpu_view = {**kw, "use_cpu": True, "deepspeed": None}
    from trl import GRPOConfig

    built = GRPOConfig(**cpu_view)
    assert built.vllm_mode == "colocate" and built.num_generations == 8
    assert built.generation_batch_size == 32  # one process here: 8 per pass x 4


def test_deepspeed_and_accelerate_files_parse() -> None:
    ds = json.loads(config_file("zero3.json").read_text())
    assert ds["zero_optimization"]["stage"] == 3
    assert ds["train_micro_batch_size_per_gpu"] == "auto" and ds["bf16"]["enabled"] == "auto"
    acc = yaml.safe_load(config_file("accelerate_zero3.yaml").read_text())
    assert acc["distributed_type"] == "DEEPSPEED" and acc["num_processes"] == 8
    assert acc["deepspeed_config"]["deepspeed_config_file"].endswith("zero3.json")
    # The serving split keeps training on 4 GPUs; vLLM and the planner have the other 4.
    split = yaml.safe_load(config_file("accelerate_zero3_server.yaml").read_text())
    assert split["num_processes"] == PRESETS["a100x4-server"].num_processes == 4
    assert str(split["gpu_ids"]).split(",") == ["0", "1", "2", "3"]
    cpu = json.loads(config_file("zero3_cpu.json").read_text())["zero_optimization"]
    assert cpu["stage"] == 3 and cpu["stage3_param_persistence_threshold"] == 0


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
    with pytest.raises(ValueError, match="use cpu, cpu-lora, cpu-ddp, cpu-zero3, gpu, gpu-lora"):
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
    from genmem.cli.main import build_parser
    from genmem.cli.reference import _walk
    from genmem.training.config import RolloutConfig

    (grpo,) = [p for prog, _, p in _walk(build_parser(), None) if prog.endswith("train grpo")]
    helps = {a.dest: str(a.help) for a in grpo._actions}
    for name in ("completion", "max_failures"):
        description = str(RolloutConfig.model_fields[name].description)
        assert helps[name].lower().startswith(description.rstrip(".").lower())


def test_each_process_places_its_copy_on_its_own_gpu(monkeypatch) -> None:
    """Issue 37 item 8: a multi-GPU preset used to start every rank on the CPU."""
    import torch

    from genmem.training.config import PRESETS, training_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert training_device(PRESETS["gpu"]) == training_device(PRESETS["a100x8"], 3) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert training_device(PRESETS["gpu"]) == "cuda"
    assert training_device(PRESETS["cpu"]) == training_device(PRESETS["cpu-ddp"], 1) == "cpu"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert training_device(PRESETS["a100x8"], 3) == "cuda:3"


def test_launched_runs_recheck_the_batch_split_for_their_process_count() -> None:
    from genmem.training.config import PRESETS, for_processes

    assert for_processes(PRESETS["gpu-zero3"], 2).num_processes == 2
    assert for_processes(PRESETS["cpu-ddp"], 2) is PRESETS["cpu-ddp"]
    with pytest.raises(ValueError, match="planned for 8 processes and the launcher started 3"):
        for_processes(PRESETS["a100x8"], 3)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("use_cpu: true\ndeepspeed: zero3.json\n", "DS_ACCELERATOR=cpu"),
        ("base: cpu-zero3\nadapter: lora\n", "adapter 'full' under DeepSpeed"),
        ("base: a100x8\nmid_global_batch: 20\n", "mid's batch of 20 does not split"),
    ],
)
def test_distributed_presets_refuse_what_cannot_run(tmp_path, body, message) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(ValueError, match=message):
        load_preset(str(f))


def test_server_mode_preset_reaches_trl_with_its_host_and_port(tmp_path) -> None:
    p = PRESETS["a100x4-server"]
    kw = grpo_kwargs(p, tmp_path, None)
    assert kw["vllm_mode"] == "server" and kw["use_vllm"]
    assert (kw["vllm_server_host"], kw["vllm_server_port"]) == ("127.0.0.1", 8000)
    # 4 GPUs x 4 per pass x 16 accumulated = 256 completions per step
    assert kw["per_device_train_batch_size"] * kw["gradient_accumulation_steps"] * 4 == 256
    from trl import GRPOConfig

    built = GRPOConfig(**{**kw, "use_cpu": True, "deepspeed": None})
    assert built.vllm_server_port == 8000 and built.vllm_mode == "server"
