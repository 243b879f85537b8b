"""Composition of memory entries: fuse two into one, or rebuild one from a pair of neighbours.

- **Fusion** (``A + B -> C``), ``read -> fuse -> address -> write``: read the entries at two
  SIDs, have the model write one entry that keeps what they share (problem type, evidence,
  failure modes, procedure), address it (the bank's addresser: an aligned policy generates, else
  the quantizer encodes and quantises it) and write it at ``C``: an insert into an empty slot, a
  revise (compare-and-set on the version read) of an occupied one.
- **Decomposition** (``C -> A, B``), ``read -> judge -> rebuild -> write``: read the entry at
  ``C`` and its nearest neighbours (the entries that share the longest prefix with it), have a
  judge score each pair of neighbours (how well the two supply the skills ``C`` relies on),
  pick the best pair, and revise ``C`` with the entry rewritten so that the supporting steps are
  explicit.

Both write through the same path as MemEvolver: ``Bank.apply`` with the write gate, grounded in
the entries read. A fused entry that is the two sources put together is refused as ``copied``
(a ``rejected`` event in the bank's log), as is anything else the gate refuses; the entries
read, with their versions, are the written version's provenance (``metadata["composed"]``).
A composition never deletes: an empty reply, which as a revision would be a deletion (never
gated), is refused as ``empty``.
Bad SIDs, empty slots, a read-only bank, a judge with no usable score: the state's ``error``
says which (``kind``, ``message``), the model is not called when the input is wrong, and
nothing is written. The graphs never raise for them.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from genmem.errors import GenMemError
from genmem.graph._runtime import bank_from_runtime
from genmem.graph.addressing import BankGenerators, GeneratorFactory
from genmem.graph.retriever import MemoryContext, extract_answer
from genmem.memory.bank import Bank
from genmem.memory.data_block import unwrap_echo
from genmem.memory.gate import DEFAULT_GATE, GateConfig, WriteGate, check_join, check_payload
from genmem.memory.records import Update
from genmem.policies.addressing import Addresser, addresser_name, check_addresser
from genmem.policies.backends import load_chat_model
from genmem.policies.prompts import (
    decompose_prompt,
    decompose_user_message,
    experience_user_message,
    fuse_prompt,
    fuse_user_message,
    pair_judge_prompt,
    pair_judge_user_message,
)
from genmem.policies.types import AllowedMode, SIDGenerator

__all__ = [
    "COMPOSE_GATE",
    "ComposeConfig",
    "ComposeError",
    "DecomposeState",
    "FuseState",
    "build_decompose_graph",
    "build_fuse_graph",
]

ComposeError = Literal["invalid_sid", "empty_slot", "read_only", "no_pair", "judge", "bank"]
"""Why a composition wrote nothing (besides a gate refusal, which the bank logs)."""

_NUMBER = re.compile(r"\d+")
_OUT_OF = re.compile(r"\d\s*(?:/|out of)\s*10\b")
_MAX_SCORE_CHARS = 40
"""A judge reply longer than this is not a score, whatever digits it holds."""


COMPOSE_GATE = dataclasses.replace(DEFAULT_GATE, min_words=12)
"""The gate of composed entries: as every write's, but a composed entry states a problem type
and a procedure, which takes more than 11 words (the default model's fusions included
``The answer is yes.``, which the plain gate lets through)."""


@dataclass(frozen=True, kw_only=True)
class ComposeConfig:
    """How fusion addresses and both compositions write."""

    addresser: Addresser = "auto"
    """What chooses a fused entry's SID (``auto``: an aligned policy, else the quantizer)."""
    allowed: AllowedMode = "all"
    """Which SIDs the fused entry may take (``all``: wherever it quantises)."""
    neighbours: int = 4
    """Decomposition: the nearest entries whose pairs the judge scores (4 -> 6 pairs)."""
    max_join_share: float = 0.85
    """A fused entry with at least this share of its 3-word phrases from its two sources is a
    join of them, not a fusion: refused as ``copied``."""
    gate: GateConfig = COMPOSE_GATE
    actor: str = "compose"
    """The actor the bank's event log names."""

    def __post_init__(self) -> None:
        check_addresser(self.addresser)
        if not 2 <= self.neighbours <= 8:
            raise ValueError(f"neighbours={self.neighbours}: use 2 to 8")
        if not 0.0 < self.max_join_share <= 1.0:
            raise ValueError(f"max_join_share={self.max_join_share}: use a share in (0, 1]")


