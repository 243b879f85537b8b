"""The MemEvolver subgraph: address the trajectory, read the slot, decide, write through the bank.

``address -> lookup -> decide (-> decide ...) -> apply``:

- ``address`` renders the finished task (query, trajectory, environment outcome) as
  MemEvolver's user turn, asks the addressing policy for an SID (by default constrained decoding
  on the evolver's own local model, so the SID is valid by construction) and writes an
  assistant message that calls ``memory_lookup`` with exactly that SID;
- ``lookup`` is LangGraph's ``ToolNode`` running the real tool against the run's bank (run
  context ``bank_url``/``bank_id``/``memory_k``, or the graph's store);
- ``decide`` has the chat model return an :class:`~genmem.policies.prompts.EvolverDecision`
  and checks it against what the lookup saw. A model that can call tools is bound to the
  decision schema as a forced tool (``ChatLocal`` then prefills the call, so even a tiny model
  answers in the right shape); any other model is asked for the same JSON object as plain text.
  Either way the reply is read by one parser: the tool call's arguments, or the first JSON
  object in the text. A decision is rejected, and nothing is written, when the reply is not
  such an object, its SID is not one of the bank's, it targets another SID than the one just
  read (a blank SID is taken to mean the one read), its op does not fit the slot (insert on an
  occupied slot, revise on an empty one), or it inserts an empty payload. While
  ``max_retries`` allows, the rejection is fed back to the model as a message and it answers
  again;
- ``apply`` writes the decision with ``Bank.apply`` as a compare-and-set on the version read at
  lookup, through the write gate (:mod:`genmem.memory.gate`, grounded in the query, the
  trajectory, the outcome and the entry read). A payload the gate refuses is a ``rejected``
  event in the bank's log and a ``gated`` rejection here (``error["gate_reason"]``); a bank that
  refuses (read-only snapshot, a concurrent writer, ...) is recorded as a rejection too; the
  graph never raises for it.

Under ``ainvoke``/``astream`` the nodes take their async path: the bank is read and written
through its async API (``alookup`` via the tool's coroutine, ``aapply``), the decision is the chat
model's ``ainvoke``, and SID decoding runs in a worker thread.

Every attempt leaves one entry in the run's ``events`` log (``applied`` or ``rejected``, with the
reason), and the final ``error`` says why nothing was written when that is the result.
"""

from __future__ import annotations

import asyncio
import json
import operator
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from pydantic import ValidationError

from genmem.errors import (
    GenMemError,
    InvalidSID,
    InvalidUpdate,
    ReadOnlyBank,
    SlotEmpty,
    SlotOccupied,
    VersionConflict,
)
from genmem.graph._runtime import (
    AddressingNodes,
    abank_from_runtime,
    bank_from_runtime,
    sync_and_async,
)
from genmem.graph.addressing import BankGenerators, GeneratorFactory
from genmem.graph.retriever import MemoryContext
from genmem.graph.trajectory import render_trajectory
from genmem.memory.bank import Bank
from genmem.memory.gate import GateConfig, WriteGate
from genmem.memory.records import ApplyResult, Update
from genmem.memory.sid import SIDSpec
from genmem.policies.addressing import Addresser, addresser_name, check_addresser
from genmem.policies.backends import load_chat_model
from genmem.policies.chat_local import content_text
from genmem.policies.experience_writer import (
    CHOICE_RULES,
    ChoiceRule,
    ExperienceWriter,
    choose_candidate,
)
from genmem.policies.json_reply import aask_json, accepts_json_schema, ask_json
from genmem.policies.prompts import (
    EvolverDecision,
    evolver_choice_request,
    evolver_decision_request,
    evolver_prompt,
    evolver_rejection_message,
    evolver_stateless_choice_request,
    evolver_user_message,
)
from genmem.policies.types import AllowedMode, SIDGenerator
from genmem.tools.lookup import create_memory_lookup_tool

__all__ = [
    "EVOLVER_NODE",
    "EvolverConfig",
    "EvolverNodes",
    "EvolverState",
    "RejectionKind",
    "build_evolver_graph",
    "decision_schema",
]

EVOLVER_NODE = "mem_evolver"
"""The ``node`` every MemEvolver event carries."""

