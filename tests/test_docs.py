"""The documentation cannot go stale: its examples run, its CLI page matches the parser, its
links resolve.

- Every fenced ```python block of README.md and docs/*.md runs; the blocks of one file run in
  order in one shared namespace, in a temporary working directory. A block fenced
  ```python no-run needs what a test machine lacks (a running ``langgraph dev`` server, a GPU,
  vLLM, a network) and is only compiled.
- docs/cli.md equals :func:`genmem.cli.reference.cli_reference`.
- Every relative link of those files names a file of the repository (anchors are not checked).
- The docstring examples (``>>>``) of the package run through :mod:`doctest`.
"""

from __future__ import annotations

import doctest
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from genmem.cli.reference import cli_reference

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LOADS_MODEL = frozenset({"README.md", "docs/library.md"})
"""Files whose examples run the embedded chat model (marked slow)."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(?P<target>\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, the words after it, where it starts, its text."""

    language: str
    flags: tuple[str, ...]
    line: int
    code: str


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def code_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, their indentation (inside list items) removed."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        words = match["info"].split()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1  # the closing fence
        language = words[0] if words else ""
        blocks.append(Block(language, tuple(words[1:]), start + 1, "\n".join(body) + "\n"))
    return blocks


def _python_blocks(path: Path) -> list[Block]:
    return [b for b in code_blocks(path.read_text()) if b.language == "python"]


def _example_params() -> list[object]:
    params = []
    for path in DOC_FILES:
        if any("no-run" not in b.flags for b in _python_blocks(path)):
            marks = [pytest.mark.slow] if _name(path) in LOADS_MODEL else []
            params.append(pytest.param(path, id=_name(path), marks=marks))
    return params


@pytest.mark.parametrize("path", _example_params())
def test_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file's ```python blocks, in order, in one namespace, in a fresh working directory."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in _python_blocks(path):
        where = f"{_name(path)}, block at line {block.line}"
        compiled = compile(block.code, where, "exec")
        if "no-run" in block.flags:
            continue
        try:
            exec(compiled, namespace)
        except Exception as exc:
            raise AssertionError(f"the example in {where} raised {exc!r}") from exc


def test_no_run_blocks_compile() -> None:
    """Blocks that need a server or a GPU are not run, but they must still be Python."""
    for path in DOC_FILES:
        for block in _python_blocks(path):
            if "no-run" in block.flags:
                compile(block.code, f"{_name(path)}, block at line {block.line}", "exec")


def test_cli_page_matches_parser() -> None:
    page = ROOT / "docs" / "cli.md"
    assert page.read_text() == cli_reference(), (
        "docs/cli.md differs from the parser; regenerate it with "
        "`python -m genmem.cli.reference > docs/cli.md`"
    )


def _links(text: str) -> list[str]:
    # Code blocks and inline code hold example text, not links.
    text = re.sub(r"^([ \t]*)(`{3,}|~{3,}).*?^\1\2[ \t]*$", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    found = [m["target"] for m in _LINK.finditer(text)]
    return found + [m["target"] for m in _REFERENCE_LINK.finditer(text)]


@pytest.mark.parametrize("path", DOC_FILES, ids=_name)
def test_relative_links_resolve(path: Path) -> None:
    missing = []
    for target in _links(path.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor on the same page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            missing.append(target)
    assert not missing, f"{_name(path)} links to files that do not exist: {missing}"


def _modules_with_doctests() -> list[str]:
    package = ROOT / "genmem"
    return sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in package.rglob("*.py")
        if ">>> " in p.read_text()
    )


@pytest.mark.parametrize("module", _modules_with_doctests())
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} mentions '>>> ' but has no doctest"
    assert result.failed == 0, f"{result.failed} docstring example(s) of {module} failed"
