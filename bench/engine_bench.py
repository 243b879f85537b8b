"""A local engine against the float32 reference, on the same prompts in one run.

Two shared loads of the same policy, ``float32`` (the reference and default engine) and the one
under test (usually the opt-in ``int8``: generation on a dynamically quantised copy), take turns
prompt by prompt so that load from other processes falls on both alike. Measured per engine:

- prefill: one forward pass over each chat prompt (tokens/s);
- decode: greedy ``generate`` of a fixed number of new tokens after a short prompt (tokens/s);
- SID latency: greedy and beam-10 constrained decoding with the trie search;
- agreement: the share of contexts whose top-1 SID is the same as the reference's (greedy and
  beam 10), and each engine's share of valid SIDs.

SIDs are decoded on a policy's float32 weights unless ``SIDDecodingConfig.quantized`` asks for
its generation copy, so an int8 load's SIDs are the reference's by construction; the bench
also decodes on the int8 copy and reports that agreement (``int8_sid_top1_agreement``), the
measurement behind keeping SIDs on float32.

``bench/local_inference.py`` runs it and prints the figures.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies.local import Dtype, load_policy
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator

__all__ = ["EngineBenchReport", "EngineFigures", "run_engine_bench"]

_PREFILL_SYSTEM = (
    "You solve grade-school maths problems step by step. Work out each quantity in its own "
    "sentence, check the arithmetic, and end with a line 'Answer: <number>'."
)


class EngineFigures(BaseModel):
    """What one engine did on the bench's prompts."""

    dtype: str
    prefill_tok_s: float
    decode_tok_s: float
    sid_greedy_ms: float = Field(description="Mean latency of one greedy SID.")
    sid_beam10_ms: float = Field(description="Mean latency of one beam-10 SID search.")
    sid_valid: float = Field(description="Share of returned SIDs that are valid, both modes.")


