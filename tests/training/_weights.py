"""What the end-to-end training tests check of a saved policy: that its weights moved."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def assert_trained(trained_dir: Path, bank: Any) -> None:
    """Every parameter tensor of the saved policy differs from the start, SID embeddings included.

    The start is what a stage trains from when ``--model`` is the embedded default: the embedded
    model with ``bank``'s SID tokens added (their initialisation is deterministic). Training is
    full fine-tuning, so every tensor that gets a gradient must move.
    """
    from genmem.policies.local import load_policy
    from genmem.policies.sid_tokens import sid_token_ids
    from genmem.training.policy_io import load_trainable

    start = dict(load_trainable(None, bank).model.named_parameters())
    trained = load_policy(trained_dir, fresh=True, dtype="float32")
    params = dict(trained.model.named_parameters())
    assert params.keys() == start.keys()
    moved = {name: (p.detach() - start[name].detach()).abs() for name, p in params.items()}
    still = [name for name, diff in moved.items() if not bool(diff.max() > 0)]
    assert not still, f"{len(still)} of {len(moved)} parameter tensors did not move: {still[:5]}"
    rows = [i for level in sid_token_ids(trained.tokenizer, bank.spec) for i in level]
    embedding = next(d for name, d in moved.items() if name.endswith("embed_tokens.weight"))
    assert bool(embedding[rows].max() > 0), "no SID token embedding moved"
