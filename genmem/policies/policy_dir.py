"""What a policy directory records about itself, and where converted models are cached.

A policy directory is a transformers causal-LM directory with ``genmem_policy.json`` beside the
weights: the base model, the SID vocabulary its tokenizer holds, and whether (and on which
codebooks) its SID tokens were aligned.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from genmem.errors import InvalidModelSpec

__all__ = ["POLICY_FILE", "Alignment", "PolicyInfo", "cache_root", "read_info", "write_info"]

POLICY_FILE = "genmem_policy.json"
"""File in a policy directory that records its SID vocabulary and where it came from."""


class Alignment(BaseModel):
    """Which bank and codebooks a policy's SID tokens were aligned to, and how well."""

    bank_id: str
    codebook_hash: str = Field(description="The codebooks whose addresses the policy learnt.")
    steps: int = Field(ge=0, description="Optimiser steps of the alignment run.")
    examples: int = Field(ge=0, description="Training examples in its mix.")
    heldout: dict[str, Any] = Field(
        default_factory=dict, description="Held-out prefix accuracy after training (by k)."
    )
    at: float = Field(description="When it finished (Unix time).")


class PolicyInfo(BaseModel):
    """What ``genmem_policy.json`` records about a policy directory."""

    base_model: str = Field(description="Model the weights started from.")
    sid_sizes: list[int] | None = Field(
        default=None, description="Codebook sizes whose SID tokens the tokenizer holds."
    )
    sid_token_init: str | None = Field(
        default=None, description="How the SID token embeddings were initialised."
    )
    codebook_hash: str | None = Field(
        default=None, description="Hash of the codebooks the policy was trained against."
    )
    alignment: Alignment | None = Field(
        default=None,
        description="Set by SID alignment (genmem train align); None: the SID tokens are "
        "untrained, so ``--addresser auto`` quantises instead of generating.",
    )
    notes: dict[str, Any] = Field(default_factory=dict)


def cache_root() -> Path:
    """Where converted models are cached: ``$GENMEM_CACHE`` or ``~/.cache/genmem``."""
    return Path(os.environ.get("GENMEM_CACHE") or Path.home() / ".cache" / "genmem")


def write_info(directory: Path, info: PolicyInfo) -> None:
    """Write ``genmem_policy.json`` into ``directory``."""
    (directory / POLICY_FILE).write_text(info.model_dump_json(indent=2) + "\n", encoding="utf-8")


def read_info(directory: Path) -> PolicyInfo:
    """``genmem_policy.json`` of ``directory`` (a bare model directory: its name as base model).

    Raises:
        InvalidModelSpec: the file is not UTF-8 JSON of a policy's record.
    """
    path = directory / POLICY_FILE
    if not path.is_file():
        return PolicyInfo(base_model=directory.name)
    try:
        return PolicyInfo.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
        where = ".".join(str(x) for x in first["loc"]) or "the file"
        raise InvalidModelSpec(
            f"{path} is not a policy record ({where}: {first['msg']}); restore it, or delete it "
            "to use the directory as a bare model"
        ) from None
