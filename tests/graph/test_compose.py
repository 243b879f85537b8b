"""Fusion (A + B -> C) and decomposition (C -> A, B) through the bank's gated write path."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage

from genmem.graph.compose import ComposeConfig, build_decompose_graph, build_fuse_graph
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator, by_role

A, B, C = SID((3, 0, 7, 1)), SID((3, 0, 7, 2)), SID((3, 0, 5, 0))
FAR = SID((9, 1, 1, 1))
EGGS = "Problem type: daily sales. Count the eggs left after the household uses some, then sell."
MILK = "Problem type: daily sales. Subtract the litres the family drinks, then price the rest."
FUSED = (
    "Problem type: daily sales of a farm product.\n"
    "Evidence needed: the daily amount, what is used at home, the unit price.\n"
    "Failure modes: selling the whole amount; forgetting one of the uses.\n"
    "Procedure: 1. Take what is used from the daily amount. 2. Multiply by the price."
)


@pytest.fixture
def bank_url(tmp_path) -> str:
    bank = SQLiteBankStore(tmp_path / "bank.db").create_bank(
        "b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(A, EGGS)
    bank.insert(B, MILK)
    return f"sqlite:///{tmp_path}/bank.db?bank=b"


def _chat(**replies: Any) -> FakeChat:
    """Replies by role: ``fuse`` to a fusion, ``judge`` to the pair judge, ``rebuild`` to a
    decomposition's rewrite; a call of another role fails."""
    return FakeChat(reply=by_role(**replies))


def _fuse(bank_url: str, chat: BaseChatModel, at: SID, sids: list[str]) -> dict[str, Any]:
    app = build_fuse_graph(chat, sid_generator=FixedGenerator([at])).compile()
    return app.invoke({"sids": sids}, context={"bank_url": bank_url})


def test_fusion_inserts_one_entry_with_both_sources_in_its_provenance(bank_url) -> None:
    out = _fuse(bank_url, _chat(fuse=FUSED), C, [str(A), str(B)])
    assert out["error"] is None and out["sid"] == str(C) and out["addresser"] == "custom"
    assert (out["update"]["op"], out["update"]["outcome"]) == ("insert", "inserted")
    bank = open_bank(bank_url)
    entry = bank.get(C)
    assert entry.payload == FUSED and entry.actor == "compose"
    assert entry.metadata["composed"] == {
        "by": "fuse",
        "from": [{"sid": str(A), "version": 1}, {"sid": str(B), "version": 1}],
    }
    assert bank.get(A).payload == EGGS and bank.get(B).payload == MILK  # sources untouched


def test_fusion_onto_an_occupied_slot_revises_it_and_keeps_the_old_version(bank_url) -> None:
    out = _fuse(bank_url, _chat(fuse=FUSED), A, [str(A), str(B)])
    assert out["update"]["outcome"] == "revised" and out["expected"] == 1
    bank = open_bank(bank_url)
    assert [v.payload for v in bank.history(A)] == [EGGS, FUSED]


def test_a_join_of_the_sources_and_junk_are_refused_and_logged(bank_url) -> None:
    bank = open_bank(bank_url)
    before = len(bank.events())
    joined = _fuse(bank_url, _chat(fuse=f"{EGGS}\n{MILK}"), C, [str(A), str(B)])
    assert (joined["update"]["outcome"], joined["update"]["reason"]) == ("rejected", "copied")
    junk = _fuse(bank_url, _chat(fuse="1234567890 1234567890"), C, [str(A), str(B)])
    assert junk["update"]["outcome"] == "rejected"
    # an answer is not an experience: the default model's fusions included this one
    answer = _fuse(bank_url, _chat(fuse="The answer is yes."), C, [str(A), str(B)])
    assert (answer["update"]["outcome"], answer["update"]["reason"]) == ("rejected", "empty")
    assert bank.get(C) is None
    assert [e.outcome for e in bank.events()[before:]] == ["rejected"] * 3


@pytest.mark.parametrize(
    ("sids", "kind"),
    [
        (["<SID_L1_3>", str(B)], "invalid_sid"),
        ([str(A), "<SID_L1_99><SID_L2_0><SID_L3_0><SID_L4_0>"], "invalid_sid"),
        ([str(A), str(A)], "invalid_sid"),
        ([str(A)], "invalid_sid"),
        ([str(A), str(FAR)], "empty_slot"),
    ],
)
def test_bad_input_calls_no_model_and_changes_nothing(bank_url, sids, kind) -> None:
    chat = _chat(fuse=FUSED)
    bank = open_bank(bank_url)
    before = len(bank.events())
    out = _fuse(bank_url, chat, C, sids)
    assert out["error"]["kind"] == kind and out["update"] is None
    assert chat.prompts == [] and len(bank.events()) == before


def test_a_read_only_bank_is_refused_before_the_model_runs(bank_url) -> None:
    bank = open_bank(bank_url)
    bank.snapshot("t0")
    chat = _chat(fuse=FUSED)
    out = _fuse(f"{bank_url}@t0", chat, C, [str(A), str(B)])
    assert out["error"]["kind"] == "read_only" and chat.prompts == []
    with pytest.raises(ValueError, match="neighbours"):
        ComposeConfig(neighbours=1)


def _judge(messages: list[BaseMessage]) -> str:
    """Scores 9 for the pair that holds the milk entry and the cheese one, else 2."""
    user = str(messages[-1].content)
    return "Score: 9" if "litres" in user and "cheese" in user else "2 out of 10"


