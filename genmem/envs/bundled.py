"""Data files shipped inside the package (copied from public benchmarks, licenses kept)."""

from __future__ import annotations

import json
import os
import re
import threading
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "COOKING_CODEBOOKS",
    "DATA_DIR",
    "GSM8K_TRAIN",
    "append_jsonl",
    "gsm8k_seed_experiences",
    "jsonl_rows",
    "read_gsm8k",
    "read_jsonl",
    "replace_jsonl",
    "replace_text",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
GSM8K_TRAIN = DATA_DIR / "gsm8k" / "train.jsonl"
"""GSM8K training split, 7,473 problems (MIT, see data/gsm8k/LICENSE)."""
COOKING_CODEBOOKS = DATA_DIR / "cooking" / "codebook"
"""Frozen codebooks fitted on 48 cooking-train procedures (see data/cooking/README.md)."""

_CALC = re.compile(r"<<[^>]*>>")
_CHUNK = 1 << 16  # bytes read per step when looking back for the last newline
_APPEND = threading.Lock()  # threads of one run (--concurrency) take turns at every file


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` for each non-blank line of a JSONL data file.

    Raises:
        ValueError: a line that is not UTF-8 text or not a JSON object, named as ``path:line``
            (the last line too: input data is never cut short on purpose).
    """
    path = Path(path)
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            row = _parse_line(path, n, raw)
            if row is not None:
                yield n, row


def _parse_line(path: Path, n: int, raw: bytes) -> dict[str, Any] | None:
    """The object on line ``n`` (None for a blank line); ValueError names ``path:n``."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}:{n}: not UTF-8 text ({exc.reason})") from None
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{n}: not a JSON line ({exc.msg})") from None
    if not isinstance(row, dict):
        raise ValueError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
    return row


def jsonl_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every object of a JSONL file written as a run goes (none when it does not exist yet).

    A line counts once its newline is written. :func:`append_jsonl` writes both in one call, so
    a run killed mid-write leaves at most a last line without one: that line is dropped with a
    ``RuntimeWarning`` naming ``path:line`` (its item runs again on resume, and the next append
    cuts it away). Any other bad line raises ValueError naming ``path:line``.
    """
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    lines, torn = data[:end].split(b"\n")[:-1], data[end:]
    if torn.strip():
        warnings.warn(
            f"{path}:{len(lines) + 1}: dropped a torn last line (no newline: the run was "
            "stopped while writing it); its item runs again",
            RuntimeWarning,
            stacklevel=2,
        )
    rows = (_parse_line(path, n, raw) for n, raw in enumerate(lines, 1))
    return [row for row in rows if row is not None]


def append_jsonl(path: str | Path, obj: Any) -> None:
    """Append one object (a pydantic model or a JSON-able value) as a line of ``path``.

    A torn last line (see :func:`jsonl_rows`) is cut away first. Cutting, rather than starting
    a new line after it, keeps the fragment from becoming a bad line in the middle of the file,
    which a later read must refuse; it held no record, since readers never count it. One
    process per file; its threads take turns.
    """
    line = _line(obj)
    with _APPEND, Path(path).open("a+b") as fh:
        _cut_torn_tail(fh)
        fh.write(line)


def _line(obj: Any) -> bytes:
    """One JSONL line (a pydantic model or a JSON-able value), newline included."""
    text = obj.model_dump_json() if hasattr(obj, "model_dump_json") else json.dumps(obj)
    return (text + "\n").encode("utf-8")


def replace_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a kill leaves the old
    file or the new one, never part of it."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def replace_jsonl(path: str | Path, objs: Iterable[Any]) -> None:
    """Rewrite ``path`` with ``objs``, one per line, so that a kill leaves the old or the new file.

    The lines go to a temporary file beside ``path`` that is flushed to disk and then renamed
    over it (``os.replace`` is atomic on one filesystem); a run stopped at any point keeps every
    record it had.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            for obj in objs:
                fh.write(_line(obj))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _cut_torn_tail(fh: BinaryIO) -> None:
    """Truncate an append-mode file after its last newline, if it does not end with one."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return
    pos = end
    while pos > 0:
        start = max(0, pos - _CHUNK)
        fh.seek(start)
        newline = fh.read(pos - start).rfind(b"\n")
        if newline >= 0:
            fh.truncate(start + newline + 1)
            return
        pos = start
    fh.truncate(0)


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
