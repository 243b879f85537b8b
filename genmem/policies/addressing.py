"""Which addresser chooses an SID: an aligned generative policy, or the frozen quantizer.

The paper's MemRetriever *generates* SIDs, but only a policy aligned to a bank's codebooks
(stage-1 SID alignment, ``genmem train align``) knows what its SID tokens mean. Freshly added
SID tokens make an untrained model's address arbitrary among the allowed slots. So the default,
``auto``, generates with a policy aligned to these codebooks and otherwise quantises: encode
the text with the codebooks' own encoder and quantise it with the frozen codebooks (the
paper's cold-start path, :class:`~genmem.policies.quantizer.QuantizerAddresser`).
``generative`` and ``quantizer`` force one or the other. Every output that shows an SID says
which addresser chose it.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Literal, get_args

from genmem.errors import CodebookError, InvalidModelSpec

if TYPE_CHECKING:
    from genmem.memory.bank import Bank
    from genmem.memory.rqkmeans import Codebooks
    from genmem.policies.local import LocalPolicy
    from genmem.policies.quantizer import QuantizerAddresser
    from genmem.policies.types import AllowedMode, SIDGenerator

__all__ = [
    "ADDRESSERS",
    "Addresser",
    "AddresserKind",
    "addresser_name",
    "bank_codebooks",
    "bank_quantizer",
    "check_addresser",
    "is_aligned",
    "is_local_spec",
    "local_policy_path",
    "resolve_addresser",
    "sid_generator_for",
]

Addresser = Literal["auto", "generative", "quantizer"]
"""What a user asks for (``--addresser``); ``auto`` picks by the policy's alignment."""
AddresserKind = Literal["generative", "quantizer"]
"""What actually addressed a query."""
ADDRESSERS: tuple[Addresser, ...] = get_args(Addresser)


class UnalignedPolicyWarning(UserWarning):
    """A generative addresser runs on a policy that was never aligned to the bank's codebooks."""


def check_addresser(value: object) -> Addresser:
    """``value`` as an :data:`Addresser`; ValueError names the choices."""
    if value not in ADDRESSERS:
        raise ValueError(f"addresser={value!r}: use one of {', '.join(ADDRESSERS)}")
    return value  # type: ignore[return-value]


def is_aligned(policy: LocalPolicy | None, bank: Bank) -> bool:
    """Whether ``policy`` was SID-aligned against ``bank``'s codebooks."""
    alignment = None if policy is None else policy.info.alignment
    return alignment is not None and alignment.codebook_hash == bank.codebook_hash


def bank_codebooks(bank: Bank) -> Codebooks:
    """The codebooks ``bank`` was built with, found by hash on this machine."""
    from genmem.memory.codebook_registry import registry_root
    from genmem.memory.rqkmeans import Codebooks

    codebooks = Codebooks.recall(bank.codebook_hash)
    if codebooks is None:
        raise CodebookError(
            f"bank {bank.bank_id!r} was built with codebooks {bank.codebook_hash[:12]}, which "
            f"this machine has not seen (looked in {registry_root()}); load them once "
            "(e.g. `genmem codebook stats --codebook DIR`, or pass --codebook DIR) or use "
            "--addresser generative with an aligned policy"
        )
    return codebooks


def bank_quantizer(bank: Bank, allowed: AllowedMode = "all") -> QuantizerAddresser:
    """The quantizer on ``bank``'s own codebooks (found by hash), restricted by ``allowed``."""
    from genmem.policies.quantizer import QuantizerAddresser

    return QuantizerAddresser(
        bank_codebooks(bank), bank=bank if allowed != "all" else None, allowed=allowed
    )


def resolve_addresser(choice: Addresser, policy: LocalPolicy | None, bank: Bank) -> AddresserKind:
    """The addresser ``choice`` means for ``policy`` (None: not a local model) and ``bank``."""
    check_addresser(choice)
    if choice == "quantizer":
        return "quantizer"
    if choice == "generative":
        if policy is not None and not is_aligned(policy, bank):
            warnings.warn(
                "--addresser generative with a policy never aligned to the bank's codebooks "
                f"({bank.codebook_hash[:12]}): its SIDs are arbitrary among the allowed slots; "
                "align it first (genmem train align) or use --addresser auto",
                UnalignedPolicyWarning,
                stacklevel=2,
            )
        return "generative"
    return "generative" if is_aligned(policy, bank) else "quantizer"


def addresser_name(generator: object) -> str:
    """``generative``, ``quantizer`` or (a caller's own generator) ``custom``."""
    return str(getattr(generator, "addresser", "custom"))


def is_local_spec(spec: str) -> bool:
    """Whether a model spec names local weights (``local``, ``default`` or ``local:DIR``)."""
    return spec.strip() in ("local", "default") or spec.startswith("local:")


def local_policy_path(spec: str) -> str | None:
    """What a local spec names for ``load_policy``: None for the embedded default (``local``,
    ``default``), else the directory or embedded name after ``local:``."""
    return None if spec in ("local", "default") else spec.removeprefix("local:")


def sid_generator_for(
    spec: str,
    bank: Bank,
    *,
    allowed: AllowedMode = "all",
    codebook: str | None = None,
    tokenizer: str | None = None,
) -> SIDGenerator:
    """The SID generator a model spec names, for ``bank``.

    Args:
        spec: ``local`` / ``default`` (the embedded policy), ``local:DIR`` (a policy directory),
            ``vllm:<url>#<name>`` (a served policy) or ``quantizer`` (the frozen codebooks).
        bank: The bank whose SID space the generator addresses.
        allowed: Which SIDs may come out: ``all``, ``occupied`` or ``prefix`` (local only).
        codebook: The codebooks' directory; needed by ``quantizer``.
        tokenizer: A tokenizer directory whose chat template builds a vLLM policy's prompts.

    Raises:
        InvalidModelSpec: a spec that cannot address this way (what is missing is named).
        CodebookMismatch: ``codebook`` is not the bank's.
    """
    if spec == "quantizer":
        if not codebook:
            raise InvalidModelSpec(
                "the quantizer needs --codebook DIR (library: codebook=DIR), the bank's codebooks"
            )
        from genmem.memory.rqkmeans import Codebooks
        from genmem.policies.quantizer import QuantizerAddresser

        codebooks = Codebooks.load(codebook)
        bank.check_codebook(codebooks)
        return QuantizerAddresser(codebooks, bank=bank, allowed=allowed)
    if spec.startswith("vllm:"):
        if allowed != "all":
            raise InvalidModelSpec(f"--allowed {allowed} needs a local policy; vLLM decodes 'all'")
        if not tokenizer:
            raise InvalidModelSpec(
                "a vllm:... policy needs --tokenizer DIR (library: tokenizer=DIR) for its chat "
                "template"
            )
        from transformers import AutoTokenizer

        from genmem.policies.sid_decoding import address_prompt
        from genmem.policies.vllm_sid import VLLMServerSIDGenerator

        tok = AutoTokenizer.from_pretrained(tokenizer)
        return VLLMServerSIDGenerator.from_spec(
            spec, spec=bank.spec, prompt_builder=lambda text: address_prompt(tok, text)
        )
    from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator

    return TransformersSIDGenerator.load(
        local_policy_path(spec), bank=bank, config=SIDDecodingConfig(allowed=allowed)
    )
