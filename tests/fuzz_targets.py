"""Hostile input for every parser and entry point that takes text from outside: the fuzz targets.

Each :class:`Target` names an input (an SID string, a coordinator reply, the arguments a model
passes to ``memory_lookup``, a bank URL, a task file, a codebook directory, a policy record, an
update record, what a chat model replies to the closed loop's roles, to fusion and to
decomposition), a Hypothesis strategy that writes arbitrary and near-valid versions of it, and
a check that feeds one example in. The check returns ``"accepted"`` or ``"refused"`` (a typed
error: the input's own error classes); anything else escapes and is a failure. Targets that
touch a bank also assert that a refused input changed nothing in it.

``tests/test_fuzz.py`` runs each target on a few hundred examples in CI; ``bench/fuzz.py`` runs
10,000 each and records the counts.
"""

from __future__ import annotations

import atexit
import json
import shutil
import string
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genmem.errors import GenMemError
from genmem.memory.sid import DEFAULT_SPEC

__all__ = ["TARGETS", "Target", "fuzz"]

ACCEPTED, REFUSED = "accepted", "refused"


@dataclass(frozen=True)
class Target:
    """One input: how to write examples of it and how to feed one in."""

    name: str
    strategy: Callable[[], st.SearchStrategy[Any]]
    check: Callable[[Any, Path], str]
    """Feed one example in (a scratch folder beside it); ``accepted`` or ``refused``."""


def _sid_like() -> st.SearchStrategy[str]:
    """Text in and near the SID grammar: tokens with odd levels, codes, case and brackets."""
    token = st.builds(
        lambda pre, level, code, post: f"{pre}SID_L{level}_{code}{post}",
        st.sampled_from(["<", "", "< ", "<<", "&lt;"]),
        st.one_of(st.integers(-2, 7), st.text(string.digits, max_size=3)),
        st.one_of(st.integers(-5, 300), st.text(string.digits + "-+ x", max_size=4)),
        st.sampled_from([">", "", " >", ">>", ">\n"]),
    )
    return st.lists(token, max_size=6).map("".join)


def _valid_sids() -> st.SearchStrategy[str]:
    """Well-formed SIDs of the default space."""
    codes = st.tuples(*(st.integers(0, n - 1) for n in DEFAULT_SPEC.sizes))
    return codes.map(lambda c: str(DEFAULT_SPEC.make(c)))


def _json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30)
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
        ),
        max_leaves=12,
    )


# --- SIDs -------------------------------------------------------------------------------------


def _check_sid(text: str, _: Path) -> str:
    from genmem.errors import InvalidSID

    try:
        sid = DEFAULT_SPEC.parse(text)
    except InvalidSID:
        return REFUSED
    assert DEFAULT_SPEC.is_valid(str(sid)) and DEFAULT_SPEC.parse(str(sid)) == sid
    return ACCEPTED


# --- coordinator replies ----------------------------------------------------------------------


