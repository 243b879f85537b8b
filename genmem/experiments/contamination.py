"""Whether a bank already holds the tasks it is about to be evaluated on.

A seed or cold-start entry records where it came from (``metadata["sources"]``: the question or
query of each experience merged into it). A bank built from a bench's own tasks would hand the
agent its answers' lessons: an evaluation refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from genmem.errors import BankHoldsTasks
from genmem.memory.build import source_query

__all__ = ["check_bank_is_clean", "tasks_in_bank"]

_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def _source_texts(bank: Any) -> set[str]:
    found = (source_query(s) for e in bank.entries() for s in (e.metadata or {}).get("sources", []))
    return {_norm(text) for text in found if text}


def tasks_in_bank(bank: Any, tasks: Iterable[Any]) -> list[str]:
    """Ids of ``tasks`` whose query is the source question of an entry of ``bank``."""
    sources = _source_texts(bank)
    return [t.id for t in tasks if _norm(t.query) in sources]


def check_bank_is_clean(bank: Any, tasks: list[Any]) -> None:
    """Raise :class:`BankHoldsTasks` when ``bank`` was built from any of ``tasks``."""
    found = tasks_in_bank(bank, tasks)
    if found:
        shown = ", ".join(found[:5]) + (" ..." if len(found) > 5 else "")
        raise BankHoldsTasks(
            f"the bank {bank.bank_id!r} was built from {len(found)} of the {len(tasks)} tasks "
            f"({shown}): its entries would hand the agent lessons from the very questions it is "
            "scored on; evaluate on other tasks, or build the bank from other ones",
            task_ids=found,
        )
