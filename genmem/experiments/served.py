"""Closed-loop graphs with an environment's scorer attached, for ``langgraph dev``.

The graph layer cannot import environments, so the scored variants live here: send
``{"query": ..., "reference": <gold answer>}`` and the loop scores the answer (``score`` in the
output, for evaluation). The reference and the score never reach an agent: MemEvolver evolves
memory from the trajectory alone, or from an ``outcome`` the caller passes in (an environment's
own signal). Built lazily: the default model loads on the first run, not here.
"""

from __future__ import annotations

from genmem.envs.gsm8k import score_gsm8k
from genmem.graph.loop import build_genmem_graph

gsm8k = build_genmem_graph(scorer=score_gsm8k)
"""The ``genmem`` loop scored by GSM8K's numeric match (reference = the gold answer)."""
