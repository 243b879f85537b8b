"""GSM8K: grade-school math word problems, the gold number after ``####``, numeric scoring."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from genmem.envs.bundled import DATA_DIR, read_gsm8k

__all__ = [
    "GSM8K_TEST",
    "extract_number",
    "gold_number",
    "gsm8k_queries",
    "score_gsm8k",
]

GSM8K_TEST = DATA_DIR / "gsm8k" / "test.jsonl"
"""GSM8K test split, 1,319 problems (MIT, see data/gsm8k/LICENSE)."""

_NUMBER = re.compile(r"-?\$?\s?\d[\d,]*(?:\.\d+)?")


def gold_number(answer: str) -> str:
    """The gold number of a GSM8K reference solution (what follows ``####``), commas removed."""
    if "####" not in answer:
        raise ValueError("a GSM8K answer ends with '#### <number>'; this one has no '####'")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _to_decimal(text: str) -> Decimal | None:
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_number(text: str | None) -> str | None:
    """The number an answer states: the last number in it (commas and ``$`` removed)."""
    if not text:
        return None
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = _to_decimal(found[-1])
    return None if value is None else format(value.normalize(), "f")


def score_gsm8k(answer: str | None, gold: Any) -> float:
    """1.0 when the answer's number equals the gold number (numerically), else 0.0."""
    predicted = extract_number(answer)
    target = _to_decimal(str(gold))
    if predicted is None or target is None:
        return 0.0
    return 1.0 if Decimal(predicted) == target else 0.0


def gsm8k_queries(
    path: Path = GSM8K_TEST, limit: int | None = None, offset: int = 0
) -> list[dict[str, Any]]:
    """GSM8K problems as queries ``{"id", "query", "reference"}`` (reference = gold number)."""
    rows = read_gsm8k(path, limit=None if limit is None else offset + limit)[offset:]
    return [
        {
            "id": f"{path.stem}-{offset + i}",
            "query": r["question"],
            "reference": gold_number(r["answer"]),
        }
        for i, r in enumerate(rows)
    ]
