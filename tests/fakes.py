"""Deterministic fakes shared by the test suite (one module, grouped by what they stand in for)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from pydantic import Field

from genmem.memory.encoders import format_for_encoding
from genmem.training.rewards import JudgeVerdict

__all__ = ["HashEncoder", "RoutingChat", "clustered_embeddings", "gsm8k_texts"]

_GSM8K = Path(__file__).resolve().parents[1] / "genmem" / "envs" / "data" / "gsm8k" / "train.jsonl"


# --- encoders -----------------------------------------------------------------------------------


class HashEncoder:
    """An :class:`~genmem.memory.encoders.Encoder` whose vector is a pure function of the text.

    Each (prefixed) text seeds a generator with its sha256, so equal texts give equal unit
    vectors and different texts give unrelated ones; nothing is loaded.
    """

    def __init__(self, dim: int = 32, *, prefix: str | None = None) -> None:
        self._dim = dim
        self.prefix = prefix

    @property
    def id(self) -> str:
        """Spec-like name of the fake."""
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return self._dim

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False
    ) -> np.ndarray:
        """Unit float32 rows, one per text."""
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            full = format_for_encoding(text, self.prefix).encode()
            seed = int.from_bytes(hashlib.sha256(full).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self._dim)
            out[i] = v / np.linalg.norm(v)
        return out


# --- embedding data -----------------------------------------------------------------------------


def clustered_embeddings(
    n: int = 600, d: int = 16, *, clusters: int = 12, skew: float = 0.0, seed: int = 0
) -> np.ndarray:
    """Unit float32 rows around ``clusters`` centres; ``skew > 0`` makes cluster sizes Zipf-like.

    Cluster ``k`` gets weight ``(k + 1) ** -skew``, so ``skew=2`` puts most rows in a few
    clusters (the data a size-balanced assignment should spread out).
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d))
    weights = (np.arange(clusters) + 1.0) ** -skew
    labels = rng.choice(clusters, size=n, p=weights / weights.sum())
    x = centres[labels] + 0.3 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def gsm8k_texts(n: int) -> list[str]:
    """The first ``n`` shipped GSM8K problems as ``question + answer`` texts (real text data)."""
    out = []
    with _GSM8K.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out.append(f"{row['question']}\n{row['answer']}")
            if len(out) == n:
                break
    return out


# --- chat models ---------------------------------------------------------------------------------

_SID_TEXT = re.compile(r"(?:<SID_L\d+_\d+>){4}")


class RoutingChat(FakeListChatModel):
    """Answers each graph call by what it is: a decision, a rewrite, a plan, a verdict.

    Records every prompt (all messages of a call, joined) and every judge prompt apart.
    """

    responses: list[str] = Field(default_factory=lambda: ["unused"])
    prompts: list[str] = Field(default_factory=list)
    judged: list[str] = Field(default_factory=list)
    answer: str = "7"
    support: str = "Work out the price of one item, then multiply."
    lesson: str = "find the price of one item before multiplying."
    judge_error: str | None = None
    planner_error: str | None = None
    decisions: int = 0

    def _call(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        text = "\n".join(str(m.content) for m in messages)
        self.prompts.append(text)
        last = str(messages[-1].content)
        if "give your decision" in last:
            sid = _SID_TEXT.search(last).group(0)  # the slot the instruction names
            op = "revise" if "holds an entry" in last else "insert"
            self.decisions += 1
            # grounded like a real lesson: it names the kind of problem it was learnt on
            query = text.split("Task:\n", 1)[1].split("\n\nTrajectory", 1)[0]
            payload = f"Lesson {self.decisions}: {self.lesson} Learnt on: {query[:60]}"
            return json.dumps({"analysis": "a", "op": op, "sid": sid, "payload": payload})
        if any(isinstance(m, ToolMessage) for m in messages):
            # grounded like a real rewrite: it names the task it is for
            task = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
            return f"<answer>{self.support} For: {task[:60]}</answer>"
        if self.planner_error:
            raise RuntimeError(self.planner_error)
        return json.dumps({"thought": "t", "action": {"action": "finish", "answer": self.answer}})

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # the judge only
        if schema is not JudgeVerdict:
            raise NotImplementedError("plain text for everything but the judge")

        def verdict(messages: list) -> JudgeVerdict:
            self.judged.append("\n".join(str(m.content) for m in messages))
            if self.judge_error:
                raise ConnectionError(self.judge_error)
            return JudgeVerdict(reason="ok", score=1)

        return RunnableLambda(verdict)
