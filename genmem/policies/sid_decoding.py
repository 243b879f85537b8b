"""SID generation with a local transformers policy: constrained greedy and beam decoding.

The policy reads a context (a query, a trajectory, an experience) under a short addressing
instruction and writes an SID right after the assistant tag: L tokens, one per level. A trie of
allowed token sequences, handed to ``generate`` as ``prefix_allowed_tokens_fn``, masks every
other token at each step, so every returned SID parses; this holds by construction, not by
filtering. The allowed set is one of:

- ``all``: every address of the spec (the trie is one set of tokens per level);
- ``occupied``: only SIDs occupied in a bank (for retrieval: every candidate has a payload);
- ``prefix``: any leaf under an occupied parent, i.e. the first L-1 codes of some entry (for
  updates: an insert lands next to related experience).

``occupied`` and ``prefix`` follow the bank: before each call the generator reads the bank's
operation log since the last call and rebuilds its trie when entries appeared or vanished.

Scores are summed log-probabilities of the SID tokens under the model's full distribution (the
mask is applied after ``log_softmax``, as transformers' beam search does), so greedy and beam
scores are comparable. Beam search is deterministic (no sampling) and returns distinct SIDs
best first; with ``k`` larger than the allowed set, fewer come back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from genmem.errors import InvalidSID
from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec
from genmem.policies.local import LocalPolicy, load_policy
from genmem.policies.prefix_cache import cache_owner
from genmem.policies.prompts import ADDRESS_PROMPT
from genmem.policies.sid_tokens import add_sid_tokens, sid_token_ids
from genmem.policies.sid_tree import TrieTables, prefill, supports_tree, tree_beam_search
from genmem.policies.types import AllowedMode, SIDCandidate

if TYPE_CHECKING:
    from genmem.memory.bank import Bank

__all__ = [
    "ADDRESS_PROMPT",
    "MAX_BEAMS",
    "DecodeResult",
    "SIDDecodingConfig",
    "SIDTrie",
    "TransformersSIDGenerator",
    "address_prompt",
]

MAX_BEAMS = 50
_DEAD = -1e8  # transformers starts extra beams at -1e9; a masked token adds -inf


@dataclass(frozen=True, kw_only=True)
class SIDDecodingConfig:
    """How a :class:`TransformersSIDGenerator` decodes."""

    allowed: AllowedMode = "all"
    """Which SIDs may be produced: ``all``, ``occupied`` (needs a bank) or ``prefix``."""
    constrained: bool = True
    """Mask tokens with the trie. False decodes freely (for measuring what the mask buys)."""
    system_prompt: str = ADDRESS_PROMPT
    """Instruction placed in the system turn before the context."""
    batch_size: int = 8
    """Contexts per ``generate`` call in :meth:`TransformersSIDGenerator.generate_batch`."""
    max_context_tokens: int = 512
    """Longer contexts keep their last this-many tokens."""
    engine: Literal["tree", "trie", "generate"] = "tree"
    """``tree``: every beam of every context in one forward pass per level over one copy of each
    prompt, whose shared head (the system turn) is read once per process
    (:mod:`genmem.policies.sid_tree`); ``trie``: our first beam search, one cache row per beam
    (the reference the tree is measured against); ``generate``: transformers' ``generate`` with
    ``prefix_allowed_tokens_fn`` (it encodes every prompt once per beam). All three rank beams
    the same way. Unconstrained decoding always uses ``generate``, and models with
    sliding-window layers (Gemma 3) use ``trie`` where ``tree`` is asked for."""
    lookahead_tokens: int | None = None
    """``tree`` engine: the most extra tokens one pass may read to spare a later pass (every
    child of every beam at the next level; see :func:`~genmem.policies.sid_tree.plan_lookahead`).
    None: 32 on a CPU, where a pass is cheap per token only while it is bound by streaming the
    weights, and 1024 on a GPU, where it is bound by launching kernels; 0 never looks ahead.
    The SIDs and scores are the same either way."""
    quantized: bool = False
    """Decode on the policy's generation copy (``runner``: the int8 copy of an int8 load) instead
    of its weights. Off by default: an untrained policy's SID tokens are separated by logit margins
    smaller than int8 rounding, so the int8 copy picks another top-1 SID for most contexts
    (measured in bench/local_inference.py); four tokens after a short prompt cost little."""

    def __post_init__(self) -> None:
        if self.allowed not in ("all", "occupied", "prefix"):
            raise ValueError(f"allowed={self.allowed!r}; use 'all', 'occupied' or 'prefix'")
        if self.engine not in ("tree", "trie", "generate"):
            raise ValueError(f"engine={self.engine!r}; use 'tree', 'trie' or 'generate'")
        if self.lookahead_tokens is not None and self.lookahead_tokens < 0:
            raise ValueError(
                f"lookahead_tokens={self.lookahead_tokens}: use None (by device), 0 (never) "
                "or a positive token count"
            )
        if self.batch_size < 1 or self.max_context_tokens < 16:
            raise ValueError(
                f"batch_size={self.batch_size}, max_context_tokens={self.max_context_tokens}: "
                "need batch_size >= 1 and max_context_tokens >= 16"
            )
        if not self.constrained and self.allowed != "all":
            raise ValueError(
                f"allowed={self.allowed!r} needs constrained=True: an unconstrained decode "
                "cannot be kept to a bank's entries"
            )


def address_prompt(
    tokenizer: Any,
    context: str,
    *,
    system_prompt: str = ADDRESS_PROMPT,
    max_context_tokens: int = 512,
) -> str:
    """The chat-templated addressing prompt for ``context``, ending where the SID starts.

    Contexts longer than ``max_context_tokens`` keep their end (the most recent steps of a
    trajectory matter most).
    """
    ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    if len(ids) > max_context_tokens:
        context = tokenizer.decode(ids[-max_context_tokens:])
    messages = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": context},
    ]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


class SIDTrie:
    """Allowed SID token sequences as a prefix tree over codes, answered in token ids."""

    def __init__(
        self, spec: SIDSpec, level_ids: list[list[int]], codes: Iterable[tuple[int, ...]] | None
    ) -> None:
        """``codes`` None allows every SID; otherwise only the given leaves."""
        self.spec = spec
        self.level_ids = level_ids
        self._code_of = [{tid: c for c, tid in enumerate(ids)} for ids in level_ids]
        self.leaves: set[tuple[int, ...]] | None = None if codes is None else set(codes)
        self._children: dict[tuple[int, ...], list[int]] = {}
        self._next: dict[tuple[int, ...], list[int]] = {}
        self._tables: tuple[Any, TrieTables] | None = None
        if self.leaves is not None:
            children: dict[tuple[int, ...], set[int]] = {}
            for leaf in self.leaves:
                for d in range(spec.levels):
                    children.setdefault(leaf[:d], set()).add(leaf[d])
            self._children = {p: sorted(s) for p, s in children.items()}
            self._next = {p: [level_ids[len(p)][c] for c in s] for p, s in self._children.items()}

    @classmethod
    def under_parents(
        cls, spec: SIDSpec, level_ids: list[list[int]], parents: Iterable[tuple[int, ...]]
    ) -> SIDTrie:
        """Every leaf whose first L-1 codes are one of ``parents``."""
        last = range(spec.sizes[-1])
        return cls(spec, level_ids, ((*p, c) for p in set(parents) for c in last))

    @property
    def size(self) -> int:
        """Number of allowed SIDs."""
        return self.spec.capacity if self.leaves is None else len(self.leaves)

    def codes(self, token_ids: Sequence[int]) -> tuple[int, ...] | None:
        """Codes of a token-id prefix, or None if a token is not the right level's."""
        out = []
        for depth, tid in enumerate(token_ids):
            if depth >= self.spec.levels or tid not in self._code_of[depth]:
                return None
            out.append(self._code_of[depth][tid])
        return tuple(out)

    def children(self, prefix: tuple[int, ...]) -> list[int]:
        """Codes that may follow a code prefix (empty if the prefix is not allowed)."""
        if self.leaves is None:
            return (
                list(range(self.spec.sizes[len(prefix)])) if len(prefix) < self.spec.levels else []
            )
        return self._children.get(prefix, [])

    def allowed(self, token_ids: Sequence[int]) -> list[int]:
        """Token ids that may follow ``token_ids`` (never empty, as transformers requires)."""
        depth = min(len(token_ids), self.spec.levels - 1)
        if self.leaves is None:
            return self.level_ids[depth]
        prefix = self.codes(token_ids)
        # A prefix outside the trie belongs to a dead beam (its score is already -inf):
        # any non-empty answer keeps generate running; the beam is dropped afterwards.
        return self._next.get(prefix, self.level_ids[depth]) if prefix is not None else [0]

    def tables(self, device: Any) -> TrieTables:
        """The trie as index tensors on ``device`` (built once per device)."""
        if self._tables is None or self._tables[0] != device:
            tables = TrieTables.build(self.spec.sizes, self.level_ids, self.leaves, device)
            self._tables = (device, tables)
        return self._tables[1]

    def contains(self, codes: tuple[int, ...]) -> bool:
        """True if ``codes`` is an allowed full SID."""
        if len(codes) != self.spec.levels:
            return False
        if self.leaves is None:
            return all(0 <= c < n for c, n in zip(codes, self.spec.sizes, strict=True))
        return codes in self.leaves


