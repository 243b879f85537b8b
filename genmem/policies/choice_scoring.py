"""Score a closed set of replies by a local model's likelihood instead of generating one.

Where the valid replies are known in advance (a text game's admissible commands), asking a small
model to *write* one wastes most of its errors on spelling and format. Scoring each candidate as
the assistant's whole reply (its tokens and the end-of-turn token) and taking the most likely
one needs one pass over the prompt and one batched pass over the candidates, and can never
produce an invalid reply. :func:`choice_logprobs` gives each candidate's summed log-probability
and its token count, from which a caller ranks by a rule (:func:`rank_scores`: the mean per
token, the sum, or the sum calibrated by the same candidate's log-probability after a prompt that
says nothing about the state); :func:`score_choices` is the mean.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from genmem.errors import GenMemError
from genmem.policies.local import LocalPolicy
from genmem.policies.prefix_cache import cache_owner
from genmem.policies.sid_tree import supports_tree

__all__ = [
    "SCORE_RULES",
    "ChoiceLogProb",
    "ChoiceScorer",
    "ChoiceScoringUnavailable",
    "ScoreRule",
    "choice_logprobs",
    "rank_scores",
    "score_choices",
]

ScoreRule = Literal["mean", "sum", "calibrated"]
SCORE_RULES: tuple[ScoreRule, ...] = ("mean", "sum", "calibrated")


class ChoiceLogProb(NamedTuple):
    """A candidate reply's summed log-probability (its tokens and the end of turn) and length."""

    total: float
    tokens: int


class ChoiceScoringUnavailable(GenMemError, TypeError):
    """The chat model cannot score candidate replies (only local transformers models can)."""


@runtime_checkable
class ChoiceScorer(Protocol):
    """A chat model that scores candidate replies to a conversation."""

    def choice_logprobs(
        self, messages: Sequence[Any], choices: Sequence[str]
    ) -> list[ChoiceLogProb]:
        """Each choice's summed log-probability as the assistant's whole reply, and its tokens."""
        ...


def rank_scores(
    rule: ScoreRule,
    given: Sequence[ChoiceLogProb],
    unconditioned: Sequence[ChoiceLogProb] | None = None,
) -> list[float]:
    """The score each candidate is ranked by, higher first.

    Args:
        rule: ``mean`` (log-probability per token, which favours long candidates whose later
            tokens are easy to copy), ``sum`` (the candidate's whole log-probability, which
            favours short ones), or ``calibrated`` (the sum minus the same candidate's sum
            after a prompt that shows no state: how much the state raised it).
        given: each candidate's log-probability after the real prompt.
        unconditioned: the same candidates' after the stateless prompt (``calibrated`` only).

    Raises:
        ValueError: an unknown rule, or ``calibrated`` without matching ``unconditioned``.
    """
    if rule == "mean":
        return [c.total / c.tokens for c in given]
    if rule == "sum":
        return [c.total for c in given]
    if rule == "calibrated":
        if unconditioned is None or len(unconditioned) != len(given):
            raise ValueError("the calibrated rule needs each candidate's stateless log-probability")
        return [c.total - u.total for c, u in zip(given, unconditioned, strict=True)]
    raise ValueError(f"unknown score rule {rule!r}; use one of {', '.join(SCORE_RULES)}")


def score_choices(
    policy: LocalPolicy,
    prompt: str,
    choices: Sequence[str],
    *,
    layout: Literal["packed", "batched"] = "packed",
) -> list[float]:
    """Mean per-token log-probability of each ``choices[i]`` (plus end of turn) after ``prompt``
    (:func:`choice_logprobs`, ranked by the ``mean`` rule)."""
    return rank_scores("mean", choice_logprobs(policy, prompt, choices, layout=layout))


def choice_logprobs(
    policy: LocalPolicy,
    prompt: str,
    choices: Sequence[str],
    *,
    layout: Literal["packed", "batched"] = "packed",
) -> list[ChoiceLogProb]:
    """Summed log-probability of each ``choices[i]`` (plus end of turn) after ``prompt``.

    ``prompt`` is the rendered chat ending with the assistant's opening; the part of it that an
    earlier prompt began with comes from the policy's prefix cache. ``layout`` says how the
    candidates are read:

    - ``packed`` (default): in the same pass as the prompt's rest, laid out after it as a token
      trie (see ``_packed``), so the prompt's cache is never copied and a shared beginning is
      read once. Models with sliding-window layers (Gemma 3) use ``batched`` instead.
    - ``batched``: after the prompt's pass, one right-padded row per candidate over copies of
      the prompt's cache (the reference; it moves the prompt's keys and values once per
      candidate).

    Raises:
        ValueError: no choices, an empty one, or an unknown layout.
    """
    import torch

    if not choices:
        raise ValueError("score_choices needs at least one choice")
    if any(not c.strip() for c in choices):
        raise ValueError(f"choices must be non-empty strings; got {list(choices)!r}")
    if layout not in ("packed", "batched"):
        raise ValueError(f"layout={layout!r}; use 'packed' or 'batched'")
    tok = policy.tokenizer
    end = tok.eos_token or ""
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    rows = [tok(c + end, add_special_tokens=False)["input_ids"] for c in choices]
    with policy.lock, torch.inference_mode():
        model = policy.runner  # where the weights are (a GPU for a shared load on one)
        prefixes, owner = policy.prefixes, cache_owner(model, tok)
        past = prefixes.take(ids, owner) if prefixes is not None else None
        seen = past.get_seq_length() if past is not None else 0
        first = None
        if layout == "packed" and supports_tree(model):
            scores, past = _packed(model, past, ids[seen:], rows, seen)
        else:
            rest = torch.tensor([ids[seen:]], device=model.device)
            head = model(input_ids=rest, past_key_values=past, use_cache=True)
            past, first = head.past_key_values, head.logits[0, -1]
        if prefixes is not None:  # a turn's prompt extends the last one: keep it for the next
            prefixes.put(ids, copy.deepcopy(past), owner)  # (cut back to the prompt)
        if first is not None:
            scores = _batched(model, past, first, rows, len(ids), tok.pad_token_id)
    return scores