class EngineBenchReport(BaseModel):
    """Reference and tested engine side by side, with their ratios and SID agreement."""

    model: str
    spec: str
    prompts: int
    mean_prompt_tokens: float
    decode_tokens: int
    contexts: int
    torch_threads: int
    reference: EngineFigures
    engine: EngineFigures
    sid_top1_agreement: float = Field(description="Same top-1 SID, greedy decoding.")
    sid_beam10_top1_agreement: float = Field(description="Same top-1 SID, beam 10.")
    int8: EngineFigures | None = Field(
        default=None, description="SIDs decoded on the int8 generation copy (prefill/decode 0)."
    )
    int8_sid_top1_agreement: float | None = None
    int8_sid_beam10_top1_agreement: float | None = None

    def keys(self) -> dict[str, Any]:
        """The flat figures ``bench/local_inference.py --json`` prints."""
        ref, eng = self.reference, self.engine
        return {
            "engine": eng.dtype,
            "reference_engine": ref.dtype,
            "decode_tok_s": eng.decode_tok_s,
            "prefill_tok_s": eng.prefill_tok_s,
            "ref_decode_tok_s": ref.decode_tok_s,
            "ref_prefill_tok_s": ref.prefill_tok_s,
            "speedup_decode": eng.decode_tok_s / ref.decode_tok_s,
            "speedup_prefill": eng.prefill_tok_s / ref.prefill_tok_s,
            "sid_greedy_ms": eng.sid_greedy_ms,
            "ref_sid_greedy_ms": ref.sid_greedy_ms,
            "sid_beam10_ms": eng.sid_beam10_ms,
            "ref_sid_beam10_ms": ref.sid_beam10_ms,
            "speedup_sid_greedy": ref.sid_greedy_ms / eng.sid_greedy_ms,
            "speedup_sid_beam10": ref.sid_beam10_ms / eng.sid_beam10_ms,
            "sid_top1_agreement": self.sid_top1_agreement,
            "sid_beam10_top1_agreement": self.sid_beam10_top1_agreement,
            "sid_valid": eng.sid_valid,
            "ref_sid_valid": ref.sid_valid,
            "int8_sid_top1_agreement": self.int8_sid_top1_agreement,
            "int8_sid_beam10_top1_agreement": self.int8_sid_beam10_top1_agreement,
            "int8_sid_greedy_ms": self.int8.sid_greedy_ms if self.int8 else None,
            "int8_sid_beam10_ms": self.int8.sid_beam10_ms if self.int8 else None,
            "int8_sid_valid": self.int8.sid_valid if self.int8 else None,
            "prompts": self.prompts,
            "contexts": self.contexts,
            "mean_prompt_tokens": self.mean_prompt_tokens,
            "decode_tokens": self.decode_tokens,
            "torch_threads": self.torch_threads,
            "model": self.model,
        }

    def table(self) -> str:
        """A readable comparison."""
        k = self.keys()
        rows = [
            ("prefill tok/s", k["ref_prefill_tok_s"], k["prefill_tok_s"], k["speedup_prefill"]),
            ("decode tok/s", k["ref_decode_tok_s"], k["decode_tok_s"], k["speedup_decode"]),
            ("SID greedy ms", k["ref_sid_greedy_ms"], k["sid_greedy_ms"], k["speedup_sid_greedy"]),
            (
                "SID beam-10 ms",
                k["ref_sid_beam10_ms"],
                k["sid_beam10_ms"],
                k["speedup_sid_beam10"],
            ),
        ]
        lines = [
            f"{self.model}: {self.prompts} prompts (mean {self.mean_prompt_tokens:.0f} tokens), "
            f"{self.decode_tokens} decoded tokens each, {self.contexts} SID contexts, "
            f"{self.torch_threads} torch threads",
            f"{'':<16} {self.reference.dtype:>10} {self.engine.dtype:>10} {'speedup':>8}",
        ]
        lines += [f"{n:<16} {a:>10.1f} {b:>10.1f} {r:>7.2f}x" for n, a, b, r in rows]
        lines.append(
            f"SID top-1 agreement: greedy {self.sid_top1_agreement:.1%}, beam 10 "
            f"{self.sid_beam10_top1_agreement:.1%}; valid {self.reference.sid_valid:.1%} / "
            f"{self.engine.sid_valid:.1%}"
        )
        if self.int8 is not None:
            lines.append(
                f"SIDs decoded on the int8 copy instead: agreement greedy "
                f"{self.int8_sid_top1_agreement:.1%}, beam 10 "
                f"{self.int8_sid_beam10_top1_agreement:.1%}; {self.int8.sid_greedy_ms:.0f} / "
                f"{self.int8.sid_beam10_ms:.0f} ms; valid {self.int8.sid_valid:.1%}"
            )
        return "\n".join(lines)


