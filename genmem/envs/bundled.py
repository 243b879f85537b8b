"""Data files shipped inside the package (copied from public benchmarks, licenses kept)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["DATA_DIR", "GSM8K_TRAIN", "gsm8k_seed_experiences", "read_gsm8k"]

DATA_DIR = Path(__file__).resolve().parent / "data"
GSM8K_TRAIN = DATA_DIR / "gsm8k" / "train.jsonl"
"""GSM8K training split, 7,473 problems (MIT, see data/gsm8k/LICENSE)."""

_CALC = re.compile(r"<<[^>]*>>")


def read_gsm8k(path: Path = GSM8K_TRAIN, limit: int | None = None) -> list[dict[str, Any]]:
    """GSM8K records ``{"question", "answer"}`` in file order."""
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
                if limit is not None and len(rows) >= limit:
                    break
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
