"""The command-line reference in Markdown, rendered from the ``genmem`` parser itself.

``python -m genmem.cli.reference > docs/cli.md`` regenerates ``docs/cli.md``; a test checks that
the committed page equals :func:`cli_reference`, so the page cannot drift from the parser. The
text is laid out here, not by argparse's help formatter, whose wrapping follows the terminal
width and whose layout changes between Python versions: the output depends only on the parser.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from genmem.cli.main import build_parser

__all__ = ["WIDTH", "cli_reference"]

WIDTH = 100
"""Column at which usage lines and prose are wrapped."""

_HEADER = """\
# Command-line reference

<!-- Generated from the parser by `python -m genmem.cli.reference > docs/cli.md`; do not edit.
tests/test_docs.py checks that this file matches the parser. -->

Every command below also takes `-h` / `--help`. What the flags shared by several commands mean,
the exit codes and worked examples are in [the command-line guide](command-line.md).
"""


def cli_reference() -> str:
    """Markdown for every ``genmem`` command and sub-command: usage, description, options."""
    root, *commands = _walk(build_parser(), summary=None)
    lines = [_HEADER, *_section(*root, list_subcommands=False), "## Commands", ""]
    for name, summary, _ in commands:
        item = f"- [`{name}`](#{_anchor(name)})" + (f": {_escape(summary)}" if summary else "")
        lines += _wrap(item, indent="  ")
    lines.append("")
    for command in commands:
        lines += _section(*command)
    return "\n".join(lines).rstrip("\n") + "\n"


def _walk(
    parser: argparse.ArgumentParser, summary: str | None
) -> Iterator[tuple[str, str | None, argparse.ArgumentParser]]:
    """``(prog, one-line help, parser)`` for a parser and, depth first, its sub-commands."""
    yield parser.prog, summary, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield from _walk(sub, helps.get(name))


def _section(
    name: str,
    summary: str | None,
    parser: argparse.ArgumentParser,
    *,
    list_subcommands: bool = True,
) -> list[str]:
    """One command's heading, summary, usage, description, sub-commands and options."""
    lines = [f"## `{name}`", ""]
    if summary:
        lines += [*_wrap(_escape(_sentence(summary))), ""]
    lines += ["```text", *_usage(parser), "```", ""]
    if parser.description:
        lines += [*_wrap(_escape(_description(parser))), ""]
    subs = _subcommands(parser) if list_subcommands else []
    if subs:
        lines += ["Sub-commands:", ""]
        for sub_name, sub_help in subs:
            full = f"{parser.prog} {sub_name}"
            item = f"- [`{full}`](#{_anchor(full)})" + (
                f": {_escape(sub_help)}" if sub_help else ""
            )
            lines += _wrap(item, indent="  ")
        lines.append("")
    options = [a for a in _visible(parser) if not isinstance(a, argparse._SubParsersAction)]
    if options:
        lines += ["Options:", ""]
        for action in options:
            lines += _wrap(_option_item(action, parser), indent="  ")
        lines.append("")
    return lines


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments a user is meant to see (no ``--help``, nothing suppressed)."""
    return [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
    ]


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    """``(name, one-line help)`` of each sub-command of ``parser``, in registration order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            return [(name, helps.get(name)) for name in action.choices]
    return []


def _metavar(action: argparse.Action) -> str:
    """What follows the flag in usage: ``URL``, ``{a,b}`` or nothing for a switch."""
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        base = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        base = "{" + ",".join(str(c) for c in action.choices) + "}"
    elif action.option_strings:
        base = action.dest.upper()
    else:
        base = action.dest
    nargs = action.nargs
    if nargs is None or nargs == 1:
        return base
    if nargs == "?":
        return f"[{base}]"
    if nargs == "*":
        return f"[{base} ...]"
    if nargs == "+":
        return f"{base} [{base} ...]"
    if nargs == argparse.PARSER:
        return f"{base} ..."
    if nargs == argparse.REMAINDER:
        return "..."
    if isinstance(nargs, int):
        return " ".join([base] * nargs)
    return base


def _invocation(action: argparse.Action) -> str:
    """The argument as usage writes it: ``--bank URL``, ``-k K``, ``--json``, ``QUERY``."""
    metavar = _metavar(action)
    if not action.option_strings:
        return metavar
    return f"{action.option_strings[0]} {metavar}".strip()