def _chat_prompt(tokenizer: Any, question: str) -> str:
    messages = [
        {"role": "system", "content": _PREFILL_SYSTEM},
        {"role": "user", "content": question},
    ]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def run_engine_bench(
    contexts: Sequence[str],
    *,
    model_path: str | None = None,
    engine: Dtype = "int8",
    reference: Dtype = "float32",
    prompts: int = 8,
    decode_tokens: int = 48,
    spec: SIDSpec = DEFAULT_SPEC,
    progress: bool = True,
) -> EngineBenchReport:
    """Time ``engine`` against ``reference`` and compare their SIDs on ``contexts``."""
    import torch

    if not contexts:
        raise ValueError("run_engine_bench needs at least one context")
    if engine == reference:
        raise ValueError(f"engine and reference are both {engine!r}")
    names = (reference, engine)
    policies = {d: load_policy(model_path, dtype=d) for d in names}
    gens = {d: TransformersSIDGenerator(p, spec) for d, p in policies.items()}
    copy_name = f"{engine}-copy"
    decoders = [*names]
    if policies[engine].runner is not policies[engine].model:
        quantized = SIDDecodingConfig(quantized=True)
        gens[copy_name] = TransformersSIDGenerator(policies[engine], spec, config=quantized)
        decoders.append(copy_name)
    tok = policies[reference].tokenizer
    chat = [_chat_prompt(tok, q) for q in contexts[: max(1, prompts)]]
    encoded = [tok(p, return_tensors="pt", add_special_tokens=False) for p in chat]
    short = tok(_chat_prompt(tok, "Count from one to twenty."), return_tensors="pt")
    for d in decoders:  # warm-up: builds the int8 copy, fills allocator caches
        gens[d].decode([contexts[0]], 10)
    for d in names:
        with torch.inference_mode():
            policies[d].runner(**encoded[0])
    pre: dict[str, list[float]] = {d: [] for d in names}
    dec: dict[str, list[float]] = {d: [] for d in names}
    n_dec: dict[str, int] = dict.fromkeys(names, 0)
    bar = tqdm(total=len(encoded) + len(contexts), desc="engine bench", disable=not progress)
    for i, enc in enumerate(encoded):
        for d in names if i % 2 == 0 else names[::-1]:
            runner = policies[d].runner
            with torch.inference_mode():
                t0 = time.perf_counter()
                runner(**enc, logits_to_keep=1)
                pre[d].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                out = runner.generate(
                    **short,
                    max_new_tokens=decode_tokens,
                    min_new_tokens=decode_tokens,
                    do_sample=False,
                    pad_token_id=tok.pad_token_id,
                )
                dec[d].append(time.perf_counter() - t0)
                n_dec[d] += int(out.shape[1] - short["input_ids"].shape[1])
        bar.update(1)
    lat: dict[tuple[str, int], list[float]] = {(d, k): [] for d in decoders for k in (1, 10)}
    top: dict[tuple[str, int], list[str | None]] = {key: [] for key in lat}
    valid: dict[str, list[float]] = {d: [] for d in decoders}
    for i, context in enumerate(contexts):
        for d in decoders if i % 2 == 0 else decoders[::-1]:
            for k in (1, 10):
                t0 = time.perf_counter()
                res = gens[d].decode([context], k)[0]
                lat[d, k].append(time.perf_counter() - t0)
                top[d, k].append(str(res.candidates[0].sid) if res.candidates else None)
                valid[d].append(1 - res.invalid / max(1, len(res.raw)))
        bar.update(1)
    bar.close()
    n_prompt = sum(int(e["input_ids"].shape[1]) for e in encoded)

    def figures(d: str) -> EngineFigures:
        return EngineFigures(
            dtype=d,
            prefill_tok_s=n_prompt / sum(pre[d]) if d in pre else 0.0,
            decode_tok_s=n_dec[d] / sum(dec[d]) if d in dec else 0.0,
            sid_greedy_ms=float(np.mean(lat[d, 1]) * 1000),
            sid_beam10_ms=float(np.mean(lat[d, 10]) * 1000),
            sid_valid=float(np.mean(valid[d])),
        )

    def agree(k: int, d: str = engine) -> float:
        pairs = zip(top[reference, k], top[d, k], strict=True)
        return float(np.mean([a is not None and a == b for a, b in pairs]))

    return EngineBenchReport(
        model=policies[engine].info.base_model if model_path is None else str(model_path),
        spec=str(spec),
        prompts=len(encoded),
        mean_prompt_tokens=n_prompt / len(encoded),
        decode_tokens=decode_tokens,
        contexts=len(contexts),
        torch_threads=torch.get_num_threads(),
        reference=figures(reference),
        engine=figures(engine),
        sid_top1_agreement=agree(1),
        sid_beam10_top1_agreement=agree(10),
        int8=figures(copy_name) if copy_name in decoders else None,
        int8_sid_top1_agreement=agree(1, copy_name) if copy_name in decoders else None,
        int8_sid_beam10_top1_agreement=agree(10, copy_name) if copy_name in decoders else None,
    )
