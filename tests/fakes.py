"""Deterministic fakes shared by the test suite (one module, grouped by what they stand in for)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from pydantic import ConfigDict, Field, PrivateAttr

from genmem.memory.encoders import format_for_encoding
from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec
from genmem.policies.chat_local import HermesToolsMixin
from genmem.policies.types import SIDCandidate
from genmem.training.rewards import JudgeVerdict

__all__ = [
    "Asked",
    "CountingEncoder",
    "FakeChat",
    "FakeCodebooks",
    "FixedGenerator",
    "HashEncoder",
    "Overlap",
    "RoutingChat",
    "ScoringChat",
    "by_role",
    "clustered_embeddings",
    "finish_reply",
    "gsm8k_texts",
    "role_of",
    "tiny_llama",
]

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


class CountingEncoder(HashEncoder):
    """A :class:`HashEncoder` that records, in :attr:`seen`, every text it is asked to encode."""

    def __init__(self, dim: int = 16, *, prefix: str | None = None) -> None:
        super().__init__(dim, prefix=prefix)
        self.seen: list[str] = []

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False
    ) -> np.ndarray:
        """Unit float32 rows, one per text (the texts recorded)."""
        self.seen.extend(texts)
        return super().encode(texts, batch_size=batch_size, progress=progress)


# --- SID generators -----------------------------------------------------------------------------


class FixedGenerator:
    """An SID generator for control-flow tests: proposes the same SIDs for every context, or
    those ``sids(context)`` picks, best first; it records each context and ``k`` it was asked.

    Example:
        >>> gen = FixedGenerator([SID((1, 2, 3, 4))])
        >>> [c.sid for c in gen.generate("ctx", k=3)], gen.calls, gen.ks
        (['<SID_L1_1><SID_L2_2><SID_L3_3><SID_L4_4>'], ['ctx'], [3])
    """

    def __init__(
        self,
        sids: Sequence[SID | str] | Callable[[str], Sequence[SID | str]],
        *,
        spec: SIDSpec = DEFAULT_SPEC,
        addresser: str = "custom",
    ) -> None:
        self.sids = sids if callable(sids) else [str(s) for s in sids]
        self.spec = spec
        self.addresser = addresser
        """What the graphs report as the addresser that proposed the SIDs."""
        self.calls: list[str] = []
        """Every context decoded from, in order."""
        self.ks: list[int] = []
        """Every ``k`` asked for, in order."""

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """The first ``k`` SIDs, scored ``0, -1, ...`` (an exception ``sids`` raises, raised)."""
        self.calls.append(context)
        self.ks.append(k)
        sids = self.sids(context) if callable(self.sids) else self.sids
        return [SIDCandidate(sid=str(s), score=-float(i)) for i, s in enumerate(sids[:k])]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for each context."""
        return [self.generate(c, k) for c in contexts]


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

Reply = str | AIMessage
"""What a fake chat model answers: text, or a whole message (tool calls, say)."""
ReplyFunc = Callable[[list[BaseMessage]], Reply]
"""A reply worked out from the messages of the call."""

_ROLE_MARKS = {
    "MemEvolver": "evolver",
    "MemRetriever": "retriever",
    "small team": "team",
    "rate from 0 to 10": "judge",
    "rewrite one entry": "rebuild",
    "combine two entries": "fuse",
}
"""Words of each agent's system prompt that no other agent's prompt holds, and its role name.
``team`` is StackPlanner's coordinator and its sub-agents (they are all of "a small team")."""


def role_of(messages: Sequence[BaseMessage]) -> str:
    """The agent a call comes from, read off its first (system) message; ``other`` if unknown."""
    system = str(messages[0].content) if messages else ""
    return next((role for mark, role in _ROLE_MARKS.items() if mark in system), "other")


def by_role(**replies: Reply | ReplyFunc) -> ReplyFunc:
    """A :attr:`FakeChat.reply` that answers each role (see :func:`role_of`) with its entry.

    An entry is a fixed reply or a function of the messages; roles without one get ``other``.
    """

    def reply(messages: list[BaseMessage]) -> Reply:
        role = role_of(messages)
        if role not in replies and "other" not in replies:
            raise AssertionError(f"by_role has no reply for a {role!r} call and no 'other'")
        answer = replies.get(role, replies.get("other"))
        return answer(messages) if callable(answer) else answer  # type: ignore[return-value]

    return reply


def finish_reply(answer: str) -> str:
    """StackPlanner's coordinator finishing at once with ``answer`` (a text-mode decision)."""
    return json.dumps({"thought": "t", "action": {"action": "finish", "answer": answer}})