def _usage(parser: argparse.ArgumentParser) -> list[str]:
    """The usage line, wrapped at :data:`WIDTH`, continuation lines under the first argument."""
    parts: list[str] = []
    grouped: dict[int, argparse._MutuallyExclusiveGroup] = {}
    for group in parser._mutually_exclusive_groups:
        for action in group._group_actions:
            grouped[id(action)] = group
    done: set[int] = set()
    visible = _visible(parser)
    optionals = [a for a in visible if a.option_strings]
    positionals = [a for a in visible if not a.option_strings]
    for action in optionals:
        group = grouped.get(id(action))
        if group is not None:
            if id(group) in done:
                continue
            done.add(id(group))
            members = [a for a in group._group_actions if a in optionals]
            inner = " | ".join(_invocation(a) for a in members)
            parts.append(f"({inner})" if group.required else f"[{inner}]")
        elif action.required:
            parts.append(_invocation(action))
        else:
            parts.append(f"[{_invocation(action)}]")
    parts += [_invocation(a) for a in positionals]
    # Whole arguments per line, as argparse keeps them: never "[--bank" on one line, "URL]" on
    # the next.
    head = f"usage: {parser.prog}"
    lines = [head]
    for part in parts:
        if len(lines[-1]) + 1 + len(part) > WIDTH and lines[-1].strip():
            lines.append(" " * len(head))
        lines[-1] += " " + part
    return lines


def _option_item(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    """One Markdown list item: the flag and its value, then help, then the default."""
    metavar = _metavar(action)
    if action.option_strings:
        names = [f"`{s}`" for s in action.option_strings]
        if metavar:
            names[-1] = f"`{action.option_strings[-1]} {metavar}`"
        flag = ", ".join(names)
    else:
        flag = f"`{metavar}`"
    if action.required and action.option_strings:
        flag += " (required)"
    text = _escape(_help(action, parser))
    default = _default(action)
    if default is not None:
        text = f"{text} Default: `{default}`." if text else f"Default: `{default}`."
    return f"- {flag}: {text}" if text else f"- {flag}"


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    """The help string expanded as argparse expands it (``%(default)s`` and the like)."""
    text = action.help or ""
    if "%" in text:
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        params["prog"] = parser.prog
        if params.get("choices") is not None:
            params["choices"] = ", ".join(str(c) for c in params["choices"])
        text = text % params
    return _sentence(text)


def _default(action: argparse.Action) -> str | None:
    """The default worth adding to the help: none for switches, unset or empty values, or where
    the help already names it."""
    if action.nargs == 0 or isinstance(action, argparse._VersionAction):
        return None
    value = action.default
    if value is None or value is argparse.SUPPRESS or isinstance(value, bool) or value == "":
        return None
    help_text = action.help or ""
    if "default" in help_text.lower() or f"({value})" in help_text:
        return None
    return str(value)


def _description(parser: argparse.ArgumentParser) -> str:
    """The parser's description on one line (argparse would re-wrap it to the terminal)."""
    text = parser.description or ""
    if "%(prog)" in text:
        text = text % {"prog": parser.prog}
    return " ".join(text.split())


def _sentence(text: str) -> str:
    """One line of prose ending in a full stop (argparse helps are fragments without one)."""
    text = " ".join(text.split())
    if text and not text.endswith((".", "!", "?")):
        text += "."
    return text


_MARKDOWN_SPECIAL = re.compile(r"([\\*<])")


def _escape(text: str) -> str:
    """Text that Markdown prints as written: ``<SID_L1_3>`` would otherwise vanish as a tag."""
    out = []
    for i, chunk in enumerate(text.split("`")):
        # Odd chunks sit between backticks: code spans print as written already.
        out.append(chunk if i % 2 else _MARKDOWN_SPECIAL.sub(r"\\\1", chunk))
    return "`".join(out)


def _anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, spaces to hyphens, punctuation dropped."""
    text = heading.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_BLOCK_START = re.compile(r"^([-+*>#=|]|\d+[.)])")
"""A word that would open a list, quote, heading or table at the start of a line."""


def _wrap(text: str, *, indent: str = "") -> list[str]:
    """Greedy wrap at :data:`WIDTH` that never starts a line with a Markdown block marker."""
    lines: list[str] = []
    line: list[str] = []
    for word in text.split(" "):
        prefix = indent if lines else ""
        if line and len(prefix + " ".join([*line, word])) > WIDTH:
            carry = [line.pop()] if _BLOCK_START.match(word) and len(line) > 1 else []
            lines.append(prefix + " ".join(line))
            line = carry
        line.append(word)
    if line:
        lines.append((indent if lines else "") + " ".join(line))
    return lines


if __name__ == "__main__":
    print(cli_reference(), end="")
