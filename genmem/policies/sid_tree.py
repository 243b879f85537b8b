"""Beam search over an SID trie with every beam of every context in one forward pass per level.

The reference search (``engine="trie"``) keeps one key/value cache row per beam: after each level
it copies the prompt's cache to the surviving beams (``reorder_cache``) and chooses among the
children of each beam in Python, one ``.tolist()`` per beam. Both costs grow with the width and
neither is arithmetic: at beam 20 the copies move twenty prompts' keys and values per level, and
on a GPU the per-candidate syncs cost more than the model.

Here each context's prompt sits in the cache **once**, and the beams of later levels are laid out
after it as a tree: level ``d``'s ``k`` chosen tokens are appended as one block of ``k`` cache
positions, and a 4D attention mask lets each of them see its context's prompt, its own ancestors
in the earlier blocks, and itself. Nothing is copied; one forward pass per level reads ``B x k``
new tokens. Children come from per-level tables on the model's device (``TrieTables``), so
choosing the next beams is a gather, a stable sort and a gather, with no host round trip until
the final SIDs are read.

The ranking is the reference's exactly: scores are summed ``log_softmax`` over the full vocabulary,
each context keeps its top ``k`` candidates per level, and ties keep the reference's order (beam
rank, then code), because the sort is stable over candidates laid out in that order. Only float
rounding differs (a prompt read in two chunks, attention over a longer masked row), which the
tests and ``bench/sid_latency.py`` measure as SID agreement.

Models with sliding-window attention layers (Gemma 3) are not eligible: a custom 4D mask would
override their window. :func:`supports_tree` says which are.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from genmem.policies.prefix_cache import PrefixCache

__all__ = [
    "PromptState",
    "TrieTables",
    "plan_lookahead",
    "prefill",
    "supports_tree",
    "tree_beam_search",
]


def supports_tree(model: Any) -> bool:
    """True if every attention layer of ``model`` is full causal attention (no sliding window)."""
    config = getattr(model, "config", None)
    if config is None:
        return False
    config = getattr(config, "get_text_config", lambda: config)()
    layer_types = getattr(config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        return False
    return not (
        getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True)
    )


@dataclass(frozen=True)
class TrieTables:
    """The children of every trie node per level, as index tensors on one device.

    Nodes at level ``d`` are the distinct code prefixes of length ``d`` (level 0 has the root
    only). ``codes[d][n]`` lists node ``n``'s child codes padded with -1, ``nodes[d][n]`` the
    children's node numbers at level ``d + 1``; ``tokens[d][c]`` is code ``c``'s token id. When
    every SID is allowed, each level has a single node whose children are all codes.
    """

    codes: list[torch.Tensor]
    nodes: list[torch.Tensor]
    tokens: list[torch.Tensor]

    @classmethod
    def build(
        cls,
        sizes: Sequence[int],
        level_ids: Sequence[Sequence[int]],
        leaves: set[tuple[int, ...]] | None,
        device: Any,
    ) -> TrieTables:
        """Tables for ``leaves`` (None: every SID of ``sizes``) on ``device``."""
        import torch

        tokens = [torch.tensor(list(ids), dtype=torch.long, device=device) for ids in level_ids]
        levels = len(sizes)
        if leaves is None:
            codes = [torch.arange(n, device=device)[None] for n in sizes]
            nodes = [torch.zeros((1, n), dtype=torch.long, device=device) for n in sizes]
            return cls(codes, nodes, tokens)
        prefixes = [sorted({leaf[:d] for leaf in leaves}) for d in range(levels + 1)]
        index = [{p: i for i, p in enumerate(level)} for level in prefixes]
        codes, nodes = [], []
        for d in range(levels):
            kids: list[list[int]] = [[] for _ in prefixes[d]]
            for child in prefixes[d + 1]:  # sorted, so each node's codes come out ascending
                kids[index[d][child[:d]]].append(child[d])
            width = max(1, max((len(k) for k in kids), default=0))
            code_rows = [k + [-1] * (width - len(k)) for k in kids]
            node_rows = [
                [index[d + 1][(*p, c)] for c in k] + [0] * (width - len(k))
                for p, k in zip(prefixes[d], kids, strict=True)
            ]
            codes.append(torch.tensor(code_rows or [[-1]], dtype=torch.long, device=device))
            nodes.append(torch.tensor(node_rows or [[0]], dtype=torch.long, device=device))
        return cls(codes, nodes, tokens)


@dataclass
class PromptState:
    """A batch of prompts after one forward pass: what the beam search continues from."""

    cache: Any
    """Key/value cache of the prompts (batch ``B``), left-padded after any shared head."""
    keys: torch.Tensor
    """``(B, cache length)`` booleans: which cached positions are a context's real tokens."""
    logits: torch.Tensor
    """``(B, vocab)`` logits at each prompt's last token."""
    next_position: torch.Tensor
    """``(B,)`` position id of each context's first SID token (its prompt length)."""


