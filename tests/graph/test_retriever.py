"""MemRetriever subgraph: control flow with fakes, then the real default model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from genmem.graph.retriever import RetrieverConfig, build_retriever_graph, extract_answer
from genmem.memory.gate import check_payload
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.prompts import NO_MEMORY_ANSWER
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank

FAR = SID((40, 2, 2, 2))


@pytest.fixture
def bank_url(tmp_path) -> str:
    return one_entry_bank(
        tmp_path, "For rate problems, find the amount per unit first, then scale it."
    )


def _run(graph, url: str, query: str = "Pens cost $3 for 2. How much do 10 cost?") -> dict:
    return graph.compile().invoke({"query": query}, context={"bank_url": url})


def test_extract_answer() -> None:
    assert extract_answer("<think>hm</think> <answer> do X </answer>") == "do X"
    assert extract_answer("<answer>unclosed") == "unclosed"
    assert extract_answer("<think>only thinking</think>plain") == "plain"


def test_one_sid_one_real_tool_call_then_rewrite(bank_url) -> None:
    gen = FixedGenerator([A])
    chat = FakeChat(responses=["<think>rates</think><answer>Find the unit price.</answer>"])
    out = _run(build_retriever_graph(chat, sid_generator=gen), bank_url)
    assert out["sid"] == str(A)
    assert out["support"] == "Find the unit price."
    assert out["support_source"] == "rewrite" and out["support_refused"] is None
    assert [h["sid"] for h in out["retrieved"]] == [str(A)]
    assert "amount per unit" in out["retrieved"][0]["payload"]
    calls = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert len(calls) == 1 and calls[0].tool_calls[0]["args"] == {"sid_list": [str(A)]}
    tool = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool) == 1 and "<retrieved_memory" in tool[0].content
    assert gen.calls and "Pens cost" in gen.calls[0]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        # what the default model wrote in a real eval run: the tool's markup echoed back
        ("<tool_response>\n1. She gets 1000/25=40 sections\n2. She gives away", "markup"),
        ("<answer>1234567890</answer>", "empty"),
        ("<answer>1. 2. 3. 4. 5. 6. 7. 8. 9. 10. 11. 12.</answer>", "symbols"),
        ("<answer>Bake the sourdough loaf overnight before slicing.</answer>", "ungrounded"),
    ],
)
def test_a_refused_rewrite_gives_the_planner_the_entry(bank_url, reply, reason) -> None:
    chat = FakeChat(responses=[reply])
    out = _run(build_retriever_graph(chat, sid_generator=FixedGenerator([A])), bank_url)
    assert out["support"] == out["retrieved"][0]["payload"]
    assert out["support_source"] == "entry" and out["support_refused"] == reason
    assert any(m.content == reply for m in out["messages"] if isinstance(m, AIMessage))


def test_without_a_rewrite_the_planner_gets_the_entry_and_the_model_is_not_asked(bank_url):
    chat = FakeChat(responses=[])  # raises if called
    config = RetrieverConfig(rewrite=False)
    out = _run(
        build_retriever_graph(chat, sid_generator=FixedGenerator([A]), config=config), bank_url
    )
    assert out["support"] == out["retrieved"][0]["payload"] and chat.prompts == []
    assert out["support_source"] == "entry" and out["support_refused"] == "skipped"


def test_nothing_retrieved_gives_the_fixed_answer_without_the_model(tmp_path) -> None:
    SQLiteBankStore(tmp_path / "empty.db").create_bank(
        "default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    url = f"sqlite:///{tmp_path}/empty.db"
    chat = FakeChat(responses=[])  # raises if called
    out = _run(build_retriever_graph(chat, sid_generator=FixedGenerator([FAR])), url)
    assert out["sid"] == str(FAR)
    assert out["retrieved"] == [] and out["support"] == NO_MEMORY_ANSWER
    assert out["support_source"] == "none"


def test_rerank_picks_the_candidate_with_a_payload(bank_url) -> None:
    chat = FakeChat(responses=["<answer>ok</answer>"])
    gen = FixedGenerator([FAR, A])  # the decoder prefers an empty slot
    graph = build_retriever_graph(
        chat, sid_generator=gen, config=RetrieverConfig(beam=2, rerank=True)
    )
    assert _run(graph, bank_url)["sid"] == str(A)


def test_bad_input_and_config(bank_url) -> None:
    graph = build_retriever_graph(FakeChat(responses=[]), sid_generator=FixedGenerator([A]))
    with pytest.raises(ValueError, match="non-empty 'query'"):
        _run(graph, bank_url, query="  ")
    with pytest.raises(ValueError, match="beam"):
        RetrieverConfig(beam=0)
    with pytest.raises(ValueError, match="rerank"):
        RetrieverConfig(rerank=True)


@pytest.mark.slow
def test_real_default_model_end_to_end(bank_url) -> None:
    bank = open_bank(bank_url)
    bank.insert(SID((10, 4, 2, 2)), "When a question mixes units, convert everything first.")
    from genmem.policies.backends import capped_chat_model

    # a short rewrite (the gate grades it whatever its length; the default cap is 256 tokens)
    chat = capped_chat_model("local", 48)
    graph = build_retriever_graph(chat, config=RetrieverConfig(allowed="occupied", beam=2))
    out = _run(graph, bank_url)
    assert out["sid"] in {str(s) for s in bank.occupied()}
    assert out["retrieved"] and out["retrieved"][0]["sid"] == out["sid"]
    assert isinstance(out["support"], str) and out["support"].strip()
    # whatever the small model rewrote, the planner gets gated text: its rewrite or the entry
    assert out["support_source"] in ("rewrite", "entry")
    sources = [out["query"], *(h["payload"] for h in out["retrieved"])]
    assert check_payload(out["support"], sources=sources).passed


def test_langgraph_json_serves_mem_retriever() -> None:
    import json
    from pathlib import Path

    from genmem import served

    cfg = json.loads((Path(__file__).resolve().parents[2] / "langgraph.json").read_text())
    assert cfg["graphs"]["mem_retriever"] == "./genmem/served.py:mem_retriever"
    graph = served.mem_retriever()
    assert graph.store is None  # compiled bare: the server adds its store
    assert set(graph.builder.nodes) == {"address", "lookup", "rewrite"}