class DecodeResult(BaseModel):
    """One context's decode: the valid candidates and what was dropped."""

    candidates: list[SIDCandidate]
    raw: list[str]
    """Decoded text of every returned sequence, valid or not, in beam order."""
    invalid: int
    """Sequences that were not an allowed SID (always 0 when constrained)."""


class TransformersSIDGenerator:
    """Constrained SID decoding with a local policy; implements ``SIDGenerator``."""

    addresser = "generative"
    """What outputs say chose the SID."""

    def __init__(
        self,
        policy: LocalPolicy,
        spec: SIDSpec = DEFAULT_SPEC,
        *,
        bank: Bank | None = None,
        config: SIDDecodingConfig | None = None,
    ) -> None:
        """Wrap ``policy``; SID tokens for ``spec`` are added to it if it lacks them."""
        self.policy = policy
        self._spec = spec
        self.bank = bank
        self.config = config or SIDDecodingConfig()
        self._trie: SIDTrie | None = None
        self._seen_seq = 0
        self._head: list[int] | None = None
        if bank is not None and bank.spec != spec:
            raise InvalidSID(f"the bank's spec is {bank.spec}, the generator's {spec}")
        if self.config.allowed != "all" and bank is None:
            raise ValueError(f"allowed={self.config.allowed!r} needs a bank")
        with policy.lock:
            if add_sid_tokens(policy.model, policy.tokenizer, spec):
                policy.info = policy.info.model_copy(update={"sid_sizes": list(spec.sizes)})
        self._level_ids = sid_token_ids(policy.tokenizer, spec)

    def __repr__(self) -> str:
        return f"TransformersSIDGenerator({self.policy!r}, {self._spec}, {self.config.allowed})"

    @classmethod
    def load(
        cls,
        model_path: str | None = None,
        *,
        spec: SIDSpec = DEFAULT_SPEC,
        bank: Bank | None = None,
        config: SIDDecodingConfig | None = None,
    ) -> TransformersSIDGenerator:
        """A generator over a policy directory (None: the embedded default model).

        A policy without SID tokens for ``spec`` gets them added in memory (see
        :mod:`genmem.policies.sid_tokens`); an untrained policy then produces valid but
        uninformed SIDs.
        """
        spec = bank.spec if bank is not None else spec
        return cls(load_policy(model_path), spec, bank=bank, config=config)

    def _module(self) -> Any:
        """The module SIDs are decoded on: the weights, or the generation copy if quantized."""
        return self.policy.runner if self.config.quantized else self.policy.model

    @property
    def spec(self) -> SIDSpec:
        """The address space the candidates belong to."""
        return self._spec

    def trie(self) -> SIDTrie:
        """The current allowed set, rebuilt when the bank's entries changed since last asked."""
        mode = self.config.allowed
        if mode == "all":
            if self._trie is None:
                self._trie = SIDTrie(self._spec, self._level_ids, None)
            return self._trie
        assert self.bank is not None
        events = self.bank.events(after_seq=self._seen_seq)
        changed = any(e.outcome in ("inserted", "deleted") for e in events)
        if events:
            self._seen_seq = events[-1].seq
        if self._trie is None or changed:
            occupied = [s.codes for s in self.bank.occupied()]
            if mode == "occupied":
                self._trie = SIDTrie(self._spec, self._level_ids, occupied)
            else:
                parents = (c[:-1] for c in occupied)
                self._trie = SIDTrie.under_parents(self._spec, self._level_ids, parents)
        return self._trie

    def prompt(self, context: str) -> str:
        """The chat-templated prompt for one context, ending where the SID starts."""
        return address_prompt(
            self.policy.tokenizer,
            context,
            system_prompt=self.config.system_prompt,
            max_context_tokens=self.config.max_context_tokens,
        )

    def prompt_ids(self, context: str) -> list[int]:
        """The token ids of :meth:`prompt`."""
        return self.policy.tokenizer(self.prompt(context), add_special_tokens=False)["input_ids"]

    def head_ids(self) -> list[int]:
        """The tokens every addressing prompt of this generator starts with (its system turn).

        Found once as the common beginning of two prompts whose contexts share nothing; the
        tree engine reads them once per process (a prompt that does not start with them is
        simply read whole).
        """
        if self._head is None:
            a, b = self.prompt_ids("a"), self.prompt_ids("7 Z")
            n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), 0)
            self._head = a[:n]
        return self._head

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """Up to ``k`` distinct SIDs for ``context``, best first."""
        return self.generate_batch([context], k)[0]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts, in order."""
        return [r.candidates for r in self.decode(contexts, k)]

    def decode(self, contexts: Sequence[str], k: int = 1) -> list[DecodeResult]:
        """Decode ``contexts`` and report, per context, valid candidates and dropped outputs."""
        if isinstance(contexts, str):
            raise TypeError("decode takes a list of contexts; use generate() for one")
        if not 1 <= k <= MAX_BEAMS:
            raise ValueError(f"k={k}: ask for 1 to {MAX_BEAMS} candidates")
        trie = self.trie()
        k_eff = min(k, trie.size)
        if k_eff == 0 or not contexts:
            return [DecodeResult(candidates=[], raw=[], invalid=0) for _ in contexts]
        step = max(1, self.config.batch_size // k_eff) if k_eff > 1 else self.config.batch_size
        prompts = [self.prompt_ids(c) for c in contexts]
        # Batch prompts of similar length together, so one long context does not make a whole
        # batch pay for its padding; results go back in the caller's order.
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        out: list[DecodeResult | None] = [None] * len(prompts)
        for start in range(0, len(order), step):
            chunk = order[start : start + step]
            results = self._decode_chunk([prompts[i] for i in chunk], k_eff, trie)
            for i, res in zip(chunk, results, strict=True):
                out[i] = res
        return [r for r in out if r is not None]

    def _decode_chunk(
        self, prompts: Sequence[list[int]], k: int, trie: SIDTrie
    ) -> list[DecodeResult]:
        with self.policy.lock:
            module = self._module()
            engine = self.config.engine if self.config.constrained else "generate"
            if engine == "tree" and not supports_tree(module):
                engine = "trie"
            if engine == "tree":
                beams = self._tree_search(module, prompts, k, trie)
            else:
                enc = self._left_padded(prompts, module.device)
                if engine == "trie":
                    beams = self._trie_search(enc, k, trie)
                else:
                    beams = self._hf_generate(enc, k, trie)
        return [self._collect([b[0] for b in bs], [b[1] for b in bs], trie) for bs in beams]

    def _left_padded(self, prompts: Sequence[list[int]], device: Any) -> dict[str, Any]:
        """``input_ids`` and ``attention_mask`` of ``prompts``, left-padded, on ``device``."""
        import torch

        width = max(len(p) for p in prompts)
        pad = self.policy.tokenizer.pad_token_id or 0
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}

    def _tree_search(
        self, module: Any, prompts: Sequence[list[int]], k: int, trie: SIDTrie
    ) -> list[list[tuple[list[int], float]]]:
        """Decode with :func:`~genmem.policies.sid_tree.tree_beam_search`."""
        tok = self.policy.tokenizer
        prefixes = self.policy.prefixes
        state = prefill(
            module,
            prompts,
            pad_id=tok.pad_token_id or 0,
            prefixes=prefixes,
            owner=cache_owner(module, tok) if prefixes is not None else None,
            head=self.head_ids() if prefixes is not None else (),
        )
        budget = self.config.lookahead_tokens
        if budget is None:
            budget = 32 if module.device.type == "cpu" else 1024
        tables = trie.tables(module.device)
        tokens, scores = tree_beam_search(module, state, tables, k, lookahead=budget)
        return [list(zip(t, s, strict=True)) for t, s in zip(tokens, scores, strict=True)]

    def _hf_generate(self, enc: Any, k: int, trie: SIDTrie) -> list[list[tuple[list[int], float]]]:
        """Decode with ``generate``: beams constrained by ``prefix_allowed_tokens_fn``."""
        import torch

        tok = self.policy.tokenizer
        plen = enc["input_ids"].shape[1]

        def allowed(_batch_id: int, ids: Any) -> list[int]:
            return trie.allowed(ids[plen:].tolist())

        levels = self._spec.levels
        kwargs: dict[str, Any] = {
            "max_new_tokens": levels,
            "min_new_tokens": levels,
            "do_sample": False,
            "num_beams": k,
            "num_return_sequences": k,
            "return_dict_in_generate": True,
            "pad_token_id": tok.pad_token_id,
        }
        if self.config.constrained:
            kwargs["prefix_allowed_tokens_fn"] = allowed
        if k > 1:
            kwargs.update(length_penalty=0.0, early_stopping=True, output_scores=True)
        else:
            kwargs.update(output_logits=True)
        with torch.inference_mode():
            gen = self._module().generate(**enc, **kwargs)
        new = gen.sequences[:, plen:]
        if k > 1:
            scores = gen.sequences_scores.tolist()
        else:
            scores = self._greedy_scores(gen.logits, new, trie)
        seqs = new.tolist()
        n = enc["input_ids"].shape[0]
        pairs = list(zip(seqs, scores, strict=True))
        return [pairs[i * k : (i + 1) * k] for i in range(n)]

    def _trie_search(self, enc: Any, k: int, trie: SIDTrie) -> list[list[tuple[list[int], float]]]:
        """Beam search over the trie that reads each prompt once.

        ``generate`` copies every prompt ``num_beams`` times before the first forward pass;
        here each prompt is encoded once, its cache rows are copied to the beams that survive
        the first SID token, and each later step feeds one token per beam. Beams are ranked
        exactly as transformers ranks them (summed log_softmax over the full vocabulary, top
        ``k`` per context each step), so the result is the same, only cheaper.
        """
        import torch

        model, levels = self._module(), self._spec.levels
        ids, mask = enc["input_ids"], enc["attention_mask"]
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=pos,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = out.past_key_values
            logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
            # one beam per context to start: (context, codes, token ids, score)
            beams = [(b, (), [], 0.0) for b in range(ids.shape[0])]
            next_pos = pos[:, -1] + 1
            for depth in range(levels):
                chosen = []  # (parent row, context, codes, token ids, score)
                for ctx in range(ids.shape[0]):
                    cands = []
                    for row, (c, codes, _toks, score) in enumerate(beams):
                        if c != ctx:
                            continue
                        kids = trie.children(codes)
                        if not kids:
                            continue
                        tids = [self._level_ids[depth][code] for code in kids]
                        lps = logp[row, tids].tolist()
                        cands += [
                            (score + lp, row, code, tid)
                            for lp, code, tid in zip(lps, kids, tids, strict=True)
                        ]
                    cands.sort(key=lambda x: -x[0])
                    for total, row, code, tid in cands[:k]:
                        _, codes, toks, _ = beams[row]
                        chosen.append((row, ctx, (*codes, code), [*toks, tid], total))
                beams = [(ctx, codes, toks, score) for _, ctx, codes, toks, score in chosen]
                if depth == levels - 1 or not beams:
                    break
                parents = torch.tensor([row for row, *_ in chosen], device=ids.device)
                cache.reorder_cache(parents)
                mask = torch.cat([mask[parents], mask.new_ones(len(chosen), 1)], dim=1)
                step_pos = next_pos[parents]
                tokens = torch.tensor(
                    [[toks[-1]] for _, _, _, toks, _ in chosen], device=ids.device
                )
                out = model(
                    input_ids=tokens,
                    attention_mask=mask,
                    position_ids=step_pos[:, None],
                    past_key_values=cache,
                    use_cache=True,
                )
                cache = out.past_key_values
                logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
                next_pos = step_pos + 1
        results: list[list[tuple[list[int], float]]] = [[] for _ in range(ids.shape[0])]
        for ctx, _, toks, score in beams:
            results[ctx].append((toks, score))
        return results

    def _greedy_scores(self, logits: Sequence[Any], new: Any, trie: SIDTrie) -> list[float]:
        """Summed log-probabilities of the chosen tokens (mask applied after log_softmax)."""
        import torch

        total = torch.zeros(new.shape[0], device=new.device)
        for step, step_logits in enumerate(logits):
            logp = torch.log_softmax(step_logits.float(), dim=-1)
            total += logp.gather(1, new[:, step : step + 1]).squeeze(1)
        return total.tolist()

    def _collect(self, seqs: list[list[int]], scores: list[float], trie: SIDTrie) -> DecodeResult:
        """Valid, distinct candidates of one context, best first."""
        tok = self.policy.tokenizer
        raw, best, invalid = [], {}, 0
        for ids, score in zip(seqs, scores, strict=True):
            ids = ids[: self._spec.levels]
            raw.append(tok.decode(ids, skip_special_tokens=True))
            if self.config.constrained:
                codes = trie.codes(ids)
            else:
                codes = _parse_codes(raw[-1], self._spec)
            alive = math.isfinite(score) and score > _DEAD
            if codes is None or not trie.contains(codes) or not alive:
                invalid += 1
                continue
            sid = str(SID(codes, self._spec))
            best[sid] = max(score, best.get(sid, -math.inf))
        ranked = sorted(best.items(), key=lambda kv: -kv[1])
        return DecodeResult(
            candidates=[SIDCandidate(sid=s, score=v) for s, v in ranked], raw=raw, invalid=invalid
        )


def _parse_codes(text: str, spec: SIDSpec) -> tuple[int, ...] | None:
    """Codes of ``text`` if it is exactly one valid SID, else None."""
    try:
        return spec.parse(text).codes
    except InvalidSID:
        return None
