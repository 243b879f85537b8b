"""The addressing policy behind the memory graphs' ``address`` nodes, one per bank.

MemRetriever and MemEvolver both turn their ``sid_generator`` argument (a generator, a factory,
or nothing: constrained decoding on the graph's own local model) into one generator per bank,
built on first use and reused, because building one can add SID tokens to a model or index a
bank's occupied slots.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from langchain_core.language_models import BaseChatModel

from genmem.memory.bank import Bank
from genmem.policies.chat_local import ChatLocal
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator
from genmem.policies.types import AllowedMode, SIDGenerator

__all__ = ["AddressingConfig", "BankGenerators", "GeneratorFactory", "local_generator"]


class AddressingConfig(Protocol):
    """What a generator factory reads from a graph's config."""

    @property
    def allowed(self) -> AllowedMode:
        """Which SIDs the decoder may produce."""
        ...


GeneratorFactory = Callable[[Bank, AddressingConfig], SIDGenerator]
"""Builds the addressing policy for a bank (called once per bank and cached)."""


def local_generator(model: BaseChatModel, role: str) -> GeneratorFactory:
    """Constrained decoding on the same local policy the chat model runs on."""

    def make(bank: Bank, config: AddressingConfig) -> SIDGenerator:
        if not isinstance(model, ChatLocal):
            raise TypeError(
                f"{role} needs an SID generator for a non-local chat model: pass "
                "sid_generator=... (e.g. a VLLMServerSIDGenerator or a QuantizerAddresser)"
            )
        return TransformersSIDGenerator(
            model.policy,
            bank.spec,
            bank=bank if config.allowed != "all" else None,
            config=SIDDecodingConfig(allowed=config.allowed),
        )

    return make


class BankGenerators:
    """One SID generator per bank, made by a factory on first use (thread-safe)."""

    def __init__(
        self,
        model: BaseChatModel,
        sid_generator: SIDGenerator | GeneratorFactory | None,
        config: AddressingConfig,
        *,
        role: str,
    ) -> None:
        """Use ``sid_generator`` as given, call it as a factory, or decode with ``model``."""
        factory: GeneratorFactory
        if sid_generator is None:
            factory = local_generator(model, role)
        elif callable(sid_generator) and not isinstance(sid_generator, SIDGenerator):
            factory = sid_generator
        else:
            fixed = sid_generator
            factory = lambda bank, config: fixed  # noqa: E731
        self.factory = factory
        self.config = config
        self._generators: dict[str, SIDGenerator] = {}
        self._lock = threading.Lock()

    def __call__(self, bank: Bank) -> SIDGenerator:
        """The generator for ``bank`` (built now if this is the first request for it)."""
        key = f"{id(bank.store)}:{bank.bank_id}"
        with self._lock:
            if key not in self._generators:
                self._generators[key] = self.factory(bank, self.config)
            return self._generators[key]