def _replies() -> st.SearchStrategy[Any]:
    actions = st.fixed_dictionaries(
        {"action": st.sampled_from(["plan", "delegate", "revise", "finish", "FINISH ", "x"])},
        optional={
            "steps": _json_values(),
            "agent": st.one_of(st.sampled_from(["solver", "Research", ""]), _json_values()),
            "task": _json_values(),
            "answer": _json_values(),
            "thought": _json_values(),
        },
    )
    shaped = st.one_of(
        actions, st.fixed_dictionaries({"thought": _json_values(), "action": actions})
    )
    text = st.text(min_size=1, max_size=40).filter(str.strip)
    valid = st.one_of(
        st.builds(lambda a: {"action": "finish", "answer": a}, text),
        st.builds(lambda s: {"action": "plan", "steps": s}, st.lists(text, min_size=1, max_size=3)),
        st.builds(lambda t: {"action": "delegate", "agent": "solver", "task": t}, text),
    ).map(lambda a: {"thought": "next", "action": a})
    return st.one_of(
        valid,
        valid.map(json.dumps),
        st.text(max_size=200),
        _json_values().map(json.dumps),
        shaped.map(json.dumps),
        shaped.map(lambda d: "Sure! " + json.dumps(d)[: max(1, len(json.dumps(d)) // 2)]),
        shaped,
    )


def _check_reply(reply: Any, _: Path) -> str:
    from genmem.graph.planner_actions import InvalidAction, parse_decision

    try:
        parse_decision(reply, agents=("solver", "research"))
    except InvalidAction:
        return REFUSED
    return ACCEPTED


# --- memory_lookup arguments, through LangGraph's ToolNode as a model's tool call --------------

_BANKS: dict[str, Any] = {}


def _bank(folder: Path) -> Any:
    """One small bank per process (a fuzz run reuses it; every check asserts it is unchanged)."""
    if "bank" not in _BANKS:
        from genmem.memory.sqlite_store import SQLiteBankStore

        root = Path(tempfile.mkdtemp(prefix="genmem-fuzz-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        store = SQLiteBankStore(root / "fuzz.db")
        bank = store.create_bank("fuzz", spec=DEFAULT_SPEC, codebook_hash="0" * 64)
        for codes in ((1, 2, 3, 4), (1, 2, 3, 5), (7, 0, 0, 0)):
            bank.insert(DEFAULT_SPEC.make(codes), f"entry {codes}")
        _BANKS["bank"], _BANKS["root"] = bank, root
    return _BANKS["bank"]


def _tool_args() -> st.SearchStrategy[Any]:
    sids = st.one_of(_valid_sids(), _sid_like())
    sid_list = st.one_of(sids, st.lists(sids, max_size=12), _json_values())
    return st.one_of(
        st.fixed_dictionaries({"sid_list": sid_list}),
        st.dictionaries(st.text(max_size=10), _json_values(), max_size=3),
        _json_values(),
    )


def _tool_graph(bank: Any) -> Any:
    """A graph of one LangGraph ToolNode holding ``memory_lookup`` over ``bank`` (made once)."""
    if "graph" not in _BANKS:
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode

        from genmem.tools import create_memory_lookup_tool

        g = StateGraph(MessagesState)
        g.add_node("tools", ToolNode([create_memory_lookup_tool(bank)]))
        g.add_edge(START, "tools")
        _BANKS["graph"] = g.compile()
    return _BANKS["graph"]


def _check_tool(args: Any, folder: Path) -> str:
    from langchain_core.messages import AIMessage, ToolMessage

    bank = _bank(folder)
    before = bank.stats()
    call = {"name": "memory_lookup", "args": args, "id": "call-1", "type": "tool_call"}
    if not isinstance(args, dict):
        call["args"] = {"sid_list": args}
    out = _tool_graph(bank).invoke({"messages": [AIMessage("", tool_calls=[call])]})
    message = out["messages"][-1]
    assert isinstance(message, ToolMessage) and isinstance(message.content, str)
    assert bank.stats() == before  # a lookup never writes
    found = message.status != "error" and "<retrieved_memory" in message.content
    return ACCEPTED if found else REFUSED


# --- bank URLs --------------------------------------------------------------------------------


def _urls() -> st.SearchStrategy[str]:
    scheme = st.sampled_from(["sqlite://", "sqlite:///", "sqlite:////", "memory://", "", "ftp://",
                              "SQLITE:///", "langgraph+sqlite:///"])  # fmt: skip
    query = st.one_of(st.just(""), st.text(max_size=20).map(lambda t: f"?bank={t}"),
                      st.text(max_size=20).map(lambda t: f"?{t}"))  # fmt: skip
    path = st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=30)
    return st.one_of(
        st.text(max_size=60), st.builds(lambda a, b, c: a + b + c, scheme, path, query)
    )


def _check_url(url: str, folder: Path) -> str:
    import os

    from genmem.memory.location import open_bank

    cwd = os.getcwd()
    scratch = Path(tempfile.mkdtemp(dir=folder))
    os.chdir(scratch)  # a relative path lands here, where nothing may appear
    try:
        try:
            open_bank(url)
        except GenMemError:
            return REFUSED
        finally:
            left = [p.name for p in scratch.iterdir()]
        raise AssertionError(f"{url!r} opened a bank that was never created")
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)
        assert not left, f"{url!r} left {left} behind"


# --- run contexts of a served graph -----------------------------------------------------------


def _run_contexts() -> st.SearchStrategy[tuple[dict[str, Any], str | None]]:
    """What a client may put in a served run's context, and who the server says it is."""
    near = st.sampled_from(
        [
            "sqlite:///ok.db?bank=ok", "sqlite:///../ok.db?bank=ok", "sqlite:///out/ok.db",
            "sqlite:////etc/hosts", "sqlite:///al/ok.db?bank=ok", "langgraph+sqlite:///s.db",
            "postgresql://u:pw@127.0.0.1:1/db", "memory://shared?bank=notes", "sqlite://",
            "sqlite:///ok.db?bank=ok&owner=al", "memory://x?owner=bo&bank=notes",
        ]
    )  # fmt: skip
    url = st.one_of(near, _urls())
    bank_id = st.one_of(st.sampled_from(["notes", "ok", "team", "default"]), st.text(max_size=12))
    context = st.fixed_dictionaries(
        {},
        optional={
            "bank_url": url,
            "bank": st.one_of(url, st.integers(), st.none()),
            "bank_id": bank_id,
            "langgraph_auth_user": st.one_of(st.just({"identity": "al"}), st.text(max_size=5)),
        },
    )
    return st.tuples(context, st.sampled_from([None, "al", "bo"]))


def _served_setup(folder: Path) -> tuple[Path, Any]:
    """A bank root holding ``ok.db`` (and a symlink out of it), and a store with two users'
    ``notes`` banks: made once per folder."""
    from langgraph.store.memory import InMemoryStore

    from genmem.memory.langgraph_store import LangGraphBankStore

    root = folder / "served" / "root"
    key = str(root)
    if key not in _SERVED:
        (root / "al").mkdir(parents=True)
        (root / "out").symlink_to(folder)
        for path in (root / "ok.db", root / "al" / "ok.db"):
            _bank_at(f"sqlite:///{path}?bank=ok").store.close()
        store = InMemoryStore()
        for owner in ("al", "bo"):
            LangGraphBankStore(store, owner=owner).create_bank(
                "notes", spec=DEFAULT_SPEC, codebook_hash="f" * 64
            )
        _SERVED[key] = store
    return root, _SERVED[key]


_SERVED: dict[str, Any] = {}


def _bank_at(url: str) -> Any:
    from genmem.memory.location import open_bank

    @dataclass
    class _Books:
        hash: str = "f" * 64
        spec = DEFAULT_SPEC

    return open_bank(url, codebooks=_Books(), create=True)


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _check_run_context(case: tuple[dict[str, Any], str | None], folder: Path) -> str:
    """Resolve the bank of a served run: refused (typed), or a bank the rules allow; either way
    no file appears and the bank is under the root (the user's folder) or the user's own."""
    import os
    import os.path
    from types import SimpleNamespace

    from genmem.tools.lookup import close_resolved_banks, resolve_bank
    from genmem.tools.served_banks import BANK_ROOT_ENV, CLIENT_URLS_ENV, SERVED_BANKS_ENV

    @dataclass
    class _User:
        identity: str

    context, user = case
    root, store = _served_setup(folder)
    before = _tree(folder)
    configurable = {**context, "graph_id": "bank_lookup", "langgraph_auth_user": None}
    if user is not None:
        configurable["langgraph_auth_user"] = _User(user)
    runtime = SimpleNamespace(context=context, config={"configurable": configurable}, store=store)
    saved = {k: os.environ.get(k) for k in (CLIENT_URLS_ENV, BANK_ROOT_ENV, SERVED_BANKS_ENV)}
    os.environ.update({CLIENT_URLS_ENV: "1", BANK_ROOT_ENV: str(root), SERVED_BANKS_ENV: ""})
    try:
        try:
            bank = resolve_bank(runtime)  # type: ignore[arg-type]
        except GenMemError:
            return REFUSED
        where = getattr(bank.store, "owner", "no owner")
        if where == "no owner":  # a file: under the root, under the user's folder for a user
            path = os.path.realpath(str(bank.store.url).split(":///", 1)[-1])
            mine = os.path.realpath(root if user is None else root / user)
            assert path.startswith(mine + os.sep), (context, user, path)
        else:
            assert where == user, (context, user, where)
        return ACCEPTED
    finally:
        close_resolved_banks()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        assert _tree(folder) == before, f"{case!r} changed the files"


# --- task files -------------------------------------------------------------------------------


def _task_files() -> st.SearchStrategy[bytes]:
    row = st.fixed_dictionaries(
        {},
        optional={k: _json_values() for k in ("id", "question", "answer", "choices", "context")},
    ).map(lambda d: json.dumps(d).encode())
    line = st.one_of(row, st.binary(max_size=40), st.text(max_size=40).map(str.encode))
    return st.lists(line, max_size=5).map(b"\n".join)


def _check_task_file(data: bytes, folder: Path) -> str:
    from genmem.envs.benches import FORMATS, open_data

    path = Path(tempfile.mkdtemp(dir=folder)) / "tasks.jsonl"
    path.write_bytes(data)
    outcomes = set()
    for fmt in (None, *FORMATS):
        try:
            env = open_data(path, fmt)
            tasks = env.tasks()
        except (ValueError, FileNotFoundError):  # FileNotFoundError: none for a file that exists
            outcomes.add(REFUSED)
            continue
        assert all(isinstance(t.query, str) and t.query for t in tasks)
        outcomes.add(ACCEPTED)
    shutil.rmtree(path.parent, ignore_errors=True)
    return ACCEPTED if ACCEPTED in outcomes else REFUSED


# --- codebook directories ---------------------------------------------------------------------

_CODEBOOKS: dict[str, Path] = {}


def _codebook_dir() -> Path:
    if "dir" not in _CODEBOOKS:
        from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig

        x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
        books = RQKMeans(RQKMeansConfig(sizes=(4, 2, 2))).fit(x, progress=False).codebooks_
        root = Path(tempfile.mkdtemp(prefix="genmem-fuzz-cb-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        _CODEBOOKS["dir"] = books.save(root / "cb", remember=False)
    return _CODEBOOKS["dir"]


def _corruptions() -> st.SearchStrategy[tuple[str, str, Any]]:
    files = st.sampled_from(["metadata.json", "centres.npz"])
    how = st.sampled_from(["truncate", "bytes", "json", "delete", "flip"])
    return st.tuples(
        files, how, st.one_of(st.binary(max_size=64), _json_values(), st.integers(0, 4096))
    )


def _check_codebooks(case: tuple[str, str, Any], folder: Path) -> str:
    from genmem.errors import CodebookError
    from genmem.memory.rqkmeans import Codebooks

    name, how, value = case
    target = Path(tempfile.mkdtemp(dir=folder)) / "cb"
    shutil.copytree(_codebook_dir(), target)
    path = target / name
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: (value if isinstance(value, int) else len(data) // 2) % len(data)])
    elif how == "bytes":
        path.write_bytes(value if isinstance(value, bytes) else str(value).encode())
    elif how == "json":
        path.write_text(json.dumps(value.decode("latin-1") if isinstance(value, bytes) else value))
    elif how == "delete":
        path.unlink()
    else:  # flip one byte somewhere
        i = (value if isinstance(value, int) else 7) % len(data)
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :])
    try:
        Codebooks.load(target, remember=False)
    except CodebookError:
        return REFUSED
    finally:
        shutil.rmtree(target.parent, ignore_errors=True)
    return ACCEPTED  # a flip inside unused zip padding can leave the arrays as they were


# --- policy records ---------------------------------------------------------------------------


def _policy_records() -> st.SearchStrategy[bytes]:
    near = st.fixed_dictionaries(
        {"base_model": _json_values()},
        optional={k: _json_values() for k in ("sid_sizes", "codebook_hash", "alignment", "notes")},
    ).map(lambda d: json.dumps(d).encode())
    return st.one_of(
        near, st.binary(max_size=80), _json_values().map(lambda v: json.dumps(v).encode())
    )


def _check_policy(data: bytes, folder: Path) -> str:
    from genmem.errors import InvalidModelSpec
    from genmem.policies.policy_dir import POLICY_FILE, read_info

    directory = Path(tempfile.mkdtemp(dir=folder))
    (directory / POLICY_FILE).write_bytes(data)
    try:
        read_info(directory)
    except InvalidModelSpec:
        return REFUSED
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return ACCEPTED


# --- update records ---------------------------------------------------------------------------


def _updates() -> st.SearchStrategy[Any]:
    near = st.fixed_dictionaries(
        {
            "op": st.one_of(
                st.sampled_from(["insert", "revise", "delete", "INSERT", ""]), _json_values()
            )
        },
        optional={
            "sid": st.one_of(_valid_sids(), _sid_like(), _json_values()),
            "payload": st.one_of(st.text(max_size=40), _json_values()),
            "expected_version": _json_values(),
        },
    )
    valid = st.builds(
        lambda op, sid, n: {"op": op, "sid": sid,
                            "payload": f"Read the entry, then check entry {n} against the task."},
        st.sampled_from(["insert", "revise"]), _valid_sids(), st.integers(0, 99),
    )  # fmt: skip
    return st.one_of(valid, near, _json_values())


def _check_update(update: Any, folder: Path) -> str:
    from genmem.memory.gate import WriteGate

    bank = _bank(folder)
    before = bank.stats()
    gate = WriteGate(sources=("entry",))
    try:
        result = bank.apply(update, actor="fuzz", gate=gate)
    except GenMemError:
        assert bank.stats() == before, f"a refused update {update!r} changed the bank"
        return REFUSED
    # a valid update went through the gate: undo nothing (history is kept), but keep the bank
    # small for the next examples by deleting what was inserted
    if result.outcome == "inserted":
        bank.revise(result.sid, "", actor="fuzz")
    return ACCEPTED


# --- model replies to every role, through the closed-loop graph ------------------------------

_QUERY = "Pens cost $2 each. How much do 3 pens cost?"
_ENTRY = "Find the price of one pen first, then multiply it by the number of pens."


def _replies_to_roles() -> st.SearchStrategy[list[str]]:
    """What a chat model may say to MemRetriever, StackPlanner and MemEvolver, in any order."""
    sid = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
    decision = st.fixed_dictionaries(
        {"op": st.sampled_from(["insert", "revise", "retain", "delete", "x"])},
        optional={"analysis": _json_values(), "sid": st.one_of(st.just(sid), _sid_like()),
                  "payload": st.one_of(st.text(max_size=80), _json_values())},
    ).map(json.dumps)  # fmt: skip
    action = st.sampled_from([
        {"thought": "t", "action": {"action": "finish", "answer": "6"}},
        {"thought": "t", "action": {"action": "delegate", "agent": "solver", "task": "3 x 2"}},
        {"action": "plan", "steps": ["multiply"]},
    ]).map(json.dumps)  # fmt: skip
    valid_revise = st.just(json.dumps({"analysis": "a", "op": "revise", "sid": sid,
        "payload": "Take the price of one pen, then multiply it by how many pens."}))  # fmt: skip
    reply = st.one_of(
        st.text(max_size=120),
        st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=20),  # control characters
        st.just("x" * 20_000),  # a huge reply
        decision, action, valid_revise,
        st.one_of(decision, action).map(lambda t: t[: len(t) // 2]),  # cut off mid-JSON
        _json_values().map(json.dumps),
        st.just("<answer>Price of one pen, times the count of pens.</answer>"),
    )  # fmt: skip
    return st.lists(reply, min_size=1, max_size=6)


def _check_replies(replies: list[str], folder: Path) -> str:
    from genmem.graph.loop import build_genmem_graph
    from genmem.graph.stack import StackBudgetConfig
    from genmem.graph.stackplanner import StackPlannerConfig
    from genmem.memory.gate import check_payload
    from genmem.memory.location import open_bank
    from genmem.memory.sid import SID
    from genmem.memory.sqlite_store import SQLiteBankStore
    from tests.fakes import FakeChat, FixedGenerator

    directory = Path(tempfile.mkdtemp(dir=folder))
    slot = SID((3, 0, 7, 1))
    SQLiteBankStore(directory / "bank.db").create_bank(
        "b", spec=DEFAULT_SPEC, codebook_hash="0" * 64
    ).insert(slot, _ENTRY)
    url = f"sqlite:///{directory}/bank.db?bank=b"
    graph = build_genmem_graph(
        FakeChat(responses=replies),
        sid_generator=FixedGenerator([slot]),
        planner_config=StackPlannerConfig(budget=StackBudgetConfig(max_steps=2)),
    ).compile()
    out = graph.invoke({"query": _QUERY, "mode": "evolve"}, context={"bank_url": url})
    assert out.get("status"), out  # every run ends with a status (answer, budget, error, ...)
    bank = open_bank(url)
    assert bank.check(raise_on_error=False) == []
    written = [v for v in bank.history(slot) if v.version > 1 and not v.deleted]
    for version in written:  # only what the gate lets through reaches the bank
        verdict = check_payload(version.payload, sources=[_QUERY, _ENTRY, *replies])
        assert verdict.passed, (version.payload, verdict)
    shutil.rmtree(directory, ignore_errors=True)
    return ACCEPTED if written or out.get("answer") else REFUSED


# --- model replies to fusion and decomposition (genmem sid fuse / decompose) -----------------

_EGGS = "Problem type: daily sales. Count the eggs left after the household uses some, then sell."
_MILK = "Problem type: daily sales. Subtract the litres the family drinks, then price the rest."
_FARE = "Problem type: trip cost. Add the fares of each leg, then multiply by the travellers."
_TARGET = (
    "Problem type: daily sales with costs. Take what is used at home, sell the rest, pay feed."
)
_FUSED = (
    "Problem type: daily sales of a farm product.\nEvidence needed: the daily amount, what is "
    "used at home, the unit price.\nProcedure: 1. Take what is used from the daily amount. "
    "2. Multiply the rest by the price."
)
_REBUILT = (
    "Problem type: daily sales with costs.\nProcedure: 1. Subtract what the household uses from "
    "the daily amount. 2. Multiply the rest by the unit price. 3. Take away the feed cost."
)
# A, B, D share prefixes with the target T (decomposition's neighbours); C and FAR are empty.
_A, _B, _D = (
    "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>",
    "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_2>",
    ("<SID_L1_3><SID_L2_0><SID_L3_5><SID_L4_0>"),
)
_T, _C, _FAR = (
    "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_0>",
    "<SID_L1_3><SID_L2_0><SID_L3_6><SID_L4_0>",
    ("<SID_L1_9><SID_L2_1><SID_L3_1><SID_L4_1>"),
)
_ENTRIES = {_A: _EGGS, _B: _MILK, _D: _FARE, _T: _TARGET}


def _compose_replies() -> st.SearchStrategy[str]:
    """What a chat model may say when asked to fuse, judge a pair or rebuild an entry."""
    score = st.one_of(
        st.integers(-3, 14).map(str),
        st.sampled_from(["Score: 7", "7/10", "8 out of 10", "seven", "10/10", "3 or 4", ""]),
    )
    other_roles = st.sampled_from([
        json.dumps({"analysis": "a", "op": "revise", "sid": _A, "payload": _FUSED}),
        json.dumps({"thought": "t", "action": {"action": "finish", "answer": "6"}}),
        json.dumps({"experiences": [{"problem_type": "sales", "procedure": "sell"}]}),
        f"<SID_L1_3><SID_L2_0>{_C}",
    ])  # fmt: skip
    valid = st.sampled_from([_FUSED, _REBUILT])
    return st.one_of(
        st.text(max_size=200),
        st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=20),  # control characters
        st.just("x" * 20_000),  # a huge reply
        st.builds(lambda n: "word " * n, st.integers(0, 3_000)),
        score,
        other_roles,
        other_roles.map(lambda t: t[: len(t) // 2]),  # cut off mid-JSON
        _json_values().map(json.dumps),
        valid,
        valid.map(lambda t: f"<answer>{t}</answer>"),
        valid.map(lambda t: f'<experience name="C">\n{t}\n</experience>'),
        valid.map(lambda t: t[: len(t) // 2]),  # cut off mid-entry
        st.just(f"{_EGGS}\n{_MILK}"),  # the two sources put together
        st.just(_TARGET),  # the entry as it was
        st.builds(lambda t, junk: t + junk, valid, st.text(max_size=40)),
    )  # fmt: skip


def _compose_bank(folder: Path) -> tuple[Path, str]:
    from genmem.memory.sqlite_store import SQLiteBankStore

    directory = Path(tempfile.mkdtemp(dir=folder))
    bank = SQLiteBankStore(directory / "bank.db").create_bank(
        "b", spec=DEFAULT_SPEC, codebook_hash="0" * 64
    )
    for sid, text in _ENTRIES.items():
        bank.insert(sid, text)
    return directory, f"sqlite:///{directory}/bank.db?bank=b"


def _live(bank: Any) -> dict[str, tuple[int, str]]:
    return {str(e.sid): (e.version, e.payload) for e in bank.entries()}


def _check_composed(out: dict[str, Any], url: str, read: list[str]) -> str:
    """A composition's run ended with a typed error or a bank result, and the bank changed only
    by a write that the gate, run again here on what the graph read, passes."""
    from genmem.graph.compose import COMPOSE_GATE
    from genmem.memory.gate import WriteGate
    from genmem.memory.location import open_bank

    error, update = out.get("error"), out.get("update")
    kinds = {"invalid_sid", "empty_slot", "read_only", "no_pair", "judge", "bank"}
    assert (error is None) != (update is None), out  # one or the other, never both or neither
    assert error is None or (error["kind"] in kinds and error["message"]), error
    bank = open_bank(url)
    assert bank.check(raise_on_error=False) == []
    now = _live(bank)
    changed = {sid for sid in {*now, *_ENTRIES} if now.get(sid, (1, None))[1] != _ENTRIES.get(sid)}
    written = update is not None and update["outcome"] in ("inserted", "revised")
    if not written:
        assert not changed, (out, changed)  # a refusal, an error or a retention changes nothing
        return REFUSED
    assert changed == {update["sid"]} and now[update["sid"]][0] == update["version_after"]
    payload = now[update["sid"]][1]
    assert payload == out["payload"]  # what the model wrote, unwrapped, and nothing else
    sources = tuple(_ENTRIES[s] for s in read)
    others = tuple(_ENTRIES[s] for s in read if s != update["sid"])
    previous = _ENTRIES.get(update["sid"]) if update["op"] == "revise" else None
    gate = WriteGate(sources=sources, config=COMPOSE_GATE, memory=others)
    verdict = gate.check(payload, previous=previous)  # as the bank runs it
    assert verdict.action == "write", (payload, verdict)
    return ACCEPTED


def _check_fusion(case: tuple[str, str, list[str]], folder: Path) -> str:
    from genmem.graph.compose import build_fuse_graph
    from genmem.memory.gate import check_join
    from tests.fakes import FakeChat, FixedGenerator

    reply, at, sids = case
    directory, url = _compose_bank(folder)
    graph = build_fuse_graph(
        FakeChat(responses=[reply]), sid_generator=FixedGenerator([DEFAULT_SPEC.parse(at)])
    ).compile()
    out = graph.invoke({"sids": sids}, context={"bank_url": url})
    result = _check_composed(out, url, [_A, _B])
    if result == ACCEPTED:  # a fusion is no join of its two sources
        assert check_join(out["payload"], [_EGGS, _MILK], 0.85).action != "reject"
    shutil.rmtree(directory, ignore_errors=True)
    return result


def _fusion_cases() -> st.SearchStrategy[tuple[str, str, list[str]]]:
    sids = st.one_of(
        st.just([_A, _B]),
        st.just([_A, _B]),
        st.just([_A, _B]),
        st.lists(st.one_of(st.sampled_from([_A, _B, _C, _FAR]), _sid_like()), max_size=3),
    )
    return st.tuples(_compose_replies(), st.sampled_from([_C, _FAR, _A, _T]), sids)


def _check_decomposition(case: tuple[list[str], str], folder: Path) -> str:
    from genmem.graph.compose import build_decompose_graph
    from tests.fakes import FakeChat

    replies, target = case
    directory, url = _compose_bank(folder)
    graph = build_decompose_graph(FakeChat(responses=replies)).compile()
    out = graph.invoke({"sid": target}, context={"bank_url": url})
    read = [out["sid"], *out["chosen"]] if out.get("update") else []
    result = _check_composed(out, url, read)
    if result == ACCEPTED:  # the target is rewritten in place, nothing else
        assert out["update"]["sid"] == out["sid"] and out["update"]["op"] == "revise"
    shutil.rmtree(directory, ignore_errors=True)
    return result


def _decomposition_cases() -> st.SearchStrategy[tuple[list[str], str]]:
    """The judge's three replies (one per pair of the target's neighbours), then the rebuild's;
    sometimes a target that is no entry."""
    target = st.one_of(
        st.just(_T), st.just(_T), st.just(_T), st.sampled_from([_C, _A]), _sid_like()
    )
    return st.tuples(st.lists(_compose_replies(), min_size=1, max_size=5), target)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "sid", lambda: st.one_of(st.text(max_size=80), _sid_like(), _valid_sids()), _check_sid
        ),
        Target("coordinator_reply", _replies, _check_reply),
        Target("memory_lookup_args", _tool_args, _check_tool),
        Target("bank_url", _urls, _check_url),
        Target("served_run_context", _run_contexts, _check_run_context),
        Target("task_file", _task_files, _check_task_file),
        Target("codebook_dir", _corruptions, _check_codebooks),
        Target("policy_record", _policy_records, _check_policy),
        Target("update", _updates, _check_update),
        Target("model_replies", _replies_to_roles, _check_replies),
        Target("fusion_replies", _fusion_cases, _check_fusion),
        Target("decomposition_replies", _decomposition_cases, _check_decomposition),
    )
}


def fuzz(target: Target, examples: int, folder: Path, *, seed: int = 0) -> dict[str, int]:
    """Run ``examples`` examples of ``target``; counts of ``accepted`` and ``refused``.

    An example that raises anything but its target's typed errors fails the run (Hypothesis
    shrinks it to a minimal example first)."""
    counts: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(target.strategy())
    def run(value: Any) -> None:
        counts[target.check(value, folder)] += 1

    run()
    return {"tried": sum(counts.values()), **counts}
