"""Training presets: a tiny CPU run and the paper's 8 x A100 80GB setting, or a file.

One :class:`TrainPreset` holds the optimiser, schedule, batch and GRPO settings of every stage;
:func:`sft_args` and :func:`grpo_args` turn it into TRL's ``SFTConfig`` / ``GRPOConfig``.

- ``cpu``: the embedded 135M model on a laptop: float32, ``use_cpu=True``, no vLLM, small
  batches, a learning rate a small model can move with in a few steps.
- ``cpu-lora``: the same with LoRA adapters and the SID rows only, short sequences.
- ``gpu-lora``: ``cpu-lora`` on one GPU: bf16 autocast, 32 sequences a step.
- ``a100x8``: the paper's table (appendix D.2): alignment LR 2e-5, GRPO LR 3e-5, global batch
  256, G = 8, rollout batch 32, beta = 0.04, 200 GRPO steps; bf16, DeepSpeed ZeRO-3
  (``configs/zero3.json``), vLLM colocated with training for GRPO generation. Launch it with
  ``accelerate launch --config_file configs/accelerate_zero3.yaml`` (see README, "Training").
- a JSON or YAML file: any fields of :class:`TrainPreset`, over the ``base`` preset it names.

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
    "PRESETS",
    "Completion",
    "RolloutConfig",
    "Stage",
    "TrainPreset",
    "config_file",
    "grpo_args",
    "grpo_kwargs",
    "load_preset",
    "sft_args",
    "sft_kwargs",
    "training_device",
]

Stage = Literal["align", "mid", "grpo"]
Completion = Literal["whole", "sid"]
"""What GRPO trains: the memory agent's whole turn, or its SID turn alone."""


class TrainPreset(BaseModel):
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

    @model_validator(mode="after")
    def _consistent(self) -> TrainPreset:
        if self.use_cpu and (self.use_vllm or self.deepspeed):
            raise ValueError("use_cpu=True cannot use vLLM or DeepSpeed; those need GPUs")
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
        return self

    @property
    def global_batch(self) -> int:
        """Examples per optimiser step over all processes."""
        return (
            self.per_device_train_batch_size
            * self.gradient_accumulation_steps
            * (self.num_processes)
        )

    @property
    def global_rollouts(self) -> int:
        """Completions per GRPO step: prompts x G."""
        return self.rollout_batch * self.num_generations


PRESETS: dict[str, TrainPreset] = {
    "cpu": TrainPreset(),
    # The embedded model on a laptop, cheaper per example (bench/README.md, "train"): LoRA on
    # every linear layer plus the SID rows, short sequences, batches of similar length.
    "cpu-lora": TrainPreset(
        name="cpu-lora",
        adapter="lora",
        align_learning_rate=5e-4,
        mid_learning_rate=5e-4,
        max_length=256,
        train_sampling_strategy="group_by_length",
    ),
    # One GPU (run on a lent H200, bench/README.md "train"): cpu-lora's adapters in bf16
    # autocast, 32 sequences a step, a learning rate raised with the batch.
    "gpu-lora": TrainPreset(
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
    "a100x8": TrainPreset(
        name="a100x8",
        use_cpu=False,
        bf16=True,
        deepspeed="zero3.json",
        gradient_checkpointing=True,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=4,
        num_processes=8,  # 8 x 8 x 4 = 256, the paper's global batch
        warmup_ratio=0.03,
        align_learning_rate=2e-5,
        mid_learning_rate=2e-5,
        grpo_learning_rate=3e-5,
        num_train_epochs=3.0,
        max_length=2048,
        logging_steps=10,
        num_generations=8,
        rollout_batch=32,
        beta=0.04,
        grpo_max_steps=200,
        max_completion_length=16,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
    ),
}


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
    memory_k: int = Field(default=3, ge=1, description="Entries a lookup returns.")
    max_steps: int = Field(default=1, ge=1, description="StackPlanner steps per run.")
    max_new_tokens: int = Field(
        default=128,
        ge=1,
        description="Reply cap of the graph's calls and of the policy's rewrite or decision.",
    )
    judge: bool = Field(default=True, description="Call the LLM judge (False: judge parts 0).")
    max_context_tokens: int = Field(default=512, ge=16)
    constrained: bool = Field(
        default=False,
        description="Sample the SID turn under the SID trie (always valid, format reward 1); "
        "False samples freely with TRL's generator (vLLM when configured), as the paper does.",
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


def load_preset(spec: str = "cpu", **overrides: Any) -> TrainPreset:
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
    return TrainPreset.model_validate(merged)


def _deepspeed(preset: TrainPreset) -> str | None:
    if preset.deepspeed is None:
        return None
    path = Path(preset.deepspeed)
    return str(path if path.is_file() else config_file(preset.deepspeed))


def _common(preset: TrainPreset, out: Path, max_steps: int) -> dict[str, Any]:
    return {
        "output_dir": str(out),
        "use_cpu": preset.use_cpu,
        "bf16": preset.bf16,
        "deepspeed": _deepspeed(preset),
        "gradient_checkpointing": preset.gradient_checkpointing,
        "per_device_train_batch_size": preset.per_device_train_batch_size,
        "gradient_accumulation_steps": preset.gradient_accumulation_steps,
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


def sft_kwargs(
    preset: TrainPreset, out: Path, stage: Stage, max_steps: int | None
) -> dict[str, Any]:
    """Keyword arguments of TRL's ``SFTConfig`` for ``stage`` (align or mid)."""
    lr = preset.align_learning_rate if stage == "align" else preset.mid_learning_rate
    steps = preset.max_steps if max_steps is None else max_steps
    return {
        **_common(preset, out, steps),
        "learning_rate": lr,
        "max_length": preset.max_length,
        "completion_only_loss": True,
        "packing": False,
        "dataset_num_proc": None,
    }


def grpo_kwargs(preset: TrainPreset, out: Path, max_steps: int | None) -> dict[str, Any]:
    """Keyword arguments of TRL's ``GRPOConfig``."""
    steps = preset.grpo_max_steps if max_steps is None else max_steps
    kwargs = {
        **_common(preset, out, steps),
        "learning_rate": preset.grpo_learning_rate,
        # One prompt group per device batch: rollout_batch prompts x G completions.
        "per_device_train_batch_size": preset.global_rollouts // preset.num_processes,
        "gradient_accumulation_steps": 1,
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
    return kwargs


def sft_args(preset: TrainPreset, out: Path, stage: Stage, max_steps: int | None = None) -> Any:
    """TRL ``SFTConfig`` for ``stage``."""
    from trl import SFTConfig

    return SFTConfig(**sft_kwargs(preset, out, stage, max_steps))


def grpo_args(preset: TrainPreset, out: Path, max_steps: int | None = None) -> Any:
    """TRL ``GRPOConfig``."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(preset, out, max_steps))


def training_device(preset: TrainPreset) -> str:
    """``cuda`` for a GPU preset on a machine with a GPU, else ``cpu`` (where a stage starts)."""
    if preset.use_cpu or preset.num_processes > 1:  # several GPUs: accelerate places the model
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
