"""A sub-agent that acts in a game by ranking its valid commands instead of writing tool calls.

The tool-calling interactor asks the model to write a Hermes tool call naming one of the valid
commands. A 135M model spends most of its turns on that format; in the TextWorld pilot it won
no game. This runner keeps the same ``<prefix>_reset`` / ``<prefix>_step`` tools and the same
trajectory records, but each turn it scores every valid command (read from the tool message's
artifact) as the model's whole reply (:mod:`genmem.policies.choice_scoring`) and plays the
most likely one. It can never play an invalid command, and one turn costs one prompt pass.

A delegation goes on where the game stands (the reset tool's ``resume``, which uses no step;
only a game without it is restarted), and the commands shown as played are the episode's. A
command already played from the same observation, or one whose last result is the observation
now shown (``inventory`` right after ``inventory``), is not offered again while another remains,
so a ranking that favours ``look`` cannot loop. Notes the episode keeps (``notes`` in the
artifact: a recipe read earlier) stay in the prompt on every later turn, as data. The
retrieved experience, when the run has one, is shown to the ranker as a data block: it, not the
coordinator, chooses what is played.

``score`` picks how a command's log-probability becomes its rank
(:func:`~genmem.policies.choice_scoring.rank_scores`): ``mean`` per token, ``sum``, or
``calibrated``, the sum minus the command's log-probability after the same question with no
game state (kept per command, so it costs one pass per new command).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from genmem.policies.chat_local import content_text
from genmem.policies.choice_scoring import (
    ChoiceLogProb,
    ChoiceScorer,
    ChoiceScoringUnavailable,
    ScoreRule,
    rank_scores,
)
from genmem.policies.prompts import (
    RANKING_PROMPT,
    ranking_stateless_message,
    ranking_user_message,
)

if TYPE_CHECKING:
    from genmem.graph.subagents import SubAgent

__all__ = ["RankedActor", "offered_commands", "ranking_prompt", "stateless_prompt"]


def ranking_prompt(
    task: str,
    observation: str,
    commands: Sequence[str],
    played: Sequence[str],
    support: str,
    notes: Sequence[str] = (),
) -> list[Any]:
    """The conversation the ranker scores each valid command against.

    ``notes`` is game text the episode keeps in view once seen (a recipe read earlier), which
    the last observation and the short command history would otherwise lose.
    """
    user = ranking_user_message(task, observation, commands, played, support, notes)
    return [SystemMessage(RANKING_PROMPT), HumanMessage(user)]


def stateless_prompt(commands: Sequence[str] = ()) -> list[Any]:
    """The conversation a calibrated score subtracts: the ranker's question, no game state."""
    return [SystemMessage(RANKING_PROMPT), HumanMessage(ranking_stateless_message(commands))]


def offered_commands(
    commands: Sequence[str],
    observation: str,
    tried: dict[str, set[str]],
    result: dict[str, str],
) -> list[str]:
    """The valid commands the ranker chooses among now.

    A command already played from ``observation`` (``tried``: observation -> commands played
    from it) or whose last result is ``observation`` (``result``: command -> the observation it
    last gave) is left out while another remains.
    """
    fresh = [
        c
        for c in commands
        if c not in tried.get(observation, set()) and result.get(c) != observation
    ]
    return fresh or list(commands)


def _tool(tools: Sequence[BaseTool], suffix: str, agent: str) -> BaseTool:
    found = [t for t in tools if t.name.endswith(suffix)]
    if len(found) != 1:
        names = [t.name for t in tools]
        raise ValueError(
            f"sub-agent {agent!r} ranks commands and needs exactly one '*{suffix}' tool; got "
            f"{names}. Give it a game's reset and step tools, or use act='tools'"
        )
    return found[0]