def _totals(first: Any, later: Any, rows: Sequence[list[int]]) -> list[ChoiceLogProb]:
    """Summed log-probability of each row's tokens, and the row's length.

    Token 0 comes from ``first`` (the prompt's last logits), the others from ``later``, whose
    rows are every row's predictions of its tokens 1.. one after another.
    """
    import torch

    device = first.device
    lengths = torch.tensor([len(r) for r in rows], device=device)
    heads = torch.tensor([r[0] for r in rows], device=device)
    total = torch.log_softmax(first.float(), dim=-1)[heads]
    if later.shape[0]:
        targets = torch.tensor([t for r in rows for t in r[1:]], device=device)
        owner = torch.repeat_interleave(torch.arange(len(rows), device=device), lengths - 1)
        picked = torch.log_softmax(later.float(), dim=-1).gather(1, targets[:, None])[:, 0]
        total = total.index_add(0, owner, picked)
    return [ChoiceLogProb(float(v), len(r)) for v, r in zip(total.tolist(), rows, strict=True)]


def _packed(
    model: Any, past: Any, rest: list[int], rows: Sequence[list[int]], seen: int
) -> tuple[list[ChoiceLogProb], Any]:
    """Read the prompt's ``rest`` and every candidate in one pass; the scores and the cache.

    The candidates follow the prompt as a token trie. Only a candidate's tokens before its last
    are read (the last one is predicted, never predicts), and a beginning that several share
    (``go``, ``take ... from``) is read once: each trie node sees the prompt, its ancestors and
    itself through a 4D mask, at the position its token has in the candidate, so its keys,
    values and prediction are the ones a separate row would give. The returned cache holds the
    prompt and the trie nodes after it.
    """
    import torch

    device = model.device
    n_prompt = seen + len(rest)
    node_of: dict[tuple[int, ...], int] = {}
    tokens, parents, depths = [], [], []
    for row in rows:
        for j in range(1, len(row)):
            prefix = tuple(row[:j])
            if prefix not in node_of:
                node_of[prefix] = len(tokens)
                tokens.append(row[j - 1])
                parents.append(node_of.get(prefix[:-1], -1))
                depths.append(j - 1)
    n, r = len(tokens), len(rest)
    own = torch.eye(n, dtype=torch.bool)
    for node, parent in enumerate(parents):  # parents come first: their rows are complete
        if parent >= 0:
            own[node] |= own[parent]
    causal = torch.ones((r, r), dtype=torch.bool).tril()
    mask = torch.cat(
        [
            torch.ones((r + n, seen), dtype=torch.bool),
            torch.cat([causal, torch.ones((n, r), dtype=torch.bool)]),
            torch.cat([torch.zeros((r, n), dtype=torch.bool), own]),
        ],
        dim=1,
    )
    positions = [*range(seen, n_prompt), *(n_prompt + d for d in depths)]
    out = model(
        input_ids=torch.tensor([rest + tokens], device=device),
        attention_mask=mask[None, None].to(device),
        position_ids=torch.tensor([positions], device=device),
        past_key_values=past,
        use_cache=True,
        logits_to_keep=torch.arange(r - 1, r + n, device=device),
    )
    logits = out.logits[0]  # the prompt's last position, then one row per trie node
    # row i's token j is predicted by the node of its first j tokens
    order = [1 + node_of[tuple(row[:j])] for row in rows for j in range(1, len(row))]
    scores = _totals(logits[0], logits[torch.tensor(order, dtype=torch.long, device=device)], rows)
    return scores, out.past_key_values


def _batched(
    model: Any, past: Any, first: Any, rows: Sequence[list[int]], n_prompt: int, pad: int | None
) -> list[ChoiceLogProb]:
    """Score the candidates as right-padded rows over copies of the prompt's cache."""
    import torch

    device = first.device
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad if pad is not None else 0, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    ids, mask = ids.to(device), mask.to(device)
    past.batch_repeat_interleave(len(rows))
    full_mask = torch.cat([mask.new_ones((len(rows), n_prompt)), mask], dim=1)
    positions = torch.arange(n_prompt, n_prompt + width, device=device)
    positions = positions.unsqueeze(0).expand(len(rows), -1)
    tail = model(
        input_ids=ids, attention_mask=full_mask, position_ids=positions, past_key_values=past
    )
    # position j of a row predicts its token j + 1: keep the positions whose next token is real
    return _totals(first, tail.logits[:, :-1][mask[:, 1:].bool()], rows)