class Asked(NamedTuple):
    """One structured-output call a :class:`FakeChat` answered."""

    schema: Any
    method: str | None
    messages: list[BaseMessage]


class FakeChat(BaseChatModel):
    """The test suite's chat model: scripted replies, every call recorded, failures on demand.

    Text calls answer with :attr:`reply` if it is set, else with :attr:`responses` in turn
    (starting over after the last, as LangChain's list fakes do). A reply may be an
    :class:`AIMessage` with tool calls; an exception among the responses, or raised by
    ``reply`` or ``before``, is what the call raises. ``bind_tools`` returns the model itself,
    so tool-calling agents work on it. ``with_structured_output`` works only when
    :attr:`structured` is set; without it the model answers in text only, like a model with no
    schema support (``NotImplementedError``).

    Example:
        >>> chat = FakeChat(responses=["one", "two"])
        >>> [chat.invoke("hi").content for _ in range(3)]
        ['one', 'two', 'one']
        >>> chat.texts()
        ['hi', 'hi', 'hi']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    responses: list[Any] = Field(default_factory=list)
    """Replies in turn (:data:`Reply` or an exception to raise); a model with none fails
    (``IndexError``). Typed ``Any`` so that pydantic leaves messages and exceptions as given."""
    reply: ReplyFunc | None = None
    """Replies worked out from each call's messages, used instead of ``responses``."""
    structured: list[Any] | Callable[[Any, list[BaseMessage]], Any] | None = None
    """Structured replies: each used once, in turn (an exception is raised), or worked out
    from ``(schema, messages)``. None: ``with_structured_output`` is not supported."""
    temperature: float | None = None
    """The sampling temperature callers read off the model (None: unknown); the fake itself
    never samples, a ``reply`` that does can read it."""
    before: Callable[[], None] | None = None
    """Runs at each text call, after it is recorded and before the reply (to wait, to sleep,
    to change the world under the caller, to fail)."""
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    """Every text call's messages, in order."""
    asked: list[Asked] = Field(default_factory=list)
    """Every structured call, in order."""
    bound: list[tuple[list[str], Any]] = Field(default_factory=list)
    """Every ``bind_tools``: the tools' names and the ``tool_choice``."""
    _turn: int = PrivateAttr(default=0)
    _taken: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    """Calls may come from several threads at once: each takes its own scripted reply."""

    @property
    def _llm_type(self) -> str:
        return "genmem-test-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        messages = list(messages)
        self.prompts.append(messages)
        if self.before is not None:
            self.before()
        reply = self._reply(messages)
        message = reply if isinstance(reply, AIMessage) else AIMessage(reply)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _reply(self, messages: list[BaseMessage]) -> Reply:
        """The reply to one text call (subclasses route by what the call is)."""
        if self.reply is not None:
            return self.reply(messages)
        with self._lock:
            reply = self.responses[self._turn]
            self._turn = self._turn + 1 if self._turn < len(self.responses) - 1 else 0
        if isinstance(reply, Exception):
            raise reply
        return reply

    def texts(self, role: str | None = None, *, system: bool = True) -> list[str]:
        """The recorded text calls (of ``role`` only), each as its messages' contents joined;
        ``system=False`` leaves the system prompt out (what the run put before the model)."""
        return [
            "\n".join(str(m.content) for m in messages if system or m.type != "system")
            for messages in self.prompts
            if role is None or role_of(messages) == role
        ]

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kw: Any
    ) -> FakeChat:
        self.bound.append(([getattr(t, "__name__", str(t)) for t in tools], tool_choice))
        return self

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, method: str | None = None, include_raw: bool = False, **kw: Any
    ) -> RunnableLambda:
        if self.structured is None:
            raise NotImplementedError("this FakeChat answers in text only (no `structured`)")
        return self._structured_runnable(schema, method, include_raw)

    def _structured_runnable(
        self, schema: Any, method: str | None, include_raw: bool
    ) -> RunnableLambda:
        def answer(messages: Sequence[BaseMessage]) -> Any:
            asked = Asked(schema, method, list(messages))
            self.asked.append(asked)
            reply = self._structured_reply(asked)
            if isinstance(reply, Exception):
                raise reply
            if include_raw:
                return {"raw": AIMessage(json.dumps(reply)), "parsed": reply, "parsing_error": None}
            return reply

        return RunnableLambda(answer)

    def _structured_reply(self, asked: Asked) -> Any:
        """The reply to one structured call (subclasses route by schema)."""
        if callable(self.structured):
            return self.structured(asked.schema, asked.messages)
        assert self.structured is not None
        with self._lock:
            reply = self.structured[self._taken]  # IndexError once the script is used up
            self._taken += 1
        return reply


