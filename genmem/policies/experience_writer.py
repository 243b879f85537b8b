"""Experiences written by code, and the operation chosen: MemEvolver's template path.

The paper's MemEvolver writes every payload itself. A model too small to write a useful one (the
embedded 135M writes single words, which the gate refuses) can still choose what happens at the
slot if code writes the texts. An :class:`ExperienceWriter` (an environment supplies one, e.g.
the cooking distiller) turns a finished run into a payload and merges two payloads; from them
:meth:`ExperienceWriter.candidates` builds the updates the slot admits:

- an empty slot: ``insert`` the run's payload (the only candidate);
- an occupied one: ``retain`` the stored entry, ``replace`` it with the run's payload, or
  ``merge`` the two.

:func:`choose_candidate` picks one: by the ``writer`` rule (:func:`writer_pick`: merge, else
retain; no model asked), or by the evolver's model, the candidates shown in its prompt (as
data) and each operation's name scored as its reply (``mean``, ``sum`` or ``calibrated``), so
the model's preference for text it can copy from the prompt favours none of them. A model that
cannot score replies gets the writer rule. On training games the embedded 135M model's label
scores did not depend on the candidates under any scoring rule, and the writer rule was right
in every situation measured (``bench/evolver_choice.py``): it is MemEvolver's default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from genmem.memory.records import Op
from genmem.policies.choice_scoring import SCORE_RULES, ScoreRule, rank_scores

__all__ = [
    "CHOICE_RULES",
    "ChoiceRule",
    "ExperienceWriter",
    "WriteCandidate",
    "WriteChoice",
    "WriteLabel",
    "choose_candidate",
    "writer_pick",
]

WriteLabel = Literal["insert", "retain", "replace", "merge"]
"""What a candidate does at the slot."""


@dataclass(frozen=True)
class WriteCandidate:
    """One update the slot admits, with the text it would store."""

    label: WriteLabel
    payload: str

    @property
    def op(self) -> Op:
        """The bank operation: ``insert`` on an empty slot, ``revise`` otherwise (the stored
        text again is a retention)."""
        return "insert" if self.label == "insert" else "revise"


@dataclass(frozen=True, kw_only=True)
class ExperienceWriter:
    """Code that writes a run's experience, and merges it with a stored one."""

    name: str
    """Recorded as the payload's writer (the bank's log names ``<actor>/<name>``)."""
    distil: Callable[[str, dict[str, Any] | str, str | None], str | None]
    """``(query, trajectory, outcome) -> payload``; None when the run shows nothing worth
    keeping (MemEvolver then writes nothing)."""
    merge: Callable[[str, str], str | None]
    """``(stored, new) -> merged payload``; None when the stored text is not one it reads."""

    def candidates(self, new: str, stored: str | None) -> list[WriteCandidate]:
        """The updates that store ``new`` (this run's payload, from :attr:`distil`) at a slot
        holding ``stored`` (None: empty)."""
        if not new.strip():
            raise ValueError("a writer's candidates need a non-empty payload for the run")
        if stored is None:
            return [WriteCandidate("insert", new)]
        if new.strip() == stored.strip():
            return [WriteCandidate("retain", stored)]
        found = [WriteCandidate("retain", stored), WriteCandidate("replace", new)]
        merged = self.merge(stored, new)
        if merged is not None and merged.strip() not in (stored.strip(), new.strip()):
            found.append(WriteCandidate("merge", merged))
        return found


@dataclass(frozen=True)
class WriteChoice:
    """Which candidate was taken, how, and each candidate's score."""

    index: int
    chooser: Literal["only", "likelihood", "rule"]
    scores: tuple[float, ...] = ()


ChoiceRule = ScoreRule | Literal["writer"]
"""How a candidate is chosen: a rule over the model's label log-probabilities, or ``writer``
(no model: ``merge`` when offered, else ``retain``, else the only candidate)."""
CHOICE_RULES: tuple[str, ...] = (*SCORE_RULES, "writer")


def writer_pick(candidates: Sequence[WriteCandidate]) -> int:
    """The ``writer`` rule's pick: ``merge`` (both texts kept) when offered, else ``retain``
    (the stored entry kept), else the first candidate."""
    labels = [c.label for c in candidates]
    return next((labels.index(lab) for lab in ("merge", "retain") if lab in labels), 0)


def choose_candidate(
    chat: Any,
    messages: Sequence[Any],
    candidates: Sequence[WriteCandidate],
    rule: ChoiceRule = "mean",
    stateless: Sequence[Any] | None = None,
) -> WriteChoice:
    """The candidate the model's reply most likely names, after ``messages`` (which show the
    candidates and ask for one of their labels).

    Args:
        chat: The evolver's chat model; one with ``choice_logprobs`` (the embedded local model)
            scores the labels, any other gets the ``writer`` rule (:func:`writer_pick`).
        messages: The conversation ending with the request that lists the candidates.
        candidates: What the slot admits (:meth:`ExperienceWriter.candidates`).
        rule: How label log-probabilities are ranked (:func:`rank_scores`): ``mean`` per
            token, ``sum``, or ``calibrated`` (the sum minus the label's after ``stateless``);
            or ``writer``: the model is not asked (:func:`writer_pick`).
        stateless: The conversation a ``calibrated`` choice subtracts: the request with no slot,
            run or candidate shown (the labels' own likelihood as a reply).

    Raises:
        ValueError: no candidates, or ``calibrated`` without ``stateless``.
    """
    if not candidates:
        raise ValueError("choose_candidate needs at least one candidate")
    if rule == "calibrated" and stateless is None:
        raise ValueError("a calibrated choice needs the stateless conversation to subtract")
    if len(candidates) == 1:
        return WriteChoice(0, "only")
    labels = [c.label for c in candidates]
    scorer = getattr(chat, "choice_logprobs", None)
    if callable(scorer) and rule != "writer":
        calibrate = rule == "calibrated" and stateless is not None
        base = scorer(list(stateless or ()), labels) if calibrate else None
        scores = rank_scores(rule, scorer(list(messages), labels), base)
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return WriteChoice(best, "likelihood", tuple(float(s) for s in scores))
    return WriteChoice(writer_pick(candidates), "rule")