class FuseState(TypedDict, total=False):
    """State of the fusion graph (input: ``sids``, two SIDs)."""

    sids: list[str]
    sources: list[dict[str, Any]]
    """The entries read: ``{"sid", "version", "payload"}``."""
    payload: str
    """The fused entry the model wrote."""
    sid: str
    """Where it is written (``C``)."""
    expected: int | None
    """The version at ``C`` when it was addressed (None: empty, so the write is an insert)."""
    addresser: str
    update: dict[str, Any] | None
    """The bank's result of the write (``outcome``: inserted, revised, retained, rejected)."""
    error: dict[str, Any] | None


class DecomposeState(TypedDict, total=False):
    """State of the decomposition graph (input: ``sid``, the target ``C``)."""

    sid: str
    target: dict[str, Any]
    neighbours: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    """Every pair the judge scored: ``{"sids": [A, B], "score": int | None, "reply"}``."""
    chosen: list[str]
    payload: str
    update: dict[str, Any] | None
    error: dict[str, Any] | None


def _error(kind: ComposeError, message: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message}, "update": None}


def _entry(bank: Bank, text: object) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the live entry at ``text``, None) or (None, the state's error)."""
    try:
        sid = bank.sid(str(text))
    except GenMemError as exc:
        return None, _error("invalid_sid", f"{text!r} is not an SID of this bank: {exc}")
    entry = bank.get(sid)
    if entry is None:
        return None, _error("empty_slot", f"{sid} is empty: nothing to compose")
    return {"sid": str(sid), "version": entry.version, "payload": entry.payload}, None


def _writable(bank: Bank) -> dict[str, Any] | None:
    if bank.read_only:
        return _error("read_only", f"bank {bank.bank_id!r} is read-only: nothing is written")
    return None


def _go_on(state: Any) -> str:
    """``end`` once a node has set ``error``, else ``next``."""
    return "end" if state.get("error") else "next"


def _reply(chat: BaseChatModel, system: str, user: str) -> str:
    """The model's reply, without an ``<experience>`` wrapper copied from the prompt's blocks."""
    reply = str(chat.invoke([SystemMessage(system), HumanMessage(user)]).content)
    return unwrap_echo(extract_answer(reply))


def _write(
    bank: Bank,
    sid: str,
    payload: str,
    read: list[dict[str, Any]],
    expected: int | None,
    how: str,
    cfg: ComposeConfig,
) -> dict[str, Any]:
    """Write ``payload`` at ``sid`` through the gate: an insert when ``expected`` (the version
    read there) is None, else a compare-and-set revise. The state's update or error."""
    others = tuple(r["payload"] for r in read if r["sid"] != sid)
    gate = WriteGate(sources=tuple(r["payload"] for r in read), config=cfg.gate, memory=others)
    provenance = {"composed": {"by": how, "from": [{k: r[k] for k in ("sid", "version")}
                                                   for r in read]}}  # fmt: skip
    op = "insert" if expected is None else "revise"
    try:
        if not payload.strip():  # an empty revision is a deletion, which the gate never sees
            result = bank.refuse(sid, op, gate.check(payload), actor=cfg.actor)
            return {"update": result.model_dump(mode="json"), "error": None}
        if op == "revise":  # the gate's `copied` is an insert rule; a composition that copies
            # another entry it read over its target is no composition either
            copy = check_payload(payload, memory=others, config=cfg.gate)
            if copy.reason == "copied":
                result = bank.refuse(sid, op, copy, actor=cfg.actor)
                return {"update": result.model_dump(mode="json"), "error": None}
        update = Update(op=op, sid=sid, payload=payload, expected_version=expected)
        result = bank.apply(update, actor=cfg.actor, gate=gate, metadata=provenance)
    except GenMemError as exc:
        return _error("bank", f"the bank refused the write: {exc}")
    return {"update": result.model_dump(mode="json"), "error": None}


def build_fuse_graph(
    model: BaseChatModel | str = "local",
    *,
    sid_generator: SIDGenerator | GeneratorFactory | None = None,
    config: ComposeConfig | None = None,
) -> StateGraph:
    """The uncompiled fusion graph (input ``{"sids": [A, B]}``; the bank from the context)."""
    chat = load_chat_model(model)
    cfg = config or ComposeConfig()
    generator_for = BankGenerators(chat, sid_generator, cfg, role="fusion")

    def read(state: FuseState, runtime: Runtime[MemoryContext]) -> FuseState:
        bank = bank_from_runtime(runtime)
        sids = list(state.get("sids") or [])
        if len(sids) != 2:
            return _error("invalid_sid", f"fusion takes two SIDs, got {len(sids)}")
        sources = []
        for text in sids:
            entry, error = _entry(bank, text)
            if error:
                return error
            sources.append(entry)
        if sources[0]["sid"] == sources[1]["sid"]:
            return _error("invalid_sid", f"both SIDs are {sources[0]['sid']}: fuse two entries")
        return _writable(bank) or {"sources": sources, "error": None}

    def fuse(state: FuseState) -> FuseState:
        first, second = (s["payload"] for s in state["sources"])
        return {"payload": _reply(chat, fuse_prompt(), fuse_user_message(first, second))}

    def address(state: FuseState, runtime: Runtime[MemoryContext]) -> FuseState:
        bank = bank_from_runtime(runtime)
        generator = generator_for(bank, (runtime.context or {}).get("addresser"))
        found = generator.generate(experience_user_message(state["payload"]), k=1)
        if not found:
            return _error("bank", "the addresser gave no SID for the fused entry")
        sid = str(bank.sid(found[0].sid))
        current = bank.get(sid)
        expected = None if current is None else current.version
        return {"sid": sid, "expected": expected, "addresser": addresser_name(generator)}

    def write(state: FuseState, runtime: Runtime[MemoryContext]) -> FuseState:
        bank = bank_from_runtime(runtime)
        sources, sid, payload = state["sources"], state["sid"], state["payload"]
        expected = state.get("expected")
        joined = check_join(payload, [s["payload"] for s in sources], cfg.max_join_share)
        if joined.action == "reject":
            op = "insert" if expected is None else "revise"
            result = bank.refuse(sid, op, joined, actor=cfg.actor)
            return {"update": result.model_dump(mode="json"), "error": None}
        return _write(bank, sid, payload, sources, expected, "fuse", cfg)

    g = StateGraph(FuseState, context_schema=MemoryContext)
    g.add_node("read", read)
    g.add_node("fuse", fuse)
    g.add_node("address", address)
    g.add_node("write", write)
    g.add_edge(START, "read")
    g.add_conditional_edges("read", _go_on, {"next": "fuse", "end": END})
    g.add_edge("fuse", "address")
    g.add_conditional_edges("address", _go_on, {"next": "write", "end": END})
    g.add_edge("write", END)
    return g


def _neighbours(bank: Bank, target: str, n: int) -> list[dict[str, Any]]:
    """Up to ``n`` live entries other than ``target``, those sharing its longest prefix first."""
    sid = bank.sid(target)
    found: dict[str, dict[str, Any]] = {}
    for depth in range(bank.spec.levels - 1, -1, -1):
        for entry in bank.entries(sid.prefix(depth)):
            key = str(entry.sid)
            if key != target and key not in found and len(found) < n:
                found[key] = {"sid": key, "version": entry.version, "payload": entry.payload}
        if len(found) >= n:
            break
    return list(found.values())


def _score(reply: str) -> int | None:
    """The judge's 0-10 score, read only from a short reply that is a score (``7``, ``Score:
    7``, ``7/10``, ``7 out of 10``); anything else, such as a copied entry that happens to hold
    a digit, is no score (None)."""
    text = reply.strip()
    numbers = _NUMBER.findall(text)
    if len(text) > _MAX_SCORE_CHARS or not numbers:
        return None
    if len(numbers) == 2 and numbers[1] == "10" and _OUT_OF.search(text):
        numbers = numbers[:1]
    if len(numbers) != 1 or int(numbers[0]) > 10:
        return None
    return int(numbers[0])


def build_decompose_graph(
    model: BaseChatModel | str = "local",
    *,
    judge: BaseChatModel | str | None = None,
    config: ComposeConfig | None = None,
) -> StateGraph:
    """The uncompiled decomposition graph (input ``{"sid": C}``; the bank from the context).

    ``judge`` scores the pairs (default: ``model``).
    """
    chat = load_chat_model(model)
    scorer = chat if judge is None else load_chat_model(judge)
    cfg = config or ComposeConfig()

    def read(state: DecomposeState, runtime: Runtime[MemoryContext]) -> DecomposeState:
        bank = bank_from_runtime(runtime)
        target, error = _entry(bank, state.get("sid"))
        if error:
            return error
        assert target is not None
        near = _neighbours(bank, target["sid"], cfg.neighbours)
        if len(near) < 2:
            return _error("no_pair", f"{target['sid']} has {len(near)} other entries: no pair")
        found = {"sid": target["sid"], "target": target, "neighbours": near, "error": None}
        return _writable(bank) or found

    def judge_pairs(state: DecomposeState) -> DecomposeState:
        target = state["target"]["payload"]
        pairs = []
        for a, b in itertools.combinations(state["neighbours"], 2):
            user = pair_judge_user_message(target, a["payload"], b["payload"])
            reply = _reply(scorer, pair_judge_prompt(), user)
            pairs.append({"sids": [a["sid"], b["sid"]], "score": _score(reply), "reply": reply})
        scored = [p for p in pairs if p["score"] is not None]
        if not scored:
            return {"pairs": pairs, **_error("judge", "the judge gave no score from 0 to 10")}
        best = max(scored, key=lambda p: p["score"])  # ties: the nearer pair, listed first
        return {"pairs": pairs, "chosen": best["sids"]}

    def rebuild(state: DecomposeState) -> DecomposeState:
        by_sid = {n["sid"]: n["payload"] for n in state["neighbours"]}
        a, b = (by_sid[s] for s in state["chosen"])
        user = decompose_user_message(state["target"]["payload"], a, b)
        return {"payload": _reply(chat, decompose_prompt(), user)}

    def write(state: DecomposeState, runtime: Runtime[MemoryContext]) -> DecomposeState:
        bank = bank_from_runtime(runtime)
        chosen = [n for n in state["neighbours"] if n["sid"] in state["chosen"]]
        read = [state["target"], *chosen]
        version = state["target"]["version"]
        return _write(bank, state["sid"], state["payload"], read, version, "decompose", cfg)

    g = StateGraph(DecomposeState, context_schema=MemoryContext)
    g.add_node("read", read)
    g.add_node("judge", judge_pairs)
    g.add_node("rebuild", rebuild)
    g.add_node("write", write)
    g.add_edge(START, "read")
    g.add_conditional_edges("read", _go_on, {"next": "judge", "end": END})
    g.add_conditional_edges("judge", _go_on, {"next": "rebuild", "end": END})
    g.add_edge("rebuild", "write")
    g.add_edge("write", END)
    return g