class TextJsonChat(HermesToolsMixin, FakeListChatModel):
    """Scripted text replies, parsed by the JSON-schema binding ``ChatLocal`` uses (a model
    that writes its JSON as text instead of taking the schema natively)."""


class ScoringChat(FakeChat):
    """A :class:`FakeChat` that also scores choices (a ``ChoiceScorer``), best first in
    :attr:`prefer`; choices it does not prefer come after, in the order given."""

    prefer: list[str] = Field(default_factory=list)
    scored: list[list[BaseMessage]] = Field(default_factory=list)
    """Every ``choice_logprobs`` call's messages."""

    def choice_logprobs(self, messages: Sequence[Any], choices: Sequence[str]) -> list[Any]:
        from genmem.policies.choice_scoring import ChoiceLogProb

        self.scored.append(list(messages))
        rank = {c: i for i, c in enumerate(self.prefer)}
        return [ChoiceLogProb(-float(rank.get(c, len(rank) + i)), 1) for i, c in enumerate(choices)]


_SID_TEXT = re.compile(r"(?:<SID_L\d+_\d+>)+")


class RoutingChat(FakeChat):
    """Answers each call of the closed loop by what it is: a decision, a rewrite, a plan, and
    the judge's verdict (the only structured call it takes; it records them in ``asked``)."""

    answer: str = "7"
    support: str = "Work out the price of one item, then multiply."
    lesson: str = "find the price of one item before multiplying."
    judge_error: str | None = None
    planner_error: str | None = None
    decisions: int = 0

    @property
    def judged(self) -> list[str]:
        """Every judge prompt, its messages joined."""
        return ["\n".join(str(m.content) for m in a.messages) for a in self.asked]

    def _reply(self, messages: list[BaseMessage]) -> Reply:
        text = "\n".join(str(m.content) for m in messages)
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
        return finish_reply(self.answer)

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, **kwargs: Any
    ) -> RunnableLambda:
        if schema is not JudgeVerdict:
            raise NotImplementedError("plain text for everything but the judge")
        return self._structured_runnable(schema, kwargs.get("method"), False)

    def _structured_reply(self, asked: Asked) -> JudgeVerdict:
        if self.judge_error:
            raise ConnectionError(self.judge_error)
        return JudgeVerdict(reason="ok", score=1)


# --- timing ------------------------------------------------------------------------------------


class Overlap:
    """Counts how many bodies run at once: enter and leave it around each (any thread).

    :meth:`wait` is a body of its own that sleeps ``seconds`` (a slow call: ``before=`` of a
    :class:`FakeChat`).
    """

    def __init__(self, seconds: float = 0.1) -> None:
        self.seconds = seconds
        self.active = self.most = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
            self.threads.add(threading.get_ident())

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.active -= 1

    def wait(self) -> None:
        """Sleep ``seconds``, counted as one body under way."""
        with self:
            time.sleep(self.seconds)


# --- models and codebooks -----------------------------------------------------------------------


def _tiny(tokenizer: Any) -> dict[str, int]:
    """The shape of the tiny random test models: 2 layers of width 32 over the tokenizer's
    vocabulary."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
    }


def tiny_llama(tokenizer: Any, *, seed: int, **config: Any) -> Any:
    """A 2-layer random Llama (about 1.6M parameters) for ``tokenizer``'s vocabulary, its
    weights drawn after ``torch.manual_seed(seed)``; ``config`` adds to its ``LlamaConfig``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = LlamaConfig(**_tiny(tokenizer), tie_word_embeddings=True, **config)
    torch.manual_seed(seed)
    return LlamaForCausalLM(shape)


def tiny_gemma3(tokenizer: Any, *, seed: int, sliding_window: int = 4) -> Any:
    """A 2-layer random Gemma 3 text model for ``tokenizer``'s vocabulary: one sliding-window
    layer (``sliding_window`` tokens, shorter than any prompt) and one full-attention layer."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    shape = Gemma3TextConfig(
        **_tiny(tokenizer),
        head_dim=16,
        sliding_window=sliding_window,
        layer_types=["sliding_attention", "full_attention"],
        pad_token_id=tokenizer.pad_token_id or 0,
        bos_token_id=tokenizer.bos_token_id or 1,
        eos_token_id=tokenizer.eos_token_id or 2,
    )
    torch.manual_seed(seed)
    return Gemma3ForCausalLM(shape).eval()


@dataclass
class FakeCodebooks:
    """What ``open_bank(..., codebooks=)`` reads of fitted codebooks: a hash and the spec."""

    hash: str
    spec: ClassVar[SIDSpec] = DEFAULT_SPEC
