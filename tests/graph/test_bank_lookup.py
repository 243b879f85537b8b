"""The bank-lookup graph that `langgraph dev` serves."""

from __future__ import annotations

import json
from pathlib import Path

from langgraph.store.memory import InMemoryStore

from genmem.graph.bank_lookup import build_lookup_graph
from genmem.memory.langgraph_store import LangGraphBankStore
from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH

A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"


def test_reads_the_platform_store() -> None:
    store = InMemoryStore()
    bank = LangGraphBankStore(store).create_bank(
        "default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(A, "stored in the server's store")
    app = build_lookup_graph().compile(store=store)
    out = app.invoke({"sid_list": [A, "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_0>"]})
    assert out["error"] is None
    assert out["results"][0]["exact"] and out["results"][1]["hits"][0]["match_depth"] == 3


def test_reads_a_bank_url_and_reports_bad_sids(tmp_path: Path) -> None:
    SQLiteBankStore(tmp_path / "b.db").create_bank(
        "x", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    ).insert(A, "from a file")
    app = build_lookup_graph().compile()
    ctx = {"bank_url": f"sqlite:///{tmp_path}/b.db?bank=x", "memory_k": 2}
    out = app.invoke({"sid_list": [A]}, context=ctx)
    assert out["results"][0]["hits"][0]["payload"] == "from a file"
    bad = app.invoke({"sid_list": ["<SID_L1_99>"]}, context=ctx)
    assert bad["results"] == [] and "allows codes 0-47" in bad["error"]


def test_langgraph_json_points_at_the_graph() -> None:
    cfg = json.loads((Path(__file__).resolve().parents[2] / "langgraph.json").read_text())
    path, _, name = cfg["graphs"]["bank_lookup"].partition(":")
    assert path == "./genmem/served.py" and name == "bank_lookup"
