"""Data files shipped inside the package (copied from public benchmarks, licenses kept)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_DIR",
    "GSM8K_TRAIN",
    "append_jsonl",
    "gsm8k_seed_experiences",
    "jsonl_rows",
    "read_gsm8k",
    "read_jsonl",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
GSM8K_TRAIN = DATA_DIR / "gsm8k" / "train.jsonl"
"""GSM8K training split, 7,473 problems (MIT, see data/gsm8k/LICENSE)."""

_CALC = re.compile(r"<<[^>]*>>")


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` for each non-blank line of a JSONL file.

    Raises:
        ValueError: a line that is not a JSON object, named as ``path:line``.
    """
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not a JSON line ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            yield n, row


def jsonl_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every object of a JSONL file written as a run goes (none when it does not exist yet)."""
    path = Path(path)
    return [row for _, row in read_jsonl(path)] if path.exists() else []


def append_jsonl(path: str | Path, obj: Any) -> None:
    """Append one object (a pydantic model or a JSON-able value) as a line of ``path``."""
    line = obj.model_dump_json() if hasattr(obj, "model_dump_json") else json.dumps(obj)
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def read_gsm8k(path: Path = GSM8K_TRAIN, limit: int | None = None) -> list[dict[str, Any]]:
    """GSM8K records ``{"question", "answer"}`` in file order.

    Raises:
        ValueError: a line without a question string and an answer ending ``#### <number>``,
            named as ``path:line``.
    """
    rows = []
    for n, row in read_jsonl(path):
        if limit is not None and len(rows) >= limit:
            break
        question, answer = row.get("question"), row.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{path}:{n}: needs a non-empty 'question' string")
        if not isinstance(answer, str) or "####" not in answer:
            raise ValueError(f"{path}:{n}: needs an 'answer' string ending '#### <number>'")
        rows.append(row)
    return rows


def gsm8k_seed_experiences(limit: int | None = None) -> list[dict[str, Any]]:
    """Worked GSM8K solutions as seed experience records ``{"text", "source", "index"}``.

    Until the cold-start pipeline distils experiences from agent trajectories, a solved
    problem with its reasoning steps is the closest real stand-in for an experience.
    """
    out = []
    for i, row in enumerate(read_gsm8k(limit=limit)):
        steps, _, final = row["answer"].partition("####")
        steps = _CALC.sub("", steps).strip()
        text = (
            f"Problem: {row['question'].strip()}\n"
            f"Worked solution: {steps}\n"
            f"Final answer: {final.strip()}"
        )
        out.append({"text": text, "source": "gsm8k-train", "index": i})
    return out
