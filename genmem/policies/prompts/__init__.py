"""Every prompt text GenMem sends to a model, one module per agent or concern.

- :mod:`~genmem.policies.prompts.memory_agents`: MemRetriever's and MemEvolver's role prompts,
  their user turns, and the structured output MemEvolver returns (:class:`EvolverDecision`).
- :mod:`~genmem.policies.prompts.address`: the instruction SIDs are decoded under and the
  context an experience is addressed from.
- :mod:`~genmem.policies.prompts.compose`: fusion, the pair judge and decomposition
  (:mod:`genmem.graph.compose`).
- :mod:`~genmem.policies.prompts.coordinator`: StackPlanner's coordinator, full and two-stage.
- :mod:`~genmem.policies.prompts.subagents`: the sub-agents the coordinator delegates to.
- :mod:`~genmem.policies.prompts.actor`: the ranked actor that plays a game's valid commands.
- :mod:`~genmem.policies.prompts.align`: stage-1 alignment's reverse mappings and describer.
- :mod:`~genmem.policies.prompts.judge`: the stage-3 judge's rubrics.
- :mod:`~genmem.policies.prompts.coldstart`: cold-start and seed bank construction.

The code that uses a prompt imports it from here; a builder that needs graph types (the
coordinator's, which lists a team of sub-agents) stays in the graph and fills a template from
here. Wording is kept byte for byte across moves: tests and trained policies depend on it.
Stored text enters a prompt only inside an escaped data block
(:func:`genmem.memory.data_block.data_block`).
"""

from genmem.policies.prompts.actor import (
    RANKING_PROMPT,
    ranking_stateless_message,
    ranking_user_message,
)
from genmem.policies.prompts.address import ADDRESS_PROMPT, experience_user_message
from genmem.policies.prompts.align import (
    DESCRIBER_PROMPT,
    SID_DESCRIPTION_PROMPT,
    SID_EXPERIENCE_PROMPT,
)
from genmem.policies.prompts.coldstart import (
    ASSESS_PROMPT,
    ATTEMPT_PROMPT,
    EXTRACT_PROMPT,
    INTERACTIVE_ATTEMPT_PROMPT,
    MERGE_PROMPT,
    RETRY_PROMPT,
    SEED_LESSON_PROMPT,
    SYNTHESIS_PROMPT,
    assess_user_message,
    extract_user_message,
    seed_lesson_user_message,
    synthesis_user_message,
)
from genmem.policies.prompts.compose import (
    decompose_prompt,
    decompose_user_message,
    fuse_prompt,
    fuse_user_message,
    pair_judge_prompt,
    pair_judge_user_message,
)
from genmem.policies.prompts.coordinator import (
    ACTIONS_PROMPT,
    COORDINATOR_PROMPT,
    COORDINATOR_STAGED_PROMPT,
    FIELD_PROMPTS,
    choice_prompt,
    coordinator_user_message,
)
from genmem.policies.prompts.judge import FAITHFUL_RUBRIC, JUDGE_RUBRIC, judge_user_message
from genmem.policies.prompts.memory_agents import (
    NO_MEMORY_ANSWER,
    EvolverDecision,
    evolver_choice_request,
    evolver_decision_request,
    evolver_prompt,
    evolver_rejection_message,
    evolver_stateless_choice_request,
    evolver_user_message,
    retriever_prompt,
    retriever_user_message,
    support_user_message,
)
from genmem.policies.prompts.subagents import (
    GENERIC_SUBAGENT_PROMPT,
    SUBAGENT_PROMPTS,
    subagent_role_prompt,
    subagent_task_message,
)

__all__ = [
    "ACTIONS_PROMPT",
    "ADDRESS_PROMPT",
    "ASSESS_PROMPT",
    "ATTEMPT_PROMPT",
    "COORDINATOR_PROMPT",
    "COORDINATOR_STAGED_PROMPT",
    "DESCRIBER_PROMPT",
    "EXTRACT_PROMPT",
    "FAITHFUL_RUBRIC",
    "FIELD_PROMPTS",
    "GENERIC_SUBAGENT_PROMPT",
    "INTERACTIVE_ATTEMPT_PROMPT",
    "JUDGE_RUBRIC",
    "MERGE_PROMPT",
    "NO_MEMORY_ANSWER",
    "RANKING_PROMPT",
    "RETRY_PROMPT",
    "SEED_LESSON_PROMPT",
    "SID_DESCRIPTION_PROMPT",
    "SID_EXPERIENCE_PROMPT",
    "SUBAGENT_PROMPTS",
    "SYNTHESIS_PROMPT",
    "EvolverDecision",
    "assess_user_message",
    "choice_prompt",
    "coordinator_user_message",
    "decompose_prompt",
    "decompose_user_message",
    "evolver_choice_request",
    "evolver_decision_request",
    "evolver_prompt",
    "evolver_rejection_message",
    "evolver_stateless_choice_request",
    "evolver_user_message",
    "experience_user_message",
    "extract_user_message",
    "fuse_prompt",
    "fuse_user_message",
    "judge_user_message",
    "pair_judge_prompt",
    "pair_judge_user_message",
    "ranking_stateless_message",
    "ranking_user_message",
    "retriever_prompt",
    "retriever_user_message",
    "seed_lesson_user_message",
    "subagent_role_prompt",
    "subagent_task_message",
    "support_user_message",
    "synthesis_user_message",
]
