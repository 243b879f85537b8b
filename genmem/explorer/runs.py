"""Evolution run folders for the explorer: which runs a folder holds, their plots and summary.

A run folder is what ``genmem evolve --out DIR`` writes: ``summary.md``, ``summary.json`` and
PNG plots beside the records. ``--runs DIR`` may name one run or a folder of runs (one level
down, e.g. one per decoding seed). Only files directly inside a run folder are ever served, and
only by a name this module listed, so a request cannot reach any other file.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from genmem.errors import GenMemError

__all__ = ["MAX_SUMMARY_CHARS", "Run", "find_runs", "run_file"]

MAX_SUMMARY_CHARS = 200_000
"""Longest summary text shown; a longer one is cut with a note."""


class Run(BaseModel):
    """One evolution run folder as the explorer shows it."""

    name: str = Field(description="Folder name relative to --runs ('.' for --runs itself).")
    path: str = Field(description="Absolute folder path.")
    plots: list[str] = Field(description="PNG file names in the folder, sorted.")
    summary_md: str | None = Field(description="summary.md text, if present.")
    summary: dict | None = Field(description="summary.json, if present and valid JSON.")


def _is_run(folder: Path) -> bool:
    return (folder / "summary.md").is_file() or any(folder.glob("*.png"))


def _read_run(name: str, folder: Path) -> Run:
    md = folder / "summary.md"
    text = md.read_text(encoding="utf-8", errors="replace") if md.is_file() else None
    if text is not None and len(text) > MAX_SUMMARY_CHARS:
        text = text[:MAX_SUMMARY_CHARS] + f"\n[cut at {MAX_SUMMARY_CHARS} characters]"
    summary = None
    js = folder / "summary.json"
    if js.is_file():
        try:
            loaded = json.loads(js.read_text(encoding="utf-8"))
            summary = loaded if isinstance(loaded, dict) else None
        except (ValueError, UnicodeDecodeError):
            summary = None
    plots = sorted(p.name for p in folder.glob("*.png") if p.is_file())
    return Run(name=name, path=str(folder), plots=plots, summary_md=text, summary=summary)


def find_runs(root: str | Path) -> list[Run]:
    """The run in ``root`` and the runs one level below it, by name (GenMemError if no folder)."""
    base = Path(root).resolve()
    if not base.is_dir():
        raise GenMemError(f"--runs {str(root)!r} is not a folder; pass a `genmem evolve --out` DIR")
    runs = [_read_run(".", base)] if _is_run(base) else []
    for child in sorted(p for p in base.iterdir() if p.is_dir()):
        if _is_run(child):
            runs.append(_read_run(child.name, child))
    return runs


def run_file(runs: list[Run], name: str, file: str) -> Path | None:
    """The path of plot ``file`` of run ``name`` if both were listed, else None."""
    for run in runs:
        if run.name == name and file in run.plots:
            return Path(run.path) / file
    return None