class RankedActor:
    """Plays one delegation by ranking valid commands with the model's likelihood."""

    def __init__(self, agent: SubAgent, model: BaseChatModel) -> None:
        if not isinstance(model, ChoiceScorer):
            raise ChoiceScoringUnavailable(
                f"sub-agent {agent.name!r} ranks commands, which needs a chat model that scores "
                f"replies (a local transformers model, 'local' or 'local:<dir>'); got "
                f"{type(model).__name__}. Use the tool-calling interactor with this model"
            )
        self.agent = agent
        self.model = model
        self.score: ScoreRule = agent.score
        self._stateless: dict[str, ChoiceLogProb] = {}  # command -> its score with no state
        self._episode: str | None = None
        self._tried: dict[str, set[str]] = {}
        self._result: dict[str, str] = {}
        self.reset = _tool(agent.tools, "_reset", agent.name)
        self.step = _tool(agent.tools, "_step", agent.name)

    def _call(self, tool: BaseTool, args: dict[str, Any], n: int) -> ToolMessage:
        call = {"name": tool.name, "args": args, "id": f"rank-{n}", "type": "tool_call"}
        message = tool.invoke(call)
        if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
            raise TypeError(
                f"tool {tool.name!r} must return its view as an artifact "
                "(response_format='content_and_artifact') for a ranking sub-agent"
            )
        return message

    def _seen(self, episode: str | None) -> tuple[dict[str, set[str]], dict[str, str]]:
        """What this episode has tried from each observation, and each command's last result
        (fresh for a new episode; a game without episode ids gets fresh ones each delegation)."""
        if episode is None or episode != self._episode:
            self._episode, self._tried, self._result = episode, {}, {}
        return self._tried, self._result

    def _prior(
        self, support: str, options: Sequence[str], view: dict[str, Any]
    ) -> list[float] | None:
        """The experience's bonus per option, or None (no prior, no weight, nothing it reads)."""
        prior, weight = self.agent.prior, self.agent.prior_weight
        if prior is None or weight == 0 or not support.strip():
            return None
        bonus = prior(support, options, view)
        if bonus is not None and len(bonus) != len(options):
            raise ValueError(
                f"the action prior gave {len(bonus)} values for {len(options)} commands"
            )
        return bonus

    def scores(self, prompt: list[Any], options: Sequence[str]) -> list[float]:
        """Each option's score under this actor's rule (higher plays first)."""
        model: Any = self.model
        given = model.choice_logprobs(prompt, options)
        if self.score != "calibrated":
            return rank_scores(self.score, given)
        new = [c for c in options if c not in self._stateless]
        if new:
            base = model.choice_logprobs(stateless_prompt(), new)
            self._stateless.update(zip(new, base, strict=True))
        return rank_scores(self.score, given, [self._stateless[c] for c in options])

    def run(
        self,
        task: str,
        overall: str | None = None,
        support: str | None = None,
        experience: str | None = None,
    ) -> tuple[str, list[dict[str, Any]]]:
        """The report and the tool calls made, as (name, args, observation) dicts.

        ``support`` (the retriever's text) is shown to the model; the action prior reads
        ``experience`` (the retrieved entries as stored) when given, else ``support``.
        """
        goal = overall.strip() if overall and overall.strip() else task
        resume = (self.reset.metadata or {}).get("resume")
        if callable(resume):  # a later delegation goes on where the game stands
            text, view = resume()
            went_on = bool(view.get("history"))  # steps played before: not a fresh start
            name = (
                self.reset.name.removesuffix("_reset") + "_resume" if went_on else self.reset.name
            )
            calls = [{"name": name, "args": {}, "observation": text}]
        else:
            message = self._call(self.reset, {}, 0)
            text, view = content_text(message.content), message.artifact
            calls = [{"name": self.reset.name, "args": {}, "observation": text}]
        played: list[str] = []
        # observation -> commands played from it; command -> the observation it last gave.
        # Kept for the episode, so where one delegation ends does not change what is offered.
        tried, result = self._seen(view.get("episode"))
        while view["commands"] and len(played) < self.agent.max_tool_calls:
            state = view["observation"]
            options = offered_commands(view["commands"], state, tried, result)
            history = view.get("history", played)  # the episode's, earlier delegations too
            prompt = ranking_prompt(
                goal, state, view["commands"], history, support or "", view.get("notes", ())
            )
            scores = self.scores(prompt, options)
            if agent_prior := self._prior(experience or support or "", options, view):
                scores = [
                    s + self.agent.prior_weight * p
                    for s, p in zip(scores, agent_prior, strict=True)
                ]
            command = options[max(range(len(options)), key=scores.__getitem__)]
            tried.setdefault(state, set()).add(command)
            played.append(command)
            message = self._call(self.step, {"command": command}, len(played))
            observation = content_text(message.content)
            calls.append(
                {"name": self.step.name, "args": {"command": command}, "observation": observation}
            )
            view = message.artifact
            result[command] = view["observation"]
        outcome = "completed" if view.get("won") else "not completed"
        report = (
            f"Played {len(played)} command(s): {'; '.join(played) or '(none)'}. "
            f"Last observation: {view['observation']} <answer>{outcome}</answer>"
        )
        return report, calls
