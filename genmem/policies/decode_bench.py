"""Latency of SID decoding on a local policy: greedy and beam, constrained and free, one run.

Four decoders are timed on the same contexts, one context per call (as an agent asks), taking
turns context by context so that load from other processes falls on all of them alike:

- ``tree``: constrained decoding with the default engine (every beam in one pass per level over
  one copy of the prompt, :mod:`genmem.policies.sid_tree`);
- ``trie``: constrained decoding with GenMem's first trie beam search (one cache row per beam);
- ``generate``: constrained decoding with transformers' ``generate`` and
  ``prefix_allowed_tokens_fn`` (the reference; every prompt is copied once per beam);
- ``free``: unconstrained ``generate`` for the same L tokens, the baseline the mask is
  compared with; its outputs are checked for being valid SIDs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies.local import load_policy
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator

__all__ = ["DECODERS", "PAPER_GPU_MS", "DecodeBenchReport", "DecodeTiming", "run_decode_bench"]

DECODERS = ("tree", "trie", "generate", "free")
PAPER_GPU_MS = {1: 35.7, 5: 121.0, 10: 221.0, 20: 406.1}
"""The paper's reported SID decoding latencies (GPU, its own model): context only."""


class DecodeTiming(BaseModel):
    """Latency of one decoder at one beam width."""

    decoder: str
    beam: int
    calls: int
    p50_ms: float
    mean_ms: float
    p90_ms: float
    valid_rate: float = Field(description="Returned sequences that are valid SIDs.")
    mean_candidates: float = Field(description="Distinct valid SIDs per call.")


class DecodeBenchReport(BaseModel):
    """Every timing of one run plus what it ran on."""

    model: str
    spec: str
    contexts: int
    mean_prompt_tokens: float
    torch_threads: int
    timings: list[DecodeTiming]

    def timing(self, decoder: str, beam: int) -> DecodeTiming:
        """The row of one decoder and beam width."""
        return next(t for t in self.timings if t.decoder == decoder and t.beam == beam)

    def table(self) -> str:
        """A readable table with ratios against free decoding at the same beam width."""
        lines = [
            f"SID decoding on {self.model} ({self.spec}), {self.contexts} contexts, one per call, "
            f"mean prompt {self.mean_prompt_tokens:.0f} tokens, {self.torch_threads} torch threads",
            f"{'decoder':<9} {'beam':>4} {'p50 ms':>9} {'mean ms':>9} {'p90 ms':>9} "
            f"{'valid':>6} {'vs free':>8} {'paper GPU ms':>13}",
        ]
        for t in self.timings:
            free = self.timing("free", t.beam)
            paper = PAPER_GPU_MS.get(t.beam)
            lines.append(
                f"{t.decoder:<9} {t.beam:>4} {t.p50_ms:>9.1f} {t.mean_ms:>9.1f} {t.p90_ms:>9.1f} "
                f"{t.valid_rate:>6.0%} {t.mean_ms / free.mean_ms:>7.2f}x "
                f"{paper if paper is not None else '':>13}"
            )
        return "\n".join(lines)


def run_decode_bench(
    model_path: str | None,
    contexts: Sequence[str],
    *,
    beams: Sequence[int] = (1, 5, 10, 20),
    spec: SIDSpec = DEFAULT_SPEC,
    progress: bool = True,
) -> DecodeBenchReport:
    """Time the four decoders at each beam width on ``contexts`` (after one warm-up call each)."""
    import torch

    if not contexts:
        raise ValueError("run_decode_bench needs at least one context")
    policy = load_policy(model_path)
    gens = {
        "tree": TransformersSIDGenerator(policy, spec),
        "trie": TransformersSIDGenerator(policy, spec, config=SIDDecodingConfig(engine="trie")),
        "generate": TransformersSIDGenerator(
            policy, spec, config=SIDDecodingConfig(engine="generate")
        ),
        "free": TransformersSIDGenerator(policy, spec, config=SIDDecodingConfig(constrained=False)),
    }
    for gen in gens.values():
        gen.decode([contexts[0]], 1)
    lat: dict[tuple[str, int], list[float]] = {(d, b): [] for d in DECODERS for b in beams}
    valid: dict[tuple[str, int], list[float]] = {key: [] for key in lat}
    found: dict[tuple[str, int], list[int]] = {key: [] for key in lat}
    steps = [(i, b) for i in range(len(contexts)) for b in beams]
    for n, (i, beam) in enumerate(tqdm(steps, desc="sid decode bench", disable=not progress)):
        order = DECODERS if n % 2 == 0 else DECODERS[::-1]
        for name in order:
            t0 = time.perf_counter()
            res = gens[name].decode([contexts[i]], beam)[0]
            lat[name, beam].append(time.perf_counter() - t0)
            valid[name, beam].append(1 - res.invalid / max(1, len(res.raw)))
            found[name, beam].append(len(res.candidates))
    timings = []
    for (name, beam), seconds in lat.items():
        ms = np.asarray(seconds) * 1000
        timings.append(
            DecodeTiming(
                decoder=name,
                beam=beam,
                calls=len(ms),
                p50_ms=float(np.percentile(ms, 50)),
                mean_ms=float(ms.mean()),
                p90_ms=float(np.percentile(ms, 90)),
                valid_rate=float(np.mean(valid[name, beam])),
                mean_candidates=float(np.mean(found[name, beam])),
            )
        )
    timings.sort(key=lambda t: (t.beam, DECODERS.index(t.decoder)))
    tok = policy.tokenizer
    prompt_tokens = [len(tok(gens["tree"].prompt(c))["input_ids"]) for c in contexts]
    return DecodeBenchReport(
        model=policy.info.base_model if model_path is None else str(model_path),
        spec=str(spec),
        contexts=len(contexts),
        mean_prompt_tokens=float(np.mean(prompt_tokens)),
        torch_threads=torch.get_num_threads(),
        timings=timings,
    )
