"""The fusion experiment: sources by similarity, a gated fusion per task, conditions, resume."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from genmem.envs.gsm8k import GSM8KEnvironment
from genmem.experiments.fusion import (
    FUSION_CONDITIONS,
    FusionConfig,
    fusion_table,
    run_fusion,
)
from genmem.experiments.plots import plot_fusion
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator, by_role, finish_reply

A, B, FAR, C = SID((3, 0, 7, 1)), SID((3, 0, 7, 2)), SID((9, 1, 1, 1)), SID((3, 0, 5, 0))
EGGS = "Ducks lay eggs each day: take away the eggs eaten at breakfast before you sell."
MARKET = "At the market, price what is left each day: eggs left times the price per egg."
FENCE = "Fence posts along a road: count the gaps, then add one post."
FUSED = (
    "Problem type: a daily amount, part used at home, the rest sold.\n"
    "Procedure: 1. Take the eggs used at breakfast and in baking from the day's eggs. "
    "2. Multiply what is left by the price per egg at the market.\n"
    "Check: the sold eggs are fewer than the laid eggs."
)


def _solve(messages: list[BaseMessage]) -> str:
    """As the coordinator, solves the ducks problem (18) only when its support names the eggs
    used in baking *and* the price per egg at the market, which neither source alone does but
    the fusion does."""
    text = "\n".join(str(m.content) for m in messages)
    knows = "in baking" in text and "price per egg at the market" in text
    return finish_reply("18" if "Janet" in text and knows else "0")


def fusion_fake(fused: str = f'<experience name="C">\n{FUSED}\n</experience>') -> FakeChat:
    """Fuses with ``fused`` (wrapped as the prompt's blocks are); solves with :func:`_solve`."""
    return FakeChat(reply=by_role(team=_solve, fuse=fused))


@pytest.fixture
def bank_url(tmp_path) -> str:
    bank = SQLiteBankStore(tmp_path / "bank.db").create_bank(
        "gsm", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    for sid, text in ((A, EGGS), (B, MARKET), (FAR, FENCE)):
        bank.insert(sid, text)
    return f"sqlite:///{tmp_path}/bank.db?bank=gsm"


def _run(bank_url: str, out, chat: FakeChat, **kwargs: Any):
    config = FusionConfig(max_steps=1, **kwargs)
    env = GSM8KEnvironment(calculator=False)
    return run_fusion(
        env, bank_url, config, out=out, chat=chat, sid_generator=FixedGenerator([C]), limit=1,
        progress=False,
    )  # fmt: skip


def test_the_fused_entry_is_gated_written_to_a_scratch_copy_and_compared(
    tmp_path, bank_url, errorbars
) -> None:
    before = open_bank(bank_url).stats()
    out, chat = tmp_path / "fusion", fusion_fake()
    report = _run(bank_url, out, chat)

    pair = json.loads((out / "pairs.jsonl").read_text())
    assert sorted(pair["sources"]) == sorted([str(A), str(B)])  # the two sharing words
    assert pair["fused"] == FUSED  # the copied <experience> wrapper is gone
    assert (pair["sid"], pair["outcome"], pair["addresser"]) == (str(C), "inserted", "custom")
    assert open_bank(bank_url).stats() == before  # --bank never changes
    assert pair["scratch"].startswith(f"sqlite:///{(out / 'scratch.db').resolve()}?bank=")
    assert open_bank(pair["scratch"]).get(C).payload == FUSED

    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert Counter(r["condition"] for r in records) == dict.fromkeys(FUSION_CONDITIONS, 1)
    by = {r["condition"]: r for r in records}
    assert by["none"]["support"] is None
    assert by["a"]["support"] == f"Entry 1:\n{pair['payloads'][0]}"
    assert by["both"]["support"].count("Entry ") == 2
    assert by["fused"]["support"] == f"Entry 1:\n{FUSED}"
    assert {c for c, r in by.items() if r["score"] == 1.0} == {"fused", "unchecked"}

    assert report.fusions == {"inserted": 1} and report.refusals == {}
    assert report.conditions["fused"].mean == 1.0 and report.conditions["both"].mean == 0.0
    assert list(report.fused_vs) == ["a", "b", "best_source", "both", "none"]
    assert all(d.wins == 1 and d.diff == 1.0 for d in report.fused_vs.values())
    assert "fused minus" in fusion_table(report)
    plot_fusion(report, out / "fusion.png")
    assert (out / "fusion.png").stat().st_size > 0 and len(errorbars) == 1

    # a rerun into the same folder fuses and solves nothing again
    again = _run(bank_url, out, chat)
    assert len(chat.texts("fuse")) == 1
    assert len((out / "records.jsonl").read_text().splitlines()) == len(records)
    assert again.conditions == report.conditions


def test_a_refused_fusion_leaves_fused_without_support_and_unchecked_with_the_text(
    tmp_path, bank_url
) -> None:
    joined = fusion_fake(f"{EGGS} {MARKET}")  # the two sources put together: not a fusion
    report = _run(bank_url, tmp_path, joined, conditions=("none", "unchecked"))
    assert report.fusions == {"rejected": 1} and report.refusals == {"copied": 1}
    records = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    by = {r["condition"]: r for r in records}
    assert set(by) == {"none", "fused", "unchecked"}  # fused always runs
    assert by["fused"]["support"] is None
    assert by["unchecked"]["support"] == f"Entry 1:\n{EGGS} {MARKET}"
    assert list(report.fused_vs) == ["none"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"conditions": ("fused", "c")}, "unknown conditions"),
        ({"pair_by": "bm25"}, "tfidf or dense"),
        ({"addresser": "magic"}, "addresser"),
        ({"max_steps": 0}, ">= 1"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FusionConfig(**kwargs)
