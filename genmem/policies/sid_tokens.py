"""Teach a tokenizer the SID symbols and give their new embeddings a sensible start.

Each level token (``<SID_L1_0>`` ... ``<SID_L4_7>``) becomes one *normal* added token, not a
special one: GRPO decodes completions with ``skip_special_tokens=True`` and vLLM's structured
output drops special tokens from its regex vocabulary, so special SID tokens would vanish from
both.

Initialisation (``"description"``, the default): the embedding row of ``<SID_Ll_c>`` is a
weighted mean of the existing embeddings of the word pieces of a short description, ``" memory
address level l code c"``, the i-th piece weighted ``i + 1``. The new rows then sit among
ordinary text embeddings (a random or zero row would be far from everything the model has
seen), tokens of one level share most of their pieces and so start close together, and the
growing weights make the mean order-sensitive, so ``level 1 code 2`` and ``level 2 code 1`` (or
codes 12 and 21, whose digits are separate pieces) do not collide. When input and output
embeddings are not tied, the output rows get the same treatment from the output matrix.
``"mean"`` uses the mean of all existing rows for every new token instead.
"""

from __future__ import annotations

from typing import Any, Literal

from genmem.memory.sid import SIDSpec

__all__ = ["TokenInit", "add_sid_tokens", "sid_token_ids"]

TokenInit = Literal["description", "mean"]


def _description(level: int, code: int) -> str:
    return f" memory address level {level} code {code}"


def sid_token_ids(tokenizer: Any, spec: SIDSpec) -> list[list[int]]:
    """Token ids of every level's SID tokens, ``ids[level-1][code]``; each must be one token."""
    ids = []
    for level in range(1, spec.levels + 1):
        row = tokenizer.convert_tokens_to_ids(spec.level_tokens(level))
        bad = (None, tokenizer.unk_token_id)
        missing = [t for t, i in zip(spec.level_tokens(level), row, strict=True) if i in bad]
        if missing:
            raise ValueError(
                f"the tokenizer has no token {missing[0]!r}: add the SID tokens of spec {spec} "
                "first with add_sid_tokens(model, tokenizer, spec)"
            )
        ids.append(list(row))
    return ids


def add_sid_tokens(
    model: Any, tokenizer: Any, spec: SIDSpec, *, init: TokenInit = "description"
) -> int:
    """Add ``spec``'s SID tokens as normal tokens, resize and initialise embeddings; return count.

    Tokens already present are left as they are, so calling this twice changes nothing.
    """
    import torch
    from tokenizers import AddedToken

    vocab = tokenizer.get_vocab()
    new = [
        (level, code, spec.token(level, code))
        for level in range(1, spec.levels + 1)
        for code in range(spec.sizes[level - 1])
        if spec.token(level, code) not in vocab
    ]
    if not new:
        return 0
    old_size = model.get_input_embeddings().weight.shape[0]
    tokenizer.add_tokens(
        [AddedToken(t, special=False, normalized=False) for _, _, t in new], special_tokens=False
    )
    from genmem.policies.local import outside_zero3

    with outside_zero3(model):  # a shared load under a ZeRO-3 trainer stays whole
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    matrices = [model.get_input_embeddings().weight]
    out = model.get_output_embeddings()
    if out is not None and out.weight.data_ptr() != matrices[0].data_ptr():
        matrices.append(out.weight)
    with torch.no_grad():
        for weight in matrices:
            base = weight[:old_size]
            for level, code, token in new:
                row = tokenizer.convert_tokens_to_ids(token)
                if init == "mean":
                    weight[row] = base.mean(dim=0)
                    continue
                pieces = tokenizer(_description(level, code), add_special_tokens=False)
                piece_ids = [i for i in pieces["input_ids"] if i < old_size]
                w = torch.arange(1, len(piece_ids) + 1, dtype=weight.dtype, device=weight.device)
                weight[row] = (w[:, None] * base[piece_ids]).sum(dim=0) / w.sum()
    return len(new)