def prefill(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    pad_id: int,
    prefixes: PrefixCache | None = None,
    owner: Any = None,
    head: Sequence[int] = (),
) -> PromptState:
    """Read ``prompts`` (token ids) in one forward pass, reusing a cached shared ``head``.

    Where every prompt starts with ``head`` and ``prefixes`` holds its keys and values (or
    gets them now, for the next call), only the rest of each prompt is read. The rest is
    left-padded to one width; pad positions attend to the head and themselves (a fully
    masked row would turn into NaN) and no real token attends to them.
    """
    import torch

    device = model.device
    head = list(head)
    if prefixes is None or len(head) < prefixes.min_tokens:
        head = []
    if head and any(list(p[: len(head)]) != head or len(p) <= len(head) for p in prompts):
        head = []
    cache = None
    with torch.inference_mode():
        if head:
            cache = prefixes.take([*head, prompts[0][len(head)]], owner)  # type: ignore[union-attr]
            seen = cache.get_seq_length() if cache is not None else 0
            if seen < len(head):  # read (the rest of) the head once, keep it for later calls
                rest = torch.tensor([head[seen:]], device=device)
                out = model(input_ids=rest, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache = out.past_key_values
                prefixes.put(head, copy.deepcopy(cache), owner)  # type: ignore[union-attr]
            if len(prompts) > 1:
                cache.batch_repeat_interleave(len(prompts))
        n_head = len(head)
        tails = [list(p[n_head:]) for p in prompts]
        width = max(len(t) for t in tails)
        ids = torch.full((len(tails), width), pad_id, dtype=torch.long)
        real = torch.zeros((len(tails), width), dtype=torch.bool)
        for i, t in enumerate(tails):
            ids[i, width - len(t) :] = torch.tensor(t)
            real[i, width - len(t) :] = True
        ids, real = ids.to(device), real.to(device)
        positions = n_head + (real.long().cumsum(-1) - 1).clamp(min=0)
        causal = torch.ones((width, width), dtype=torch.bool, device=device).tril()
        eye = torch.eye(width, dtype=torch.bool, device=device)
        tail_mask = (causal[None] & real[:, None, :]) | eye[None]
        head_mask = torch.ones((len(tails), width, n_head), dtype=torch.bool, device=device)
        mask = torch.cat([head_mask, tail_mask], dim=-1)[:, None]
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        keys = torch.cat([head_mask[:, 0], real], dim=-1)
        lengths = torch.tensor([len(p) for p in prompts], device=device)
    return PromptState(out.past_key_values, keys, out.logits[:, -1], lengths)


def plan_lookahead(widths: Sequence[int], k: int, budget: int) -> set[int]:
    """The levels whose candidates are read together with their parents, to save a pass.

    Reading level ``d``'s chosen tokens together with every child of each at level ``d + 1``
    gives level ``d + 2``'s distributions in the same pass, so the pass that would have read
    the level ``d + 1`` tokens is not needed. That costs ``k x widths[d + 1]`` extra tokens:
    nothing where a pass is bound by launching kernels or streaming weights (a GPU; a CPU at
    a few tokens), a lot where it is bound by arithmetic (a CPU at many). Levels are taken from
    the narrowest, while their extra tokens fit ``budget`` and they do not overlap a level
    already taken (each one both needs its parents' pass and removes its own).
    """
    levels = len(widths)
    taken: set[int] = set()
    for level in sorted(range(1, levels - 1), key=lambda a: (widths[a], a)):
        if k * widths[level] <= budget and all(abs(level - t) >= 2 for t in taken):
            taken.add(level)
    return taken


def tree_beam_search(
    model: Any, state: PromptState, tables: TrieTables, k: int, *, lookahead: int = 0
) -> tuple[list[list[list[int]]], list[list[float]]]:
    """The ``k`` best SIDs per context: token ids ``[context][beam]`` and summed log-probs.

    ``lookahead`` is the most extra tokens a pass may take to save a later one (see
    :func:`plan_lookahead`; 0 never looks ahead). Beams without an allowed continuation, and
    the padding when fewer than ``k`` SIDs exist, come back with score ``-inf`` (the caller
    drops them).
    """
    import torch

    levels = len(tables.tokens)
    widths = [c.shape[-1] for c in tables.codes]
    ahead = plan_lookahead(widths, k, lookahead)
    cache, keys = state.cache, state.keys
    batch, device = keys.shape[0], keys.device
    with torch.inference_mode():
        logp = torch.log_softmax(state.logits.float(), dim=-1)[:, None]  # (B, beams, vocab)
        scores = torch.zeros((batch, 1), device=device)
        nodes = torch.zeros((batch, 1), dtype=torch.long, device=device)
        tokens = torch.zeros((batch, 1, 0), dtype=torch.long, device=device)
        # which appended (tree) cache positions each beam's fed tokens sit at
        seen = torch.zeros((batch, 1, 0), dtype=torch.bool, device=device)
        kid_logp = kid_seen = None  # outputs at the looked-ahead children of the last pass
        rows_index = torch.arange(batch, device=device)[:, None]
        for depth in range(levels):
            kids = tables.codes[depth][nodes]  # (B, beams, children)
            width = kids.shape[-1]
            kid_tokens = tables.tokens[depth][kids.clamp(min=0)]
            total = scores[..., None] + logp.gather(-1, kid_tokens)
            total = total.masked_fill(kids < 0, -torch.inf).flatten(1)
            if total.shape[1] < k:  # fewer candidates than beams: pad with dead ones
                total = torch.nn.functional.pad(total, (0, k - total.shape[1]), value=-torch.inf)
            picked = torch.sort(total, dim=1, descending=True, stable=True).indices[:, :k]
            scores = total.gather(1, picked)
            picked = picked.clamp(max=kids.shape[1] * width - 1)
            parent = picked // width
            chosen = kid_tokens.flatten(1).gather(1, picked)  # (B, k)
            nodes = tables.nodes[depth][nodes].flatten(1).gather(1, picked)
            steps = tokens.shape[-1]
            tokens = torch.cat(
                [tokens.gather(1, parent[..., None].expand(-1, -1, steps)), chosen[..., None]],
                dim=-1,
            )
            if depth == levels - 1:
                break
            if kid_logp is not None:  # the chosen tokens were read last pass, as children
                assert kid_seen is not None
                logp = kid_logp.flatten(1, 2)[rows_index, picked]
                seen = kid_seen.flatten(1, 2)[rows_index, picked]
                kid_logp = kid_seen = None
                continue
            seen = seen.gather(1, parent[..., None].expand(-1, -1, seen.shape[-1]))
            feed, positions = chosen, (state.next_position + depth)[:, None].expand(-1, k)
            own = torch.eye(k, dtype=torch.bool, device=device)[None].expand(batch, -1, -1)
            rows = torch.cat([seen, own], dim=-1)  # (B, k, T + k)
            n_kids = 0
            if depth + 1 in ahead:
                kid_codes = tables.codes[depth + 1][nodes]  # (B, k, C)
                n_kids = kid_codes.shape[1] * kid_codes.shape[2]
                kid_ids = tables.tokens[depth + 1][kid_codes.clamp(min=0)].flatten(1)
                feed = torch.cat([chosen, kid_ids], dim=1)
                kid_pos = (state.next_position + depth + 1)[:, None].expand(-1, n_kids)
                positions = torch.cat([positions, kid_pos], dim=1)
                parents_rows = rows.repeat_interleave(kid_codes.shape[2], dim=1)
                kid_own = torch.eye(n_kids, dtype=torch.bool, device=device)
                rows = torch.cat([rows, rows.new_zeros((batch, k, n_kids))], dim=-1)
                kid_rows = torch.cat([parents_rows, kid_own[None].expand(batch, -1, -1)], dim=-1)
                rows = torch.cat([rows, kid_rows], dim=1)  # (B, k + kC, T + k + kC)
            prompt = keys[:, None, :].expand(-1, rows.shape[1], -1)
            out = model(
                input_ids=feed,
                attention_mask=torch.cat([prompt, rows], dim=-1)[:, None],
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            step_logp = torch.log_softmax(out.logits.float(), dim=-1)
            logp, seen = step_logp[:, :k], rows[:, :k]
            if n_kids:
                kid_logp = step_logp[:, k:].unflatten(1, (k, -1))
                kid_seen = rows[:, k:].unflatten(1, (k, -1))
        return tokens.tolist(), scores.tolist()
