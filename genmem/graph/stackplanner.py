"""StackPlanner: a coordinator with a task-memory stack that delegates to sub-agents.

``prepare -> decide -> validate -> execute -> (prepare | finalize)``:

- ``prepare`` builds the coordinator's view for this step: the task, the retrieved experience
  (delimited as data), the task stack rendered with entry ids, and the last observation (the
  outcome of the previous action, or the error that made it invalid). It condenses the oldest
  entries first when the stack holds more than the budget allows.
- ``decide`` asks the lead model for one decision. Models that support it answer under a JSON
  schema (constrained decoding on local models, structured outputs on vLLM); others answer in
  text, which is parsed leniently.
- ``validate`` turns the reply into a :class:`~genmem.graph.planner_actions.CoordinatorDecision`.
  An invalid reply becomes an error observation for the next step; after
  ``max_invalid_actions`` of them in a row the run stops.
- ``execute`` runs the action: ``plan`` pushes the plan, ``delegate`` runs a sub-agent and pushes
  its report (the report never enters the coordinator's conversation directly), ``revise``
  edits the stack, ``finish`` records the answer.
- ``finalize`` writes the structured trajectory. A run that hits a budget ends with the best
  answer so far (the latest answer a sub-agent reported) and says so.

Sub-agents: ``solver`` (reasoning and calculation, optionally with tools such as a calculator),
``research`` (given search tools), ``interactor`` (given an environment's action tools). Each
delegation is one fresh sub-agent run; tool-using sub-agents run as ``create_agent`` graphs and
every tool call they make is recorded in the trajectory.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from genmem.graph.decision_schemas import (
    action_schema,
    available_choices,
    choice_prompt,
    choice_schema,
    coordinator_schema,
    decision_from_stages,
)
from genmem.graph.planner_actions import (
    CoordinatorDecision,
    DelegateAction,
    FinishAction,
    InvalidAction,
    PlanAction,
    ReviseAction,
    action_schema_text,
    parse_decision,
)
from genmem.graph.ranked_actor import RankedActor
from genmem.graph.stack import InvalidStackEdit, StackBudgetConfig, TaskStack, approx_tokens
from genmem.graph.subagents import ActionPrior, SubAgent, default_subagents, subagent_prompt
from genmem.graph.trajectory import StepRecord, Trajectory, extend_or_reset
from genmem.policies.backends import load_chat_model
from genmem.policies.chat_local import content_text
from genmem.policies.choice_scoring import SCORE_RULES, ScoreRule
from genmem.policies.json_reply import accepts_json_schema, ask_json, json_schema_runnable
from genmem.policies.prompts import (
    COORDINATOR_PROMPT,
    COORDINATOR_STAGED_PROMPT,
    coordinator_user_message,
    subagent_task_message,
)

__all__ = [
    "Coordinator",
    "PlannerContext",
    "PlannerInput",
    "PlannerOutput",
    "PlannerState",
    "StackPlannerConfig",
    "build_stackplanner_graph",
    "compile_planner",
    "coordinator_prompt",
    "coordinator_schema",
    "report_answer",
]

_ANSWER = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.DOTALL | re.IGNORECASE)
_FINAL = re.compile(r"(?:final answer|answer)\s*(?:is\s*:?|:)\s*(.+)", re.IGNORECASE)
_REPORT_CHARS = 1200  # characters of a sub-agent report pushed onto the stack


class PlannerInput(TypedDict, total=False):
    """What a StackPlanner run takes: the task and, optionally, retrieved experience."""

    query: str
    support: str | None
    experience: str | None
    """The retrieved entries' payloads as stored, for a sub-agent that reads structured
    experience (a ranking interactor's action prior); never shown to a model."""


class PlannerOutput(TypedDict, total=False):
    """What a StackPlanner run returns."""

    answer: str | None
    status: str
    trajectory: dict[str, Any]


class PlannerState(TypedDict, total=False):
    """The full state of a StackPlanner run."""

    query: str
    support: str | None
    experience: str | None
    stack: dict[str, Any]
    steps: Annotated[list[dict[str, Any]], extend_or_reset]
    messages: list[BaseMessage]
    reply: str
    parsed: Any
    decision: dict[str, Any] | None
    observation: str
    invalid_streak: int
    n_steps: int
    tokens: int
    best_answer: str | None
    answer: str | None
    status: str
    stop_reason: str
    trajectory: dict[str, Any]
    budget: dict[str, int]
    """The budget of this run: the config's, with the run context's overrides."""


class PlannerContext(TypedDict, total=False):
    """Per-run budget overrides (any :class:`~genmem.graph.stack.StackBudgetConfig` field)."""

    max_steps: int
    max_entries: int
    max_tokens: int
    max_invalid_actions: int


@dataclass(frozen=True, kw_only=True)
class StackPlannerConfig:
    """Budgets and decoding settings of a StackPlanner run."""

    budget: StackBudgetConfig = field(default_factory=StackBudgetConfig)
    max_stack_chars: int = 6000
    """Characters of the rendered stack shown to the coordinator (newest entries kept)."""
    structured: Literal["auto", "on", "off"] = "auto"
    """Ask the lead model for schema-constrained JSON: when it supports it (auto), always, or
    never (plain text, parsed leniently)."""
    max_field_chars: int = 200
    """Longest ``task``, ``content`` or ``answer`` a constrained decision may write (sub-agents
    see the whole task as context, so a delegated task need only say which part to do; a
    small model stuck in a repetition loop stops at this cap)."""
    fallback_solver: bool = True
    """When a run ends with no answer at all, give the whole task to one sub-agent once: the
    interactor when the environment gave one (only it can act there), else the solver."""
    two_stage: bool = True
    """Take a constrained decision in two calls, the action kind and then its fields, because
    lm-format-enforcer merges a union's members; backends that constrain unions faithfully
    (vLLM's guided decoding) can take it in one call with ``False``."""
    interactor: Literal["tools", "rank"] = "tools"
    """How the shipped interactor acts in a game: by writing tool calls, or (``rank``, local
    models only) by ranking the valid commands by likelihood and playing the best."""
    rank_score: ScoreRule = "mean"
    """How the ranking interactor turns a command's log-probability into its rank
    (:func:`~genmem.policies.choice_scoring.rank_scores`)."""
    prior_weight: float = 0.0
    """Weight of the environment's action prior in the ranking interactor's scores (0: off)."""

    def __post_init__(self) -> None:
        if self.max_stack_chars < 200:
            raise ValueError(f"max_stack_chars={self.max_stack_chars}: use at least 200")
        if self.max_field_chars < 20:
            raise ValueError(f"max_field_chars={self.max_field_chars}: use at least 20")
        if self.structured not in ("auto", "on", "off"):
            raise ValueError(f"structured={self.structured!r}: use 'auto', 'on' or 'off'")
        if self.interactor not in ("tools", "rank"):
            raise ValueError(f"interactor={self.interactor!r}: use 'tools' or 'rank'")
        if self.rank_score not in SCORE_RULES:
            raise ValueError(f"rank_score={self.rank_score!r}: use one of {SCORE_RULES}")
        if self.prior_weight < 0:
            raise ValueError(f"prior_weight={self.prior_weight}: use 0 or more")


def coordinator_prompt(agents: Sequence[SubAgent], *, staged: bool = False) -> str:
    """The coordinator's system prompt for these sub-agents.

    ``staged``: the short prompt for two-stage constrained decisions, where the schemas carry
    the format; otherwise the full prompt that spells out every action's JSON.
    """
    names = {a.name: a.description for a in agents}
    if staged:
        roles = "\n".join(f"  - {a.name}: {a.description}" for a in agents)
        return COORDINATOR_STAGED_PROMPT.format(agents=roles)
    first = "solver" if "solver" in names else agents[0].name
    return COORDINATOR_PROMPT.format(actions=action_schema_text(names), first=first)


def report_answer(text: str) -> str | None:
    """The answer a sub-agent report states (``<answer>`` tags, then 'answer: ...'), or None."""
    match = _ANSWER.search(text or "")
    if match and match.group(1).strip():
        return match.group(1).strip()
    found = _FINAL.findall(text or "")
    if found:
        return found[-1].strip().rstrip(".").strip() or None
    return None


def _tokens(message: Any, fallback_text: str) -> int:
    usage = getattr(message, "usage_metadata", None) or {}
    return int(usage.get("total_tokens") or approx_tokens(fallback_text))


def _context_message(state: PlannerState, stack: TaskStack, cfg: StackPlannerConfig) -> str:
    return coordinator_user_message(
        state["query"],
        stack.render(cfg.max_stack_chars),
        support=state.get("support"),
        observation=state.get("observation"),
        step=state.get("n_steps", 0) + 1,
        max_steps=_budget(state, cfg).max_steps,
    )


class _SubAgentRunner:
    """Runs one delegation of a sub-agent and returns its report and tool steps."""

    def __init__(self, agent: SubAgent, model: BaseChatModel) -> None:
        self.agent = agent
        self.model = model
        self.prompt = subagent_prompt(agent)
        self._graph: Any = None

    def run(
        self,
        task: str,
        overall: str | None = None,
        support: str | None = None,
        experience: str | None = None,
    ) -> tuple[str, list[dict[str, Any]]]:
        """The report text and the tool calls made, as (name, args, observation) dicts
        (``experience``, the stored payloads, is for ranking actors; this runner ignores it).

        ``overall`` (the whole task) is shown as context unless the sub-task already quotes it,
        so a terse delegation still reaches an agent that can see the problem. ``support`` is
        the coordinator's to pass on: a tool-calling sub-agent sees only its sub-task.
        """
        task = subagent_task_message(task, overall)
        if not self.agent.tools:
            reply = self.model.invoke([SystemMessage(self.prompt), HumanMessage(task)])
            return content_text(reply.content).strip(), []
        if self._graph is None:
            from langchain.agents import create_agent

            self._graph = create_agent(
                self.model, list(self.agent.tools), system_prompt=self.prompt
            )
        limit = 2 * self.agent.max_tool_calls + 2
        messages: list[BaseMessage] = [HumanMessage(task)]
        try:
            for chunk in self._graph.stream(
                {"messages": messages},
                {"recursion_limit": limit},
                stream_mode="values",
            ):
                messages = chunk["messages"]
            stopped = ""
        except GraphRecursionError:
            stopped = f"(stopped after {self.agent.max_tool_calls} tool calls without a report)"
        calls = _tool_steps(messages)
        finals = [m for m in messages if isinstance(m, AIMessage) and not m.tool_calls]
        report = content_text(finals[-1].content).strip() if finals and not stopped else ""
        if not report:
            last = calls[-1]["observation"] if calls else ""
            report = f"{stopped or '(no report)'} Last observation: {last}".strip()
        return report, calls


def _tool_steps(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    results = {
        m.tool_call_id: content_text(m.content) for m in messages if isinstance(m, ToolMessage)
    }
    steps = []
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                steps.append(
                    {
                        "name": call["name"],
                        "args": call.get("args", {}),
                        "observation": results.get(call.get("id") or "", "(no result)"),
                    }
                )
    return steps


class Coordinator:
    """The StackPlanner's nodes and routing, as methods that can be called on a state directly.

    :func:`build_stackplanner_graph` wires them: ``prepare -> decide -> validate``, then
    :meth:`after_validate` picks ``execute``, ``prepare`` or ``finalize``, and after
    ``execute`` :meth:`after_execute` picks ``prepare`` or ``finalize``.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> from genmem.graph.subagents import SubAgent
        >>> solver = SubAgent(name="solver", description="works it out")
        >>> node = Coordinator(FakeListChatModel(responses=["x"]), [solver])
        >>> out = node.validate({"reply": "not json", "n_steps": 0})
        >>> out["decision"], out["invalid_streak"], out["n_steps"]
        (None, 1, 1)
    """

    def __init__(
        self,
        lead: BaseChatModel,
        team: Sequence[SubAgent],
        *,
        worker: BaseChatModel | None = None,
        reader: BaseChatModel | None = None,
        config: StackPlannerConfig | None = None,
    ) -> None:
        """``lead``: the coordinator's model; ``team``: the sub-agents (distinct names);
        ``worker``: the sub-agents' model (None: the lead's); ``reader``: the model a ranking
        sub-agent scores commands with (a trained reader; None: the worker); ``config``: budgets
        and decoding."""
        if not team:
            raise ValueError("StackPlanner needs at least one sub-agent")
        self.names = [a.name for a in team]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"sub-agent names must be distinct; got {self.names}")
        self.lead = lead
        self.config = cfg = config or StackPlannerConfig()
        model = lead if worker is None else worker
        scorer = model if reader is None else reader
        self.runners = {
            a.name: RankedActor(a, scorer) if a.act == "rank" else _SubAgentRunner(a, model)
            for a in team
        }
        self.structured = _supports_schema(lead, coordinator_schema(self.names), cfg)
        """Whether decisions are asked for under a JSON schema (else in plain text)."""
        self.system = coordinator_prompt(team, staged=self.structured and cfg.two_stage)

    def prepare(self, state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
        """The coordinator's view of this step (a fresh run starts from nothing; a stack over
        the budget is condensed, oldest entries first)."""
        query = state.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("StackPlanner needs a non-empty 'query' in its input")
        cfg = self.config
        update: dict[str, Any] = {}
        fresh = "stack" not in state or bool(state.get("status"))
        if fresh:  # a new run (possibly on a thread that ran before): start from nothing
            update = {"n_steps": 0, "tokens": 0, "invalid_streak": 0, "best_answer": None}
            update.update(answer=None, observation="", decision=None, status="", steps=None)
            update.update(stop_reason="", stack={}, budget=_run_budget(runtime, cfg))
        stack = TaskStack.model_validate({} if fresh else state.get("stack") or {})
        max_entries = _budget({**state, **update}, cfg).max_entries
        if stack.size > max_entries:
            before = stack.ids
            stack = stack.auto_condense(max_entries)
            gone = [i for i in before if i not in stack.ids]
            update["steps"] = [
                _step(
                    state,
                    agent="system",
                    action="condense",
                    observation=f"stack over {max_entries} entries",
                    stack_edits=[f"condense {', '.join(f'#{i}' for i in gone)}"],
                )
            ]
        update["stack"] = stack.model_dump()
        view = {**state, **{k: v for k, v in update.items() if k != "steps"}}
        update["messages"] = [
            SystemMessage(self.system),
            HumanMessage(_context_message(view, stack, cfg)),
        ]
        return update

    def decide(self, state: PlannerState) -> dict[str, Any]:
        """Ask the lead model for one decision: its reply, the parsed JSON (schema-constrained
        replies only) and the tokens spent so far."""
        messages = list(state["messages"])
        prompt_text = "\n".join(content_text(m.content) for m in messages)
        if self.structured and self.config.two_stage:
            return self._decide_in_two_stages(state, messages, prompt_text)
        if self.structured:
            ids = TaskStack.model_validate(state.get("stack") or {}).ids
            schema = coordinator_schema(self.names, self.config.max_field_chars, ids)
            asked = ask_json(self.lead, schema, messages)
            raw, reply, parsed = asked.raw, asked.text, asked.parsed
        else:
            raw = self.lead.invoke(messages)
            reply, parsed = content_text(raw.content), None
        spent = _tokens(raw, prompt_text + reply)
        return {"reply": reply, "parsed": parsed, "tokens": state.get("tokens", 0) + spent}

    def _decide_in_two_stages(
        self, state: PlannerState, messages: list[BaseMessage], prompt_text: str
    ) -> dict[str, Any]:
        """The action kind in one constrained call, then its fields in a second."""
        ids = TaskStack.model_validate(state.get("stack") or {}).ids
        first = ask_json(self.lead, choice_schema(available_choices(ids)), messages)
        reply = first.text
        spent = _tokens(first.raw, prompt_text + reply)
        parsed = None
        # A reply cut off at the token cap can parse as JSON without its "action": that
        # is an unreadable decision (the budget's invalid-action count handles it).
        kind = first.parsed
        if isinstance(kind, dict) and isinstance(kind.get("action"), str):
            choice = kind["action"]
            follow = [*messages, AIMessage(reply), HumanMessage(choice_prompt(choice))]
            schema = action_schema(choice, self.names, self.config.max_field_chars, ids)
            second = ask_json(self.lead, schema, follow)
            spent += _tokens(second.raw, prompt_text + reply + second.text)
            reply = f"{reply}\n{second.text}"
            if isinstance(second.parsed, dict):
                parsed = decision_from_stages(kind, second.parsed)
        return {"reply": reply, "parsed": parsed, "tokens": state.get("tokens", 0) + spent}

    def validate(self, state: PlannerState) -> dict[str, Any]:
        """The reply as a decision; an invalid one becomes the next step's observation and
        counts towards ``max_invalid_actions``."""
        source = state.get("parsed") if state.get("parsed") is not None else state.get("reply", "")
        n = state.get("n_steps", 0)
        try:
            decision = parse_decision(source, agents=self.names)
        except InvalidAction as exc:
            streak = state.get("invalid_streak", 0) + 1
            observation = f"Your last reply was not a valid action: {exc}"
            return {
                "decision": None,
                "invalid_streak": streak,
                "n_steps": n + 1,
                "observation": observation,
                "steps": [
                    _step(
                        state,
                        agent="coordinator",
                        action="invalid",
                        arguments={"reply": (state.get("reply") or "")[:500]},
                        observation=str(exc),
                    )
                ],
            }
        return {"decision": decision.model_dump(), "invalid_streak": 0, "n_steps": n + 1}

    def execute(self, state: PlannerState) -> dict[str, Any]:
        """Run the decision: finish, push a plan, edit the stack or delegate."""
        decision = CoordinatorDecision.model_validate(state["decision"])
        action = decision.action
        stack = TaskStack.model_validate(state["stack"])
        args = action.model_dump(exclude={"action"})
        common = {"agent": "coordinator", "action": action.action, "thought": decision.thought}
        if isinstance(action, FinishAction):
            step = _step(state, arguments=args, observation="finished", **common)
            return {"answer": action.answer, "steps": [step], "observation": ""}
        if isinstance(action, PlanAction):
            stack = stack.push("plan", action.text())
            edit = f"push #{stack.top.id} plan"  # type: ignore[union-attr]
            step = _step(state, arguments=args, observation="plan recorded", **common)
            step["stack_edits"] = [edit]
            return {"stack": stack.model_dump(), "steps": [step], "observation": edit}
        if isinstance(action, ReviseAction):
            try:
                new = stack.revise(action)
            except InvalidStackEdit as exc:
                step = _step(state, arguments=args, observation=f"error: {exc}", **common)
                return {"steps": [step], "observation": f"The stack edit failed: {exc}"}
            edit = _describe_edit(stack, new, action)
            step = _step(state, arguments=args, observation="stack edited", **common)
            step["stack_edits"] = [edit]
            return {"stack": new.model_dump(), "steps": [step], "observation": edit}
        assert isinstance(action, DelegateAction)
        return self._delegate(state, action, stack, {"arguments": args, **common})

    def _delegate(
        self, state: PlannerState, action: DelegateAction, stack: TaskStack, fields: dict[str, Any]
    ) -> dict[str, Any]:
        """Run the sub-agent and push its report; ``fields`` describe the delegation's step."""
        runner = self.runners[action.agent]
        report, calls = runner.run(
            action.task, state["query"], state.get("support"), state.get("experience")
        )
        answer = report_answer(report)
        content = report[:_REPORT_CHARS] if report else "(empty report)"
        stack = stack.push("result", content, agent=action.agent, task=action.task)
        entry = stack.top
        assert entry is not None
        edit = f"push #{entry.id} result from {action.agent}"
        steps = [_step(state, observation=content, **fields)]
        steps[0]["stack_edits"] = [edit]
        steps += _call_steps(state, action.agent, calls)
        update: dict[str, Any] = {
            "stack": stack.model_dump(),
            "steps": steps,
            "observation": f"{edit}" + (f" (it reports: {answer})" if answer else ""),
        }
        if answer:
            update["best_answer"] = answer
        return update

    def finalize(self, state: PlannerState) -> dict[str, Any]:
        """The run's answer, status and trajectory (a run stopped by a budget answers with the
        best it has, and may give the whole task to one sub-agent as a fallback)."""
        answer = state.get("answer")
        steps: list[dict[str, Any]] = []
        reason = ""
        status: str = "finished"
        if answer is None:
            reason = _stop_reason(state, self.config) or "stopped without an answer"
            answer = state.get("best_answer")
            if answer is None:
                answer = _last_report_line(TaskStack.model_validate(state.get("stack") or {}))
                if answer is not None:
                    reason += "; no report stated an answer, so the latest report's last line"
            status = "budget"
        # The interactor, where the environment gave one, is the one that can act on it; a run
        # that never let it act has not attempted an environment's task, whatever it answered.
        fallback = "interactor" if "interactor" in self.runners else "solver"
        idle = fallback == "interactor" and not any(
            s.get("agent") == "interactor" for s in state.get("steps", [])
        )
        if self.config.fallback_solver and fallback in self.runners and (answer is None or idle):
            answer, steps = self._fallback(state, fallback)
            why = "never let it act" if idle else "ended without an answer"
            reason = (reason + "; " if reason else "") + (
                f"the run {why}, so the {fallback} took the whole task as a fallback"
            )
        if status != "finished" or idle:
            status = "budget" if answer else "failed"
        all_steps = [*state.get("steps", []), *steps]
        trajectory = Trajectory(
            query=state["query"],
            support=state.get("support"),
            steps=[StepRecord.model_validate(s) for s in _renumber(all_steps)],
            answer=answer,
            status=status,  # type: ignore[arg-type]
            stop_reason=reason,
        )
        return {
            "answer": answer,
            "status": status,
            "stop_reason": reason,
            "steps": steps,
            "trajectory": trajectory.model_dump(),
        }

    def _fallback(self, state: PlannerState, agent: str) -> tuple[str | None, list[dict[str, Any]]]:
        """The whole task given to ``agent`` once: its answer and the steps it took."""
        report, calls = self.runners[agent].run(
            state["query"], None, state.get("support"), state.get("experience")
        )
        answer = report_answer(report) or (report.strip().splitlines() or [None])[-1]
        step = _step(
            state,
            agent=agent,
            action="fallback",
            arguments={"task": state["query"]},
            observation=report[:_REPORT_CHARS],
        )
        return answer, [step, *_call_steps(state, agent, calls)]

    def after_validate(self, state: PlannerState) -> str:
        """``execute`` a valid decision; else ``prepare`` the next step, or ``finalize`` once a
        budget is spent."""
        if state.get("decision") is not None:
            return "execute"
        return "finalize" if _stop_reason(state, self.config) else "prepare"

    def after_execute(self, state: PlannerState) -> str:
        """``finalize`` once answered or a budget is spent; else ``prepare`` the next step."""
        if state.get("answer") is not None:
            return "finalize"
        return "finalize" if _stop_reason(state, self.config) else "prepare"


def build_stackplanner_graph(
    model: BaseChatModel | str = "local",
    *,
    subagent_model: BaseChatModel | str | None = None,
    agents: Sequence[SubAgent] | None = None,
    solver_tools: Sequence[BaseTool] = (),
    research_tools: Sequence[BaseTool] = (),
    interactor_tools: Sequence[BaseTool] = (),
    interactor_prior: ActionPrior | None = None,
    config: StackPlannerConfig | None = None,
    reader_model: BaseChatModel | str | None = None,
) -> StateGraph:
    """The uncompiled StackPlanner graph (input: query, support; output: answer, trajectory).

    ``reader_model``: the model a ranking interactor scores commands with (a reader trained by
    ``genmem train reader``); None: the sub-agents' model.
    """
    lead = load_chat_model(model)
    worker = None if subagent_model is None else load_chat_model(subagent_model)
    reader = None if reader_model is None else load_chat_model(reader_model)
    cfg = config or StackPlannerConfig()
    if agents is None:
        agents = default_subagents(
            solver_tools=solver_tools,
            research_tools=research_tools,
            interactor_tools=interactor_tools,
            interactor=cfg.interactor,
            rank_score=cfg.rank_score,
            interactor_prior=interactor_prior,
            prior_weight=cfg.prior_weight,
        )
    node = Coordinator(lead, list(agents), worker=worker, reader=reader, config=cfg)
    g = StateGraph(
        PlannerState,
        context_schema=PlannerContext,
        input_schema=PlannerInput,
        output_schema=PlannerOutput,
    )
    g.add_node("prepare", node.prepare)
    g.add_node("decide", node.decide)
    g.add_node("validate", node.validate)
    g.add_node("execute", node.execute)
    g.add_node("finalize", node.finalize)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "decide")
    g.add_edge("decide", "validate")
    g.add_conditional_edges("validate", node.after_validate, ["execute", "prepare", "finalize"])
    g.add_conditional_edges("execute", node.after_execute, ["prepare", "finalize"])
    g.add_edge("finalize", END)
    return g


def _call_steps(
    state: PlannerState, agent: str, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The step records of a sub-agent's tool calls, numbered after the step that ran it."""
    return [
        _step(
            state,
            offset=i,
            agent=agent,
            action="tool",
            arguments={"tool": call["name"], "args": call["args"]},
            observation=call["observation"],
        )
        for i, call in enumerate(calls, 1)
    ]


def _last_report_line(stack: TaskStack) -> str | None:
    """The last line of the newest sub-agent result on the stack, or None."""
    for entry in reversed(stack.entries):
        if entry.kind == "result" and entry.content.strip():
            return entry.content.strip().splitlines()[-1].strip()
    return None


def _supports_schema(model: BaseChatModel, schema: dict[str, Any], cfg: StackPlannerConfig) -> bool:
    """Whether to ask the lead model for schema-constrained replies (else plain text)."""
    if cfg.structured == "off":
        return False
    if cfg.structured == "on":
        json_schema_runnable(model, schema)  # a model that takes no schema raises here
        return True
    return accepts_json_schema(model, schema)


def _run_budget(runtime: Runtime[PlannerContext], cfg: StackPlannerConfig) -> dict[str, int]:
    """The config's budget with the run context's overrides, checked."""
    context = runtime.context or {}
    fields = ("max_steps", "max_entries", "max_tokens", "max_invalid_actions")
    overrides = {k: context[k] for k in fields if isinstance(context, dict) and k in context}
    return asdict(replace(cfg.budget, **overrides))


def _budget(state: Any, cfg: StackPlannerConfig) -> StackBudgetConfig:
    return StackBudgetConfig(**state["budget"]) if state.get("budget") else cfg.budget


def _stop_reason(state: PlannerState, cfg: StackPlannerConfig) -> str | None:
    return _budget(state, cfg).exceeded(
        steps=state.get("n_steps", 0),
        tokens=state.get("tokens", 0),
        invalid_actions=state.get("invalid_streak", 0),
    )


def _step(state: PlannerState, *, offset: int = 0, **fields: Any) -> dict[str, Any]:
    record = StepRecord(step=len(state.get("steps", [])) + offset, **fields)
    return record.model_dump()


def _renumber(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**s, "step": i} for i, s in enumerate(steps)]


def _describe_edit(old: TaskStack, new: TaskStack, action: ReviseAction) -> str:
    if action.op == "update":
        return f"push #{new.top.id} note"  # type: ignore[union-attr]
    added = [e for e in new.entries if e.id not in old.ids]
    ids = ", ".join(f"#{i}" for i in action.entries)
    kind = "summary" if action.op == "condense" else "failure note"
    return f"{action.op} {ids} into #{added[0].id} {kind}" if added else f"{action.op} {ids}"


def compile_planner(chat: BaseChatModel | str, tools: Any, max_steps: int) -> Any:
    """StackPlanner compiled with an environment's ``tools`` (``solver``, ``research`` and
    ``interactor`` lists) and a ``max_steps`` budget."""
    from genmem.graph.stack import StackBudgetConfig

    return build_stackplanner_graph(
        chat,
        solver_tools=tools.solver,
        research_tools=tools.research,
        interactor_tools=tools.interactor,
        config=StackPlannerConfig(budget=StackBudgetConfig(max_steps=max_steps)),
    ).compile()
