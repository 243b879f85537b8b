"""Training presets: CPU runs, one GPU, and the paper's 8 x A100 80GB setting, or a file.

One :class:`TrainConfig` holds the optimiser, schedule, batch and GRPO settings of every stage;
:func:`sft_args` and :func:`grpo_args` turn it into TRL's ``SFTConfig`` / ``GRPOConfig``.

- ``cpu``: the embedded 135M model on a laptop: float32, ``use_cpu=True``, no vLLM, small
  batches, a learning rate a small model can move with in a few steps.
- ``cpu-lora``: the same with LoRA adapters and the SID rows only, short sequences.
- ``cpu-ddp``, ``cpu-zero3``: the distributed paths on two CPU processes (DDP over gloo;
  DeepSpeed ZeRO-3 with ``DS_ACCELERATOR=cpu``), launched with ``torchrun --nproc_per_node 2``.
  They exist so that the multi-process code runs in CI.
- ``gpu``: one GPU, every weight trained in bf16 autocast, no DeepSpeed: all three stages.
- ``gpu-lora``: ``cpu-lora`` on one GPU: bf16 autocast, 32 sequences a step.
- ``gpu-zero3``: DeepSpeed ZeRO-3 on however many GPUs the launcher starts (the GPU check runs
  it on one).
- ``a100x8``: the paper's setting on 8 training GPUs, vLLM colocated for GRPO generation; the
  planner/judge model is served on other GPUs. ``a100x4-server``: one 8-GPU node split into
  4 training GPUs, 2 for ``trl vllm-serve`` and 2 for the planner/judge server. Each value's
  source in the paper is cited beside it. Launch with ``accelerate launch --config_file
  configs/accelerate_zero3.yaml`` (see docs/training.md, "Several processes and GPUs").
- a JSON or YAML file: any fields of :class:`TrainConfig`, over the ``base`` preset it names.

A launched run counts its processes itself: :func:`for_processes` re-checks the batch split for
the number the launcher started.

:class:`RolloutConfig` is how GRPO's rollouts run the graphs and score them; its field
descriptions are the help of ``genmem train grpo``'s flags.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from genmem.envs.scoring import DEFAULT_PARTIAL_BONUS

__all__ = [
    "GRPO_TASKS",
    "MID_TASKS",
    "PRESETS",
    "TRAINING_LOOKUP_K",
    "TRAINING_MAX_NEW_TOKENS",
    "Completion",
    "RolloutConfig",
    "Stage",
    "TrainConfig",
    "config_file",
    "deepspeed_stage",
    "for_processes",
    "grpo_args",
    "grpo_kwargs",
    "load_preset",
    "partitions",
    "sft_args",
    "sft_kwargs",
    "training_device",
]

Stage = Literal["align", "mid", "grpo"]
Completion = Literal["whole", "sid"]
"""What GRPO trains: the memory agent's whole turn, or its SID turn alone."""

TRAINING_LOOKUP_K = 3
"""Entries a lookup returns in the graphs that training runs: mid-training traces and GRPO
rollouts use the same number, so the policy trains on lookups of one size. A training setting of
its own, smaller than the lookup tool's ``DEFAULT_LOOKUP_K`` (5) that evaluation and evolution
use."""

GRPO_TASKS = 4
"""Training tasks GRPO samples its groups from unless told otherwise."""

MID_TASKS = 8
"""Training tasks whose traces mid-training collects unless told otherwise."""

TRAINING_MAX_NEW_TOKENS = 128
"""Reply cap of the text turns in the graphs that training runs: the teacher's in mid-training
traces, the graph's calls and the policy's rewrite or decision in GRPO rollouts."""