RejectionKind = Literal[
    "no_address",
    "lookup_failed",
    "invalid_output",
    "invalid_sid",
    "sid_mismatch",
    "wrong_op",
    "empty_payload",
    "read_only_bank",
    "version_conflict",
    "slot_occupied",
    "slot_empty",
    "invalid_update",
    "bank_error",
    "gated",
    "nothing_to_write",
]
"""Why a run wrote nothing (``error["kind"]`` and a rejected event's ``reason``)."""

_RETRYABLE = frozenset(
    {"invalid_output", "invalid_sid", "sid_mismatch", "wrong_op", "empty_payload"}
)
"""Faults of the model's decision, which asking again can fix."""

_BANK_KINDS: tuple[tuple[type[GenMemError], RejectionKind], ...] = (
    (ReadOnlyBank, "read_only_bank"),
    (VersionConflict, "version_conflict"),
    (SlotOccupied, "slot_occupied"),
    (SlotEmpty, "slot_empty"),
    (InvalidUpdate, "invalid_update"),
)
_LOOKUP_CALL_ID = "evolver-lookup-1"
_DECISION_TOOL = convert_to_openai_tool(EvolverDecision)["function"]["name"]
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_JSON = json.JSONDecoder()


class EvolverState(TypedDict, total=False):
    """State of the MemEvolver subgraph."""

    query: str
    trajectory: dict[str, Any] | str
    """A ``Trajectory.model_dump()`` or the trajectory already rendered as text."""
    outcome: str | None
    """What the environment said about the task (e.g. success / failure / unknown), if known;
    never the reference answer."""
    messages: Annotated[list[AnyMessage], add_messages]
    sid: str | None
    addresser: str
    """What chose the SID: ``generative``, ``quantizer`` (or a caller's generator's name)."""
    candidates: list[dict[str, Any]]
    retrieved: list[dict[str, Any]]
    attempts: int
    """Decisions asked for so far in this run."""
    decision: dict[str, Any] | None
    """The last valid ``EvolverDecision`` (SID in canonical form)."""
    update: dict[str, Any] | None
    """The bank's ``ApplyResult`` once the decision is written."""
    error: dict[str, Any] | None
    """Why nothing was written: ``{"kind", "message", "output"}`` (None after a write)."""
    events: Annotated[list[dict[str, Any]], operator.add]
    """One entry per decision or write: ``applied`` or ``rejected``."""
    writer: str | None
    """Who wrote the payload: None for the model, else the config's ``writer`` (its name)."""
    experience: str | None
    """With a ``writer``: its payload for this run, which MemEvolver addressed."""
    write_choice: dict[str, Any] | None
    """With a ``writer``: the candidates (label, score) and how one was chosen."""


@dataclass(frozen=True, kw_only=True)
class EvolverConfig:
    """How MemEvolver addresses, how often it may try again, and whom the bank credits."""

    beam: int = 1
    """SID candidates to decode; the best one is used (the others are kept in the state)."""
    allowed: AllowedMode = "all"
    """Which SIDs the decoder may produce (``occupied`` limits the evolver to revisions)."""
    max_retries: int = 1
    """Further decisions to ask for after an invalid one, the rejection fed back each time."""
    actor: str = EVOLVER_NODE
    """Who the bank records as the writer of each update."""
    addresser: Addresser = "auto"
    """``auto`` (an aligned policy generates, else the quantizer), ``generative``, ``quantizer``;
    ignored when the graph is given its own ``sid_generator``."""
    gate: GateConfig | None = field(default_factory=GateConfig)
    """The write gate every update passes (:mod:`genmem.memory.gate`); None writes any valid
    decision, junk included."""
    writer: ExperienceWriter | None = None
    """Code that writes the payloads (an environment's, e.g. the cooking distiller): one of its
    candidates is written by :attr:`choice_rule`
    (:mod:`genmem.policies.experience_writer`); a run it
    finds nothing in is not written (a ``nothing_to_write`` rejection). None: the model writes
    (the paper)."""
    choice_rule: ChoiceRule = "writer"
    """How the choice among a writer's candidates is made: ``writer`` (default; no model asked:
    merge, else retain), or by each label's log-probability as the model's reply (``mean`` per
    token, ``sum``, or ``calibrated``: minus the label's after the request with nothing shown)
    (:func:`~genmem.policies.experience_writer.choose_candidate`). The default is measured:
    on training games the 135M model's choice did not depend on the candidates under any of
    the three rules, and merge was never worse (``bench/evolver_choice.py``)."""

    def __post_init__(self) -> None:
        check_addresser(self.addresser)
        if self.choice_rule not in CHOICE_RULES:
            raise ValueError(
                f"choice_rule={self.choice_rule!r}: use one of {', '.join(CHOICE_RULES)}"
            )
        if not 1 <= self.beam <= 50:
            raise ValueError(f"beam={self.beam}: use 1 (greedy) to 50")
        if self.allowed not in ("all", "occupied", "prefix"):
            raise ValueError(f"allowed={self.allowed!r}: use 'all', 'occupied' or 'prefix'")
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or not 0 <= self.max_retries <= 10
        ):
            raise ValueError(f"max_retries={self.max_retries!r}: use an int from 0 to 10")
        if not isinstance(self.actor, str) or not self.actor.strip():
            raise ValueError(f"actor={self.actor!r}: name the writer with a non-empty string")


