"""What the cold-start models write: attempt summaries, experience records, their text form.

The field lists follow the paper's appendix on cold-start experience generation: a faithful
summary of one attempt (:class:`TrajectorySummary`), and reusable experience records distilled
from all attempts at one query (:class:`ExperienceFields`, one or more per query in
:class:`ExtractedExperiences`). Identifiers and verdicts are filled in by the program, never by
the model: the model writes only prose. :func:`experience_text` is the rich summary that is
encoded, quantised and stored as a payload.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ATTEMPT_PROSE_FIELDS",
    "EXPERIENCE_FIELDS",
    "AttemptProse",
    "ExperienceFields",
    "ExtractedExperiences",
    "SkillCard",
    "TrajectorySummary",
    "Verdict",
    "capped_schema",
    "experience_text",
]

Verdict = Literal["success", "failure", "unverified"]
"""What the evidence says about an attempt: only a reference or an environment signal decides."""


class AttemptProse(BaseModel):
    """The part of an attempt summary the model writes."""

    model_config = ConfigDict(extra="forbid")

    trajectory_summary: str = Field(description="The run's steps as a short numbered list.")
    decisive_steps: str = Field(description="The step or steps that settled the final answer.")
    evidence_or_calculation: str = Field(
        description="Evidence, equation, lookup or observation actually visible in the run."
    )
    success_signal: str = Field(
        description="Why the run can be reused if it is correct; else that no verified success "
        "exists."
    )
    failure_signal: str = Field(
        description="Where a wrong or unverified run probably went astray; for a correct run, "
        "the risks that remain."
    )
    low_evidence_notes: str = Field(
        description="Caveats: a bare final answer with no visible procedure is low evidence."
    )


ATTEMPT_PROSE_FIELDS: tuple[str, ...] = tuple(AttemptProse.model_fields)


class TrajectorySummary(AttemptProse):
    """A faithful summary of one attempt: the program's ids and verdict, the model's prose."""

    run_id: str = Field(description="Query id and attempt number.")
    evaluation: Verdict = Field(description="success / failure / unverified, from evidence only.")
    prediction: str = Field(description="The attempt's final answer ('' when it gave none).")


class ExperienceFields(BaseModel):
    """One reusable experience distilled from the attempts at one query."""

    model_config = ConfigDict(extra="forbid")

    skill_name: str = Field(description="A short name for the reusable skill.")
    problem_type: str = Field(description="The kind of problem, in a few words.")
    problem_addressed: str = Field(description="What goes wrong or must be done.")
    applicability: str = Field(description="When this experience applies.")
    preconditions: str = Field(description="What must hold before using it.")
    procedure: str = Field(description="Steps a future agent can follow.")
    decision_rules: str = Field(description="If-then rules for the choices along the way.")
    verification_checks: str = Field(description="Checks to run before answering.")
    failure_recovery: str = Field(description="What to do when a step fails.")
    anti_patterns: str = Field(description="Moves that led or would lead astray.")
    practice: str = Field(description="How the procedure was applied here.")
    lessons_learned: str = Field(description="What the contrast between attempts taught.")
    success_experience: str = Field(description="What the correct attempts did that mattered.")
    failure_reflection: str = Field(
        description="Where the failed attempts diverged, why, and how to repair it."
    )
    steps_summary: str = Field(description="The winning steps in brief.")
    summary: str = Field(
        description="Outcome contrast, success pattern, failure pattern, recipe, checks."
    )
    retrieval_cues: str = Field(description="Words a similar future task would contain.")
    failure_modes: str = Field(description="Typical ways this kind of task fails.")
    verification: str = Field(description="How the answer was or should be verified.")
    evidence: str = Field(
        description="What the attempts showed; uncertain outcomes stay marked as such."
    )


EXPERIENCE_FIELDS: tuple[str, ...] = tuple(ExperienceFields.model_fields)


class SkillCard(BaseModel):
    """One general skill written from a cluster of experiences that share an SID prefix."""

    model_config = ConfigDict(extra="forbid")

    skill_name: str = Field(description="A short name for the shared skill.")
    problem_type: str = Field(description="The kind of problem the cluster solves.")
    problem_addressed: str = Field(description="What goes wrong or must be done.")
    applicability: str = Field(description="When the skill applies.")
    preconditions: str = Field(description="What must hold before using it.")
    procedure: str = Field(description="Steps that work across the cluster.")
    decision_rules: str = Field(description="If-then rules for the choices along the way.")
    practice: str = Field(description="How the procedure is applied, without one case's details.")
    lessons_learned: str = Field(description="What the cluster's successes and failures teach.")
    verification_checks: str = Field(description="Checks to run before answering.")
    retrieval_cues: str = Field(description="Words a task needing this skill would contain.")
    summary: str = Field(description="The skill in two sentences.")


class ExtractedExperiences(BaseModel):
    """The extractor's reply: one or more experiences for one query."""

    model_config = ConfigDict(extra="forbid")

    experiences: list[ExperienceFields] = Field(min_length=1)


def capped_schema(
    model: type[BaseModel], max_chars: int | None, *, max_items: int | None = None
) -> dict[str, Any]:
    """``model``'s JSON schema with every string at most ``max_chars`` long, all required.

    A small local model decoding under a schema needs the caps to close its JSON in time;
    ``max_items`` caps the experience list of :class:`ExtractedExperiences`.
    """
    schema = model.model_json_schema()

    def cap(node: dict[str, Any]) -> None:
        props = node.get("properties", {})
        node["required"] = list(props)
        for prop in props.values():
            if prop.get("type") == "string" and max_chars is not None:
                prop["maxLength"] = max_chars
            if prop.get("type") == "array" and max_items is not None:
                prop["maxItems"] = max_items

    cap(schema)
    for sub in schema.get("$defs", {}).values():
        cap(sub)
    return schema


_LABELS = {
    "skill_name": "Skill",
    "problem_type": "Problem type",
    "problem_addressed": "Problem addressed",
    "applicability": "Applies when",
    "preconditions": "Preconditions",
    "procedure": "Procedure",
    "decision_rules": "Decision rules",
    "verification_checks": "Verification checks",
    "failure_recovery": "Failure recovery",
    "anti_patterns": "Anti-patterns",
    "practice": "Practice",
    "lessons_learned": "Lessons learned",
    "success_experience": "What worked",
    "failure_reflection": "What failed",
    "steps_summary": "Steps",
    "summary": "Summary",
    "retrieval_cues": "Cues",
    "failure_modes": "Failure modes",
    "verification": "Verification",
    "evidence": "Evidence",
}


def experience_text(record: ExperienceFields | SkillCard) -> str:
    """The rich summary of an experience or a skill card: its non-empty fields as labelled
    lines."""
    lines = []
    for name in type(record).model_fields:
        value = " ".join(str(getattr(record, name)).split())
        if value:
            lines.append(f"{_LABELS[name]}: {value}")
    return "\n".join(lines)
