"""Pieces the closed loop and ``add_memory`` share: modes, and reading a MemRetriever run."""

from __future__ import annotations

from typing import Any, Literal, get_args

__all__ = ["MODES", "Mode", "check_mode", "retrieval_update"]

Mode = Literal["evolve", "read_only", "no_memory"]
"""``evolve``: retrieve, act, write; ``read_only``: retrieve and act; ``no_memory``: act only."""
MODES: tuple[str, ...] = get_args(Mode)


def check_mode(value: Any) -> Mode:
    """The run's mode (empty means ``evolve``); anything else raises ValueError."""
    mode = value or "evolve"
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    return mode  # type: ignore[no-any-return]


def retrieval_update(out: dict[str, Any]) -> dict[str, Any]:
    """The state update and event for a finished MemRetriever run."""
    hits = out.get("retrieved", [])
    event = {
        "node": "mem_retriever",
        "kind": "retrieved" if hits else "nothing_retrieved",
        "sid": out.get("sid"),
        "addresser": out.get("addresser"),
        "hits": [h.get("sid") for h in hits],
        "support_source": out.get("support_source"),
        "support_refused": out.get("support_refused"),
    }
    return {
        "sid": out.get("sid"),
        "addresser": out.get("addresser"),
        "candidates": [c.get("sid") for c in out.get("candidates", [])],
        "ranked": list(out.get("ranked", [])),
        "retrieved": hits,
        "support": out.get("support"),
        "support_source": out.get("support_source"),
        "support_refused": out.get("support_refused"),
        "events": [event],
    }
