"""Score a closed set of replies by a local model's likelihood instead of generating one.

Where the valid replies are known in advance (a text game's admissible commands), asking a small
model to *write* one wastes most of its errors on spelling and format. Scoring each candidate as
the assistant's whole reply (its tokens and the end-of-turn token) and taking the most likely
one needs one pass over the prompt and one batched pass over the candidates, and can never
produce an invalid reply. The score is the mean log-probability per token, so long commands are
not penalised for their length.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from genmem.errors import GenMemError
from genmem.policies.local import LocalPolicy
from genmem.policies.prefix_cache import cache_owner

__all__ = ["ChoiceScorer", "ChoiceScoringUnavailable", "score_choices"]


class ChoiceScoringUnavailable(GenMemError, TypeError):
    """The chat model cannot score candidate replies (only local transformers models can)."""


@runtime_checkable
class ChoiceScorer(Protocol):
    """A chat model that scores candidate replies to a conversation."""

    def score_choices(self, messages: Sequence[Any], choices: Sequence[str]) -> list[float]:
        """The mean per-token log-probability of each choice as the assistant's reply."""
        ...


def score_choices(policy: LocalPolicy, prompt: str, choices: Sequence[str]) -> list[float]:
    """Mean per-token log-probability of each ``choices[i]`` (plus end of turn) after ``prompt``.

    ``prompt`` is the rendered chat ending with the assistant's opening. The prompt runs once
    (from the policy's prefix cache where an earlier prompt began the same way); its key/value
    cache is shared by a batched pass over the right-padded candidates.

    Raises:
        ValueError: no choices, or an empty one.
    """
    import torch

    if not choices:
        raise ValueError("score_choices needs at least one choice")
    if any(not c.strip() for c in choices):
        raise ValueError(f"choices must be non-empty strings; got {list(choices)!r}")
    tok = policy.tokenizer
    end = tok.eos_token or ""
    prompt_ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    rows = [tok(c + end, add_special_tokens=False)["input_ids"] for c in choices]
    width = max(len(r) for r in rows)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    n_prompt = prompt_ids.shape[1]
    with policy.lock, torch.inference_mode():
        model = policy.runner
        # the prompt and candidates go where the weights are (a GPU for a shared load on one)
        prompt_ids, ids, mask = (t.to(model.device) for t in (prompt_ids, ids, mask))
        prefixes, owner = policy.prefixes, cache_owner(model, tok)
        ids_list = prompt_ids[0].tolist()
        past = prefixes.take(ids_list, owner) if prefixes is not None else None
        seen = past.get_seq_length() if past is not None else 0
        head = model(input_ids=prompt_ids[:, seen:], past_key_values=past, use_cache=True)
        past = head.past_key_values
        if prefixes is not None:  # a turn's prompt extends the last one: keep it for the next
            prefixes.put(ids_list, copy.deepcopy(past), owner)
        past.batch_repeat_interleave(len(rows))
        full_mask = torch.cat([mask.new_ones((len(rows), n_prompt)), mask], dim=1)
        positions = torch.arange(n_prompt, n_prompt + width, device=ids.device)
        positions = positions.unsqueeze(0).expand(len(rows), -1)
        tail = model(
            input_ids=ids, attention_mask=full_mask, position_ids=positions, past_key_values=past
        )
        # token 0 of every choice is predicted by the prompt's last position; token j by j - 1
        logits = torch.cat(
            [head.logits[:, -1:, :].expand(len(rows), -1, -1), tail.logits[:, :-1, :]], dim=1
        )
        logp = torch.log_softmax(logits.float(), dim=-1)
        picked = logp.gather(2, ids.unsqueeze(-1)).squeeze(-1) * mask
        means = picked.sum(dim=1) / mask.sum(dim=1)
    return [float(v) for v in means]