class TrainConfig(BaseModel):
    """Settings shared by the three stages (TRL argument names where one exists)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "cpu"
    use_cpu: bool = True
    bf16: bool = False
    deepspeed: str | None = Field(
        default=None, description="DeepSpeed JSON (a packaged name like 'zero3.json' or a path)."
    )
    gradient_checkpointing: bool = False
    per_device_train_batch_size: int = Field(default=4, ge=1)
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    num_processes: int = Field(default=1, ge=1, description="GPUs (for the global batch).")
    align_learning_rate: float = Field(default=2e-4, gt=0)
    mid_learning_rate: float = Field(default=1e-4, gt=0)
    grpo_learning_rate: float = Field(default=1e-5, gt=0)
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1)
    weight_decay: float = Field(default=0.0, ge=0)
    num_train_epochs: float = Field(default=1.0, gt=0)
    max_steps: int = Field(default=-1, description="Overrides epochs when > 0.")
    align_max_steps: int | None = Field(
        default=None, description="Alignment's optimiser steps (None: max_steps)."
    )
    mid_max_steps: int | None = Field(
        default=None, description="Mid-training's optimiser steps (None: max_steps)."
    )
    align_global_batch: int | None = Field(
        default=None,
        ge=1,
        description="Alignment's examples per optimiser step over all processes (None: "
        "per_device_train_batch_size x gradient_accumulation_steps x processes).",
    )
    mid_global_batch: int | None = Field(
        default=None, ge=1, description="Mid-training's examples per step (as align's)."
    )
    max_length: int = Field(default=768, ge=32, description="SFT sequence cap (tokens).")
    logging_steps: int = Field(default=1, ge=1)
    seed: int = 0
    # What SFT trains (genmem.training.adapters)
    adapter: Literal["full", "lora"] = Field(
        default="full",
        description="'full' fine-tunes every weight; 'lora' trains LoRA adapters and the SID "
        "token rows only, and merges them into the saved policy.",
    )
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    lora_target_modules: str | list[str] = Field(
        default="all-linear", description="PEFT target_modules: 'all-linear' or module names."
    )
    sid_rows_lr_scale: float = Field(
        default=4.0, gt=0, description="Learning rate of the new SID rows over the stage's (lora)."
    )
    train_sampling_strategy: Literal["random", "group_by_length"] = Field(
        default="random", description="'group_by_length' batches similar lengths (less padding)."
    )
    # GRPO (appendix D.2)
    num_generations: int = Field(default=2, ge=2, description="Group size G.")
    rollout_batch: int = Field(default=1, ge=1, description="Prompts per GRPO step.")
    beta: float = Field(default=0.04, ge=0, description="KL coefficient to the reference.")
    epsilon: float = Field(default=0.2, gt=0, description="PPO clip range.")
    grpo_max_steps: int = Field(default=2, ge=1)
    max_completion_length: int = Field(default=8, ge=1, description="SID turn tokens.")
    temperature: float = Field(default=1.0, gt=0)
    use_vllm: bool = False
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0, le=1)
    vllm_server_host: str = Field(
        default="127.0.0.1", description="Host of `trl vllm-serve` (vllm_mode server)."
    )
    vllm_server_port: int = Field(default=8000, ge=1, le=65535)

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.use_cpu and self.use_vllm:
            raise ValueError("use_cpu=True cannot use vLLM; it needs GPUs")
        if self.use_cpu and self.deepspeed:
            raise ValueError(
                f"use_cpu=True with deepspeed={self.deepspeed!r}: DeepSpeed runs on a CPU through "
                "its own accelerator (DS_ACCELERATOR=cpu) with use_cpu=False; see the cpu-zero3 "
                "preset"
            )
        if self.deepspeed and self.adapter != "full":
            raise ValueError(
                f"adapter={self.adapter!r} with deepspeed={self.deepspeed!r}: adapters are "
                "merged into partitioned weights nowhere; use adapter 'full' under DeepSpeed, or "
                "LoRA without it"
            )
        if self.global_rollouts % self.num_generations:
            raise ValueError(
                f"rollout_batch x G = {self.global_rollouts} completions per step must be a "
                f"multiple of G = {self.num_generations}"
            )
        if self.global_rollouts % self.num_processes:
            raise ValueError(
                f"rollout_batch x G = {self.global_rollouts} completions must split evenly over "
                f"{self.num_processes} processes"
            )
        for stage in ("align", "mid", "grpo"):
            total, per_pass = self.stage_batch(stage), self.device_batch(stage)
            if total % self.num_processes or (total // self.num_processes) % per_pass:
                raise ValueError(
                    f"{stage}'s batch of {total} does not split into {self.num_processes} "
                    f"processes x passes of {per_pass}; change the batch, "
                    "per_device_train_batch_size or the number of processes"
                )
        return self

    def stage_batch(self, stage: Stage) -> int:
        """Examples per optimiser step over all processes, for ``stage``."""
        if stage == "grpo":
            return self.global_rollouts
        total = getattr(self, f"{stage}_global_batch")
        return self.global_batch if total is None else total

    def accumulation(self, stage: Stage) -> int:
        """Gradient accumulation steps that make ``stage``'s batch on this many processes."""
        per_step = self.device_batch(stage) * self.num_processes
        return max(1, self.stage_batch(stage) // per_step)

    def device_batch(self, stage: Stage) -> int:
        """Examples per process per forward pass, for ``stage``."""
        if stage == "grpo":
            return min(self.per_device_train_batch_size, self.global_rollouts // self.num_processes)
        if getattr(self, f"{stage}_global_batch") is None:
            return self.per_device_train_batch_size
        return min(self.per_device_train_batch_size, self.stage_batch(stage) // self.num_processes)

    @property
    def global_batch(self) -> int:
        """Examples per optimiser step over all processes (SFT, unless a stage sets its own)."""
        return (
            self.per_device_train_batch_size
            * self.gradient_accumulation_steps
            * (self.num_processes)
        )

    @property
    def global_rollouts(self) -> int:
        """Completions per GRPO step: prompts x G."""
        return self.rollout_batch * self.num_generations


# The paper (shared/paper/genmem-paper.tex) gives some values twice and differently: section 4
# ("Implementation and Training") and the appendix table of RL hyperparameters
# (tab:app_sid_hyper). Each paper-scale value below says which one it follows.
_PAPER = {
    # Table tab:app_sid_hyper: alignment LR 2e-5 (section 4 says 1e-5; the table is the one
    # "all post-training runs use").
    "align_learning_rate": 2e-5,
    # Section 4: alignment for 17,465 steps at a batch of 48 (the table gives neither).
    "align_max_steps": 17465,
    "align_global_batch": 48,
    # Section 4: mid-training 157 steps, effective batch 32, LR 2e-6 (the table gives none).
    "mid_learning_rate": 2e-6,
    "mid_max_steps": 157,
    "mid_global_batch": 32,
    # Table tab:app_sid_hyper: GRPO LR 3e-5, 200 steps (section 4 says 130), G = 8, 32 prompts a
    # step (8 x 32 = 256 completions, the table's global batch), KL beta 0.04.
    "grpo_learning_rate": 3e-5,
    "grpo_max_steps": 200,
    "num_generations": 8,
    "rollout_batch": 32,
    "beta": 0.04,
    # Section 4: AdamW with cosine decay (both SFT stages); the paper gives no warmup: 3 %.
    "lr_scheduler_type": "cosine",
    "warmup_ratio": 0.03,
    # Section 4: 8 x A100 80GB, DeepSpeed ZeRO-3, vLLM rollouts. bf16 is ours (A100s run it).
    "use_cpu": False,
    "bf16": True,
    "deepspeed": "zero3.json",
    "gradient_checkpointing": True,
    "use_vllm": True,
    # Ours: sequence caps for a 7B model's prompts, SID turn plus margin.
    "max_length": 2048,
    "max_completion_length": 16,
    "logging_steps": 10,
}

PRESETS: dict[str, TrainConfig] = {
    "cpu": TrainConfig(),
    # The embedded model on a laptop, cheaper per example (bench/README.md, "train"): LoRA on
    # every linear layer plus the SID rows, short sequences, batches of similar length.
    "cpu-lora": TrainConfig(
        name="cpu-lora",
        adapter="lora",
        align_learning_rate=5e-4,
        mid_learning_rate=5e-4,
        max_length=256,
        train_sampling_strategy="group_by_length",
    ),
    # Two CPU processes over gloo (torchrun --nproc_per_node 2): the DDP path, tested in CI.
    "cpu-ddp": TrainConfig(
        name="cpu-ddp", num_processes=2, per_device_train_batch_size=2, max_length=256
    ),
    # Two CPU processes under DeepSpeed ZeRO-3 (DS_ACCELERATOR=cpu torchrun --nproc_per_node 2):
    # every parameter partitioned, even a tiny model's (configs/zero3_cpu.json), tested in CI.
    "cpu-zero3": TrainConfig(
        name="cpu-zero3",
        use_cpu=False,
        deepspeed="zero3_cpu.json",
        num_processes=2,
        per_device_train_batch_size=2,
        max_length=256,
    ),
    # One GPU, every weight (GRPO too: the policy, its reference and the planner share it).
    "gpu": TrainConfig(
        name="gpu",
        use_cpu=False,
        bf16=True,
        per_device_train_batch_size=16,
        align_learning_rate=1e-4,
        mid_learning_rate=5e-5,
        grpo_learning_rate=1e-5,
        warmup_ratio=0.03,
        max_length=512,
        logging_steps=10,
        num_generations=4,
        rollout_batch=2,
        max_completion_length=8,
    ),
    # One GPU (run on a lent H200, bench/README.md "train"): cpu-lora's adapters in bf16
    # autocast, 32 sequences a step, a learning rate raised with the batch.
    "gpu-lora": TrainConfig(
        name="gpu-lora",
        use_cpu=False,
        bf16=True,
        adapter="lora",
        per_device_train_batch_size=32,
        align_learning_rate=1e-3,
        mid_learning_rate=1e-3,
        warmup_ratio=0.03,
        max_length=256,
        logging_steps=10,
        train_sampling_strategy="group_by_length",
    ),
    # DeepSpeed ZeRO-3 on the GPUs the launcher starts (the GPU check: one).
    "gpu-zero3": TrainConfig(
        name="gpu-zero3",
        use_cpu=False,
        bf16=True,
        deepspeed="zero3.json",
        per_device_train_batch_size=8,
        align_learning_rate=1e-4,
        mid_learning_rate=5e-5,
        warmup_ratio=0.03,
        max_length=512,
        logging_steps=1,
        num_generations=2,
        rollout_batch=1,
    ),
    # The paper's setting on 8 training GPUs with vLLM colocated (planner/judge served apart).
    "a100x8": TrainConfig(
        **_PAPER,
        name="a100x8",
        num_processes=8,
        # GPUs x per pass x accumulation: align 8 x 6 x 1 = 48, mid 8 x 4 x 1 = 32,
        # GRPO 8 x 8 x 4 = 256.
        per_device_train_batch_size=8,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
    ),
    # One 8-GPU node: training on 4 (CUDA_VISIBLE_DEVICES=0,1,2,3), `trl vllm-serve` on 2,
    # the planner/judge server on 2 (docs/training.md, "Several processes and GPUs").
    "a100x4-server": TrainConfig(
        **_PAPER,
        name="a100x4-server",
        num_processes=4,
        # 4 per pass: align 4 x 4 x 3 = 48, mid 4 x 4 x 2 = 32, GRPO 4 x 4 x 16 = 256.
        per_device_train_batch_size=4,
        vllm_mode="server",
    ),
}


def for_processes(preset: TrainConfig, processes: int) -> TrainConfig:
    """``preset`` for a run with ``processes`` processes (the launcher's count).

    Raises:
        ValueError: its batches do not split over that many processes.
    """
    if processes == preset.num_processes:
        return preset
    try:
        return TrainConfig.model_validate({**preset.model_dump(), "num_processes": processes})
    except ValueError as exc:
        raise ValueError(
            f"preset {preset.name!r} was planned for {preset.num_processes} processes and the "
            f"launcher started {processes}: {exc}"
        ) from None


class RolloutConfig(BaseModel):
    """How rollouts run the graph and score it (field descriptions are the CLI's help)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    completion: Completion = Field(
        default="whole",
        description="What GRPO trains: 'whole' = the agent's whole turn (SID, the lookup "
        "result masked out of the loss, then the rewrite or decision the policy writes); "
        "'sid' = the SID turn only (the chat model writes the rewrite and the decision).",
    )
    alpha_partial: float = Field(
        default=DEFAULT_PARTIAL_BONUS,
        ge=0,
        description="Outcome bonus when both runs succeed (Eq. 4); evaluation uses the same.",
    )
    memory_k: int = Field(
        default=TRAINING_LOOKUP_K,
        ge=1,
        description="Entries a rollout's lookup returns: TRAINING_LOOKUP_K, as in the "
        "mid-training traces (evaluation's lookups return DEFAULT_LOOKUP_K, 5).",
    )
    max_steps: int = Field(default=1, ge=1, description="StackPlanner steps per rollout.")
    max_new_tokens: int = Field(
        default=TRAINING_MAX_NEW_TOKENS,
        ge=1,
        description="Reply cap of the graph's calls and of the policy's rewrite or decision.",
    )
    judge: bool = Field(
        default=True,
        description="Call the LLM judge; without it the judge's reward parts are 0.",
    )
    max_context_tokens: int = Field(default=512, ge=16)
    constrained: bool = Field(
        default=False,
        description="Sample the SID turn under the SID trie (always valid, format reward 1); "
        "without it the turn is sampled freely with TRL's generator (vLLM when configured), as "
        "the paper does.",
    )
    concurrency: int = Field(
        default=1,
        ge=1,
        description="Rollouts of a batch run at once. It pays with a served --planner-model "
        "(genmem serve, vllm:URL#MODEL, an API); --completion whole, games and WebShop, and a "
        "sampling local model run one at a time, with a warning.",
    )
    max_failures: int = Field(
        default=10,
        ge=0,
        description="Failed rollouts and judge calls tolerated (each is logged and scored NaN, "
        "not 0); one more stops the run, keeping the rollout log and the report so far.",
    )


def config_file(name: str) -> Path:
    """Path of a packaged config file (``zero3.json``, ``accelerate_zero3.yaml``)."""
    path = Path(str(resources.files("genmem.training") / "configs" / name))
    if not path.is_file():
        raise FileNotFoundError(f"no packaged training config {name!r} (looked in {path.parent})")
    return path


def load_preset(spec: str = "cpu", **overrides: Any) -> TrainConfig:
    """``cpu``, ``a100x8``, or a JSON/YAML file of fields over its ``base`` preset (default cpu)."""
    if spec in PRESETS:
        base, fields = PRESETS[spec], {}
    else:
        path = Path(spec)
        if not path.is_file():
            names = ", ".join(PRESETS)
            raise ValueError(f"--config {spec!r}: use {names}, or an existing JSON/YAML file")
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            import yaml

            fields = yaml.safe_load(text) or {}
        else:
            fields = json.loads(text)
        if not isinstance(fields, dict):
            raise ValueError(f"{path}: expected a mapping of preset fields")
        base_name = fields.pop("base", "cpu")
        if base_name not in PRESETS:
            raise ValueError(f"{path}: base {base_name!r} is not one of {sorted(PRESETS)}")
        base = PRESETS[base_name]
        fields.setdefault("name", path.stem)
    merged = {
        **base.model_dump(),
        **fields,
        **{k: v for k, v in overrides.items() if v is not None},
    }
    return TrainConfig.model_validate(merged)


def deepspeed_stage(preset: TrainConfig) -> int | None:
    """The ZeRO stage of ``preset``'s DeepSpeed file (None without DeepSpeed)."""
    path = _deepspeed(preset)
    if path is None:
        return None
    body = json.loads(Path(path).read_text(encoding="utf-8"))
    return int(body.get("zero_optimization", {}).get("stage", 0))


def partitions(preset: TrainConfig) -> bool:
    """Whether ``preset`` loads each process's partition of the weights only (ZeRO-3)."""
    return deepspeed_stage(preset) == 3


def _deepspeed(preset: TrainConfig) -> str | None:
    if preset.deepspeed is None:
        return None
    path = Path(preset.deepspeed)
    return str(path if path.is_file() else config_file(preset.deepspeed))


def _common(
    preset: TrainConfig, out: Path, max_steps: int, stage: Stage, started: bool
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "output_dir": str(out),
        "use_cpu": preset.use_cpu,
        "bf16": preset.bf16,
        "deepspeed": _deepspeed(preset),
        "gradient_checkpointing": preset.gradient_checkpointing,
        "per_device_train_batch_size": preset.device_batch(stage),
        "gradient_accumulation_steps": preset.accumulation(stage),
        "lr_scheduler_type": preset.lr_scheduler_type,
        "warmup_steps": preset.warmup_ratio,  # a float < 1 is a ratio of the total steps
        "weight_decay": preset.weight_decay,
        "optim": "adamw_torch",
        "num_train_epochs": preset.num_train_epochs,
        "max_steps": max_steps,
        "logging_steps": preset.logging_steps,
        "seed": preset.seed,
        "save_strategy": "no",
        "train_sampling_strategy": preset.train_sampling_strategy,
        "report_to": [],
        "disable_tqdm": False,
    }
    if started:  # the process group genmem.training.distributed started: the Trainer keeps it
        kwargs["accelerator_config"] = {"use_configured_state": True}
    return kwargs


def sft_kwargs(
    preset: TrainConfig,
    out: Path,
    stage: Stage,
    max_steps: int | None,
    *,
    started: bool = False,
) -> dict[str, Any]:
    """Keyword arguments of TRL's ``SFTConfig`` for ``stage`` (align or mid).

    ``started``: the process group was started by :func:`~genmem.training.distributed.
    start_processes` (a launched run), which the Trainer then uses as it is.
    """
    lr = preset.align_learning_rate if stage == "align" else preset.mid_learning_rate
    staged = preset.align_max_steps if stage == "align" else preset.mid_max_steps
    steps = max_steps if max_steps is not None else (staged or preset.max_steps)
    return {
        **_common(preset, out, steps, stage, started),
        "learning_rate": lr,
        "max_length": preset.max_length,
        "completion_only_loss": True,
        "packing": False,
        "dataset_num_proc": None,
    }


def grpo_kwargs(
    preset: TrainConfig, out: Path, max_steps: int | None, *, started: bool = False
) -> dict[str, Any]:
    """Keyword arguments of TRL's ``GRPOConfig``.

    One generation batch (rollout_batch prompts x G completions, over all processes) per
    optimiser step: passes of ``device_batch`` per process, accumulated.
    """
    steps = preset.grpo_max_steps if max_steps is None else max_steps
    kwargs = {
        **_common(preset, out, steps, "grpo", started),
        "learning_rate": preset.grpo_learning_rate,
        "num_generations": preset.num_generations,
        "max_completion_length": preset.max_completion_length,
        "temperature": preset.temperature,
        "beta": preset.beta,
        "epsilon": preset.epsilon,
        # Per-channel advantages: see genmem.training.advantages.
        "multi_objective_aggregation": "normalize_then_sum",
        "scale_rewards": "group",
        "use_vllm": preset.use_vllm,
        "log_completions": False,
    }
    if preset.use_vllm:
        kwargs.update(
            vllm_mode=preset.vllm_mode,
            vllm_gpu_memory_utilization=preset.vllm_gpu_memory_utilization,
        )
        if preset.vllm_mode == "server":
            kwargs.update(
                vllm_server_host=preset.vllm_server_host,
                vllm_server_port=preset.vllm_server_port,
            )
    return kwargs


def sft_args(
    preset: TrainConfig,
    out: Path,
    stage: Stage,
    max_steps: int | None = None,
    *,
    started: bool = False,
) -> Any:
    """TRL ``SFTConfig`` for ``stage``."""
    from trl import SFTConfig

    return SFTConfig(**sft_kwargs(preset, out, stage, max_steps, started=started))


def grpo_args(
    preset: TrainConfig, out: Path, max_steps: int | None = None, *, started: bool = False
) -> Any:
    """TRL ``GRPOConfig``."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(preset, out, max_steps, started=started))


def training_device(preset: TrainConfig, local_rank: int = 0) -> str:
    """Where this process's copy of the policy runs: its own GPU for a GPU preset, else CPU."""
    if preset.use_cpu:
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    return f"cuda:{local_rank}" if torch.cuda.device_count() > 1 else "cuda"
