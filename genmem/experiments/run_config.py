"""The model, addressing and budgets of a graph run, shared by evaluation and evolution.

:class:`GraphRunConfig` owns each of these values once: :class:`~genmem.experiments.evaluate.
EvalConfig` and :class:`~genmem.experiments.evolution_config.EvolveConfig` extend it, and the
``genmem`` commands generate their ``--model``, ``--candidates``, ``--no-rerank``, ``--allowed``,
``--addresser``, ``--memory-k``, ``--max-steps``, ``--max-new-tokens`` and ``--interactor`` flags
from its fields (:mod:`genmem.cli.fields`), so a default is written here and nowhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from genmem.graph.stack import DEFAULT_MAX_STEPS
from genmem.policies.backends import DEFAULT_MODEL_SPEC
from genmem.policies.chat_local import DEFAULT_MAX_NEW_TOKENS
from genmem.policies.types import RETRIEVER_ALLOWED, AllowedMode
from genmem.tools.lookup import DEFAULT_LOOKUP_K

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from genmem.envs.base import Environment
    from genmem.graph.retriever import RetrieverConfig
    from genmem.policies.experience_writer import ExperienceWriter

__all__ = ["DEFAULT_CANDIDATES", "GraphRunConfig"]

DEFAULT_CANDIDATES = 8
"""SID candidates decoded per lookup in a graph run, reranked against the task."""


class GraphRunConfig(BaseModel):
    """How every graph run of an experiment addresses, reads memory and spends its budget."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default=DEFAULT_MODEL_SPEC, description="Model spec for every role.")
    candidates: int = Field(
        default=DEFAULT_CANDIDATES, ge=1, le=50, description="Candidate budget per lookup."
    )
    rerank: bool = Field(
        default=True,
        description="Rerank the candidates against the task; without it they keep their own order.",
    )
    allowed: AllowedMode = Field(
        default=RETRIEVER_ALLOWED,
        description="SIDs MemRetriever may generate: occupied (only addresses that hold "
        "entries), prefix (any leaf under an occupied parent) or all.",
    )
    addresser: Literal["auto", "generative", "quantizer"] = Field(
        default="auto",
        description="What chooses an SID: generative (the policy decodes it), quantizer (encode, "
        "then quantise with the bank's frozen codebooks: the cold-start path) or auto "
        "(generative when the policy was SID-aligned to the bank's codebooks, else quantizer); "
        "each record says which did.",
    )
    memory_k: int = Field(
        default=DEFAULT_LOOKUP_K, ge=1, le=50, description="Entries a lookup returns."
    )
    max_steps: int = Field(
        default=DEFAULT_MAX_STEPS, ge=1, description="Coordinator (StackPlanner) steps per task."
    )
    max_new_tokens: int | None = Field(
        default=None,
        ge=1,
        description=f"Reply cap of every model call (default {DEFAULT_MAX_NEW_TOKENS} for a "
        "local model; a served model keeps its own).",
    )
    interactor: Literal["tools", "rank"] = Field(
        default="tools",
        description="How the interactor plays a game (TextWorld, ALFWorld): tools writes "
        "tool calls; rank scores every valid command by the model's likelihood and "
        "plays the best, which a small local model can do (local models only).",
    )
    reader: str | None = Field(
        default=None,
        description="Model spec --interactor rank scores commands with: a reader trained by "
        "genmem train reader (local:DIR); default: --model. Only the ranking interactor reads "
        "with it; every other role keeps --model.",
    )
    rank_score: Literal["mean", "sum", "calibrated"] = Field(
        default="mean",
        description="How --interactor rank scores a command: mean log-probability per token, "
        "the sum, or calibrated (the sum minus the command's sum with no game state).",
    )
    prior_weight: float = Field(
        default=0.0,
        ge=0.0,
        description="Weight of the environment's action prior (a retrieved cooking procedure's "
        "templates and rules) added to --interactor rank's scores; 0 turns it off.",
    )
    rewrite: bool = Field(
        default=True,
        description="MemRetriever rewrites the entry it read for the task (the paper); without "
        "it the planner gets the entry as stored, as when the gate refuses a rewrite, and the "
        "run skips that model call.",
    )
    writer: Literal["auto", "model", "template"] = Field(
        default="auto",
        description="Who writes MemEvolver's payloads: model (the paper), template (the "
        "environment's code distiller, cooking games; the model then chooses insert, retain, "
        "replace or merge) or auto (template for a local model where the environment has one, "
        "else model).",
    )

    def retriever_config(self, beam: int | None = None) -> RetrieverConfig:
        """MemRetriever's settings for these runs (``beam``: candidates decoded, default
        :attr:`candidates`; reranked only when there are several)."""
        from genmem.graph.retriever import RetrieverConfig

        beam = self.candidates if beam is None else beam
        return RetrieverConfig(
            beam=beam,
            rerank=self.rerank and beam > 1,
            allowed=self.allowed,
            addresser=self.addresser,
            rewrite=self.rewrite,
        )

    def reader_model(self) -> BaseChatModel | None:
        """The chat model ``--interactor rank`` scores commands with (``reader``), or None: the
        graph's own model does."""
        if not self.reader:
            return None
        from genmem.policies.backends import capped_chat_model

        return capped_chat_model(self.reader, self.max_new_tokens)

    def experience_writer(self, env: Environment) -> ExperienceWriter | None:
        """The writer MemEvolver gets in ``env`` (None: the model writes).

        Raises:
            ValueError: ``writer`` is ``template`` and ``env`` has no template distiller.
        """
        if self.writer == "model":
            return None
        found = env.experience_writer()
        if found is None and self.writer == "template":
            raise ValueError(
                f"--writer template: the {type(env).__name__} environment has no template "
                "distiller (cooking games do); use --writer model or auto"
            )
        from genmem.policies.addressing import is_local_spec

        return found if self.writer == "template" or is_local_spec(self.model) else None
