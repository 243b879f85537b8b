"""The addressing policy behind the memory graphs' ``address`` nodes, one per bank and addresser.

MemRetriever and MemEvolver both turn their ``sid_generator`` argument (a generator, a factory,
or nothing) into one generator per bank, built on first use and reused, because building one can
add SID tokens to a model, load codebooks or index a bank's occupied slots. With nothing given
the graph's ``addresser`` (config, or the run context's ``addresser``) decides, as
:mod:`genmem.policies.addressing` explains: ``auto`` generates with a policy aligned to the
bank's codebooks and otherwise quantises with them.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable
from typing import Protocol

from langchain_core.language_models import BaseChatModel

from genmem.errors import CodebookError, InvalidModelSpec
from genmem.memory.bank import Bank
from genmem.policies.addressing import (
    Addresser,
    bank_quantizer,
    check_addresser,
    is_local_spec,
    local_policy_path,
    resolve_addresser,
    sid_generator_for,
)
from genmem.policies.chat_local import ChatLocal
from genmem.policies.local import LocalPolicy
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator
from genmem.policies.types import AllowedMode, SIDGenerator

__all__ = [
    "AddressingConfig",
    "BankGenerators",
    "GeneratorFactory",
    "addressing_for",
    "choose_generator",
    "default_generator",
    "local_generator",
]


class AddressingConfig(Protocol):
    """What a generator factory reads from a graph's config."""

    @property
    def allowed(self) -> AllowedMode:
        """Which SIDs the addresser may produce."""
        ...

    @property
    def addresser(self) -> Addresser:
        """``auto``, ``generative`` or ``quantizer``."""
        ...


GeneratorFactory = Callable[[Bank, AddressingConfig], SIDGenerator]
"""Builds the addressing policy for a bank (called once per bank and cached)."""


class NoCodebooksWarning(UserWarning):
    """``auto`` wanted the quantizer but this machine has not seen the bank's codebooks."""


def local_generator(model: BaseChatModel, role: str) -> GeneratorFactory:
    """Constrained decoding on the same local policy the chat model runs on."""

    def make(bank: Bank, config: AddressingConfig) -> SIDGenerator:
        if not isinstance(model, ChatLocal):
            raise TypeError(
                f"{role} needs an SID generator for a non-local chat model: use the quantizer "
                "(--addresser quantizer / auto) or pass sid_generator=... (e.g. a "
                "VLLMServerSIDGenerator)"
            )
        return TransformersSIDGenerator(
            model.policy,
            bank.spec,
            bank=bank if config.allowed != "all" else None,
            config=SIDDecodingConfig(allowed=config.allowed),
        )

    return make


def choose_generator(
    bank: Bank,
    config: AddressingConfig,
    policy: LocalPolicy | None,
    generative: Callable[[], SIDGenerator],
    role: str,
) -> SIDGenerator:
    """The addresser ``config.addresser`` means for ``policy`` (None: no local one) and ``bank``.

    ``generative`` builds the policy's decoder when that is the choice.
    """
    kind = resolve_addresser(config.addresser, policy, bank)
    if kind == "generative":
        return generative()
    try:
        return bank_quantizer(bank, config.allowed)
    except CodebookError as exc:
        if config.addresser == "quantizer" or policy is None:
            raise
        warnings.warn(
            f"{exc}; {role} falls back to the untrained generative policy",
            NoCodebooksWarning,
            stacklevel=2,
        )
        return generative()


def default_generator(model: BaseChatModel, role: str) -> GeneratorFactory:
    """The addresser ``config.addresser`` names for ``model`` and each bank."""
    generative = local_generator(model, role)

    def make(bank: Bank, config: AddressingConfig) -> SIDGenerator:
        policy = model.policy if isinstance(model, ChatLocal) else None
        return choose_generator(bank, config, policy, lambda: generative(bank, config), role)

    return make


class BankGenerators:
    """One SID generator per bank and addresser, made by a factory on first use (thread-safe)."""

    def __init__(
        self,
        model: BaseChatModel,
        sid_generator: SIDGenerator | GeneratorFactory | None,
        config: AddressingConfig,
        *,
        role: str,
    ) -> None:
        """Use ``sid_generator`` as given, call it as a factory, or follow ``config.addresser``."""
        factory: GeneratorFactory
        if sid_generator is None:
            factory = default_generator(model, role)
        elif callable(sid_generator) and not isinstance(sid_generator, SIDGenerator):
            factory = sid_generator
        else:
            fixed = sid_generator
            factory = lambda bank, config: fixed  # noqa: E731
        self.factory = factory
        self.config = config
        self._generators: dict[str, SIDGenerator] = {}
        self._lock = threading.Lock()

    def __call__(
        self, bank: Bank, addresser: object = None, allowed: AllowedMode | None = None
    ) -> SIDGenerator:
        """The generator for ``bank`` (``addresser``, ``allowed``: a run's overrides of the
        config's)."""
        config = self.config
        if addresser is not None and addresser != config.addresser:
            config = dataclasses.replace(config, addresser=check_addresser(addresser))  # type: ignore[type-var]
        if allowed is not None and allowed != config.allowed:
            config = dataclasses.replace(config, allowed=allowed)  # type: ignore[type-var]
        key = f"{id(bank.store)}:{bank.bank_id}:{config.addresser}:{config.allowed}"
        with self._lock:
            if key not in self._generators:
                self._generators[key] = self.factory(bank, config)
            return self._generators[key]


def addressing_for(
    model: BaseChatModel | str, sid_model: str | None = None
) -> GeneratorFactory | None:
    """The addressing policy of the memory agents when ``model`` is their chat model.

    None (constrained decoding on the chat model itself) when ``model`` is local and no
    ``sid_model`` is named. A model with no local weights (a served or hosted chat model)
    decodes SIDs with the embedded policy, or with ``sid_model`` (``local`` or ``local:DIR``).
    Either way ``addresser`` decides per bank (``auto``: quantise unless the policy is aligned to
    the bank's codebooks).

    Raises:
        InvalidModelSpec: ``sid_model`` is not a local policy.
    """
    local_chat = isinstance(model, ChatLocal) or (isinstance(model, str) and is_local_spec(model))
    if sid_model is None and local_chat:
        return None
    spec = sid_model or "local"
    if not is_local_spec(spec):
        raise InvalidModelSpec(f"--sid-model {spec!r}: use local or local:DIR (a policy directory)")

    def make(bank: Bank, config: AddressingConfig) -> SIDGenerator:
        # what the quantizer would do anyway is decided without loading the policy's weights
        if config.addresser == "quantizer" or (
            config.addresser == "auto" and not _aligned_on_disk(spec, bank)
        ):
            try:
                return bank_quantizer(bank, config.allowed)
            except CodebookError:
                if config.addresser == "quantizer":
                    raise
                # auto without the codebooks here: choose_generator warns and uses the policy
        policy = sid_generator_for(spec, bank, allowed=config.allowed)
        local = getattr(policy, "policy", None)
        return choose_generator(bank, config, local, lambda: policy, "MemRetriever")

    return make


def _aligned_on_disk(spec: str, bank: Bank) -> bool:
    """Whether the local policy ``spec`` names records an alignment to ``bank``'s codebooks.

    Read from the policy directory's record, without loading weights; the embedded models ship
    unaligned.
    """
    from pathlib import Path

    from genmem.policies.policy_dir import read_info

    path = local_policy_path(spec)
    if path is None or not Path(path).is_dir():
        return False
    directory = Path(path)
    alignment = read_info(directory).alignment
    return alignment is not None and alignment.codebook_hash == bank.codebook_hash
