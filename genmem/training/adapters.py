"""What an SFT stage trains: the whole model, or LoRA adapters plus the SID token rows (PEFT).

With ``adapter="lora"`` the policy's linear layers get low-rank adapters (PEFT ``LoraConfig``,
``target_modules`` as the preset says) and only the rows of the SID tokens in the (tied)
embedding matrix train beside them (PEFT ``trainable_token_indices``): the rest of the 135M
weights stay frozen, so a step computes no weight gradients for them and AdamW keeps no state for
them. The SID rows are new and start from a description's mean embedding, so they get their own
learning rate (``sid_rows_lr_scale`` times the stage's). After training the adapters are merged
into the weights (:func:`merge_adapter`), so the saved policy directory is a plain model that
``--model local:DIR`` loads like any other.
"""

from __future__ import annotations

from typing import Any

from genmem.memory.sid import SIDSpec
from genmem.training.config import TrainConfig

__all__ = ["SID_ROWS_PARAM", "attach_adapter", "merge_adapter", "optimizer_for"]

SID_ROWS_PARAM = "trainable_tokens_delta"
"""Name PEFT gives the trained rows of the token embedding."""


def attach_adapter(policy: Any, spec: SIDSpec, preset: TrainConfig) -> None:
    """Wrap ``policy.model`` in LoRA adapters plus trainable SID rows (no-op for ``full``)."""
    if preset.adapter == "full":
        return
    from peft import LoraConfig, get_peft_model

    from genmem.policies.sid_tokens import sid_token_ids

    rows = [i for level in sid_token_ids(policy.tokenizer, spec) for i in level]
    embedding = _embedding_name(policy.model)
    config = LoraConfig(
        r=preset.lora_r,
        lora_alpha=preset.lora_alpha,
        lora_dropout=preset.lora_dropout,
        target_modules=preset.lora_target_modules,
        trainable_token_indices={embedding: rows},
        task_type="CAUSAL_LM",
    )
    policy.model = get_peft_model(policy.model, config)
    head = policy.model.get_output_embeddings()
    if head is not None and not hasattr(head, "bias"):
        # PEFT wraps a tied LM head in a TrainableTokensWrapper that answers ``weight`` (merged
        # with the trained rows) but not ``bias``, which TRL's fused LM-head loss reads. The
        # tied head has no bias, so say so.
        head.bias = None


def _embedding_name(model: Any) -> str:
    """The module name of ``model``'s input embedding (``embed_tokens`` for Llama-like models)."""
    target = model.get_input_embeddings()
    for name, module in model.named_modules():
        if module is target:
            return name.rsplit(".", 1)[-1]
    raise ValueError(f"{type(model).__name__} has no named input embedding module")


def merge_adapter(policy: Any) -> None:
    """Fold trained adapters into the weights so ``policy.model`` is a plain model again."""
    from peft import PeftModel

    if isinstance(policy.model, PeftModel):
        policy.model = policy.model.merge_and_unload()


def optimizer_for(model: Any, preset: TrainConfig, learning_rate: float) -> Any | None:
    """AdamW with the SID rows at their own learning rate (LoRA); None: the Trainer's default."""
    if preset.adapter == "full":
        return None
    import torch

    rows, rest = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (rows if SID_ROWS_PARAM in name else rest).append(param)
    groups = [{"params": rest, "lr": learning_rate}]
    if rows:
        groups.append({"params": rows, "lr": learning_rate * preset.sid_rows_lr_scale})
    return torch.optim.AdamW(groups, lr=learning_rate, weight_decay=preset.weight_decay)
