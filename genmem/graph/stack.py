"""StackPlanner's task-memory stack: what the coordinator remembers of the work so far.

The coordinator never reads sub-agent reports in full inside its own conversation; each report
is pushed onto this stack, and the coordinator sees the stack rendered into its prompt. It keeps
the stack small by condensing runs of entries into a summary and pruning failed branches down
to a one-line note.

:class:`TaskStack` is a frozen pydantic model that lives in LangGraph state as JSON. Every
operation returns a new stack and leaves the old one as it was. Ids are handed out in
increasing order and never reused; an entry that replaces others (a ``summary`` or a
``failure``) takes a fresh id, sits where the first replaced entry sat, and records in
``replaces`` the id of every entry it stands for, including those its predecessors replaced, so
the stack always shows that something happened even after the details are gone. A bad edit
raises :class:`InvalidStackEdit` with a message the coordinator can act on, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from genmem.errors import GenMemError
from genmem.graph.planner_actions import ReviseAction

__all__ = [
    "DEFAULT_MAX_STEPS",
    "EntryKind",
    "InvalidStackEdit",
    "StackBudgetConfig",
    "StackEntry",
    "Summarizer",
    "TaskStack",
    "approx_tokens",
    "default_summarize",
]

EntryKind = Literal["plan", "result", "note", "summary", "failure"]
"""What an entry holds: the coordinator's plan, a sub-agent's result, the coordinator's own
note, a summary standing for condensed entries, or a one-line note on a pruned branch."""

Summarizer = Callable[[list["StackEntry"]], str]
"""Turns a run of entries, oldest first, into the text of the summary that replaces them."""

_PUSHABLE: tuple[str, ...] = ("plan", "result", "note")
_REPLACING: tuple[str, ...] = ("summary", "failure")


class InvalidStackEdit(GenMemError, ValueError):
    """An edit the stack refuses (unknown ids, a broken run, empty text); nothing changed."""

    def __init__(self, message: str, *, op: str, ids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.op = op
        self.ids = ids


def _id_list(ids: Iterable[int]) -> str:
    """``#1-#3, #7`` for ids 1, 2, 3, 7 (runs of consecutive ids shortened)."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"#{ordered[i]}-#{ordered[j]}")
        else:
            parts.extend(f"#{n}" for n in ordered[i : j + 1])
        i = j + 1
    return ", ".join(parts)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit >= 1 else ""


