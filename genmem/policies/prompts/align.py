"""Prompts of stage-1 alignment (:mod:`genmem.training.align_data`) that SID decoding does not
share: the reverse mappings (SID -> experience, SID -> description) and the model that writes
an entry's one-line description.

The forward mappings (text -> SID) use :data:`genmem.policies.prompts.address.ADDRESS_PROMPT`,
the prompt SID decoding uses at inference.
"""

from __future__ import annotations

__all__ = ["DESCRIBER_PROMPT", "SID_DESCRIPTION_PROMPT", "SID_EXPERIENCE_PROMPT"]

SID_EXPERIENCE_PROMPT = (
    "You are given a memory address (an SID: one code per level, coarse to fine). Write the "
    "experience stored at that address."
)
"""The system turn of the ``sid_experience`` mapping (the SID is the user turn)."""

SID_DESCRIPTION_PROMPT = (
    "You are given a memory address (an SID: one code per level, coarse to fine). Say in one "
    "short sentence what kind of experience is stored there."
)
"""The system turn of the ``sid_description`` mapping (the SID is the user turn)."""

DESCRIBER_PROMPT = (
    "You label entries of an agent's experience memory. Reply with one line of at most 20 "
    "words naming the kind of task the experience below helps with. No preamble."
)
"""The system turn of :func:`genmem.training.align_data.model_describer` (the payload, clipped,
is the user turn)."""
