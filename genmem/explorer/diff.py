"""Differences between two payload versions, word by word, as segments a template can mark up.

Payloads are paragraphs, so a line diff would mark the whole text changed; :func:`word_diff`
compares words (whitespace kept with the word before it) with :mod:`difflib` and returns
``(kind, text)`` segments, ``kind`` one of ``same``, ``added``, ``removed``. The text stays
plain: the template escapes it.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import BaseModel

__all__ = ["DiffSegment", "diff_stats", "unified_diff", "word_diff"]

_WORD = re.compile(r"\S+\s*|\s+")


class DiffSegment(BaseModel):
    """A run of text that both versions share, or that one of them adds or drops."""

    kind: Literal["same", "added", "removed"]
    text: str


def word_diff(old: str, new: str) -> list[DiffSegment]:
    """Segments that turn ``old`` into ``new`` (removed text before the text replacing it)."""
    a, b = _WORD.findall(old), _WORD.findall(new)
    out: list[DiffSegment] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.append(DiffSegment(kind="same", text="".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(DiffSegment(kind="removed", text="".join(a[i1:i2])))
        if j2 > j1:
            out.append(DiffSegment(kind="added", text="".join(b[j1:j2])))
    return out


def diff_stats(segments: list[DiffSegment]) -> dict[str, int]:
    """Words added and removed."""
    count = {"added": 0, "removed": 0}
    for s in segments:
        if s.kind in count:
            count[s.kind] += len(s.text.split())
    return count


def unified_diff(old: str, new: str, old_label: str, new_label: str) -> str:
    """A unified line diff, for the JSON API and terminals."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=old_label,
            tofile=new_label,
        )
    )
