"""How support is chosen in an evaluation: no memory, TF-IDF, dense, or SID generation.

Every method runs through the same ``genmem`` graph with the same model and budgets; only the
addressing policy of MemRetriever differs. The content-coupled baselines are wrapped as
addressing policies (:class:`PayloadAddresser`): they rank the bank's occupied SIDs by payload
similarity, so their candidates go through the same candidate budget, reranker and
``memory_lookup`` call as generated SIDs (the paper's matched-budget protocol). Their index is
rebuilt whenever the bank's history has grown, which is the most favourable schedule for them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal

from genmem.graph.addressing import AddressingConfig, GeneratorFactory
from genmem.memory.bank import Bank
from genmem.memory.embedding_cache import CachedEncoder
from genmem.memory.sid import SIDSpec
from genmem.policies.addressing import bank_quantizer
from genmem.policies.prompts import retriever_user_message
from genmem.policies.types import SIDCandidate

__all__ = [
    "METHODS",
    "Method",
    "PayloadAddresser",
    "cached_payload_encoder",
    "check_methods",
    "method_generator",
]

Method = Literal["none", "tfidf", "dense", "quantizer", "sid"]
METHODS: tuple[Method, ...] = ("none", "tfidf", "dense", "quantizer", "sid")
"""``sid`` follows the run's ``--addresser`` (an aligned policy generates; ``auto`` quantises
otherwise); ``quantizer`` always quantises with the bank's frozen codebooks."""
# What MemRetriever's user turn puts before the query; the payload baselines rank the query
# alone. Taken from the one prompt builder, so a change of wording cannot leak into rankings.
_TASK_PREFIX = retriever_user_message("")


def check_methods(methods: Sequence[str] | str, known: Sequence[str] = METHODS) -> list[Any]:
    """Parse ``"none,tfidf"`` or a list into ``known``, distinct methods (ValueError otherwise)."""
    items = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods)
    items = [m for m in items if m]
    unknown = [m for m in items if m not in known]
    if unknown or not items:
        raise ValueError(f"methods {unknown or items}: choose from {', '.join(known)}")
    if len(set(items)) != len(items):
        raise ValueError(f"methods {items}: list each method once")
    return items  # type: ignore[return-value]


class PayloadAddresser:
    """An addressing policy that ranks occupied SIDs by payload similarity to the task."""

    def __init__(self, bank: Bank, kind: Literal["tfidf", "dense"]) -> None:
        from genmem.policies.baselines import DenseRetriever, TfidfRetriever

        self.bank = bank
        self.kind = kind
        self.addresser = kind  # what outputs say chose the SID
        if kind == "tfidf":
            self.index: Any = TfidfRetriever.from_bank(bank)
        else:
            self.index = DenseRetriever.from_bank(bank, encoder=cached_payload_encoder())
        self.rebuilds = 0
        self._events = bank.stats().events
        self._lock = threading.Lock()

    @property
    def spec(self) -> SIDSpec:
        """The bank's address space."""
        return self.bank.spec

    def _fresh(self) -> None:
        events = self.bank.stats().events
        if events != self._events:
            self.index.rebuild()
            self._events = events
            self.rebuilds += 1

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """The ``k`` occupied SIDs whose payloads are most similar to the task, best first."""
        return self.generate_batch([context], k)[0]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts."""
        queries = [c.removeprefix(_TASK_PREFIX) for c in contexts]
        with self._lock:
            self._fresh()
            return self.index.retrieve_batch(queries, k)


def cached_payload_encoder() -> CachedEncoder:
    """MiniLM without prefix, its vectors kept in ``cache_root()/embeddings`` between runs."""
    from genmem.memory.encoders import default_encoder
    from genmem.policies.local import cache_root

    path = cache_root() / "embeddings" / "payloads.sqlite"
    return CachedEncoder(default_encoder(prefix=None), path=path)


def method_generator(method: Method) -> GeneratorFactory | None:
    """The addressing factory for ``method`` (None: the retriever's own SID decoding)."""
    if method in ("sid", "none"):
        return None
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if method == "quantizer":
        return lambda bank, config: bank_quantizer(bank, config.allowed)

    def make(bank: Bank, config: AddressingConfig) -> PayloadAddresser:
        return PayloadAddresser(bank, method)  # type: ignore[arg-type]

    return make