class _Rejected(Exception):
    """A decision or write that was refused; becomes ``error`` and a rejected event."""

    def __init__(
        self,
        kind: RejectionKind,
        message: str,
        output: str | None = None,
        op: str | None = None,
        gate_reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.output = output
        self.op = op
        self.gate_reason = gate_reason


@dataclass(frozen=True)
class _Slot:
    """What the lookup saw at the SID: an exact entry (and its version) or an empty slot."""

    exact: bool
    version: int | None
    hits: list[dict[str, Any]]


def _event(
    kind: Literal["applied", "rejected"],
    *,
    sid: str | None,
    message: str,
    op: str | None = None,
    outcome: str | None = None,
    reason: str | None = None,
    attempt: int | None = None,
) -> dict[str, Any]:
    return {
        "node": EVOLVER_NODE,
        "kind": kind,
        "reason": reason,
        "sid": sid,
        "op": op,
        "outcome": outcome,
        "attempt": attempt,
        "message": message,
    }


def _rejection(exc: _Rejected, sid: str | None, attempt: int | None = None) -> EvolverState:
    """The state update that records a refusal."""
    error = {"kind": exc.kind, "message": exc.message, "output": exc.output}
    if exc.gate_reason is not None:
        error["gate_reason"] = exc.gate_reason
    return {
        "error": error,
        "events": [
            _event(
                "rejected",
                sid=sid,
                op=exc.op,
                reason=exc.kind,
                attempt=attempt,
                message=exc.message,
            )
        ],
    }


def _check_input(state: EvolverState) -> tuple[str, str, str | None]:
    """Query, rendered trajectory and outcome of the input; ValueError names what is missing."""
    query = state.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("MemEvolver needs a non-empty 'query' in its input")
    trajectory = state.get("trajectory")
    if not trajectory or (isinstance(trajectory, str) and not trajectory.strip()):
        raise ValueError(
            "MemEvolver needs a 'trajectory' in its input: a Trajectory.model_dump() or its text"
        )
    if not isinstance(trajectory, (str, dict)):
        raise ValueError(
            f"'trajectory' is a {type(trajectory).__name__}; pass Trajectory.model_dump() or text"
        )
    try:
        text = render_trajectory(trajectory)
    except ValidationError as exc:
        raise ValueError(
            f"'trajectory' is not a Trajectory.model_dump(): {_first_error(exc)}"
        ) from None
    outcome = state.get("outcome")
    if outcome is not None and not isinstance(outcome, str):
        raise ValueError(f"'outcome' must be text such as 'success' or None, got {outcome!r}")
    return query, text, outcome


def _read_memory(state: EvolverState, slot: _Slot | None) -> tuple[str, ...]:
    """What the run read from the bank besides the slot's own entry: support and neighbours."""
    texts = []
    trajectory = state.get("trajectory")
    if isinstance(trajectory, dict) and isinstance(trajectory.get("support"), str):
        texts.append(trajectory["support"])
    if slot is not None:
        hits = slot.hits[1:] if slot.exact else slot.hits
        texts += [h["payload"] for h in hits if isinstance(h.get("payload"), str)]
    return tuple(t for t in texts if t.strip())


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "value"
    return f"{where}: {err['msg']}"


def _read_slot(messages: list[AnyMessage], sid: str) -> _Slot | None:
    """What the last ``memory_lookup`` answered for ``sid`` (None if it answered an error)."""
    for msg in reversed(messages):
        if isinstance(msg, ToolMessage) and msg.tool_call_id == _LOOKUP_CALL_ID:
            for result in msg.artifact or []:
                data = result.model_dump() if hasattr(result, "model_dump") else dict(result)
                if data.get("query") == sid:
                    hits = list(data.get("hits", []))
                    exact = bool(data.get("exact"))
                    return _Slot(exact, hits[0]["version"] if exact else None, hits)
            return None
    return None


def _json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (thinking, prose and code fences around it ignored)."""
    reply, text = text, _THINK.sub("", text)
    start = text.find("{")
    reason = "it holds no JSON object"
    while start >= 0:
        try:
            obj, _ = _JSON.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if reason == "it holds no JSON object":
                reason = f"its JSON does not parse ({exc})"
            start = text.find("{", start + 1)
            continue
        # A tool call written out as text: {"name": ..., "arguments": {...}}
        if "op" not in obj and isinstance(obj.get("arguments"), dict):
            return obj["arguments"]
        return obj
    raise _Rejected(
        "invalid_output",
        f"the reply is not a decision: {reason}; reply with one JSON object holding "
        '"op", "sid" and "payload"',
        output=reply,
    )


def _reply_arguments(reply: AIMessage) -> tuple[dict[str, Any], str]:
    """The decision's raw arguments and the reply as text, from a tool call or from prose."""
    for call in reply.tool_calls:
        raw = json.dumps(call["args"], ensure_ascii=False)
        if call["name"] != _DECISION_TOOL:
            raise _Rejected(
                "invalid_output",
                f"the reply called {call['name']!r}; return the decision ({_DECISION_TOOL}) "
                "instead",
                output=raw,
            )
        return dict(call["args"]), raw
    for bad in reply.invalid_tool_calls:
        raw = str(bad.get("args") or "")
        raise _Rejected(
            "invalid_output",
            f"the decision's arguments do not parse: {bad.get('error') or 'not a JSON object'}",
            output=raw,
        )
    text = content_text(reply.content)
    return _json_object(text), text


def _check_decision(
    reply: AIMessage, sid: str, slot: _Slot, spec: SIDSpec
) -> tuple[EvolverDecision, str]:
    """The reply as a decision that may be written at ``sid``, and the reply's text."""
    args, raw = _reply_arguments(reply)
    try:
        return _validate(args, raw, sid, slot, spec), raw
    except _Rejected as exc:
        op = args.get("op")
        exc.op = op if isinstance(op, str) else None
        raise


def _validate(
    args: dict[str, Any], raw: str, sid: str, slot: _Slot, spec: SIDSpec
) -> EvolverDecision:
    """The decision in ``args`` if it may be written at ``sid`` given what the slot holds."""
    if not str(args.get("sid") or "").strip():
        args = {**args, "sid": sid}  # the model left the address to the slot it read
    try:
        decision = EvolverDecision.model_validate(args)
    except ValidationError as exc:
        raise _Rejected(
            "invalid_output",
            f"the decision does not fit the schema ({_first_error(exc)}); it needs "
            '"op" ("insert" or "revise"), "sid" and "payload" strings',
            output=raw,
        ) from None
    try:
        target = str(spec.parse(decision.sid))
    except (InvalidSID, ValueError) as exc:
        raise _Rejected(
            "invalid_sid", f"{exc}; write to the slot you read, {sid}", output=raw
        ) from None
    if target != sid:
        raise _Rejected(
            "sid_mismatch",
            f"the decision targets {target} but the slot read was {sid}; an entry can only be "
            f"written after it is read: use sid {sid}",
            output=raw,
        )
    decision = decision.model_copy(update={"sid": target})
    if decision.op == "insert" and slot.exact:
        raise _Rejected(
            "wrong_op",
            f'insert at {sid}, but the slot holds version {slot.version}; use op "revise" '
            "(same text keeps it, empty text deletes it)",
            output=raw,
        )
    if decision.op == "revise" and not slot.exact:
        raise _Rejected(
            "wrong_op",
            f'revise at {sid}, but the slot is empty; use op "insert" with the new experience',
            output=raw,
        )
    if decision.op == "insert" and not decision.payload.strip():
        raise _Rejected(
            "empty_payload",
            f"insert at {sid} with an empty payload; write the experience to store",
            output=raw,
        )
    return decision


def _bank_kind(exc: GenMemError) -> RejectionKind:
    for cls, kind in _BANK_KINDS:
        if isinstance(exc, cls):
            return kind
    return "bank_error"


def decision_schema(sid: str, occupied: bool, max_payload_chars: int = 360) -> dict[str, Any]:
    """The decision's JSON schema for one slot: the op that fits it, the SID that was read.

    Under this schema a constrained decoder cannot write the wrong op, another address or an
    empty insert; what it writes in the payload is still the model's own.
    """
    schema = EvolverDecision.model_json_schema()
    props = schema["properties"]
    props["analysis"]["maxLength"] = 120
    props["op"] = {**props["op"], "enum": ["revise" if occupied else "insert"]}
    props["sid"] = {**props["sid"], "enum": [sid]}
    props["payload"]["maxLength"] = max_payload_chars
    if not occupied:
        props["payload"]["minLength"] = 1
    schema["required"] = ["analysis", "op", "sid", "payload"]
    return schema


@dataclass(frozen=True)
class _Ask:
    """One request for a decision: the slot read, the messages to send and the model to ask."""

    sid: str
    attempt: int
    slot: _Slot
    asked: list[AnyMessage]
    """The turns this attempt adds to the conversation (the instruction on the first)."""
    prompt: list[AnyMessage]
    schema: dict[str, Any] | None
    """The slot's decision schema, for a model that takes one (else None)."""
    model: Runnable[LanguageModelInput, Any]
    """The model to ask in text: bound to the decision as a forced tool if it can call tools."""

    def reply(self, chat: BaseChatModel) -> Any:
        """The model's message: under the slot's JSON schema, or in text."""
        if self.schema is not None:
            return ask_json(chat, self.schema, self.prompt).raw
        return self.model.invoke(self.prompt)

    async def areply(self, chat: BaseChatModel) -> Any:
        """:meth:`reply` through the model's ``ainvoke``."""
        if self.schema is not None:
            return (await aask_json(chat, self.schema, self.prompt)).raw
        return await self.model.ainvoke(self.prompt)


@dataclass(frozen=True)
class _Write:
    """A checked decision as the update to write, with its gate, and what its outcome means."""

    update: Update
    gate: WriteGate | None
    op: str
    attempt: int | None
    actor: str
    """The writer the bank records: the config's actor, ``<actor>/<writer>`` for code-written
    payloads."""

    @classmethod
    def of(cls, state: EvolverState, cfg: EvolverConfig) -> _Write:
        """The write of the state's decision: a compare-and-set on the version read."""
        decision = EvolverDecision.model_validate(state["decision"])
        slot = _read_slot(list(state.get("messages", [])), decision.sid)
        expected = slot.version if slot is not None and decision.op == "revise" else None
        update = Update(
            op=decision.op, sid=decision.sid, payload=decision.payload, expected_version=expected
        )
        gate = None
        if cfg.gate is not None:
            query, trajectory, outcome = _check_input(state)
            stored = [slot.hits[0]["payload"]] if slot is not None and slot.exact else []
            sources = (query, trajectory, outcome or "", *stored)
            gate = WriteGate(sources=sources, config=cfg.gate, memory=_read_memory(state, slot))
        writer = state.get("writer")
        actor = f"{cfg.actor}/{writer}" if writer else cfg.actor
        return cls(update, gate, decision.op, state.get("attempts"), actor)

    def refused(self, exc: GenMemError) -> EvolverState:
        """The state update when the bank refused the write."""
        refused = _Rejected(_bank_kind(exc), f"the bank refused the write: {exc}", op=self.op)
        return _rejection(refused, self.update.sid, self.attempt)

    def done(self, result: ApplyResult) -> EvolverState:
        """The state update for the bank's answer: applied, or refused by the write gate."""
        sid, attempt = self.update.sid, self.attempt
        if result.outcome == "rejected":
            gated = _Rejected(
                "gated",
                f"the write gate refused the payload ({result.reason}: {result.detail}); "
                f"logged as event {result.seq}, nothing stored",
                output=self.update.payload,
                op=self.op,
                gate_reason=result.reason,
            )
            return {"update": None, **_rejection(gated, sid, attempt)}
        before = "empty" if result.version_before is None else f"v{result.version_before}"
        after = "empty" if result.version_after is None else f"v{result.version_after}"
        event = _event(
            "applied",
            sid=result.sid,
            op=result.op,
            outcome=result.outcome,
            attempt=attempt,
            message=f"{result.outcome} at {result.sid}: {before} -> {after} (seq {result.seq}, "
            f"by {self.actor})",
        )
        return {"update": result.model_dump(), "error": None, "events": [event]}


class EvolverNodes(AddressingNodes):
    """MemEvolver's nodes, as methods that can be called on a state (and a bank) directly.

    :func:`build_evolver_graph` wires them: ``address``, then (:meth:`after_address`)
    ``lookup`` when an SID was chosen, then ``decide`` until (:meth:`after_decide`) a decision
    can be applied or no retry is left, then ``apply``.
    """

    def __init__(
        self,
        chat: BaseChatModel,
        *,
        sid_generator: SIDGenerator | GeneratorFactory | None = None,
        config: EvolverConfig | None = None,
    ) -> None:
        """``chat``: the deciding model (and, by default, the addressing policy's);
        ``sid_generator``: the addressing policy (see :func:`build_evolver_graph`)."""
        self.chat = chat
        self.config = config or EvolverConfig()
        self.use_schema = accepts_json_schema(chat, decision_schema("x", False))
        """Whether decisions are asked for under the slot's JSON schema."""
        self.generator_for = BankGenerators(chat, sid_generator, self.config, role="MemEvolver")

    def will_retry(self, kind: str, attempts: int) -> bool:
        """Whether a rejection of this kind after ``attempts`` decisions is asked about again."""
        return kind in _RETRYABLE and attempts <= self.config.max_retries

    def address_in(self, state: EvolverState, bank: Bank, context: MemoryContext) -> EvolverState:
        """The SID for the finished task and the ``memory_lookup`` call that reads it (or the
        ``no_address`` rejection)."""
        query, trajectory, outcome = _check_input(state)
        task = evolver_user_message(query, trajectory, outcome)
        writer = self.config.writer
        experience = writer.distil(query, state["trajectory"], outcome) if writer else None
        fresh: EvolverState = {
            "addresser": None,
            "candidates": [],
            "retrieved": [],
            "attempts": 0,
            "decision": None,
            "update": None,
            "error": None,
            "writer": writer.name if writer else None,
            "write_choice": None,
            "experience": experience,
        }
        if writer is not None and not (experience or "").strip():
            exc = _Rejected(
                "nothing_to_write",
                f"the {writer.name} writer found nothing in this run to keep (nothing written; "
                "the model does not write instead: a writer is chosen where its payloads are "
                "not fit to store)",
            )
            return {**fresh, "sid": None, **_rejection(exc, None)}
        # With a writer, the address is the experience's, as a seed bank places its entries,
        # and among the occupied slots once there are any: the run's procedure meets the
        # nearest one like it (retain, replace or merge) instead of landing beside it as a
        # near-copy the gate refuses.
        allowed = "occupied" if writer is not None and not bank.is_empty() else None
        generator = self.generator_for(bank, context.get("addresser"), allowed)
        candidates = generator.generate(experience or task, k=self.config.beam)
        fresh["addresser"] = addresser_name(generator)
        fresh["candidates"] = [c.model_dump() for c in candidates]
        if not candidates:
            exc = _Rejected("no_address", "the addressing policy proposed no SID")
            return {**fresh, "sid": None, **_rejection(exc, None)}
        try:
            chosen = str(bank.sid(candidates[0].sid))
        except InvalidSID as exc:
            bad = _Rejected("no_address", f"the addressing policy proposed a bad SID: {exc}")
            return {**fresh, "sid": None, **_rejection(bad, None)}
        call = {"name": "memory_lookup", "args": {"sid_list": [chosen]}, "id": _LOOKUP_CALL_ID}
        return {
            **fresh,
            "sid": chosen,
            "messages": [
                SystemMessage(evolver_prompt(bank.spec)),
                HumanMessage(task),
                AIMessage("", tool_calls=[call]),
            ],
        }

    def decide(self, state: EvolverState, runtime: Runtime[MemoryContext]) -> EvolverState:
        """Ask for a decision and check it against the slot read (with a ``writer``: have the
        model choose among the writer's candidates, when it has some)."""
        written = self.written_by_code(state)
        if written is not None:
            return written
        ask = self.decision_request(state)
        if isinstance(ask, dict):
            return ask
        spec = bank_from_runtime(runtime).spec
        return self.decision_update(ask, ask.reply(self.chat), spec)

    async def adecide(self, state: EvolverState, runtime: Runtime[MemoryContext]) -> EvolverState:
        """:meth:`decide` under ``ainvoke``/``astream``."""
        written = await asyncio.to_thread(self.written_by_code, state)
        if written is not None:
            return written
        ask = self.decision_request(state)
        if isinstance(ask, dict):
            return ask
        spec = (await abank_from_runtime(runtime)).spec
        return self.decision_update(ask, await ask.areply(self.chat), spec)

    def written_by_code(self, state: EvolverState) -> EvolverState | None:
        """With the config's ``writer``: the model's pick among its candidates for this run's
        experience (:func:`choose_candidate`); None without a writer (or a slot the lookup did
        not read: the model path reports that)."""
        writer = self.config.writer
        if writer is None or state.get("attempts", 0) > 0:
            return None
        sid = str(state["sid"])
        messages = list(state.get("messages", []))
        slot = _read_slot(messages, sid)
        if slot is None:
            return None
        experience = state.get("experience")
        if not experience:
            return None
        stored = str(slot.hits[0]["payload"]) if slot.exact else None
        candidates = writer.candidates(experience, stored)
        asked: list[AnyMessage] = []
        if len(candidates) > 1:
            listed = [(c.label, c.payload) for c in candidates]
            asked.append(HumanMessage(evolver_choice_request(sid, listed)))
        stateless = None
        if self.config.choice_rule == "calibrated":  # what the labels score with nothing shown
            stateless = [
                *messages[:1],  # the evolver's system prompt
                HumanMessage(evolver_stateless_choice_request([c.label for c in candidates])),
            ]
        choice = choose_candidate(
            self.chat, [*messages, *asked], candidates, self.config.choice_rule, stateless
        )
        pick = candidates[choice.index]
        scores = dict(zip([c.label for c in candidates], choice.scores, strict=False))
        how = {"only": "the only candidate", "rule": "the writer's rule: merge, else retain"}.get(
            choice.chooser, f"the model's choice by likelihood ({_scores_text(scores)})"
        )
        decision = EvolverDecision(
            analysis=f"{writer.name} writer: {pick.label}, {how}",
            op=pick.op,
            sid=sid,
            payload=pick.payload,
        )
        return {
            "attempts": 1,
            "retrieved": slot.hits,
            "decision": decision.model_dump(),
            "error": None,
            "writer": writer.name,
            "write_choice": {
                "chosen": pick.label,
                "chooser": choice.chooser,
                "candidates": [c.label for c in candidates],
                "scores": scores,
            },
            "messages": [*asked, AIMessage(pick.label)],
        }

    def decision_request(self, state: EvolverState) -> _Ask | EvolverState:
        """What to ask the model for a decision, or the rejection when the lookup failed."""
        sid = str(state["sid"])
        attempt = state.get("attempts", 0) + 1
        messages = list(state.get("messages", []))
        slot = _read_slot(messages, sid)
        if slot is None:
            tool = [m for m in messages if isinstance(m, ToolMessage)]
            said = content_text(tool[-1].content) if tool else "no answer"
            exc = _Rejected("lookup_failed", f"memory_lookup did not read {sid}: {said}")
            return {"attempts": attempt, **_rejection(exc, sid, attempt)}
        asked: list[AnyMessage] = []
        if attempt == 1:
            version = slot.version if slot.exact else None
            asked.append(HumanMessage(evolver_decision_request(sid, version=version)))
        schema = decision_schema(sid, slot.exact) if self.use_schema else None
        model = self.chat if self.use_schema else _text_model(self.chat)
        return _Ask(sid, attempt, slot, asked, [*messages, *asked], schema, model)

    def decision_update(self, ask: _Ask, reply: Any, spec: SIDSpec) -> EvolverState:
        """The state update for the model's reply: a checked decision or its rejection."""
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content_text(getattr(reply, "content", reply)))
        sid, attempt = ask.sid, ask.attempt
        base: EvolverState = {"attempts": attempt, "retrieved": ask.slot.hits}
        try:
            decision, raw = _check_decision(reply, sid, ask.slot, spec)
        except _Rejected as exc:
            # The reply goes back as plain text: a dangling tool call would be refused by
            # providers that require a tool result after every call.
            said = [*ask.asked, AIMessage(exc.output if exc.output is not None else "")]
            if self.will_retry(exc.kind, attempt):
                said.append(HumanMessage(evolver_rejection_message(exc.message, sid)))
            return {**base, "decision": None, "messages": said, **_rejection(exc, sid, attempt)}
        return {
            **base,
            "decision": decision.model_dump(),
            "error": None,
            "messages": [*ask.asked, AIMessage(raw)],
        }

    def apply(self, state: EvolverState, runtime: Runtime[MemoryContext]) -> EvolverState:
        """Write the decision through the bank (compare-and-set, write gate)."""
        bank = bank_from_runtime(runtime)
        write = _Write.of(state, self.config)
        try:
            result = bank.apply(write.update, actor=write.actor, gate=write.gate)
        except GenMemError as exc:
            return write.refused(exc)
        return write.done(result)

    async def aapply(self, state: EvolverState, runtime: Runtime[MemoryContext]) -> EvolverState:
        """:meth:`apply` through the bank's async API."""
        bank = await abank_from_runtime(runtime)
        write = _Write.of(state, self.config)
        try:
            result = await bank.aapply(write.update, actor=write.actor, gate=write.gate)
        except GenMemError as exc:
            return write.refused(exc)
        return write.done(result)

    @staticmethod
    def after_address(state: EvolverState) -> str:
        """``lookup`` when an SID was chosen, else the end."""
        return "lookup" if state.get("sid") else END

    def after_decide(self, state: EvolverState) -> str:
        """``apply`` a decision; ``decide`` again after a rejection a retry can fix; else end."""
        if state.get("decision"):
            return "apply"
        error = state.get("error") or {}
        return "decide" if self.will_retry(error.get("kind", ""), state.get("attempts", 0)) else END


