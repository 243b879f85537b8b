"""Put stored, retrieved or model-written text into a prompt as data, never as instructions.

Every place where such text enters a prompt (a payload read by ``memory_lookup``, support handed
to StackPlanner, stack entries, trajectories shown to MemEvolver, texts shown to a judge or a
merge model) wraps it with :func:`data_block`. The block is delimited by a tag, and the text
inside is escaped with :func:`escape_data` so that it cannot open or close *any* tag: every
``<`` that starts something tag-like (``<name``, ``</name``, ``< / NAME``, in any case, closed or
not; any ``<`` before a ``/``) becomes ``&lt;``, and so does the ``<`` of a chat-template token
(``<|im_start|>``), which a tokenizer would otherwise read as the real role marker. SID tokens
(``<SID_L1_3>``) are the one exception: they are the memory's own vocabulary, carry no markup
meaning and must stay readable as addresses. Plain
comparisons such as ``3 < 5`` or ``price < budget`` are left alone: a ``<`` followed by a space
and a word opens no tag in any markup.

Escaping is one-way on purpose: ``&lt;`` already present in the text stays as it is, so a
payload cannot smuggle a delimiter through a double escape either.
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = ["data_block", "escape_data", "unwrap_echo"]

# '<' right before a letter or '_' opens a tag, '<' before a '/' (spaces allowed) closes one, in
# any markup a model may have learnt, and '<|' starts a chat-template token (``<|im_start|>``),
# which a tokenizer would read as the real role marker; an SID token is exempt.
_TAGLIKE = re.compile(r"<(?=[A-Za-z_|]|\s*/)(?!SID_L\d+_\d+>)")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ATTR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A reply that opens with the wrapper of a data block, as small models copy it from the prompt:
# the opening tag (attributes allowed), and its closing tag if the reply got that far.
_ECHO_OPEN = re.compile(r"\A\s*<([a-z][a-z0-9_]*)(?:\s+[A-Za-z_][A-Za-z0-9_]*=\"[^\"<>]*\")*\s*>")


def escape_data(text: str) -> str:
    """``text`` with every tag-like ``<`` (SID tokens aside) written as ``&lt;``."""
    return _TAGLIKE.sub("&lt;", text)


def data_block(tag: str, text: str, **attrs: object) -> str:
    """``text`` escaped and wrapped as ``<tag attr="...">\\n...\\n</tag>``.

    Raises:
        ValueError: ``tag`` is not a lower-case name, or an attribute name is not an identifier
            (a programming fault: tags are the project's own constants).
    """
    if not _NAME.fullmatch(tag):
        raise ValueError(f"tag={tag!r}: use a lower-case name such as 'retrieved_memory'")
    rendered = []
    for name, value in attrs.items():
        if not _ATTR.fullmatch(name):
            raise ValueError(f"attribute {name!r}: use an identifier")
        quoted = escape_data(str(value)).replace('"', "&quot;")
        rendered.append(f' {name}="{quoted}"')
    return f"<{tag}{''.join(rendered)}>\n{escape_data(text)}\n</{tag}>"


def unwrap_echo(text: str, tags: Collection[str] = ("experience",)) -> str:
    """``text`` without a wrapper of one of ``tags`` that it opens with (``<experience
    name="C">`` ... ``</experience>``), as a small model copies the form of the blocks in its
    prompt when asked to write one; other text unchanged.

    Only that outer wrapper goes: markup inside it stays for the write gate to see.
    """
    match = _ECHO_OPEN.match(text)
    if match is None or match.group(1) not in tags:
        return text
    inner = text[match.end() :]
    close = re.compile(rf"</\s*{match.group(1)}\s*>\s*\Z")
    return close.sub("", inner).strip()