def test_decomposition_picks_the_best_pair_and_rebuilds_the_target(bank_url) -> None:
    bank = open_bank(bank_url)
    target = SID((3, 0, 7, 3))
    bank.insert(target, "Problem type: daily sales of dairy. Work out what is left, then sell it.")
    cheese = SID((3, 0, 6, 0))
    bank.insert(cheese, "Problem type: unit prices. Turn kilos of cheese into a price per kilo.")
    bank.insert(FAR, "Problem type: ages. Write each age as an equation in one unknown.")
    rebuilt = (
        "Problem type: daily sales of dairy.\n1. Subtract what the family uses from the daily "
        "litres.\n2. Find the price per unit.\n3. Multiply what is left by that price."
    )
    chat = _chat(judge=_judge, rebuild=rebuilt)
    app = build_decompose_graph(chat, config=ComposeConfig(neighbours=3)).compile()
    out = app.invoke({"sid": str(target)}, context={"bank_url": bank_url})
    # the nearest three: the two siblings under <3,0,7>, then the cousin under <3,0>
    assert [n["sid"] for n in out["neighbours"]] == [str(A), str(B), str(cheese)]
    assert len(out["pairs"]) == 3 and out["chosen"] == [str(B), str(cheese)]
    assert [p["score"] for p in out["pairs"]] == [2, 2, 9]
    assert out["update"]["outcome"] == "revised"
    entry = bank.get(target)
    assert entry.payload == rebuilt and entry.version == 2
    assert [s["sid"] for s in entry.metadata["composed"]["from"]] == [
        str(target), str(B), str(cheese)
    ]  # fmt: skip


def test_decomposition_without_a_pair_or_a_score_writes_nothing(bank_url) -> None:
    bank = open_bank(bank_url)
    chat = _chat(judge="no idea", rebuild="x")
    app = build_decompose_graph(chat).compile()
    out = app.invoke({"sid": str(A)}, context={"bank_url": bank_url})
    assert out["error"]["kind"] == "no_pair"  # only B is left: one neighbour
    bank.insert(C, "Problem type: daily sales. Keep the amount used at home apart.")
    out = app.invoke({"sid": str(A)}, context={"bank_url": bank_url})
    assert out["error"]["kind"] == "judge" and [p["score"] for p in out["pairs"]] == [None]
    assert bank.get(A).version == 1
    out = app.invoke({"sid": str(FAR)}, context={"bank_url": bank_url})
    assert out["error"]["kind"] == "empty_slot"


def test_only_a_short_reply_that_is_a_score_counts() -> None:
    from genmem.graph.compose import _score

    assert [_score(r) for r in ("7", " Score: 9 ", "7/10", "3 out of 10", "10")] == [7, 9, 7, 3, 10]
    # what the 135M judge wrote on the QA bank: a copy of an entry ("1 relation", "1. Start")
    copied = "<experience>\nQuestion form: Where did the director of film A die?\nKind: chain (1"
    assert [_score(r) for r in (copied, "", "none", "11", "4 or 5", "about 12/10")] == [None] * 6


@pytest.mark.parametrize("reply", ["", "  \n", "<answer> </answer>"])
def test_an_empty_reply_deletes_nothing_it_is_refused(bank_url, reply: str) -> None:
    """Found by fuzzing (tests/fuzz_targets.py): an empty fused or rebuilt entry was a revision
    with an empty payload, that is a deletion, which the gate never sees."""
    before = [(e.sid, e.version, e.payload) for e in open_bank(bank_url).entries()]
    out = _fuse(bank_url, _chat(fuse=reply), A, [str(A), str(B)])
    assert (out["update"]["outcome"], out["update"]["reason"]) == ("rejected", "empty")
    app = build_decompose_graph(_chat(judge="7", rebuild=reply)).compile()
    bank = open_bank(bank_url)
    bank.insert(C, FUSED)
    out = app.invoke({"sid": str(C)}, context={"bank_url": bank_url})
    assert (out["update"]["outcome"], out["update"]["reason"]) == ("rejected", "empty")
    after = [(e.sid, e.version, e.payload) for e in open_bank(bank_url).entries()]
    assert after == sorted([*before, (str(C), 1, FUSED)])
    assert [e.outcome for e in bank.events()][-3:] == ["rejected", "inserted", "rejected"]


def test_a_composition_may_not_copy_another_entry_over_its_target(bank_url) -> None:
    """Found by fuzzing at 10,000 examples: the gate's ``copied`` rule is an insert rule, so a
    rebuilt target could become a verbatim copy of a neighbour it read."""
    bank = open_bank(bank_url)
    bank.insert(C, FUSED)
    app = build_decompose_graph(_chat(judge="7", rebuild=MILK)).compile()
    out = app.invoke({"sid": str(C)}, context={"bank_url": bank_url})
    assert (out["update"]["outcome"], out["update"]["reason"]) == ("rejected", "copied")
    assert [v.payload for v in bank.history(C)] == [FUSED]
    # fusing onto A: a copy of B over it is refused the same way
    copy_b = _fuse(bank_url, _chat(fuse=MILK), A, [str(A), str(B)])
    assert (copy_b["update"]["outcome"], copy_b["update"]["reason"]) == ("rejected", "copied")
    assert [v.payload for v in bank.history(A)] == [EGGS]