class StackEntry(BaseModel):
    """One item on the task stack."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int = Field(ge=1, description="Unique, increasing; never reused.")
    kind: EntryKind = Field(description="What the entry holds.")
    content: str = Field(description="The text the coordinator reads.")
    agent: str | None = Field(default=None, description="The sub-agent that produced a result.")
    task: str | None = Field(default=None, description="The sub-task the agent was given.")
    replaces: tuple[int, ...] = Field(
        default=(),
        description="For a summary or failure: ids of every entry it stands for, ascending.",
    )

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("an entry's content must not be empty")
        return value

    @model_validator(mode="after")
    def _replaces_fit_kind(self) -> StackEntry:
        if self.kind in _REPLACING and not self.replaces:
            raise ValueError(f"a {self.kind} entry must record the ids it replaces")
        if self.kind not in _REPLACING and self.replaces:
            raise ValueError(f"a {self.kind} entry cannot replace other entries")
        if list(self.replaces) != sorted(set(self.replaces)):
            raise ValueError(f"replaces must be ascending and distinct; got {self.replaces}")
        if self.kind == "failure" and "\n" in self.content:
            raise ValueError("a failure note is one line")
        return self

    def header(self) -> str:
        """The bracketed label the rendered stack shows before the content."""
        label = f"#{self.id} {self.kind}"
        if self.agent:
            label += f" from {self.agent}"
        if self.replaces:
            label += f" of {_id_list(self.replaces)}"
        if self.task:
            label += f" | task: {_clip(' '.join(self.task.split()), 120)}"
        return f"[{label}]"

    def line(self) -> str:
        """The entry as the coordinator sees it; continuation lines are indented."""
        return f"{self.header()} " + "\n  ".join(self.content.strip().splitlines())


def default_summarize(entries: list[StackEntry], *, max_chars: int = 600) -> str:
    """A deterministic summary: one clipped line per entry, at most ``max_chars`` in all."""
    per_entry = max(40, max_chars // max(1, len(entries)))
    lines = []
    for entry in entries:
        who = f" ({entry.agent})" if entry.agent else ""
        text = " ".join(entry.content.split())
        lines.append(_clip(f"#{entry.id} {entry.kind}{who}: {text}", per_entry))
    return _clip("\n".join(lines), max_chars)


class TaskStack(BaseModel):
    """The coordinator's task memory: entries oldest first, plus the next id to hand out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: tuple[StackEntry, ...] = ()
    next_id: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _ids_consistent(self) -> TaskStack:
        seen: set[int] = set()
        for entry in self.entries:
            for i in (entry.id, *entry.replaces):
                if i in seen:
                    raise ValueError(f"id {i} appears twice on the stack")
                if i >= self.next_id:
                    raise ValueError(f"id {i} is not below next_id={self.next_id}")
                seen.add(i)
        return self

    # --- reading ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """How many entries are on the stack."""
        return len(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def ids(self) -> tuple[int, ...]:
        """The ids on the stack, in stack order (oldest first)."""
        return tuple(entry.id for entry in self.entries)

    @property
    def top(self) -> StackEntry | None:
        """The most recent entry, or None on an empty stack."""
        return self.entries[-1] if self.entries else None

    @property
    def current_plan(self) -> StackEntry | None:
        """The latest ``plan`` entry still on the stack, or None."""
        for entry in reversed(self.entries):
            if entry.kind == "plan":
                return entry
        return None

    def get(self, entry_id: int) -> StackEntry:
        """The entry with ``entry_id``; raises InvalidStackEdit if it is not on the stack."""
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        raise InvalidStackEdit(
            f"entry #{entry_id} is not on the stack; ids on the stack: {_id_list(self.ids)}",
            op="get",
            ids=(entry_id,),
        )

    def span(self, first: int, last: int) -> tuple[int, ...]:
        """Ids of the entries from ``first`` to ``last`` in stack order, both included."""
        positions = self._positions((first, last), op="span")
        lo, hi = sorted(positions)
        return self.ids[lo : hi + 1]

    # --- edits -----------------------------------------------------------------------------

    def push(
        self, kind: EntryKind, content: str, *, agent: str | None = None, task: str | None = None
    ) -> TaskStack:
        """A new stack with a ``plan``, ``result`` or ``note`` entry on top, given ``next_id``."""
        if kind not in _PUSHABLE:
            raise InvalidStackEdit(
                f"cannot push an entry of kind {kind!r}; push one of {', '.join(_PUSHABLE)} "
                "(summaries and failure notes come from condense and prune)",
                op="push",
            )
        if not isinstance(content, str) or not content.strip():
            raise InvalidStackEdit(
                f"cannot push a {kind} with empty content; give it the text to remember",
                op="push",
            )
        entry = StackEntry(id=self.next_id, kind=kind, content=content, agent=agent, task=task)
        return TaskStack(entries=(*self.entries, entry), next_id=self.next_id + 1)

    def condense(self, ids: Iterable[int], summary: str) -> TaskStack:
        """A new stack where the adjacent entries ``ids`` are one ``summary`` entry."""
        wanted = tuple(ids)
        positions = self._positions(wanted, op="condense")
        lo, hi = min(positions), max(positions)
        if hi - lo + 1 != len(positions):
            missing = [self.entries[p].id for p in range(lo, hi + 1) if p not in positions]
            raise InvalidStackEdit(
                f"condense needs an unbroken run of entries, but {_id_list(missing)} sit between "
                f"the entries asked for ({_id_list(wanted)}); include them or condense each run "
                "separately",
                op="condense",
                ids=wanted,
            )
        if not isinstance(summary, str) or not summary.strip():
            raise InvalidStackEdit(
                f"condense of {_id_list(wanted)} needs a non-empty summary of what they held",
                op="condense",
                ids=wanted,
            )
        return self._replace(sorted(positions), "summary", summary.strip())

    def prune(self, ids: Iterable[int], note: str) -> TaskStack:
        """A new stack where the entries ``ids`` are one one-line ``failure`` note."""
        wanted = tuple(ids)
        positions = self._positions(wanted, op="prune")
        line = " ".join(note.split()) if isinstance(note, str) else ""
        if not line:
            raise InvalidStackEdit(
                f"prune of {_id_list(wanted)} needs a one-line note on what failed and why",
                op="prune",
                ids=wanted,
            )
        return self._replace(sorted(positions), "failure", line)

    def revise(self, action: ReviseAction) -> TaskStack:
        """Apply a coordinator's ``revise`` action (update pushes a note)."""
        if action.op == "update":
            return self.push("note", action.content)
        if action.op == "condense":
            return self.condense(action.entries, action.content)
        return self.prune(action.entries, action.content)

    def auto_condense(
        self,
        max_entries: int,
        summarize: Summarizer = default_summarize,
        *,
        keep_recent: int | None = None,
    ) -> TaskStack:
        """When over ``max_entries``, condense the oldest entries, keeping the plan and the newest.

        The latest plan and the ``keep_recent`` newest entries (default: half of
        ``max_entries``, at most ``max_entries - 3``) stay as they are; each unbroken run of
        older entries becomes one summary written by ``summarize``, oldest run first, until the
        stack fits. With ``max_entries >= 4`` it always fits afterwards.
        """
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 4:
            raise ValueError(
                f"max_entries={max_entries!r} is too small: condensing keeps the plan, up to two "
                "summaries and at least one recent entry; use max_entries >= 4"
            )
        if keep_recent is None:
            keep_recent = max(1, min(max_entries // 2, max_entries - 3))
        if not 0 <= keep_recent <= max_entries - 3:
            raise ValueError(
                f"keep_recent={keep_recent!r} does not fit max_entries={max_entries}: use a value "
                f"from 0 to {max_entries - 3}"
            )
        stack = self
        while stack.size > max_entries:
            run = stack._oldest_run(keep_recent)
            if run is None:
                break
            entries = [stack.entries[p] for p in run]
            text = summarize(entries)
            if not isinstance(text, str) or not text.strip():
                raise InvalidStackEdit(
                    f"the summarizer returned {text!r} for {_id_list(e.id for e in entries)}; it "
                    "must return non-empty text",
                    op="auto_condense",
                    ids=tuple(e.id for e in entries),
                )
            stack = stack._replace(run, "summary", text.strip())
        return stack

    # --- prompt ----------------------------------------------------------------------------

    def render(self, max_chars: int | None = None) -> str:
        """The stack for the coordinator's prompt: oldest first, each entry with its id.

        Past ``max_chars`` it keeps the newest entry, then the latest plan, then as many of the
        next newest as fit, and marks each gap of hidden entries; when not even the newest entry
        fits, it shows that entry cut short. The result never exceeds ``max_chars``.
        """
        if max_chars is not None and max_chars < 1:
            raise ValueError(f"max_chars={max_chars} must be at least 1 (or None for no limit)")
        if not self.entries:
            return _clip("(the stack is empty)", max_chars or 100)
        lines = [entry.line() for entry in self.entries]
        if max_chars is None or len("\n".join(lines)) <= max_chars:
            return "\n".join(lines)
        newest = len(lines) - 1
        order = list(range(newest, -1, -1))
        plan = self.current_plan
        plan_at = self.ids.index(plan.id) if plan is not None else None
        if plan_at is not None and plan_at != newest:
            order.remove(plan_at)
            order.insert(1, plan_at)
        shown: set[int] = set()
        for position in order:
            if len(self._assemble(lines, shown | {position})) <= max_chars:
                shown.add(position)
            elif position == newest or position != plan_at:
                break  # what is shown stays a contiguous tail of the history
        if not shown:  # not even the newest entry fits: show as much of it as there is room for
            return _clip(lines[newest], max_chars)
        return self._assemble(lines, shown)

    # --- internals -------------------------------------------------------------------------

    def _positions(self, ids: Sequence[int], *, op: str) -> set[int]:
        """Stack positions of ``ids``; refuses an empty, repeated or unknown id."""
        if not ids:
            raise InvalidStackEdit(f"{op} needs at least one entry id", op=op)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise InvalidStackEdit(
                f"{op} takes entry ids as integers; got {list(ids)!r}", op=op, ids=tuple(ids)
            )
        if len(set(ids)) != len(ids):
            raise InvalidStackEdit(
                f"{op} lists an id more than once ({list(ids)}); list each id once",
                op=op,
                ids=tuple(ids),
            )
        where = {entry.id: p for p, entry in enumerate(self.entries)}
        unknown = [i for i in ids if i not in where]
        if unknown:
            shown = _id_list(self.ids) if self.entries else "none, the stack is empty"
            raise InvalidStackEdit(
                f"{op}: {_id_list(unknown)} not on the stack (ids on the stack: {shown}); use "
                "ids shown in the stack",
                op=op,
                ids=tuple(ids),
            )
        return {where[i] for i in ids}

    def _replace(self, positions: list[int], kind: EntryKind, content: str) -> TaskStack:
        """Remove the entries at ``positions``; put one ``kind`` entry where the first was."""
        removed = [self.entries[p] for p in positions]
        covered = sorted({i for e in removed for i in (e.id, *e.replaces)})
        new = StackEntry(id=self.next_id, kind=kind, content=content, replaces=tuple(covered))
        drop = set(positions)
        kept: list[StackEntry] = []
        for p, entry in enumerate(self.entries):
            if p == positions[0]:
                kept.append(new)
            if p not in drop:
                kept.append(entry)
        return TaskStack(entries=tuple(kept), next_id=self.next_id + 1)

    def _oldest_run(self, keep_recent: int) -> list[int] | None:
        """Positions of the oldest unbroken run (two or more) that auto-condense may replace."""
        plan = self.current_plan
        protected = set(range(max(0, self.size - keep_recent), self.size))
        if plan is not None:
            protected.add(self.ids.index(plan.id))
        run: list[int] = []
        for p in range(self.size):
            if p in protected:
                if len(run) >= 2:
                    return run
                run = []
            else:
                run.append(p)
        return run if len(run) >= 2 else None

    @staticmethod
    def _assemble(lines: list[str], shown: set[int]) -> str:
        """The shown lines in order, one marker line for each gap of hidden ones."""
        out: list[str] = []
        hidden = 0
        for p, text in enumerate(lines):
            if p in shown:
                if hidden:
                    out.append(f"({hidden} older {'entry' if hidden == 1 else 'entries'} hidden)")
                    hidden = 0
                out.append(text)
            else:
                hidden += 1
        if hidden:
            out.append(f"({hidden} older {'entry' if hidden == 1 else 'entries'} hidden)")
        return "\n".join(out)


def approx_tokens(text: str) -> int:
    """Approximate token count: characters divided by four, rounded up."""
    return -(-len(text) // 4)


DEFAULT_MAX_STEPS = 3
"""StackPlanner's step budget per run wherever none is given: the library's graphs, every
command's ``--max-steps`` and every experiment's config."""


@dataclass(frozen=True, kw_only=True)
class StackBudgetConfig:
    """How far one StackPlanner run may go before it stops with its best answer so far."""

    max_steps: int = DEFAULT_MAX_STEPS
    """Coordinator steps (one action each, invalid ones included) before the run stops."""

    max_entries: int = 16
    """Entries the task stack may hold; above this it condenses its oldest ones (at least 4)."""

    max_tokens: int = 32_000
    """Tokens the coordinator may spend over the run, prompts and replies together. Counted
    approximately by :func:`approx_tokens` (characters / 4), so no tokenizer is needed."""

    max_invalid_actions: int = 3
    """Invalid coordinator replies in a row that are answered with an error observation for it
    to correct; one more ends the run. 0 ends it at the first invalid reply."""

    def __post_init__(self) -> None:
        minimums = {"max_steps": 1, "max_entries": 4, "max_tokens": 1, "max_invalid_actions": 0}
        for name, least in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"StackBudgetConfig.{name}={value!r} must be an int (>= {least})")
            if value < least:
                why = (
                    "; the stack keeps the plan, up to two summaries and a recent entry"
                    if name == "max_entries"
                    else ""
                )
                raise ValueError(
                    f"StackBudgetConfig.{name}={value} is too small{why}: use >= {least}"
                )

    def exceeded(self, *, steps: int, tokens: int, invalid_actions: int) -> str | None:
        """Which budget a run with these counts has used up, in words, or None if none."""
        if invalid_actions > self.max_invalid_actions:
            return (
                f"stopped after {invalid_actions} invalid coordinator replies in a row "
                f"(max_invalid_actions={self.max_invalid_actions})"
            )
        if steps >= self.max_steps:
            return f"step budget used up: {steps} of max_steps={self.max_steps}"
        if tokens >= self.max_tokens:
            return f"token budget used up: about {tokens} of max_tokens={self.max_tokens}"
        return None
