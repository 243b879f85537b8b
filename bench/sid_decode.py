"""Benchmark: SID decoding latency on the embedded default model, constrained vs free.

Greedy and beam 5/10/20 with GenMem's tree and trie engines, with transformers' ``generate``
plus ``prefix_allowed_tokens_fn``, and unconstrained, on GSM8K questions, one context per call,
the decoders taking turns (see ``genmem.policies.decode_bench``); ``bench/sid_latency.py`` adds
the tree engine's agreement with the trie engine::

    python bench/sid_decode.py                 # 10 contexts, beams 1,5,10,20
    python bench/sid_decode.py --contexts 30 --json
"""

from __future__ import annotations

import sys

from genmem.cli import main

if __name__ == "__main__":
    sys.exit(main(["sid", "bench", *sys.argv[1:]]))
