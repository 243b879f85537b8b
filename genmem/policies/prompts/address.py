"""Prompts of SID addressing: the instruction an addressing policy decodes an SID under, and
the context an experience is addressed from.

Stage-1 alignment (:mod:`genmem.training.align_data`) trains on exactly these, so what is trained
is what is decoded; the other contexts are MemRetriever's and MemEvolver's user turns
(:mod:`genmem.policies.prompts.memory_agents`).
"""

from __future__ import annotations

from genmem.memory.data_block import escape_data

__all__ = ["ADDRESS_PROMPT", "experience_user_message"]

ADDRESS_PROMPT = (
    "Reply with only the memory address (SID: one code per level, coarse to fine) of the "
    "stored experience that best helps with this context."
)
"""The system turn before the context when a policy decodes an SID."""


def experience_user_message(payload: str) -> str:
    """The context an experience is addressed from (the experience -> SID mapping).

    The payload is escaped (:func:`escape_data`) but not wrapped, so an ordinary entry reads as
    it did when the aligned policies were trained; a tag or template token in it is inert."""
    return f"Experience:\n{escape_data(payload)}"