def _scores_text(scores: dict[str, float]) -> str:
    return ", ".join(f"{label} {score:.2f}" for label, score in scores.items())


def _text_model(chat: BaseChatModel) -> Runnable[LanguageModelInput, Any]:
    """``chat`` asked in text: as a forced decision tool call if it can call tools."""
    try:
        return chat.bind_tools([EvolverDecision], tool_choice=_DECISION_TOOL)
    except NotImplementedError:
        return chat


def build_evolver_graph(
    model: BaseChatModel | str = "local",
    *,
    sid_generator: SIDGenerator | GeneratorFactory | None = None,
    config: EvolverConfig | None = None,
) -> StateGraph:
    """The uncompiled MemEvolver graph (``langgraph dev`` compiles it with its own store)."""
    nodes = EvolverNodes(load_chat_model(model), sid_generator=sid_generator, config=config)
    g = StateGraph(EvolverState, context_schema=MemoryContext)
    g.add_node("address", sync_and_async(nodes.address, nodes.aaddress))
    g.add_node("lookup", ToolNode([create_memory_lookup_tool()]))
    g.add_node("decide", sync_and_async(nodes.decide, nodes.adecide))
    g.add_node("apply", sync_and_async(nodes.apply, nodes.aapply))
    g.add_edge(START, "address")
    g.add_conditional_edges("address", nodes.after_address, ["lookup", END])
    g.add_edge("lookup", "decide")
    g.add_conditional_edges("decide", nodes.after_decide, ["apply", "decide", END])
    g.add_edge("apply", END)
    return g
